"""Learning curve: test error and time against the number of training curves n, every hyperparameter selected by
the library's own rule on the same held-out curves.

The benchmark of issue 13: nonlinear synthetic curves of MATH.md §7 (m = 100 output points, 100 input points),
10% Type 2 outliers in the training curves, scored on clean test curves (NMSE); Gaussian kernels γ_X = 0.01,
γ_Θ = 100. Every method holds out the same curves (:class:`rffor.chunked.RowSplit`: one in 10, hashed), scores a
candidate by the median over the held-out curves of their MSE (the mean on clean data), walks its grids past a
winning end, and refits the winner on all rows.

- **rffor, large scale**: ``FunctionalRegressor(Huber(0.1, 2), solver="rff", input_features="nystrom",
  lam="auto", loss_params="auto", kernel_theta_params="auto")``: λ, κ and the output kernel's γ_Θ (from 100) chosen
  by :mod:`rffor.solvers.selection` (closed forms, then MM candidates warm-started at their neighbours, every pass
  on the workers). From ``--cluster-min-n`` rows on, on a
  LocalCluster of 2 worker processes × 1 thread (in-memory partitions shipped once per fit); below, in process.
  ``--store-n`` more rows from a Zarr store.
- **rffor, exact** (ADMM, H_κ^2) on the first rows, for the ``--exact-ns``: :class:`rffor.model_selection.
  FunctionalRegressorCV` with the same held-out curves as its one fold (``PredefinedSplit``), κ from the same start.
- **scikit-learn** ``Nystroem(M)`` + ridge (the same M; α walked by the same rule; ``Ridge(solver="svd")``'s
  solutions, computed block by block), on the corrupted data and,
  with rffor's square loss beside it, on clean data (the "simple alternative" of issue 13): there twice, with
  scikit-learn's own draw of the M centres and with rffor's (the same feature map up to its eigenvalue floor, so
  that the comparison is of the fits, not of two random draws of centres).

Writes the ``learning_curve`` block of benchmarks/README.md, benchmarks/figures/learning_curve.png and
benchmarks/results/learning_curve.json (``learning_curve_NAME.json`` with ``--name NAME``; records are saved as they
come to learning_curve_partial.json, so a run stopped midway keeps what it measured). ``--report-only FILE ...``
rebuilds the block and figure from one or more results files (runs of different sizes, merged unchanged).

Usage::

    python benchmarks/learning_curve.py --threads 2
    python benchmarks/learning_curve.py --threads 2 --store-n 10000000 --store-dir /data
    python benchmarks/learning_curve.py --report-only benchmarks/results/learning_curve_{a,b}.json
    python benchmarks/learning_curve.py --quick
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import (
    add_common_args,
    figure_path,
    fmt,
    limit_blas_threads,
    machine_info,
    markdown_table,
    provenance,
    save_json,
    write_section,
    write_zarr_blocks,
)

from rffor import FunctionalRegressor  # noqa: E402
from rffor.chunked import RowSplit  # noqa: E402
from rffor.datasets import add_outliers, make_synthetic, sample_synthetic  # noqa: E402
from rffor.kernels import Gaussian  # noqa: E402
from rffor.losses import Huber, Square  # noqa: E402
from rffor.metrics import curve_mse, nmse  # noqa: E402

GAMMA_X, GAMMA_THETA, OUTLIERS, BLOCK = 0.01, 100.0, 0.1, 100_000
KAPPA0 = 0.1  # the robust fits' starting κ: each selection walks from it
SPLIT = RowSplit(10, True)  # rffor's lam="auto" split: every method is selected on the same held-out rows


# ----------------------------------------------------------------------------------------------------------- data
def curves(seed: int):
    return make_synthetic(1, 0, nonlinear=True, random_state=np.random.SeedSequence([seed, 23]))


def block(seed: int, k: int, rows: int, clean: bool = False):
    """Rows of block k of the training stream (float32): new coefficients, 10% Type 2 outliers unless clean."""
    c = curves(seed)
    X, Y = sample_synthetic(
        c.components_in, c.components_out, rows, nonlinear=True, random_state=np.random.SeedSequence([seed, 25, k])
    )
    if not clean:
        Y, _ = add_outliers(Y, 2, OUTLIERS, random_state=np.random.SeedSequence([seed, 26, k]))
    return X.astype(np.float32), Y.astype(np.float32)


def training(seed: int, n: int, clean: bool = False):
    """The first n rows of the training stream (the same rows for every n: prefixes)."""
    parts = [block(seed, k, min(BLOCK, n - s), clean) for k, s in enumerate(range(0, n, BLOCK))]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def test_set(seed: int, n_test: int):
    c = curves(seed)
    X, Y = sample_synthetic(
        c.components_in, c.components_out, n_test, nonlinear=True, random_state=np.random.SeedSequence([seed, 27])
    )
    return X, Y


def output_floor(seed: int, n_test: int, gamma: float, tol: float) -> tuple[int, float]:
    """The test NMSE below which no model of rffor's output factor can go: the clean test curves projected on the
    span of ``ExactOutputFactor(Gaussian(gamma), θ, tol)`` (the eigenvectors of K_Θ kept on the grid). Returns
    (rank, NMSE)."""
    from rffor.features import ExactOutputFactor

    _, Y = test_set(seed, n_test)
    theta = curves(seed).theta
    Q, _ = np.linalg.qr(ExactOutputFactor(Gaussian(gamma), theta, tol=tol, dtype=np.float64).transform(theta))
    return Q.shape[1], float(nmse(Y, Y @ Q @ Q.T))


# ------------------------------------------------------------------------------------------------- selection rule
def walk(score, grid, *, step=10.0, plateau=0.01, bounds=(1e-40, 1e6)):
    """The selection rule of ``rffor.solvers.selection`` for a baseline: score the grid, then from its best value
    step to the neighbouring value (a factor ``step`` past the grid's ends) while a step lowers the score by at
    least ``plateau``, trying down first, then up. ``score(value)`` is memoised. Returns
    ``(best, scores: dict value -> score, at_bound)``."""
    scores = {}

    def s(v):
        v = float(f"{v:.12g}")
        if v not in scores:
            scores[v] = score(v)
        return scores[v]

    for v in grid:
        s(v)
    best = min(scores, key=scores.get)
    start, at_bound = best, False
    for direction in (-1, +1):
        v = start
        while True:
            order = sorted(scores)
            i = order.index(v)
            inside = 0 <= i + direction < len(order) and min(grid) <= order[i + direction] <= max(grid)
            w = order[i + direction] if inside else (v / step if direction < 0 else v * step)
            if not bounds[0] <= w <= bounds[1]:
                at_bound = True
                break
            if s(w) > scores[best] * (1 - plateau):
                break
            best = v = float(f"{w:.12g}")
        if best != start:
            break
    return best, scores, at_bound


def held_out(n: int) -> np.ndarray:
    """The held-out rows of every method: rffor's hashed split (one row in 10)."""
    return SPLIT.mask(0, n)


# -------------------------------------------------------------------------------------------------------- methods
def rffor_fit(X, Y, loss, args, client, draw: int = 0, **kw):
    """rffor's large-scale fit with every hyperparameter chosen by the library (lam="auto", kernel_theta_params=
    "auto", and loss_params="auto" for a robust loss); returns (estimator, seconds)."""
    est = FunctionalRegressor(
        loss,
        kernel_x=Gaussian(GAMMA_X),
        kernel_theta=Gaussian(GAMMA_THETA),
        lam="auto",
        kernel_theta_params="auto",
        solver="rff",
        input_features="nystrom",
        n_features_x=args.n_centres,
        random_state=args.seed + draw,
        client=client,
        n_partitions=None if client is not None else 1,
        verbose=args.verbose,
        **kw,
    )
    tic = time.perf_counter()
    est.fit(X, Y) if Y is not None else est.fit(X)
    return est, time.perf_counter() - tic


def rffor_robust(X, Y, X_test, Y_test, args, client, n):
    """H_κ^2 from κ = KAPPA0, with λ and κ chosen on the held-out curves (rffor.solvers.selection)."""
    est, seconds = rffor_fit(X, Y, Huber(KAPPA0, 2), args, client, loss_params="auto")
    path = est.lam_path_
    history = est.rff_history_
    best = next(v for v, lam, p in zip(path["scores"], path["lams"], path["params"], strict=True)
                if lam == path["lam"] and p == path["param"])  # fmt: skip
    start_nmse = None
    if est.warm_coef_ is not None:  # the model the fit on all rows started from: the selected candidate
        from rffor.solvers.rff import predict

        start = predict(est.warm_coef_, est.input_features_, est._Phi_theta_grid, X_test)
        start_nmse = nmse(Y_test, start)
    return dict(
        method="rffor",
        data="corrupted",
        n=n,
        start_nmse=start_nmse,
        selection_rows=path["n_train"] + path["n_held"],
        kappa=est.loss_.kappa,
        gamma_theta=est.kernel_theta_.gamma,
        lam=est.lam_,
        lam_selected=path["lam"],
        held_out=best,
        closed_form_held_out=min(path["closed_forms"]["scores"]),
        nmse=nmse(Y_test, est.predict(X_test)),
        seconds=seconds,
        candidates=len(path["lams"]),
        path_passes=path["passes"],
        refit_passes=int(est.n_iter_),
        objective_start=history[0]["objective"] if history else None,
        objective_end=float(est.objective_history_[-1]),
        n_features=int(est.coef_.shape[0]),
        n_output_features=int(est.coef_.shape[1]),
        log=path["log"],
        at_edge=bool(path["at_bound"]),
    )


def rffor_square(X, Y, X_test, Y_test, args, client, n, draw: int = 0):
    """rffor's square loss (λ and γ_Θ selected), its centres drawn with ``random_state = seed + draw``; returns
    (record, its Nyström centres)."""
    est, seconds = rffor_fit(X, Y, Square(), args, client, draw)
    path = est.lam_path_
    rank, floor = output_floor(args.seed, args.n_test, est.kernel_theta_.gamma, est.output_rank_tol)
    rec = dict(method="rffor", data="clean", n=n, draw=draw, lam=est.lam_, gamma_theta=est.kernel_theta_.gamma,
               output_rank=rank, output_floor=floor, nmse=nmse(Y_test, est.predict(X_test)), seconds=seconds,
               candidates=len(path["lams"]), log=path["log"], at_edge=bool(path["at_bound"]))  # fmt: skip
    return rec, np.asarray(est.input_features_.centres, dtype=np.float64)


def nystroem_ridge(X, Y, X_test, Y_test, args, n, data: str, check: bool = False, centres=None, draw: int = 0):
    """scikit-learn's Nystroem(M) features and a ridge regression of every output on them, α by the held-out rule
    of rffor (the walk of :func:`walk` from α 1e-8 … 1e2 by decades: median held-out curve MSE on corrupted data,
    mean on clean). ``centres``: Nystroem fitted on these rows (all of them its basis: rffor's centres) instead of
    its own uniform draw of M rows (``random_state = --seed + draw``).

    The ridge solutions are those of ``Ridge(alpha, fit_intercept=False, solver="svd")`` (``check=True`` asserts
    it on a subsample), computed without holding the n × M features: the features (float64) of each block of
    100,000 rows are reduced by a QR factorisation of ``[Z | Y]`` stacked on the previous R factor (TSQR), so that
    ``Z = Q R`` and ``Qᵀ Y`` are known; then ``W = V diag(s / (s² + α)) Uᵀ Qᵀ Y`` from the SVD ``R = U diag(s) Vᵀ``,
    for every α. The normal equations ``(ZᵀZ + α I)`` would square the condition number: at the small α these
    noise-free curves need, their solution is 10^5 times worse (measured at n = 10^5, α = 1e-14). No intercept, as
    rffor's model (the synthetic curves have mean zero). ``seconds`` counts the features and the selection;
    ``seconds_final`` the features and one fit at the chosen α on all rows.
    """
    from sklearn.kernel_approximation import Nystroem

    tic = time.perf_counter()
    if centres is None:
        feat = Nystroem(kernel="rbf", gamma=GAMMA_X, n_components=min(args.n_centres, len(X)),
                        random_state=args.seed + draw)  # fmt: skip
        feat.fit(X)  # centres drawn uniformly from all rows, as rffor's
    else:
        feat = Nystroem(kernel="rbf", gamma=GAMMA_X, n_components=len(centres), random_state=args.seed).fit(centres)
    held = held_out(len(Y))
    M, m = feat.n_components, Y.shape[1]
    R = {False: np.zeros((0, M + m)), True: np.zeros((0, M + m))}
    Z_held = []
    for s in range(0, len(X), BLOCK):
        Z = feat.transform(X[s : s + BLOCK].astype(np.float64))
        ZY = np.hstack([Z, np.asarray(Y[s : s + BLOCK], dtype=np.float64)])
        h = held[s : s + BLOCK]
        for side in (False, True):
            R[side] = np.linalg.qr(np.vstack([R[side], ZY[h == side]]), mode="r")
        Z_held.append(Z[h])
    Z_held = np.concatenate(Z_held)
    t_features = time.perf_counter() - tic
    Y_held = np.asarray(Y, dtype=np.float64)[held]

    def ridge_solver(R_zy):
        """α ↦ W from the R factor of [Z | Y] (its first M columns: R; the rest of its first M rows: Qᵀ Y)."""
        U, sv, Vt = np.linalg.svd(R_zy[:M, :M])
        UQy = U.T @ R_zy[:M, M:]
        return lambda alpha: Vt.T @ ((sv / (sv**2 + alpha))[:, None] * UQy)

    train = ridge_solver(R[False])

    def score(alpha):
        E = curve_mse(Y_held, Z_held @ train(alpha))
        return float(np.median(E) if data == "corrupted" else np.mean(E))

    grid = [10.0**k for k in range(-8, 3)]
    alpha, scores, at_bound = walk(score, grid)
    t0 = time.perf_counter()
    W = ridge_solver(np.linalg.qr(np.vstack([R[False], R[True]]), mode="r"))(alpha)
    t_final = time.perf_counter() - t0
    seconds = time.perf_counter() - tic
    if check:  # the same solutions as scikit-learn's Ridge (on a subsample that fits in memory)
        from sklearn.linear_model import Ridge

        rows = slice(0, min(len(X), 20_000))
        Z, Ys = feat.transform(X[rows].astype(np.float64)), np.asarray(Y[rows], np.float64)
        for a in (alpha, 1e-3):
            ref = Ridge(alpha=a, fit_intercept=False, solver="svd").fit(Z, Ys)
            W_sub = ridge_solver(np.linalg.qr(np.hstack([Z, Ys]), mode="r"))(a)
            np.testing.assert_allclose(Z @ W_sub, ref.predict(Z), rtol=1e-6, atol=1e-9 * np.abs(Ys).max())
    order = sorted(scores)
    return dict(method="nystroem_ridge" if centres is None else "nystroem_ridge_same_centres", data=data, n=n,
                draw=draw, alpha=alpha, nmse=nmse(Y_test, feat.transform(X_test) @ W),
                seconds=seconds, seconds_final=t_features + t_final, alpha_grid=order,
                at_edge=bool(at_bound or order.index(alpha) in (0, len(order) - 1)))  # fmt: skip


def exact(X, Y, X_test, Y_test, args, n):
    """The exact solver (ADMM, H_κ^2) with λ and κ chosen by the library's FunctionalRegressorCV on the same
    held-out rows (a ``PredefinedSplit``), κ from the same start; grids extended past a winning end at most
    ``--exact-extensions`` times (ADMM needs up to its 2000 iterations per candidate at small κ and λ: the count of
    candidates stopped there is recorded)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import PredefinedSplit

    from rffor.model_selection import FunctionalRegressorCV

    tic = time.perf_counter()
    split = PredefinedSplit(np.where(held_out(len(Y)), 0, -1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        cv = FunctionalRegressorCV(Huber(KAPPA0, 2), lams=[10.0**-k for k in range(6, 13)], loss_params="auto",
                                   cv=split, kernel_x=Gaussian(GAMMA_X), kernel_theta=Gaussian(GAMMA_THETA),
                                   max_extensions=args.exact_extensions).fit(X, Y)  # fmt: skip
    res = cv.cv_results_
    i = [j for j in range(len(res["lam"])) if res["lam"][j] == cv.lam_ and res["loss_param"][j] == cv.loss_.kappa][0]
    return dict(method="exact", data="corrupted", n=n, kappa=cv.loss_.kappa, lam=cv.lam_,
                held_out=float(res["mean_score"][i]), nmse=nmse(Y_test, cv.predict(X_test)),
                seconds=time.perf_counter() - tic, candidates=len(res["lam"]), extensions=cv.extensions_,
                at_edge=bool(cv.at_edge_),
                not_converged=sum(issubclass(w.category, ConvergenceWarning) for w in caught))  # fmt: skip


# ----------------------------------------------------------------------------------------------------------- plot
def plot(records, path: Path, n_centres: int = 1000) -> None:
    """Test NMSE and time against n: lines at M = ``n_centres``, single markers for runs with another M."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    styles = {
        ("rffor", "corrupted"): ("rffor large scale, H_κ^2 (Nyström)", "C0", "o-"),
        ("exact", "corrupted"): ("rffor exact (ADMM), H_κ^2", "C3", "s-"),
        ("nystroem_ridge", "corrupted"): ("Nystroem + Ridge, corrupted", "C1", "^-"),
        ("rffor", "clean"): ("rffor square, clean data", "C0", "o--"),
        ("nystroem_ridge", "clean"): ("Nystroem + Ridge, clean data", "C1", "^--"),
    }
    for key, (label, color, style) in styles.items():
        rs = sorted((r for r in records if (r["method"], r["data"]) == key), key=lambda r: r["n"])
        main = [r for r in rs if centres_of(r, 1000) in (None, n_centres)]
        others = sorted({centres_of(r, 1000) for r in rs} - {None, n_centres})
        for ax, y in ((axes[0], "nmse"), (axes[1], "seconds")):
            if main:
                ax.loglog([r["n"] for r in main], [r[y] for r in main], style, color=color, label=label)
            for M in others:  # single runs with another budget: hollow markers
                sub = [r for r in rs if centres_of(r, 1000) == M]
                ax.loglog([r["n"] for r in sub], [r[y] for r in sub], style[0], color=color, mfc="none", ms=9,
                          label=f"{label}, M = {M}")  # fmt: skip
    axes[0].set(xlabel="training curves n", ylabel="test NMSE (clean test curves)", title="Error against n")
    axes[1].set(xlabel="training curves n", ylabel="fit time incl. selection (s)", title="Time against n")
    for ax in axes:
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ----------------------------------------------------------------------------------------------------------- main
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser)
    parser.add_argument("--ns", type=int, nargs="*", default=[10_000, 30_000, 100_000, 300_000, 1_000_000])
    parser.add_argument("--clean-ns", type=int, nargs="*", default=[100_000, 1_000_000])
    parser.add_argument("--exact-ns", type=int, nargs="*", default=[1000, 2000, 4000])
    parser.add_argument("--n-centres", type=int, default=1000, help="M, Nyström centres of rffor and scikit-learn")
    parser.add_argument("--draws", type=int, default=3, help="draws of the centres on clean data at --draw-ns")
    parser.add_argument("--draw-ns", type=int, nargs="*", default=[100_000],
                        help="clean sizes where both methods also run with other draws of their centres")  # fmt: skip
    parser.add_argument(
        "--exact-extensions",
        type=int,
        default=12,
        help="extensions of the exact solver's λ and κ grids past a winning end, at most",
    )
    parser.add_argument("--verbose", type=int, default=1, help="rffor's progress messages (0: none)")
    parser.add_argument("--cluster-min-n", type=int, default=100_000, help="fit on a 2-worker LocalCluster from n")
    parser.add_argument("--store-n", type=int, default=0, help="also fit n rows from a Zarr store (0: no)")
    parser.add_argument("--store-dir", type=Path, default=None)
    parser.add_argument("--n-test", type=int, default=2000)
    parser.add_argument("--name", default="",
                        help="save the results as benchmarks/results/learning_curve_NAME.json (runs of different "
                        "sizes side by side, merged by --report-only)")  # fmt: skip
    parser.add_argument("--report-only", type=Path, nargs="+", default=None,
                        help="rebuild the README block and figure from these results JSON files (their records "
                        "merged; no fitting)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.report_only is not None:
        runs = [json.loads(p.read_text()) for p in args.report_only]
        records = [r for run in runs for r in run["records"]]
        fig = figure_path("learning_curve", False)
        plot(records, fig, args.n_centres)
        text = report(records, args, runs[0]["info"], fig, runs[0].get("argv"))
        text += "\n\n" + _runs_note(runs)
        if not args.no_readme:
            write_section("learning_curve", text, args.readme)
        print(text)
        return 0
    limit_blas_threads(args.threads)
    if args.quick:
        args.ns, args.clean_ns, args.exact_ns, args.n_test, args.n_centres = [3000, 10_000], [10_000], [500], 300, 300
        args.draw_ns, args.draws = [10_000], 2
        args.exact_extensions = 2
        args.cluster_min_n = 10_000
    info = machine_info(args.threads)
    X_test, Y_test = test_set(args.seed, args.n_test)
    records = []
    t0 = time.perf_counter()
    partial = "learning_curve_quick" if args.quick else "learning_curve_partial"

    def keep(rec):  # every record saved as it comes: a long run stopped midway keeps what it measured
        if rec["method"] != "exact":
            rec.setdefault("n_centres", args.n_centres)
        records.append(rec)
        save_json(partial, dict(info=info, records=records))

    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        for n in args.exact_ns:
            X, Y = training(args.seed, n)
            keep(exact(X, Y, X_test, Y_test, args, n))
            print(f"  exact n={n}: {records[-1]}", flush=True)
        for n in args.ns:
            X, Y = training(args.seed, n)
            on = client if n >= args.cluster_min_n else None
            keep(rffor_robust(X, Y, X_test, Y_test, args, on, n))
            print(f"  rffor n={n}: NMSE {records[-1]['nmse']:.3g}, {records[-1]['seconds']:.1f} s", flush=True)
            keep(nystroem_ridge(X, Y, X_test, Y_test, args, n, "corrupted", check=n == args.ns[0]))
            print(f"  nystroem+ridge n={n}: NMSE {records[-1]['nmse']:.3g}, {records[-1]['seconds']:.1f} s", flush=True)
            del X, Y
            gc.collect()
        for n in args.clean_ns:
            X, Y = training(args.seed, n, clean=True)
            on = client if n >= args.cluster_min_n else None
            rec, centres = rffor_square(X, Y, X_test, Y_test, args, on, n)
            keep(rec)
            keep(nystroem_ridge(X, Y, X_test, Y_test, args, n, "clean"))
            keep(nystroem_ridge(X, Y, X_test, Y_test, args, n, "clean", centres=centres))
            f, b, c = records[-3:]
            print(f"  clean n={n}: rffor {f['nmse']:.3g} in {f['seconds']:.1f} s, Nystroem+Ridge {b['nmse']:.3g} "
                  f"in {b['seconds']:.1f} s, on rffor's centres {c['nmse']:.3g}", flush=True)  # fmt: skip
            if n in args.draw_ns:  # the spread of both over other draws of their centres (same rows, same test)
                for draw in range(1, args.draws):
                    keep({**rffor_square(X, Y, X_test, Y_test, args, on, n, draw)[0], "method": "rffor_draw"})
                    keep({**nystroem_ridge(X, Y, X_test, Y_test, args, n, "clean", draw=draw),
                          "method": "nystroem_ridge_draw"})  # fmt: skip
                    print(f"  clean n={n} draw {draw}: rffor {records[-2]['nmse']:.3g}, Nystroem+Ridge "
                          f"{records[-1]['nmse']:.3g}", flush=True)  # fmt: skip
            del X, Y
            gc.collect()
        if args.store_n:
            store_dir = Path(tempfile.mkdtemp(prefix="rffor-lc-", dir=args.store_dir))
            try:
                c = curves(args.seed)
                ds, write_s = write_zarr_blocks(
                    store_dir / "train.zarr", args.store_n, BLOCK, lambda k, rows: block(args.seed, k, rows),
                    c.components_in.shape[1], c.components_out.shape[1],
                )  # fmt: skip
                rec = rffor_robust(ds, None, X_test, Y_test, args, client, args.store_n)
                rec.update(zarr=True, write_seconds=write_s)
                keep(rec)
                print(f"  rffor Zarr n={args.store_n}: NMSE {rec['nmse']:.3g}, {rec['seconds']:.1f} s", flush=True)
            finally:
                shutil.rmtree(store_dir, ignore_errors=True)
    wall = time.perf_counter() - t0
    fig = figure_path("learning_curve", args.quick)
    plot(records, fig, args.n_centres)
    save_json(
        "learning_curve_quick" if args.quick else "learning_curve" + (f"_{args.name}" if args.name else ""),
        dict(info=info, args={k: str(v) for k, v in vars(args).items()}, argv=sys.argv, records=records,
             wall_seconds=wall),
    )  # fmt: skip
    if not args.no_readme and not args.quick:
        write_section("learning_curve", report(records, args, info, fig), args.readme)
    print(report(records, args, info, fig))
    return 0


def _runs_note(runs) -> str:
    """Which run measured what: the command, date, load and wall time of every results file merged."""
    lines = ["The runs this block merges (records unchanged, `--report-only` over their results files):", ""]
    for run in runs:
        what = sorted({(r["method"], r["data"]) for r in run["records"]})
        ns = sorted({r["n"] for r in run["records"]})
        lines.append(
            f"- `python {' '.join(run.get('argv') or ['?'])}` ({run['info'].get('date', '?')}, "
            f"{run.get('wall_seconds', float('nan')) / 60:.1f} min, load average at the start "
            f"{run['info'].get('load_avg_1_5_15', ['?'])[0]}): " + ", ".join(f"{m} {d}" for m, d in what)
            + " at n = " + ", ".join(f"{n:,}" for n in ns)
        )  # fmt: skip
    return "\n".join(lines)


def centres_of(rec, default: int) -> int | None:
    """M of a record (None for the exact solver); records before it was saved used the default 1000."""
    return None if rec["method"] == "exact" else rec.get("n_centres", default)


def report(records, args, info, fig, argv=None) -> str:
    more = [r for r in records if centres_of(r, 1000) not in (None, args.n_centres)]
    records = [r for r in records if r not in more]
    get = {(r["method"], r["data"], r["n"]): r for r in records}
    rows, learn = [], []
    for n in sorted({r["n"] for r in records if r["data"] == "corrupted"}):
        e, f, b = (get.get((k, "corrupted", n)) for k in ("exact", "rffor", "nystroem_ridge"))
        rows.append([
            f"{n:,}" + (" (Zarr)" if f and f.get("zarr") else ""),
            f"{fmt(e['nmse'])} ({fmt(e['seconds'])} s; κ {e['kappa']:.3g}, λ {e['lam']:.0e}; {e['candidates']} "
            f"candidates, {e.get('not_converged', 0)} at max_iter)" if e else "—",
            f"{fmt(f['nmse'])} ({fmt(f['seconds'])} s; κ {f['kappa']:.3g}, λ {f['lam']:.0e}"
            + (f", γ_Θ {f['gamma_theta']:.3g}" if "gamma_theta" in f else "")
            + f"; {f['candidates']} candidates, {f['path_passes']} + {f['refit_passes']} passes)" if f else "—",
            f"{fmt(b['nmse'])} ({fmt(b['seconds'])} s; α {b['alpha']:.0e})" if b else "—",
            fmt(b["nmse"] / f["nmse"], 3) if f and b else "—",
        ])  # fmt: skip
        if f:
            learn.append([f"{n:,}", f"{f.get('selection_rows', n):,}", fmt(f["closed_form_held_out"]),
                          fmt(f["held_out"]), fmt(f.get("start_nmse")), fmt(f["nmse"]),
                          f"{f['objective_start']:.6g} → {f['objective_end']:.6g}"])  # fmt: skip
    clean = []
    for n in sorted({r["n"] for r in records if r["data"] == "clean"}):
        f, b = get.get(("rffor", "clean", n)), get.get(("nystroem_ridge", "clean", n))
        c = get.get(("nystroem_ridge_same_centres", "clean", n))
        if not (f and b):
            continue
        gamma = f" γ_Θ {f['gamma_theta']:.3g}, floor {fmt(f['output_floor'])}" if "gamma_theta" in f else ""
        clean.append([f"{n:,}", f"{fmt(f['nmse'])} (λ {f['lam']:.0e};{gamma})",
                      f"{fmt(b['nmse'])} (α {b['alpha']:.0e})", fmt(f["nmse"] / b["nmse"], 3),
                      f"{fmt(c['nmse'])} (α {c['alpha']:.0e})" if c else "—",
                      fmt(f["nmse"] / c["nmse"], 3) if c else "—",
                      f"{fmt(f['seconds'])} / {fmt(b['seconds'])}", fmt(f["seconds"] / b["seconds"], 3),
                      fmt(b["seconds_final"]), fmt(f["seconds"] / b["seconds_final"], 3)])  # fmt: skip
    draws = []
    for n in sorted({r["n"] for r in records if r["method"] == "rffor_draw"}):
        by = {m: [r["nmse"] for r in records if (r["n"], r["data"]) == (n, "clean") and r["method"] in (m, m + "_draw")]
              for m in ("rffor", "nystroem_ridge")}  # fmt: skip
        draws.append(f"n = {n:,}, {len(by['rffor'])} draws: rffor " + " / ".join(fmt(v) for v in by["rffor"])
                     + f" (mean {fmt(np.mean(by['rffor']))}), Nystroem + ridge "
                     + " / ".join(fmt(v) for v in by["nystroem_ridge"])
                     + f" (mean {fmt(np.mean(by['nystroem_ridge']))}); ratio of the means "
                     + fmt(np.mean(by["rffor"]) / np.mean(by["nystroem_ridge"]), 3))  # fmt: skip
    edges = [f"{r['method']} {r['data']} n={r['n']:,}" for r in records if r.get("at_edge")]
    floors = []
    if clean:
        from rffor.features import DEFAULT_OUTPUT_RANK_TOL

        for tol in (DEFAULT_OUTPUT_RANK_TOL, 0.0):
            rank, floor = output_floor(args.seed, args.n_test, GAMMA_THETA, tol)
            floors.append(f"{fmt(floor)} at tol = {tol:g} (rank {rank})")
    return "\n".join(
        [
            "### Learning curve: more data, better model",
            "",
            provenance(info, argv, load_end=None if argv else os.getloadavg()),
            "",
            f"Nonlinear synthetic curves (MATH.md §7, m = 100, d = 100), {OUTLIERS:.0%} Type 2 outliers in training, "
            f"{args.n_test} clean test curves; γ_X = {GAMMA_X:g}, γ_Θ = {GAMMA_THETA:g} (rffor large scale: the "
            "start of its walk). Every hyperparameter selected "
            "by the library's rule on the same held-out curves (one in ten, hashed): median held-out curve MSE (mean "
            "on clean data), a walk from the best value of a starting grid to its neighbours while a step improves "
            "the score by ≥ 1%, past the grid's ends; the winner refitted on all rows. rffor large scale: "
            f"`FunctionalRegressor(Huber({KAPPA0:g}, 2), solver='rff', input_features='nystrom', n_features_x="
            f"{args.n_centres}, lam='auto', loss_params='auto', kernel_theta_params='auto')` (λ from the closed forms "
            f"of 1e-2 … 1e-12, κ from {KAPPA0:g} and γ_Θ from {GAMMA_THETA:g} by half decades; MM passes; exact "
            "output factor; closed forms from the features' TSQR factor), on a LocalCluster of 2 workers × 1 thread "
            f"from n = {args.cluster_min_n:,} (in process below). Exact: `FunctionalRegressorCV(Huber({KAPPA0:g}, 2), "
            "loss_params='auto', cv=PredefinedSplit(the same held-out curves))` (ADMM to a relative gap of 1e-6 or "
            f"2000 iterations; λ 1e-6 … 1e-12 and κ {KAPPA0:g}/√10 … {KAPPA0:g}·√10, each extended past a winning end "
            f"at most {args.exact_extensions} times; γ_Θ stays {GAMMA_THETA:g}: FunctionalRegressorCV does not "
            "search it). scikit-learn: `Nystroem(M = "
            f"{args.n_centres})` features and a ridge regression per output (α from 1e-8 … 1e2 by the same walk; "
            "the solutions of `Ridge(solver='svd')`, computed block by block by a QR factorisation, checked equal on "
            f"{min([20_000, *args.ns[:1]]):,} rows), "
            f"BLAS threads {args.threads}. Times include selection.",
            "",
            "Corrupted training data, test NMSE (time; selection):",
            "",
            markdown_table(
                ["n", "exact (ADMM)", "rffor large scale", "Nystroem + ridge", "Nystroem+ridge / rffor"], rows
            ),  # fmt: skip
            *[
                f"\nThe {r['n']:,} curves of the Zarr row were written to the store (float32, chunks of {BLOCK:,} "
                f"curves) by Dask in {r['write_seconds']:.0f} s before the fit, not counted in its time; the fit "
                "read them from disk on the workers."
                for r in records
                if r.get("zarr") and "write_seconds" in r
            ],
            "",
            "What the passes on the workers bring (rffor large scale; every pass runs there): the selection's curves "
            "(whole chunks, up to 200,000 curves, 90% of them for training), the held-out median curve MSE of the "
            "best square-loss closed form (one pass of feature sums) and of the selected robust candidate (MM "
            "passes), the clean test NMSE of that candidate (fitted on the selection's training curves) and of the "
            "final model (MM passes on all n curves from it), and the objective J of that final fit at its start "
            "and end:",
            "",
            markdown_table(
                [
                    "n",
                    "selection curves",
                    "closed form, held-out",
                    "robust candidate, held-out",
                    "candidate, test NMSE",
                    "final, test NMSE",
                    "J start → end",
                ],
                learn,
            ),  # fmt: skip
            "",
            "Clean training data, square loss (the simple alternative at the same feature budget):",
            "",
            markdown_table(
                [
                    "n",
                    "rffor square",
                    "Nystroem + ridge",
                    "NMSE ratio rffor / N+R",
                    "N+R on rffor's centres",
                    "NMSE ratio rffor / N+R same centres",
                    "time with selection rffor / N+R (s)",
                    "ratio",
                    "N+R one fit at its α (s)",
                    "rffor with selection / N+R one fit",
                ],
                clean,
            ),  # fmt: skip
            "",
            "Each method's centres are a uniform draw of M rows (rffor: `random_state`; scikit-learn: its own "
            "`random_state`); which draw is better varies, so the same fit on rffor's centres (column 5) compares "
            "the fits alone, and other draws (`random_state` + 1, + 2, …; same rows, same test curves) show how much "
            "a draw moves either: " + ("; ".join(draws) if draws else "not run") + ".",
            "",
            "rffor's output factor keeps the eigenvectors of K_Θ on the grid whose eigenvalue exceeds tol × the "
            "largest (the default tol = 1e-15; Nystroem + ridge fits each of the m outputs on its own). The best "
            "test NMSE any model in that span can reach (the clean test curves projected on it) is the floor in the "
            f"rffor column for the selected γ_Θ; at the starting γ_Θ = {GAMMA_THETA:g} it is "
            + ("; ".join(floors) or "—")
            + ": k_Θ = Gaussian(100) is smoother than these curves (their roughest GP component has length scale "
            "0.05, i.e. γ = 200), which is why the selection raises γ_Θ.",
            "",
            *more_centres(more, get, args.n_centres),
            "Selections at a bound or grid edge after extension: " + (", ".join(edges) if edges else "none") + ".",
            "",
            f"![learning curve](figures/{Path(fig).name})",
        ]
    )


def more_centres(more, get, M0: int) -> list[str]:
    """The runs with another M (``--n-centres``) beside the same n at M0: is the feature budget the limit?"""
    rows = []
    for n, data, M in sorted({(r["n"], r["data"], r["n_centres"]) for r in more}):
        for method in ("rffor", "nystroem_ridge"):
            r, r0 = next((r for r in more if (r["method"], r["data"], r["n"], r["n_centres"]) == (method, data, n, M)),
                         None), get.get((method, data, n))  # fmt: skip
            if r is not None:
                rows.append([f"{n:,}", data, method, f"{fmt(r0['nmse'])} ({fmt(r0['seconds'])} s)" if r0 else "—",
                             f"{fmt(r['nmse'])} ({fmt(r['seconds'])} s)" + (f"; κ {r['kappa']:.3g}, λ {r['lam']:.0e}"
                             if "kappa" in r else "") + (f", γ_Θ {r['gamma_theta']:.3g}" if "gamma_theta" in r
                             else "") + (f"; α {r['alpha']:.0e}" if "alpha" in r else ""),
                             fmt(r["nmse"] / r0["nmse"], 3) if r0 else "—"])  # fmt: skip
    if not rows:
        return []
    Ms = sorted({r["n_centres"] for r in more})
    return [
        f"The same fits with M = {', '.join(map(str, Ms))} centres instead of {M0} (test NMSE (time with "
        "selection); same rows, same test curves, every hyperparameter selected again):",
        "",
        markdown_table(["n", "data", "method", f"M = {M0}", "M = " + "/".join(map(str, Ms)), "ratio"], rows),
        "",
    ]


if __name__ == "__main__":
    raise SystemExit(main())
