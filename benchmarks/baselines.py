"""rffor against the tools a user would pick instead, on the same data and the same cross-validation splits.

Methods (every one gets its hyperparameters from the same K-fold splits and the same rule: with outliers the
median of the fold scores, a fold scoring the median over its validation curves of the per-curve MSE, as in
robustness.py; without, the mean rule. Every method's grid starts on the same effective range and widens where its
selection is at an edge: ``cv_select_widening`` in _common.py):

- scikit-learn ``KernelRidge`` (Gaussian kernel, γ = the rffor input kernel's) on the discretised outputs, i.e. one
  kernel ridge regression per grid point with a shared α (multi-output). This is rffor's square loss with an
  identity output kernel (tests/test_baselines.py checks the equivalence to 1e-9).
- scikit-learn ``Nystroem`` + ``Ridge`` and ``RBFSampler`` (random Fourier features) + ``Ridge``, same kernel.
- scikit-fda ``FPLSRegression`` (functional partial least squares: a linear function-on-function model), number
  of components selected. scikit-fda's ``LinearRegression`` with a functional covariate and a functional response
  is the *concurrent* model y(t) = β₀(t) + β₁(t) x(t), which needs x and y on the same domain and makes no sense
  for these data; it is not run.
- rffor ``FunctionalRegressor`` with the square loss, H_κ^1 and H_κ^2, exact solver (ADMM), and the random-feature
  solver (solver="rff") when it is available.

Data: the synthetic generator of MATH.md §7 (nonlinear variant, and the paper's linear one at n = 100), clean,
with 20% outliers of Types 1, 2 and 3 in the training outputs, or with i.i.d. noise on every training entry (where
an output kernel, which smooths across the grid, can help: KernelRidge is the same model without it); test curves
are always clean.

Writes the ``baselines`` block of benchmarks/README.md and benchmarks/results/baselines.json.

Usage::

    python benchmarks/baselines.py           # full run (see the README block for its time)
    python benchmarks/baselines.py --quick   # small smoke run
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    LAM_FLOOR,
    PARAM_LABEL,
    RESULTS,
    Axis,
    add_common_args,
    choose_by_cv,
    cv_select_widening,
    edge_counts,
    fmt,
    format_grid,
    limit_blas_threads,
    markdown_table,
    mean_std,
    nmse,
    open_results,
    provenance,
    runs_text,
    save_progress,
    selection_score,
    widening_text,
    write_section,
)
from sklearn.kernel_approximation import Nystroem, RBFSampler  # noqa: E402
from sklearn.kernel_ridge import KernelRidge  # noqa: E402
from sklearn.linear_model import Ridge  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402

from rffor import FunctionalRegressor  # noqa: E402
from rffor.datasets import add_outliers, make_synthetic  # noqa: E402
from rffor.kernels import Gaussian  # noqa: E402
from rffor.losses import Huber, Square  # noqa: E402

GAMMA_X, GAMMA_THETA = 0.01, 100.0
#: the rows of rffor with its loss chosen by cross-validation, per solver (:func:`loss_by_cv`)
LOSS_BY_CV = {"exact": "rffor, loss by CV (exact)", "rff": "rffor, loss by CV (rff)"}
#: (label, kind, τ): clean, 20% outliers of Types 1-3, or i.i.d. noise of standard deviation τ on every training
#: entry; the noisy setting comes last so that the other settings keep their random draws of earlier runs
SETTINGS = (
    ("clean", 0, 0.0),
    ("Type 1", 1, 0.2),
    ("Type 2", 2, 0.2),
    ("Type 3", 3, 0.2),
    ("noise σ = 0.1", "noise", 0.1),
)


# ---------------------------------------------------------------------------------------------------------------
# methods: name -> (grid, factory(params, theta, theta_in, seed) -> object with fit(X, Y) and predict(X))
# ---------------------------------------------------------------------------------------------------------------


class _RfforModel:
    def __init__(self, est, theta):
        self.est, self.theta = est, theta

    def fit(self, X, Y):
        self.est.fit(X, Y, self.theta)
        return self

    def predict(self, X):
        return self.est.predict(X)


class _FPLS:
    """scikit-fda FPLSRegression on FDataGrid inputs and outputs (the curves on their grids)."""

    def __init__(self, n_components, theta, theta_in):
        self.n_components, self.theta, self.theta_in = n_components, theta, theta_in

    def fit(self, X, Y):
        from skfda.ml.regression import FPLSRegression
        from skfda.representation.grid import FDataGrid

        self.model = FPLSRegression(n_components=self.n_components).fit(
            FDataGrid(X, grid_points=self.theta_in), FDataGrid(Y, grid_points=self.theta)
        )
        return self

    def predict(self, X):
        from skfda.representation.grid import FDataGrid

        return self.model.predict(FDataGrid(X, grid_points=self.theta_in)).data_matrix[..., 0]


def skfda_status() -> str | None:
    """None if scikit-fda's FPLSRegression imports and runs here, else the exact reason it does not."""
    try:
        import skfda  # noqa: F401

        rng = np.random.default_rng(0)
        _FPLS(2, np.linspace(0, 1, 5), np.linspace(0, 1, 4)).fit(rng.normal(size=(10, 4)), rng.normal(size=(10, 5)))
    except Exception as exc:  # noqa: BLE001 - reported verbatim in the README
        return f"{type(exc).__name__}: {exc}"
    return None


