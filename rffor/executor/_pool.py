"""Partitions per worker: a partition's task shares its chunks among the threads of its worker.

With ``partitions_per="worker"`` a worker of T threads runs one task per partition, and a reduce whose task is
:func:`chunkwise` computes the partition's result as the fold, in chunk order, of the task's results on its chunks
one at a time (:func:`fold_chunks`), T chunks at once on a pool of T threads, each with one BLAS thread. The units
(chunks) and their order are fixed by the data, not by T: the result has the same bits for any T, on any executor.
Per-pass costs that grow with the number of tasks (scheduling, merges, the driver's messages) then grow with the
number of workers, not of cores.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from ._tree import fold_group

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


def fold_chunks(fn: Callable, part, p: int, chunk_ids: Sequence[int], args: tuple, combine, threads: int):
    """A chunkwise task's result on a partition: ``fn(part, p, [i], *args)`` for each chunk i of ``chunk_ids``,
    folded left to right with ``combine`` (None results skipped), computed ``threads`` chunks at a time.

    At most ``2 · threads`` chunk results wait to be folded (memory bounded whatever the partition's size).

    Parameters
    ----------
    fn : callable
        A :func:`chunkwise` task function.
    part, p, chunk_ids, args
        As the executor calls ``fn``.
    combine : callable or None
        ``combine(a, b)``; None: ``a + b``.
    threads : int
        Threads of the pool (1: in this thread).

    Returns
    -------
    The fold (None if every result is None).
    """
    ids = [int(i) for i in chunk_ids]

    def unit(i):
        return fn(part, p, [i], *args)

    with one_blas_thread():
        if threads <= 1 or len(ids) <= 1:
            return fold_group((unit(i) for i in ids), combine)
        with ThreadPoolExecutor(min(int(threads), len(ids)), thread_name_prefix="rffor-chunk") as pool:
            todo = iter(ids)
            pending = collections.deque(pool.submit(unit, i) for i in itertools.islice(todo, 2 * int(threads)))

            def results():
                while pending:
                    value = pending.popleft().result()
                    for i in todo:  # keep the pool fed: one new chunk for each one taken
                        pending.append(pool.submit(unit, i))
                        break
                    yield value

            return fold_group(results(), combine)
