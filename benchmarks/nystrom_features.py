"""Nyström feature pass (issue 25, item 3): rows/s against M, before and after, beside the machine's GEMM ceiling;
and what the kernel's precision does to the fits' accuracy.

    python benchmarks/nystrom_features.py                       # timing, M = 1000 … 8000 (about 20 min, quiet machine)
    python benchmarks/nystrom_features.py --part accuracy       # fits on clean and noisy curves (about 15 min)
    python benchmarks/nystrom_features.py --part pass           # an MM gradient pass, M = 1000 … 8000 (about 10 min)
    python benchmarks/nystrom_features.py --quick               # every part, small, for a smoke test

**Timing.** The pass the fits run (``NystromFeatures.transform`` of a block of 4096 rows, as
``rffor.solvers.rff.feature_sums`` and ``rffor.solvers.mm.grad_task`` call it) on the inputs of
benchmarks/learning_curve.py (d = 100, float32 rows, Gaussian γ_X = 0.01), M centres drawn from the same rows, in
float64 (the Nyström default), with the output block preallocated. Three passes, timed in the same run:

- **before**: the code of rffor 7bdff5f, kept here as :func:`reference_transform`: ``k(X, C)`` from one GEMM and
  six in-place passes into a (rows, M) scratch, then the product by the dense (M, M) eigen whitening
  ``U diag(s̃)^{-1/2}``; the Laplacian kernel through ``Kernel.gram`` (``scipy.spatial.distance.cdist``).
- **after**: the library's ``transform`` (rffor.features): ``k(X, C)`` of centred rows from one GEMM and the
  kernel's profile in place in the output (``Kernel.gram_block``), then the triangular whitening ``R⁻ᵀ`` (R the
  Cholesky factor of the floored K_MM) solved in place: M² flops a row instead of 2M².
- **float32 kernel**: the after pass with ``k(X, C)`` evaluated in float32 and whitened in float64 (the option the
  issue names; it is not in the library: see the accuracy part).

Beside them, the **GEMM ceiling** of the pass, from products of the same shapes timed in the same run: the
before pass's GEMMs are ``(rows, d)·(d, M)`` and ``(rows, M)·(M, M)``, so its ceiling is ``rows / (t₁ + t₂)``; the
after pass does the flops of ``t₁ + t₂ / 2`` at the same rate (a triangular solve of M² flops a row). dgemm's and
sgemm's GFLOP/s on the (rows, M)·(M, M) product are printed as the machine's peak. Each thread count runs with the
BLAS limited to it; rows/s per core = rows/s of the wall clock / threads; CPU-time rows/s is in the JSON. Each time
is the median of ``--repeats`` passes after one warm-up. The extra memory of a pass beyond its output (tracemalloc
peak, NumPy's allocations) is reported too.

**Accuracy.** ``FunctionalRegressor(Square(), solver="rff", input_features="nystrom", lam="auto",
kernel_theta_params="auto")`` on n = 2·10⁴ training curves of the learning curve's generator, M = 1000, with each
feature pass of the timing (patched in for the fit), on clean curves and with Gaussian noise of 1% and 10% of the
signal's energy (no outliers); test NMSE on 2000 clean curves at the λ and γ_Θ each fit selects on its held-out
curves, and at those of the before pass (a fit with λ and γ_Θ fixed), so the feature pass alone differs.

**MM gradient pass.** What a pass over rows beyond the feature cache costs (the refit's passes over 10⁶ or 10⁷
curves): ``rffor.solvers.mm.grad_task`` (H_κ^2, κ = 0.01) on one chunk of ``--pass-rows`` rows of the same inputs
with noisy outputs (m = 100, the exact factor of a Gaussian k_Θ with γ_Θ = 316), no cache, one BLAS thread, timed
in the same run:

- **before**: the pass multiplying the whitened features ``φ_X = k(X, C) R⁻¹`` (the route of rffor 2301e8d, kept
  here as a map that hides its kernel basis from the pass): ``2 M d + M² + 4 M D_θ`` flops a row;
- **after**: the library's pass on the kernel basis (``FitMaps.basis_block``: ``k(X, C)`` against ``R⁻¹ B``, the
  sums mapped back by ``R⁻ᵀ`` once per task; FALKON's parametrisation, MATH.md §5.1): ``2 M d + 4 M D_θ``.

Writes the ``nystrom-features``, ``nystrom-accuracy`` and ``nystrom-pass`` blocks of benchmarks/README.md and
benchmarks/results/nystrom_features[_accuracy][_quick].json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import tracemalloc
import warnings
from pathlib import Path
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    README,
    RESULTS,
    ForeignCPU,
    limit_blas_threads,
    machine_info,
    markdown_table,
    provenance,
    save_json,
    write_section,
)

import rffor.features  # noqa: E402
from rffor._linalg import solve_upper_right  # noqa: E402
from rffor.features import NystromFeatures  # noqa: E402
from rffor.kernels import Gaussian, Laplacian  # noqa: E402
from rffor.losses import Square  # noqa: E402
from rffor.metrics import nmse  # noqa: E402

BEFORE_COMMIT = "7bdff5f"


# --------------------------------------------------------------------------------------------------- the passes
def reference_transform(kernel, centres, projection, X, out=None, work=None):
    """``NystromFeatures.transform`` of rffor 7bdff5f (the eigen whitening), verbatim but for the attribute reads:
    k(X, C) into ``work`` (Gaussian: one GEMM and six passes; other kernels: ``kernel.gram``), then
    ``out = work @ projection``."""
    X = np.ascontiguousarray(X, dtype=projection.dtype)
    n, M = X.shape[0], centres.shape[0]
    norms = np.einsum("ij,ij->i", centres, centres)
    if out is None:
        out = np.empty((n, M), dtype=projection.dtype)
    if work is None:
        work = np.empty((min(max(n, 1), 4096), M), dtype=projection.dtype)
    block = max(1, work.shape[0])
    gamma = getattr(kernel, "gamma", None)
    gaussian = getattr(kernel, "name", "") == "gaussian"
    for s in range(0, n, block):
        e = min(s + block, n)
        K = work[: e - s]
        if gaussian:
            np.matmul(X[s:e], centres.T, out=K)
            K *= -2.0
            K += np.einsum("ij,ij->i", X[s:e], X[s:e])[:, None]
            K += norms[None, :]
            np.maximum(K, 0.0, out=K)
            K *= -gamma
            np.exp(K, out=K)
        else:
            K[...] = kernel.gram(X[s:e], centres)
        np.matmul(K, projection, out=out[s:e])
    return out


def float32_kernel_transform(f: NystromFeatures, X, out=None, work=None):
    """The after pass with the kernel block in float32: ``k(X, C)`` of the centred rows in float32
    (``Kernel.gram_block``), cast to float64 and whitened by the float64 triangular factor."""
    C = f.centres.astype(np.float64)
    shift = C.mean(axis=0)
    C32 = np.ascontiguousarray(C - shift, dtype=np.float32)
    norms32 = np.einsum("ij,ij->i", C32, C32)
    n, M = X.shape[0], f.n_centres
    if out is None:
        out = np.empty((n, M))
    rows = min(max(n, 1), 4096) if work is None else work.shape[0]
    K32 = np.empty((min(rows, n), M), dtype=np.float32)
    A32 = np.empty((min(rows, n), C.shape[1]), dtype=np.float32)
    for s in range(0, n, rows):
        e = min(s + rows, n)
        A = np.subtract(X[s:e], shift, out=A32[: e - s])
        f.kernel.gram_block(A, C32, K32[: e - s], b_sqnorms=norms32)
        out[s:e] = K32[: e - s]
        solve_upper_right(out[s:e], f.factor)
    return out


class BeforeFeatures(NystromFeatures):
    """The map of rffor 7bdff5f: eigen whitening, :func:`reference_transform` (patched into the fits)."""

    def __init__(self, kernel, centres, *, dtype=np.float64, tol=None, whitening="eigen"):
        super().__init__(kernel, centres, dtype=dtype, tol=tol, whitening="eigen")

    def transform(self, X, *, out=None, work=None):
        return reference_transform(self.kernel, self.centres, self.projection, X, out, work)


class Float32KernelFeatures(NystromFeatures):
    """The triangular map with its kernel block evaluated in float32 (patched into the fits)."""

    def transform(self, X, *, out=None, work=None):
        return float32_kernel_transform(self, np.asarray(X), out, work)


VARIANTS = {"before": BeforeFeatures, "after": NystromFeatures, "float32 kernel": Float32KernelFeatures}


# ------------------------------------------------------------------------------------------------------- timing
def _time(fns: dict, repeats: int) -> dict:
    """Median wall and CPU seconds of each ``fns[name]()``, timed in interleaved rounds (one call of each per
    round, after one warm-up call of each), so that a change of the machine's load hits every pass alike."""
    for fn in fns.values():
        fn()  # warm-up: page faults of first touches, BLAS buffers
    wall = {k: [] for k in fns}
    cpu = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            w, c = time.perf_counter(), time.process_time()
            fn()
            wall[k].append(time.perf_counter() - w)
            cpu[k].append(time.process_time() - c)
    return {k: {"wall": statistics.median(wall[k]), "cpu": statistics.median(cpu[k]), "walls": wall[k]} for k in fns}


