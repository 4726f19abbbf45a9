"""Scale-out evidence (issue 23): merges on the workers, broadcasts by tree, every worker busy, counted and modelled.

    python benchmarks/scale_out.py --tpqrt        # TSQR merge: LAPACK tpqrt against a dense QR, one thread
    python benchmarks/scale_out.py --counting     # counts per pass of a synthetic reduction, 16 workers, P = 2 … 128
    python benchmarks/scale_out.py --routes       # counts per pass of the real routes, 16 workers, P = 2 … 128
    python benchmarks/scale_out.py --memory       # the driver's peak memory over whole fits, D_x = 250 … 2000
    python benchmarks/scale_out.py --model        # cost model: constants, validation, projections (QUIET machine)
    python benchmarks/scale_out.py --speedup      # default routes on 2 workers against 1 (QUIET machine)
    python benchmarks/scale_out.py --report       # rewrite the README block from the saved results
    (--quick: small sizes, a smoke test; results go to *_quick.json and nothing to the README)

1. ``--tpqrt``: :func:`rffor._linalg.merge_triangular` (``dtpqrt`` + ``dtpmqrt``) against
   :func:`rffor._linalg.triangular_update` (a dense QR of the stacked pair) for two TSQR factors ``[R | Z]`` of
   D_x × (D_x + k), D_x + k = 1100 and 4100, one BLAS thread; and :func:`rffor._linalg.append_rows` against
   ``triangular_update`` for one block of new rows (the leaf's step).
2. ``--counting`` and ``--routes``: :func:`count_passes` runs passes of a task over a real ``dask scheduler`` with
   ``dask worker`` processes (one thread each; rffor's cluster/dask.yaml) for P from 2 to 128, and records per pass:
   the merges done by the driver, the bytes its connection to the scheduler received and sent (the kernel's
   counters, :func:`rffor.executor.dask.wire_bytes`), its peak memory during the reduce (tracemalloc, last pass),
   tasks, tree depth and the driver's idle tail (last task's end on a worker → the pass's result on the driver).
   Two modes: ``tree`` (``session.reduce``: merges on the workers, shared objects broadcast by a tree) and
   ``driver`` (before issue 23: every partition's result gathered and folded on the driver, shared objects fetched
   from one worker). ``--counting``: a synthetic TSQR reduction; ``--routes``: the routes' own tasks
   (:func:`route_pass`: the closed form's sums, an MM gradient pass, a DSGD round, a ``lam="auto"`` selection pass
   over row pieces of a sample of chunks) at D_x = ``--route-features``.
3. ``--memory``: the driver's peak over whole fits (closed form, MM, ``lam="auto"``) on 2 worker processes, the
   basis of the driver's memory formula in cluster/README.md.
4. ``--model``: constants measured in the run (rows/s per core of each route's task, merges, the driver's solves,
   bytes; the scheduler's time per task and per pass from passes of no-op tasks; transfer rates), a model of a
   pass (:func:`pass_time`) validated against passes measured on this machine (1-16 workers, both layouts), and
   its projection of the efficiency at 16-1024 cores for n = 1e7 and 1e8, D_x = 1000 and 4000, before and after
   issue 23 (:func:`project`, figure ``benchmarks/figures/scale_out.png``).
5. ``--speedup``: whole fits by the default routes (closed form, MM, ``lam="auto"``) in process, on 1 worker and on
   2 workers (:func:`bench_speedup`).

Timings (the model's constants and validation, the speedup) are published in the README only from a run whose load
average stayed at most :data:`LOAD_LIMIT`; counts and memory do not depend on the load. Results go to
``benchmarks/results/scale_out_<part>[_quick].json`` and the "scale_out" block of benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _common import (
    BENCH_DIR,
    RESULTS,
    ForeignCPU,
    add_common_args,
    figure_path,
    limit_blas_threads,
    machine_info,
    markdown_table,
    provenance,
    save_json,
    write_section,
)

import rffor.data  # noqa: E402
from rffor._linalg import append_rows, merge_triangular, positive_diagonal, triangular_update  # noqa: E402
from rffor.executor import IdleWorkersWarning, fold_group  # noqa: E402
from rffor.executor.dask import BROADCAST_COPY_BYTES, DaskExecutor  # noqa: E402

REPO = BENCH_DIR.parent

# ---------------------------------------------------------------------------------------------------------------
# 1. the structured TSQR merge
# ---------------------------------------------------------------------------------------------------------------


def _factor(rng, p: int, q: int, rows: int) -> np.ndarray:
    return triangular_update(np.zeros((p, q)), rng.standard_normal((rows, q)))


def _best(fn, repeats: int) -> tuple[float, np.ndarray]:
    best, out = np.inf, None
    for _ in range(repeats):
        tic = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - tic)
    return best, out


def bench_tpqrt(sizes: list[tuple[int, int]], repeats: int, seed: int, rows: list[int]) -> list[dict]:
    out = []
    rng = np.random.default_rng(seed)
    for p, k in sizes:
        q = p + k
        a, b = _factor(rng, p, q, p + 50), _factor(rng, p, q, p + 70)
        reps = repeats if p <= 2000 else max(1, repeats // 3)
        t_dense, dense = _best(lambda a=a, b=b: triangular_update(a, b), reps)
        t_tp, tp = _best(lambda a=a, b=b: merge_triangular(a, b), reps)
        err = float(np.abs(tp - positive_diagonal(dense)).max() / np.abs(dense).max())
        row = {"op": "merge two factors", "D_x": p, "k": k, "dense_s": t_dense, "tpqrt_s": t_tp, "rel_diff": err}
        row["speedup"] = t_dense / t_tp
        out.append(row)
        print(f"merge D_x={p} k={k}: dense {t_dense:.3f} s, tpqrt {t_tp:.3f} s ({row['speedup']:.2f}x), "
              f"diff {err:.1e}, load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
        for n_rows in rows if p <= 2000 else []:
            A = rng.standard_normal((n_rows, q))
            t_dense, dense = _best(lambda a=a, A=A: triangular_update(a, A), repeats)
            t_tp, tp = _best(lambda a=a, A=A: append_rows(a, A), repeats)
            err = float(np.abs(tp - positive_diagonal(dense)).max() / np.abs(dense).max())
            row = {"op": f"append {n_rows} rows", "D_x": p, "k": k, "dense_s": t_dense, "tpqrt_s": t_tp}
            row.update(rel_diff=err, speedup=t_dense / t_tp)
            out.append(row)
            print(f"append {n_rows} rows D_x={p}: dense {t_dense:.3f} s, tpqrt {t_tp:.3f} s "
                  f"({row['speedup']:.2f}x), diff {err:.1e}", flush=True)  # fmt: skip
    return out


# ---------------------------------------------------------------------------------------------------------------
# 2. counting harness
# ---------------------------------------------------------------------------------------------------------------


def _env() -> dict:
    env = dict(os.environ)
    env["DASK_CONFIG"] = str(REPO / "cluster" / "dask.yaml")
    # the synthetic task is defined here: workers import it from this directory
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), str(BENCH_DIR), env.get("PYTHONPATH")) if p)
    return env


@contextlib.contextmanager
def dask_processes(directory: Path, n_workers: int, timeout: float = 120.0, nthreads: int = 1):
    """``dask scheduler`` and ``n_workers`` ``dask worker`` processes (``nthreads`` threads each) on 127.0.0.1; yields
    the scheduler's address. Stops only the processes it started, by their pids."""

    dask = str(Path(sys.executable).with_name("dask"))
    sfile = directory / "scheduler.json"
    log = open(directory / "dask.log", "ab")  # noqa: SIM115 - closed below
    procs: list[subprocess.Popen] = []
    common = ["--no-dashboard", "--dashboard-address", "127.0.0.1:0"]
    try:
        procs.append(subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--scheduler-file",
                                       str(sfile), *common], stdout=log, stderr=log, env=_env()))  # fmt: skip
        deadline = time.monotonic() + timeout
        while not sfile.exists():
            if time.monotonic() > deadline or procs[0].poll() is not None:
                raise RuntimeError("the scheduler did not start")
            time.sleep(0.05)
        time.sleep(0.1)
        address = json.loads(sfile.read_text())["address"]
        for _ in range(n_workers):
            worker = [dask, "worker", "--scheduler-file", str(sfile), "--nthreads", str(nthreads)]
            worker += ["--host", "127.0.0.1"]
            procs.append(subprocess.Popen([*worker, *common], stdout=log, stderr=log, env=_env()))
        from distributed import Client

        with Client(address, set_as_default=False) as c:
            c.wait_for_workers(n_workers, timeout=timeout)
        yield address
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        log.close()


