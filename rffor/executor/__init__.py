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
``executor.open(data, n_partitions, split_every=None, partitions_per="thread")`` is a context manager yielding a
*session* for one fit, with

- ``partitions``: list of lists of chunk ids (``data.partition(P)``; P = ``n_partitions``, or the executor's
  default when None: 1 in process; on a Dask cluster its worker threads, or its workers with
  ``partitions_per="worker"``, where a worker of T threads runs one task per partition and a chunkwise reduce's task
  shares its chunks among the T threads, folding their results in chunk order: :func:`fold_chunks`, the same bits
  for any T);
- ``description``: where it runs (for progress messages);
- ``share(obj) -> handle``: ship an object the tasks need once per fit (the feature maps, the round plan with its
  preconditioner) or once per round (the DSGD state); a handle is passed to ``map`` / ``reduce`` in place of the
  object; ``release(handle)`` forgets it. On a cluster a shared object reaches the tasks by a broadcast tree;
- ``map(fn, *args, chunks=None, label="") -> list``: calls ``fn(part, p, chunk_ids, *args)`` for every partition
  ``p`` whose chunks (``partitions[p]``, restricted to ``chunks`` when given) are not empty, where ``part`` is the
  data the task reads: the dataset itself when ``data.workers_can_read`` (a Zarr store: each task opens the store
  and reads only ``chunk_ids``), else the partition's rows shipped once per fit (``data.subset``). Returns one
  result per partition, in partition order (None for a partition with nothing to do);
