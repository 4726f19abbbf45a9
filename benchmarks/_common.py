"""Shared helpers of the benchmark scripts: thread limits, timing, cross-validation, tables, README sections.

Every script in ``benchmarks/`` imports this module (it sits next to them, so ``python benchmarks/x.py`` finds it).
Nothing here is part of the ``rffor`` package.

- :func:`limit_blas_threads` pins BLAS/OpenMP to a fixed number of threads. On a shared machine an unpinned BLAS
  spawns one thread per core in every process and the timings of small problems become 10-100x slower and noisy;
  the scripts run single-threaded unless told otherwise (``--threads``).
- :func:`cv_select` is K-fold cross-validation over a list of parameter dictionaries with the *median* of the fold
  scores (MATH.md §7: model selection on corrupted data uses the median, not the mean).
- :func:`cv_select_widening` is the same cross-validation over named axes (:class:`Axis`) whose grids widen past
  an edge where the selection lands, for every method alike, and says for each axis whether the selected value
  is interior, at a natural limit, or at an edge past which the score is flat (:data:`RULES`: the selection rules
  of the studies). :func:`select_widening` is that rule for any scoring of the candidates (e.g. a warm-started λ
  path, or a score that is not one of the rules). :func:`format_grid` and :func:`edge_counts` print the grids and
  the edge statuses.
- :func:`write_section` replaces the block between ``<!-- evidence:KEY -->`` and ``<!-- /evidence:KEY -->`` in
  ``benchmarks/README.md`` (appending it under "## Evidence" the first time), so reruns replace their own tables
  and leave the rest of the file alone.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import platform
import re
import shlex
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
from sklearn.model_selection import KFold

from rffor import metrics
from rffor.edge_rule import Axis, Selection, select_widening  # the project's one edge rule, re-exported

BENCH_DIR = Path(__file__).resolve().parent
README = BENCH_DIR / "README.md"
FIGURES = BENCH_DIR / "figures"
RESULTS = BENCH_DIR / "results"

__all__ = [
    "ForeignCPU",
    "BENCH_DIR",
    "FIGURES",
    "README",
    "RESULTS",
    "Axis",
    "LAM_FLOOR",
    "RULES",
    "Selection",
    "add_common_args",
    "args_record",
    "run_args",
    "run_line",
    "paired_verdict",
    "best_and_ties",
    "cv_select_widening",
    "select_widening",
    "selection_score",
    "choose_by_cv",
    "edge_counts",
    "format_grid",
    "widening_text",
    "figure_path",
    "curve_median_mse",
    "cv_select",
    "grid_product",
    "fmt",
    "limit_blas_threads",
    "machine_info",
    "markdown_table",
    "mean_std",
    "nmse",
    "provenance",
    "save_json",
    "open_results",
    "save_progress",
    "runs_text",
    "timed",
    "write_section",
    "write_zarr_blocks",
]


# ---------------------------------------------------------------------------------------------------------------
# environment
# ---------------------------------------------------------------------------------------------------------------


def limit_blas_threads(n_threads: int):
    """Limit BLAS and OpenMP thread pools of this process to ``n_threads`` (returns the threadpoolctl handle)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=int(n_threads))


def add_common_args(parser, *, quick_help: str = "a small run for a smoke test (minutes)") -> None:
    """Arguments every benchmark script takes: --quick, --seed, --threads, --no-readme, --out."""
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--seed", type=int, default=0, help="base seed of every random draw (default 0)")
    parser.add_argument(
        "--threads", type=int, default=1, help="BLAS threads (default 1: stable timings on a shared machine)"
    )
    parser.add_argument("--no-readme", action="store_true", help="do not write the tables into benchmarks/README.md")
    parser.add_argument("--readme", type=Path, default=README, help="README to update (default benchmarks/README.md)")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:  # pragma: no cover - non-Linux
        pass
    return platform.processor() or platform.machine()


