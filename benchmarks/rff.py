"""The random-feature solver (issue 3): DSGD and MM throughput against a ceiling, out-of-core memory and epoch time,
and test error against the number of features next to the exact solver.

    python benchmarks/rff.py                              # throughput, n = 1e5 and 1e6 out of core, accuracy
    python benchmarks/rff.py --sizes 1e5,1e6,1e7          # the issue's full memory table (~6 GB store, ~15 min)
    python benchmarks/rff.py --quick                      # smoke test (about a minute; README untouched)
    python benchmarks/rff.py --parts accuracy --update    # rerun one part, keep the others' saved results

What is measured (single process, ``--threads`` BLAS threads, default 1):

1. **Throughput.** Inputs d = 50, m = 100, D_x = 2000 random Fourier features, exact output factor of a Gaussian
   K_Θ (γ_θ = 30: rank 22), batch 256, float32. The *ceiling* comes from primitives timed in the same run on a
   block of rows: the input feature map once per sample (projection ``X W``, then cos and sin) plus the matrix
   products of the steps (``Φ_b B``, ``· Φ_Θᵀ``, ``G Φ_Θ``, ``Φ_bᵀ ·``). It is compared with a DSGD epoch
   (:func:`rffor.solvers.dsgd.partition_steps` over every chunk of in-memory data, chunks of 20,000 rows as in a
   default Zarr store: the steps of ``rff_method="sgd"``) for the square loss and H_κ^1 / H_κ^2, plain and with
   that route's default preconditioner (rank 50), best of ``--repeats``; then with what fit_rff runs by default
   (``rff_method="auto"``) on the same rows: the square loss's closed-form pass, and MM passes for the Huber
   losses (samples/s per pass from the fit's history).
2. **Out of core.** For each n in ``--sizes`` a Zarr store (x: n × 50, y: n × 100, float32, chunks of 20,000 rows)
   is generated block by block by Dask (:func:`rffor.data.write`) and fitted in a fresh child process with
   :func:`rffor.solvers.rff.fit_rff` (H_κ^2, D_x = 2000, one epoch of DSGD, ``rff_method="sgd"``, one partition,
   that route's defaults: closed-form warm start on 50,000 rows refined by reweighted closed forms, preconditioned
   steps). The child reports its peak
   resident memory (``VmHWM``, see :func:`peak_rss_mib`), the warm start time and the epoch time. A child that
   only imports rffor and opens the store gives the baseline.
3. **Accuracy.** Nonlinear synthetic data (MATH.md §7), n = 2000 training and 1000 test curves, m = 50, noise 0.1,
   Gaussian kernels γ_X = 0.02, γ_Θ = 30, λ = 1e-5, square loss (closed forms): the exact solver
   (:func:`rffor.solvers.closed_form.sylvester_kernel`) against random features with D_x from 250 to 4000 (exact
   output factor) and, at D_x = 2000, random output features with D_θ from 24 to 800; several seeds each.

Results go to ``benchmarks/results/rff[_quick].json`` and the "rff" block of ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    add_common_args,
    fmt,
    limit_blas_threads,
    machine_info,
    markdown_table,
    provenance,
    save_json,
    write_section,
    write_zarr_blocks,
)

from rffor.chunked import ArrayData  # noqa: E402
from rffor.datasets import make_synthetic  # noqa: E402
from rffor.features import ExactOutputFactor, RandomFourierFeatures  # noqa: E402
from rffor.kernels import Gaussian  # noqa: E402
from rffor.losses import Huber, Square  # noqa: E402
from rffor.metrics import nmse  # noqa: E402
from rffor.solvers.closed_form import sylvester_kernel  # noqa: E402
from rffor.solvers.dsgd import Preconditioner, SGDConfig, SGDState, epoch_steps, partition_steps  # noqa: E402
from rffor.solvers.rff import RFF_DEFAULTS, fit_rff  # noqa: E402

D_IN, M, DX, BATCH, CHUNK = 50, 100, 2000, 256, 20_000
GAMMA_X, GAMMA_THETA = 1.0 / D_IN, 30.0


# ---------------------------------------------------------------------------------------------------------------
# synthetic data for throughput and memory: smooth nonlinear curves of 50 inputs
# ---------------------------------------------------------------------------------------------------------------


def _curve_basis(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A fixed random projection (d, 8) and 8 smooth curves on the grid (8, m)."""
    rng = np.random.default_rng([seed, 0])
    A = rng.standard_normal((D_IN, 8)) / np.sqrt(D_IN)
    theta = np.linspace(0, 1, M)
    freq = np.arange(1, 9)[:, None]
    basis = np.sin(np.pi * freq * theta[None, :] + rng.uniform(0, np.pi, (8, 1))) / np.sqrt(freq)
    return A, basis


