"""The serial executor: every pass of a fit in this process, partition after partition (no Dask involved)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

from ._pool import check_partitions_per, fold_chunks, is_chunkwise
from ._tree import SPLIT_EVERY, check_split_every, tree_fold, tree_levels

__all__ = ["SerialExecutor"]


class SerialExecutor:
    """Runs the passes of a random-feature fit in this process (the executor protocol of :mod:`rffor.executor`).

    ``share`` returns the object itself, ``map`` calls the function for each partition in order on the data
    itself: exactly what a Dask task computes for that partition, and ``reduce`` merges the results by the tree a
    Dask cluster merges them by (:func:`rffor.executor.tree_fold`), so that the two executors give the same bits.
    With ``partitions_per="worker"`` this process is the one worker: a chunkwise reduce merges each partition's
    chunks' results by the tree on a pool of ``threads`` threads (:func:`rffor.executor.fold_chunks`), as a Dask
    worker does.

    Parameters
    ----------
    split_every : int >= 2, optional
        Fan-in of the merge tree of a reduce (default :data:`rffor.executor.SPLIT_EVERY`).
    threads : int >= 1, optional
        Threads of a partition's task with ``partitions_per="worker"`` (default: the CPUs this process may use).
    """

    description = "this process"
    split_every = SPLIT_EVERY  # class defaults: subclasses need not call __init__
    threads = None

    def __init__(self, *, split_every: int | None = None, threads: int | None = None):
        if split_every is not None:
            self.split_every = check_split_every(split_every)
        if threads is not None:
            if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
                raise ValueError(f"threads must be an integer >= 1, got {threads!r}")
            self.threads = threads

    @contextlib.contextmanager
    def open(
        self,
        data,
        n_partitions: int | None = None,
        *,
        split_every: int | None = None,
        partitions_per: str = "thread",
    ) -> Iterator[_SerialSession]:
        """A session over ``data`` split into ``n_partitions`` partitions (default 1), its reductions merged by a tree
        of fan-in ``split_every`` (default the executor's); ``partitions_per="worker"``: chunkwise reductions fold
        each partition's chunks on a pool of threads."""
        from . import usable_cpus

        s = self.split_every if split_every is None else check_split_every(split_every)
        pooled = check_partitions_per(partitions_per) == "worker"
        threads = (self.threads or usable_cpus()) if pooled else 1
        yield _SerialSession(data, data.partition(1 if n_partitions is None else n_partitions), s, pooled, threads)

    @contextlib.contextmanager
    def connected(self, data=None, n_partitions: int | None = None) -> Iterator[SerialExecutor]:
        """Nothing to keep open: the sessions run in this process (the executor protocol's ``connected``)."""
        yield self

    def __repr__(self) -> str:
        return f"SerialExecutor(split_every={self.split_every})"


class _SerialSession:
    description = "this process (no Dask)"

    def __init__(self, data, partitions: list[list[int]], split_every: int, pooled=False, threads=1, stats=None):
        self.data = data
        self.partitions = partitions
        self.split_every = split_every
        self.pooled, self.threads = bool(pooled), int(threads)
        self.stats: list = [] if stats is None else stats

    def share(self, obj):
        return obj

    def release(self, handle) -> None:
        pass

    @contextlib.contextmanager
    def over(self, data) -> Iterator[_SerialSession]:
        """A session over another dataset (e.g. :class:`rffor.chunked.RowPieces` of this one's rows) in
        ``data.partition(P)`` partitions, P this session's: the same shared objects, tree and statistics."""
        yield _SerialSession(
            data, data.partition(len(self.partitions)), self.split_every, self.pooled, self.threads, self.stats
        )

    def _results(self, fn, args, chunks, combine=None, split_every=None) -> tuple[list, int]:
        from . import select_chunks

        selected = select_chunks(self.partitions, chunks)
        if split_every is not None and self.pooled and is_chunkwise(fn):
            results = [
                fold_chunks(fn, self.data, p, ids, args, combine, self.threads, split_every) if ids else None
                for p, ids in enumerate(selected)
            ]
        else:
            results = [fn(self.data, p, ids, *args) if ids else None for p, ids in enumerate(selected)]
        return results, sum(1 for ids in selected if ids)

    def map(self, fn, *args, chunks=None, label: str = "") -> list:
        from . import PassStats

        tic = time.perf_counter()
        results, leaves = self._results(fn, args, chunks)
        self.stats.append(PassStats(label, len(self.partitions), leaves, leaves, seconds=time.perf_counter() - tic))
        return results

    def reduce(
        self, fn, *args, chunks=None, label: str = "", split_every: int | None = None, combine: Callable | None = None
    ):
        from . import PassStats

        s = self.split_every if split_every is None else check_split_every(split_every)
        tic = time.perf_counter()
        results, leaves = self._results(fn, args, chunks, combine, s)
        value, merges = tree_fold(results, s, combine)
        self.stats.append(
            PassStats(
                label,
                len(self.partitions),
                leaves,
                leaves,
                depth=len(tree_levels(len(results), s)),
                merges=merges,
                driver_merges=merges,
                seconds=time.perf_counter() - tic,
            )
        )
        return value