def machine_info(n_threads: int | None = None) -> dict:
    """CPU, cores, memory, load, library versions and the date: what a reader needs to weigh a timing."""
    import scipy
    import sklearn

    import rffor

    try:
        load = os.getloadavg()
    except OSError:  # pragma: no cover
        load = (float("nan"),) * 3
    try:
        mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        mem_gib = float("nan")
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": round(mem_gib, 1),
        "load_avg_1_5_15": [round(x, 2) for x in load],
        "blas_threads": n_threads,
        "nice": os.nice(0),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "rffor": rffor.__version__,
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def provenance(info: dict, argv: Sequence[str] | None = None, *, load_end: Sequence[float] | None = None) -> str:
    """Markdown lines with the command, the machine and the date of a run."""
    argv = sys.argv if argv is None else argv
    script = Path(argv[0])
    try:
        script = script.resolve().relative_to(BENCH_DIR.parent)
    except ValueError:
        pass
    cmd = " ".join(["python", str(script), *map(shlex.quote, argv[1:])])
    load = "/".join(f"{x:g}" for x in info["load_avg_1_5_15"])
    if load_end is not None:
        load += " at the start, " + "/".join(f"{x:g}" for x in load_end) + " at the end"
    return (
        f"Command: `{cmd}`  \n"
        f"Machine: {info['cpu']}, {info['cores']} cores, {info['memory_gib']} GiB, shared with other jobs "
        f"(load average 1/5/15 min: {load}); BLAS threads: {info['blas_threads']}"
        + (f", CPU priority nice {info['nice']}" if info.get("nice") is not None else "")
        + "; "
        f"Python {info['python']}, NumPy {info['numpy']}, SciPy {info['scipy']}, scikit-learn "
        f"{info['scikit-learn']}, rffor {info['rffor']}.  \n"
        f"Date: {info['date']}."
    )


def args_record(args) -> dict:
    """A run's parsed arguments (``vars(args)``, after any ``--quick`` overrides) as JSON values, for its results
    file: what a report rebuilt later (``--report-only``) must state instead of its own invocation's defaults."""
    out = {}
    for k, v in vars(args).items():
        if isinstance(v, Path):
            v = str(v)
        elif isinstance(v, (list, tuple)):
            v = [str(x) if isinstance(x, Path) else x for x in v]
        out[k] = v
    return out


def run_args(run: dict, parser) -> dict:
    """The arguments of the run that wrote the results ``run`` (a results file's dict, or one entry of its list of
    runs): its recorded ``args`` (:func:`args_record`; older files stored them as strings, read back here), else its
    recorded ``argv`` parsed again by the script's ``parser`` (arguments it did not give then take today's defaults).

    Raises
    ------
    ValueError
        If ``run`` records neither ``args`` nor ``argv``: a report cannot say what the run was given.
    """
    import ast

    if run.get("args") is not None:
        out = {}
        for k, v in run["args"].items():
            if isinstance(v, str):
                try:
                    v = ast.literal_eval(v)
                except (ValueError, SyntaxError):
                    pass
            out[k] = v
        return out
    if run.get("argv"):
        return vars(parser.parse_args(list(run["argv"][1:])))
    raise ValueError("run must record its 'args' or its 'argv' (a results file saved by the script)")


def run_line(run: dict) -> str:
    """One line for a run of a merged report: its command, BLAS threads, CPU priority, date and load at its start."""
    info = run.get("info", {})
    cmd = " ".join(["python", *map(shlex.quote, run.get("argv") or ["?"])])
    nice = info.get("nice")
    load = info.get("load_avg_1_5_15")
    return (
        f"`{cmd}` (BLAS threads {info.get('blas_threads', '?')}"
        + (f", nice {nice}" if nice is not None else "")
        + f"; {info.get('date', '?')}"
        + (f"; load average 1/5/15 min at its start {'/'.join(f'{x:g}' for x in load)}" if load else "")
        + ")"
    )