def _extra_memory(fn) -> float:
    """Peak MiB NumPy allocates during ``fn()`` beyond what is live before it (tracemalloc)."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return (peak - base) / 2**20


def wait_for_quiet(max_load: float | None, max_wait: float) -> float:
    """Sleep until the 1-minute load average is at most ``max_load`` (None: do not wait), at most ``max_wait``
    seconds; returns the seconds waited. The machine is shared: a timing starts in a quiet moment, and its table
    row states the load at its start and end either way."""
    waited = 0.0
    while max_load is not None and os.getloadavg()[0] > max_load and waited < max_wait:
        time.sleep(15)
        waited += 15
    return waited


def inputs(seed: int, n: int) -> np.ndarray:
    """Rows of the learning curve's training stream (benchmarks/learning_curve.py), float32, d = 100."""
    import learning_curve as lc

    return lc.training(seed, 0, n, 0.0, outliers=False)[0]  # draw 0, no noise, no outliers


def measure(kernel, C: np.ndarray, Xb: np.ndarray, args) -> list[dict]:
    """The records of one kernel and set of centres C (one per thread count)."""
    rows, M = Xb.shape[0], C.shape[0]
    with limit_blas_threads(max(args.threads)):
        tic = time.perf_counter()
        before = NystromFeatures(kernel, C, whitening="eigen")
        t_eigen = time.perf_counter() - tic
        tic = time.perf_counter()
        after = NystromFeatures(kernel, C)
        t_tri = time.perf_counter() - tic
    # as the fits call them: a block of rows in, a new feature block out (no out=, no work=)
    passes = {
        "before": lambda: reference_transform(kernel, before.centres, before.projection, Xb),
        "after": lambda: after.transform(Xb),
    }
    if kernel.name == "gaussian":
        passes["float32 kernel"] = lambda: float32_kernel_transform(after, Xb)
    output_mib = rows * M * 8 / 2**20
    memory = {k: _extra_memory(fn) - output_mib for k, fn in passes.items()}
    # products of the pass's shapes, (rows, d)(d, M) and (rows, M)(M, M), into preallocated outputs
    A1 = np.ascontiguousarray(Xb, dtype=np.float64)
    C1 = np.ascontiguousarray(C, dtype=np.float64)
    K, out, P = np.empty((rows, M)), np.empty((rows, M)), before.projection
    K[...] = 0.5
    K32, P32, out32 = (a.astype(np.float32) for a in (K, P, out))
    records = []
    for threads in args.threads:
        waited = wait_for_quiet(args.max_load, args.max_wait)
        with limit_blas_threads(threads):
            load = os.getloadavg()
            products = {
                "xc": lambda: np.matmul(A1, C1.T, out=K),
                "whitening": lambda: np.matmul(K, P, out=out),
                "whitening_float32": lambda: np.matmul(K32, P32, out=out32),
            }
            timed = _time(products | passes, args.repeats)
            g1, g2, s2 = (timed.pop(k) for k in products)
        rec = {
            "kernel": kernel.name,
            "M": M,
            "d": Xb.shape[1],
            "rows": rows,
            "threads": threads,
            "load_before": list(load),
            "load_after": list(os.getloadavg()),
            "waited_for_quiet_s": waited,
            "build_seconds": {"eigen": t_eigen, "triangular": t_tri},
            "extra_mib": memory,
            "dgemm_gflops": 2 * rows * M * M / g2["wall"] / 1e9,
            "sgemm_gflops": 2 * rows * M * M / s2["wall"] / 1e9,
            "gemm_seconds": {"xc": g1, "whitening": g2, "whitening_float32": s2},
            "ceiling_dense": rows / (g1["wall"] + g2["wall"]),
            "ceiling_triangular": rows / (g1["wall"] + g2["wall"] / 2),
            "passes": {
                k: {**v, "rows_per_s": rows / v["wall"], "rows_per_cpu_s": rows / v["cpu"]} for k, v in timed.items()
            },
        }
        records.append(rec)
        print(
            f"{kernel.name} M={M} threads={threads}: "
            + ", ".join(f"{k} {v['rows_per_s']:,.0f}" for k, v in rec["passes"].items())
            + f" rows/s; ceilings {rec['ceiling_dense']:,.0f} / {rec['ceiling_triangular']:,.0f}; "
            f"dgemm {rec['dgemm_gflops']:.1f} GF/s; load {load[0]:.2f}",
            flush=True,
        )
    return records