def count_passes(
    address: str,
    data,
    task: Callable,
    make_args: Callable,
    *,
    P_values: list[int],
    passes: int = 4,
    split_every: int | None = None,
    combine: Callable | None = None,
    modes: tuple[str, ...] = ("tree", "driver"),
    sample: list[int] | None = None,
    label: str = "",
) -> list[dict]:
    """Run ``passes`` passes of ``task`` over ``data`` for each P and mode; return one row per (mode, P).

    Parameters
    ----------
    address : str
        Scheduler address (a separate process: the driver's connection then carries the driver's bytes only).
    data : chunked dataset
        At least max(P_values) chunks.
    task : callable
        ``task(part, p, chunk_ids, *args)``, a module-level function returning a partial (the executor protocol).
    make_args : callable
        ``make_args(session)``: the task's arguments, e.g. ``(session.share(B), …)``, made once per session; or a
        function ``per_pass()`` returning ``(args, handles)`` for every pass (objects shared anew every pass, as a
        route shares its B, released after the pass).
    passes : int
        Passes per setting; the first also carries the session's start (scattering the data description) and is
        left out of the medians; the last runs under tracemalloc for the driver's peak memory.
    split_every : int, optional
        Fan-in of the tree (default :data:`rffor.executor.SPLIT_EVERY`).
    combine : callable, optional
        The partials' merge (default ``+``).
    modes : tuple of {"tree", "driver"}
        ``tree``: ``session.reduce``; ``driver``: ``session.map`` and a left fold in partition order on the driver,
        with the shared objects broadcast as before issue 23 (every task fetches them from the worker holding them).
    sample : list of int, optional
        Passes over the rows of these chunks only (a ``lam="auto"`` selection on ``selection_rows``): ``tree`` runs
        them over row pieces shared by all P partitions (``session.over``), ``driver`` restricted to the partitions
        holding the chunks (as before).
    label : str
        Printed with every row.

    Returns
    -------
    list of dict
        Per setting: ``mode``, ``P``, ``workers``, medians over passes 2… of ``tasks``, ``depth``,
        ``driver_merges``, ``wire_received``, ``wire_sent``, ``payload_received``, ``tail_s`` (last task's end →
        the result on the driver), ``pass_s``, and ``driver_peak_bytes`` (tracemalloc, last pass).
    """
    from distributed import Client, get_task_stream

    from rffor.chunked import RowPieces

    rows = []
    with Client(address, set_as_default=False) as client:
        workers = len(client.scheduler_info()["workers"])
        client.get_task_stream()  # installs the scheduler's task-stream plugin
        for P in P_values:
            for mode in modes:
                per_pass = []
                # before issue 23 every task fetched a shared object from the one worker holding it (a star)
                fanout = None if mode == "tree" else 10**6
                ex = DaskExecutor(client=client, split_every=split_every, broadcast_fanout=fanout)
                with contextlib.ExitStack() as stack:
                    stack.enter_context(warnings.catch_warnings())
                    warnings.simplefilter("ignore", IdleWorkersWarning)  # P < workers on purpose here
                    s = stack.enter_context(ex.open(data, P))
                    target, chunks = s, None
                    if sample is not None and mode == "tree":
                        target = stack.enter_context(s.over(RowPieces.spread(data, sample, len(s.partitions))))
                    elif sample is not None:
                        chunks = sample
                    made = make_args(s)
                    for i in range(passes):
                        args, handles = made() if callable(made) else (made, [])
                        traced = i == passes - 1
                        if traced:
                            tracemalloc.start()
                        with get_task_stream(client=client) as ts:
                            if mode == "tree":
                                target.reduce(task, *args, combine=combine, chunks=chunks, label="pass")
                                merges = s.stats[-1].driver_merges
                            else:
                                results = target.map(task, *args, chunks=chunks, label="pass")
                                members = [r for r in results if r is not None]
                                fold_group(members, combine)
                                merges = max(0, len(members) - 1)
                            end = time.time()
                        peak = tracemalloc.get_traced_memory()[1] if traced else None
                        if traced:
                            tracemalloc.stop()
                        for h in handles:
                            s.release(h)
                        st = s.stats[-1]
                        stops = [
                            ss["stop"]
                            for rec in ts.data
                            if str(rec["key"]).startswith(s.name)
                            for ss in rec["startstops"]
                            if ss["action"] == "compute"
                        ]
                        per_pass.append(
                            {
                                "tasks": st.tasks,
                                "depth": st.depth,
                                "driver_merges": merges,
                                "wire_received": st.wire_received,
                                "wire_sent": st.wire_sent,
                                "payload_received": st.payload_received,
                                "tail_s": end - max(stops) if stops else float("nan"),
                                "pass_s": st.seconds,
                                "driver_peak_bytes": peak,
                            }
                        )
                steady = per_pass[1:] or per_pass
                row = {"route": label, "mode": mode, "P": P, "workers": workers, "passes": per_pass}
                for key in ("tasks", "depth", "driver_merges", "wire_received", "wire_sent", "payload_received",
                            "tail_s", "pass_s"):  # fmt: skip
                    row[key] = float(np.median([p[key] for p in steady]))
                row["driver_peak_bytes"] = per_pass[-1]["driver_peak_bytes"]
                rows.append(row)
                print(
                    f"{label} {mode:6s} P={P:3d}: {row['tasks']:.0f} tasks, depth {row['depth']:.0f}, driver merges "
                    f"{row['driver_merges']:.0f}, received {row['wire_received'] / 1e3:,.0f} KB, sent "
                    f"{row['wire_sent'] / 1e3:,.0f} KB, driver peak {row['driver_peak_bytes'] / 1e6:.1f} MB, "
                    f"tail {row['tail_s'] * 1e3:.0f} ms, pass {row['pass_s']:.2f} s, load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    return rows


# the synthetic reduction: a TSQR factor of [cos(X W + b) | Y] per partition (module level: workers import it)


def tsqr_task(part, p, chunk_ids, W):
    """The TSQR factor of a partition's rows, shape (D, D + m), D = W.shape[1]."""
    r = None
    for _, X, Y in part.iter_chunks([int(i) for i in chunk_ids]):
        A = np.hstack([np.cos(X @ W[:-1] + W[-1]), np.nan_to_num(Y)])
        r = append_rows(np.zeros((W.shape[1], A.shape[1])) if r is None else r, A)
    return r


def synthetic_store(path: Path, n_chunks: int, chunk_rows: int, seed: int) -> rffor.data.Dataset:
    rng = np.random.default_rng(seed)
    n, d, m = n_chunks * chunk_rows, 6, 24
    X = rng.uniform(-1, 1, (n, d))
    theta = np.linspace(0, 1, m)
    Y = np.sin(2 * X[:, :1] + 3 * theta) + 0.05 * rng.standard_normal((n, m))
    return rffor.data.write(os.fspath(path), X, Y, theta, chunks=chunk_rows)


def bench_counting(args) -> list[dict]:
    P_values = [2, 4, 8, 16] if args.quick else [2, 4, 8, 16, 32, 64, 128]
    workers = 4 if args.quick else args.workers
    rng = np.random.default_rng(args.seed)
    W = np.vstack([rng.standard_normal((6, args.features)), rng.uniform(0, 2 * np.pi, (1, args.features))])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = synthetic_store(tmp / "train.zarr", max(P_values), 100, args.seed)
        import scale_out  # the task by its importable name (as a route's task is), not pickled from __main__

        with dask_processes(tmp, workers) as address:
            return count_passes(
                address,
                data,
                scale_out.tsqr_task,
                lambda s: (s.share(W),),
                P_values=P_values,
                passes=args.passes,
                split_every=args.split_every,
                combine=merge_triangular,
            )


# ---------------------------------------------------------------------------------------------------------------
# 3. the real routes, counted
# ---------------------------------------------------------------------------------------------------------------

#: the passes counted, by route: the task function a route's pass runs (importable on the workers)
ROUTES = ("closed form", "MM pass", "DSGD round", "selection pass")


def route_pass(name: str, data, D_x: int, seed: int = 0):
    """One pass of a real route over ``data``: ``(task, make_args, sample)`` for :func:`count_passes`.

    The routes' own task functions and objects (:func:`rffor.solvers.sums.sums_task` on the fit's
    :class:`~rffor.solvers.maps.FitMaps`; :func:`rffor.solvers.mm.grad_task` at a B shared every pass, Huber loss;
    :func:`rffor.solvers.round_plan.round_task` with a :class:`~rffor.solvers.round_plan.RoundPlan` shared once and
    the state every round; the selection's training-side gradient pass on ``selection_rows``-like sample of about
    a tenth of the chunks), random Fourier features of D_x columns (their kind changes the compute, not what is
    counted) and the exact output factor of a Gaussian k_Θ.
    """
    import uuid

    from rffor.chunked import RowSplit, spread_chunks
    from rffor.kernels import Gaussian
    from rffor.losses import Huber
    from rffor.outputs import CurveGrid
    from rffor.settings import RFSettings
    from rffor.solvers.dsgd import SGDConfig, SGDState
    from rffor.solvers.maps import FitMaps, make_feature_maps
    from rffor.solvers.mm import grad_task
    from rffor.solvers.round_plan import RoundPlan, round_task
    from rffor.solvers.selection import _train_grad_task
    from rffor.solvers.sums import sums_task

    loss = Huber(0.1, 2)
    settings = RFSettings(n_features_x=D_x, input_features="rff", dtype="float64").resolved(loss)
    phi_x, output = make_feature_maps(data.d, data.theta, seed, kernel_x=Gaussian(0.5), kernel_theta=Gaussian(30.0),
                                      settings=settings)  # fmt: skip
    maps = FitMaps(phi_x, output.Phi_theta, uuid.uuid4().hex, 2**32, CurveGrid(data.theta))
    rng = np.random.default_rng(seed)
    B = 1e-3 * rng.standard_normal((D_x, output.n_features))

    def per_pass(s, *before, after=()):
        maps_h = s.share(maps)

        def make():
            B_h = s.share(B)
            return (*before, maps_h, B_h, *after), [B_h]

        return make

    if name == "closed form":
        return sums_task, lambda s: (s.share(maps),), None
    if name == "MM pass":
        return grad_task, lambda s: per_pass(s, after=(loss,)), None
    if name == "selection pass":
        sample = spread_chunks(data, max(1, data.n // 10))
        return _train_grad_task, lambda s: per_pass(s, RowSplit(10, False), after=(loss,)), sample
    if name == "DSGD round":
        config = SGDConfig(loss, 1e-4, batch_size=64, step_size=0.5, dtype="float32", theta=data.theta)
        rff32 = phi_x.astype("float32")
        Pt32 = np.ascontiguousarray(output.Phi_theta, dtype=np.float32)
        state = SGDState.from_coef(B, "float32")

        def dsgd(s):
            P = len(s.partitions)
            plan = RoundPlan([4], config, rff32, Pt32, seed, n_partitions=P, n_active=P)
            plan_h = s.share(plan)

            def make():
                state_h = s.share(state)
                return (plan_h, state_h, 0), [state_h]

            return make

        return round_task, dsgd, None
    raise ValueError(f"unknown route {name!r}")


def bench_routes(args) -> list[dict]:
    """:func:`count_passes` of every route of :data:`ROUTES` over a Zarr store, ``--workers`` worker processes."""
    P_values = [2, 4, 8, 16] if args.quick else [2, 4, 8, 16, 32, 64, 128]
    workers = 4 if args.quick else args.workers
    routes = args.routes or list(ROUTES)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = synthetic_store(tmp / "train.zarr", max(P_values), 100, args.seed)
        with dask_processes(tmp, workers) as address:
            for name in routes:
                task, make_args, sample = route_pass(name, data, args.route_features, args.seed)
                out += count_passes(
                    address, data, task, make_args, P_values=P_values, passes=args.passes,
                    split_every=args.split_every, sample=sample, label=name,
                )  # fmt: skip
    return out


# ---------------------------------------------------------------------------------------------------------------
# 4. the cost model: constants measured in this run, validated on this machine, projected to large clusters
# ---------------------------------------------------------------------------------------------------------------

#: projection assumptions (what one machine cannot measure): links of 10 Gb/s with 0.2 ms per hop, nodes of 16
#: cores (one Dask worker process of 16 threads each), chunks of 10,000 curves, d = 50 inputs, m = 100 grid points
NET_BANDWIDTH, NET_LATENCY, NODE_CORES, MODEL_CHUNK_ROWS, MODEL_D, MODEL_M = 1.25e9, 2e-4, 16, 10_000, 50, 100

#: the modelled routes: their pass, what the driver ships per pass, and its merge
MODEL_ROUTES = ("closed form", "MM pass", "DSGD round")


def _model_data(n: int, seed: int, chunk_rows: int):
    """Curves like benchmarks/dask_training.py's (d = 50, m = 100, float32), in memory, chunks of ``chunk_rows``."""
    from rffor.chunked import ArrayData

    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, MODEL_D)).astype(np.float32)
    theta = np.linspace(0, 1, MODEL_M)
    Y = np.sin(2 * X[:, :1] + 3 * theta) * np.cos(X[:, 1:2]) + 0.3 * X[:, 2:3] * theta
    Y = (Y + 0.05 * rng.standard_normal((n, MODEL_M))).astype(np.float32)
    return ArrayData(X, Y, theta, chunk_rows=chunk_rows)


def _route_objects(data, D_x: int, seed: int):
    """The routes' default objects at D_x: Nyström features of D_x centres (float64) for the closed form and MM,
    random Fourier features (float32) for DSGD, the exact output factor of a Gaussian k_Θ, a B, a DSGD plan of one
    epoch per round (the route's default K)."""
    import uuid

    from rffor.features import NystromFeatures
    from rffor.kernels import Gaussian
    from rffor.losses import Huber
    from rffor.outputs import CurveGrid
    from rffor.settings import RFSettings
    from rffor.solvers.dsgd import SGDConfig, SGDState, epoch_steps
    from rffor.solvers.maps import FitMaps, make_input_features, make_output_map
    from rffor.solvers.round_plan import RoundPlan

    loss, kx, kt = Huber(0.1, 2), Gaussian(1.0 / MODEL_D), Gaussian(100.0)
    rng = np.random.default_rng(seed)
    centres = np.asarray(data.X[rng.choice(data.n, size=min(D_x, data.n), replace=False)], dtype=np.float64)
    nys = NystromFeatures(kx, centres, dtype=np.float64)
    space = CurveGrid(data.theta)
    output = make_output_map(space, kt, RFSettings().resolved(loss), seed)
    maps = FitMaps(nys, output.Phi_theta, uuid.uuid4().hex, 2**34, space)
    phi32 = make_input_features(data.d, seed, kernel_x=kx, n_features_x=D_x, input_features="rff", dtype="float32")
    Pt32 = np.ascontiguousarray(output.Phi_theta, dtype=np.float32)
    B = 1e-3 * rng.standard_normal((nys.n_features, output.n_features))
    config = SGDConfig(loss, 1e-4, batch_size=256, step_size=0.5, dtype="float32", theta=data.theta)

    def plan(partitions):
        K = max(epoch_steps(data, g, 256) for g in partitions)
        return RoundPlan([K], config, phi32, Pt32, seed, n_partitions=len(partitions), n_active=len(partitions))

    state = SGDState.from_coef(1e-3 * rng.standard_normal((D_x, output.n_features)), "float32")
    return {"maps": maps, "B": B, "loss": loss, "plan": plan, "state": state, "output": output}


def _timed(fn, repeats: int = 1):
    best, out = np.inf, None
    for _ in range(repeats):
        tic = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - tic)
    return best, out


def _cold(maps):
    """``maps`` under a new feature-cache key: the next pass computes its features (a fit's first pass)."""
    import dataclasses
    import uuid

    return dataclasses.replace(maps, cache_key=uuid.uuid4().hex)


