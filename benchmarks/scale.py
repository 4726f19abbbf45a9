"""Time to fit against the number of training curves n: the exact solver against the random-feature solver.

Nonlinear synthetic data of MATH.md §7 (m = 100 output points, 100 input points) with 10% Type 2 outliers in the
training curves; square loss and H_κ^2 (κ = 0.1), Gaussian kernels γ_X = 0.01, γ_Θ = 100; λ chosen by the library
on one training curve in ten held out (the hashed split of ``lam="auto"``), the time of a fit including it.

- Exact solver (ADMM): ``FunctionalRegressorCV`` with that split as its one fold (one eigendecomposition of the
  training rows' Gram matrix for every λ, O(n³) time, O(n²) memory; H_κ^2 adds ADMM iterations of O(n² m) each),
  then the refit on all rows. n doubles until one fit takes longer than ``--max-fit-seconds`` or the Gram matrix
  would not fit in memory; beyond that the time is extrapolated with the O(n³) trend of the measured points.
- Random-feature solver (Nyström features on M centres, exact output factor, ``lam="auto"``): the square loss in
  closed form (one pass of O(n M²)), H_κ^2 by warm-started MM candidates (passes of O(n M D_θ)). n grows tenfold in
  memory up to ``--rff-max-n`` or the same time limit, in one process; ``--rff-store-n`` adds one out-of-core size
  from a Zarr store (benchmarks/learning_curve.py ``--store-n`` fits 10^7 curves on a LocalCluster).

Both are scored on the same 2000 clean test curves where both run. Writes the ``scale`` block of
benchmarks/README.md, benchmarks/figures/scale.png and benchmarks/results/scale.json.

Usage::

    python benchmarks/scale.py            # exact to n = 8000, rff to 10^6 in memory
    python benchmarks/scale.py --quick
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    add_common_args,
    figure_path,
    fmt,
    limit_blas_threads,
    machine_info,
    markdown_table,
    nmse,
    provenance,
    save_json,
    write_section,
    write_zarr_blocks,
)
from sklearn.model_selection import PredefinedSplit  # noqa: E402

from rffor import FunctionalRegressor  # noqa: E402
from rffor.chunked import RowSplit  # noqa: E402
from rffor.datasets import add_outliers, make_synthetic, sample_synthetic  # noqa: E402
from rffor.edge_rule import held_out_statistic  # noqa: E402
from rffor.kernels import Gaussian  # noqa: E402
from rffor.losses import Huber, Square  # noqa: E402
from rffor.model_selection import FunctionalRegressorCV  # noqa: E402

GAMMA_X, GAMMA_THETA = 0.01, 100.0


def available_memory_bytes() -> float:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:  # pragma: no cover
        pass
    return float("inf")


def exact_memory_bytes(n: int, m: int) -> float:
    """Rough peak of an exact fit: K_X, its eigenvectors and the eigh workspace (~3 n² doubles) + O(n m)."""
    return 8.0 * (3 * n * n + 10 * n * m)


def make_data(n: int, n_test: int, seed: int):
    d = make_synthetic(n, n_test, nonlinear=True, random_state=np.random.SeedSequence([seed, 23]))
    Y, _ = add_outliers(d.Y_train, 2, 0.1, random_state=np.random.SeedSequence([seed, 24, n]))
    return d.X_train, Y, d.X_test, d.Y_test


STORE_CHUNK = 100_000


def write_store(path: Path, n: int, seed: int):
    """The training curves of size n as a Zarr store, written block by block by Dask (float32): the curves of
    :func:`make_data` (same seed), new coefficients and 10% Type 2 outliers per block. Returns (Dataset, seconds)."""
    curves = make_synthetic(1, 0, nonlinear=True, random_state=np.random.SeedSequence([seed, 23]))

    def block(k: int, rows: int):
        X, Y = sample_synthetic(
            curves.components_in,
            curves.components_out,
            rows,
            nonlinear=True,
            random_state=np.random.SeedSequence([seed, 25, k]),
        )
        Y, _ = add_outliers(Y, 2, 0.1, random_state=np.random.SeedSequence([seed, 26, k]))
        return X.astype(np.float32), Y.astype(np.float32)

    return write_zarr_blocks(path, n, STORE_CHUNK, block, curves.components_in.shape[1], curves.components_out.shape[1])


def fit_one(loss_name, solver, n, X, Y, X_test, Y_test, args):
    """One fit with λ chosen by the library on one curve in ten held out (the hashed split of ``lam="auto"``):
    ``FunctionalRegressorCV`` with that split as its one fold for the exact solver, ``lam="auto"`` for random
    features; the time includes the selection."""
    loss = Square() if loss_name == "square" else Huber(kappa=args.kappa, p=2)
    kw = dict(kernel_x=Gaussian(GAMMA_X), kernel_theta=Gaussian(GAMMA_THETA))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        if solver == "rff":
            # one partition: in process (a multi-chunk store would otherwise go to an embedded Dask cluster)
            est = FunctionalRegressor(loss, solver="rff", lam="auto", input_features="nystrom",
                                      n_features_x=args.n_features, random_state=0, n_partitions=1, **kw)  # fmt: skip
            est.fit(X, Y) if Y is not None else est.fit(X)
            lam, candidates = est.lam_, len(est.lam_path_["lams"])
        else:
            split = PredefinedSplit(np.where(RowSplit(10, True).mask(0, len(Y)), 0, -1))
            cv = FunctionalRegressorCV(loss, lams=[10.0**-k for k in range(5, 11)], cv=split, solver=solver,
                                       tol=args.tol, max_extensions=8, **kw).fit(X, Y)  # fmt: skip
            est, lam, candidates = cv.best_estimator_, cv.lam_, len(cv.cv_results_["lam"])
        fit_time = time.perf_counter() - t0
    t0 = time.perf_counter()
    Y_hat = est.predict(X_test)
    predict_time = time.perf_counter() - t0
    rec = dict(
        loss=loss_name,
        solver=solver,
        n=n,
        fit_time=fit_time,
        predict_time=predict_time,
        nmse=nmse(Y_test, Y_hat),
        lam=lam,
        candidates=candidates,
        n_iter=int(est.n_iter_),
        warnings=len(caught),
    )
    print(
        f"  {solver:5s} {loss_name:6s} n={n:>8d}: fit {fit_time:8.2f} s, NMSE {rec['nmse']:.4g}, λ {lam:.2g} "
        f"({candidates} candidates)",
        flush=True,
    )
    return rec, Y_hat


def extrapolate(ns, ts, targets):
    """Two extrapolations of the exact solver's time from its largest measured point (n₁, t₁): the O(n³) trend
    ``t₁ (n/n₁)³`` of the eigendecomposition that dominates asymptotically, and the measured power law
    ``t₁ (n/n₁)^s`` with s the log-log slope between the two largest points (smaller while O(n² m) terms
    still matter)."""
    order = np.argsort(ns)
    ns, ts = np.asarray(ns, float)[order], np.asarray(ts, float)[order]
    slope = float(np.log(ts[-1] / ts[-2]) / np.log(ns[-1] / ns[-2])) if len(ns) >= 2 else float("nan")
    n1, t1 = ns[-1], ts[-1]
    return slope, {n: (t1 * (n / n1) ** 3, t1 * (n / n1) ** slope) for n in targets if n > n1}


def plot(records, extrap, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    huber_tex = r"$H_\kappa^2$"
    fig, ax = plt.subplots(figsize=(6, 4))
    style = {
        ("exact", "square"): ("C0", "o", "-"),
        ("exact", "huber2"): ("C0", "s", "--"),
        ("rff", "square"): ("C1", "o", "-"),
        ("rff", "huber2"): ("C1", "s", "--"),
    }
    for (solver, loss), (c, mk, ls) in style.items():
        pts = sorted((r["n"], r["fit_time"]) for r in records if r["solver"] == solver and r["loss"] == loss)
        if pts:
            ax.plot(
                *zip(*pts, strict=True),
                color=c,
                marker=mk,
                ls=ls,
                ms=4,
                label=f"{'exact (admm)' if solver == 'exact' else 'random features'}, "
                f"{'square' if loss == 'square' else huber_tex}",
            )
    n_max = max(r["n"] for r in records)
    for loss, (ns, ts) in extrap.items():  # the O(n³) trend from the largest measured point, up to the largest n run
        ns_plot = [ns[0], n_max] if n_max > ns[0] else ns[:1]
        ts_plot = [ts[0], ts[0] * (n_max / ns[0]) ** 3] if n_max > ns[0] else ts[:1]
        ax.plot(
            ns_plot, ts_plot, color="C0", ls=":", lw=1, label="exact: O(n³) extrapolation" if loss == "square" else None
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("training curves n (m = 100 points each)")
    ax.set_ylabel("fit time (s)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser)
    parser.add_argument("--kappa", type=float, default=0.1)
    parser.add_argument("--tol", type=float, default=1e-6, help="exact solver: relative duality gap")
    parser.add_argument("--n-features", type=int, default=1000, help="rff: Nyström centres M (default 1000)")
    parser.add_argument(
        "--max-fit-seconds",
        type=float,
        default=600.0,
        help="stop growing n for a solver once a fit took, or the next is predicted to take, longer (default 600)",
    )
    parser.add_argument("--exact-max-n", type=int, default=8000)
    parser.add_argument("--rff-max-n", type=int, default=1_000_000, help="rff: largest n in memory")
    parser.add_argument(
        "--rff-store-n",
        type=int,
        default=0,
        help="rff: n fitted from a Zarr store on disk (0: none; benchmarks/learning_curve.py --store-n fits 10^7)",
    )
    parser.add_argument("--store-dir", type=Path, default=None, help="where to write that store (default: tmp)")
    parser.add_argument("--n-test", type=int, default=2000)
    args = parser.parse_args(argv)
    limit_blas_threads(args.threads)
    if args.quick:
        exact_ns, rff_ns, args.n_test = [250, 500, 1000], [1000, 3000], 300
    else:
        exact_ns = [n for n in (500, 1000, 2000, 4000, 8000, 16000, 32000) if n <= args.exact_max_n]
        rff_ns = [n for n in (1000, 2000, 4000, 10_000, 30_000, 100_000, 300_000, 1_000_000) if n <= args.rff_max_n]
    info = machine_info(args.threads)
    m = 100
    t_start = time.perf_counter()
    records, preds, stopped = [], {}, {}
    for solver, ns in (("exact", exact_ns), ("rff", rff_ns)):
        for n in ns:
            if solver == "exact" and exact_memory_bytes(n, m) > 0.8 * available_memory_bytes():
                stopped[solver] = f"n = {n} needs ≈ {exact_memory_bytes(n, m) / 2**30:.1f} GiB"
                break
            X, Y, X_test, Y_test = make_data(n, args.n_test, args.seed)
            too_slow = False
            for loss in ("square", "huber2"):
                rec, Y_hat = fit_one(loss, "admm" if solver == "exact" else "rff", n, X, Y, X_test, Y_test, args)
                rec["solver"] = solver
                records.append(rec)
                preds[(solver, loss, n)] = Y_hat
                too_slow |= rec["fit_time"] > args.max_fit_seconds
            del X, Y
            gc.collect()
            if too_slow:
                stopped[solver] = f"a fit at n = {n} took longer than {args.max_fit_seconds:g} s"
                break
            nxt = [k for k in ns if k > n]
            if nxt:
                worst = max(r["fit_time"] for r in records[-2:])
                growth = 3 if solver == "exact" else 1
                predicted = worst * (nxt[0] / n) ** growth
                if predicted > args.max_fit_seconds:
                    stopped[solver] = (
                        f"the next size n = {nxt[0]} was predicted to take ≈ {predicted:.0f} s per fit "
                        f"(O(n^{growth}) from n = {n}) > {args.max_fit_seconds:g} s"
                    )
                    break
    store_n = 0 if args.quick else args.rff_store_n
    store_info = None
    if store_n:
        X_test, Y_test = make_data(1, args.n_test, args.seed)[2:]
        store_dir = Path(tempfile.mkdtemp(prefix="rffor-scale-", dir=args.store_dir))
        try:
            ds, write_s = write_store(store_dir / "train.zarr", store_n, args.seed)
            store_info = dict(n=store_n, write_seconds=write_s, chunk_rows=STORE_CHUNK)
            print(f"  store of {store_n:,} curves written in {write_s:.0f} s", flush=True)
            for loss in ("square", "huber2"):
                rec, _ = fit_one(loss, "rff", store_n, ds, None, X_test, Y_test, args)
                rec.update(solver="rff", out_of_core=True)
                records.append(rec)
        finally:
            shutil.rmtree(store_dir, ignore_errors=True)
    wall = time.perf_counter() - t_start

    # agreement of the two solvers where both ran (same data: make_data is deterministic in (n, seed))
    for r in records:
        other = preds.get(("rff" if r["solver"] == "exact" else "exact", r["loss"], r["n"]))
        if other is not None:
            r["nmse_between_solvers"] = nmse(other, preds[(r["solver"], r["loss"], r["n"])])

    # extrapolation of the exact solver beyond the measured sizes
    extrap, extrap_rows = {}, []
    targets = [16_000, 32_000, 100_000, 1_000_000]
    for loss in ("square", "huber2"):
        pts = [(r["n"], r["fit_time"]) for r in records if r["solver"] == "exact" and r["loss"] == loss]
        if len(pts) >= 2:
            ns, ts = zip(*pts, strict=True)
            slope, big = extrapolate(ns, ts, targets)
            n1 = max(ns)
            t1 = ts[int(np.argmax(ns))]
            extrap[loss] = ([n1, *big], [t1, *[v[0] for v in big.values()]])
            extrap_rows.append((loss, slope, big))
    fig_path = figure_path("scale", args.quick or args.no_readme)
    plot(records, extrap, fig_path)
    save_json(
        "scale_quick" if args.quick else "scale",
        dict(
            info=info,
            args={k: v for k, v in vars(args).items() if k != "readme"},
            records=records,
            store=store_info,
            stopped=stopped,
            wall_seconds=wall,
        ),
    )

    # tables
    ns_all = sorted({r["n"] for r in records})
    get = {(r["solver"], r["loss"], r["n"]): r for r in records}
    rows = []
    for n in ns_all:
        row = [f"{n:,}" + (" (Zarr store)" if store_info and n == store_info["n"] else "")]
        for solver in ("exact", "rff"):
            for loss in ("square", "huber2"):
                r = get.get((solver, loss, n))
                row.append(f"{fmt(r['fit_time'])} s / {fmt(r['nmse'])} / {r['lam']:.0e}" if r else "—")
        r_e, r_f = get.get(("exact", "huber2", n)), get.get(("rff", "huber2", n))
        row.append(fmt(r_e["fit_time"] / r_f["fit_time"], 2) if r_e and r_f else "—")
        rows.append(row)
    headers = [
        "n",
        "exact square: fit / NMSE / λ",
        "exact H_κ^2",
        "rff square",
        "rff H_κ^2",
        "exact / rff time (H_κ^2)",
    ]
    lines = [
        "### Scale: time to fit against n",
        "",
        provenance(info, load_end=os.getloadavg()),
        "",
        f"Nonlinear synthetic data (MATH.md §7), m = 100, 10% Type 2 outliers in training, {args.n_test} clean test "
        f"curves; H_κ^2 with κ = {args.kappa:g}; λ chosen on one training curve in ten held out (the hashed split "
        f"of `lam='auto'`; the {held_out_statistic(Huber(args.kappa, 2))} of the held-out curves' MSE for H_κ^2 "
        f"(`rffor.edge_rule.held_out_statistic`), the mean for the square loss): exact solver ADMM to a "
        f"relative gap of {args.tol:g} with `FunctionalRegressorCV(lams=1e-5 … 1e-10, cv=PredefinedSplit(that "
        "split))`, edges extended; rff: Nyström features on "
        f"{args.n_features} centres, exact output factor, `lam='auto'` (closed forms for the square loss, "
        "warm-started MM candidates for H_κ^2, refit on all rows). Cells: wall time of fit including the selection "
        "/ clean test NMSE / selected λ. Single process, BLAS threads as below; the machine was shared, so read "
        "times as ratios within this table."
        + (
            f" The n = {store_info['n']:,} row is fitted out of core from a Zarr store (float32, chunks of "
            f"{store_info['chunk_rows']:,} curves, written in {store_info['write_seconds']:.0f} s by Dask from the "
            "same curves with coefficients and 10% Type 2 outliers drawn per chunk), in the same single process."
            if store_info
            else ""
        ),
        "",
        markdown_table(headers, rows),
        "",
    ]
    if stopped:
        lines.append("Stopped: " + "; ".join(f"{k}: {v}" for k, v in stopped.items()) + ".")
    for loss, slope, big in extrap_rows:
        lines.append(
            f"Exact {'square' if loss == 'square' else 'H_κ^2'}: log-log slope {slope:.2f} between the two largest "
            "measured sizes; extrapolated fit time (O(n³) from the largest point / measured slope) "
            + ", ".join(
                f"n = {n:,}: {fmt(a / 3600)} h / {fmt(b / 3600)} h (Gram matrix {8 * n * n / 2**30:.0f} GiB)"
                for n, (a, b) in big.items()
            )
            + "."
        )
    both = [r for r in records if r["solver"] == "rff" and "nmse_between_solvers" in r]
    if both:
        lines.append(
            "Where both ran, the mean squared distance between the two solvers' test predictions "
            "(per point) was "
            + ", ".join(
                f"{'square' if r['loss'] == 'square' else 'H_κ^2'} n = {r['n']:,}: {fmt(r['nmse_between_solvers'])}"
                for r in both
            )
            + "."
        )
    lines += ["", f"Whole run {wall / 60:.1f} min.", "", f"![scale](figures/{fig_path.name})"]
    text = "\n".join(lines)
    print(text)
    if not (args.no_readme or args.quick):
        write_section("scale", text, args.readme)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
