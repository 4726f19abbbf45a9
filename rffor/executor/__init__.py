"""Executors: where the passes over the data of a random-feature fit run.

A random-feature fit (:func:`rffor.solvers.rff.fit_rff`) is an ordinary driver loop of passes over the training
data: map-reduces of feature sums (the square-loss closed form, the warm start and its reweightings, the
preconditioner's covariance), then rounds of local DSGD steps, one task per partition. An executor runs those
passes; the fit does not know where.

- :class:`SerialExecutor` (:mod:`rffor.executor.serial`): in this process, partition after partition; no Dask is
  imported. The oracle the Dask executor is tested against.
- :class:`~rffor.executor.dask.DaskExecutor` (:mod:`rffor.executor.dask`): on a Dask cluster (a ``Client``, a
  scheduler address, or an embedded ``LocalCluster``), one task per partition, reading its chunks where the data is.

The protocol
------------
``executor.open(data, n_partitions)`` is a context manager yielding a *session* for one fit, with

- ``partitions``: list of lists of chunk ids (``data.partition(P)``; P = ``n_partitions``, or the executor's
  default when None: 1 in process, the worker threads of a Dask cluster);
- ``description``: where it runs (for progress messages);
- ``share(obj) -> handle``: ship an object the tasks need once per fit (the feature maps, the round plan with its
  preconditioner) or once per round (the DSGD state); a handle is passed to ``map`` in place of the object;
  ``release(handle)`` forgets it;
- ``map(fn, *args, chunks=None, label="") -> list``: calls ``fn(part, p, chunk_ids, *args)`` for every partition
  ``p`` whose chunks (``partitions[p]``, restricted to ``chunks`` when given) are not empty, where ``part`` is the
  data the task reads: the dataset itself when ``data.workers_can_read`` (a Zarr store: each task opens the store
  and reads only ``chunk_ids``), else the partition's rows shipped once per fit (``data.subset``). Returns one
  result per partition, in partition order (None for a partition with nothing to do);
- ``reduce(fn, *args, chunks=None, label="")``: the sum of ``map``'s results, added on the driver in partition
  order (:func:`sum_in_order`).

``fn`` must be a module-level function (importable on a worker). Because partitions and seeds, not workers,
define every computation, and results are combined in partition order, a fit with P partitions gives the same
bits on every executor, after a worker is lost and the pass rerun, and after a resume (given the same number of
BLAS threads per process: Dask's Nanny starts workers with one).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from .serial import SerialExecutor

__all__ = [
    "SerialExecutor",
    "make_executor",
    "uses_dask",
    "select_chunks",
    "sum_in_order",
    "usable_cpus",
    "SchedulerUnreachableError",
    "SchedulerLostError",
    "RoundTimeoutError",
    "RoundFailedError",
]


class SchedulerUnreachableError(ConnectionError):
    """The Dask scheduler could not be reached (or refused the connection), or has no worker, within the timeout."""


class SchedulerLostError(ConnectionError):
    """The connection to the Dask scheduler was lost during a fit (not retried: the cluster is gone)."""


class RoundTimeoutError(TimeoutError):
    """A pass over the partitions did not finish within the round timeout (a hung worker or task)."""


class RoundFailedError(RuntimeError):
    """A pass kept losing its tasks to dying workers after every allowed rerun."""


def usable_cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def select_chunks(partitions: Sequence[Sequence[int]], chunks: Sequence[int] | None) -> list[list[int]]:
    """Each partition's chunk ids, restricted to ``chunks`` (in the partition's order) when given."""
    if chunks is None:
        return [list(part) for part in partitions]
    wanted = {int(i) for i in chunks}
    return [[i for i in part if i in wanted] for part in partitions]


def sum_in_order(results):
    """``r_0 + r_1 + …`` over the results that are not None, left to right (None if there is none)."""
    total = None
    for r in results:
        if r is not None:
            total = r if total is None else total + r
    return total


def uses_dask(data, *, client=None, scheduler_address=None, n_partitions=None) -> bool:
    """Where a random-feature fit runs (the estimator's rule).

    Returns
    -------
    bool
        True when ``client`` or ``scheduler_address`` is given; else True when ``n_partitions > 1`` (an embedded
        LocalCluster), and for data that workers can read themselves (a Zarr store) of more than one chunk when
        ``n_partitions`` is None; False otherwise (in process).
    """
    if client is not None or scheduler_address is not None:
        return True
    if n_partitions is not None and n_partitions > 1:
        return True
    return bool(getattr(data, "workers_can_read", False)) and n_partitions is None and data.n_chunks > 1


def make_executor(
    data=None,
    *,
    client=None,
    scheduler_address: str | None = None,
    security=None,
    n_partitions: int | None = None,
    **dask_options,
):
    """The executor :func:`uses_dask` chooses: a :class:`~rffor.executor.dask.DaskExecutor` (given client or
    scheduler, else an embedded LocalCluster) or a :class:`SerialExecutor`.

    Parameters
    ----------
    data : chunked dataset, optional
    client, scheduler_address, security, n_partitions
        See :class:`~rffor.executor.dask.DaskExecutor` and :func:`uses_dask`.
    **dask_options
        ``n_workers``, ``round_timeout``, ``connect_timeout``, ``round_retries`` of the Dask executor.
    """
    if not uses_dask(data, client=client, scheduler_address=scheduler_address, n_partitions=n_partitions):
        if security is not None:
            raise ValueError("security= is for a Dask cluster; pass client= or scheduler_address= with it")
        return SerialExecutor()
    from .dask import DaskExecutor

    return DaskExecutor(client=client, scheduler_address=scheduler_address, security=security, **dask_options)