def _at_once(fns: list, repeats: int = 3) -> float:
    """Wall seconds of ``fns`` run at the same time, one per forked process (each started by a barrier, after a
    warm-up call): the slowest process's, median over ``repeats``."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    barrier, queue = ctx.Barrier(len(fns)), ctx.Queue()

    def run(k: int) -> None:
        fns[k]()
        seconds = []
        for _ in range(repeats):
            barrier.wait()
            tic = time.perf_counter()
            fns[k]()
            seconds.append(time.perf_counter() - tic)
        queue.put(seconds)

    procs = [ctx.Process(target=run, args=(k,)) for k in range(len(fns))]
    for proc in procs:
        proc.start()
    times = [queue.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join()
    return float(np.median(np.max(np.array(times), axis=0)))


def measure_constants(D_x: int, rows: int, seed: int, chunk_rows: int, tmp: Path, concurrency: bool = False) -> dict:
    """The constants of the model at D_x, in this process with one BLAS thread (a Dask worker's).

    Rates are rows per second per core of each route's own task on ``rows`` curves read from a Zarr store in
    chunks of ``chunk_rows`` (written under ``tmp``; the validation's layout: reading and decompressing the chunks
    is part of every pass), best of 3 after a warm-up call: the closed form's
    :func:`~rffor.solvers.sums.sums_task` cold (Nyström features computed: the closed form is one pass), an MM
    pass's :func:`~rffor.solvers.mm.grad_task` cold (features computed) and warm (from the feature cache, the
    passes after the first), a DSGD round's :func:`~rffor.solvers.round_plan.round_task` (one epoch of batches of
    256). Merges:
    two TSQR factors by LAPACK tpqrt (after) and by a dense QR (before), two gradient or DSGD partials by ``+``
    (after a pickle round trip, as a merge task receives them). Driver: the closed form's SVD and solve, an MM
    step's solve, with all the CPUs of this process (a driver's BLAS is not limited to one thread). Bytes: pickled
    partials and shared objects.
    """
    import pickle

    from rffor.solvers.mm import SquareMetric, grad_task
    from rffor.solvers.round_plan import round_task
    from rffor.solvers.sums import sums_task

    mem = _model_data(max(rows, D_x), seed, chunk_rows=min(chunk_rows, max(rows, D_x)))
    store = tmp / f"constants_{D_x}.zarr"
    data = rffor.data.write(os.fspath(store), mem.X, mem.Y, mem.theta, chunks=min(chunk_rows, max(rows, D_x)))
    o = _route_objects(mem, D_x, seed)
    maps, B, loss = o["maps"], o["B"], o["loss"]
    ids = list(range(data.n_chunks))
    out: dict = {"D_x": D_x, "rows": data.n, "chunk_rows": chunk_rows, "D_theta": int(B.shape[1])}
    sums_task(data, 0, ids[:1], _cold(maps))  # warm-up: imports, the store's first read
    rows1 = min(data.chunk_rows, data.n)

    def line(t_all: float, t_one: float, rows_all: int, rows_one: int) -> dict:
        """Rows/s (the slope through a task on one chunk and on all) and the task's fixed seconds (its intercept:
        unpacking the shared objects, opening the store, a round's set-up), at least 0."""
        rate = (rows_all - rows_one) / max(t_all - t_one, 1e-9) if rows_all > rows_one else rows_all / t_all
        return {"rate": rate, "task_s": max(0.0, t_one - rows_one / rate), "rate_whole": rows_all / t_all}

    t, sums = _timed(lambda: sums_task(data, 0, ids, _cold(maps)), 3)
    t1, _ = _timed(lambda: sums_task(data, 0, ids[:1], _cold(maps)), 3)
    out["closed form"] = line(t, t1, data.n, rows1)
    t_cold, g = _timed(lambda: grad_task(data, 0, ids, _cold(maps), B, loss), 3)
    grad_task(data, 0, ids, maps, B, loss)  # fills the cache of ``maps``
    t_warm, _ = _timed(lambda: grad_task(data, 0, ids, maps, B, loss), 3)
    t1, _ = _timed(lambda: grad_task(data, 0, ids[:1], maps, B, loss), 3)
    out["MM pass"] = {**line(t_warm, t1, data.n, rows1), "rate_cold": data.n / t_cold}
    plan, plan1 = o["plan"]([ids]), o["plan"]([ids[:1]])
    t, rs = _timed(lambda: round_task(data, 0, ids, plan, o["state"], 0), 3)
    t1, _ = _timed(lambda: round_task(data, 0, ids[:1], plan1, o["state"], 0), 3)
    out["DSGD round"] = line(t, t1, plan.round_steps[0] * 256, plan1.round_steps[0] * 256)
    # a task on a worker first unpacks what it receives (the executor's _Packed: one pickle each)
    for name, received in (("closed form", (maps,)), ("MM pass", (maps, B)), ("DSGD round", (plan, o["state"]))):
        blobs = [pickle.dumps(x, protocol=4) for x in received]
        unpack = _best(lambda blobs=blobs: [pickle.loads(b) for b in blobs], 3)[0]
        out[name]["unpack_s"] = unpack
        out[name]["task_s"] += unpack
    # a task's chunks shared by 2 threads (partitions_per="worker"), against 1: chunkwise routes only
    from rffor.executor import fold_chunks, is_chunkwise

    for name, fn, fn_args in (
        ("closed form", sums_task, lambda: (_cold(maps),)),
        ("MM pass", grad_task, lambda: (maps, B, loss)),
        ("DSGD round", round_task, None),
    ):
        out[name]["chunkwise"] = bool(is_chunkwise(fn))
        if not out[name]["chunkwise"] or len(ids) < 2:
            continue
        reps = 1 if D_x > 2000 and name == "closed form" else 3  # seconds each: the run stays under 15 minutes
        one = _timed(lambda fn=fn, fa=fn_args: fold_chunks(fn, data, 0, ids, fa(), None, 1, 8), reps)[0]
        two = _timed(lambda fn=fn, fa=fn_args: fold_chunks(fn, data, 0, ids, fa(), None, 2, 8), reps)[0]
        out[name]["threads_2"] = one / two
    # DSGD: a worker's threads run partitions (each one sequential chain), as a fused first-level task does
    if len(ids) >= 2:
        from concurrent.futures import ThreadPoolExecutor

        from rffor.executor import one_blas_thread

        halves = [ids[: len(ids) // 2], ids[len(ids) // 2 :]]
        plan2 = o["plan"](halves)

        def rounds(threads: int):
            with one_blas_thread(), ThreadPoolExecutor(threads) as pool:
                return list(pool.map(lambda k: round_task(data, k, halves[k], plan2, o["state"], 0), range(2)))

        out["DSGD round"]["threads_2"] = _timed(lambda: rounds(1), 3)[0] / _timed(lambda: rounds(2), 3)[0]
    # this machine's cores at work at once: each route's task on half the rows in 2 processes at the same time
    # against one process alone (the validation's workers are processes sharing this machine's cores)
    if concurrency and len(ids) >= 2:
        from rffor.executor import usable_cpus

        k = min(usable_cpus(), len(ids))
        pieces = [ids[j * len(ids) // k : (j + 1) * len(ids) // k] for j in range(k)]
        planp = o["plan"](pieces)
        tasks = {
            "closed form": lambda j: sums_task(data, j, pieces[j], _cold(maps)),
            "MM pass": lambda j: grad_task(data, j, pieces[j], maps, B, loss),
            "DSGD round": lambda j: round_task(data, j, pieces[j], planp, o["state"], 0),
        }
        for name, task in tasks.items():
            alone = _at_once([lambda task=task: task(0)])
            together = _at_once([lambda j=j, task=task: task(j) for j in range(k)])
            out[name]["concurrency"] = alone / together
    # merges
    q = sums.r.shape[1]
    a, b2 = _factor(np.random.default_rng(seed), D_x, q, D_x + 30), sums.r
    out["closed form"]["merge_after"] = _best(lambda: merge_triangular(a, b2), 3)[0]
    out["closed form"]["merge_before"] = _best(lambda: triangular_update(a, b2), 2 if D_x > 2000 else 3)[0]
    for name, part in (("MM pass", g), ("DSGD round", rs)):
        blob = pickle.dumps(part, protocol=4)
        t_add = _best(lambda blob=blob: pickle.loads(blob) + pickle.loads(blob), 5)[0]
        out[name]["merge_after"] = out[name]["merge_before"] = t_add
    out["closed form"]["merge_after"] += _best(lambda: pickle.loads(pickle.dumps(sums, protocol=4)), 3)[0]
    # bytes: a partial, and what the driver ships every pass
    out["closed form"].update(part_bytes=len(pickle.dumps(sums, protocol=4)), shared_bytes=0)
    out["MM pass"].update(part_bytes=len(pickle.dumps(g, protocol=4)), shared_bytes=len(pickle.dumps(B, protocol=4)))
    out["DSGD round"].update(
        part_bytes=len(pickle.dumps(rs, protocol=4)), shared_bytes=len(pickle.dumps(o["state"], protocol=4))
    )
    # the driver's own work per pass
    C_theta = o["output"].C_theta
    # the driver is no Dask worker: its BLAS uses the CPUs it has (this machine's)
    from threadpoolctl import threadpool_limits

    from rffor.executor import usable_cpus

    with threadpool_limits(usable_cpus()):
        t_cf, _ = _timed(lambda: SquareMetric.from_sums(sums, C_theta, 1e-4).closed_form(sums, MODEL_M))
    metric = SquareMetric.from_sums(sums, C_theta, 1e-4)
    with threadpool_limits(usable_cpus()):
        t_step = _best(lambda: metric.solve(B), 3)[0]
    out["closed form"]["driver_s"] = t_cf
    out["MM pass"]["driver_s"] = t_step
    out["DSGD round"]["driver_s"] = 0.0
    print(
        f"D_x={D_x}: rows/s per core: closed form {out['closed form']['rate']:,.0f}, MM pass "
        f"{out['MM pass']['rate']:,.0f} (cold {out['MM pass']['rate_cold']:,.0f}), DSGD round "
        f"{out['DSGD round']['rate']:,.0f}; TSQR merge {out['closed form']['merge_after']:.3f} s (dense QR "
        f"{out['closed form']['merge_before']:.3f} s); driver closed form {t_cf:.2f} s, MM step {t_step * 1e3:.1f} ms; "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    return out


def noop_task(part, p, chunk_ids):
    """A task that reads nothing and returns 8 bytes: a pass of these times the scheduler and the merges' overhead."""
    return np.zeros(1)


def _spin(stop) -> None:
    """Keep a core busy until ``stop`` is set."""
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


def measure_cluster(address: str, data, P_values: list[int]) -> dict:
    """Per-task and per-pass overhead of the scheduler, from passes of :func:`noop_task` (a least-squares line of
    the pass time against the tasks of the pass), and the transfer rate between two worker processes (a 64 MB
    array fetched by a task on another worker) and to the driver."""
    import scale_out
    from distributed import Client, wait

    rows = count_passes(address, data, scale_out.noop_task, lambda s: (), P_values=P_values, passes=5,
                        modes=("tree",), label="no-op")  # fmt: skip
    tasks = np.array([r["tasks"] for r in rows])
    secs = np.array([r["pass_s"] for r in rows])
    slope, intercept = np.polyfit(tasks, secs, 1)
    out = {"t_task": float(max(slope, 1e-5)), "t_pass": float(max(intercept, 0.0)), "noop": rows}
    # the same passes while every core of this machine computes (as in the validation's passes, where the
    # scheduler, the workers' event loops and their transfers wait for a core): one busy process per core
    import multiprocessing

    from rffor.executor import usable_cpus

    ctx = multiprocessing.get_context("fork")
    stop = ctx.Event()
    hogs = [ctx.Process(target=_spin, args=(stop,), daemon=True) for _ in range(usable_cpus())]
    for hog in hogs:
        hog.start()
    try:
        busy = count_passes(address, data, scale_out.noop_task, lambda s: (), P_values=[p for p in P_values if p <= 16],
                            passes=5, modes=("tree",), label="no-op, cores busy")  # fmt: skip
    finally:
        stop.set()
        for hog in hogs:
            hog.join(timeout=10)
    slope, intercept = np.polyfit([r["tasks"] for r in busy], [r["pass_s"] for r in busy], 1)
    out.update(t_task_busy=float(max(slope, 1e-5)), t_pass_busy=float(max(intercept, 0.0)), noop_busy=busy)
    with Client(address, set_as_default=False) as c:
        w = sorted(c.scheduler_info()["workers"])
        big = c.submit(np.ones, 8 * 2**20, workers=[w[0]], pure=False)  # 64 MB
        big.result()
        tic = time.perf_counter()
        c.submit(np.sum, big, workers=[w[1]], allow_other_workers=False, pure=False).result()
        out["bandwidth_workers"] = 64 * 2**20 / (time.perf_counter() - tic)
        other = c.submit(np.ones, 8 * 2**20, workers=[w[1]], pure=False)
        with c.as_current():
            wait([other])
        tic = time.perf_counter()
        other.result()
        out["bandwidth_driver"] = 64 * 2**20 / (time.perf_counter() - tic)
    print(
        f"scheduler: {out['t_task'] * 1e3:.2f} ms per task, {out['t_pass'] * 1e3:.0f} ms per pass (cores busy: "
        f"{out['t_task_busy'] * 1e3:.2f} ms, {out['t_pass_busy'] * 1e3:.0f} ms); transfers: "
        f"{out['bandwidth_workers'] / 1e6:.0f} MB/s between workers, {out['bandwidth_driver'] / 1e6:.0f} MB/s to the "
        f"driver",
        flush=True,
    )
    return out


def _merge_tasks(P: int, s: int) -> tuple[int, int]:
    """(merge tasks, depth) of the fixed tree over P leaves (rffor.executor.tree_levels)."""
    from rffor.executor import tree_levels

    levels = tree_levels(P, s)
    return sum(1 for level in levels for g in level if len(g) > 1), len(levels)


def thread_speedup(c: dict, threads: float, scaling: str = "measured") -> float:
    """Speed of a chunkwise task on ``threads`` threads of one process against one thread.

    ``"linear"``: ``threads`` (an upper bound: the threads share one interpreter and run at once only where the
    work releases the GIL). ``"measured"``: the 2-thread speedup measured in this run (``c["threads_2"]``,
    :func:`measure_constants`), between 1 and 2 threads linear in between, beyond 2 by Amdahl's law with the
    serial fraction it implies, σ = 2 / speedup_2 − 1: 1 / (σ + (1 − σ) / threads) (a lower estimate: it assumes
    that nothing of the GIL-bound part overlaps at more threads); ``"linear"`` when not measured.
    """
    if threads <= 1:
        return 1.0
    s2 = c.get("threads_2")
    if scaling == "linear" or s2 is None:
        return float(threads)
    s2 = min(max(s2, 1.0), 2.0)
    if threads <= 2:
        return 1.0 + (threads - 1.0) * (s2 - 1.0)
    sigma = 2.0 / s2 - 1.0
    return 1.0 / (sigma + (1.0 - sigma) / threads)


def pass_time(
    c: dict,
    cl: dict,
    *,
    route: str,
    n: int,
    workers: int,
    threads: int,
    P: int,
    layout: str,
    era: str,
    cores: int,
    n_chunks: int,
    bandwidth: float,
    latency: float,
    s: int = 8,
    fanout: int = 2,
    threads_scaling: str = "measured",
    idle_cores: float = 0.0,
    this_machine: bool = False,
) -> dict:
    """Modelled seconds of one pass of ``route`` (its constants ``c`` at a D_x, the cluster's ``cl``).

    - compute: ``n / rate`` core-seconds over the ``min(P, cores)`` tasks at work at once, each core running
      ceil(P / cores) tasks in turn, each with its fixed seconds ``task_s`` (the intercept of the rate's line);
      with ``layout="thread"`` on workers of T threads (a multiple of s) a process runs T partitions at once on
      its threads (a fused first-level task) at :func:`thread_speedup` (T); on this machine (the validation), 2+
      tasks at once compute at the rate ``concurrency`` measured for processes sharing its cores, and, when the
      cores are all at work, the cluster's idle CPU (``idle_cores``: scheduler, nannies and workers between tasks,
      measured) is taken from them, and the scheduler's times are those measured with every core busy;
      with ``layout="worker"`` a chunkwise task (closed form, MM; not a DSGD round, one sequential chain) shares its
      chunks among its u = min(threads, n_chunks / P, cores / tasks) threads at :func:`thread_speedup` (u), plus
      the tree over its c = ``n_chunks / P`` chunk results: c − 1 merges shared by its threads, and the last
      groups' merges after the last chunk, ceil(log_s c) · (s − 1) of them in sequence;
    - scheduler: ``t_task`` per task and ``t_pass`` per pass. The tasks are the executor's
      (:meth:`rffor.executor.dask._DaskSession._attempt`): leaves, merge tasks, and the broadcast's copy tasks
      (:func:`rffor.executor.dask.broadcast_copies`: ceil(W / f) − 1 holders besides the scattered object's worker,
      f = :func:`~rffor.executor.dask.broadcast_serves` of the shared object's size). With ``layout="thread"`` on
      workers whose threads T are a multiple of s, a leaf task runs T / s first-level groups (T partitions, P / T
      leaf tasks), and the merge tasks are those of the tree above the first level;
    - ``era="after"``: the tree: depth × ((s − 1) merges + one partial's transfer + latency) on the critical path,
      the root to the driver, the shared object down the broadcast tree (its hops, then a holder sending it to the
      f − 1 workers it serves); ``"before"``: every partial to the driver, received one after another, P − 1
      merges there (a dense QR for the closed form), the shared object fetched by every worker from the one
      holding it;
    - the driver's own solve.
    """
    from rffor.executor.dask import broadcast_copies, broadcast_serves

    rate, part, shared = c["rate"], c["part_bytes"], c["shared_bytes"]
    running = max(1, min(P, cores))  # tasks at work at once
    rounds = math.ceil(P / running)  # tasks each core runs in turn
    fold, speedup = 0.0, 1.0
    if layout == "thread" and threads >= s and threads % s == 0 and P >= threads:
        # fused first-level tasks: a worker process runs T partitions at once on its T threads
        running = max(1, min(P, cores) // threads)
        speedup = thread_speedup(c, threads, threads_scaling)
        rounds = math.ceil(P / (running * threads))
    elif layout == "worker" and c.get("chunkwise", True):  # a task's threads share its chunks
        usable = max(1.0, min(threads, n_chunks / P, cores / running))
        speedup = thread_speedup(c, usable, threads_scaling)
        per_task = n_chunks / P
        local_depth = math.ceil(math.log(per_task, s) - 1e-9) if per_task > 1 else 0
        fold = (per_task - 1) * c["merge_after"] / speedup + local_depth * (s - 1) * c["merge_after"]
    if running >= 2:  # this machine's cores at work at once (measured for the validation only)
        rate *= c.get("concurrency", 1.0)
    if this_machine and running * speedup >= cores:  # the cluster's own processes take their share of the cores
        rate *= max(cores - idle_cores, 0.5) / cores
    compute = n / rate / (running * speedup) + rounds * c.get("task_s", 0.0) + fold
    if era == "after":
        merges, depth = _merge_tasks(P, s)
        serves = broadcast_serves(workers, shared, BROADCAST_COPY_BYTES) if shared else 1
        copies, hops = broadcast_copies(workers, serves, fanout) if shared else (0, 0)
        tasks = P + merges + copies
        if layout == "thread" and threads >= s and threads % s == 0:  # T / s first-level groups per task
            groups = math.ceil(P / s)
            tasks = math.ceil(groups / (threads // s)) + _merge_tasks(groups, s)[0] + copies
        tree = depth * ((s - 1) * c["merge_after"] + part / bandwidth + latency) + part / bandwidth
        bcast = hops * (shared / bandwidth + latency) + (serves - 1) * shared / bandwidth if shared else 0.0
    else:
        tasks = P
        tree = P * part / bandwidth + (P - 1) * c["merge_before"]
        bcast = workers * shared / bandwidth
        copies = 0
    if this_machine and running * speedup >= cores and "t_task_busy" in cl:
        # this machine (the validation): the tasks fill its cores, the scheduler and workers wait for them
        sched = tasks * cl["t_task_busy"] + cl["t_pass_busy"]
    else:
        sched = tasks * cl["t_task"] + cl["t_pass"]
    total = compute + sched + tree + bcast + c["driver_s"]
    return {"seconds": total, "compute": compute, "scheduler": sched, "merges": tree, "broadcast": bcast,
            "driver": c["driver_s"], "tasks": tasks, "copies": copies}  # fmt: skip


def _idle_cores(seconds: float = 2.0) -> float:
    """Cores used by this process's child processes (a cluster's scheduler, nannies and workers, idle) over
    ``seconds``."""
    import psutil

    def cpu() -> float:
        total = 0.0
        for proc in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                times = proc.cpu_times()
                total += times.user + times.system
        return total

    before = cpu()
    time.sleep(seconds)
    return max(cpu() - before, 0.0) / seconds


def validate_model(args, consts: dict, cl: dict) -> list[dict]:
    """Measured pass times on this machine against the model's, for the three routes, thread layouts of 1-16
    workers (P = workers) and worker layouts of 1-2 two-thread workers, from a Zarr store of ``--model-n`` curves
    in chunks of ``--model-chunk`` rows; the constants (``consts``, ``cl``) come from this run."""
    from rffor.executor import usable_cpus
    from rffor.solvers.mm import grad_task
    from rffor.solvers.round_plan import round_task
    from rffor.solvers.sums import sums_task

    settings = [("thread", 1, 1), ("thread", 2, 1), ("thread", 4, 1), ("worker", 1, 2), ("worker", 2, 2)]
    if not args.quick:
        settings[3:3] = [("thread", 8, 1), ("thread", 16, 1)]
    cores = usable_cpus()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        mem = _model_data(args.model_n, args.seed, args.model_chunk)
        data = rffor.data.write(os.fspath(tmp / "model.zarr"), mem.X, mem.Y, mem.theta, chunks=args.model_chunk)
        o = _route_objects(mem, consts["D_x"], args.seed)
        for layout, workers, threads in settings:
            P = workers
            sub = tmp / f"{layout}{workers}"
            sub.mkdir()
            with dask_processes(sub, workers, nthreads=threads) as address:
                idle = _idle_cores()
                ex = DaskExecutor(scheduler_address=address)
                with ex.open(data, P, partitions_per=layout) as s:
                    maps_h = s.share(o["maps"])
                    plan_h = s.share(o["plan"](s.partitions))
                    measured = {}
                    for route in MODEL_ROUTES:
                        seconds = []
                        for _ in range(args.model_passes):
                            if route == "closed form":  # one pass in a fit: cold, its features computed
                                h = s.share(_cold(o["maps"]))
                                s.reduce(sums_task, h, label="closed form")
                                s.release(h)
                            elif route == "MM pass":
                                h = s.share(o["B"])
                                s.reduce(grad_task, maps_h, h, o["loss"], label="pass")
                                s.release(h)
                            else:
                                h = s.share(o["state"])
                                s.reduce(round_task, plan_h, h, 0, label="round")
                                s.release(h)
                            seconds.append(s.stats[-1].seconds)
                        # MM: the passes after the first (features cached), as the model's warm rate
                        measured[route] = float(np.median(seconds[1:] if route == "MM pass" else seconds))
            for route in MODEL_ROUTES:
                c = dict(consts[route])
                pred = pass_time(c, cl, route=route, n=data.n, workers=workers, threads=threads, P=P, layout=layout,
                                 idle_cores=idle, this_machine=True, era="after", cores=cores, n_chunks=data.n_chunks,
                                 bandwidth=cl["bandwidth_workers"],
                                 latency=0.0)  # fmt: skip
                row = {"route": route, "layout": layout, "workers": workers, "threads": threads, "P": P, "idle": idle,
                       "measured_s": measured[route], "predicted_s": pred["seconds"], "parts": pred,
                       "load": os.getloadavg()[0]}  # fmt: skip
                row["error"] = row["predicted_s"] / row["measured_s"] - 1
                rows.append(row)
                print(f"{route:11s} {layout:6s} {workers:2d}x{threads}: measured {row['measured_s']:.2f} s, "
                      f"model {row['predicted_s']:.2f} s ({100 * row['error']:+.0f}%), load {row['load']:.1f}",
                      flush=True)  # fmt: skip
    return rows


def project(consts_by_dx: dict, cl: dict) -> list[dict]:
    """Efficiency (ideal compute time over modelled pass time) at 16-1024 cores, n = 1e7 and 1e8, before and after
    issue 23: before, one single-threaded worker per core, P = cores, every partial gathered and folded on the
    driver (dense QRs), shared objects fetched from one worker; after, the tree on the workers, broadcasts by tree,
    nodes of 16 cores running one partition each for the closed form and MM (``partitions_per="worker"``) and one
    per core for DSGD (one worker process of 16 threads per node, the tree's first level of 8 partitions per
    task)."""
    out = []
    for D_x, consts in sorted(consts_by_dx.items()):
        # at large D_x the TSQR merges weigh: a tree of fan-in 2 (split_every=2) shortens their critical path, and
        # chunks of 10 D_x rows make a chunk's merge small against its appends
        variants = [(route, route, 8, MODEL_CHUNK_ROWS) for route in MODEL_ROUTES]
        if D_x >= 2000:
            variants[1:1] = [
                ("closed form, split_every=2", "closed form", 2, MODEL_CHUNK_ROWS),
                (f"closed form, split_every=2, chunks of {10 * D_x:,}", "closed form", 2, 10 * D_x),
            ]
        for n in (10**7, 10**8):
            for W in (16, 64, 256, 1024):
                nodes = max(1, W // NODE_CORES)
                for label, route, s, chunk_rows in variants:
                    n_chunks = n // chunk_rows
                    c = {k: v for k, v in consts[route].items() if k != "concurrency"}  # this machine's only
                    ideal = n / c["rate"] / W
                    row = {"D_x": D_x, "n": n, "cores": W, "nodes": nodes, "route": label, "ideal_s": ideal}
                    for era, scaling in (("before", "linear"), ("after", "linear"), ("after", "measured")):
                        if era == "before":
                            kw = dict(workers=W, threads=1, P=min(W, n_chunks), layout="thread")
                        elif route == "DSGD round":
                            kw = dict(workers=nodes, threads=NODE_CORES, P=min(W, n_chunks), layout="thread")
                        else:
                            kw = dict(workers=nodes, threads=NODE_CORES, P=nodes, layout="worker")
                        t = pass_time(c, cl, route=route, n=n, era=era, cores=W, n_chunks=n_chunks,
                                      bandwidth=NET_BANDWIDTH, latency=NET_LATENCY, s=s, threads_scaling=scaling,
                                      **kw)  # fmt: skip
                        key = era if scaling == "linear" or era == "before" else "after_measured"
                        row[f"{key}_s"] = t["seconds"]
                        row[f"{key}_efficiency"] = ideal / t["seconds"]
                        row[f"{key}_parts"] = t
                    out.append(row)
    return out


def model_figure(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = sorted({(r["n"], r["D_x"]) for r in rows})
    fig, axes = plt.subplots(1, len(cases), figsize=(4.2 * len(cases), 3.6), sharey=True)
    colours = {"closed form": "C0", "MM pass": "C1", "DSGD round": "C2"}
    axes = np.atleast_1d(axes)
    for ax, (n, D_x) in zip(axes, cases, strict=True):
        for route in dict.fromkeys(r["route"] for r in rows if (r["n"], r["D_x"]) == (n, D_x)):
            sel = sorted(
                (r for r in rows if (r["n"], r["D_x"], r["route"]) == (n, D_x, route)), key=lambda r: r["cores"]
            )
            W = [r["cores"] for r in sel]
            colour = colours.get(route, "C3" if "chunks" not in route else "C4")
            ax.plot(W, [100 * r["after_efficiency"] for r in sel], "-o", color=colour, label=route)
            if route in colours:
                ax.plot(W, [100 * r["before_efficiency"] for r in sel], "--", color=colour, alpha=0.6)
        ax.set_xscale("log", base=2)
        ax.set_xticks([16, 64, 256, 1024], ["16", "64", "256", "1024"])
        ax.set_ylim(0, 102)
        ax.axhline(90, color="0.8", lw=0.8)
        ax.axhline(75, color="0.8", lw=0.8)
        ax.set_title(f"n = 1e{int(round(math.log10(n)))}, D_x = {D_x}")
        ax.set_xlabel("cores (nodes of 16)")
    axes[0].set_ylabel("projected efficiency (%)")
    for ax in axes:
        ax.legend(title="solid: after, dashed: before", fontsize=7, title_fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def bench_model(args) -> dict:
    """Constants at the validation's D_x and at D_x = 1000 and 4000, the cluster's overheads, the validation on this
    machine, the projections."""
    out: dict = {"constants": {}}
    dxs = [args.model_features] + ([] if args.quick else [1000, 4000])
    with tempfile.TemporaryDirectory() as tmp:
        for D_x in dict.fromkeys(dxs):
            rows = args.model_rows if D_x <= 1000 else max(2 * args.model_chunk, args.model_rows // 4)
            out["constants"][D_x] = measure_constants(D_x, rows, args.seed, args.model_chunk, Path(tmp),
                                                      concurrency=D_x == args.model_features)  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        P_values = [2, 4, 8, 16] if args.quick else [2, 4, 8, 16, 32, 64, 128]
        data = synthetic_store(tmp / "noop.zarr", max(P_values), 10, args.seed)
        with dask_processes(tmp, 4 if args.quick else args.workers) as address:
            out["cluster"] = measure_cluster(address, data, P_values)
    cl = out["cluster"]
    out["validation"] = validate_model(args, out["constants"][args.model_features], cl)
    projected = {D_x: c for D_x, c in out["constants"].items() if D_x in (1000, 4000)} or out["constants"]
    out["projection"] = project(projected, cl)
    return out


# ---------------------------------------------------------------------------------------------------------------
# 4b. a worker's threads: the routes' tasks on a pool of 1 and 2 threads in one process
# ---------------------------------------------------------------------------------------------------------------

#: the pool's rows: a route's task, folded by :func:`rffor.executor.fold_chunks` (chunkwise routes) or run on P = 2
#: partitions at once (DSGD: a partition is one sequential chain, so a worker's threads run partitions)
POOL_ROUTES = (
    "closed form",
    "closed form (f2py TSQR)",
    "closed form (f2py TSQR, Zarr reads)",
    "MM pass cold",
    "MM pass warm",
    "MM pass warm (Zarr reads)",
    "DSGD round (P = 2)",
    "DSGD round (P = 2, Zarr reads)",
)


def bench_pool(args) -> list[dict]:
    """Pass times of the routes' tasks in this process on a pool of 1 and of 2 threads (one BLAS thread each), as a
    Dask worker of that many threads runs them: the closed form's :func:`~rffor.solvers.sums.sums_task` (cold:
    features computed; also with the TSQR steps through SciPy's f2py wrappers, which hold the GIL: the code before
    the ctypes path of :func:`rffor._linalg._tpqr`), an MM pass's :func:`~rffor.solvers.mm.grad_task` cold and warm
    (features from the feature cache), both folded over all chunks by :func:`rffor.executor.fold_chunks` (the
    ``partitions_per="worker"`` layout); a DSGD round's :func:`~rffor.solvers.round_plan.round_task` on 2 partitions
    run on the pool (``partitions_per="thread"``; DSGD refuses ``"worker"``: a partition is one chain of steps).
    Rows "(Zarr reads)": every chunk read by Zarr's own pipeline instead of from its files (the code before
    :class:`rffor.data._ChunkFiles`). For the chunkwise routes also "one task": the task called once on all chunks
    in one thread (a 1-thread worker's pass, whose reads overlap its compute in :meth:`iter_chunks`'s prefetch
    thread): the time a worker of 2 threads must beat. A Zarr store of ``--pool-n`` curves in chunks of
    ``--model-chunk`` rows, the model's objects at ``--model-features``; best of ``--repeats`` after a warm-up, and
    the speedup of 2 threads over 1."""
    from concurrent.futures import ThreadPoolExecutor

    import rffor._linalg as linalg
    from rffor.executor import fold_chunks, one_blas_thread
    from rffor.solvers.mm import grad_task
    from rffor.solvers.round_plan import round_task
    from rffor.solvers.sums import sums_task

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        mem = _model_data(args.pool_n, args.seed, args.model_chunk)
        data = rffor.data.write(os.fspath(Path(tmp) / "pool.zarr"), mem.X, mem.Y, mem.theta, chunks=args.model_chunk)
        o = _route_objects(mem, args.model_features, args.seed)
        maps, B, loss = o["maps"], o["B"], o["loss"]
        ids = list(range(data.n_chunks))
        parts = data.partition(2)
        plan = o["plan"](parts)
        s = args.split_every

        def fold(fn, *fn_args):
            return lambda T: fold_chunks(fn, data, 0, ids, fn_args, None, T, s)

        def dsgd(T):
            with one_blas_thread(), ThreadPoolExecutor(T) as pool:
                return list(pool.map(lambda p: round_task(data, p, parts[p], plan, o["state"], 0), range(2)))

        passes = {
            "closed form": lambda T: fold(sums_task, _cold(maps))(T),
            "MM pass cold": lambda T: fold(grad_task, _cold(maps), B, loss)(T),
            "MM pass warm": fold(grad_task, maps, B, loss),
            "DSGD round (P = 2)": dsgd,
        }
        one_task = {  # a worker of 1 thread with partitions_per="thread": one call over all chunks (prefetching)
            "closed form": lambda: sums_task(data, 0, ids, _cold(maps)),
            "MM pass cold": lambda: grad_task(data, 0, ids, _cold(maps), B, loss),
            "MM pass warm": lambda: grad_task(data, 0, ids, maps, B, loss),
        }
        for route in args.pool_routes or POOL_ROUTES:
            base = route.split(" (")[0] if "(P = 2" not in route else "DSGD round (P = 2)"
            routines, chunk_files = linalg._tpqr_routines, rffor.data._chunk_files
            if "f2py TSQR" in route:  # the TSQR steps through SciPy's f2py wrappers (same bits, GIL held)
                linalg._tpqr_routines = lambda: None
            if "Zarr reads" in route:  # every chunk read by Zarr (same bits), not from its files
                rffor.data._chunk_files = lambda key: None
            try:
                row = {"route": route, "n": data.n, "chunks": data.n_chunks, "D_x": args.model_features}
                results = {}
                for T in (1, 2):
                    passes[base](T)  # warm-up (and the MM cache filled)
                    row[f"t{T}_s"], results[T] = _timed(lambda T=T, f=passes[base]: f(T), args.repeats)
                if base in one_task:
                    one_task[base]()
                    row["one_task_s"] = _timed(one_task[base], args.repeats)[0]
                row["speedup"] = row["t1_s"] / row["t2_s"]
                row["same_bits"] = _same_bits(results[1], results[2])
            finally:
                linalg._tpqr_routines, rffor.data._chunk_files = routines, chunk_files
            row["load"] = os.getloadavg()[0]
            out.append(row)
            one = (
                f", one task {row['one_task_s']:.3f} s ({row['one_task_s'] / row['t2_s']:.2f}x)"
                if "one_task_s" in row
                else ""
            )
            print(f"{route:36s} 1 thread {row['t1_s']:.3f} s, 2 threads {row['t2_s']:.3f} s: {row['speedup']:.2f}x"
                  f"{one} (same bits: {row['same_bits']}), load {row['load']:.1f}", flush=True)  # fmt: skip
    return out


def bench_pool_dask(args) -> list[dict]:
    """The lead's comparison on real Dask workers (one ``dask worker`` process): a worker of 1 thread
    (``partitions_per="thread"``, P = 1: one task over all chunks) against a worker of 2 threads
    (``partitions_per="worker"``, P = 1: the chunks shared by its threads), median seconds of ``--model-passes``
    passes of the closed form (cold) and of an MM pass (warm: passes after the first), as :func:`validate_model`
    times them, on the ``--pool`` store."""
    from rffor.solvers.mm import grad_task
    from rffor.solvers.sums import sums_task

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        mem = _model_data(args.pool_n, args.seed, args.model_chunk)
        data = rffor.data.write(os.fspath(tmp / "pool.zarr"), mem.X, mem.Y, mem.theta, chunks=args.model_chunk)
        o = _route_objects(mem, args.model_features, args.seed)
        for layout, threads in (("thread", 1), ("worker", 2)):
            sub = tmp / f"{layout}{threads}"
            sub.mkdir()
            with dask_processes(sub, 1, nthreads=threads) as address:
                ex = DaskExecutor(scheduler_address=address)
                with ex.open(data, 1, partitions_per=layout) as s:
                    maps_h = s.share(o["maps"])
                    for route in ("closed form", "MM pass"):
                        seconds = []
                        for _ in range(args.model_passes + 1):
                            if route == "closed form":
                                h = s.share(_cold(o["maps"]))
                                s.reduce(sums_task, h, label=route)
                            else:
                                h = s.share(o["B"])
                                s.reduce(grad_task, maps_h, h, o["loss"], label=route)
                            s.release(h)
                            seconds.append(s.stats[-1].seconds)
                        row = {"route": route, "layout": layout, "threads": threads, "n": data.n,
                               "seconds": float(np.median(seconds[1:]))}  # fmt: skip
                        rows.append(row)
                        print(f"dask 1 worker x {threads} ({layout}): {route} {row['seconds']:.3f} s", flush=True)
    return rows


def _same_bits(a, b) -> bool:
    """Whether two task results (dataclasses of arrays and numbers, or lists of them) have the same bits."""
    import dataclasses

    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same_bits(x, y) for x, y in zip(a, b, strict=True))
    if dataclasses.is_dataclass(a):
        return all(_same_bits(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return np.asarray(a).tobytes() == np.asarray(b).tobytes()


# ---------------------------------------------------------------------------------------------------------------
# 5. the default routes on 2 workers against 1
# ---------------------------------------------------------------------------------------------------------------

SPEEDUP_ROUTES = ("closed form", "MM", 'lam="auto"')


def fit_rff(*args, **kw):
    """:func:`rffor.solvers.rff.fit_rff` with ConvergenceWarnings silenced (timings only)."""
    from rffor.solvers.rff import fit_rff as fit

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit(*args, **kw)


def _steal_seconds() -> float:
    """CPU seconds the hypervisor gave other guests so far (``/proc/stat`` steal, all CPUs; NaN if unknown): time
    that a paused machine cannot keep from a timing."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
        return float("nan")


def bench_speedup(args) -> list[dict]:
    """Wall time of whole fits by the default routes (:func:`rffor.solvers.rff.fit_rff`: square loss → closed form;
    H_κ^2 → MM passes; square loss with ``lam="auto"``; Nyström features of ``--speedup-features`` centres) from a
    Zarr store of ``--speedup-n`` curves (d = 50, m = 100, chunks of 10,000 rows): in this process (P = 1, one BLAS
    thread), on an embedded LocalCluster of 1 worker (P = 1) and of 2 workers (P = 2), both clusters started first
    and warmed up by one fit of each route (imports, the store opened, first-pass code paths on the workers).

    ``--repeats`` rounds, each fitting every route in this process, on 1 worker and on 2 workers one after the
    other (interleaved: a drift of the machine during the run weighs on the three alike). Per round, speedup = 1
    worker's time over 2 workers', overhead = 1 worker's time over this process's, minus 1; reported: every
    round's, and their medians (the result). Each fit also records the hypervisor's steal time during it."""
    from rffor.executor import SerialExecutor
    from rffor.executor.dask import connect
    from rffor.kernels import Gaussian
    from rffor.losses import Huber, Square

    n = args.speedup_n
    chunk = min(10_000, max(1, n // 8))
    common = dict(kernel_x=Gaussian(1.0 / MODEL_D), kernel_theta=Gaussian(100.0), n_features_x=args.speedup_features,
                  random_state=0, max_passes=50, tol=1e-6)  # fmt: skip
    routes = {"closed form": dict(loss=Square(), lam=1e-6), "MM": dict(loss=Huber(0.1, 2), lam=1e-6),
              'lam="auto"': dict(loss=Square(), lam="auto")}  # fmt: skip
    out = []
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        mem = _model_data(n, args.seed, chunk)
        ds = rffor.data.write(os.fspath(Path(tmp) / "fit.zarr"), mem.X, mem.Y, mem.theta, chunks=chunk)
        del mem
        executors = {0: SerialExecutor()}
        for workers in (1, 2):
            conn = stack.enter_context(connect(n_workers=workers))
            executors[workers] = DaskExecutor(client=conn.client)

        def fit(workers: int, name: str, **kw) -> dict:
            steal = _steal_seconds()
            seconds = _timed(lambda: fit_rff(ds, executor=executors[workers], n_partitions=max(workers, 1),
                                             **{**common, **kw}, **routes[name]))[0]  # fmt: skip
            return {"seconds": seconds, "steal_s": _steal_seconds() - steal}

        for name in SPEEDUP_ROUTES:  # warm-up, not timed: every route once on every executor
            for workers in (0, 1, 2):
                fit(workers, name, max_passes=2, n_features_x=100)
        rounds: dict = {name: [] for name in SPEEDUP_ROUTES}
        for r in range(args.repeats):
            for name in SPEEDUP_ROUTES:
                t = {workers: fit(workers, name) for workers in (0, 1, 2)}
                one = {"serial_s": t[0]["seconds"], "one_worker_s": t[1]["seconds"], "two_workers_s": t[2]["seconds"],
                       "steal_s": sum(x["steal_s"] for x in t.values())}  # fmt: skip
                one["speedup"] = one["one_worker_s"] / one["two_workers_s"]
                one["overhead"] = one["one_worker_s"] / one["serial_s"] - 1
                rounds[name].append(one)
                print(f"round {r + 1} {name}: this process {one['serial_s']:.2f} s, 1 worker "
                      f"{one['one_worker_s']:.2f} s, 2 workers {one['two_workers_s']:.2f} s: speedup "
                      f"{one['speedup']:.2f}x, overhead {100 * one['overhead']:.1f}%, steal {one['steal_s']:.2f} s",
                      flush=True)  # fmt: skip
        for name in SPEEDUP_ROUTES:
            rs = rounds[name]
            row = {"route": name, "n": n, "D_x": args.speedup_features, "rounds": rs, "load": os.getloadavg()[0]}
            for key in ("serial_s", "one_worker_s", "two_workers_s", "speedup", "overhead"):
                row[key] = float(np.median([x[key] for x in rs]))
            out.append(row)
            print(f"{name}: medians over {len(rs)} rounds: this process {row['serial_s']:.2f} s, 1 worker "
                  f"{row['one_worker_s']:.2f} s, 2 workers {row['two_workers_s']:.2f} s: speedup {row['speedup']:.2f}x "
                  f"(rounds {min(x['speedup'] for x in rs):.2f}-{max(x['speedup'] for x in rs):.2f}), overhead "
                  f"{100 * row['overhead']:.1f}% (rounds {100 * min(x['overhead'] for x in rs):.1f} to "
                  f"{100 * max(x['overhead'] for x in rs):.1f}%)", flush=True)  # fmt: skip
    return out


# ---------------------------------------------------------------------------------------------------------------
# 6. the driver's memory over a whole fit (what cluster/ sizes the driver's job by)
# ---------------------------------------------------------------------------------------------------------------


def bench_memory(args) -> list[dict]:
    """Peak Python memory of the driver (tracemalloc: NumPy arrays included) over whole fits on a LocalCluster of 2
    worker processes, P = 8, for D_x Nyström centres: the closed form, MM passes (H_κ^2) and ``lam="auto"`` (square
    loss), on ``--memory-n`` curves (d = 50, m = 100) in 16 chunks. Everything the driver holds is a D_x × D_x-sized
    matrix (the root of a reduce, the SVD of its factor, the Nyström whitening, the MM metric) or smaller: the peak
    is fitted as ``a + c · 8 D_x²`` bytes, independent of P and n."""
    from rffor.executor.dask import connect
    from rffor.kernels import Gaussian
    from rffor.losses import Huber, Square

    n = args.memory_n
    routes = {"closed form": dict(loss=Square(), lam=1e-6), "MM": dict(loss=Huber(0.1, 2), lam=1e-6),
              'lam="auto"': dict(loss=Square(), lam="auto")}  # fmt: skip
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        mem = _model_data(n, args.seed, n // 16)
        ds = rffor.data.write(os.fspath(Path(tmp) / "fit.zarr"), mem.X, mem.Y, mem.theta, chunks=n // 16)
        del mem
        with connect(n_workers=2) as conn:
            ex = DaskExecutor(client=conn.client)
            fit_rff(ds, executor=ex, n_partitions=8, kernel_x=Gaussian(0.02), n_features_x=20, loss=Square(), lam=1e-3)
            for D_x in args.memory_features:
                for name, kw in routes.items():
                    tracemalloc.start()
                    model = dict(kernel_x=Gaussian(1.0 / MODEL_D), kernel_theta=Gaussian(100.0), n_features_x=D_x)
                    fit_rff(ds, executor=ex, n_partitions=8, random_state=0, max_passes=20, **model, **kw)
                    peak = tracemalloc.get_traced_memory()[1]
                    tracemalloc.stop()
                    row = {
                        "route": name,
                        "D_x": D_x,
                        "n": n,
                        "P": 8,
                        "peak_bytes": peak,
                        "per_Dx2": peak / (8 * D_x**2),
                    }
                    out.append(row)
                    print(f"{name} D_x={D_x}: driver peak {peak / 1e6:.1f} MB = {row['per_Dx2']:.1f} x 8 D_x^2",
                          flush=True)  # fmt: skip
    return out


# ---------------------------------------------------------------------------------------------------------------
# report: one README block from every part's saved results
# ---------------------------------------------------------------------------------------------------------------

#: a timing is published only from a run whose 1-minute load average was at most this at its start and its end
#: (runs that did not record the foreign CPU below)
LOAD_LIMIT = 1.5
#: ... or, when recorded, during which other processes used at most this many cores on average
#: (:class:`_common.ForeignCPU`: a load average counts the run's own worker processes too)
FOREIGN_CPU_LIMIT = 0.1

PARTS = ("tpqrt", "counting", "routes", "memory", "model", "speedup", "pool")


def _quiet(res: dict) -> bool:
    if "foreign_cpu_cores" in res:
        return res["foreign_cpu_cores"] <= FOREIGN_CPU_LIMIT
    return max(res["machine"]["load_avg_1_5_15"][0], res.get("load_end", [0])[0]) <= LOAD_LIMIT


def _quiet_text(res: dict) -> str:
    """How quiet the machine was during a timed part (the gate of :func:`_quiet`)."""
    if "foreign_cpu_cores" in res:
        return (f"Other processes used {res['foreign_cpu_cores']:.2f} cores on average during the run (limit "
                f"{FOREIGN_CPU_LIMIT}; the machine's busy CPU time minus this run's processes).")  # fmt: skip
    return f"Load average limit {LOAD_LIMIT} at the start and the end of the run."


def _counting_table(rows: list[dict], route: bool) -> str:
    headers = (["route"] if route else []) + ["mode", "P", "tasks", "depth", "driver merges", "received (KB)",
                                               "sent (KB)", "driver peak (MB)", "tail (ms)"]  # fmt: skip
    body = []
    for r in rows:
        body.append(([r.get("route", "")] if route else []) + [
            r["mode"], r["P"], f"{r['tasks']:.0f}", f"{r['depth']:.0f}", f"{r['driver_merges']:.0f}",
            f"{r['wire_received'] / 1e3:,.0f}", f"{r['wire_sent'] / 1e3:,.0f}", f"{r['driver_peak_bytes'] / 1e6:.1f}",
            f"{r['tail_s'] * 1e3:.0f}",
        ])  # fmt: skip
    return markdown_table(headers, body)


def _growth(rows: list[dict], key: str, a: int = 4, b: int = 32) -> str:
    """``key`` at P = b over P = a, per (route, mode)."""
    out = []
    for route, mode in dict.fromkeys((r.get("route", ""), r["mode"]) for r in rows):
        v = {r["P"]: r[key] for r in rows if (r.get("route", ""), r["mode"]) == (route, mode)}
        if a in v and b in v and v[a]:
            out.append(f"{route} {mode}: {v[b] / v[a]:.2f}x".strip())
    return "; ".join(out)


def report(results: dict[str, dict]) -> str:
    lines = ["### Scale-out (issue 23): `benchmarks/scale_out.py`", ""]
    if "tpqrt" in results and not _quiet(results["tpqrt"]):
        res = results["tpqrt"]
        lines += [
            "**TSQR merges** (LAPACK tpqrt against a dense QR): not published, timed under load "
            f"{res['machine']['load_avg_1_5_15'][0]:g}; rerun `python benchmarks/scale_out.py --tpqrt` on a quiet "
            "machine.",
            "",
        ]
    elif "tpqrt" in results:
        res = results["tpqrt"]
        lines += [
            "**TSQR merges.** Two factors [R | Z] (D_x × (D_x + k)) merged, and one block of rows appended, by LAPACK "
            "tpqrt against a dense QR of the stack, one BLAS thread, best of the repeats; difference: largest entry "
            "of the difference (rows' signs normalised) over the largest entry.",
            "",
            provenance(res["machine"], res["argv"], load_end=res.get("load_end")),
            "",
            markdown_table(
                ["operation", "D_x", "k", "dense QR (s)", "tpqrt (s)", "speedup", "difference"],
                [
                    [
                        r["op"],
                        r["D_x"],
                        r["k"],
                        f"{r['dense_s']:.3f}",
                        f"{r['tpqrt_s']:.3f}",
                        f"{r['speedup']:.2f}x",
                        f"{r['rel_diff']:.1e}",
                    ]
                    for r in res["tpqrt"]
                ],
            ),  # fmt: skip
            "",
        ]
    for key, route in (("counting", False), ("routes", True)):
        if key not in results:
            continue
        res = results[key]
        rows = res[key]
        what = (
            f"a synthetic reduction (TSQR factors of {res['features']} cosine features + 24 outputs, "
            f"{res['features'] * (res['features'] + 24) * 8 / 1e3:.0f} KB each)"
            if key == "counting"
            else f"the routes' own passes at D_x = {res['route_features']} (random Fourier features, the exact output "
            "factor): the closed form's TSQR sums, an MM gradient pass (B shared every pass), a DSGD round (state "
            'shared every round), a `lam="auto"` selection pass on a sample of a tenth of the chunks (tree: row '
            "pieces on all P partitions; driver: the partitions holding the sample, as before)"
        )
        lines += [
            f"**Counted per pass ({'real routes' if route else 'synthetic'}).** A separate `dask scheduler` and "
            f"{rows[0]['workers']} `dask worker` processes (one thread each) on 127.0.0.1, a Zarr store of 128 "
            f"chunks, medians over passes 2…; {what}. `tree`: merges on the workers by the fixed tree (split_every "
            f"{res['split_every']}), shared objects broadcast by a tree; `driver`: every partition's result gathered "
            "and folded on the driver, shared objects fetched from one worker (before issue 23). Bytes: the kernel's "
            "counts on the driver's connection to the scheduler; driver peak: tracemalloc during the last pass; tail: "
            "the last task's end on a worker → the result on the driver. Counts do not depend on the machine's load; "
            "the tail is a time, measured under the load below. What still grows with P is small: the driver sends one "
            "task message per task (about 1 KB) and receives a state update per task (about 0.5 KB).",
            "",
            provenance(res["machine"], res["argv"], load_end=res.get("load_end")),
            "",
            f"Bytes received, P = 32 over P = 4: {_growth(rows, 'wire_received')}. Driver peak, P = 32 over P = 4: "
            f"{_growth(rows, 'driver_peak_bytes')}.",
            "",
            _counting_table(rows, route),
            "",
        ]
        if "broadcast_copy_bytes" not in res:  # a run from before copies on few holders
            lines += [
                "The tasks column of this run counts a broadcast copy on every worker (before `broadcast_serves`): "
                "with copies on few holders, an object of 400-600 KB (B, the DSGD state at D_x = 1000) sent to 16 "
                "workers makes 1 copy task, not 15 (`broadcast_copies`); bytes and merges are unchanged. Rerun "
                f"`python benchmarks/scale_out.py --{'routes' if route else 'counting'}` to count them.",
                "",
            ]
    if "memory" in results:
        res = results["memory"]
        rows = res["memory"]
        lines += [
            "**The driver's memory.** Peak Python memory of the driver process (tracemalloc, NumPy included) over "
            f"whole fits on 2 worker processes, P = 8, {rows[0]['n']:,} curves (d = 50, m = 100), Nyström features: "
            "what the driver holds is D_x × D_x-sized (the root of a reduce, the SVD of its factor, the Nyström "
            "whitening, the MM metric) and does not grow with P or n (the counted peaks above). Memory does not "
            "depend on the load.",
            "",
            provenance(res["machine"], res["argv"], load_end=res.get("load_end")),
            "",
            markdown_table(
                ["route", "D_x", "driver peak (MB)", "peak / (8 D_x²)"],
                [[r["route"], r["D_x"], f"{r['peak_bytes'] / 1e6:,.1f}", f"{r['per_Dx2']:.1f}"] for r in rows],
            ),  # fmt: skip
            "",
        ]
    if "model" in results:
        res = results["model"]
        lines += ["**Cost model.**", "", provenance(res["machine"], res["argv"], load_end=res.get("load_end")),
                  "", _quiet_text(res), ""]  # fmt: skip
        if not _quiet(res):
            lines += [
                "Not published: the machine was not quiet, and the model's constants and its validation are "
                "timings. Rerun the command above on a quiet machine.",
                "",
            ]
        else:
            lines += _model_lines(res, results.get("model_runs"))
    missing = [p for p in ("model", "speedup") if p not in results]
    if missing:
        lines += [
            f"**{' and '.join({'model': 'Cost model', 'speedup': 'default routes on 2 workers'}[p] for p in missing)}"
            "**: timings, not run yet on a quiet machine: "
            + ", ".join(f"`python benchmarks/scale_out.py --{p}`" for p in missing)
            + ".",
            "",
        ]
    if "speedup" in results:
        res = results["speedup"]
        lines += ["**Default routes on 2 workers against 1.**", "",
                  provenance(res["machine"], res["argv"], load_end=res.get("load_end")), "", _quiet_text(res),
                  ""] + ([f"Code: {res['note']}.", ""] if res.get("note") else [])  # fmt: skip
        if not _quiet(res):
            lines += ["Not published: the machine was not quiet; rerun the command above on a quiet machine.", ""]
        else:
            rows = res["speedup"]
            if "rounds" in rows[0]:
                k = len(rows[0]["rounds"])
                steal = sum(x["steal_s"] for r in rows for x in r["rounds"])
                lines += [
                    f"Whole fits from a Zarr store of {rows[0]['n']:,} curves (d = 50, m = 100), Nyström D_x = "
                    f"{rows[0]['D_x']}; both clusters started and warmed up (every route once, not timed) first, then "
                    f"{k} rounds, each fitting every route in this process, on 1 worker and on 2 one after the other; "
                    "speedup and overhead per round, the result their median. Goal: ≥ 1.7x on 2 workers, overhead "
                    f"≤ 5%. The hypervisor's steal time during the timed fits: {steal:.1f} s in all.",
                    "",
                    markdown_table(
                        [
                            "route",
                            "this process (s)",
                            "1 worker (s)",
                            "2 workers (s)",
                            "speedup",
                            "overhead",
                            "speedup per round",
                            "overhead per round",
                        ],
                        [
                            [
                                r["route"],
                                f"{r['serial_s']:.2f}",
                                f"{r['one_worker_s']:.2f}",
                                f"{r['two_workers_s']:.2f}",
                                f"{r['speedup']:.2f}x",
                                f"{100 * r['overhead']:.1f}%",
                                " ".join(f"{x['speedup']:.2f}" for x in r["rounds"]),
                                " ".join(f"{100 * x['overhead']:.1f}" for x in r["rounds"]),
                            ]
                            for r in rows
                        ],
                    ),  # fmt: skip
                    "",
                ]
            else:
                lines += [
                    f"Whole fits from a Zarr store of {rows[0]['n']:,} curves (d = 50, m = 100), Nyström D_x = "
                    f"{rows[0]['D_x']}; best of the repeats; goal: ≥ 1.7x on 2 workers, overhead ≤ 5%.",
                    "",
                    markdown_table(
                        ["route", "this process (s)", "1 worker (s)", "2 workers (s)", "speedup", "overhead"],
                        [
                            [
                                r["route"],
                                f"{r['serial_s']:.1f}",
                                f"{r['one_worker_s']:.1f}",
                                f"{r['two_workers_s']:.1f}",
                                f"{r['speedup']:.2f}x",
                                f"{100 * r['overhead']:.1f}%",
                            ]
                            for r in rows
                        ],
                    ),  # fmt: skip
                    "",
                ]
        others = [r for r in results.get("speedup_runs", []) if _quiet(r)]
        if others:
            lines += [
                "Other quiet runs of the command (speedup / overhead per route: medians over the rounds, their "
                "range in brackets; runs without rounds timed every configuration's 3 fits one after the other, "
                "all in this process first, then on 1 worker, then on 2, and report the best fit of each, so a drift "
                "of the machine between the three phases entered the ratios): "
                + "; ".join(
                    r["machine"]["date"]
                    + (f" ({len(r['speedup'][0]['rounds'])} rounds)" if "rounds" in r["speedup"][0] else " (best of 3)")
                    + (f", {r['note']}" if r.get("note") else "")
                    + ": "
                    + ", ".join(_speedup_text(x) for x in r["speedup"])
                    for r in others
                )  # fmt: skip
                + ". The goal holds in a run only where every route is ≥ 1.7x and ≤ 5%.",
                "",
            ]
        lines += _speedup_reading(res, results.get("model"), others)
    if "pool" in results:
        lines += _pool_lines(results["pool"])
    return "\n".join(lines)


def _speedup_reading(res: dict, model: dict | None, others: list[dict]) -> list[str]:
    """Where the speedup runs' spread came from and what this machine allows, from the saved results."""
    rows = res["speedup"]
    if "rounds" not in rows[0]:
        return []
    spread = {
        r["route"]: (max(x["overhead"] for x in r["rounds"]) - min(x["overhead"] for x in r["rounds"])) for r in rows
    }
    text = (
        "Where the spread most likely came from (not isolated factor by factor): the runs without rounds timed all "
        "fits in this process first, then on 1 worker, then on 2, and divided the best of 3 of one phase by the best "
        "of 3 of another, so whatever drifted between the phases (minutes apart: the page cache, the other helpers' "
        "paused processes, the VM's neighbours) went into the ratio, and one fast fit moved a best-of-3; their "
        "clusters were also warmed up by a small closed form only, so MM's and the selection's first use on the "
        "workers fell into the timed fits. Interleaved and warmed up by every route, the three configurations of a "
        "round run within a minute of each other; the overhead's spread over the rounds of this run is "
        + ", ".join(f"{route} {100 * s:.1f} points" for route, s in spread.items())
        + "; the hypervisor's steal time per round (a few tenths of a second against fits of 7-20 s) is the part no "
        "pause of this machine's processes removes."
    )
    conc = None
    if model and "constants" in model:
        c = next((c for c in model["constants"].values() if "concurrency" in c.get("MM pass", {})), {})
        conc = {route: c[route].get("concurrency") for route in ("closed form", "MM pass") if route in c}
    if conc and all(v is not None for v in conc.values()):
        text += (
            " What this machine gives two processes at once: each runs at "
            + " and ".join(f"{v:.2f} ({route})" for route, v in conc.items())
            + " of one process alone (the model's `2 processes`, measured by the `--model` run), so 2 workers can be "
            "at most "
            + " and ".join(f"{2 * v:.2f}x" for v in conc.values())
            + " as fast as one on these tasks, before any orchestration."
        )
    return [text, ""]


def _speedup_text(x: dict) -> str:
    """A route's speedup and overhead in one run (medians and the rounds' range when it has rounds)."""
    text = f"{x['route']} {x['speedup']:.2f}x"
    if "rounds" in x:
        s = [r["speedup"] for r in x["rounds"]]
        o = [100 * r["overhead"] for r in x["rounds"]]
        return text + f" [{min(s):.2f}-{max(s):.2f}] / {100 * x['overhead']:.1f}% [{min(o):.1f} to {max(o):.1f}]"
    return text + f" / {100 * x['overhead']:.1f}%"


#: the validation's goal: the model within this relative error of every measured pass
MODEL_TOLERANCE = 0.25


def _validation_verdict(rows: list[dict]) -> str:
    """Which settings the model predicts within :data:`MODEL_TOLERANCE`, per route, and the worst error."""
    parts = []
    for route in MODEL_ROUTES:
        sel = [r for r in rows if r["route"] == route]
        ok = sum(abs(r["error"]) <= MODEL_TOLERANCE for r in sel)
        worst = max(sel, key=lambda r: abs(r["error"]))
        parts.append(f"{route} {ok} of {len(sel)} (worst {100 * worst['error']:+.0f}%, {worst['layout']} "
                     f"{worst['workers']}x{worst['threads']})")  # fmt: skip
    met = all(abs(r["error"]) <= MODEL_TOLERANCE for r in rows)
    return (
        f"Within {100 * MODEL_TOLERANCE:.0f}%: "
        + "; ".join(parts)
        + f". Goal: **{'met' if met else 'not met'}**"
        + ("." if met else ": the projections below rest on a model this machine does not confirm everywhere.")
    )


def _model_runs_lines(runs: list[dict], latest: dict | None = None) -> list[str]:
    """Earlier runs of ``--model`` kept beside the latest (``results/scale_out_model_run_*.json``): each run's machine,
    arguments and code, its constants at the validation's D_x and its validation, so the block shows how far one
    machine's runs spread and what another machine gave."""
    if not runs:
        return []
    items = []
    for r in runs:
        D_x = min(r["constants"], key=int)
        rates = ", ".join(f"{route} {r['constants'][D_x][route]['rate']:,.0f}" for route in MODEL_ROUTES)
        parts = []
        for route in MODEL_ROUTES:
            sel = [v for v in r["validation"] if v["route"] == route]
            worst = max(sel, key=lambda v: abs(v["error"]))
            ok = sum(abs(v["error"]) <= MODEL_TOLERANCE for v in sel)
            parts.append(f"{route} {ok} of {len(sel)} (worst {100 * worst['error']:+.0f}%)")
        met = all(abs(v["error"]) <= MODEL_TOLERANCE for v in r["validation"])
        extra = " ".join(a for a in r.get("argv", [])[2:] if a != "--no-readme")
        items.append(
            f"{r['machine']['date']} on {r['machine']['cpu']}"
            + (f" (`{extra}`)" if extra else "")
            + (f", {r['note']}" if r.get("note") else "")
            + f": rows/s per core at D_x = {D_x} {rates}; within {100 * MODEL_TOLERANCE:.0f}%: "
            + "; ".join(parts)
            + f", **{'met' if met else 'not met'}**"
        )
    spread = ""
    if latest is not None:  # the constants' spread over this machine's runs (the latest included)
        D_x = min(latest["constants"], key=int)
        same = [r for r in [*runs, latest] if r["machine"]["cpu"] == latest["machine"]["cpu"] and D_x in r["constants"]]
        if len(same) > 1:
            ratio = {route: [r["constants"][D_x][route]["rate"] for r in same] for route in MODEL_ROUTES}
            worst = max(ratio, key=lambda k: max(ratio[k]) / min(ratio[k]))
            spread = (
                f" On {latest['machine']['cpu']}, the rows/s per core at D_x = {D_x} of its {len(same)} runs (this "
                f"block's included) spread by up to {max(ratio[worst]) / min(ratio[worst]):.2f}x ({worst}: "
                f"{min(ratio[worst]):,.0f} … {max(ratio[worst]):,.0f}): a constant of one run is not this machine's."
            )
    return [
        "Other runs of the command (`benchmarks/results/scale_out_model_run_*.json`; each with its own constants, "
        "measured in that run): " + "; ".join(items) + "." + spread,
        "",
    ]


def _pool_lines(res: dict) -> list[str]:
    """The README block's rows of ``--pool``: a worker's 2 threads against 1 on each route's task."""
    lines = ["**A worker's threads** (`partitions_per=\"worker\"`): each route's task on a pool of 1 and of 2 threads "
             "in one process, one BLAS thread each.", "", provenance(res["machine"], res["argv"],
             load_end=res.get("load_end")), "", _quiet_text(res), ""]  # fmt: skip
    if not _quiet(res):
        return lines + ["Not published: the machine was not quiet; rerun the command above on a quiet machine.", ""]
    rows = res["pool"]
    dask_rows = res.get("pool_dask") or []
    if dask_rows:
        by = {(r["route"], r["threads"]): r["seconds"] for r in dask_rows}
        lines += [
            "On one `dask worker` process (the same store; median pass, MM passes warm): "
            + "; ".join(
                f"{route}: 1 thread {by[route, 1]:.3f} s, 2 threads {by[route, 2]:.3f} s "
                f"({by[route, 1] / by[route, 2]:.2f}x)"
                for route in ("closed form", "MM pass")
            )  # fmt: skip
            + ".",
            "",
        ]
    return lines + [
        f"A Zarr store of {rows[0]['n']:,} curves (d = 50, m = 100) in {rows[0]['chunks']} chunks, Nyström D_x = "
        f"{rows[0]['D_x']} (DSGD: random Fourier features); best of the repeats.",
        "",
        markdown_table(
            ["route", "1 thread (s)", "2 threads (s)", "speedup", "same bits"],
            [
                [
                    r["route"],
                    f"{r['t1_s']:.3f}",
                    f"{r['t2_s']:.3f}",
                    f"{r['speedup']:.2f}x",
                    "yes" if r["same_bits"] else "no",
                ]
                for r in rows
            ],
        ),  # fmt: skip
        "",
    ]


def _model_lines(res: dict, runs: list[dict] | None = None) -> list[str]:
    cl = res["cluster"]
    proj = res["projection"]
    return [
        f"Constants measured in this run with one BLAS thread (a worker's): rows/s per core of each route's own task "
        f"(Nyström features for the closed form and MM, random Fourier features for DSGD; MM with features from "
        f"the cache, as every pass after the first: the least compute, so the least favourable case), merges, the "
        f"driver's solves (with this machine's {res['machine']['cores']} cores: the driver is no Dask worker), bytes; "
        f"the scheduler: {cl['t_task'] * 1e3:.2f} ms per task and "
        f"{cl['t_pass'] * 1e3:.0f} ms per pass (a line through passes of no-op tasks on 16 worker processes sharing "
        f"this machine's cores with the scheduler), transfers {cl['bandwidth_workers'] / 1e6:.0f} MB/s between "
        "workers. Rows/s per core: the slope of a line through the task on one chunk and on all the rows; task: its "
        "intercept, the seconds a task spends whatever its rows (opening the store, a round's set-up), plus "
        "unpickling what a task on a worker receives (maps, B, round plan, state); 2 threads: the task "
        "on a pool of 2 threads of one process against 1 (closed form, MM: a "
        "partition's chunks shared, `fold_chunks`; DSGD: two partitions at once, as a fused first-level task); 2 "
        "processes (the validation's D_x only): the rate of each of 2 processes running the task on half the rows at "
        "once over one process's alone (this machine's 2 cores at work together).",
        "",
        markdown_table(
            [
                "D_x",
                "route",
                "rows/s per core",
                "task (ms)",
                "2 threads",
                "2 processes",
                "merge after (s)",
                "merge before (s)",
                "partial (KB)",
                "shared per pass (KB)",
                "driver (s)",
            ],
            [
                [
                    D_x,
                    route,
                    f"{c[route]['rate']:,.0f}",
                    f"{1e3 * c[route].get('task_s', 0.0):.1f}",
                    f"{c[route]['threads_2']:.2f}x" if "threads_2" in c[route] else "",
                    f"{c[route]['concurrency']:.2f}" if "concurrency" in c[route] else "",
                    f"{c[route]['merge_after']:.4f}",
                    f"{c[route]['merge_before']:.4f}",
                    f"{c[route]['part_bytes'] / 1e3:,.0f}",
                    f"{c[route]['shared_bytes'] / 1e3:,.0f}",
                    f"{c[route]['driver_s']:.3f}",
                ]
                for D_x, c in res["constants"].items()
                for route in MODEL_ROUTES
            ],
        ),  # fmt: skip
        "",
        "Validation: measured pass times on this machine (a separate scheduler and worker processes, P = workers) "
        "against the model fed with the constants above; goal: within 25%.",
        "",
        markdown_table(
            ["route", "layout", "workers x threads", "cluster idle (cores)", "measured (s)", "model (s)", "error"],
            [
                [
                    r["route"],
                    r["layout"],
                    f"{r['workers']}x{r['threads']}",
                    f"{r['idle']:.2f}" if "idle" in r else "",
                    f"{r['measured_s']:.2f}",
                    f"{r['predicted_s']:.2f}",
                    f"{100 * r['error']:+.0f}%",
                ]
                for r in res["validation"]
            ],
        ),  # fmt: skip
        "",
        _validation_verdict(res["validation"]),
        "",
        *_model_runs_lines(runs or [], res),
        "The model's compute: the rows over the cores at work at once, each core's tasks in turn with their fixed "
        'seconds; a task\'s threads (closed form and MM with `partitions_per="worker"`) at the measured 2-thread '
        "speed; a DSGD round's task is one chain: one thread whatever the layout. On this machine two or more tasks at "
        "once run at the measured 2-process rate, and when they fill the cores they share them with the cluster's "
        "own idle CPU (scheduler, nannies, workers' event loops: cluster idle, measured before the passes) and the "
        f"scheduler's times are those of no-op passes with every core busy ({cl.get('t_task_busy', 0) * 1e3:.2f} ms "
        f"per task, {cl.get('t_pass_busy', 0) * 1e3:.0f} ms per pass: its messages and the workers' wait for a "
        "core). The projections use none of these (a node's cores against one core, a scheduler on its own "
        "machine).",
        "",
        f"Projected efficiency per pass (ideal compute time over modelled pass time), before → after: links of "
        f"{NET_BANDWIDTH * 8 / 1e9:g} Gb/s and {NET_LATENCY * 1e3:g} ms per hop, nodes of {NODE_CORES} cores, chunks "
        f"of {MODEL_CHUNK_ROWS:,} curves. Before: one single-threaded worker per core, P = cores, partials gathered "
        "and folded on the driver (dense QRs), shared objects fetched from one worker. After: the tree on the "
        "workers, broadcasts by tree, one worker process per node, one partition per node for the closed form and "
        'MM (`partitions_per="worker"`) and one per core for DSGD (16 per task, one per thread: two groups of the '
        "tree's first level), shared objects copied to few holders (`broadcast_serves`). A node's 16 threads "
        "assumed to run 16x one (linear; in parentheses: Amdahl's law from the 2 threads measured here, see the "
        "caveat below). Goals (n = 1e8, D_x = 1000): ≥ 90% at 256 "
        "cores and ≥ 75% at 1024 on all three routes; the D_x = 4000 closed form ≥ 70% at 1024.",
        "",
        markdown_table(
            ["n", "D_x", "route", "16", "64", "256", "1024"],
            [
                [f"1e{int(round(math.log10(n)))}", D_x, route]
                + [
                    f"{100 * r['before_efficiency']:.0f}% → {100 * r['after_efficiency']:.0f}%"
                    + (f" ({100 * r['after_measured_efficiency']:.0f}%)" if "after_measured_efficiency" in r else "")
                    for r in sorted(
                        (r for r in proj if (r["n"], r["D_x"], r["route"]) == (n, D_x, route)), key=lambda r: r["cores"]
                    )
                ]
                for n, D_x, route in dict.fromkeys((r["n"], r["D_x"], r["route"]) for r in proj)
            ],
        ),  # fmt: skip
        "",
        _tasks_line(proj),
        "",
        "**Caveat (in-task parallelism).** The *after* columns assume that a node's 16 threads in one worker process "
        'run 16x one thread: sharing a partition\'s chunks (closed form, MM, `partitions_per="worker"`) or running '
        "16 partitions at once (DSGD, a fused first-level task). The threads share one interpreter: they run at once "
        "only where the work releases the GIL (the TSQR steps, BLAS, the chunk reads; not the Python and small NumPy "
        "calls around them). This machine measures 2 threads only (the constants' `2 threads`, and the `--pool` "
        "block); Amdahl's law with the serial fraction they imply, σ = 2 / speedup_2 − 1, gives the figures in "
        "parentheses, a lower estimate. The linear columns are upper bounds until a node of many cores confirms "
        "them.",
        "",
        "![projected efficiency](figures/scale_out.png)",
        "",
    ]


def _tasks_line(proj: list[dict]) -> str:
    """Tasks per pass of the *after* layout at n = 1e8, D_x = 1000, per route and core count (the model's count
    of the executor's tasks: leaves, merge tasks, broadcast copies)."""
    rows = [r for r in proj if r["n"] == 10**8 and r["D_x"] == 1000 and "after_parts" in r]
    if not rows:
        return ""
    parts = []
    for route in dict.fromkeys(r["route"] for r in rows):
        sel = sorted((r for r in rows if r["route"] == route), key=lambda r: r["cores"])
        parts.append(
            f"{route}: "
            + ", ".join(
                f"{r['after_parts']['tasks']} ({r['after_parts'].get('copies', 0)} copies) at {r['cores']}" for r in sel
            )
        )
    return (
        "Tasks per pass after (n = 1e8, D_x = 1000; leaves, merge tasks and broadcast copies): "
        + "; ".join(parts)
        + "."
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(parser)
    parser.add_argument("--tpqrt", action="store_true", help="time the TSQR merges")
    parser.add_argument("--counting", action="store_true", help="count per pass on a real scheduler (synthetic)")
    parser.add_argument("--routes", nargs="*", default=None, choices=ROUTES, metavar="ROUTE",
                        help=f"count per pass of the real routes ({', '.join(ROUTES)}; default all)")  # fmt: skip
    parser.add_argument("--model", action="store_true", help="the cost model: constants, validation, projections")
    parser.add_argument("--speedup", action="store_true", help="default routes on 2 workers against 1")
    parser.add_argument("--pool", action="store_true", help="the routes' tasks on a pool of 1 and 2 threads")
    parser.add_argument("--pool-dask", action="store_true", help="--pool also on a Dask worker of 1 and 2 threads")
    parser.add_argument("--pool-n", type=int, default=64_000, help="curves of the pool's store (64000)")
    parser.add_argument("--pool-routes", nargs="+", default=None, choices=POOL_ROUTES, metavar="ROUTE",
                        help=f"the pool's rows ({'; '.join(POOL_ROUTES)}; default all)")  # fmt: skip
    parser.add_argument("--memory", action="store_true", help="the driver's peak memory over whole fits")
    parser.add_argument("--memory-n", type=int, default=16_000, help="curves of the memory fits (16000)")
    parser.add_argument("--memory-features", type=int, nargs="+", default=[250, 500, 1000, 2000],
                        help="D_x of the memory fits (250 500 1000 2000)")  # fmt: skip
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=16, help="worker processes of the counting runs (default 16)")
    parser.add_argument("--passes", type=int, default=4, help="passes per setting of the counting runs (default 4)")
    parser.add_argument("--features", type=int, default=200, help="D_x of the synthetic reduction (default 200)")
    parser.add_argument("--route-features", type=int, default=1000, help="D_x of the routes' counting (1000)")
    parser.add_argument("--model-features", type=int, default=300, help="D_x of the model's validation (300)")
    parser.add_argument("--model-rows", type=int, default=8192, help="rows of the rate measurements (8192)")
    parser.add_argument("--model-n", type=int, default=256_000, help="curves of the validation store (256000)")
    parser.add_argument("--model-chunk", type=int, default=2000, help="rows per chunk of that store (2000)")
    parser.add_argument("--model-passes", type=int, default=3, help="passes per validation setting (3)")
    parser.add_argument("--speedup-n", type=int, default=100_000, help="curves of the speedup fits (100000)")
    parser.add_argument("--speedup-features", type=int, default=1000, help="Nyström centres of those fits (1000)")
    parser.add_argument("--split-every", type=int, default=8)
    parser.add_argument("--report", action="store_true", help="only write the README block from the saved results")
    args = parser.parse_args(argv)
    parts = [p for p in PARTS if (getattr(args, p) is not None if p == "routes" else getattr(args, p))]
    if not parts and not args.report:
        parser.error(
            "choose at least one of --tpqrt, --counting, --routes, --memory, --model, --speedup, --pool, --report"
        )
    if args.routes is not None and not args.routes:
        args.routes = list(ROUTES)
    if args.quick:
        args.model_rows, args.model_n, args.model_chunk, args.model_features = 1024, 8000, 500, 100
        args.speedup_n, args.speedup_features, args.route_features, args.repeats = 8000, 100, 100, 1
        args.pool_n = 8000
    suffix = "_quick" if args.quick else ""
    with limit_blas_threads(args.threads):
        for part in parts:
            results: dict = {"machine": machine_info(args.threads), "argv": sys.argv, "split_every": args.split_every,
                             "features": args.features, "route_features": args.route_features,
                             "broadcast_copy_bytes": BROADCAST_COPY_BYTES}  # fmt: skip
            with ForeignCPU() as foreign:
                if part == "tpqrt":
                    sizes = [(1000, 100)] if args.quick else [(1000, 100), (4000, 100)]
                    results["tpqrt"] = bench_tpqrt(sizes, args.repeats, args.seed, rows=[256, 1024])
                elif part == "counting":
                    results["counting"] = bench_counting(args)
                elif part == "routes":
                    results["routes"] = bench_routes(args)
                elif part == "memory":
                    results["memory"] = bench_memory(args)
                elif part == "model":
                    results.update(bench_model(args))
                    model_figure(results["projection"], figure_path("scale_out", args.quick or args.no_readme))
                elif part == "pool":
                    results["pool"] = bench_pool(args)
                    if args.pool_dask:
                        results["pool_dask"] = bench_pool_dask(args)
                else:
                    results["speedup"] = bench_speedup(args)
            results["load_end"] = os.getloadavg()
            results["foreign_cpu_cores"] = foreign.cores
            print(f"other processes used {foreign.cores:.2f} cores on average during the part", flush=True)
            print(f"results: {save_json('scale_out_' + part + suffix, results)}", flush=True)
    saved: dict = {
        # earlier runs of --speedup kept beside the latest (results/scale_out_speedup_run_*.json): its spread
        "speedup_runs": [json.loads(p.read_text()) for p in sorted(RESULTS.glob("scale_out_speedup_run_*.json"))],
        # and of --model (results/scale_out_model_run_*.json): its spread, other machines, other code
        "model_runs": [json.loads(p.read_text()) for p in sorted(RESULTS.glob("scale_out_model_run_*.json"))],
    }
    for part in PARTS:
        path = BENCH_DIR / "results" / f"scale_out_{part}{suffix}.json"
        if path.exists():
            saved[part] = json.loads(path.read_text())
    text = report(saved)
    print(text)
    if not args.no_readme and not args.quick:
        write_section("scale_out", text, args.readme)


if __name__ == "__main__":
    main()