- ``reduce(fn, *args, chunks=None, label="", split_every=None, combine=None)``: the results of ``map`` merged by
  the fixed tree of :func:`tree_fold` (fan-in ``split_every``, default the executor's, :data:`SPLIT_EVERY`) with
  ``combine(a, b)`` (default ``a + b``: the partial's own merge, e.g. a TSQR merge of two factors). On a cluster
  the merges run on the workers, next to their inputs, and the driver receives the root only;
- ``stats``: a :class:`PassStats` per pass, in order (tasks, tree depth, merges and where they ran, bytes);
- ``over(other)``: a context manager yielding a session over another chunked dataset (its partitions
  ``other.partition(P)``, P this session's) with the same connection, shared objects, tree and ``stats``: passes over
  :class:`rffor.chunked.RowPieces` of a sample of chunks run on all P partitions, not on the few holding the sample.

``executor.connected(data, n_partitions=None)`` is a context manager that keeps one connection for every session
opened inside (an embedded Dask LocalCluster started once for a driver step that needs a pass before the fit, e.g.
the landmark outputs of :class:`rffor.OutputKernelRegressor`, and for the fit itself; in process: nothing).

``fn`` and ``combine`` must be module-level functions (importable on a worker). Because partitions and seeds, not
workers, define every computation, and partial results merge by a tree fixed by P and ``split_every`` alone, a fit
with P partitions gives the same bits on every executor and cluster size, after a worker is lost and the pass
rerun, and after a resume (given the same number of BLAS threads per process: Dask's Nanny starts workers with
one). With ``split_every >= P`` the tree is one left fold in partition order (:func:`sum_in_order`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from ._pool import PARTITIONS_PER, check_partitions_per, chunkwise, fold_chunks, is_chunkwise, one_blas_thread
from ._tree import SPLIT_EVERY, check_split_every, fold_group, sum_in_order, tree_fold, tree_levels
from .serial import SerialExecutor

__all__ = [
    "SerialExecutor",
    "make_executor",
    "uses_dask",
    "select_chunks",
    "sum_in_order",
    "tree_levels",
    "tree_fold",
    "fold_group",
    "check_split_every",
    "chunkwise",
    "is_chunkwise",
    "fold_chunks",
    "one_blas_thread",
    "check_partitions_per",
    "PARTITIONS_PER",
    "PassStats",
    "IdleWorkersWarning",
    "idle_message",
    "SPLIT_EVERY",
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


class IdleWorkersWarning(UserWarning):
    """Workers (or their threads) outnumber the units of work of a pass: some stay idle in every pass."""


def idle_message(units: int, what: str, partitions: int, workers: int, threads: int, partitions_per: str) -> str | None:
    """Why some of a cluster's workers or threads have nothing to do in a pass, and how to fix it (None: all busy).

    Parameters
    ----------
    units : int
        Units of work of a pass: chunks (or row pieces).
    what : str
        Their name ("chunks", "row pieces of the selection's chunks").
    partitions : int
        P, tasks per pass.
    workers, threads : int
        Workers of the cluster and their threads in all.
    partitions_per : {"thread", "worker"}
    """
    slots, kind = (threads, "worker threads") if partitions_per == "thread" else (workers, "workers")
    fix = (
        "write the store in smaller chunks (rffor.data.write(..., chunks=ROWS)) or run fewer workers"
        if what == "chunks"
        else "raise selection_rows or run fewer workers"
    )
    if partitions < slots:
        if units > partitions:  # the partitions asked for, not the data, leave workers idle
            cause, fix = f"P = n_partitions = {partitions}", f"pass n_partitions >= {slots} or run fewer workers"
        else:
            cause = f"the data has {units} {what}"
        return (
            f"{slots - partitions} of the {slots} {kind} get no partition and stay idle in every pass: {cause}, "
            f"so a pass runs {partitions} task(s); {fix}"
        )
    if partitions_per == "worker" and units < threads:
        return (
            f"the {threads} threads of the {workers} worker(s) share {units} {what}: {threads - units} thread(s) stay "
            f"idle in every pass (a task's threads share its partition's {what}); {fix}"
        )
    return None


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


@dataclass
class PassStats:
    """What one pass of a session did (``session.stats``).

    Attributes
    ----------
    label : str
    partitions : int
        P.
    leaves : int
        Partitions with chunks to process (one task each).
    tasks : int
        Tasks submitted: leaves, merge tasks and broadcast copies (serial: the leaves).
    depth : int
        Levels of the merge tree (ceil(log_s P); 0 for ``map`` or P = 1).
    merges : int
        Calls of ``combine`` in the tree, wherever they ran.
    driver_merges : int
        Of which in the driver's process (Dask: 0, the driver gathers the root).
    broadcast_copies : int
        Copy tasks of shared objects made for this pass (Dask).
    payload_received, payload_sent : int
        Bytes of results the driver gathered (pickled) and of objects it shipped (shared since the previous pass
        and re-shipped after a lost worker), as the executor counts them (serial: 0).
    wire_received, wire_sent : int or None
        Bytes the kernel counted on the driver's TCP connections to the scheduler from the end of the previous pass
        (or the session's start) to the end of this one: everything that crossed, heartbeats and task messages
        included (Linux; None when not measurable, e.g. an in-process cluster).
    seconds : float
    attempts : int
        1 + reruns of the pass after lost tasks.
    """

    label: str
    partitions: int
    leaves: int
    tasks: int
    depth: int = 0
    merges: int = 0
    driver_merges: int = 0
    broadcast_copies: int = 0
    payload_received: int = 0
    payload_sent: int = 0
    wire_received: int | None = None
    wire_sent: int | None = None
    seconds: float = 0.0
    attempts: int = 1


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
    split_every: int | None = None,
    **dask_options,
):
    """The executor :func:`uses_dask` chooses: a :class:`~rffor.executor.dask.DaskExecutor` (given client or
    scheduler, else an embedded LocalCluster) or a :class:`SerialExecutor`.

    Parameters
    ----------
    data : chunked dataset, optional
    client, scheduler_address, security, n_partitions
        See :class:`~rffor.executor.dask.DaskExecutor` and :func:`uses_dask`.
    split_every : int, optional
        Fan-in of the merge tree of every reduce (default :data:`SPLIT_EVERY`); the same on both executors.
    **dask_options
        ``n_workers``, ``round_timeout``, ``connect_timeout``, ``round_retries``, ``broadcast_fanout`` of the Dask
        executor.
    """
    if not uses_dask(data, client=client, scheduler_address=scheduler_address, n_partitions=n_partitions):
        if security is not None:
            raise ValueError("security= is for a Dask cluster; pass client= or scheduler_address= with it")
        return SerialExecutor(split_every=split_every)
    from .dask import DaskExecutor

    return DaskExecutor(
        client=client, scheduler_address=scheduler_address, security=security, split_every=split_every, **dask_options
    )