def paired_verdict(a: Sequence[float], b: Sequence[float]) -> str:
    """The verdict "better", "worse" or "tie" for scores ``a`` against ``b`` (lower is better) on the same draws
    (splits): the mean of the paired differences a − b against its standard error (sample standard deviation /
    √draws); a mean difference within one standard error is a tie.

    Raises
    ------
    ValueError
        If ``a`` and ``b`` do not have the same length ≥ 2 or hold non-finite values.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or a.size < 2 or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError(f"a and b must be finite scores on the same ≥ 2 draws, got shapes {a.shape}, {b.shape}")
    d = a - b
    se = d.std(ddof=1) / math.sqrt(d.size)
    mean = d.mean()
    if mean < -se:
        return "better"
    if mean > se:
        return "worse"
    return "tie"


def best_and_ties(scores: dict[str, Sequence[float]]) -> tuple[str, set[str]]:
    """The method of lowest mean score and every method tied with it (:func:`paired_verdict`: its mean paired
    difference to the best within one standard error). ``scores``: ``{method: scores on the same draws}``."""
    means = {k: float(np.mean(v)) for k, v in scores.items()}
    best = min(means, key=means.get)
    return best, {k for k, v in scores.items() if k != best and paired_verdict(v, scores[best]) == "tie"}


# ---------------------------------------------------------------------------------------------------------------
# timing and cross-validation
# ---------------------------------------------------------------------------------------------------------------


def _busy_cpu_seconds() -> float:
    """CPU seconds the whole machine spent busy since boot (``/proc/stat``: all but idle and iowait)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds() -> float:
    """CPU seconds of this process, its reaped children and its live descendants (e.g. Dask worker processes)."""
    import psutil

    t = os.times()
    own = t.user + t.system + t.children_user + t.children_system
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            ct = child.cpu_times()
            own += ct.user + ct.system
    return own


class ForeignCPU:
    """The CPU that *other* processes used while a block ran, in cores (time average).

    A load average cannot tell a run's own worker processes from other jobs: a 2-worker fit on 2 cores drives it
    to 2 by itself. This counts the machine's busy CPU time (``/proc/stat``) minus this process tree's, so a
    timing can be published when the rest of the machine stayed (nearly) idle. Linux only; ``cores`` is NaN
    elsewhere.
    """

    def __enter__(self) -> ForeignCPU:
        self.cores = float("nan")
        try:
            self._start = (_busy_cpu_seconds(), _own_cpu_seconds(), time.perf_counter())
        except (OSError, ImportError, ValueError):  # pragma: no cover - non-Linux
            self._start = None
        return self

    def __exit__(self, *exc) -> None:
        if self._start is None:  # pragma: no cover
            return
        busy0, own0, t0 = self._start
        wall = time.perf_counter() - t0
        foreign = (_busy_cpu_seconds() - busy0) - (_own_cpu_seconds() - own0)
        self.cores = max(foreign, 0.0) / wall if wall > 0 else float("nan")


