"""The executor protocol (rffor.executor): merge trees, broadcasts, counted passes, failures, configuration.

Reductions here are the test module's own (tests/_reductions.py: TSQR factors and float sums of random cosine
features, whose merges depend on their order). Every cluster result is compared bit for bit with the serial
executor's; clusters are real: ``LocalCluster`` with worker processes and separate ``dask scheduler`` / ``dask
worker`` processes on 127.0.0.1 (tests/_cluster.py). Dask's Nanny workers run one BLAS thread, so this module runs
NumPy with one BLAS thread too.
"""

from __future__ import annotations

import math
import operator
import os
import signal
import threading
import time

import _cluster as tc  # tests/ is on sys.path (rootdir conftest)
import _reductions as rd
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from rffor._linalg import merge_triangular
from rffor.chunked import ArrayData, RowPieces
from rffor.executor import (
    IdleWorkersWarning,
    SchedulerLostError,
    SerialExecutor,
    check_split_every,
    fold_chunks,
    make_executor,
    sum_in_order,
    tree_fold,
    tree_levels,
    uses_dask,
)
from rffor.executor.dask import CLIENT_BATCH_SECONDS, DaskExecutor, configure_dask, connect

#: LocalCluster options: no dashboard, and the scheduler's HTTP server (always started) on a loopback port
NO_DASHBOARD = dict(dashboard_address="127.0.0.1:0", scheduler_kwargs={"dashboard": False})
PROCESSES = dict(threads_per_worker=1, processes=True, host="127.0.0.1", **NO_DASHBOARD)

#: Tests that count a broadcast's transfers: tasks stay where the tree put copies (no work stealing), and replicas
#: stay where transfers put them (distributed's active memory manager drops replicas it finds redundant every 2 s,
#: and a later fetch of that key then comes from another worker: seen failing these counts on 2026-11-27)
STAY = {"distributed.scheduler.work-stealing": False, "distributed.scheduler.active-memory-manager.start": False}

D = 48  # cosine features: TSQR factors of shape (48, 72), 27 KB


@pytest.fixture(scope="module", autouse=True)
def one_blas_thread():
    with threadpool_limits(1):
        yield


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """32 chunks of 100 rows: P up to 32."""
    return tc.write_store(tmp_path_factory.mktemp("data") / "train.zarr", n=3200, d=6, m=24, chunks=100)


@pytest.fixture(scope="module")
def W():
    return rd.make_frequencies(6, D)


def run(executor, data, P, fn, W, *, combine=None, split_every=None, passes=1, **kw):
    """``passes`` reduces of ``fn`` over ``data`` in P partitions; returns (results, session stats)."""
    with executor.open(data, P) as s:
        h = s.share(W)
        out = [s.reduce(fn, h, D, combine=combine, split_every=split_every, **kw) for _ in range(passes)]
        s.release(h)
        return out, s.stats


def in_memory(ds):
    X, Y = ds.read()
    return ArrayData(X, Y, ds.theta, chunk_rows=100)


# ---------------------------------------------------------------------------------------------------------------
# the tree
# ---------------------------------------------------------------------------------------------------------------


def test_tree_levels_and_fold_order():
    assert tree_levels(1, 8) == []
    assert tree_levels(8, 8) == [[range(0, 8)]]  # one left fold: today's sum in partition order
    assert [len(level) for level in tree_levels(16, 2)] == [8, 4, 2, 1]
    assert [len(level) for level in tree_levels(16, 3)] == [6, 2, 1]
    assert len(tree_levels(256, 8)) == 3
    leaves = [str(p) for p in range(7)]
    assert tree_fold(leaves, 3, rd.bracket) == ("((((0+1)+2)+((3+4)+5))+6)", 6)
    assert tree_fold(leaves, 7, rd.bracket) == ("((((((0+1)+2)+3)+4)+5)+6)", 6)
    # None (a partition with nothing selected) is skipped where it stands: the tree's shape does not change
    gaps = ["0", None, "2", None, None, None, "6", "7"]
    assert tree_fold(gaps, 2, rd.bracket) == ("((0+2)+(6+7))", 3)
    assert tree_fold(gaps, 3, rd.bracket) == ("((0+2)+(6+7))", 3)
    assert tree_fold([None, None, "2", None], 2, rd.bracket) == ("2", 0)
    assert tree_fold([None] * 5, 2, rd.bracket) == (None, 0)
    x = [np.float64(v) for v in (1e16, 1.0, -1e16, 1.0)]
    assert tree_fold(x, 4)[0] == sum_in_order(x)  # s >= P: the left fold
    for bad in (1, 0, 2.0, True, "8"):
        with pytest.raises(ValueError, match="split_every"):
            check_split_every(bad)
    with pytest.raises(ValueError, match="split_every"):
        SerialExecutor(split_every=1)
    with pytest.raises(ValueError, match="broadcast_fanout"):
        DaskExecutor(broadcast_fanout=0)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="broadcast_copy_bytes"):
            DaskExecutor(broadcast_copy_bytes=bad)


