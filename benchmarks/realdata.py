"""Real curves: every rffor loss, with and without injected outliers, against KernelRidge and scikit-fda's FPLS.

Data: the gait data (hip-angle curve → knee-angle curve of 39 boys through one gait cycle, 20 points each;
:func:`rffor.realdata.load_gait`, shipped in the ``fdatools`` wheel). For each of ``--splits`` random splits
(29 training / 10 test boys), the training knee curves are left clean or 20% of them are corrupted with the outlier
Types 1, 2, 3 of MATH.md §7 (applied to the angles divided by their overall standard deviation, ≈ 22°, the scale
the corruptions were designed for; Type 3 with ξ = 0.3). Every method selects its hyperparameters by 5-fold
cross-validation on the training curves, the same folds and rule for all: on corrupted curves the median of the
fold scores, a fold scoring the median over its validation curves of the per-curve MSE (paper 000 §5.1 replaces the
mean by the median on corrupted data; the validation curves are corrupted too), on clean curves the usual mean
rule; every grid starts on the same effective range and widens where a selection is at an edge
(``cv_select_widening`` in _common.py). Models are scored on the clean test curves: mean squared error per grid
point in degrees² (MATH.md §7's NMSE in the original units).

Preprocessing uses training statistics only (as ``examples/gait_outliers.py``): outputs centred on the pointwise
median training curve and divided by 1.4826 × MAD; inputs centred and divided by their standard deviation.
Kernels: Gaussian γ_X = 0.02 on the standardised 20-point hip curve, Gaussian γ_Θ = 100 on the cycle [0, 1].

Writes the ``realdata`` block of benchmarks/README.md and benchmarks/results/realdata.json.

Usage::

    python benchmarks/realdata.py          # 20 splits (see the README block for its time)
    python benchmarks/realdata.py --quick
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    PARAM_LABEL,
    RESULTS,
    Axis,
    add_common_args,
    choose_by_cv,
    cv_select_widening,
    edge_counts,
    fmt,
    limit_blas_threads,
    markdown_table,
    mean_std,
    nmse,
    open_results,
    paired_verdict,
    provenance,
    runs_text,
    save_progress,
    selection_score,
    widening_text,
    write_section,
)
from sklearn.kernel_ridge import KernelRidge  # noqa: E402

from rffor import FunctionalRegressor  # noqa: E402
from rffor.datasets import add_outliers  # noqa: E402
from rffor.kernels import Gaussian  # noqa: E402
from rffor.losses import EpsilonInsensitive, Huber, Square  # noqa: E402

GAMMA_X, GAMMA_THETA = 0.02, 100.0
SETTINGS = (("clean", None), ("Type 1", (1, {})), ("Type 2", (2, {})), ("Type 3", (3, {"xi": 0.3})))


def mse(Y_true, Y_pred) -> float:
    """Mean squared error per grid point (MATH.md §7's NMSE), in the units of the curves."""
    return nmse(Y_true, Y_pred)


def robust_scaling(Y):
    center = np.median(Y, axis=0)
    spread = 1.4826 * float(np.median(np.abs(Y - center)))
    return center, spread if spread > 0 else 1.0


class Standardized:
    """Fit a model on standardised curves (training statistics only) and predict in the original units."""

    def __init__(self, model):
        self.model = model

    def fit(self, X, Y):
        self.x_mean, self.x_std = X.mean(axis=0), X.std()
        self.center, self.spread = robust_scaling(Y)
        self.model.fit((X - self.x_mean) / self.x_std, (Y - self.center) / self.spread)
        return self

    def predict(self, X):
        return self.model.predict((X - self.x_mean) / self.x_std) * self.spread + self.center


class _Rffor:
    def __init__(self, loss, lam, theta, tol):
        self.est = FunctionalRegressor(
            loss, kernel_x=Gaussian(GAMMA_X), kernel_theta=Gaussian(GAMMA_THETA), lam=lam, solver="admm", tol=tol
        )
        self.theta = theta

    def fit(self, X, Y):
        self.est.fit(X, Y, self.theta)
        return self

    def predict(self, X):
        return self.est.predict(X)


class _FPLS:
    def __init__(self, n_components, theta):
        self.k, self.theta = n_components, theta

    def fit(self, X, Y):
        from skfda.ml.regression import FPLSRegression
        from skfda.representation.grid import FDataGrid

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.model = FPLSRegression(n_components=self.k).fit(
                FDataGrid(X, grid_points=self.theta), FDataGrid(Y, grid_points=self.theta)
            )
        return self

    def predict(self, X):
        from skfda.representation.grid import FDataGrid

        return self.model.predict(FDataGrid(X, grid_points=self.theta)).data_matrix[..., 0]


def methods(theta, quick: bool, n_train: int, x_rank: int):
    """name -> (axes, factory(params, tol)). Every method starts from the same effective range: rffor's λ grid for
    each loss, its image α = λ·n·m (MATH.md §5.1) and a decade more on each side for KernelRidge (rffor's square loss
    with an identity output kernel), FPLS components up to the rank the training folds allow; every grid widens
    where its selection is at an edge (``cv_select_widening``)."""
    lams = [1e-5, 1e-3, 1e-1] if quick else [1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1]
    kappas = [0.3, 1.0] if quick else [0.03, 0.1, 0.3, 1.0]
    epsilons = [0.1, 0.3] if quick else [0.03, 0.1, 0.3, 1.0]
    m = len(theta)
    alphas = [lam * n_train * m for lam in [lams[0] / 10, *lams, lams[-1] * 10]]
    lam = {"lam": Axis(tuple(lams))}

    def rf(make_loss):
        return lambda p, tol: Standardized(_Rffor(make_loss(p), p["lam"], theta, tol))

    out = {
        "rffor square": (lam, rf(lambda p: Square())),
        "rffor H_κ^1": ({**lam, "kappa": Axis(tuple(kappas), step=3)}, rf(lambda p: Huber(p["kappa"], 1))),
        "rffor H_κ^2": ({**lam, "kappa": Axis(tuple(kappas), step=3)}, rf(lambda p: Huber(p["kappa"], 2))),
        "rffor ℓ_ε^2": (
            {**lam, "epsilon": Axis(tuple(epsilons), step=3)},
            rf(lambda p: EpsilonInsensitive(p["epsilon"], 2)),
        ),
        "rffor ℓ_ε^∞": (
            {**lam, "epsilon": Axis(tuple(epsilons), step=3)},
            rf(lambda p: EpsilonInsensitive(p["epsilon"], math.inf)),
        ),
        # KernelRidge on the standardised outputs: α plays the role of λ n m with an identity output kernel
        "sklearn KernelRidge": (
            {"alpha": Axis(tuple(alphas))},
            lambda p, tol: Standardized(KernelRidge(alpha=p["alpha"], kernel="rbf", gamma=GAMMA_X)),
        ),
    }
    try:
        import skfda  # noqa: F401

        start = [1, 2, 3, 4, 6] if quick else [1, 2, 3, 4, 6, 8, 12]
        out["scikit-fda FPLSRegression"] = (
            {"n_components": Axis(tuple(k for k in start if k <= x_rank), step=1.5, low=1, high=x_rank, integer=True)},
            lambda p, tol: Standardized(_FPLS(p["n_components"], theta)),
        )
    except ImportError as exc:  # pragma: no cover - reported in the README
        print(f"scikit-fda unavailable: {exc}", file=sys.stderr)
    return out


#: the row of rffor with its loss chosen by cross-validation (:func:`loss_by_cv`)
LOSS_BY_CV = "rffor, loss by CV"


def loss_by_cv(split_records: list[dict]) -> dict:
    """rffor with its loss chosen like any other hyperparameter, for one split and setting: of the losses' separate
    selections (the same folds; :func:`_common.selection_score`), the one of lowest validation score, under each rule
    (``mse`` from the study's rule's choice, ``mse_alt`` from the fold-MSE rule's). Nothing here looks at test
    error."""
    rs = {r["method"]: r for r in split_records if r["method"].startswith("rffor ")}
    main = choose_by_cv({m: r["cv_score"] for m, r in rs.items()})
    alt = choose_by_cv({m: r["cv_score_alt"] for m, r in rs.items()})
    short = {m: m.removeprefix("rffor ") for m in rs}
    return {
        **{k: rs[main][k] for k in ("split", "setting", "rule", "params", "edges", "mse", "cv_score")},
        "method": LOSS_BY_CV,
        "loss": short[main],
        "loss_alt": short[alt],
        "params_alt": rs[alt]["params_alt"],
        "edges_alt": rs[alt]["edges_alt"],
        "mse_alt": rs[alt]["mse_alt"],
        "cv_score_alt": rs[alt]["cv_score_alt"],
    }


def corrupt(Y, corruption, seed):
    if corruption is None:
        return Y
    kind, kwargs = corruption
    scale = Y.std()
    Y_bad, _ = add_outliers(Y / scale, kind, 0.2, random_state=seed, **kwargs)
    return Y_bad * scale


def summary(records: list[dict], baselines: list[str]) -> list[list[str]]:
    """Rows (rule, setting, rffor loss by CV's mean test MSE, its ratio to rffor square's, the losses chosen, and a
    paired verdict against each baseline, :func:`_common.paired_verdict`) under the study's rule and the fold-MSE
    rule."""

    def get(method, setting, key):
        rs = sorted((r for r in records if r["method"] == method and r["setting"] == setting), key=lambda r: r["split"])
        return np.array([r[key] for r in rs], dtype=float)

    rows = []
    settings = list(dict.fromkeys(r["setting"] for r in records))
    for key, rule, loss_key in (("mse", "the study's", "loss"), ("mse_alt", "fold-MSE", "loss_alt")):
        for lab in settings if key == "mse" else [s for s in settings if s != "clean"]:
            ours = get(LOSS_BY_CV, lab, key)
            picks = Counter(r[loss_key] for r in records if r["method"] == LOSS_BY_CV and r["setting"] == lab)
            cells = []
            for b in baselines:
                theirs = get(b, lab, key)
                verdict = paired_verdict(ours, theirs) if len(ours) > 1 else "—"  # one split: no standard error
                cells.append(f"{verdict} ({fmt(theirs.mean())})")
            rows.append([
                rule, lab, fmt(ours.mean()), fmt(ours.mean() / get("rffor square", lab, key).mean(), 2),
                ", ".join(f"{k} {c}/{len(ours)}" for k, c in picks.most_common()), *cells,
            ])  # fmt: skip
    return rows


#: the summary of the block this one replaced (rffor's loss and the baseline picked by test error), for
#: :func:`changes_rows`
BEFORE = "realdata_before_issue25"


def changes_rows(records: list[dict], before: dict) -> tuple[list[list[str]], list[str]]:
    """Rows comparing the replaced block's summary (``before``: per rule and setting, the rffor loss and the baseline
    of lowest mean test MSE) with this run's *loss by CV* against that same baseline (paired over the splits,
    :func:`_common.paired_verdict`), and the (rule, setting) pairs whose verdict changed: before "lower" now not
    "better", or before "higher" now not "worse"."""
    rows, changed = [], []
    for b in before["summary"]:
        key = "mse" if b["rule"] == "the study's" else "mse_alt"
        rs = [r for r in records if r["setting"] == b["setting"]]
        ours = np.array([r[key] for r in sorted(rs, key=lambda r: r["split"]) if r["method"] == LOSS_BY_CV])
        theirs = np.array([r[key] for r in sorted(rs, key=lambda r: r["split"]) if r["method"] == b["baseline"]])
        square = np.mean([r[key] for r in rs if r["method"] == "rffor square"])
        if ours.size < 2 or ours.size != theirs.size:
            continue
        was = "lower" if b["ours_mse"] < b["baseline_mse"] else "higher"
        now = paired_verdict(ours, theirs)
        flip = (was == "lower") != (now == "better") or (was == "higher") != (now == "worse")
        if flip:
            changed.append(f"{b['rule']} rule, {b['setting']}")
        rows.append([
            b["rule"], b["setting"], b["baseline"],
            f"{b['ours'].removeprefix('rffor ')} {fmt(b['ours_mse'])} ({fmt(b['ours_mse'] / b['square_mse'], 2)}× "
            f"square), {was} than {fmt(b['baseline_mse'])}",
            f"{fmt(ours.mean())} ({fmt(ours.mean() / square, 2)}× square), {now} against {fmt(theirs.mean())}",
            "**yes**" if flip else "no",
        ])  # fmt: skip
    return rows, changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser)
    parser.add_argument("--splits", type=int, default=None, help="random train/test splits (default 20; 2 quick)")
    parser.add_argument(
        "--resume", action="store_true", help="keep the splits already saved (same seed), run only the missing ones"
    )
    parser.add_argument("--report-only", action="store_true", help="rebuild the README block from the saved results")
    args = parser.parse_args(argv)
    limit_blas_threads(args.threads)
    from rffor.realdata import load_gait

    gait = load_gait()
    splits = args.splits or (2 if args.quick else 20)
    n_train = 29
    name = "realdata_quick" if args.quick else "realdata"
    if args.report_only:
        saved = json.loads((RESULTS / f"{name}.json").read_text())
    else:
        saved = open_results(name, {"seed": args.seed, "quick": args.quick, "n_train": n_train}, args,
                             resume=args.resume)  # fmt: skip
        run_splits(gait, splits, n_train, args.quick, saved, name)
    text = report(gait, n_train, saved)
    print(text)
    if not (args.no_readme or args.quick):
        write_section("realdata", text, args.readme)
    return 0


