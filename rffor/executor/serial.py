"""The serial executor: every pass of a fit in this process, partition after partition (no Dask involved)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

from ._tree import SPLIT_EVERY, check_split_every, tree_fold, tree_levels

__all__ = ["SerialExecutor"]


class SerialExecutor:
    """Runs the passes of a random-feature fit in this process (the executor protocol of :mod:`rffor.executor`).

    ``share`` returns the object itself, ``map`` calls the function for each partition in order on the data
    itself: exactly what a Dask task computes for that partition, and ``reduce`` merges the results by the tree a
    Dask cluster merges them by (:func:`rffor.executor.tree_fold`), so that the two executors give the same bits.

    Parameters
    ----------
    split_every : int >= 2, optional
        Fan-in of the merge tree of a reduce (default :data:`rffor.executor.SPLIT_EVERY`).
    """

    description = "this process"
    split_every = SPLIT_EVERY  # a class default: subclasses need not call __init__

    def __init__(self, *, split_every: int | None = None):
        if split_every is not None:
            self.split_every = check_split_every(split_every)

    @contextlib.contextmanager
    def open(
        self, data, n_partitions: int | None = None, *, split_every: int | None = None
    ) -> Iterator[_SerialSession]:
        """A session over ``data`` split into ``n_partitions`` partitions (default 1), its reductions merged by a tree
        of fan-in ``split_every`` (default the executor's)."""
        s = self.split_every if split_every is None else check_split_every(split_every)
        yield _SerialSession(data, data.partition(1 if n_partitions is None else n_partitions), s)

    def __repr__(self) -> str:
        return f"SerialExecutor(split_every={self.split_every})"


class _SerialSession:
    description = "this process (no Dask)"

    def __init__(self, data, partitions: list[list[int]], split_every: int):
        self.data = data
        self.partitions = partitions
        self.split_every = split_every
        self.stats: list = []

    def share(self, obj):
        return obj

    def release(self, handle) -> None:
        pass

    def _results(self, fn, args, chunks) -> tuple[list, int]:
        from . import select_chunks

        selected = select_chunks(self.partitions, chunks)
        return [fn(self.data, p, ids, *args) if ids else None for p, ids in enumerate(selected)], sum(
            1 for ids in selected if ids
        )

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
        results, leaves = self._results(fn, args, chunks)
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