def test_broadcast_plan_counts():
    """A holder serves f = ceil(sqrt(W · copy_bytes / size)) workers: 64 nodes and the DSGD state of D_x = 1000
    (588 KB) need 4 copy tasks (not 63), the scattered object serving up to b + f − 1 workers needs none, and with
    f = 1 every worker but the first holds a copy, reached in ceil(log_b) hops."""
    from rffor.executor.dask import broadcast_copies, broadcast_serves

    f = broadcast_serves(64, 588_000)
    assert f == math.ceil(math.sqrt(64 * 2e6 / 588e3)) == 15
    assert broadcast_copies(64, f, 2) == (4, 3)  # 5 holders: 0 → 1, 2 → 3, 4; members one hop more
    assert broadcast_serves(64, 588_000, copy_bytes=0) == 1
    assert broadcast_copies(64, 1, 2) == (63, 6)  # 1 + 2 + … + 32 >= 64 holders after 6 hops
    assert broadcast_copies(5, 1, 2) == (4, 2)
    assert broadcast_copies(3, 1, 2) == (0, 1)  # the scattered object serves the 2 others
    assert broadcast_copies(10, 8, 2) == (0, 1)  # 9 <= b + f − 1
    assert broadcast_copies(1, 1, 2) == (0, 0)


def test_cost_model_counts_the_executors_tasks_per_pass():
    """benchmarks/scale_out.py's model at n = 1e8, D_x = 1000 on 64 nodes of 16 threads: a DSGD round has 64 leaf
    tasks (16 partitions each), 19 merge tasks above the first level (tree_levels(128, 8)) and 4 copies of its
    588 KB state: 87, where a task per group of 8 made 210; an MM pass (one partition per node) 64 + 9 + 3."""
    so = _scale_out()
    base = {"rate": 1e5, "merge_after": 1e-4, "merge_before": 1e-4, "driver_s": 0.0}
    kw = dict(n=10**8, era="after", cores=1024, n_chunks=10**4, bandwidth=1.25e9, latency=2e-4, s=8)
    cl = {"t_task": 1e-3, "t_pass": 0.03}
    dsgd = so.pass_time({**base, "part_bytes": 784_000, "shared_bytes": 588_000, "chunkwise": False}, cl,
                        route="DSGD round", workers=64, threads=16, P=1024, layout="thread", **kw)  # fmt: skip
    mm = so.pass_time({**base, "part_bytes": 392_000, "shared_bytes": 392_000}, cl, route="MM pass", workers=64,
                      threads=16, P=64, layout="worker", **kw)  # fmt: skip
    above = sum(len(level) for level in tree_levels(128, 8))  # the tree over the 128 first-level groups
    assert (dsgd["tasks"], dsgd["copies"], above) == (64 + 19 + 4, 4, 19)
    assert (mm["tasks"], mm["copies"]) == (64 + len(tree_levels(64, 8)[0]) + 1 + 3, 3)


def test_serial_reduce_folds_the_tree(store, W):
    """The serial executor's reduce is the tree fold of its map; the tree changes float sums (the check below is
    sensitive to the order), and with s >= P it is the left fold of before."""
    ex = SerialExecutor(split_every=2)
    with ex.open(store, 16) as s:
        parts = s.map(rd.gram_leaf, W, D)
        tree = s.reduce(rd.gram_leaf, W, D)
        flat = s.reduce(rd.gram_leaf, W, D, split_every=16)
        stats = s.stats
    np.testing.assert_array_equal(tree, tree_fold(parts, 2)[0])
    np.testing.assert_array_equal(flat, sum_in_order(parts))
    assert not np.array_equal(tree, flat)  # rounding: a different order
    np.testing.assert_allclose(tree, flat, rtol=1e-13)
    assert [(st.depth, st.merges, st.driver_merges, st.tasks) for st in stats] == [
        (0, 0, 0, 16),
        (4, 15, 15, 16),
        (1, 15, 15, 16),
    ]


def test_selected_chunks_skip_partitions_alike(store, W):
    """Partitions with no selected chunk are None leaves on both executors: same tree, same bits."""
    chunks = [0, 1, 9, 10, 11, 30]
    ref, _ = run(SerialExecutor(split_every=2), store, 16, rd.gram_leaf, W, chunks=chunks)
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, **PROCESSES) as cluster, Client(cluster, set_as_default=False) as c:
        out, stats = run(DaskExecutor(client=c, split_every=2), store, 16, rd.gram_leaf, W, chunks=chunks)
    np.testing.assert_array_equal(out[0], ref[0])
    assert stats[0].leaves == 4 and stats[0].merges == 3 and stats[0].driver_merges == 0


# ---------------------------------------------------------------------------------------------------------------
# bit-identity: serial = LocalCluster = separate processes, trees of depth 3 and 4
# ---------------------------------------------------------------------------------------------------------------


def _all_reductions(executor, store, W):
    out = {}
    for data_name, data in (("zarr", store), ("in-memory", in_memory(store))):
        with executor.open(data, 16) as session:
            h = session.share(W)
            for s in (2, 3):
                tsqr = session.reduce(rd.tsqr_leaf, h, D, combine=merge_triangular, split_every=s)
                st = session.stats[-1]
                gram = session.reduce(rd.gram_leaf, h, D, split_every=s)
                out[data_name, s] = (tsqr, gram, st)
    return out