def run_splits(gait, splits: int, n_train: int, quick: bool, saved: dict, out_name: str) -> None:
    """Splits 0 … ``splits`` − 1 not in ``saved`` yet, each saved when done (:func:`_common.save_progress`)."""
    seed = saved["fixed"]["seed"]
    done = {r["split"] for r in saved["records"]}
    t0 = time.perf_counter()
    for s in range(splits):
        if s in done:
            continue
        records = []
        ss = np.random.SeedSequence([seed, 31, s])
        split_seed, *seeds = ss.spawn(1 + len(SETTINGS))
        perm = np.random.default_rng(split_seed).permutation(gait.X.shape[0])
        tr, te = perm[:n_train], perm[n_train:]
        # FPLS: at most as many components as the inputs' rank and a training fold's size less one allow
        x_rank = min(int(np.linalg.matrix_rank(gait.X[tr])), n_train * 4 // 5 - 1)
        meths = methods(gait.theta, quick, n_train, x_rank)
        for (label, corruption), c_seed in zip(SETTINGS, seeds, strict=True):
            Y_tr = corrupt(gait.Y[tr], corruption, c_seed)
            cv_seed = int(c_seed.generate_state(1)[0])
            # no outliers: the usual mean rule; outliers: the robust rule (every method alike); fold-MSE: diagnostic
            rules = ("mean",) if corruption is None else ("robust", "fold-nmse")
            for name, (axes, make) in meths.items():

                def fit_predict(p, Xa, Ya, Xb, make=make):
                    return make(p, 1e-5).fit(Xa, Ya).predict(Xb)

                sel = cv_select_widening(fit_predict, axes, gait.X[tr], Y_tr, rules=rules, random_state=cv_seed)
                best = {"main": sel.best[rules[0]], "alt": sel.best[rules[-1]]}
                rec = dict(
                    split=s,
                    setting=label,
                    method=name,
                    params=best["main"],
                    params_alt=best["alt"],
                    rule=rules[0],
                    edges=sel.edges[rules[0]],
                    edges_alt=sel.edges[rules[-1]],
                    cv_score=selection_score(sel, rules[0]),
                    cv_score_alt=selection_score(sel, rules[-1]),
                    grids=sel.grids,
                    start_grids={a: ax.start() for a, ax in axes.items()},
                    widened=sel.widened,
                )
                for rule, key in (("main", "mse"), ("alt", "mse_alt")):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        Y_hat = make(best[rule], 1e-7).fit(gait.X[tr], Y_tr).predict(gait.X[te])
                    rec[key] = mse(gait.Y[te], Y_hat)
                records.append(rec)
            records.append(loss_by_cv([r for r in records if r["split"] == s and r["setting"] == label]))
        saved["records"] += records
        save_progress(out_name, saved, time.perf_counter() - t0)
        print(f"split {s + 1}/{splits} done", flush=True)
    save_progress(out_name, saved, time.perf_counter() - t0)


def report(gait, n_train: int, saved: dict) -> str:
    """The README block from a results file (:func:`_common.open_results`): every split it holds, the runs that
    wrote it with their own arguments and load."""
    records, runs = saved["records"], saved["runs"]
    splits = len({r["split"] for r in records})
    asked = max((run["args"].get("splits") or (2 if run["args"].get("quick") else 20)) for run in runs)
    wall = sum(run.get("wall_seconds") or 0.0 for run in runs)
    meths = methods(gait.theta, saved["fixed"]["quick"], n_train, gait.theta.size)

    def get(method, setting, key="mse"):
        return np.array([r[key] for r in records if r["method"] == method and r["setting"] == setting])

    const = float(np.mean((gait.Y - gait.Y.mean(axis=0)) ** 2))
    ours = [m for m in meths if m.startswith("rffor")]
    baselines = [m for m in meths if not m.startswith("rffor")]
    names = [*ours, LOSS_BY_CV, *baselines]
    rows = [
        [name]
        + [mean_std(get(name, lab)) for lab, _ in SETTINGS]
        + [mean_std(get(name, lab, "mse_alt")) for lab, _ in SETTINGS[1:]]
        for name in names
    ]
    summary_rows = summary(records, baselines)

    def chosen(method, setting):
        rs = [r for r in records if r["method"] == method and r["setting"] == setting]
        picks = [
            (f"{r['loss']}: " if "loss" in r else "")
            + ", ".join(f"{PARAM_LABEL.get(k, k)} {v:.3g}" for k, v in r["params"].items())
            for r in rs
        ]
        mode, count = Counter(picks).most_common(1)[0]  # first one met on ties
        text = f"{mode} ({count}/{len(rs)}); {edge_counts([r['edges'] for r in rs])}"
        if "loss" in rs[0]:  # how often CV chose each loss
            text += "; losses " + ", ".join(f"{k} {c}/{len(rs)}" for k, c in Counter(r["loss"] for r in rs).items())
        return text

    sel_rows = [[name] + [chosen(name, lab) for lab, _ in SETTINGS] for name in names]
    alt_edges = "; ".join(
        f"{name.removeprefix('rffor ')} "
        + edge_counts([r["edges_alt"] for r in records if r["method"] == name and r["setting"] != "clean"])
        for name in meths
    )
    grids = "; ".join(
        f"{name}: "
        + widening_text(
            {a: Axis(tuple(v)) for a, v in next(r for r in records if r["method"] == name)["start_grids"].items()},
            [r["grids"] for r in records if r["method"] == name],
        )
        for name in meths
    )
    lines = [
        "### Real data: gait curves (hip angle → knee angle)",
        "",
        provenance(runs[0]["info"], runs[0]["argv"], load_end=runs[0].get("load_end")),
        "",
        "The runs that wrote these results (each with its own arguments; `--resume` runs add the splits missing from "
        "the file):",
        "",
        runs_text(runs),
        "",
        *(
            [
                f"**Not finished**: the runs asked for {asked} splits and stopped at the session's deadline after "
                f"{splits} (splits 0 … {splits - 1}, in order; none left out for its result).",
                "",
            ]
            if splits < asked
            else []
        ),
        f"{gait.X.shape[0]} boys, 20 points per curve; {splits} random splits into {n_train} training / "
        f"{gait.X.shape[0] - n_train} test boys; clean training curves or 20% of them corrupted (Types 1, 2, 3 of "
        "MATH.md §7 on the angles divided by their standard deviation; Type 3 with ξ = 0.3; test curves always "
        "clean). Every method selects its hyperparameters (rffor: λ and κ or ε; KernelRidge: α; FPLS: components) "
        "by 5-fold cross-validation on the training curves, the same folds and the same rule for every method: on "
        "corrupted curves the median of the fold scores, a fold scoring the median over its validation curves of "
        "the per-curve MSE (*curve-median CV*); on clean curves the usual mean rule (a fold's MSE, mean over "
        "folds). Every grid starts on the same effective range (rffor's λ for every loss; KernelRidge's "
        f"α = λ·n·m for λ in that grid, n = {n_train}, m = {gait.theta.size}, and a decade more on each side; FPLS "
        "components up to the rank of the training inputs and a fold's size less one) and widens where a selection "
        "is at an edge (λ and α by factors of 10, κ and ε by 3, components by 1.5; `cv_select_widening` in "
        "benchmarks/_common.py) until the selection is interior, at a natural limit, or one more value improved the "
        f"CV score by less than 1% (*flat*). Grids searched: {grids}. Kernels Gaussian γ_X = {GAMMA_X} on the "
        f"standardised hip curve and γ_Θ = {GAMMA_THETA:g}; outputs robustly standardised on training statistics. "
        f"Entries: clean test MSE per grid point in degrees², mean ± std over splits (a constant mean curve scores "
        f"{const:.0f}). The last three columns select the hyperparameters from the same fits with the "
        "*fold-MSE* rule instead (a validation fold scores the mean over its curves, so its corrupted curves count "
        "in full; median over folds).",
        "",
        markdown_table(
            ["method"] + [lab for lab, _ in SETTINGS] + [f"{lab}, fold-MSE CV" for lab, _ in SETTINGS[1:]], rows
        ),
        "",
        f"The row *{LOSS_BY_CV}* is rffor with its loss chosen like its other hyperparameters (see the summary).",
        "",
        "*Selections (most frequent, with how many splits chose it; edges)*",
        "",
        markdown_table(["method"] + [lab for lab, _ in SETTINGS], sel_rows),
        "",
        f"Selections of the fold-MSE rule at an edge (corrupted settings): {alt_edges}.",
        "",
        "Summary: rffor with its loss chosen by cross-validation (*loss by CV*: in each split and setting, the loss "
        "whose own selection has the lowest validation score under the rule in use, the same folds for every loss; "
        "never the lowest test error) against each baseline, on the same splits: *better* / *worse* when the mean "
        "of the per-split differences exceeds one standard error of it, else *tie*.",
        "",
        markdown_table(
            ["rule", "setting", "rffor, loss by CV", "× rffor square", "losses chosen", *baselines], summary_rows
        ),
        "",
    ]
    before_path = RESULTS / f"{BEFORE}.json"
    if before_path.exists():
        before = json.loads(before_path.read_text())
        rows_b, changed = changes_rows(records, before)
        if rows_b:
            lines += [
                "",
                f"**What changed against the block this one replaced** ({before['source']}; {before['rule']}): its "
                "best rffor loss on test against its best baseline on test (means over its splits), and this run's "
                f"*{LOSS_BY_CV}* against that baseline (paired over this run's splits, one standard error). "
                + ("Verdicts that changed: " + "; ".join(changed) + "." if changed else "No verdict changed."),
                "",
                markdown_table(
                    [
                        "rule",
                        "setting",
                        "baseline",
                        "before (best rffor loss on test)",
                        f"now ({LOSS_BY_CV})",
                        "changed",
                    ],
                    rows_b,
                ),  # fmt: skip
            ]
    lines += ["", f"The runs took {wall / 60:.1f} min in all."]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