def rff_status(kwargs: dict) -> str | None:
    rng = np.random.default_rng(0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            FunctionalRegressor(Square(), solver="rff", lam=1e-3, random_state=0, **{**kwargs, "n_features_x": 20}).fit(
                rng.normal(size=(20, 3)), rng.normal(size=(20, 5))
            )
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"
    return None


def methods(cfg: dict, n_train: int, m: int, x_rank: int) -> dict:
    """name -> (axes, factory(params, theta, theta_in, seed) -> object with fit(X, Y) and predict(X)).

    Every method starts from the same effective range: rffor's λ grid for each rffor loss, its image α = λ·n·m
    (MATH.md §5.1; n the training set's size) and a decade more on each side for the scikit-learn models (an
    identity output kernel: KernelRidge is rffor's square loss with K_Θ = I), FPLS components up to the rank of
    the training inputs (more components give the same model); any grid widens where its selection is at an edge.
    """
    lams, kappas = cfg["lams"], cfg["kappas"]
    alphas = [lam * n_train * m for lam in [lams[0] / 10, *lams, lams[-1] * 10]]
    lam_axis, kappa_axis = Axis(tuple(lams), low=LAM_FLOOR), Axis(tuple(kappas), step=3)
    alpha_axis = Axis(tuple(alphas), low=LAM_FLOOR * n_train * m)

    def rffor(loss_name, solver):
        def make(p, theta, theta_in, seed):
            loss = Square() if loss_name == "square" else Huber(p["kappa"], 1 if loss_name == "huber1" else 2)
            extra = dict(tol=p.get("tol", 1e-6)) if solver == "admm" else dict(random_state=seed, **cfg["rff_kwargs"])
            est = FunctionalRegressor(
                loss,
                kernel_x=Gaussian(GAMMA_X),
                kernel_theta=Gaussian(GAMMA_THETA),
                lam=p["lam"],
                solver=solver,
                **extra,
            )
            return _RfforModel(est, theta)

        axes = {"lam": lam_axis} if loss_name == "square" else {"lam": lam_axis, "kappa": kappa_axis}
        return axes, make

    out = {
        "sklearn KernelRidge": (
            {"alpha": alpha_axis},
            lambda p, th, thi, s: KernelRidge(alpha=p["alpha"], kernel="rbf", gamma=GAMMA_X),
        ),
        "sklearn Nystroem + Ridge": (
            {"alpha": alpha_axis},
            lambda p, th, thi, s: make_pipeline(
                Nystroem(gamma=GAMMA_X, n_components=cfg["nystroem_components"], random_state=s),
                Ridge(alpha=p["alpha"]),
            ),
        ),
        "sklearn RBFSampler + Ridge": (
            {"alpha": alpha_axis},
            lambda p, th, thi, s: make_pipeline(
                RBFSampler(gamma=GAMMA_X, n_components=cfg["rff_components"], random_state=s),
                Ridge(alpha=p["alpha"]),
            ),
        ),
    }
    if cfg["skfda"]:
        start = tuple(k for k in cfg["fpls_components"] if k <= x_rank) or (1,)
        out["scikit-fda FPLSRegression"] = (
            {"n_components": Axis(start, step=1.5, low=1, high=x_rank, integer=True)},
            lambda p, th, thi, s: _FPLS(p["n_components"], th, thi),
        )
    out["rffor square (exact)"] = rffor("square", "admm")
    out["rffor H_κ^1 (exact)"] = rffor("huber1", "admm")
    out["rffor H_κ^2 (exact)"] = rffor("huber2", "admm")
    if cfg["rff"]:
        out["rffor square (rff)"] = rffor("square", "rff")
        out["rffor H_κ^2 (rff)"] = rffor("huber2", "rff")
    return out


def training_outputs(d, kind, tau, seed):
    """The training curves of a setting: clean, with i.i.d. N(0, tau²) noise on every entry, or corrupted."""
    if kind == "noise":
        return d.Y_train + tau * np.random.default_rng(seed).standard_normal(d.Y_train.shape)
    if tau == 0:
        return d.Y_train
    return add_outliers(d.Y_train, kind, tau, xi=0.3, random_state=seed)[0]


def run_case(variant: str, n_train: int, draw: int, cfg: dict) -> list[dict]:
    ss = np.random.SeedSequence([cfg["seed"], 7, 0 if variant == "linear" else 1, n_train, draw])
    data_seed, *seeds = ss.spawn(1 + len(SETTINGS))
    d = make_synthetic(n_train, cfg["n_test"], nonlinear=variant == "nonlinear", random_state=data_seed)
    x_rank = min(int(np.linalg.matrix_rank(d.X_train)), n_train * (cfg["folds"] - 1) // cfg["folds"] - 1)
    records = []
    for (label, kind, tau), s_seed in zip(SETTINGS, seeds, strict=True):
        Y = training_outputs(d, kind, tau, s_seed)
        rule = "robust" if kind in (1, 2, 3) else "mean"  # outliers: the robust rule, for every method alike
        cv_seed = int(s_seed.generate_state(1)[0])
        for name, (axes, make) in methods(cfg, n_train, d.Y_train.shape[1], x_rank).items():
            exact = "(exact)" in name

            def fit_predict(p, Xtr, Ytr, Xva, make=make, exact=exact, seed=cv_seed):
                p = {**p, "tol": cfg["cv_tol"]} if exact else p
                return make(p, d.theta, d.theta_in, seed).fit(Xtr, Ytr).predict(Xva)

            t0 = time.perf_counter()
            sel = cv_select_widening(
                fit_predict, axes, d.X_train, Y, rules=(rule,), n_splits=cfg["folds"], random_state=cv_seed
            )
            cv_time = time.perf_counter() - t0
            best = sel.best[rule]
            error = None
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = make(best, d.theta, d.theta_in, cv_seed)
                try:
                    t0 = time.perf_counter()
                    model.fit(d.X_train, Y)
                    fit_time = time.perf_counter() - t0
                    t0 = time.perf_counter()
                    Y_hat = model.predict(d.X_test)
                    predict_time = time.perf_counter() - t0
                except (np.linalg.LinAlgError, ValueError) as exc:
                    error = f"{type(exc).__name__}: {exc}"
            records.append(
                dict(
                    variant=variant,
                    n_train=n_train,
                    draw=draw,
                    setting=label,
                    method=name,
                    params=best,
                    rule=rule,
                    edges=sel.edges[rule],
                    grids=sel.grids,
                    widened=sel.widened,
                    start_grids={a: ax.start() for a, ax in axes.items()},
                    error=error,
                    nmse=float("nan") if error else nmse(d.Y_test, Y_hat),
                    fit_time=float("nan") if error else fit_time,
                    cv_time=cv_time,
                    cv_score=selection_score(sel, rule),
                    predict_time=float("nan") if error else predict_time,
                )
            )
        records += loss_by_cv([r for r in records if r["setting"] == label])
        print(f"  {variant} n={n_train} draw {draw} {label} done", flush=True)
    return records


def loss_by_cv(setting_records: list[dict]) -> list[dict]:
    """rffor with its loss chosen like any other hyperparameter: of the losses' separate selections (the same folds
    and rule, :func:`_common.selection_score`), the one of lowest validation score, per solver; its record is that
    loss's (test NMSE, times), renamed ``LOSS_BY_CV[solver]``, with ``loss`` naming the choice and the CV time of
    all the losses' selections. Nothing here looks at test error."""
    out = []
    for solver, name in LOSS_BY_CV.items():
        rs = {
            r["method"]: r
            for r in setting_records
            if r["method"].startswith("rffor ") and r["method"].endswith(f"({solver})") and "loss" not in r
        }
        if not rs:
            continue
        chosen = choose_by_cv({m: r["cv_score"] for m, r in rs.items()})
        out.append(
            {
                **rs[chosen],
                "method": name,
                "loss": chosen.removeprefix("rffor ").removesuffix(f" ({solver})"),
                "cv_time": sum(r["cv_time"] for r in rs.values()),
            }
        )
    return out


def summarize(records, cases, method_names):
    """Per case: the results table, the selection table (mode of the selected values, edge statuses), and the
    comparisons: every rffor row (its loss chosen by cross-validation, and each loss alone) against each baseline,
    rffor square against KernelRidge (the same model with an identity output kernel)."""
    tables, checks, kernel = [], [], []
    for variant, n_train, _ in cases:
        rows, sel_rows = [], []
        recs = [r for r in records if r["variant"] == variant and r["n_train"] == n_train]

        def get(method, setting, key="nmse", recs=recs):
            return np.array([r[key] for r in recs if r["method"] == method and r["setting"] == setting], float)

        def chosen(method, setting, recs=recs):
            rs = [r for r in recs if r["method"] == method and r["setting"] == setting]
            if not rs:
                return "—"
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

        krr_time = np.median(get("sklearn KernelRidge", "clean", "fit_time"))
        for name in method_names:
            if not get(name, "clean").size:
                continue
            t = np.median(get(name, "clean", "fit_time"))
            cv = np.median(get(name, "clean", "cv_time"))
            rows.append(
                [name]
                + [mean_std(get(name, s)) for s, _, _ in SETTINGS]
                + [f"{fmt(t)} s ({fmt(t / krr_time, 2)}×)", f"{fmt(cv)} s"]
            )
            sel_rows.append([name] + [chosen(name, s) for s, _, _ in SETTINGS])
        headers = ["method"] + [f"{s} NMSE" for s, _, _ in SETTINGS] + ["fit time (× KernelRidge)", "CV time"]
        grids = {}
        for name in method_names:
            rs = [r for r in recs if r["method"] == name]
            if rs and name not in LOSS_BY_CV.values():  # those rows reuse the losses' own selections
                axes = {a: Axis(tuple(v)) for a, v in rs[0]["start_grids"].items()}
                grids[name] = widening_text(axes, [r["grids"] for r in rs])
        tables.append(
            (variant, n_train, markdown_table(headers, rows), markdown_table(["method", *[s for s, _, _ in SETTINGS]],
                                                                             sel_rows), grids)
        )  # fmt: skip

        ours = [m for m in method_names if m.startswith("rffor") and get(m, "clean").size]
        theirs = [m for m in method_names if not m.startswith("rffor") and get(m, "clean").size]
        for s, kind, _ in SETTINGS:
            if "sklearn KernelRidge" in theirs and "rffor square (exact)" in ours:
                kernel.append(
                    dict(
                        variant=variant,
                        n_train=n_train,
                        setting=s,
                        square=get("rffor square (exact)", s).mean(),
                        krr=get("sklearn KernelRidge", s).mean(),
                        wins=int(np.sum(get("rffor square (exact)", s) < get("sklearn KernelRidge", s))),
                        draws=len(get("rffor square (exact)", s)),
                    )
                )
            if variant != "nonlinear":
                continue
            for mine in ours:  # every rffor row on its own (the loss by CV, and each loss): no choice on test error
                for other in theirs:
                    a, b = get(mine, s).mean(), get(other, s).mean()
                    if kind in (1, 2, 3):
                        ok = a < b
                    else:  # clean or noisy: below scikit-fda, within 5% of (or below) the scikit-learn kernel models
                        ok = a < b if "fda" in other else a <= 1.05 * b
                    checks.append(
                        dict(
                            n_train=n_train, setting=s, ours=mine, other=other, ours_nmse=a, other_nmse=b,
                            ratio=a / b, met=bool(ok),
                        )
                    )  # fmt: skip
    return tables, checks, kernel


def targets_text(checks: list[dict], method_names: list[str]) -> list[str]:
    """The targets on the nonlinear data, stated for every rffor row on its own: the loss chosen by cross-validation
    (the headline) and each loss alone; per comparison the ratio of mean test NMSEs (rffor / baseline)."""
    if not checks:
        return []
    out = [
        "Targets on the nonlinear data, for each rffor row against each baseline (clean or noisy: lower NMSE than "
        "scikit-fda and within 5% of or below the scikit-learn kernel baselines; with outliers: lower than all). "
        "rffor's loss is a hyperparameter like the others: the rows *loss by CV* take, in each draw and setting, the "
        "loss whose own selection has the lowest cross-validation score (the same folds and rule as every "
        "hyperparameter; `loss_by_cv`), never the lowest test error; every loss is also scored alone.",
        "",
    ]
    rows = []
    for mine in [m for m in method_names if m.startswith("rffor")]:
        cs = [c for c in checks if c["ours"] == mine]
        if not cs:
            continue
        met = sum(c["met"] for c in cs)
        missed = "; ".join(
            f"n = {c['n_train']} {c['setting']} vs {c['other']}: {fmt(c['ours_nmse'])} against {fmt(c['other_nmse'])}"
            f" ({fmt(c['ratio'], 4)}×)"
            for c in cs
            if not c["met"]
        )
        rows.append([mine, f"**{met} of {len(cs)}**" if mine in LOSS_BY_CV.values() else f"{met} of {len(cs)}",
                     missed or "—"])  # fmt: skip
    out += [markdown_table(["rffor row", "comparisons met", "not met (mean test NMSE, ratio)"], rows), ""]
    clean = [c for c in checks if c["setting"] == "clean" and "fda" not in c["other"]]
    if clean:
        out += [
            "Clean data, ratio of mean test NMSEs to each scikit-learn kernel baseline (limit 1.05): "
            + "; ".join(
                f"{mine} n = {n}: "
                + ", ".join(
                    f"{c['other'].removeprefix('sklearn ')} {fmt(c['ratio'], 4)}"
                    for c in clean
                    if c["ours"] == mine and c["n_train"] == n
                )
                for mine in dict.fromkeys(c["ours"] for c in clean)
                for n in sorted({c["n_train"] for c in clean if c["ours"] == mine})
            )
            + ".",
            "",
        ]
    return out


#: the checks of the block this one replaced (rffor's loss picked by test error), for :func:`changes_text`
BEFORE = "baselines_before_issue25"


def changes_text(checks: list[dict], before: dict | None) -> list[str]:
    """Where the targets' verdicts changed against the block this one replaced (``before``: its saved checks, where
    rffor's row was the loss of lowest test NMSE): per comparison both runs made, the old best-on-test row against
    this run's loss chosen by cross-validation (exact solver)."""
    if not before:
        return []
    now = {(c["n_train"], c["setting"], c["other"]): c for c in checks if c["ours"] == LOSS_BY_CV["exact"]}
    rows, changed = [], []
    for c in before["checks"]:
        key = (c["n_train"], c["setting"], c["other"])
        if key not in now:
            continue
        n = now[key]
        flip = c["met"] != n["met"]
        ratio_old = c["ours_nmse"] / c["other_nmse"]
        rows.append([
            f"n = {c['n_train']}", c["setting"], c["other"],
            f"{c['ours'].removeprefix('rffor ')}: {fmt(ratio_old, 4)}× ({'met' if c['met'] else 'not met'})",
            f"{fmt(n['ratio'], 4)}× ({'met' if n['met'] else '**not met**'})", "**yes**" if flip else "no",
        ])  # fmt: skip
        if flip:
            changed.append(f"n = {c['n_train']} {c['setting']} vs {c['other']}")
    if not rows:
        return []
    return [
        f"**What changed against the block this one replaced** ({before['source']}; there {before['rule']}). Ratio "
        "of mean test NMSEs, rffor / baseline, on the nonlinear data; before: the old row and its draws, now: "
        f"*{LOSS_BY_CV['exact']}* on this run's draws (the selection rule of main, `rffor.edge_rule`, is also newer). "
        + ("Verdicts that changed: " + "; ".join(changed) + "." if changed else "No verdict changed."),
        "",
        markdown_table(
            ["case", "setting", "baseline", "before (best loss on test)", "now (loss by CV)", "changed"], rows
        ),  # fmt: skip
        "",
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser)
    parser.add_argument(
        "--rff",
        action="store_true",
        help="also run rffor's random-feature solver (off by default: at n ≤ 500 its D_x = 1000 "
        "features cost more than the exact solver; the rff-vs-exact comparison is in "
        "robustness.py and scale.py)",
    )
    parser.add_argument("--n-features", type=int, default=1000, help="rff: D_x (default 1000)")
    parser.add_argument(
        "--cases",
        nargs="+",
        default=None,
        metavar="VARIANT:N:DRAWS",
        help="the (variant, training curves, draws) to run (default linear:100:5 nonlinear:100:5 nonlinear:400:2)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the draws already saved in the results file (same grids and seed), run only the missing ones; the "
        "block reports every case of the file",
    )
    parser.add_argument("--report-only", action="store_true", help="rebuild the README block from the saved results")
    args = parser.parse_args(argv)
    limit_blas_threads(args.threads)

    # starting grids (every method's covers the same range, and widens at an edge: see methods())
    if args.quick:
        cases = [("nonlinear", 100, 1)]
        cfg_grid = dict(lams=[1e-8, 1e-6, 1e-4], kappas=[0.03, 0.1], fpls_components=[1, 2, 4], folds=3)
    else:
        # (variant, n_train, draws)
        cases = [("linear", 100, 5), ("nonlinear", 100, 5), ("nonlinear", 400, 2)]
        cfg_grid = dict(
            lams=[1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3],
            kappas=[0.01, 0.03, 0.1, 0.3],
            fpls_components=[1, 2, 3, 4, 6, 8, 12],
            folds=5,
        )
    if args.cases:
        cases = [(v, int(n), int(k)) for v, n, k in (c.split(":") for c in args.cases)]
    skfda_reason = skfda_status()
    rff_kwargs = {"n_features_x": args.n_features}
    rff_reason = rff_status(rff_kwargs) if args.rff else None
    cfg = dict(
        cfg_grid,
        seed=args.seed,
        n_test=500,
        cv_tol=1e-4,
        nystroem_components=300,
        rff_components=1000,
        skfda=skfda_reason is None,
        rff=args.rff and rff_reason is None,
        rff_kwargs=rff_kwargs,
    )
    name = "baselines_quick" if args.quick else "baselines"
    if args.report_only:
        saved = json.loads((RESULTS / f"{name}.json").read_text())
    else:
        saved = open_results(name, {"cfg": cfg}, args, resume=args.resume)
        saved.update(skfda=skfda_reason, rff=rff_reason)
        t0 = time.perf_counter()
        done = {(r["variant"], r["n_train"], r["draw"]) for r in saved["records"]}
        for variant, n_train, draws in cases:
            for r in range(draws):
                if (variant, n_train, r) in done:
                    continue
                saved["records"] += run_case(variant, n_train, r, cfg)
                save_progress(name, saved, time.perf_counter() - t0)  # a draw at a time: a killed run resumes
        save_progress(name, saved, time.perf_counter() - t0)
    text = report(saved, cases)
    print(text)
    if not (args.no_readme or args.quick):
        write_section("baselines", text, args.readme)
    return 0


def saved_cases(records: list[dict], order: list[tuple]) -> list[tuple[str, int, int]]:
    """``(variant, n_train, draws)`` of every case in the saved ``records`` (draws: how many were saved), in the
    order of the cases ``order`` first."""
    draws = Counter((r["variant"], r["n_train"]) for r in records if r["method"] == "sklearn KernelRidge")
    settings = len({r["setting"] for r in records})
    keys = [k for k in dict.fromkeys([(v, n) for v, n, _ in order] + list(draws)) if k in draws]
    return [(v, n, draws[(v, n)] // settings) for v, n in keys]


def report(saved: dict, order: list[tuple]) -> str:
    """The README block from a results file (:func:`_common.open_results`): every case it holds, the runs that wrote
    it with their own arguments and load."""
    cfg, records, runs = saved["fixed"]["cfg"], saved["records"], saved["runs"]
    skfda_reason, rff_reason = saved.get("skfda"), saved.get("rff")
    cases = saved_cases(records, order)
    method_names = list(methods(cfg, 100, 100, 4))
    method_names += [LOSS_BY_CV["exact"]] + ([LOSS_BY_CV["rff"]] if cfg["rff"] else [])
    tables, checks, kernel = summarize(records, cases, method_names)
    saved.update(checks=checks, output_kernel=kernel)
    wall = sum(run.get("wall_seconds") or 0.0 for run in runs)
    n_features = cfg["rff_kwargs"]["n_features_x"]
    before_path = RESULTS / f"{BEFORE}.json"
    before = json.loads(before_path.read_text()) if before_path.exists() else None
    import importlib.metadata as md

    versions = []
    for pkg in ("scikit-fda", "multimethod"):
        try:
            versions.append(f"{pkg} {md.version(pkg)}")
        except md.PackageNotFoundError:
            versions.append(f"{pkg} not installed")
    lines = [
        "### Baselines a user would pick instead",
        "",
        provenance(runs[0]["info"], runs[0]["argv"], load_end=runs[0].get("load_end"))
        + " "
        + ", ".join(versions)
        + ".",
        "",
        "The runs that wrote these results (each with its own arguments; `--resume` runs add the draws missing from "
        "the file):",
        "",
        runs_text(runs),
        "",
        "Same data, same splits for every method: synthetic curves of MATH.md §7 (m = 100 output points, 100 input "
        f"points, {cfg['n_test']} clean test curves), clean, with 20% corrupted training curves (Types 1, 2, 3 "
        "with ξ = 0.3; Type 2 replaces the curve), or with i.i.d. N(0, 0.1²) noise on every training entry "
        "(output std ≈ 0.6). Hyperparameters of every method by "
        f"{cfg['folds']}-fold cross-validation on the training set (the same folds for every method), the same "
        "rule for every method: with outliers the median of the fold scores, a fold scoring the median over its "
        "validation curves of the per-curve MSE (as in the robustness study); clean or noisy, the mean rule (a "
        "fold's NMSE, mean over folds). Every kernel method uses the Gaussian input kernel γ_X = 0.01 (the paper's "
        f"ρ_in); rffor's output kernel is Gaussian with γ_Θ = {GAMMA_THETA:g} (not tuned). Starting grids: rffor "
        f"λ ∈ {format_grid(cfg['lams'])} for every loss, κ ∈ {format_grid(cfg['kappas'])}; the scikit-learn models' "
        "α ∈ {λ·n·m} for λ in rffor's grid and one decade more on each side (MATH.md §5.1: α = λ·n·m is the same "
        "regularisation; n the training set's size); FPLS components "
        f"{format_grid(cfg['fpls_components'])} up to the rank of the training inputs (4: the curves are mixtures "
        "of 4 functions, and more components give the same model). A selection at an edge widens its grid (λ and "
        "α by factors of 10, κ by 3, components by 1.5; `cv_select_widening` in benchmarks/_common.py) until the "
        f"selected value is interior, at a natural limit (FPLS: the rank; λ: {LAM_FLOOR:g}, α: {LAM_FLOOR:g}·n·m, "
        "where the regularised Gram matrix's condition number reaches about 1e12), or one more value improved the "
        "CV score by less than 1% (*flat*); else the run fails. Below each table: the grids searched (widenings "
        "included), and per method and setting the most frequent selection and how many selections were at an "
        f"edge. Nystroem uses {cfg['nystroem_components']} components, RBFSampler {cfg['rff_components']}"
        + (f", rffor's rff solver D_x = {n_features}" if cfg["rff"] else "")
        + ". Entries: clean test NMSE, mean ± std over draws; fit time: the final fit on the clean training set "
        "(median over draws; ratio to KernelRidge in the same run); CV time: the whole selection on clean data."
        + (f" scikit-fda was not run: `{skfda_reason}`." if skfda_reason else "")
        + (f" rffor's rff solver was not run: `{rff_reason}`." if rff_reason else "")
        + (
            ""
            if cfg["rff"]
            else " rffor's random-feature solver is not in this table (at these n its D_x = 1000 "
            "features cost more than the exact solver; see the robustness and scale sections)."
        ),
        "",
    ]
    for variant, n_train, table, sel_table, grids in tables:
        draws = next(dr for v, n, dr in cases if v == variant and n == n_train)
        lines += [
            f"**{variant} variant, n = {n_train} training curves, {draws} draws**",
            "",
            table,
            "",
            "Grids searched: " + "; ".join(f"{name}: {g}" for name, g in grids.items()) + ".",
            "",
            f"*Selections (most frequent, with how many draws chose it; edges), {variant}, n = {n_train}*",
            "",
            sel_table,
            "",
        ]
    lines += [
        "**The output kernel** (rffor's square loss is KernelRidge with a Gaussian output kernel instead of the "
        "identity; both tuned as above): mean test NMSE of rffor square / KernelRidge, and in how many draws "
        "rffor square was lower: "
        + "; ".join(
            f"{k['variant']} n = {k['n_train']} {k['setting']}: {fmt(k['square'] / k['krr'], 2)} "
            f"({k['wins']}/{k['draws']})"
            for k in kernel
        )
        + ".",
        "",
        *targets_text(checks, method_names),
        *changes_text(checks, before),
        f"The runs took {wall / 60:.1f} min in all.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