def timing(args) -> dict:
    X = inputs(args.seed, args.rows + max(args.centres + args.laplacian_centres))
    Xb, pool = X[: args.rows], X[args.rows :]
    rng = np.random.default_rng(args.seed)
    records = []
    for kernel, Ms in ((Gaussian(0.01), args.centres), (Laplacian(0.1), args.laplacian_centres)):
        for M in Ms:
            records += measure(kernel, pool[rng.choice(pool.shape[0], M, replace=False)], Xb, args)
    return {"records": records}


def render_timing(res: dict, info: dict, argv, load_end) -> str:
    rows = []
    for r in res["records"]:
        p = r["passes"]
        t = r["threads"]
        b, a = p["before"]["rows_per_s"], p["after"]["rows_per_s"]
        f32 = p.get("float32 kernel", {}).get("rows_per_s")
        rows.append(
            [
                r["kernel"],
                r["M"],
                t,
                f"{b / t:,.0f}",
                f"{a / t:,.0f}",
                f"{a / b:.2f}x",
                "–" if f32 is None else f"{f32 / t:,.0f}",
                f"{r['ceiling_dense'] / t:,.0f}",
                f"{100 * b / r['ceiling_dense']:.0f}%",
                f"{100 * a / r['ceiling_dense']:.0f}% / {100 * a / r['ceiling_triangular']:.0f}%",
                f"{r['dgemm_gflops'] / t:.1f} / {r['sgemm_gflops'] / t:.1f}",
                f"{r['extra_mib']['before']:.0f} / {r['extra_mib']['after']:.1f}",
                f"{r['build_seconds']['eigen']:.1f} / {r['build_seconds']['triangular']:.1f}",
                f"{r['load_before'][0]:.2f}–{r['load_after'][0]:.2f}",
            ]
        )
    r0 = res["records"][0]
    head = (
        f"### Nyström feature pass: rows/s against M (issue 25, item 3)\n\n"
        f"`NystromFeatures.transform` of one block of {r0['rows']} rows (d = {r0['d']}, the learning curve's inputs; "
        "float64 features), called as the fits call it (`transform(X_block)`: a new output, no scratch passed), "
        f"median of the run's repeats. **before**: rffor {BEFORE_COMMIT} (GEMM distances, dense eigen whitening "
        "U diag(s̃)^-1/2: 2M² flops a row; Laplacian by cdist); **after**: centred GEMM distances and the kernel's "
        "profile in place in the output, then the triangular whitening R⁻ᵀ solved in place (M² flops a row; the "
        "same Nyström kernel, features rotated by an orthogonal matrix); **float32 kernel**: after, with k(X, C) in "
        "float32. *Ceiling*: rows / (time of the before pass's two GEMMs, (rows, d)(d, M) and (rows, M)(M, M), "
        "timed in the same run into preallocated arrays); after's own ceiling counts half the second GEMM. Rows/s "
        "are per core (wall clock / threads). Extra memory: NumPy's peak beyond the output block (tracemalloc). "
        "Build: seconds to construct the map (eigendecomposition; + QR).\n\n"
    )
    table = markdown_table(
        [
            "kernel",
            "M",
            "threads",
            "before rows/s/core",
            "after rows/s/core",
            "after / before",
            "float32-kernel rows/s/core",
            "GEMM ceiling rows/s/core",
            "before % ceiling",
            "after % ceiling (dense / own)",
            "dgemm / sgemm GFLOP/s/core",
            "extra MiB before / after",
            "build s eigen / triangular",
            "load (1 min)",
        ],
        rows,
    )
    return head + table + "\n\n" + provenance(info, argv, load_end=load_end)