def timed(fn: Callable, *args, **kwargs):
    """Run ``fn(*args, **kwargs)``; return ``(result, wall seconds)``."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def nmse(Y_true: np.ndarray, Y_pred: np.ndarray) -> float:
    """NMSE of MATH.md §7: (1/(n m)) Σ (y_ij − ŷ_ij)² over observed entries (NaN in Y_true skipped):
    :func:`rffor.metrics.nmse`, which checks the shapes before subtracting (predictions of shape (n,) against
    curves (n, m) used to broadcast to an (n, n) residual and score a wrong number silently).

    Raises
    ------
    ValueError
        If ``Y_pred`` does not have the shape of ``Y_true``.
    """
    return metrics.nmse(Y_true, Y_pred)


FitPredict = Callable[[dict, np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def curve_median_mse(Y_true: np.ndarray, Y_pred: np.ndarray) -> float:
    """Median over curves of the per-curve mean squared error: a validation score that ignores a minority of
    corrupted validation curves (the fold score of the studies' selection rule on corrupted data, :data:`RULES`)."""
    return metrics.curve_median_mse(Y_true, Y_pred)  # shapes checked (ValueError), as nmse


def cv_select(
    fit_predict: FitPredict,
    grid: Sequence[dict],
    X: np.ndarray,
    Y: np.ndarray,
    *,
    n_splits: int = 5,
    random_state: int = 0,
    aggregate: Callable[[np.ndarray], float] = np.median,
    score: Callable[[np.ndarray, np.ndarray], float] | dict[str, Callable] = nmse,
) -> tuple[dict, np.ndarray]:
    """K-fold cross-validation: the parameters with the lowest ``aggregate`` (default median) of fold scores.

    Parameters
    ----------
    fit_predict : callable(params, X_train, Y_train, X_valid) -> Y_valid_hat
    grid : sequence of dict
        Candidate parameters.
    X, Y : arrays of shape (n, d), (n, m)
        Training data (corrupted if the experiment corrupts it: the validation folds are corrupted too).
    n_splits, random_state : int
        Shuffled KFold; the same folds for every candidate.
    aggregate : callable
        Reduces the fold scores of one candidate to one number (median: robust to a fold full of outliers).
    score : callable(Y_true, Y_pred) -> float, or dict of them
        Lower is better (default NMSE). With a dict, every score is computed from the same fits and the
        selection is made for each.

    Returns
    -------
    best : dict
        The selected parameters (first one on ties, in grid order); with a dict of scores, a dict
        ``{score name: parameters}``.
    scores : ndarray of shape (len(grid), n_splits), or a dict of them
        Every fold score; a fit that raises LinAlgError / ValueError or predicts non-finite values scores +inf.
    """
    scorers = score if isinstance(score, dict) else {"_": score}
    folds = list(KFold(n_splits=n_splits, shuffle=True, random_state=random_state).split(X))
    table = {k: np.full((len(grid), n_splits), np.inf) for k in scorers}
    for g, params in enumerate(grid):
        for k, fold_scores in _fold_scores(fit_predict, params, X, Y, folds, scorers).items():
            table[k][g] = fold_scores
    best = {}
    for k, sc in table.items():
        agg = np.array([aggregate(s) for s in sc])
        best[k] = dict(grid[int(np.argmin(agg))])
    if isinstance(score, dict):
        return best, table
    return best["_"], table["_"]


def _fold_scores(fit_predict: FitPredict, params: dict, X, Y, folds, scorers: dict) -> dict[str, np.ndarray]:
    """Every scorer's score of one candidate on every fold; a fit that raises LinAlgError / ValueError /
    FloatingPointError or predicts non-finite values scores +inf (e.g. a singular factorisation)."""
    out = {k: np.full(len(folds), np.inf) for k in scorers}
    for f, (tr, va) in enumerate(folds):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                Y_hat = fit_predict(params, X[tr], Y[tr], X[va])
            except (np.linalg.LinAlgError, ValueError, FloatingPointError):
                continue
        if np.all(np.isfinite(Y_hat)):
            for k, fn in scorers.items():
                out[k][f] = fn(Y[va], Y_hat)
    return out


def grid_product(**axes: Iterable) -> list[dict]:
    """All combinations of named axes, as a list of dicts (the last axis varies fastest)."""
    out: list[dict] = [{}]
    for name, values in axes.items():
        out = [{**d, name: v} for d in out for v in values]
    return out


# ---------------------------------------------------------------------------------------------------------------
# grids that widen at their edges
# ---------------------------------------------------------------------------------------------------------------

#: Selection rules of the studies: (fold score, reduction over the folds), lower is better. "mean": the usual
#: K-fold rule (a fold's NMSE, mean over folds), for training curves without outliers. "robust": a fold scores the
#: median over its validation curves of the per-curve MSE, median over folds (MATH.md §7, paper 000 §5.1: with
#: outliers in every validation fold a mean is dominated by them), for corrupted training curves. "fold-nmse": a
#: fold's NMSE, median over folds (its corrupted curves count in full): a diagnostic.
RULES: dict[str, tuple[Callable, Callable]] = {
    "mean": (nmse, np.mean),
    "robust": (curve_median_mse, np.median),
    "fold-nmse": (nmse, np.median),
}

#: The smallest λ any study tries (a natural limit of its λ axis, and λ·n·m of α's): the condition number of (P)'s
#: regularised Gram matrix grows like 1/(λ m), about 1e12 here for m = 100, where float64 solvers keep a few digits.
#: On the noise-free linear synthetic data a robust loss fits the inlying curves exactly, and its CV score keeps
#: falling as λ → 0 down to that floor.
LAM_FLOOR = 1e-14

#: how hyperparameter names are printed
PARAM_LABEL = {"lam": "λ", "kappa": "κ", "epsilon": "ε", "alpha": "α", "n_components": "components"}


def cv_select_widening(
    fit_predict: FitPredict,
    axes: dict[str, Axis],
    X: np.ndarray,
    Y: np.ndarray,
    *,
    rules: Sequence[str] = ("mean",),
    n_splits: int = 5,
    random_state: int = 0,
    max_widen: int = 6,
    flat: float = 0.01,
) -> Selection:
    """K-fold cross-validation over the product of ``axes`` that widens an axis past any edge a selection lands on.

    Each rule of :data:`RULES` scores every candidate on the same shuffled folds (``fit_predict`` once per candidate
    and fold, every rule from the same fits) and the grids widen by :func:`select_widening`'s edge rule: while a
    rule's selection sits at the low or high end of an axis, that axis gets one more value past that end
    (:meth:`Axis.widen`, combined with every value of the other axes); a side stops widening at the axis' natural
    limit (status "low limit" / "high limit") or when one widening improved the rule's best score by less than
    ``flat`` (relative; status "flat low" / "flat high"); otherwise the run fails loudly (RuntimeError after
    ``max_widen`` widenings of one side).

    Parameters
    ----------
    fit_predict : callable(params, X_train, Y_train, X_valid) -> Y_valid_hat
    axes : dict of Axis
        The hyperparameters (keys: parameter names, passed to ``fit_predict`` in ``params``).
    X, Y : arrays of shape (n, d), (n, m)
    rules : sequence of str
        Keys of :data:`RULES`; every rule is scored from the same fits, and the grid widens for each.
    n_splits, random_state : int
        Shuffled KFold; the same folds for every candidate.
    max_widen : int
        Widenings allowed per axis and side before the run fails.
    flat : float
        Relative improvement below which the score counts as flat past an edge.

    Returns
    -------
    Selection
    """
    folds = list(KFold(n_splits=n_splits, shuffle=True, random_state=random_state).split(X))
    scorers = {r: RULES[r][0] for r in rules}

    def evaluate(candidates: list[dict]) -> list[dict]:
        return [_fold_scores(fit_predict, params, X, Y, folds, scorers) for params in candidates]

    return select_widening(evaluate, axes, reduce={r: RULES[r][1] for r in rules}, max_widen=max_widen, flat=flat)


def selection_score(sel: Selection, rule: str) -> float:
    """The score (reduced over the folds) of ``rule``'s selected candidate: what a choice between separately
    selected models (e.g. one per loss, on the same folds and rule) compares, as any other hyperparameter."""
    return float(sel.scores[rule][tuple(sel.best[rule][a] for a in sel.grids)])


def choose_by_cv(scores: dict[str, float]) -> str:
    """The key of the lowest validation score (the first in order on ties); a choice made on held-out data only.

    Raises
    ------
    ValueError
        If ``scores`` is empty or no score is finite.
    """
    finite = {k: v for k, v in scores.items() if np.isfinite(v)}
    if not finite:
        raise ValueError(f"scores must hold at least one finite validation score, got {scores}")
    return min(finite, key=finite.get)


def _grids_text(grids: dict) -> str:
    return "; ".join(f"{PARAM_LABEL.get(a, a)} {format_grid(g)}" for a, g in grids.items())


def format_grid(values: Iterable) -> str:
    """A grid as printed beside the results: ``{1e-09, 1e-08, 1e-07}`` (3 significant digits)."""
    return "{" + ", ".join(f"{v:.3g}" for v in values) + "}"


def edge_counts(edges: Sequence[dict]) -> str:
    """How many selections (one ``{axis: status}`` per draw, :class:`Selection`'s ``edges[rule]``) were not
    interior, per axis and status: ``"interior 10/10"``, or e.g. ``"λ flat low 2/10; κ high limit 1/10"``."""
    n = len(edges)
    off = Counter((a, s) for e in edges for a, s in e.items() if s != "interior")
    if not off:
        return f"interior {n}/{n}"
    return "; ".join(f"{PARAM_LABEL.get(a, a)} {s} {c}/{n}" for (a, s), c in sorted(off.items()))


def widening_text(start: dict[str, Axis], grids: Sequence[dict]) -> str:
    """The starting grid of every axis and how far the selections widened it (``grids``: the
    :class:`Selection` grids of every selection made with these axes)."""
    parts = []
    for a, axis in start.items():
        g0 = axis.start()
        lo = [g[a][0] for g in grids if g[a][0] < g0[0]]
        hi = [g[a][-1] for g in grids if g[a][-1] > g0[-1]]
        text = f"{PARAM_LABEL.get(a, a)} ∈ {format_grid(g0)}"
        more = []
        if lo:
            more.append(f"down to {min(lo):.3g} in {len(lo)}")
        if hi:
            more.append(f"up to {max(hi):.3g} in {len(hi)}")
        if more:
            text += f" (widened {' and '.join(more)} of {len(grids)} selections)"
        parts.append(text)
    return ", ".join(parts)


# ---------------------------------------------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------------------------------------------


def fmt(x: float, digits: int = 3) -> str:
    """Compact number: 3 significant digits, scientific below 1e-3."""
    if x is None or not np.isfinite(x):
        return "—"
    if x == 0:
        return "0"
    if abs(x) < 1e-3 or abs(x) >= 1e5:
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"


def mean_std(values: Sequence[float], digits: int = 3) -> str:
    """``mean ± std`` (population std over draws) of finite values."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return "—"
    return f"{fmt(v.mean(), digits)} ± {fmt(v.std(), digits - 1 if digits > 1 else 1)}"


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence]) -> str:
    """A GitHub-flavoured Markdown table."""
    lines = ["| " + " | ".join(map(str, headers)) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    return "\n".join(lines)


def write_section(key: str, body: str, readme: Path = README, *, first: bool = False) -> None:
    """Replace (or append) the block ``<!-- evidence:KEY --> … <!-- /evidence:KEY -->`` in ``readme``.

    The first block written creates a "## Evidence" heading at the end of the file (and the file itself if
    absent). Only the text between this key's markers ever changes. A new block goes after the last evidence
    block, or with ``first=True`` before the first one.
    """
    start, end = f"<!-- evidence:{key} -->", f"<!-- /evidence:{key} -->"
    block = f"{start}\n{body.strip()}\n{end}"
    readme = Path(readme)
    text = readme.read_text() if readme.exists() else "# rffor benchmarks\n"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    elif first and "<!-- evidence:" in text:
        i = text.index("<!-- evidence:")
        text = text[:i] + block + "\n\n" + text[i:]
    else:
        if "<!-- evidence:" not in text and "## Evidence" not in text:
            text = text.rstrip() + "\n\n## Evidence\n\n" + _EVIDENCE_INTRO
        text = text.rstrip() + "\n\n" + block + "\n"
    readme.write_text(text)


_EVIDENCE_INTRO = (
    "Measured results of the scripts in this folder (issue 6): each block below is written by its script and "
    "replaced when the script runs again. Timings come from a shared 2-core machine: compare times within one "
    "table (same run, same load), not across tables.\n"
)


def figure_path(name: str, temporary: bool) -> Path:
    """Where a script writes its figure: ``benchmarks/figures/NAME.png``, or a temporary file for a --quick run or one
    with --no-readme (``temporary``): a smoke test or a run that leaves the README's block alone never replaces the
    block's figure."""
    if temporary:
        import tempfile

        return Path(tempfile.gettempdir()) / f"rffor_{name}_unpublished.png"
    return FIGURES / f"{name}.png"


def save_json(name: str, payload: dict) -> Path:
    """Write the raw results of a run to ``benchmarks/results/NAME.json`` (for replotting without rerunning)."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(payload, indent=1, default=_json_default))
    os.replace(tmp, path)  # atomic: a run killed while saving leaves the previous file whole
    return path


def open_results(name: str, fixed: dict, args, *, resume: bool) -> dict:
    """The results file ``RESULTS/NAME.json`` of a run that saves as it goes (:func:`save_progress`): with ``resume``
    the saved one (its ``records`` kept, the run added to its ``runs``), else a new one. ``fixed``: what every run
    writing into the file must share (e.g. the seed and the grids), checked against the saved file's.

    Returns
    -------
    dict
        ``{"fixed", "runs", "records"}``; the last entry of ``runs`` is this run's (argv, parsed arguments, machine
        state at its start).

    Raises
    ------
    SystemExit
        If the saved file was written with another ``fixed`` (or by a script that did not record it).
    """
    path = RESULTS / f"{name}.json"
    fixed = json.loads(json.dumps(fixed, default=_json_default))
    if resume and path.exists():
        saved = json.loads(path.read_text())
        if saved.get("fixed") != fixed:
            raise SystemExit(f"{path}: written with {saved.get('fixed')}, this run has {fixed}: move it away")
    else:
        saved = {"fixed": fixed, "runs": [], "records": []}
    saved["runs"].append({"argv": list(sys.argv), "args": args_record(args), "info": machine_info(args.threads)})
    return saved


def save_progress(name: str, saved: dict, seconds: float) -> None:
    """Save a results file of :func:`open_results` now (atomically), with this run's wall time so far and the load
    now."""
    saved["runs"][-1].update(wall_seconds=seconds, load_end=[round(x, 2) for x in os.getloadavg()])
    save_json(name, saved)


def runs_text(runs: Sequence[dict]) -> str:
    """The runs that wrote a results file (:func:`open_results`), one Markdown list item each: command, BLAS threads,
    CPU priority, date and load at its start (:func:`run_line`), load at its end and wall time."""
    return "\n".join(
        f"- {run_line(run)}"
        + (f", load at its end {'/'.join(f'{x:g}' for x in run['load_end'])}" if run.get("load_end") else "")
        + (f", {run['wall_seconds'] / 60:.1f} min" if run.get("wall_seconds") is not None else "")
        for run in runs
    )


def _json_default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return repr(o)


def write_zarr_blocks(
    path: Path, n: int, chunk_rows: int, block: Callable[[int, int], tuple[np.ndarray, np.ndarray]], d: int, m: int
):
    """A Zarr store of n curves generated chunk by chunk by Dask (threads; memory bounded by a few chunks).

    ``block(k, rows)`` returns chunk k's ``(X, Y)`` (float32, shapes (rows, d) and (rows, m)), computed once per
    chunk. The output grid is ``linspace(0, 1, m)``. Returns ``(Dataset, seconds)``.
    """
    import dask
    import dask.array as da

    import rffor.data

    sizes = [min(chunk_rows, n - s) for s in range(0, n, chunk_rows)]
    parts = [dask.delayed(block, nout=2)(k, rows) for k, rows in enumerate(sizes)]
    X = da.concatenate([da.from_delayed(x, (r, d), np.float32) for (x, _), r in zip(parts, sizes, strict=True)])
    Y = da.concatenate([da.from_delayed(y, (r, m), np.float32) for (_, y), r in zip(parts, sizes, strict=True)])
    tic = time.perf_counter()
    with dask.config.set(scheduler="threads", num_workers=2):
        ds = rffor.data.write(path, X, Y, np.linspace(0, 1, m), chunks=chunk_rows, overwrite=True)
    return ds, time.perf_counter() - tic
