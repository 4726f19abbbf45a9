"""The serial executor: every pass of a fit in this process, partition after partition (no Dask involved)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["SerialExecutor"]


class SerialExecutor:
    """Runs the passes of a random-feature fit in this process (the executor protocol of :mod:`rffor.executor`).

    ``share`` returns the object itself, ``map`` calls the function for each partition in order on the data
    itself: exactly what a Dask task computes for that partition, so that the two executors give the same bits.
    """

    description = "this process"

    @contextlib.contextmanager
    def open(self, data, n_partitions: int | None = None) -> Iterator[_SerialSession]:
        """A session over ``data`` split into ``n_partitions`` partitions (default 1)."""
        yield _SerialSession(data, data.partition(1 if n_partitions is None else n_partitions))

    def __repr__(self) -> str:
        return "SerialExecutor()"


class _SerialSession:
    description = "this process (no Dask)"

    def __init__(self, data, partitions: list[list[int]]):
        self.data = data
        self.partitions = partitions

    def share(self, obj):
        return obj

    def release(self, handle) -> None:
        pass

    def map(self, fn, *args, chunks=None, label: str = "") -> list:
        from . import select_chunks

        return [
            fn(self.data, p, ids, *args) if ids else None
            for p, ids in enumerate(select_chunks(self.partitions, chunks))
        ]

    def reduce(self, fn, *args, chunks=None, label: str = ""):
        from . import sum_in_order

        return sum_in_order(self.map(fn, *args, chunks=chunks, label=label))