# ----------------------------------------------------------------------------------------------------- accuracy
def _fit(X, Y, M, seed, cls, **kw):
    import learning_curve as lc

    from rffor import FunctionalRegressor

    params = dict(lam="auto", kernel_theta_params="auto") | kw
    est = FunctionalRegressor(
        Square(),
        kernel_x=Gaussian(lc.GAMMA_X),
        kernel_theta=params.pop("kernel_theta", Gaussian(lc.GAMMA_THETA)),
        solver="rff",
        input_features="nystrom",
        n_features_x=M,
        random_state=seed,
        n_partitions=1,
        verbose=0,
        **params,
    )
    from rffor.solvers import maps as solver_maps

    # the name the fit resolves is the one rffor.solvers.maps imported
    with (
        mock.patch.object(rffor.features, "NystromFeatures", cls),
        mock.patch.object(solver_maps, "NystromFeatures", cls),
    ):
        tic = time.perf_counter()
        est.fit(X, Y)
        seconds = time.perf_counter() - tic
    assert type(est.input_features_) is cls
    return est, seconds


def accuracy(args) -> dict:
    import learning_curve as lc

    X_test, Y_test = lc.test_set(args.seed, args.n_test)
    records = []
    for level in args.noise:
        X, Y = lc.training(args.seed, 0, args.n_fit, 0.0, outliers=False)  # draw 0, no noise, no outliers
        if level > 0:  # noise of `level` times the signal's energy (mean square of the clean training curves)
            sd = np.sqrt(level * np.mean(np.square(Y, dtype=np.float64)))
            rng = np.random.default_rng([args.seed, 99, int(level * 1e6)])
            Y = (Y + sd * rng.standard_normal(Y.shape)).astype(np.float32)
        fits = {}
        for name, cls in VARIANTS.items():
            est, seconds = _fit(X, Y, args.fit_centres, args.seed, cls)
            fits[name] = {
                "lam": float(est.lam_),
                "gamma_theta": float(est.kernel_theta_.gamma),
                "nmse": nmse(Y_test, est.predict(X_test)),
                "seconds": seconds,
            }
        ref, pred_before = fits["before"], None
        for name, cls in VARIANTS.items():  # every pass at the before pass's selection
            est, _ = _fit(X, Y, args.fit_centres, args.seed, cls, lam=ref["lam"], kernel_theta_params=None,
                          kernel_theta=Gaussian(ref["gamma_theta"]))  # fmt: skip
            pred = est.predict(X_test)
            pred_before = pred if pred_before is None else pred_before
            fits[name]["nmse_at_before_selection"] = nmse(Y_test, pred)
            # how far the predictions moved from the before pass's (Frobenius, relative)
            fits[name]["prediction_change"] = float(np.linalg.norm(pred - pred_before) / np.linalg.norm(pred_before))
        rec = {"noise": level, "n": args.n_fit, "M": args.fit_centres, "fits": fits}
        records.append(rec)
        print(f"noise {level:g}: " + ", ".join(f"{k} λ={v['lam']:.3g} NMSE {v['nmse']:.4g} "
                                              f"(at before's λ {v['nmse_at_before_selection']:.4g})"
                                              for k, v in fits.items()), flush=True)  # fmt: skip
    return {"records": records, "n_test": args.n_test}