def block_data(seed: int, block: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of block ``block``: x ~ N(0, I_50), y = tanh(x A) · basis + N(0, 0.1²), float32."""
    A, basis = _curve_basis(seed)
    rng = np.random.default_rng([seed, 1, block])
    X = rng.standard_normal((rows, D_IN), dtype=np.float32)
    Y = np.tanh(X @ A.astype(np.float32)) @ basis.astype(np.float32)
    Y += 0.1 * rng.standard_normal(Y.shape, dtype=np.float32)
    return X, Y.astype(np.float32)


def write_store(path: Path, n: int, seed: int):
    """Generate the store chunk by chunk with Dask (memory bounded by a few chunks), return (Dataset, seconds)."""
    return write_zarr_blocks(path, n, CHUNK, lambda k, rows: block_data(seed, k, rows), D_IN, M)


# ---------------------------------------------------------------------------------------------------------------
# 1. throughput against the ceiling from primitives
# ---------------------------------------------------------------------------------------------------------------


def _timed(fn) -> np.ndarray:
    """(wall seconds, CPU seconds of this process) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return np.array([time.perf_counter() - wall, time.process_time() - cpu])


def throughput(n: int, repeats: int, seed: int, dtype: str = "float32") -> dict:
    """Samples/s of a DSGD epoch and the ceiling from primitives, each timed over the same n rows and
    interleaved in every repeat (so that both see the same machine load); best of ``repeats``."""
    X, Y = block_data(seed, 0, n)
    theta = np.linspace(0, 1, M)
    phi_x = RandomFourierFeatures(Gaussian(GAMMA_X), DX, D_IN, seed=(seed, 0), dtype=dtype)
    phi_t = ExactOutputFactor(Gaussian(GAMMA_THETA), theta, dtype=dtype)
    Pt = phi_t.grid_features
    PtT = np.ascontiguousarray(Pt.T)
    r = Pt.shape[1]
    rows = 4096  # the feature block of partition_steps
    Xc = np.ascontiguousarray(X, dtype=dtype)
    W = phi_x.W
    work = np.empty((rows, DX // 2), dtype=dtype)
    out = np.empty((rows, DX), dtype=dtype)
    Phi = phi_x.transform(Xc[:rows])
    B = np.zeros((DX, r), dtype=dtype)
    G = np.ones((BATCH, M), dtype=dtype) / M

    def projection():
        for s in range(0, n, rows):
            np.matmul(Xc[s : s + rows], W, out=work[: min(rows, n - s)])

    Z = np.matmul(Xc[:rows], W)

    def cos_sin():
        for _ in range(0, n, rows):
            np.sin(Z, out=out[:, DX // 2 :])
            np.cos(Z, out=out[:, : DX // 2])

    def products():
        for s in range(0, n, BATCH):
            Pb = Phi[s % rows : s % rows + BATCH]
            (Pb @ B) @ PtT
            Pb.T @ (G @ Pt)

    data = ArrayData(X, Y, theta, chunk_rows=CHUNK)
    chunks = list(range(data.n_chunks))
    E = epoch_steps(data, chunks, BATCH)
    losses = {"square": Square(), "H_κ^2": Huber(0.1, 2), "H_κ^1": Huber(0.1, 1)}
    # the steps of rff_method="sgd" with its default precondition_rank (fit_rff estimates P on the warm-start rows;
    # here on all n rows) and a step size as fit_rff would choose it; plain steps (precondition_rank=0) beside them
    Phi_all = np.concatenate([phi_x.transform(Xc[s : s + rows]) for s in range(0, n, rows)]).astype(np.float64)
    precond = Preconditioner.from_gram(Phi_all.T @ Phi_all / n, 1e-5, RFF_DEFAULTS["precondition_rank"], dtype)
    del Phi_all
    configs = {}
    for name, loss in losses.items():
        configs[("plain", name)] = SGDConfig(loss, 1e-5, BATCH, step_size=1.0, dtype=dtype)
        step = 0.99 / max(1.0, precond.trace / BATCH)
        configs[("preconditioned", name)] = SGDConfig(loss, 1e-5, BATCH, step_size=step, dtype=dtype, precond=precond)
    best = {k: np.array([np.inf, np.inf]) for k in ["projection", "cos_sin", "products", *configs]}
    s0 = SGDState.zeros(DX, r, dtype)
    for fn in (projection, cos_sin, products):  # warm up: first touches of the buffers, BLAS start-up
        fn()
    for rep in range(repeats):
        for name, fn in (("projection", projection), ("cos_sin", cos_sin), ("products", products)):
            best[name] = np.minimum(best[name], _timed(fn))
        for key, cfg in configs.items():
            if rep == 0:
                partition_steps(s0, data, chunks[:1], 5, cfg, phi_x, Pt, (seed, 0, 0))  # warm up
            best[key] = np.minimum(
                best[key], _timed(lambda cfg=cfg: partition_steps(s0, data, chunks, E, cfg, phi_x, Pt, (seed, 0, 0)))
            )
    out = {"n": n, "dtype": dtype, "rank": r, "repeats": repeats, "precondition_rank": precond.rank}
    for j, clock in enumerate(("wall", "cpu")):
        per = {k: best[k][j] / n for k in ("projection", "cos_sin", "products")}
        out[clock] = {
            "us_projection": per["projection"] * 1e6,
            "us_cos_sin": per["cos_sin"] * 1e6,
            "us_products": per["products"] * 1e6,
            "ceiling": 1.0 / sum(per.values()),
            "epoch_samples_per_s": {k: n / best[("plain", k)][j] for k in losses},
            "preconditioned_samples_per_s": {k: n / best[("preconditioned", k)][j] for k in losses},
        }
    out["default_route"] = default_route(X, Y, theta, seed, dtype)
    return out


def default_route(X, Y, theta, seed: int, dtype: str) -> dict:
    """What fit_rff does by default (``rff_method="auto"``) on the same rows, in this process: the square loss in
    one pass of feature sums (its closed form), the Huber losses by MM passes from the square-loss closed form.
    Per pass, samples/s from the fit's own history (wall clock); the first MM pass computes the input features and
    fills the feature cache (default 4 GiB), later passes read them from it."""
    data = ArrayData(X, Y, theta, chunk_rows=CHUNK)
    out = {}
    for name, loss in {"square": Square(), "H_κ^2": Huber(0.1, 2), "H_κ^1": Huber(0.1, 1)}.items():
        tic = time.perf_counter()
        res = fit_rff(
            data,
            loss=loss,
            kernel_x=Gaussian(GAMMA_X),
            kernel_theta=Gaussian(GAMMA_THETA),
            lam=1e-5,
            n_features_x=DX,
            dtype=dtype,
            tol=0.0,  # a fixed number of passes to time
            max_passes=5,
            n_partitions=1,
            random_state=seed,
        )
        total = time.perf_counter() - tic
        passes = [h for h in res.history if h["round"] >= 0]
        out[name] = {
            "method": res.method,
            "total_s": total,
            "start_s": total - sum(h["seconds"] for h in passes),
            "closed_form_samples_per_s": res.history[0]["samples_per_s"] if res.method == "closed_form" else None,
            "pass_samples_per_s": [h["samples_per_s"] for h in passes],
        }
    return out


# ---------------------------------------------------------------------------------------------------------------
# 2. out of core: peak memory and epoch time in a child process
# ---------------------------------------------------------------------------------------------------------------


def child_main(spec: dict) -> None:
    """Entry point of the child process: fit (or only open) the store and print one JSON line."""
    limit_blas_threads(spec["threads"])
    import rffor.data

    tic = time.perf_counter()
    ds = rffor.data.open(spec["path"])
    out = {"n": ds.n}
    if spec["fit"]:
        res = fit_rff(
            ds,
            loss=Huber(0.1, 2),
            kernel_x=Gaussian(GAMMA_X),
            kernel_theta=Gaussian(GAMMA_THETA),
            lam=1e-5,
            n_features_x=DX,
            batch_size=BATCH,
            n_epochs=1,
            n_partitions=1,
            rff_method="sgd",  # the DSGD epochs this block measures (the default for H_κ^2 is MM passes)
            random_state=0,
        )
        epoch = res.history[-1]
        out.update(
            total_s=time.perf_counter() - tic,
            epoch_s=epoch["seconds"],
            steps=res.n_iter,
            samples_per_s=ds.n / epoch["seconds"],
            warm_start_s=time.perf_counter() - tic - epoch["seconds"],
            finite=bool(np.isfinite(res.coef).all()),
        )
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out["cpu_s"] = usage.ru_utime + usage.ru_stime
    out["maxrss_mib"] = peak_rss_mib()
    print("RESULT " + json.dumps(out), flush=True)


def peak_rss_mib() -> float:
    """Peak resident memory of this process in MiB: ``VmHWM`` of ``/proc/self/status``.

    ``getrusage(RUSAGE_SELF).ru_maxrss`` is not used as such: Linux carries it over from the parent through
    fork + exec, so a child of a big parent reports the parent's size. ``VmHWM`` belongs to the process's own
    address space, created at exec. Falls back to ru_maxrss where /proc is missing.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:  # pragma: no cover - not Linux
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_child(path: Path, threads: int, fit: bool) -> dict:
    spec = json.dumps({"path": str(path), "threads": threads, "fit": fit})
    proc = subprocess.run([sys.executable, __file__, "--child", spec], capture_output=True, text=True, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise RuntimeError(f"child failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")


def out_of_core(sizes: list[int], store_dir: Path, threads: int, seed: int, keep: bool) -> list[dict]:
    rows = []
    for n in sizes:
        path = store_dir / f"rff_bench_n{n}_s{seed}.zarr"
        ds, write_s = _existing(path, n)
        if ds is None:
            ds, write_s = write_store(path, n, seed)
            print(f"  n = {n:.0e}: store written in {write_s:.0f} s ({ds.n_chunks} chunks)", flush=True)
        base = run_child(path, threads, fit=False)
        res = run_child(path, threads, fit=True)
        res.update(write_s=write_s, baseline_mib=base["maxrss_mib"], store_gb=_dir_size(path) / 1e9)
        print(
            f"  n = {n:.0e}: peak {res['maxrss_mib']:.0f} MiB (baseline {base['maxrss_mib']:.0f}), epoch "
            f"{res['epoch_s']:.1f} s = {res['samples_per_s']:.0f} samples/s",
            flush=True,
        )
        rows.append(res)
        if not keep:
            shutil.rmtree(path, ignore_errors=True)
    return rows


def _existing(path: Path, n: int):
    """A store kept by an earlier run (``--keep-stores``), or (None, None)."""
    import rffor.data

    try:
        ds = rffor.data.open(path)
    except (FileNotFoundError, ValueError):
        return None, None
    return (ds, float("nan")) if ds.n == n else (None, None)


def _dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


# ---------------------------------------------------------------------------------------------------------------
# 3. accuracy against D_x and D_θ
# ---------------------------------------------------------------------------------------------------------------


def accuracy(dx_list, dtheta_list, seeds_x, seeds_theta, seed: int) -> dict:
    d = make_synthetic(2000, 1000, m=50, nonlinear=True, noise=0.1, random_state=seed)
    kx, kt, lam = Gaussian(0.02), Gaussian(GAMMA_THETA), 1e-5
    n, m = d.Y_train.shape
    tic = time.perf_counter()
    A = sylvester_kernel(kx.gram(d.X_train), kt.gram(d.theta), d.Y_train, lam)
    exact_pred = kx.gram(d.X_test, d.X_train) @ A @ kt.gram(d.theta) / (lam * n * m)
    exact = {"nmse": nmse(d.Y_test, exact_pred), "seconds": time.perf_counter() - tic}
    kw = dict(kernel_x=kx, kernel_theta=kt, lam=lam)
    by_dx = []
    for D in dx_list:
        vals, secs, rank = [], [], None
        for s in seeds_x:
            tic = time.perf_counter()
            res = fit_rff((d.X_train, d.Y_train, d.theta), **kw, n_features_x=D, random_state=s)
            secs.append(time.perf_counter() - tic)
            vals.append(nmse(d.Y_test, res.predict(d.X_test)))
            rank = res.output_features.n_features
        by_dx.append({"D_x": D, "D_theta": rank, "nmse": vals, "seconds": float(np.median(secs))})
        print(f"  D_x = {D}: NMSE {np.mean(vals):.4g} (exact {exact['nmse']:.4g})", flush=True)
    by_dtheta = []
    for Dt in dtheta_list:
        vals = []
        for s in seeds_theta:
            res = fit_rff(
                (d.X_train, d.Y_train, d.theta),
                **kw,
                n_features_x=2000,
                output_features="rff",
                n_features_theta=Dt,
                random_state=s,
            )
            vals.append(nmse(d.Y_test, res.predict(d.X_test)))
        by_dtheta.append({"D_theta": Dt, "nmse": vals})
        print(f"  D_θ = {Dt}: NMSE {np.min(vals):.4g}–{np.max(vals):.4g}", flush=True)
    return {"exact": exact, "by_dx": by_dx, "by_dtheta": by_dtheta}


# ---------------------------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------------------------


def report(results: dict) -> str:
    parts = [
        "### Random-feature solver: throughput (DSGD steps and the default MM passes), out-of-core memory, accuracy "
        "against D_x and D_θ (issue 3)",
        "",
    ]
    printed = []

    def origin(part: str) -> list[str]:
        """The provenance of a part (command, machine, load, date), unless the previous part had the same."""
        prov = results.get("provenance", {}).get(part, "")
        minutes = results.get("minutes", {}).get(part)
        if not prov or (printed and printed[-1] == prov):
            return []
        printed.append(prov)
        took = minutes is not None and np.isfinite(minutes)
        return [prov + (f"  \nThis part took {minutes:.1f} min." if took else ""), ""]

    tp = results.get("throughput")
    if tp:
        parts += origin("throughput")

        def three(values: dict, ceiling: float) -> str:
            v = list(values.values())
            return " / ".join(f"{x:,.0f}" for x in v) + f" ({100 * min(v) / ceiling:.0f}–{100 * max(v) / ceiling:.0f}%)"

        rows = []
        for t in tp:
            for clock in ("cpu", "wall"):
                c = t[clock]
                rows.append(
                    [
                        t["dtype"],
                        clock,
                        fmt(c["us_projection"]),
                        fmt(c["us_cos_sin"]),
                        fmt(c["us_products"]),
                        f"{c['ceiling']:,.0f}",
                        three(c["epoch_samples_per_s"], c["ceiling"]),
                    ]
                    + ([three(c["preconditioned_samples_per_s"], c["ceiling"])] if "preconditioned_samples_per_s" in c
                       else ["—"])
                )  # fmt: skip
        parts += [
            f"**Throughput** (d = {D_IN}, m = {M}, D_x = {DX}, exact output factor of rank D_θ = {tp[0]['rank']}, "
            f"in-memory data in chunks of {CHUNK} rows, n = {tp[0]['n']} (float64: n = {tp[-1]['n']}); best of "
            f"{tp[0].get('repeats', results.get('repeats'))}). Everything runs in this one process on one partition: "
            "the DSGD rows time `partition_steps`, the loop a partition task runs on its rows in each round of "
            "`rff_method='sgd'` (batch 256), called directly; the ceiling is 1 / (projection + cos/sin + step "
            "products) per sample, the primitives timed over the same n rows in the same repeats as the epochs. "
            "*Plain* steps are `precondition_rank=0`; *preconditioned* steps are the `rff_method='sgd'` default "
            f"(`precondition_rank={tp[0].get('precondition_rank', 50)}`, P estimated on the n rows; applying P is "
            "not in the ceiling). `cpu` rows use this process's CPU time (robust to other jobs on the machine), "
            "`wall` rows wall-clock time. Cells: samples/s for square / H_κ^2 / H_κ^1 (lowest–highest % of the "
            "ceiling).",
            "",
            markdown_table(
                [
                    "dtype",
                    "clock",
                    "projection µs",
                    "cos+sin µs",
                    "products µs",
                    "ceiling samples/s",
                    "DSGD epoch, plain",
                    "DSGD epoch, preconditioned (sgd default)",
                ],
                rows,
            ),
            "",
        ]
        if any("default_route" in t for t in tp):
            drows = []
            for t in tp:
                ceiling = t["wall"]["ceiling"]
                for name, r in t.get("default_route", {}).items():
                    if r["method"] == "closed_form":
                        drows.append(
                            [t["dtype"], name, "closed form: one pass of feature sums", f"{r['total_s']:.1f}",
                             f"{r['closed_form_samples_per_s']:,.0f} (the closed-form pass)", "—"]
                        )  # fmt: skip
                        continue
                    passes = r["pass_samples_per_s"]
                    drows.append(
                        [
                            t["dtype"],
                            name,
                            f"{r['method'].upper()} passes after the square-loss closed form",
                            f"{r['start_s']:.1f}",
                            f"{np.median(passes):,.0f} ({max(passes):,.0f})",
                            f"{100 * np.median(passes) / ceiling:.0f}%",
                        ]
                    )
            parts += [
                "What `fit_rff` does by default (`rff_method='auto'`) on the same rows, also in this process "
                "(`n_partitions=1`; on a cluster each pass is a map-reduce over the partitions where the data is): "
                "the square loss in one pass of feature sums and a solve on the driver, the Huber losses by full-batch "
                f"MM passes ({len(passes)} timed, `tol=0`) after that closed form. Start: everything before the first "
                "MM pass (feature maps, the closed form over all n rows, the eigendecomposition of the D_x × D_x "
                "feature covariance for the MM metric). Samples/s per pass from the fit's own history (wall clock). "
                "The closed-form pass computes the input features (and Φ_Xᵀ Φ_X, D_x² per sample) and fills the "
                "per-process feature cache (`feature_cache`, default 4 GiB; these rows take 0.5 GB in float32); "
                "every MM pass reads the features from it, so it does no feature map and can exceed the DSGD "
                "ceiling, which includes one.",
                "",
                markdown_table(
                    [
                        "dtype",
                        "loss",
                        "default route",
                        "start s",
                        "samples/s per pass: median (best)",
                        "median / wall ceiling",
                    ],
                    drows,
                ),
                "",
            ]
    oc = results.get("out_of_core")
    if oc:
        ref = oc[0]["maxrss_mib"]
        parts += origin("memory")
        parts += [
            f"**Out of core** (Zarr store x: n × {D_IN}, y: n × {M}, float32, chunks of {CHUNK} rows, written block "
            f"by block with Dask; fit in a fresh process: H_κ^2, D_x = {DX}, one epoch of DSGD (`rff_method='sgd'`, "
            "the default route before MM passes became the default for the robust losses) with that route's "
            "defaults: closed-form warm start on 50,000 rows refined by reweighted closed forms (`init_reweight=10`), "
            "preconditioned steps (`precondition_rank=50`); batch 256, one partition). Peak memory = VmHWM of the "
            "child process (its own peak RSS; ru_maxrss would include the parent's, inherited through fork + exec); "
            "baseline = a child that only imports rffor and opens the store.",
            "",
            markdown_table(
                [
                    "n",
                    "store GB",
                    "write s",
                    "peak MiB (× smallest n)",
                    "baseline MiB",
                    "setup + warm start s",
                    "epoch s",
                    "epoch samples/s",
                    "child CPU s",
                ],
                [
                    [
                        f"{r['n']:.0e}",
                        fmt(r["store_gb"]),
                        fmt(r["write_s"]),
                        f"{r['maxrss_mib']:.0f} ({r['maxrss_mib'] / ref:.2f}×)",
                        f"{r['baseline_mib']:.0f}",
                        f"{r['warm_start_s']:.1f}",
                        f"{r['epoch_s']:.1f}",
                        f"{r['samples_per_s']:,.0f}",
                        f"{r['cpu_s']:.0f}",
                    ]
                    for r in oc
                ],
            ),
            "",
        ]
    acc = results.get("accuracy")
    if acc:
        ex = acc["exact"]["nmse"]
        parts += origin("accuracy")
        parts += [
            "**Accuracy** (nonlinear synthetic data, n = 2000 train / 1000 test, m = 50, noise 0.1, γ_X = 0.02, "
            f"γ_Θ = 30, λ = 1e-5, square loss in closed form; test NMSE). Exact solver: {fmt(ex, 4)}.",
            "",
            markdown_table(
                ["D_x", "D_θ (exact factor)", "NMSE mean (min–max over seeds)", "vs exact", "fit s"],
                [
                    [
                        r["D_x"],
                        r["D_theta"],
                        f"{fmt(np.mean(r['nmse']), 4)} ({fmt(min(r['nmse']), 4)}–{fmt(max(r['nmse']), 4)})",
                        f"{100 * (np.mean(r['nmse']) / ex - 1):+.1f}%",
                        fmt(r["seconds"]),
                    ]
                    for r in acc["by_dx"]
                ],
            ),
            "",
        ]
        if acc["by_dtheta"]:
            n_seeds = len(acc["by_dtheta"][0]["nmse"])
            parts += [
                f"Random output features at D_x = 2000 ({n_seeds} seeds; spread of the test NMSE over seeds):",
                "",
                markdown_table(
                    ["D_θ", "NMSE median", "min–max", "worst vs exact", "seeds within 5% of exact"],
                    [
                        [
                            r["D_theta"],
                            fmt(np.median(r["nmse"]), 4),
                            f"{fmt(min(r['nmse']), 4)}–{fmt(max(r['nmse']), 4)}",
                            f"{100 * (max(r['nmse']) / ex - 1):+.1f}%",
                            f"{sum(v <= 1.05 * ex for v in r['nmse'])}/{len(r['nmse'])}",
                        ]
                        for r in acc["by_dtheta"]
                    ],
                ),
                "",
            ]
    if results.get("summary"):
        parts += ["**Summary.** " + results["summary"]]
    return "\n".join(parts)


def summary(results: dict) -> str:
    lines = []
    tp = results.get("throughput")
    if tp:
        for key, what in (("epoch_samples_per_s", "plain"), ("preconditioned_samples_per_s", "preconditioned")):
            for clock in ("cpu", "wall"):
                c = tp[0][clock]
                if key not in c:
                    continue
                lo, hi = (f(c[key].values()) / c["ceiling"] for f in (min, max))
                lines.append(
                    f"DSGD epoch, {what} steps ({clock} time): {100 * lo:.0f}–{100 * hi:.0f}% of the ceiling "
                    "(target ≥ 60%)."
                )
        route = tp[0].get("default_route")
        if route:
            mm = [v["pass_samples_per_s"] for v in route.values() if v["method"] == "mm"]
            cf = [v["closed_form_samples_per_s"] for v in route.values() if v["method"] == "closed_form"]
            if mm:
                lines.append(
                    f"Default route ({tp[0]['dtype']}): MM passes of the Huber losses at "
                    + " / ".join(f"{np.median(p):,.0f}" for p in mm)
                    + " samples/s (median pass; features from the cache), the square loss's closed-form pass at "
                    + " / ".join(f"{c:,.0f}" for c in cf)
                    + " samples/s."
                )
    oc = results.get("out_of_core")
    if oc and len(oc) > 1:
        lines.append(
            f"Peak memory at n = {oc[-1]['n']:.0e} is {oc[-1]['maxrss_mib'] / oc[0]['maxrss_mib']:.2f}× "
            f"that at n = {oc[0]['n']:.0e} (target ≤ 1.2×)."
        )
    big = [r for r in (oc or []) if r["n"] >= 10**7]
    if big:
        lines.append(
            f"One DSGD epoch (`rff_method='sgd'`) over {big[0]['n']:.0e} curves: {big[0]['epoch_s'] / 60:.1f} min "
            "(target < 5 min)."
        )
    acc = results.get("accuracy")
    if acc:
        ex = acc["exact"]["nmse"]
        at2000 = [r for r in acc["by_dx"] if r["D_x"] == 2000]
        if at2000:
            gap = 100 * (np.mean(at2000[0]["nmse"]) / ex - 1)
            lines.append(
                f"D_x = 2000 with the exact output factor: test NMSE {gap:+.1f}% from the exact solver "
                "(target within 5%)."
            )
        rows = acc["by_dtheta"]
        if rows:
            all_ok = [r["D_theta"] for r in rows if max(r["nmse"]) <= 1.05 * ex]
            med_ok = [r["D_theta"] for r in rows if np.median(r["nmse"]) <= 1.05 * ex]
            last = rows[-1]
            lines.append(
                "Random output features (D_x = 2000): the median over seeds is within 5% of the exact solver from "
                f"D_θ = {med_ok[0] if med_ok else 'none tried'}; every seed within 5% "
                + (
                    f"from D_θ = {all_ok[0]}."
                    if all_ok
                    else f"at no D_θ tried (at D_θ = {last['D_theta']} the worst seed is "
                    f"{100 * (max(last['nmse']) / ex - 1):+.0f}%, the best {100 * (min(last['nmse']) / ex - 1):+.0f}%)."
                )
            )
    return " ".join(lines)


def parse_sizes(text: str) -> list[int]:
    return [int(float(s)) for s in text.split(",") if s.strip()]


PART_KEYS = {"throughput": "throughput", "memory": "out_of_core", "accuracy": "accuracy"}


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child_main(json.loads(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser)
    parser.add_argument(
        "--parts", default="throughput,memory,accuracy", help="comma-separated subset of throughput,memory,accuracy"
    )
    parser.add_argument(
        "--update",
        action="store_true",
        help="keep the other parts' results (and their provenance) from the last run's JSON",
    )
    parser.add_argument("--sizes", default=None, help="n of the out-of-core runs (default 1e5,1e6; quick 1e5)")
    parser.add_argument("--store-dir", type=Path, default=None, help="where to write the Zarr stores (default: tmp)")
    parser.add_argument("--keep-stores", action="store_true", help="do not delete the stores")
    parser.add_argument("--repeats", type=int, default=5, help="timing repeats, best kept (default 5)")
    parser.add_argument("--report-only", action="store_true", help="rewrite the README block from the saved JSON")
    args = parser.parse_args()
    if args.report_only:
        results = _previous("rff_quick" if args.quick else "rff", list(PART_KEYS))
        results["summary"] = summary(results)
        print(results["summary"])
        write_section("rff", report(results), args.readme)
        return
    limit_blas_threads(args.threads)
    parts = [p for p in PART_KEYS if p in set(args.parts.split(","))]
    sizes = parse_sizes(args.sizes or ("1e5" if args.quick else "1e5,1e6"))
    name = "rff_quick" if args.quick else "rff"
    results: dict = {
        "repeats": args.repeats,
        "args": vars(args) | {"readme": str(args.readme)},
        "provenance": {},
        "minutes": {},
    }
    if args.update:
        results.update(_previous(name, [p for p in PART_KEYS if p not in parts]))
    for part in parts:
        print(part, flush=True)
        info = machine_info(args.threads)
        tic = time.perf_counter()
        if part == "throughput":
            n_tp = 20_000 if args.quick else 60_000
            tp = [throughput(n_tp, args.repeats, args.seed)]
            if not args.quick:
                tp.append(throughput(n_tp // 4, 2, args.seed, dtype="float64"))
            for t in tp:
                for clock in ("cpu", "wall"):
                    c = t[clock]
                    print(
                        f"  {t['dtype']} {clock}: ceiling {c['ceiling']:.0f}/s, epochs "
                        f"{ {k: round(v) for k, v in c['epoch_samples_per_s'].items()} }",
                        flush=True,
                    )
            results["throughput"] = tp
        elif part == "memory":
            store_dir = args.store_dir or Path(tempfile.mkdtemp(prefix="rffor-bench-"))
            store_dir.mkdir(parents=True, exist_ok=True)
            try:
                results["out_of_core"] = out_of_core(sizes, store_dir, args.threads, args.seed, args.keep_stores)
            finally:
                if args.store_dir is None and not args.keep_stores:
                    shutil.rmtree(store_dir, ignore_errors=True)
        else:
            if args.quick:
                results["accuracy"] = accuracy([250, 1000], [50, 200], [0], [0, 1], args.seed)
            else:
                results["accuracy"] = accuracy(
                    [250, 500, 1000, 2000, 4000],
                    [24, 50, 100, 200, 400, 800, 1600, 3200],
                    [0, 1, 2],
                    list(range(5)),
                    args.seed,
                )
        results["provenance"][part] = provenance(info, load_end=os.getloadavg())
        results["minutes"][part] = (time.perf_counter() - tic) / 60
    results["summary"] = summary(results)
    print(results["summary"])
    save_json(name, results)
    if not (args.no_readme or args.quick):  # a smoke test does not replace the recorded numbers
        write_section("rff", report(results), args.readme)


def _previous(name: str, parts: list[str]) -> dict:
    """The given parts (results, provenance, minutes) of the last saved run, if any."""
    from _common import RESULTS

    path = RESULTS / f"{name}.json"
    if not path.exists():
        return {}
    old = json.loads(path.read_text())
    out: dict = {"provenance": {}, "minutes": {}}
    if "throughput" in parts and "repeats" in old:
        out["repeats"] = old["repeats"]
    for part in parts:
        if PART_KEYS[part] in old:
            out[PART_KEYS[part]] = old[PART_KEYS[part]]
            out["provenance"][part] = old.get("provenance", {}).get(part, "")
            out["minutes"][part] = old.get("minutes", {}).get(part, float("nan"))
    return out


if __name__ == "__main__":
    main()
