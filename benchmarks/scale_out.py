"""Scale-out evidence (issue 23): merges on the workers, broadcasts by tree, counted per pass.

    python benchmarks/scale_out.py --tpqrt              # TSQR merge: LAPACK tpqrt against a dense QR, one thread
    python benchmarks/scale_out.py --counting           # counts per pass, real scheduler, 16 workers, P = 2 … 128
    python benchmarks/scale_out.py --counting --quick   # 4 workers, P = 2 … 16 (a smoke test, ~2 minutes)

1. ``--tpqrt``: :func:`rffor._linalg.merge_triangular` (``dtpqrt`` + ``dtpmqrt``) against
   :func:`rffor._linalg.triangular_update` (a dense QR of the stacked pair) for two TSQR factors ``[R | Z]`` of
   D_x × (D_x + k), D_x + k = 1100 and 4100, one BLAS thread; and :func:`rffor._linalg.append_rows` against
   ``triangular_update`` for one block of new rows (the leaf's step). Best of ``--repeats`` runs each, with the
   largest difference of the two results (signs of rows normalised, relative to the largest entry).
2. ``--counting``: :func:`count_passes`, a generic harness that runs passes of a given task over a real
   ``dask scheduler`` with ``dask worker`` processes (one thread each; rffor's cluster/dask.yaml) for P from 2 to
   128, and records per pass: the merges done by the driver, the bytes its connection to the scheduler received and
   sent (the kernel's counters, :func:`rffor.executor.dask.wire_bytes`), its peak memory during the reduce
   (tracemalloc, on the last pass of each setting only), tasks, tree depth and the driver's idle tail (last task's
   end on a worker → the pass's result on the driver, from the scheduler's task stream). Two modes: ``tree``
   (``session.reduce``: merges on the workers, the root gathered) and ``driver`` (the behaviour before issue 23:
   every partition's result gathered by ``session.map`` and folded on the driver in partition order). The task
   here is synthetic: the TSQR factor of random cosine features of a partition's rows next to its outputs (D_x =
   ``--features`` columns), merged by ``merge_triangular``; the routes' own tasks plug in through
   :func:`count_passes`'s ``task``/``make_args``/``combine``.

Results go to ``benchmarks/results/scale_out[_quick].json`` and the "scale_out" block of benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _common import (
    BENCH_DIR,
    add_common_args,
    limit_blas_threads,
    machine_info,
    markdown_table,
    provenance,
    save_json,
    write_section,
)

import rffor.data  # noqa: E402
from rffor._linalg import append_rows, merge_triangular, positive_diagonal, triangular_update  # noqa: E402
from rffor.executor import fold_group  # noqa: E402
from rffor.executor.dask import DaskExecutor  # noqa: E402

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
def dask_processes(directory: Path, n_workers: int, timeout: float = 120.0):
    """``dask scheduler`` and ``n_workers`` ``dask worker`` processes (one thread each) on 127.0.0.1; yields the
    scheduler's address. Stops only the processes it started, by their pids."""
    import json

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
            procs.append(subprocess.Popen([dask, "worker", "--scheduler-file", str(sfile), "--nthreads", "1", "--host",
                                           "127.0.0.1", *common], stdout=log, stderr=log, env=_env()))  # fmt: skip
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
        ``make_args(session) -> tuple``: the task's arguments, e.g. ``(session.share(B), …)``, made once per session.
    passes : int
        Passes per setting; the first also carries the session's start (scattering the data description) and is
        left out of the medians; the last runs under tracemalloc for the driver's peak memory.
    split_every : int, optional
        Fan-in of the tree (default :data:`rffor.executor.SPLIT_EVERY`).
    combine : callable, optional
        The partials' merge (default ``+``).
    modes : tuple of {"tree", "driver"}
        ``tree``: ``session.reduce``; ``driver``: ``session.map`` and a left fold in partition order on the driver.

    Returns
    -------
    list of dict
        Per setting: ``mode``, ``P``, ``workers``, medians over passes 2… of ``tasks``, ``depth``,
        ``driver_merges``, ``wire_received``, ``wire_sent``, ``payload_received``, ``tail_s`` (last task's end →
        the result on the driver), ``pass_s``, and ``driver_peak_bytes`` (tracemalloc, last pass).
    """
    from distributed import Client, get_task_stream

    rows = []
    with Client(address, set_as_default=False) as client:
        workers = len(client.scheduler_info()["workers"])
        client.get_task_stream()  # installs the scheduler's task-stream plugin
        for P in P_values:
            for mode in modes:
                per_pass = []
                ex = DaskExecutor(client=client, split_every=split_every)
                with ex.open(data, P) as s:
                    args = make_args(s)
                    for i in range(passes):
                        traced = i == passes - 1
                        if traced:
                            tracemalloc.start()
                        with get_task_stream(client=client) as ts:
                            if mode == "tree":
                                s.reduce(task, *args, combine=combine, label="pass")
                                merges = s.stats[-1].driver_merges
                            else:
                                results = s.map(task, *args, label="pass")
                                members = [r for r in results if r is not None]
                                fold_group(members, combine)
                                merges = max(0, len(members) - 1)
                            end = time.time()
                        peak = tracemalloc.get_traced_memory()[1] if traced else None
                        if traced:
                            tracemalloc.stop()
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
                row = {"mode": mode, "P": P, "workers": workers, "passes": per_pass}
                for key in ("tasks", "depth", "driver_merges", "wire_received", "wire_sent", "payload_received",
                            "tail_s", "pass_s"):  # fmt: skip
                    row[key] = float(np.median([p[key] for p in steady]))
                row["driver_peak_bytes"] = per_pass[-1]["driver_peak_bytes"]
                rows.append(row)
                print(
                    f"{mode:6s} P={P:3d}: {row['tasks']:.0f} tasks, depth {row['depth']:.0f}, driver merges "
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
# report
# ---------------------------------------------------------------------------------------------------------------


def report(results: dict, info: dict, load_end) -> str:
    lines = ["### Scale-out (issue 23): `benchmarks/scale_out.py`", "", provenance(info, load_end=load_end), ""]
    if "tpqrt" in results:
        lines += [
            "TSQR merge of two factors [R | Z] (D_x × (D_x + k)) and one step with a block of rows, one BLAS thread, "
            "best of the repeats; difference: largest entry of the difference of the two results (rows' signs "
            "normalised) over the largest entry.",
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
                    for r in results["tpqrt"]
                ],
            ),  # fmt: skip
            "",
        ]
    if "counting" in results:
        rows = results["counting"]
        lines += [
            f"Counted per pass with a separate `dask scheduler` and {rows[0]['workers']} `dask worker` processes on "
            "127.0.0.1 (medians over passes 2…): `tree` merges on the workers (split_every "
            f"{results['split_every']}), `driver` gathers every partition's result and folds them on the driver (as "
            f"before issue 23). Synthetic reduction: TSQR factors of {results['features']} features + 24 outputs "
            f"({results['features'] * (results['features'] + 24) * 8 / 1e3:.0f} KB each). Bytes: the kernel's counts "
            "on the driver's connection to the scheduler. Tail: last task's end on a worker → result on the driver.",
            "",
            markdown_table(
                [
                    "mode",
                    "P",
                    "tasks",
                    "depth",
                    "driver merges",
                    "received (KB)",
                    "sent (KB)",
                    "driver peak (MB)",
                    "tail (ms)",
                    "pass (s)",
                ],
                [
                    [
                        r["mode"],
                        r["P"],
                        f"{r['tasks']:.0f}",
                        f"{r['depth']:.0f}",
                        f"{r['driver_merges']:.0f}",
                        f"{r['wire_received'] / 1e3:,.0f}",
                        f"{r['wire_sent'] / 1e3:,.0f}",
                        f"{r['driver_peak_bytes'] / 1e6:.1f}",
                        f"{r['tail_s'] * 1e3:.0f}",
                        f"{r['pass_s']:.2f}",
                    ]
                    for r in rows
                ],
            ),  # fmt: skip
        ]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(parser)
    parser.add_argument("--tpqrt", action="store_true", help="time the TSQR merges")
    parser.add_argument("--counting", action="store_true", help="count per pass on a real scheduler")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=16, help="worker processes of the counting run (default 16)")
    parser.add_argument("--passes", type=int, default=4, help="passes per setting of the counting run (default 4)")
    parser.add_argument("--features", type=int, default=200, help="D_x of the synthetic reduction (default 200)")
    parser.add_argument("--split-every", type=int, default=8)
    args = parser.parse_args(argv)
    if not (args.tpqrt or args.counting):
        parser.error("choose --tpqrt and/or --counting")
    info = machine_info(args.threads)
    results: dict = {"machine": info, "argv": sys.argv, "split_every": args.split_every, "features": args.features}
    with limit_blas_threads(args.threads):
        if args.tpqrt:
            sizes = [(1000, 100)] if args.quick else [(1000, 100), (4000, 100)]
            results["tpqrt"] = bench_tpqrt(sizes, args.repeats, args.seed, rows=[256, 1024])
        if args.counting:
            results["counting"] = bench_counting(args)
    load_end = os.getloadavg()
    results["load_end"] = load_end
    name = "scale_out" + ("_quick" if args.quick else "") + ("_tpqrt" if not args.counting else "")
    name += "_counting" if not args.tpqrt else ""
    path = save_json(name, results)
    text = report(results, info, load_end)
    print(text)
    print(f"results: {path}")
    if not args.no_readme and not args.quick:
        write_section(name, text, args.readme)


if __name__ == "__main__":
    main()