def render_accuracy(res: dict, info: dict, argv) -> str:
    rows = []
    for r in res["records"]:
        for name, f in r["fits"].items():
            rows.append(
                [
                    "clean" if r["noise"] == 0 else f"{100 * r['noise']:g}% of the signal's energy",
                    name,
                    f"{f['lam']:.3g}",
                    f"{f['gamma_theta']:g}",
                    f"{f['nmse']:.4g}",
                    f"{f['nmse_at_before_selection']:.4g}",
                    f"{f['nmse'] / r['fits']['before']['nmse']:.3f}",
                    f"{f['prediction_change']:.1e}",
                    f"{f['seconds']:.0f}",
                ]
            )
    r0 = res["records"][0]
    head = (
        "### Nyström feature pass: accuracy of the fits (issue 25, item 3)\n\n"
        f"Square loss, closed forms, `lam='auto'` and `kernel_theta_params='auto'` (held-out curves of the library's "
        f"rule), n = {r0['n']} training curves of benchmarks/learning_curve.py's generator without outliers, "
        f"M = {r0['M']} Nyström centres (γ_X = 0.01), float64 features; Gaussian noise added to the training curves "
        f"at the stated fraction of their mean square (clean: none); test NMSE on {res['n_test']} clean curves. "
        "Each row's feature pass is patched into the whole fit (selection and refit): *before* = rffor "
        f"{BEFORE_COMMIT}'s eigen whitening, *after* = the library's triangular one, *float32 kernel* = after with "
        "k(X, C) in float32. *At before's selection*: the fit at the λ and γ_Θ the before pass selected; "
        "*prediction change*: ‖ŷ − ŷ_before‖ / ‖ŷ_before‖ over the test curves, both at that selection.\n\n"
    )
    table = markdown_table(
        [
            "training curves",
            "feature pass",
            "λ selected",
            "γ_Θ",
            "test NMSE",
            "NMSE at before's selection",
            "NMSE / before",
            "prediction change",
            "fit s",
        ],
        rows,
    )
    return head + table + "\n\n" + provenance(info, argv)


