"""Partitions per worker: a partition's task shares its chunks among the threads of its worker.

With ``partitions_per="worker"`` a worker of T threads runs one task per partition, and a reduce whose task is
:func:`chunkwise` computes the partition's result from the task's results on its chunks one at a time, merged by
the fixed tree of the reduce over the chunks in order (:func:`fold_chunks`), T chunks (and merges) at once on a
pool of T threads, each with one BLAS thread. The units (chunks), their order and the tree are fixed by the data
and ``split_every``, not by T: the result has the same bits for any T, on any executor.
Per-pass costs that grow with the number of tasks (scheduling, merges, the driver's messages) then grow with the
number of workers, not of cores.

The threads share one interpreter: they run at once only where the chunks' work releases the GIL. NumPy's BLAS
products and ufuncs do; so do the TSQR steps (:func:`rffor._linalg.append_rows` and ``merge_triangular`` call
LAPACK through ctypes, not SciPy's f2py wrappers, which hold it), the Nyström whitening
(:func:`rffor._linalg.solve_upper_right`: BLAS ``trsm`` through ctypes, M² of a row's 2Md + M² flops) and the chunk
reads of a local store (:meth:`rffor.data.Dataset.chunk` decodes the chunk files itself, not through Zarr's async
pipeline, whose Python ran one read at a time). Measured in one process (benchmarks/scale_out.py ``--pool``, 32
chunks of 2,000 curves, Nyström D_x = 300, every other process paused), 2 threads against 1: closed form 1.95x,
an MM pass computing its features 1.97x, a warm MM pass 1.83x (before the whitening released the GIL: 1.63x,
1.15x and 1.86x; before the TSQR steps and the reads did: 0.88-1.06x).
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from ._tree import check_split_every, fold_group

__all__ = ["PARTITIONS_PER", "chunkwise", "is_chunkwise", "fold_chunks", "one_blas_thread"]

#: the layouts of partitions on a cluster: one single-threaded task per worker thread, or one task per worker
#: sharing its chunks among the worker's threads
PARTITIONS_PER = ("thread", "worker")


def check_partitions_per(value) -> str:
    """``value`` if it is a layout of :data:`PARTITIONS_PER` (ValueError otherwise)."""
    if value not in PARTITIONS_PER:
        raise ValueError(f"partitions_per must be one of {PARTITIONS_PER}, got {value!r}")
    return str(value)


def chunkwise(fn: Callable) -> Callable:
    """Declare a task function chunkwise: ``fn(part, p, ids, *args)`` may be computed as the fold, with the
    reduce's ``combine``, of ``fn(part, p, [i], *args)`` over ``ids`` in order (a sum over rows: feature sums,
    gradient sums, per-row errors). Returns ``fn`` itself."""
    fn.chunkwise = True
    return fn


def is_chunkwise(fn: Callable) -> bool:
    """Whether ``fn`` was declared :func:`chunkwise`."""
    return bool(getattr(fn, "chunkwise", False))


_blas = threading.Lock()
_blas_users = 0
_blas_limits = None


@contextlib.contextmanager
def one_blas_thread():
    """One BLAS thread in this process while any caller is inside (nested and concurrent uses counted: the limit
    is process-wide, restored when the last one leaves). A chunk's result then has the bits of a one-thread
    worker whatever the process's BLAS setting (multi-threaded BLAS changes the bits of a product)."""
    global _blas_users, _blas_limits
    with _blas:
        if _blas_users == 0:
            from threadpoolctl import threadpool_limits

            _blas_limits = threadpool_limits(limits=1)
        _blas_users += 1
    try:
        yield
    finally:
        with _blas:
            _blas_users -= 1
            if _blas_users == 0 and _blas_limits is not None:
                _blas_limits.restore_original_limits()
                _blas_limits = None


def fold_chunks(
    fn: Callable, part, p: int, chunk_ids: Sequence[int], args: tuple, combine, threads: int, split_every: int
):
    """A chunkwise task's result on a partition: ``fn(part, p, [i], *args)`` for each chunk i of ``chunk_ids``,
    merged by the fixed tree of :func:`rffor.executor.tree_fold` over the chunks in order (fan-in ``split_every``),
    on a pool of ``threads`` threads.

    A group's merge runs on the pool as soon as its members are done, so the merges are shared by the threads as
    the chunks are (a left fold on one thread would hold up the pass when merges are slow: TSQR factors at large
    D_x). The tree depends on the number of chunks and ``split_every`` only: the same bits for any ``threads``. At
    most ``2 · threads`` chunks are in flight, and at most ``split_every − 1`` results wait per level of the tree.

    Parameters
    ----------
    fn : callable
        A :func:`chunkwise` task function.
    part, p, chunk_ids, args
        As the executor calls ``fn``.
    combine : callable or None
        ``combine(a, b)``; None: ``a + b``.
    threads : int
        Threads of the pool.
    split_every : int >= 2
        Fan-in of the tree.

    Returns
    -------
    The root (None if every result is None).
    """
    ids = [int(i) for i in chunk_ids]
    s = check_split_every(split_every)
    if not ids:
        return None

    def unit(i):
        return fn(part, p, [i], *args)

    def merge(group):
        return fold_group([f.result() for f in group], combine)

    with one_blas_thread(), ThreadPoolExecutor(max(1, min(int(threads), len(ids))), "rffor-chunk") as pool:
        levels: list[list] = [[]]  # levels[l]: the nodes of level l not yet grouped (futures), in order

        def add(level: int, node) -> None:
            if level == len(levels):
                levels.append([])
            levels[level].append(node)
            if len(levels[level]) == s:  # a full group: its merge is a node of the level above
                group, levels[level] = levels[level], []
                add(level + 1, pool.submit(merge, group))

        window: collections.deque = collections.deque()
        for i in ids:
            if len(window) >= 2 * max(1, int(threads)):
                window.popleft().result()  # bound the chunks in flight
            node = pool.submit(unit, i)
            window.append(node)
            add(0, node)
        # the tree's last, short groups: each level's remainder is one node of the level above (merged if it holds
        # more than one), up to the level that holds the root alone
        level = 0
        while not (level == len(levels) - 1 and len(levels[level]) == 1):
            group, levels[level] = levels[level], []
            if group:
                add(level + 1, pool.submit(merge, group) if len(group) > 1 else group[0])
            level += 1
        return levels[-1][0].result()