@pytest.mark.timeout(300)
def test_tree_reduce_is_bit_identical_on_every_executor(store, W, tmp_path):
    from distributed import Client, LocalCluster

    ref = _all_reductions(SerialExecutor(), store, W)
    with LocalCluster(n_workers=3, **PROCESSES) as cluster, Client(cluster, set_as_default=False) as c:
        local = _all_reductions(DaskExecutor(client=c), store, W)
        order = run(DaskExecutor(client=c, split_every=3), store, 7, rd.label_leaf, W, combine=rd.bracket)[0][0]
    with tc.dask_processes(tmp_path, n_workers=4) as address:
        separate = _all_reductions(DaskExecutor(scheduler_address=address), store, W)
    assert order == "((((0+1)+2)+((3+4)+5))+6)"  # the same tree, merged on the workers
    for key, (tsqr, gram, st) in ref.items():
        assert st.depth == {2: 4, 3: 3}[key[1]]
        for other in (local, separate):
            np.testing.assert_array_equal(other[key][0], tsqr)
            np.testing.assert_array_equal(other[key][1], gram)
            assert other[key][2].driver_merges == 0 and other[key][2].merges == st.merges == 15
    # the factor is the TSQR factor of all rows (MATH.md §5.2): RᵀR = AᵀA, RᵀZ = AᵀY
    (gram,), _ = run(SerialExecutor(split_every=16), store, 1, rd.gram_leaf, W)
    tsqr = ref["zarr", 2][0]
    R, Z = tsqr[:, :D], tsqr[:, D:]
    np.testing.assert_allclose(R.T @ R, gram[:D, :D], rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(R.T @ Z, gram[:D, D:], rtol=1e-12, atol=1e-9)
    assert np.all(np.diag(R) >= 0)


# ---------------------------------------------------------------------------------------------------------------
# what the driver does and receives per pass
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_driver_receives_one_result_per_pass_flat_in_P(store, W, tmp_path):
    """Counted by the kernel on the driver's connection to a separate scheduler: the bytes the driver receives per
    reduce do not grow with P (one root), while a map, which gathers every partition's result, grows ~8x from P = 4
    to 32; no merge runs on the driver."""
    received = {}
    with tc.dask_processes(tmp_path, n_workers=4) as address:
        for P in (4, 32):
            for how in ("reduce", "map"):
                with DaskExecutor(scheduler_address=address).open(store, P) as s:
                    h = s.share(W)
                    for _ in range(4):
                        if how == "reduce":
                            s.reduce(rd.tsqr_leaf, h, D, combine=merge_triangular)
                        else:
                            s.map(rd.tsqr_leaf, h, D)
                    stats = s.stats[1:]  # the first pass also carries the session's start
                assert all(st.wire_received is not None for st in stats)
                received[how, P] = np.mean([st.wire_received for st in stats])
                if how == "reduce":
                    assert all(st.driver_merges == 0 for st in stats)
                    assert all(st.payload_received == stats[0].payload_received for st in stats)
                    assert all(st.depth == (1 if P == 4 else 2) for st in stats)
    factor = D * (D + 24) * 8
    assert received["reduce", 4] > factor  # the root crossed, once
    assert received["reduce", 32] <= 2 * received["reduce", 4], received
    assert received["reduce", 32] < 2 * factor
    assert received["map", 32] >= 6 * received["map", 4] > 6 * 4 * factor, received


class _CountingRPC:
    """A client's scheduler RPC with a log of the calls the driver waits for (``address``, and ``identity`` from the
    client's own periodic refresh, are not round trips of a pass)."""

    def __init__(self, rpc):
        self._rpc, self.calls = rpc, []

    def __getattr__(self, name):
        if name not in ("address", "identity") and not name.startswith("_"):
            self.calls.append(name)
        return getattr(self._rpc, name)


@pytest.mark.timeout(240)
def test_a_pass_costs_the_driver_two_scheduler_round_trips(store, W, monkeypatch):
    """Counted, not timed: a reduce that ships a new small object (as every MM pass ships B) waits for the scheduler
    twice (the object out, the root back); the bits are the serial executor's. Before, the workers' thread counts
    (twice) and the object's holder made it five. The client's message batches are shortened for the session only.
    The thread counts' reuse interval is set out of reach: on a loaded machine a pass can outlast its 2 s, and the
    count must not depend on the machine's speed."""
    from distributed import Client, LocalCluster

    monkeypatch.setattr("rffor.executor.dask.PLACEMENT_SECONDS", 3600.0)

    ref, _ = run(SerialExecutor(), store, 8, rd.tsqr_leaf, W, combine=merge_triangular)
    with LocalCluster(n_workers=2, **PROCESSES) as cluster, Client(cluster, set_as_default=False) as c:
        users = c.scheduler_comm.interval
        with DaskExecutor(client=c).open(store, 8) as s:
            assert c.scheduler_comm.interval == CLIENT_BATCH_SECONDS < users  # the client's batches, shortened
            counting = c.scheduler = _CountingRPC(c.scheduler)
            per_pass = []
            for _ in range(4):
                before = len(counting.calls)
                h = s.share(W)
                out = s.reduce(rd.tsqr_leaf, h, D, combine=merge_triangular)
                s.release(h)
                np.testing.assert_array_equal(out, ref[0])
                per_pass.append(counting.calls[before:])
            c.scheduler = counting._rpc
        assert c.scheduler_comm.interval == users  # and given back
    assert all(len(calls) <= 2 for calls in per_pass[1:]), per_pass


# ---------------------------------------------------------------------------------------------------------------
# broadcast tree
# ---------------------------------------------------------------------------------------------------------------


def _sources(client, keys_of) -> dict[str, int]:
    """Transfers of a shared object's keys (scattered object and its copies) to other workers, per source worker."""

    def log(dask_worker):
        return [(entry["who"], list(entry["keys"])) for entry in dask_worker.transfer_outgoing_log]

    workers = set(client.scheduler_info()["workers"])
    out = {}
    for worker, entries in client.run(log).items():
        out[worker] = sum(1 for who, keys in entries if who in workers and any(keys_of(str(k)) for k in keys))
    return out


@pytest.mark.timeout(240)
@pytest.mark.parametrize("fanout", [2, 8])
def test_broadcast_reaches_workers_by_a_tree(store, W, fanout):
    """5 workers, 10 partitions: with fan-out 2 no worker sends the shared object more than twice (the scattered
    object's worker included: a tree of depth 2); with fan-out >= W − 1 (a star, as before) no copy task runs: the 4
    others fetch the scattered object itself (from its worker, or from one that already fetched it: Dask's choice,
    which a test cannot pin)."""
    import dask
    from distributed import Client, LocalCluster

    ref, _ = run(SerialExecutor(), store, 10, rd.tsqr_leaf, W, combine=merge_triangular)
    with (
        dask.config.set(STAY),
        LocalCluster(n_workers=5, **PROCESSES) as cluster,
        Client(cluster, set_as_default=False) as c,
    ):
        ex = DaskExecutor(client=c, broadcast_fanout=fanout, broadcast_copy_bytes=0)  # a copy on every worker
        with ex.open(store, 10) as s:
            h = s.share(rd.make_frequencies(6, D, ballast=20000))  # 1.1 MB
            out = s.reduce(rd.tsqr_leaf, h, D, combine=merge_triangular)
            copies = s.stats[0].broadcast_copies
            root = h.future.key
            sources = _sources(c, lambda k: k == root or f"-share{h.id}." in k)
            of_copies = _sources(c, lambda k: f"-share{h.id}." in k)
    np.testing.assert_array_equal(out, ref[0])
    served = sorted(sources.values())
    if fanout == 2:
        assert copies == 4 + 4  # the dataset's description and the object, to 4 workers each
        assert max(served) <= 2 and sum(served) == 4, sources
    else:  # a star: every transfer is of the scattered object itself, one to each of the 4 other workers
        assert copies == 0 and sum(served) == 4 and sum(of_copies.values()) == 0, (sources, of_copies)


@pytest.mark.timeout(240)
def test_broadcast_of_a_small_object_copies_to_few_holders(store, W):
    """5 workers, fan-out 1, a copy worth 500 KB: the 1.1 MB object is served by ceil(5 / f) = 3 holders (f = 2, the
    scattered object's worker and 2 copies), each sending it at most b + f − 1 = 2 times; the dataset's description
    (a few KB) is fetched from the scattered one by all (no copy): 2 copy tasks where a copy on every worker made 8.
    The serial bits."""
    import dask
    from distributed import Client, LocalCluster

    from rffor.executor.dask import broadcast_copies, broadcast_serves

    ref, _ = run(SerialExecutor(), store, 10, rd.tsqr_leaf, W, combine=merge_triangular)
    with (
        dask.config.set(STAY),
        LocalCluster(n_workers=5, **PROCESSES) as cluster,
        Client(cluster, set_as_default=False) as c,
    ):
        ex = DaskExecutor(client=c, broadcast_fanout=1, broadcast_copy_bytes=500_000)
        with ex.open(store, 10) as s:
            h = s.share(rd.make_frequencies(6, D, ballast=20000))  # 1.1 MB
            out = s.reduce(rd.tsqr_leaf, h, D, combine=merge_triangular)
            root = h.future.key
            sources = _sources(c, lambda k: k == root or f"-share{h.id}." in k)
            out2 = s.reduce(rd.tsqr_leaf, h, D, combine=merge_triangular)  # the tree is kept: no new copies
            copies = [st.broadcast_copies for st in s.stats]
            f = broadcast_serves(5, h.nbytes, 500_000)
    np.testing.assert_array_equal(out, ref[0])
    np.testing.assert_array_equal(out2, ref[0])
    assert f == 2 and copies == [broadcast_copies(5, f, 1)[0], 0] == [2, 0]
    served = sorted(sources.values())
    assert sum(served) == 4 and max(served) <= 2, sources


@pytest.mark.timeout(240)
@pytest.mark.parametrize("victim", ["copy", "holder"])
def test_worker_killed_during_broadcast_does_not_hang(store, W, victim):
    """A 40 MB object broadcast along a chain (fan-out 1) over 4 workers; the worker receiving it (or the one holding
    the scattered object) is killed mid-broadcast. The pass completes (the lost copy is recomputed from its parent,
    or the pass reruns with the object scattered again) with the serial bits, well within the timeout."""
    from distributed import Client, LocalCluster

    ref, _ = run(SerialExecutor(), store, 8, rd.tsqr_leaf, W, combine=merge_triangular)
    big = rd.make_frequencies(6, D, ballast=700_000)
    killed = {}
    with LocalCluster(n_workers=4, **PROCESSES) as cluster, Client(cluster, set_as_default=False) as c:
        pids = c.run(os.getpid)
        ex = DaskExecutor(client=c, broadcast_fanout=1, round_timeout=90)
        with ex.open(store, 8) as s:
            h = s.share(big)
            holder = next(iter(c.who_has([h.future])[h.future.key]))
            stop = threading.Event()

            def killer():
                while not stop.is_set() and not killed:
                    for worker, keys in c.processing().items():
                        copying = any(f"-share{h.id}.0-w" in str(k) for k in keys)
                        target = holder if victim == "holder" else worker
                        if copying and target in pids and (victim == "holder" or worker != holder):
                            os.kill(pids[target], signal.SIGKILL)
                            killed[target] = worker
                            return
                    time.sleep(0.002)

            t = threading.Thread(target=killer, daemon=True)
            t.start()
            tic = time.perf_counter()
            try:
                out = s.reduce(rd.tsqr_leaf, h, D, combine=merge_triangular)
            finally:
                stop.set()
                t.join()
            seconds = time.perf_counter() - tic
            stats = s.stats[-1]
    assert killed, "no worker was killed during the broadcast"
    np.testing.assert_array_equal(out, ref[0])
    assert seconds < 60
    if victim == "holder":
        assert stats.attempts >= 2  # the scattered object died with its worker: shipped again, pass rerun


# ---------------------------------------------------------------------------------------------------------------
# failures
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.timeout(240)
@pytest.mark.parametrize("in_memory_data", [False, True], ids=["zarr", "in-memory"])
def test_worker_killed_during_tree_merge_gives_the_same_bits(store, W, in_memory_data):
    from distributed import Client, LocalCluster

    data = in_memory(store) if in_memory_data else store
    ref, _ = run(SerialExecutor(split_every=2), data, 16, rd.tsqr_leaf, W, combine=merge_triangular)
    killed = {}
    with LocalCluster(n_workers=3, **PROCESSES) as cluster, Client(cluster, set_as_default=False) as c:
        pids = c.run(os.getpid)
        stop = threading.Event()

        def killer():  # SIGKILL the worker running a merge of level 2, mid-merge
            while not stop.is_set() and not killed:
                for worker, keys in c.processing().items():
                    if any("-t2." in str(k) for k in keys) and worker in pids:
                        time.sleep(0.1)
                        os.kill(pids[worker], signal.SIGKILL)
                        killed[worker] = pids[worker]
                        return
                time.sleep(0.005)

        t = threading.Thread(target=killer, daemon=True)
        t.start()
        try:
            out, stats = run(DaskExecutor(client=c, split_every=2), data, 16, rd.tsqr_leaf, W, combine=rd.slow_merge)
        finally:
            stop.set()
            t.join()
    assert killed, "no worker was killed during a merge"
    np.testing.assert_array_equal(out[0], ref[0])
    assert stats[0].driver_merges == 0


@pytest.mark.timeout(180)
def test_lost_scheduler_during_a_reduce_is_not_retried(store, W, tmp_path):
    with tc.dask_processes(tmp_path, n_workers=2, keep_scheduler_pid=True) as (address, scheduler_pid):
        ex = DaskExecutor(scheduler_address=address)
        with ex.open(store, 16) as s:
            h = s.share(W)
            s.reduce(rd.tsqr_leaf, h, D, combine=merge_triangular)
            threading.Timer(0.5, os.kill, (scheduler_pid, signal.SIGKILL)).start()
            tic = time.perf_counter()
            with pytest.raises(SchedulerLostError, match="lost the connection to the Dask scheduler"):
                s.reduce(rd.slow_tsqr_leaf, h, D, combine=merge_triangular)
            assert time.perf_counter() - tic < 60
            assert s.reruns == 0


# ---------------------------------------------------------------------------------------------------------------
# every worker busy: partitions per worker, passes over row pieces, idle workers
# ---------------------------------------------------------------------------------------------------------------


def _per_worker(executor, data, P):
    """A TSQR and a Gram reduce of chunkwise leaves with ``partitions_per="worker"``, split_every 2."""
    with executor.open(data, P, split_every=2, partitions_per="worker") as s:
        h = s.share(W_SMALL)
        tsqr = s.reduce(rd.tsqr_chunks, h, D, combine=merge_triangular)
        gram = s.reduce(rd.gram_chunks, h, D)
        return tsqr, gram, s.stats, s.partitions


W_SMALL = rd.make_frequencies(6, D)


@pytest.mark.timeout(300)
def test_partitions_per_worker_merge_chunks_by_a_fixed_tree_whatever_the_threads(store, tmp_path):
    """``partitions_per="worker"``: a partition's result is its chunks' results merged by the fixed tree over them
    (fan-in split_every; every shape of its last groups), computed on a pool of the worker's threads: the same bits
    with 1 or 3 threads in process, on a LocalCluster of 2 two-thread workers and on separate worker processes of 3
    threads; P defaults to the workers; the pool's threads do run the chunks."""
    from distributed import Client, LocalCluster

    one = _per_worker(SerialExecutor(threads=1), store, 4)
    three = _per_worker(SerialExecutor(threads=3), store, 4)
    # the definition: per-chunk results merged by the tree over a partition's chunks, then over the partitions
    parts = [tree_fold([rd.tsqr_leaf(store, p, [i], W_SMALL, D) for i in g], 2, merge_triangular)[0] for p, g in
             enumerate(store.partition(4))]  # fmt: skip
    np.testing.assert_array_equal(one[0], tree_fold(parts, 2, merge_triangular)[0])
    for n, s in ((1, 2), (7, 3), (9, 3), (10, 3), (16, 4), (17, 4), (8, 8)):  # every shape of the last groups
        chunks = list(range(n))
        expect = tree_fold([rd.label_leaf(None, i, [i], None, None) for i in chunks], s, rd.bracket)[0]
        for t in (1, 3):
            got = fold_chunks(rd.chunk_label, None, 0, chunks, (), rd.bracket, t, s)
            assert got == expect, (n, s, t, got, expect)
    per_thread = run(SerialExecutor(split_every=2), store, 4, rd.tsqr_leaf, W_SMALL, combine=merge_triangular)[0][0]
    assert not np.array_equal(one[0], per_thread)  # other rounding than a partition's rows appended in sequence
    np.testing.assert_allclose(one[0], per_thread, rtol=1e-10, atol=1e-10 * np.abs(per_thread).max())
    with (
        LocalCluster(n_workers=2, threads_per_worker=2, processes=True, host="127.0.0.1", **NO_DASHBOARD) as cluster,
        Client(cluster, set_as_default=False) as c,
    ):
        local = _per_worker(DaskExecutor(client=c), store, 4)
        with DaskExecutor(client=c).open(store, partitions_per="worker") as s:
            default_P = len(s.partitions)
            names = s.reduce(rd.thread_names, s.share(W_SMALL), D, combine=operator.or_)
        with DaskExecutor(client=c).open(store) as s:
            per_thread_P = len(s.partitions)
    with tc.dask_processes(tmp_path, n_workers=2, nthreads=3) as address:
        separate = _per_worker(DaskExecutor(scheduler_address=address), store, 4)
    for other in (three, local, separate):
        np.testing.assert_array_equal(other[0], one[0])
        np.testing.assert_array_equal(other[1], one[1])
        assert other[3] == one[3] == store.partition(4)
    assert [(st.leaves, st.depth, st.driver_merges) for st in local[2]] == [(4, 2, 0), (4, 2, 0)]
    assert default_P == 2 and per_thread_P == 4  # P: the workers, or their threads
    pooled = {(pid, n) for pid, n in names if n.startswith("rffor-chunk")}
    assert len(pooled) == 4 and len({pid for pid, _ in pooled}) == 2, names  # 2 partitions x 2 threads of a worker


@pytest.mark.timeout(300)
@pytest.mark.parametrize("split_every", [4, 2])
def test_first_level_groups_run_as_tasks_on_workers_of_many_threads(store, split_every):
    """``partitions_per="thread"`` on 2 workers of 4 threads: each run of 4 consecutive partitions (4 / s groups of
    the tree's first level) is one task run on its worker's threads, returning its groups' partials, so a pass of
    P = 16 has 4 leaf tasks (instead of 16) and the merges above the first level (s = 4: 1 task; s = 2: 4 + 2 + 1),
    with the serial bits (the same tree, folded in the same order); a DSGD fit on that cluster equals the serial
    one."""
    from distributed import Client, LocalCluster

    from rffor.losses import Huber
    from rffor.solvers.rff import fit_rff

    s_ = split_every
    ref = [run(SerialExecutor(split_every=s_), store, 16, fn, W_SMALL, combine=c)[0][0]
           for fn, c in ((rd.tsqr_leaf, merge_triangular), (rd.gram_leaf, None))]  # fmt: skip
    kw = dict(loss=Huber(0.1, 2), rff_method="sgd", n_features_x=64, n_epochs=1, batch_size=32, random_state=3,
              n_partitions=16, split_every=s_, input_features="rff")  # fmt: skip
    dsgd = fit_rff(store, **kw)
    with (
        LocalCluster(n_workers=2, threads_per_worker=4, processes=True, host="127.0.0.1", **NO_DASHBOARD) as cluster,
        Client(cluster, set_as_default=False) as c,
    ):
        ex = DaskExecutor(client=c, split_every=s_)
        out, stats = [], []
        for fn, comb in ((rd.tsqr_leaf, merge_triangular), (rd.gram_leaf, None)):
            o, st = run(ex, store, 16, fn, W_SMALL, combine=comb)
            out.append(o[0])
            stats.append(st[0])
        with ex.open(store, 16) as s:
            names = s.reduce(rd.thread_names, s.share(W_SMALL), D, combine=operator.or_)
        remote = fit_rff(store, executor=DaskExecutor(client=c), **kw)
    for a, b in zip(out, ref, strict=True):
        np.testing.assert_array_equal(a, b)
    depth = 2 if s_ == 4 else 4
    assert [(st.leaves, st.merges, st.driver_merges, st.depth) for st in stats] == [(16, 15, 0, depth)] * 2
    above = sum(len(level) for level in tree_levels(16, s_)[1:])  # merge tasks above the first level
    assert above == (1 if s_ == 4 else 7)
    assert all(st.tasks - st.broadcast_copies == 4 + above for st in stats)
    # the cost model of benchmarks/scale_out.py counts the executor's tasks (2 workers: no broadcast copies)
    model = _scale_out().pass_time(
        {"rate": 1.0, "part_bytes": 1, "shared_bytes": 1, "merge_after": 0.0, "merge_before": 0.0, "driver_s": 0.0},
        {"t_task": 0.0, "t_pass": 0.0}, route="DSGD round", n=16, workers=2, threads=4, P=16, layout="thread",
        era="after", cores=8, n_chunks=32, bandwidth=1.0, latency=0.0, s=s_,
    )  # fmt: skip
    assert [st.tasks for st in stats] == [model["tasks"]] * 2 and model["copies"] == 0
    pooled = {(pid, n) for pid, n in names if n.startswith("rffor-part")}
    assert len(pooled) >= 6 and len({pid for pid, _ in pooled}) == 2, names  # 4 groups on 2 workers' threads
    np.testing.assert_array_equal(remote.coef, dsgd.coef)


def _scale_out():
    """benchmarks/scale_out.py, loaded by path (benchmarks/ is not a package; sys.path restored)."""
    import importlib.util
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[1] / "benchmarks"
    path = list(sys.path)
    try:
        sys.path.insert(0, str(bench))
        spec = importlib.util.spec_from_file_location("scale_out", bench / "scale_out.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["scale_out"] = mod
        spec.loader.exec_module(mod)
    finally:
        sys.path[:] = path
    return mod


def _pieces_passes(executor, data, P):
    """Reduces over row pieces of 3 of the 32 chunks, through ``session.over``."""
    with executor.open(data, P, split_every=3) as s:
        h = s.share(W_SMALL)
        pieces = RowPieces.spread(data, [0, 15, 31], len(s.partitions), piece_rows=40)
        with s.over(pieces) as view:
            tsqr = view.reduce(rd.tsqr_leaf, h, D, combine=merge_triangular)
            gram = view.reduce(rd.gram_leaf, h, D)
            parts = view.partitions
        whole = s.reduce(rd.gram_leaf, h, D, chunks=[0, 15, 31])
        return tsqr, gram, whole, s.stats, parts


@pytest.mark.timeout(300)
def test_a_sample_of_chunks_runs_on_every_partition_through_row_pieces(store, tmp_path):
    """3 sampled chunks, P = 8: restricted to the sample, a pass has 3 tasks; over their row pieces (session.over)
    it has 8, each of 37 or 38 rows, with the serial executor's bits on a LocalCluster and on separate worker
    processes, for a Zarr store and for in-memory rows (shipped in pieces); the sums are those of the sample."""
    from distributed import Client, LocalCluster

    ref = _pieces_passes(SerialExecutor(), store, 8)
    with LocalCluster(n_workers=3, **PROCESSES) as cluster, Client(cluster, set_as_default=False) as c:
        local = _pieces_passes(DaskExecutor(client=c), store, 8)
        memory = _pieces_passes(DaskExecutor(client=c), in_memory(store), 8)
    with tc.dask_processes(tmp_path, n_workers=4) as address:
        separate = _pieces_passes(DaskExecutor(scheduler_address=address), store, 8)
    assert [st.leaves for st in ref[3]] == [8, 8, 3]
    for other in (local, memory, separate):
        for k in range(3):
            np.testing.assert_array_equal(other[k], ref[k])
        assert [(st.leaves, st.driver_merges) for st in other[3]] == [(8, 0), (8, 0), (3, 0)]
    np.testing.assert_allclose(ref[1], ref[2], rtol=1e-12)  # the same rows' sums
    assert len(ref[4]) == 8


@pytest.mark.timeout(120)
def test_idle_workers_are_warned_about():
    """Workers (threads) outnumbering the partitions, or a worker's threads outnumbering the chunks they share: a
    warning saying how many stay idle and what to change; none when every thread has work."""
    import warnings

    from distributed import Client, LocalCluster

    few = ArrayData(np.zeros((60, 2)), np.zeros((60, 3)), chunk_rows=20)  # 3 chunks
    many = ArrayData(np.zeros((600, 2)), np.zeros((600, 3)), chunk_rows=20)  # 30 chunks
    with (
        LocalCluster(n_workers=2, threads_per_worker=2, processes=False, **NO_DASHBOARD) as cluster,
        Client(cluster, set_as_default=False) as c,
    ):
        ex = DaskExecutor(client=c)
        with pytest.warns(IdleWorkersWarning, match=r"1 of the 4 worker threads get no partition.*has 3 chunks"):
            with ex.open(few):
                pass
        with pytest.warns(IdleWorkersWarning, match=r"2 of the 4 worker threads .*n_partitions = 2.*>= 4"):
            with ex.open(many, 2):
                pass
        with pytest.warns(IdleWorkersWarning, match=r"4 threads of the 2 worker\(s\) share 3 chunks: 1 thread\(s\)"):
            with ex.open(few, partitions_per="worker"):
                pass
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with ex.open(many) as s, s.over(RowPieces.spread(many, [0, 9], 4, piece_rows=10)):
                pass
            with ex.open(many, partitions_per="worker") as s:
                with pytest.warns(IdleWorkersWarning, match="share 2 row pieces.*selection_rows"):
                    with s.over(RowPieces.spread(many, [0], 2)):
                        pass


# ---------------------------------------------------------------------------------------------------------------
# where it runs, configuration (moved from test_distributed.py: they are about the executor alone)
# ---------------------------------------------------------------------------------------------------------------


def test_uses_dask_rule(store, tmp_path):
    arrays = ArrayData(np.zeros((4, 2)), np.zeros((4, 3)))
    assert not uses_dask(arrays)
    assert not uses_dask(arrays, n_partitions=1)
    assert uses_dask(arrays, n_partitions=2)
    assert uses_dask(arrays, scheduler_address="tcp://127.0.0.1:8786")
    assert uses_dask(arrays, client=object())
    assert uses_dask(store)
    assert not uses_dask(store, n_partitions=1)
    one_chunk = tc.write_store(tmp_path / "one.zarr", n=50, chunks=50)
    assert not uses_dask(one_chunk)  # nothing to partition
    assert isinstance(make_executor(arrays), SerialExecutor)
    assert isinstance(make_executor(store), DaskExecutor)
    assert make_executor(arrays, split_every=3).split_every == 3
    assert make_executor(store, split_every=3).split_every == 3
    with pytest.raises(ValueError, match="security"):
        make_executor(arrays, security=object())


def test_shipped_dask_config_is_a_default():
    import dask

    config = configure_dask()
    assert config["distributed"]["nanny"]["pre-spawn-environ"]["MALLOC_MMAP_THRESHOLD_"] == 16777216
    assert dask.config.get("distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_") == 16777216
    with dask.config.set({"rffor.round-retries": 5}):  # the user's settings win
        configure_dask()
        assert dask.config.get("rffor.round-retries") == 5


@pytest.mark.timeout(120)
def test_embedded_cluster_sets_worker_environment_and_closes():
    import dask

    def worker_settings():
        return (
            os.environ.get("MALLOC_MMAP_THRESHOLD_"),
            os.environ.get("MALLOC_TRIM_THRESHOLD_"),  # rffor's value replaces Dask's 65536
            os.environ.get("OPENBLAS_NUM_THREADS"),  # Dask's own default survives rffor's
            dask.config.get("distributed.admin.tick.interval"),  # rffor's survives Dask's (loaded before it)
        )

    with connect(n_workers=1) as conn:
        env = conn.client.run(worker_settings)
        cluster = conn.cluster
    assert list(env.values()) == [("16777216", "67108864", "1", "1s")]
    assert cluster.status.name == "closed"


def test_auto_timeout_is_per_kind_of_pass():
    """round-timeout "auto": a pass of a kind not yet timed gets 30 minutes (a first pass over new rows computes and
    caches their features), then max(2 minutes, 20x the slowest pass of its kind), whatever other kinds took."""
    from rffor.executor.dask import _pass_kind

    ex = DaskExecutor(round_timeout="auto")
    seconds = {_pass_kind("Nyström centres"): [0.5], _pass_kind("pass 1"): [3.0, 12.0]}
    assert ex._timeout(seconds, "closed form sums (training and held-out rows)") == 1800.0
    assert ex._timeout(seconds, "pass 17") == 240.0
    assert ex._timeout(seconds, "Nyström centres") == 120.0
    assert DaskExecutor(round_timeout=5)._timeout(seconds, "pass 2") == 5.0


def test_operator_add_is_the_default_merge():
    assert tree_fold([1, 2, 3], 2) == tree_fold([1, 2, 3], 2, operator.add) == (6, 2)


def test_scale_out_report_lists_earlier_model_runs_and_their_spread():
    """The cost model's block names every earlier run (machine, arguments, met or not) and the spread of the
    constants over the runs on the latest run's CPU: a run that missed the goal is not hidden by a later one."""
    so = _scale_out()

    def run(cpu, date, rate, error, argv=()):
        consts = {route: {"rate": rate} for route in so.MODEL_ROUTES}
        validation = [dict(route=r, error=error, layout="thread", workers=1, threads=1) for r in so.MODEL_ROUTES]
        return {"machine": {"cpu": cpu, "date": date}, "argv": ["scale_out.py", "--model", *argv],
                "constants": {"300": consts}, "validation": validation}  # fmt: skip

    runs = [run("AMD", "d1", 300_000.0, 0.1), run("Intel", "d2", 200_000.0, -0.4, ("--model-rows", "65536"))]
    (line, _) = so._model_runs_lines(runs, run("Intel", "d3", 320_000.0, -0.3))
    assert "d1 on AMD" in line and "**met**" in line
    assert "d2 on Intel (`--model-rows 65536`)" in line and "worst -40%" in line and "**not met**" in line
    assert "of its 2 runs" in line and "1.60x" in line  # 320,000 / 200,000 on Intel; AMD's run not counted
    assert so._model_runs_lines([]) == []