# --------------------------------------------------------------------------------------------------------- main
# ------------------------------------------------------------------------------------------------- MM gradient pass
class WhitenedOnly:
    """A Nyström map without its kernel basis: the pass multiplies the whitened features (the route before)."""

    def __init__(self, phi: NystromFeatures):
        self.phi, self.dtype, self.n_features = phi, phi.dtype, phi.n_features

    def transform(self, X):
        return self.phi.transform(X)


def mm_pass(args) -> dict:
    from rffor.chunked import ArrayData
    from rffor.features import make_output_features
    from rffor.losses import Huber
    from rffor.solvers.maps import FitMaps
    from rffor.solvers.mm import grad_task

    rows = args.pass_rows
    X = inputs(args.seed, rows + max(args.centres))
    Xp, pool = X[:rows], X[rows:]
    theta = np.linspace(0, 1, 100)
    rng = np.random.default_rng(args.seed)
    Y = rng.normal(size=(rows, theta.size))  # the pass's cost does not depend on the values
    data = ArrayData(Xp, Y, theta, chunk_rows=rows)
    Pt = np.asarray(make_output_features("exact", Gaussian(316.2), theta, dtype=np.float64).transform(theta))
    loss = Huber(0.01, 2)
    records = []
    with limit_blas_threads(1):
        for M in args.centres:
            phi = NystromFeatures(Gaussian(0.01), pool[rng.choice(pool.shape[0], M, replace=False)])
            B = 1e-3 * rng.normal(size=(M, Pt.shape[1]))
            maps = {"before": FitMaps(WhitenedOnly(phi), Pt), "after": FitMaps(phi, Pt)}
            load = [round(x, 2) for x in os.getloadavg()]
            with ForeignCPU() as foreign:  # what other processes took of the machine while the passes ran
                t = _time({k: (lambda m=m, B=B: grad_task(data, 0, [0], m, B, loss)) for k, m in maps.items()},
                          args.repeats)  # fmt: skip
            g = {k: grad_task(data, 0, [0], m, B, loss).g for k, m in maps.items()}
            diff = float(np.abs(g["after"] - g["before"]).max() / np.abs(g["before"]).max())
            records.append(dict(M=M, d=Xp.shape[1], D_theta=int(Pt.shape[1]), rows=rows, seconds=t,
                                rows_per_s={k: rows / v["wall"] for k, v in t.items()}, gradient_rel_diff=diff,
                                foreign_cores=foreign.cores,
                                load_before=load, load_after=[round(x, 2) for x in os.getloadavg()]))  # fmt: skip
            r = records[-1]["rows_per_s"]
            print(f"M = {M}: before {r['before']:,.0f} rows/s, after {r['after']:,.0f} rows/s "
                  f"({r['after'] / r['before']:.2f}x), gradients differ by {diff:.1e}", flush=True)  # fmt: skip
    return {"records": records}


def render_pass(res: dict, info: dict, argv, load_end) -> str:
    r0 = res["records"][0]
    rows = [
        [r["M"], f"{r['rows_per_s']['before']:,.0f}", f"{r['rows_per_s']['after']:,.0f}",
         f"{r['rows_per_s']['after'] / r['rows_per_s']['before']:.2f}x",
         f"{2 * r['M'] * r['d'] + r['M'] ** 2 + 4 * r['M'] * r['D_theta']:.2e} → "
         f"{2 * r['M'] * r['d'] + 4 * r['M'] * r['D_theta']:.2e}",
         f"{r['gradient_rel_diff']:.1e}", f"{r['foreign_cores']:.2f}"]
        for r in res["records"]
    ]  # fmt: skip
    return "\n".join(
        [
            "### MM gradient pass on Nyström features: rows/s against M (issue 25, item 3)\n\n"
            "What every refit pass over rows the feature cache does not hold costs (10⁶ and 10⁷ curves): "
            f"`rffor.solvers.mm.grad_task` (H_κ^2, κ = 0.01) on {r0['rows']:,} rows (d = {r0['d']}, m = 100, "
            f"D_θ = {r0['D_theta']}), Gaussian k_X (γ = 0.01), float64, no feature cache, one BLAS thread, median of "
            f"{res['args']['repeats']} interleaved passes after a warm-up. Before: the pass multiplies the whitened "
            "features k(X, C) R⁻¹ (rffor 2301e8d); after: the kernel basis, k(X, C) against R⁻¹B and the sums mapped "
            "back by R⁻ᵀ once (FALKON's parametrisation, MATH.md §5.1). Rows/s of one core; the flops a row; the "
            "largest difference of the two gradients relative to their largest entry; the CPU other processes used "
            "while the passes ran (/proc/stat, in cores).",
            "",
            markdown_table(
                [
                    "M",
                    "before (rows/s)",
                    "after (rows/s)",
                    "after / before",
                    "flops a row",
                    "gradient diff",
                    "other processes (cores)",
                ],
                rows,
            ),  # fmt: skip
            "",
            provenance(info, argv, load_end=load_end),
        ]
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["timing", "accuracy", "pass", "both"], default="timing",
                        help="both: timing and accuracy")  # fmt: skip
    parser.add_argument("--pass-rows", type=int, default=20_000, help="pass: rows of the chunk a pass reads")
    parser.add_argument("--report-only", action="store_true",
                        help="pass: rebuild its block from results/nystrom_pass.json")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="small sizes, both parts, no README (a smoke test)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--centres", type=int, nargs="+", default=[1000, 2000, 4000, 8000], help="M (Gaussian)")
    parser.add_argument("--laplacian-centres", type=int, nargs="*", default=[1000, 2000], help="M (Laplacian)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="BLAS thread counts to time")
    parser.add_argument("--rows", type=int, default=4096, help="rows of the block (the fits' block: 4096)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-load", type=float, default=None,
                        help="wait before each timing until the 1-min load average is at most this")  # fmt: skip
    parser.add_argument("--max-wait", type=float, default=3600, help="seconds to wait for --max-load at most")
    parser.add_argument("--n-fit", type=int, default=20_000, help="training curves of the accuracy fits")
    parser.add_argument("--fit-centres", type=int, default=1000, help="M of the accuracy fits")
    parser.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.01, 0.1],
                        help="training noise, as a fraction of the signal's energy (0: clean)")  # fmt: skip
    parser.add_argument("--n-test", type=int, default=2000)
    parser.add_argument("--no-readme", action="store_true")
    parser.add_argument("--readme", type=Path, default=README)
    args = parser.parse_args(argv)
    argv_list = ["benchmarks/nystrom_features.py", *(sys.argv[1:] if argv is None else argv)]
    if args.quick:
        args.part, args.centres, args.laplacian_centres, args.rows, args.repeats = "all", [200, 400], [200], 512, 1
        args.pass_rows = 2000
        args.n_fit, args.fit_centres, args.noise, args.n_test = 3000, 200, [0.0, 0.1], 300
    warnings.simplefilter("ignore")
    suffix = "_quick" if args.quick else ""
    if args.part in ("timing", "both", "all"):
        info = machine_info(list(args.threads))
        res = timing(args)
        res["machine"], res["args"] = info, vars(args) | {"readme": str(args.readme)}
        save_json("nystrom_features" + suffix, res)
        body = render_timing(res, info, argv_list, [round(x, 2) for x in os.getloadavg()])
        print(body)
        if not (args.no_readme or args.quick):
            write_section("nystrom-features", body, args.readme)
    if args.part in ("accuracy", "both", "all"):
        limit_blas_threads(max(args.threads))
        info = machine_info(max(args.threads))
        res = accuracy(args)
        res["machine"], res["args"] = info, vars(args) | {"readme": str(args.readme)}
        save_json("nystrom_features_accuracy" + suffix, res)
        body = render_accuracy(res, info, argv_list)
        print(body)
        if not (args.no_readme or args.quick):
            write_section("nystrom-accuracy", body, args.readme)
    if args.part in ("pass", "all"):
        if args.report_only:
            res = json.loads((RESULTS / f"nystrom_pass{suffix}.json").read_text())
            info = res["machine"]
        else:
            info = machine_info(1)
            res = mm_pass(args)
            res["machine"], res["args"], res["argv"] = info, vars(args) | {"readme": str(args.readme)}, argv_list
            res["load_end"] = [round(x, 2) for x in os.getloadavg()]
            save_json("nystrom_pass" + suffix, res)
        argv_run = res.get("argv") or ["benchmarks/nystrom_features.py", "--part", "pass"]  # a run saved before argv
        body = render_pass(res, info, argv_run, res.get("load_end"))
        print(body)
        if not (args.no_readme or args.quick):
            write_section("nystrom-pass", body, args.readme)
    return 0


if __name__ == "__main__":
    sys.exit(main())
