"""The Dask executor: the passes of a random-feature fit as tasks on a Dask cluster, one per partition.

What crosses the network
------------------------
- Once per fit, scattered with ``client.scatter(..., hash=False)`` to one worker and broadcast from there by a tree
  (below): the data of each partition when the workers cannot read it themselves (in-memory arrays: each
  partition's rows, once, not broadcast), the feature maps (input frequencies are not pickled: each worker redraws
  them from their seed), and the round plan (SGD configuration with the preconditioner, output features on the
  grid). A Zarr :class:`rffor.data.Dataset` is a small description: every task opens the store where it runs and
  reads only its partition's chunks; the driver reads metadata only.
- Once per round (``map``): the DSGD state to the workers, and each partition's state back to the driver.
- Once per reduce (closed form, warm start, reweighting, gradient passes): the current B when the pass needs it,
  to the workers; the partitions' partials merge on the workers by the fixed tree of
  :func:`rffor.executor.tree_fold` (fan-in ``split_every``) and the driver receives the root alone: one partial
  per pass whatever P, no merge on the driver. The driver sends one task message per leaf task, merge and
  broadcast copy.

Shipped objects and merge inputs travel as one in-band pickle each (:class:`_Packed`), so that their arrays are
fresh, aligned allocations on the worker: BLAS then computes the driver's bits. Tasks carry keys
``<name>-<pass>-<label>-p<partition>-a<attempt>`` (rounds: label ``round-<r+1>``), merges
``…-<label>-t<level>.<group>-a<attempt>``, broadcast copies ``<name>-share<object>.<generation>-w<node>``.

Broadcast: a scattered object lives on one worker. Rather than every worker fetching it from there, copy tasks
(:func:`_copy`) form a tree of fan-out ``broadcast_fanout`` over holders among the workers a pass uses: each copy
is fetched from the copy one level up, and each holder also serves the tasks of f − 1 workers without a copy, f =
:func:`broadcast_serves` (sqrt(W · 2 MB / size): a copy task costs the scheduler about what 2 MB cost a 10 Gb/s
link), so a broadcast to W workers makes ceil(W / f) − 1 copy tasks, no worker sends the object more than
b + f − 1 times, and it reaches them in ceil(log_b (W / f)) + 1 hops, without the driver
(:meth:`_DaskSession._broadcast`). Copies are tasks, so the scheduler recomputes one lost with its worker.
(``client.scatter(broadcast=True)`` replicates from the scheduler instead, but a
worker killed during the replication made distributed 2026.8 retry the dead address until the key was released:
the round hung; ``client.replicate`` is a blocking scheduler call with the same transfers.)

Tasks per pass: with ``partitions_per="thread"`` on workers of T threads (a multiple of ``split_every`` s), T / s
consecutive groups of s partitions (the tree's first level) run as one task on a pool of its worker's threads
(:func:`_group_leaf`), each group folded in partition order as the tree's merge would, the task returning the
groups' partials: a pass has P / T leaf tasks, the same tree above them, the same bits.
With ``partitions_per="worker"`` a worker runs one task per pass whose chunks its threads share
(:func:`_pooled_leaf`, :func:`rffor.executor.fold_chunks`).

Placement: tasks of a store-backed fit go to the worker threads in contiguous blocks of partitions by soft hints
(a task whose worker is gone runs elsewhere; never a hard pin, DASK_NOTES.md), so that a merge group's inputs
mostly share a worker; in-memory partitions' tasks follow their data; a merge is hinted to the worker most of
its inputs were placed on.

Failures
--------
One helper (:meth:`_DaskSession._run`) runs every pass with the same rules:

- a task lost with its worker (``KilledWorker``, a cancelled future, lost scattered data, a comm error with the
  scheduler still connected): tasks and merges whose inputs survive are recomputed by the scheduler itself; else
  the whole pass is rerun from the same inputs (shared objects whose worker died are
  scattered again), up to ``round_retries`` times (Dask config ``rffor.round-retries``, 3); results are
  bit-identical to an undisturbed run; then :class:`~rffor.executor.RoundFailedError`;
- the scheduler lost (the client is no longer connected): :class:`~rffor.executor.SchedulerLostError` at once, no
  retry (:func:`rffor.solvers.rff.fit_rff` adds which round its checkpoint holds and how to resume);
- a pass taking longer than ``round_timeout`` (Dask config ``rffor.round-timeout``; "auto": 30 minutes for the
  first pass of a kind, then max(2 minutes, 20x the slowest completed pass of that kind: passes of one kind, named
  alike up to their numbers, do the same work, while a first pass over new rows computes their features and a
  later one may read them from the cache)): :class:`~rffor.executor.RoundTimeoutError`
  naming the partitions still pending and where they run;
- a task's own exception (bad data, out of memory): raised unchanged, with its traceback.

Configuration
-------------
rffor ships ``rffor/dask.yaml`` and loads it as Dask *defaults* before starting or joining a cluster
(:func:`configure_dask`): it sets ``MALLOC_MMAP_THRESHOLD_`` in the Nanny's worker environment (without it NumPy
loops run about 1.9x slower in Nanny workers, see DASK_NOTES.md) and the ``rffor.*`` keys ``connect-timeout``,
``round-timeout``, ``round-retries`` and ``local-cluster.*``, which ``dask.config.set`` or a Dask YAML file
override. Clusters started outside rffor should use ``cluster/dask.yaml``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import numbers
import os
import pickle
import re
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError as _CFCancelledError
from dataclasses import dataclass
from typing import Any

from . import (
    SPLIT_EVERY,
    IdleWorkersWarning,
    PassStats,
    RoundFailedError,
    RoundTimeoutError,
    SchedulerLostError,
    SchedulerUnreachableError,
    check_partitions_per,
    check_split_every,
    fold_chunks,
    fold_group,
    idle_message,
    is_chunkwise,
    select_chunks,
    tree_levels,
    usable_cpus,
)

__all__ = [
    "DaskExecutor",
    "configure_dask",
    "dask_config_path",
    "connect",
    "wire_bytes",
    "BROADCAST_FANOUT",
    "BROADCAST_COPY_BYTES",
    "broadcast_serves",
    "broadcast_copies",
]

#: Default fan-out of the broadcast tree of a shared object: each copy serves at most this many further copies
#: (distributed's ``replicate`` uses 2 too); the copies reach H holders in ceil(log_b H) hops.
BROADCAST_FANOUT = 2

#: Default bytes one copy task of a broadcast is worth: a task costs the scheduler about 1.4 ms (measured,
#: benchmarks/scale_out.py --model), the time a 10 Gb/s link moves 1.75 MB. A holder of an object of ``nbytes``
#: then serves :func:`broadcast_serves` workers (itself included): the number of copies that minimises copies × one
#: task + fetches per holder × nbytes / bandwidth.
BROADCAST_COPY_BYTES = 2_000_000


def broadcast_serves(n_workers: int, nbytes: int, copy_bytes: int = BROADCAST_COPY_BYTES) -> int:
    """Workers that one copy of a shared object serves, itself included, in a broadcast to ``n_workers`` workers.

    The broadcast's cost is about ``copies · t_task + f · nbytes / bandwidth`` (the scheduler's time for the copy
    tasks, then a holder sending to the f workers it serves); with copies = W / f and ``copy_bytes`` = t_task ·
    bandwidth it is least at f = sqrt(W · copy_bytes / nbytes). Small objects (the DSGD state, an MM step's B, a
    dataset's description) are served to many workers by few copies, large ones (the maps at large D_x) copied to
    every worker (f = 1).

    Parameters
    ----------
    n_workers : int
        W, workers that need the object.
    nbytes : int
        Its pickled size.
    copy_bytes : int
        Bytes one copy task is worth (0: f = 1, a copy on every worker).

    Returns
    -------
    int
        f >= 1: W workers need ceil(W / f) holders, ceil(W / f) − 1 copy tasks (none when the scattered object
        can serve them all, :meth:`_DaskSession._broadcast`).
    """
    if copy_bytes <= 0:
        return 1
    return max(1, math.ceil(math.sqrt(max(n_workers, 1) * copy_bytes / max(nbytes, 1))))


def broadcast_copies(n_workers: int, serves: int, fanout: int) -> tuple[int, int]:
    """(copy tasks, hops) of a broadcast to ``n_workers`` workers, one of them holding the scattered object, each
    holder serving ``serves`` workers (:func:`broadcast_serves`) and ``fanout`` further holders.

    No copies (one hop) when the scattered object's worker can serve all the others itself (W − 1 <= fanout +
    serves − 1); else ceil(W / serves) holders in a tree of fan-out ``fanout``, the object reaching the last
    holder in ceil(log_b …) hops and its members one hop later (none when serves = 1).
    """
    if n_workers <= 1:
        return 0, 0
    if n_workers - 1 <= fanout + serves - 1:
        return 0, 1
    holders = math.ceil(n_workers / serves)
    hops, reach, width = 0, 1, 1  # holders reached after `hops` hops of the tree of fan-out b
    while reach < holders:
        width *= fanout
        reach += width
        hops += 1
    return holders - 1, hops + (1 if serves > 1 else 0)


logger = logging.getLogger("rffor")


# ---------------------------------------------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------------------------------------------


def dask_config_path() -> str:
    """Path of the Dask configuration shipped with rffor (``rffor/dask.yaml``)."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dask.yaml")


_CONFIGURED = False

#: Seconds a session reuses the workers' thread counts it last asked the scheduler for (placement and fusing only,
#: never results): each scheduler round trip is latency on the driver's path between two passes, and short passes
#: (MM on few rows per worker) feel it; a worker that joined meanwhile gets tasks from the next ask.
PLACEMENT_SECONDS = 2.0

#: Seconds the client batches its messages to the scheduler during a session (distributed's client holds each for
#: up to 10 ms, its workers 2 ms): a pass's task messages leave without waiting for the batch of the previous
#: pass's releases (the scheduler's cost per pass of benchmarks/scale_out.py ``--model``: 28 ms in the run after
#: this change, 40 ms before); the user's client gets its own value back at the end.
CLIENT_BATCH_SECONDS = 0.002


def configure_dask() -> dict:
    """Load rffor's Dask configuration as Dask defaults (idempotent).

    Defaults never override what the user set (Dask YAML files, ``DASK_*`` variables, ``dask.config.set``). The
    worker-environment fix (``distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_``) takes effect for Nanny
    workers started by this process afterwards, i.e. the embedded LocalCluster.

    Returns
    -------
    dict
        The configuration read from :func:`dask_config_path`.
    """
    global _CONFIGURED
    import dask.config
    import distributed  # noqa: F401 - its defaults first: loaded later, they would replace rffor's
    import yaml

    with open(dask_config_path(), encoding="utf-8") as f:
        config = yaml.safe_load(f) or {}
    if not _CONFIGURED:
        dask.config.update_defaults(config)
        _CONFIGURED = True
    return config


def _config_seconds(key: str, value=None) -> float | None:
    """A duration from an explicit value or the Dask config key ``rffor.<key>`` (None / "auto" → None)."""
    import dask.config
    from dask.utils import parse_timedelta

    if value is None:
        configure_dask()
        value = dask.config.get(f"rffor.{key}", None)
    if value is None or value == "auto":
        return None
    seconds = parse_timedelta(value, default="seconds")
    if seconds is None or not seconds > 0:
        raise ValueError(f"{key} must be a positive duration (seconds or a string like '30s'), got {value!r}")
    return float(seconds)


def _config_int(key: str, value=None) -> int:
    import dask.config

    if value is None:
        configure_dask()
        value = dask.config.get(f"rffor.{key}")
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{key} must be an integer >= 0, got {value!r}")
    return int(value)


# ---------------------------------------------------------------------------------------------------------------
# connection
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class _Connection:
    client: Any
    description: str
    cluster: Any = None


@contextlib.contextmanager
def connect(
    client=None,
    scheduler_address: str | None = None,
    security=None,
    *,
    connect_timeout: float | str | None = None,
    n_workers: int | None = None,
) -> Iterator[_Connection]:
    """A Dask client for the duration of a fit.

    Parameters
    ----------
    client : distributed.Client, optional
        Used as is and left open.
    scheduler_address : str, optional
        ``tcp://host:port`` or ``tls://host:port`` of a running scheduler; a client is opened and closed.
    security : distributed.Security, optional
        TLS settings for ``scheduler_address`` (or for the embedded cluster).
    connect_timeout : float or str, optional
        Give up connecting after this long (default: Dask config ``rffor.connect-timeout``, 30 s).
    n_workers : int, optional
        Embedded LocalCluster: number of workers (default ``rffor.local-cluster.n-workers``: one per usable CPU).

    Yields
    ------
    connection
        With attributes ``client``, ``description`` (for messages) and ``cluster`` (the embedded LocalCluster or
        None).

    Raises
    ------
    SchedulerUnreachableError
        The scheduler did not answer within the timeout, or refused the connection (e.g. TLS without a valid
        client certificate).
    """
    configure_dask()
    if client is not None:
        if scheduler_address is not None:
            raise ValueError("pass either client or scheduler_address, not both")
        yield _Connection(client, f"client of {client.scheduler.address}")
        return

    from distributed import Client

    if scheduler_address is not None:
        if not isinstance(scheduler_address, str) or not scheduler_address:
            raise ValueError(f"scheduler_address must be a string like 'tcp://host:8786', got {scheduler_address!r}")
        timeout = _config_seconds("connect-timeout", connect_timeout) or 30.0
        tic = time.perf_counter()
        try:
            client = Client(scheduler_address, security=security, timeout=timeout, set_as_default=False)
        except (OSError, TimeoutError, TypeError, ValueError) as exc:
            hint = (
                " A tls:// scheduler needs security=distributed.Security(tls_ca_file=..., tls_client_cert=..., "
                "tls_client_key=..., require_encryption=True) with a certificate signed by its CA "
                "(see cluster/tls/README.md)."
            )
            raise SchedulerUnreachableError(
                f"could not connect to the Dask scheduler at {scheduler_address!r} within {timeout:g} s "
                f"(gave up after {time.perf_counter() - tic:.1f} s: {type(exc).__name__}: {exc}). Check that the "
                f"scheduler is running and reachable from this machine (address, port, firewall).{hint}"
            ) from exc
        try:
            yield _Connection(client, f"scheduler {scheduler_address}")
        finally:
            with contextlib.suppress(Exception):
                client.close()
        return

    import dask.config
    from distributed import LocalCluster

    cfg = dask.config.get("rffor.local-cluster", {}) or {}
    if n_workers is None:
        n_workers = cfg.get("n-workers", "auto")
        n_workers = usable_cpus() if n_workers in (None, "auto") else int(n_workers)
    threads = int(cfg.get("threads-per-worker", 1) or 1)
    processes = bool(cfg.get("processes", True))
    kwargs: dict[str, Any] = dict(
        n_workers=n_workers,
        threads_per_worker=threads,
        processes=processes,
        # no dashboard; the scheduler's HTTP server (health, metrics) always starts: keep it on loopback
        dashboard_address="127.0.0.1:0",
        scheduler_kwargs={"dashboard": False},
        worker_dashboard_address=None,
    )
    if processes:
        kwargs["host"] = "127.0.0.1"
    if security is not None:
        kwargs["security"] = security
        kwargs["protocol"] = "tls://"
    cluster = LocalCluster(**kwargs)
    try:
        client = Client(cluster, security=security, set_as_default=False)
        try:
            yield _Connection(
                client, f"embedded LocalCluster ({n_workers} worker(s) x {threads} thread(s))", cluster=cluster
            )
        finally:
            client.close()
    finally:
        cluster.close()


def _total_threads(client) -> int:
    """Threads over all workers connected to the scheduler."""
    return int(sum(client.nthreads().values()))


def _lost_exceptions() -> tuple[type[BaseException], ...]:
    from distributed import KilledWorker
    from distributed.comm import CommClosedError

    # distributed's FutureCancelledError / FuturesCancelledError derive from concurrent.futures.CancelledError
    return (KilledWorker, CommClosedError, _CFCancelledError, OSError)


# ---------------------------------------------------------------------------------------------------------------
# the executor
# ---------------------------------------------------------------------------------------------------------------


class DaskExecutor:
    """Runs the passes of a random-feature fit on a Dask cluster (the executor protocol of :mod:`rffor.executor`).

    Parameters
    ----------
    client : distributed.Client, optional
        Run on this cluster (left open).
    scheduler_address : str, optional
        Connect to this scheduler (``tcp://host:8786``, ``tls://host:8786``) for the fit.
    security : distributed.Security, optional
        TLS settings for ``scheduler_address`` (or for the embedded cluster).
    n_workers : int, optional
        Neither client nor scheduler: an embedded LocalCluster (one single-threaded worker process per usable CPU,
        at most one per partition, bound to 127.0.0.1, no dashboard), started by ``open`` and closed at the end of
        the fit. Scripts that fit this way need an ``if __name__ == "__main__":`` guard (worker processes import
        the main module).
    round_timeout, connect_timeout : float or str, optional
        Seconds (or Dask duration strings); defaults from the Dask config ``rffor.round-timeout`` and
        ``rffor.connect-timeout`` (``rffor/dask.yaml``).
    round_retries : int, optional
        Reruns of a pass whose tasks were lost with a worker (default Dask config ``rffor.round-retries``, 3).
    split_every : int >= 2, optional
        Fan-in of the merge tree of a reduce (default :data:`rffor.executor.SPLIT_EVERY`, 8); a fit gives the
        serial executor's bits when both use the same value.
    broadcast_fanout : int >= 1, optional
        Fan-out of the broadcast tree of shared objects (default :data:`BROADCAST_FANOUT`, 2).
    broadcast_copy_bytes : int >= 0, optional
        Bytes one copy task of a broadcast is worth (default :data:`BROADCAST_COPY_BYTES`): a copy of an object of
        ``nbytes`` serves :func:`broadcast_serves` workers; 0: a copy on every worker.
    progress : rffor.progress.Progress, optional
        Where retries are reported (set by the fit).
    """

    _held = None  # the connection kept by connected(), else None

    def __init__(
        self,
        client=None,
        scheduler_address: str | None = None,
        security=None,
        *,
        n_workers: int | None = None,
        round_timeout: float | str | None = None,
        connect_timeout: float | str | None = None,
        round_retries: int | None = None,
        split_every: int | None = None,
        broadcast_fanout: int | None = None,
        broadcast_copy_bytes: int | None = None,
        progress=None,
    ):
        if client is not None and scheduler_address is not None:
            raise ValueError("pass either client or scheduler_address, not both")
        self.client = client
        self.scheduler_address = scheduler_address
        self.security = security
        self.n_workers = n_workers
        self.round_timeout = _config_seconds("round-timeout", round_timeout)
        self.connect_timeout = connect_timeout
        self.round_retries = _config_int("round-retries", round_retries)
        self.split_every = check_split_every(SPLIT_EVERY if split_every is None else split_every)
        fanout = BROADCAST_FANOUT if broadcast_fanout is None else broadcast_fanout
        if isinstance(fanout, bool) or not isinstance(fanout, numbers.Integral) or fanout < 1:
            raise ValueError(f"broadcast_fanout must be an integer >= 1, got {broadcast_fanout!r}")
        self.broadcast_fanout = int(fanout)
        copy_bytes = BROADCAST_COPY_BYTES if broadcast_copy_bytes is None else broadcast_copy_bytes
        if isinstance(copy_bytes, bool) or not isinstance(copy_bytes, numbers.Integral) or copy_bytes < 0:
            raise ValueError(f"broadcast_copy_bytes must be an integer >= 0, got {broadcast_copy_bytes!r}")
        self.broadcast_copy_bytes = int(copy_bytes)
        self.progress = progress

    @property
    def description(self) -> str:
        if self.client is not None:
            return f"Dask client of {self.client.scheduler.address}"
        if self.scheduler_address is not None:
            return f"Dask scheduler {self.scheduler_address}"
        return "an embedded Dask LocalCluster"

    def __repr__(self) -> str:
        return f"DaskExecutor({self.description})"

    @contextlib.contextmanager
    def open(
        self,
        data,
        n_partitions: int | None = None,
        *,
        split_every: int | None = None,
        partitions_per: str = "thread",
    ) -> Iterator[_DaskSession]:
        """Connect (or start the embedded cluster), split the data into partitions and ship what must be shipped.

        P = ``n_partitions``, or the number of worker threads of the cluster (``partitions_per="thread"``), or of
        its workers (``"worker"``: a worker's T threads share each task's chunks, :func:`rffor.executor.fold_chunks`);
        embedded: one worker per usable CPU, at most one per chunk. Reductions merge by a tree of fan-in
        ``split_every`` (default the executor's). Warns (:class:`~rffor.executor.IdleWorkersWarning`) when workers
        or threads would stay idle in every pass.
        """
        layout = check_partitions_per(partitions_per)
        held = self._held
        with contextlib.nullcontext(held) if held is not None else self._connect(data, n_partitions) as conn:
            threads = _total_threads(conn.client)
            if threads == 0:
                timeout = _config_seconds("connect-timeout", self.connect_timeout) or 30.0
                self._say(f"waiting up to {timeout:g} s for a worker on the {conn.description}")
                try:
                    conn.client.wait_for_workers(1, timeout=timeout)
                except TimeoutError:
                    raise SchedulerUnreachableError(
                        f"the {conn.description} has no worker, and none joined within {timeout:g} s "
                        f"(rffor.connect-timeout): start workers (dask worker {conn.client.scheduler.address})"
                    ) from None
                threads = _total_threads(conn.client)
            workers = len(conn.client.nthreads())
            partitions = data.partition(n_partitions or (threads if layout == "thread" else workers))
            session = _DaskSession(self, conn, data, partitions, threads, layout)
            if split_every is not None:
                session.split_every = check_split_every(split_every)
            try:
                yield session
            finally:
                session.close()

    def _connect(self, data, n_partitions: int | None):
        """:func:`connect` with this executor's settings; embedded: one worker per usable CPU, at most one per
        partition asked for and per chunk."""
        n_workers = self.n_workers
        if n_workers is None and self.client is None and self.scheduler_address is None:
            n_workers = max(1, min(usable_cpus(), n_partitions or data.n_chunks, data.n_chunks))
        return connect(
            self.client, self.scheduler_address, self.security, connect_timeout=self.connect_timeout,
            n_workers=n_workers,
        )  # fmt: skip

    @contextlib.contextmanager
    def connected(self, data, n_partitions: int | None = None) -> Iterator[DaskExecutor]:
        """Keep one connection for every session opened inside (:meth:`open`): the embedded LocalCluster is then
        started once (its workers as :meth:`open` would start them for ``data`` and ``n_partitions``) and closed at
        the end, a scheduler connected to once. Nested: the outer connection serves."""
        if self._held is not None:
            yield self
            return
        with self._connect(data, n_partitions) as conn:
            self._held = conn
            try:
                yield self
            finally:
                self._held = None

    def _timeout(self, seconds: dict[str, list[float]], label: str | None = None) -> float:
        """The time a pass named ``label`` may take (module docstring); ``seconds``: completed passes by kind."""
        if self.round_timeout is not None:
            return self.round_timeout
        done = seconds.get(_pass_kind(label), []) if label is not None else [t for v in seconds.values() for t in v]
        if not done:
            return 1800.0
        return max(120.0, 20.0 * max(done))

    def _say(self, text: str) -> None:
        if self.progress is not None:
            self.progress.warning(text)
        else:
            logger.warning("%s", text)


def _pass_kind(label: str) -> str:
    """Passes named alike up to their numbers ("pass 3", "pass 4") are of one kind (the same work)."""
    return re.sub(r"\d+", "#", label)


class _Packed:
    """An object shipped as one pickle with its arrays in band, unpacked where a task uses it.

    Dask's own serialisation sends NumPy arrays as out-of-band frames and rebuilds them as views of the received
    bytes, at whatever alignment those have (measured: 59 mod 64 bytes). OpenBLAS then takes other code paths and a
    preconditioned step differed from the serial one in the last bits (2e-7 on float32). Unpickled in band, every
    array is a fresh allocation, as in the driver's process, and a task on a worker computes the serial bits.
    """

    __slots__ = ("blob",)

    def __init__(self, obj):
        self.blob = pickle.dumps(obj, protocol=4)  # protocol 4: no out-of-band buffers

    def unpack(self):
        return pickle.loads(self.blob)


def _task(fn, part, p, chunk_ids, *args):
    """Run ``fn(part, p, chunk_ids, *args)`` on a worker with the shipped objects unpacked."""
    unpacked = [a.unpack() if isinstance(a, _Packed) else a for a in args]
    return fn(part.unpack() if isinstance(part, _Packed) else part, p, chunk_ids, *unpacked)


def _leaf(fn, part, p, chunk_ids, *args):
    """A leaf of a reduce: :func:`_task`'s result packed in band (a merge on another worker unpacks fresh arrays)."""
    result = _task(fn, part, p, chunk_ids, *args)
    return None if result is None else _Packed(result)


def _pooled_leaf(fn, combine, split_every, part, p, chunk_ids, *args):
    """A leaf of a chunkwise reduce with ``partitions_per="worker"``: the partition's chunks shared among this
    worker's threads, their results merged by the fixed tree over the chunks (:func:`rffor.executor.fold_chunks`),
    packed."""
    from distributed import get_worker

    worker = get_worker()
    threads = getattr(worker, "nthreads", None) or worker.state.nthreads
    unpacked = tuple(a.unpack() if isinstance(a, _Packed) else a for a in args)
    part = part.unpack() if isinstance(part, _Packed) else part
    result = fold_chunks(fn, part, p, chunk_ids, unpacked, combine, int(threads), split_every)
    return None if result is None else _Packed(result)


def _group_leaf(fn, combine, sizes, parts, ps, chunk_ids, *args):
    """First-level nodes of the merge tree as one task: the partitions of consecutive groups (``sizes[k]``
    partitions in group k) computed on a pool of this worker's threads (one BLAS thread each), each group's results
    folded left to right as a merge task would fold them; a tuple of the groups' packed partials (None for a group
    whose results are all None)."""
    from concurrent.futures import ThreadPoolExecutor

    from distributed import get_worker

    from . import one_blas_thread

    worker = get_worker()
    threads = int(getattr(worker, "nthreads", None) or worker.state.nthreads)
    unpacked = tuple(a.unpack() if isinstance(a, _Packed) else a for a in args)
    parts = [part.unpack() if isinstance(part, _Packed) else part for part in parts]

    def one(k):
        return fn(parts[k], ps[k], chunk_ids[k], *unpacked)

    out = []
    with one_blas_thread(), ThreadPoolExecutor(max(1, min(threads, len(ps))), thread_name_prefix="rffor-part") as pool:
        results = pool.map(one, range(len(ps)))  # in partition order, computed ahead on the pool
        for size in sizes:
            total = fold_group([next(results) for _ in range(size)], combine)
            out.append(None if total is None else _Packed(total))
    return tuple(out)


def _pick(value, index):
    """A node of the merge tree from a task's result: the result itself, or entry ``index`` of a fused first-level
    task's tuple (:func:`_group_leaf`)."""
    return value if index is None else value[index]


def _merge(combine, picks, *children):
    """A node of the merge tree: its children (packed results, or entries ``picks`` of fused tasks' tuples; None
    skipped) folded left to right, packed again (each child unpacked when its turn comes: two unpacked partials at a
    time)."""
    nodes = (_pick(c, k) for c, k in zip(children, picks, strict=True))
    total = fold_group((c.unpack() for c in nodes if c is not None), combine)
    return None if total is None else _Packed(total)


def _copy(obj):
    """A node of a broadcast tree: the object fetched from the parent node, kept on this worker."""
    return obj


def wire_bytes(scheduler_address: str) -> tuple[int, int] | None:
    """Bytes this process sent and received so far on its TCP connections to ``scheduler_address``, as the kernel
    counts them (``TCP_INFO``: ``tcpi_bytes_acked``, ``tcpi_bytes_received``), or None when not measurable (not
    Linux, an ``inproc://`` scheduler, no such connection).

    A driver's client talks to the scheduler only (results are gathered and objects scattered through it), so these
    are the driver's bytes on the network. Connections closed meanwhile are not counted.
    """
    import socket
    import struct

    m = re.match(r"^(?:tcp|tls)://\[?([^\]]+?)\]?:(\d+)$", str(scheduler_address))
    if m is None or not hasattr(socket, "TCP_INFO") or not os.path.isdir("/proc/self/fd"):
        return None
    host, port = m.group(1), int(m.group(2))
    sent = received = found = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            fd = os.dup(int(name))
        except OSError:
            continue
        try:
            sock = socket.socket(fileno=fd)
        except OSError:
            os.close(fd)
            continue
        with sock:
            try:
                if sock.type != socket.SOCK_STREAM or sock.family not in (socket.AF_INET, socket.AF_INET6):
                    continue
                peer = sock.getpeername()
                if peer[1] != port or peer[0] not in (host, f"::ffff:{host}"):
                    continue
                info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
            except OSError:
                continue
            if len(info) < 136:
                continue
            acked, got = struct.unpack_from("QQ", info, 120)
            sent += acked
            received += got
            found += 1
    return (sent, received) if found else None


#: Statuses of a scattered object's future once its data is gone (scattered data is not recomputed: ship it again)
_GONE = ("cancelled", "error", "lost")


class _Handle:
    """A shared object: the driver's copy, its future on the cluster (re-scattered if its worker dies), and its
    broadcast tree: the copies (holder's address → future of a :func:`_copy` task on that worker) and, for every
    worker reached, the node it reads from."""

    __slots__ = ("obj", "future", "nbytes", "id", "gen", "order", "copies", "members", "source")

    def __init__(self, obj, future, nbytes: int, id: int):
        self.obj = obj
        self.future = future
        self.nbytes = nbytes
        self.id = id
        self.gen = 0
        self.order: list[str | None] = []  # node j of the tree: holder order[j]; node 0 holds the scattered object
        self.copies: dict[str, Any] = {}
        self.members: list[int] = []  # node j: workers it serves besides its holder
        self.source: dict[str, int] = {}  # worker → the node it reads from

    def futures(self) -> list:
        return ([self.future] if self.future is not None else []) + list(self.copies.values())

    def on(self, worker):
        """The future a task on ``worker`` reads the object from: its node's copy, else the scattered object."""
        j = self.source.get(worker, 0)
        return self.future if j == 0 else self.copies[self.order[j]]


class _Layout:
    """The data of a session's passes: its partitions and, for each, the handle of what its task reads (the dataset
    itself when the workers read the store, else the partition's rows)."""

    __slots__ = ("data", "partitions", "parts", "inline")

    def __init__(self, data, partitions, parts, inline: bool):
        self.data, self.partitions, self.parts, self.inline = data, partitions, parts, inline


class _DaskSession:
    def __init__(self, executor: DaskExecutor, conn: _Connection, data, partitions, threads: int, layout="thread"):
        self.executor = executor
        self.client = conn.client
        self.split_every = executor.split_every
        self.partitions_per = layout
        self.description = f"{conn.description}, {threads} worker thread(s)" + (
            ", one partition per worker" if layout == "worker" else ""
        )
        self.name = f"rffor-{uuid.uuid4().hex[:8]}"
        self.pass_seconds: dict[str, list[float]] = {}
        self.reruns = 0
        self.stats: list[PassStats] = []
        # task keys are unique per pass: a key reused while the scheduler still forgets the previous pass's (cancelled
        # at its end) gets the new task cancelled too ("reason: unknown"), seen with passes named alike
        self._passes = 0
        self._handles: list[_Handle] = []
        self._next_handle = 0
        self._sent = 0  # payload bytes shipped since the previous pass ended
        self._wire = wire_bytes(self.client.scheduler.address)
        self._threads: dict[str, int] = {}
        self._holders: dict[str, str] = {}  # key of a partition's scattered rows → its worker
        self._threads_at = -math.inf
        self._main = self._layout(data, partitions, "chunks")
        self._batch = self._shorten_client_batch(CLIENT_BATCH_SECONDS)

    def _shorten_client_batch(self, seconds: float) -> float | None:
        """Shorten the interval of the client's batched stream to the scheduler to ``seconds``; returns the interval
        to restore at :meth:`close` (None: nothing changed, e.g. another distributed without such a stream)."""
        comm = getattr(self.client, "scheduler_comm", None)
        previous = getattr(comm, "interval", None)
        if isinstance(previous, bool) or not isinstance(previous, int | float) or previous <= seconds:
            return None
        comm.interval = seconds
        return float(previous)

    def _nthreads(self, fresh: bool = False) -> dict[str, int]:
        """The workers' thread counts (address → threads), asked of the scheduler at most every
        :data:`PLACEMENT_SECONDS` unless ``fresh``: for placement and fusing, which never change a result."""
        now = time.monotonic()
        if fresh or now - self._threads_at > PLACEMENT_SECONDS:
            self._threads = {w: int(t) for w, t in self.client.nthreads().items()}
            self._threads_at = now
        return self._threads

    @property
    def partitions(self) -> list[list[int]]:
        return self._main.partitions

    def _layout(self, data, partitions, what: str) -> _Layout:
        """The layout of passes over ``data`` in ``partitions``: the data of partition p as its tasks receive it (the
        dataset itself, a small description whose tasks read the store where they run, broadcast like any shared
        object, or, for in-memory data, that partition's rows scattered once); warns if workers would stay idle."""
        inline = bool(data.workers_can_read)
        parts = [self.share(data)] * len(partitions) if inline else [self.share(data.subset(g)) for g in partitions]
        with contextlib.suppress(Exception):
            nthreads = self._nthreads(fresh=True)
            text = idle_message(
                data.n_chunks, what, len(partitions), len(nthreads), sum(nthreads.values()), self.partitions_per
            )
            if text is not None:
                import warnings

                warnings.warn(text, IdleWorkersWarning, stacklevel=5)
        return _Layout(data, partitions, parts, inline)

    @contextlib.contextmanager
    def over(self, data) -> Iterator[_SessionView]:
        """A session over another chunked dataset (e.g. :class:`rffor.chunked.RowPieces` of a sample of this one's
        rows) in ``data.partition(P)`` partitions, P this session's: the same connection, shared objects, tree and
        statistics; what its tasks read is shipped once, released at the end."""
        layout = self._layout(data, data.partition(len(self.partitions)), "row pieces")
        try:
            yield _SessionView(self, layout)
        finally:
            for h in {id(h): h for h in layout.parts}.values():
                self.release(h)

    # ----------------------------------------------------------------------------------------- shipping
    def _scatter(self, handle: _Handle) -> None:
        packed = _Packed(handle.obj)
        handle.nbytes = len(packed.blob)
        handle.future = self.client.scatter(packed, hash=False)
        self._sent += handle.nbytes

    def share(self, obj) -> _Handle:
        handle = _Handle(obj, None, 0, self._next_handle)
        self._next_handle += 1
        try:
            self._scatter(handle)
        except _lost_exceptions() as exc:
            # a worker died while receiving it (e.g. killed right after the previous pass): the next pass's retry
            # helper scatters it again once a worker is there, or reports a lost scheduler
            if self._scheduler_lost():
                raise self._lost_scheduler(exc) from exc
            handle.future = None
        self._handles.append(handle)
        return handle

    def release(self, handle: _Handle) -> None:
        # dropping the futures releases the object and its copies (the client tells the scheduler without waiting
        # for an answer); ``client.cancel`` would cost a scheduler round trip per pass
        handle.future, handle.copies = None, {}
        with contextlib.suppress(ValueError):
            self._handles.remove(handle)

    def _drop_copies(self, handle: _Handle) -> None:
        if handle.copies:
            with contextlib.suppress(Exception):
                self.client.cancel(list(handle.copies.values()))
        handle.copies = {}
        handle.order = []
        handle.members = []
        handle.source = {}
        handle.gen += 1

    def _refresh(self) -> None:
        """Scatter again every shared object whose copy on the cluster was lost with its worker."""
        for h in self._handles:
            if h.future is None or h.future.status != "finished":
                if h.future is not None:
                    with contextlib.suppress(Exception):
                        self.client.cancel([h.future])
                self._drop_copies(h)
                self._scatter(h)

    def _broadcast(self, handles: list[_Handle], workers: list[str]) -> int:
        """Make sure every worker of ``workers`` can read each handle's object from a node of its broadcast tree.

        Node 0 of a handle's tree is its scattered object (on the worker that holds it), node j >= 1 a
        :func:`_copy` task on holder ``order[j]`` fetching from node (j − 1) // b, b = ``broadcast_fanout``. Each
        node also serves f − 1 workers that hold no copy (their tasks fetch from it), f =
        :func:`broadcast_serves` of the object's size: a broadcast to W workers makes ceil(W / f) − 1 copy tasks
        (:func:`broadcast_copies`), and no worker sends the object more than b + f − 1 times, with no round trip
        to the driver. With f = 1 (``broadcast_copy_bytes=0``, or objects large against the cost of a task) every
        worker holds a copy. When the scattered object can serve all W − 1 others itself (W − 1 <= b + f − 1) there
        are no copy tasks. Copies are tasks: one lost with its worker is recomputed by the scheduler from its
        parent; if the scattered object itself is lost, the pass fails as lost and reruns with the object
        scattered again (:meth:`_refresh`) and a new tree. Trees of objects shared for the whole fit are kept and
        extended to new workers. Returns the copy tasks submitted.
        """
        b = self.executor.broadcast_fanout
        wanted = sorted(set(workers))
        todo = []
        for h in handles:
            if any(f.status in ("cancelled", "error") for f in h.copies.values()):
                self._drop_copies(h)
            missing = [w for w in wanted if w not in h.source]
            if h.future is not None and missing:
                todo.append((h, missing))
        if not todo:
            return 0
        holders: dict = {}
        # where a new object sits matters only if it cannot serve every worker itself (one scheduler round trip)
        fresh = [
            h.future
            for h, missing in todo
            if not h.order
            and len(missing) > b + broadcast_serves(len(wanted), h.nbytes, self.executor.broadcast_copy_bytes) - 1
        ]
        if fresh:
            with contextlib.suppress(Exception):
                holders = self.client.who_has(fresh)
        made = 0
        for h, missing in todo:
            f = broadcast_serves(len(wanted), h.nbytes, self.executor.broadcast_copy_bytes)
            if not h.order and len(missing) <= b + f - 1:  # the scattered object serves them all, wherever it is
                h.order, h.members = [None], [len(missing)]
                h.source.update((w, 0) for w in missing)
                continue
            if not h.order:
                held = sorted(holders.get(h.future.key, ()))
                h.order, h.members = [held[0] if held else None], [0]
                if h.order[0] is not None:
                    h.source[h.order[0]] = 0
                missing = [w for w in missing if w != h.order[0]]
                if len(missing) <= b + f - 1:  # the scattered object serves them all
                    h.source.update((w, 0) for w in missing)
                    h.members[0] += len(missing)
                    continue
            for w in missing:
                j = next((j for j, m in enumerate(h.members) if m < f - 1), None)
                if j is not None:  # served by node j without a copy
                    h.members[j] += 1
                    h.source[w] = j
                    continue
                j = len(h.order)
                h.order.append(w)
                h.members.append(0)
                h.source[w] = j
                parent = (j - 1) // b
                source = h.future if parent == 0 else h.copies[h.order[parent]]
                h.copies[w] = self.client.submit(
                    _copy,
                    source,
                    key=f"{self.name}-share{h.id}.{h.gen}-w{j}",
                    pure=False,
                    workers=[w],
                    allow_other_workers=True,
                )
                made += 1
        return made

    def close(self) -> None:
        futures = [f for h in self._handles for f in h.futures()]
        self._handles = []
        if futures:
            with contextlib.suppress(Exception):
                self.client.cancel(futures)
        if self._batch is not None:
            comm = getattr(self.client, "scheduler_comm", None)
            if comm is not None:
                comm.interval = self._batch

    # ----------------------------------------------------------------------------------------- passes
    def map(self, fn, *args, chunks=None, label: str = "pass", _layout=None) -> list:
        layout = _layout or self._main
        return self._run(fn, args, select_chunks(layout.partitions, chunks), label, None, layout)

    def reduce(
        self,
        fn,
        *args,
        chunks=None,
        label: str = "sums",
        split_every: int | None = None,
        combine: Callable | None = None,
        _layout=None,
    ):
        """The results of :meth:`map` merged on the workers by the tree of :func:`rffor.executor.tree_fold`.

        Merge tasks depend on their children (no round trip to the driver between levels), are placed by soft hints
        next to most of their inputs, and only the root comes back to the driver. A worker lost during the pass
        (leaves or merges) reruns the pass from the same inputs, with the same tree: the same bits.
        """
        s = self.split_every if split_every is None else check_split_every(split_every)
        layout = _layout or self._main
        return self._run(fn, args, select_chunks(layout.partitions, chunks), label, (s, combine), layout)

    def _scheduler_lost(self) -> bool:
        return self.client.status != "running"

    def _run(self, fn, args, selected: list[list[int]], label: str, tree, layout: _Layout) -> Any:
        """One pass: a task per partition with chunks to process (and the merge tree of a reduce), rerun as a whole
        if tasks are lost."""
        lost = _lost_exceptions()
        last: BaseException | None = None
        tic = time.perf_counter()
        for attempt in range(self.executor.round_retries + 1):
            if attempt:
                self.reruns += 1
                self.executor._say(
                    f"{label}: tasks lost with a worker ({type(last).__name__}: {last}); rerunning it from the same "
                    f"inputs (attempt {attempt + 1}/{self.executor.round_retries + 1})"
                )
            if attempt or any(h.future is None or h.future.status in _GONE for h in self._handles):
                try:
                    self.client.wait_for_workers(1, timeout=self.executor._timeout(self.pass_seconds))
                    self._nthreads(fresh=True)
                    self._refresh()
                except lost + (TimeoutError,) as exc:
                    if self._scheduler_lost():
                        raise self._lost_scheduler(exc) from exc
                    last = exc
                    continue
            try:
                value, stats = self._attempt(fn, args, selected, label, attempt, tree, layout)
            except RoundTimeoutError:
                raise
            except lost as exc:
                if self._scheduler_lost():
                    raise self._lost_scheduler(exc) from exc
                last = exc
                continue
            stats.attempts = attempt + 1
            stats.seconds = time.perf_counter() - tic
            stats.payload_sent = self._sent
            self._sent = 0
            wire = wire_bytes(self.client.scheduler.address)
            if wire is not None and self._wire is not None:
                stats.wire_sent, stats.wire_received = wire[0] - self._wire[0], wire[1] - self._wire[1]
            self._wire = wire
            self.stats.append(stats)
            return value
        raise RoundFailedError(
            f"{label} lost its tasks {self.executor.round_retries + 1} times (last: {type(last).__name__}: {last}); "
            "the cluster keeps losing workers"
        ) from last

    def _lost_scheduler(self, exc: BaseException) -> SchedulerLostError:
        return SchedulerLostError(
            f"lost the connection to the Dask scheduler ({self.description}): {type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:200]}"
        )

    def _leaf_workers(self, selected, layout: _Layout) -> list[str | None]:
        """Where each partition's task should run (placement only, never results).

        Store-backed partitions: the worker threads in contiguous blocks (partition p on slot p·T/P of the T
        threads), so that the partitions a merge group covers mostly share a worker and merge without transfers
        (and a partition meets its feature cache again every pass). A shared object lives on a single worker, and
        locality alone would queue every task on it (measured: 2 workers, the second task started when the first
        ended), hence explicit soft hints. In-memory partitions: the worker holding their scattered rows.
        """
        n = len(selected)
        if layout.inline:
            slots = self._worker_slots()
            return [slots[p * len(slots) // n] if slots else None for p in range(n)]
        parts = layout.parts
        # scattered rows stay where they were put (re-scattered under a new key if lost): asked once per key
        unknown = [parts[p].future for p in range(n) if parts[p].future is not None]
        unknown = [f for f in unknown if f.key not in self._holders]
        if unknown:
            with contextlib.suppress(Exception):
                held = self.client.who_has(unknown)
                self._holders.update((f.key, sorted(held[f.key])[0]) for f in unknown if held.get(f.key))
        return [self._holders.get(parts[p].future.key) if parts[p].future is not None else None for p in range(n)]

    def _attempt(self, fn, args, selected, label: str, attempt: int, tree, layout: _Layout) -> tuple[Any, PassStats]:
        from distributed import wait

        client = self.client
        tic = time.perf_counter()
        n = len(selected)
        name = f"{self.name}-{self._passes}-{label.replace(' ', '-')}"
        where = self._leaf_workers(selected, layout)
        shared = [a for a in args if isinstance(a, _Handle)] + ([layout.parts[0]] if layout.inline and n else [])
        pooled = tree is not None and self.partitions_per == "worker" and is_chunkwise(fn)
        fused = tree is not None and not pooled and layout.inline and self._fused_groups(tree[0])
        copies = self._broadcast(shared, [w for p, w in enumerate(where) if selected[p] and w is not None])

        def on(handle: _Handle, worker):
            return handle.on(worker)

        futures: dict[int, Any] = {}
        names: dict[int, str] = {}
        merges: dict[tuple[int, int], Any] = {}
        n_merges = depth = 0
        levels = tree_levels(n, tree[0]) if tree is not None else []
        try:
            if fused:  # the tree's first level as tasks: each runs `fused` groups of partitions on a worker's threads
                s, combine = tree
                first = levels[0] if levels else [range(n)]
                nodes = []
                for b0 in range(0, len(first), fused):
                    block = first[b0 : b0 + fused]
                    lives = [[p for p in members if selected[p]] for members in block]
                    live = [p for group in lives for p in group]
                    if not live:
                        nodes.extend((None, None, None) for _ in block)
                        continue
                    w = where[live[0]]
                    hint = {"workers": [w], "allow_other_workers": True} if w is not None else {}
                    futures[live[0]] = f = client.submit(
                        _group_leaf,
                        fn,
                        combine,
                        [len(group) for group in lives],
                        [on(layout.parts[p], w) for p in live],
                        live,
                        [selected[p] for p in live],
                        *[on(a, w) if isinstance(a, _Handle) else a for a in args],
                        key=f"{name}-g{b0}-a{attempt}",
                        pure=False,
                        **hint,
                    )
                    names[live[0]] = f"partitions {live[0]}-{live[-1]}"
                    n_merges += sum(max(0, len(group) - 1) for group in lives)
                    nodes.extend((f, w, k) if group else (None, None, None) for k, group in enumerate(lives))
                levels, first_level = levels[1:], 2
            for p, ids in enumerate(selected):
                if not ids or fused:
                    continue
                w = where[p]
                hint = {"workers": [w], "allow_other_workers": True} if w is not None else {}
                futures[p] = client.submit(
                    *((_pooled_leaf, fn, tree[1], tree[0]) if pooled else (_task if tree is None else _leaf, fn)),
                    on(layout.parts[p], w),
                    p,
                    ids,
                    *[on(a, w) if isinstance(a, _Handle) else a for a in args],
                    key=f"{name}-p{p}-a{attempt}",
                    pure=False,
                    **hint,
                )
            root = None  # (future, worker, index of the node in a fused task's tuple or None)
            if tree is not None:
                s, combine = tree
                depth = len(tree_levels(n, s))
                if not fused:
                    nodes, first_level = [(futures.get(p), where[p], None) for p in range(n)], 1
                for level, groups in enumerate(levels, start=first_level):
                    up = []
                    for g, members in enumerate(groups):
                        children = [nodes[i] for i in members if nodes[i][0] is not None]
                        if len(children) <= 1:
                            up.append(children[0] if children else (None, None, None))
                            continue
                        w = _most_common([c[1] for c in children])
                        hint = {"workers": [w], "allow_other_workers": True} if w is not None else {}
                        f = client.submit(
                            _merge,
                            combine,
                            [c[2] for c in children],
                            *[c[0] for c in children],
                            key=f"{name}-t{level}.{g}-a{attempt}",
                            pure=False,
                            **hint,
                        )
                        merges[(level, g)] = f
                        n_merges += len(children) - 1
                        up.append((f, w, None))
                    nodes = up
                root = nodes[0] if nodes else None
            timeout = self.executor._timeout(self.pass_seconds, label)
            everything = list(futures.values()) + list(merges.values())
            try:
                with client.as_current():  # distributed.wait uses the current client, not necessarily ours
                    wait(everything, timeout=timeout)
            except TimeoutError:
                if self._scheduler_lost():
                    raise _CFCancelledError("the scheduler connection was lost") from None
                raise RoundTimeoutError(self._hang_report(label, futures, merges, timeout, names)) from None
            for f in everything:  # leaves first: a lost task is retried; a task's own error fails the fit
                if f.status == "cancelled":
                    raise _CFCancelledError(f"task {f.key} was cancelled (its worker or its input was lost)")
                if f.status == "error":
                    f.result()  # raises the task's exception with its traceback
            stats = PassStats(
                label,
                n,
                sum(1 for ids in selected if ids),
                len(futures) + len(merges) + copies,
                depth=depth,
                merges=n_merges,
                broadcast_copies=copies,
            )
            if tree is None:
                values = dict(zip(futures, client.gather(list(futures.values())), strict=True))
                stats.payload_received = sum(_nbytes(v) for v in values.values())
                result: Any = [values.get(p) for p in range(n)]
            else:
                packed = _pick(client.gather(root[0]), root[2]) if root is not None and root[0] is not None else None
                stats.payload_received = len(packed.blob) if packed is not None else 0
                result = packed.unpack() if packed is not None else None
        except BaseException:
            # stop what still runs; after a pass that completed, dropping the futures (on return) frees their
            # results without a scheduler round trip
            with contextlib.suppress(Exception):
                client.cancel(list(futures.values()) + list(merges.values()))
            raise
        self._passes += 1
        self.pass_seconds.setdefault(_pass_kind(label), []).append(time.perf_counter() - tic)
        return result, stats

    def _worker_slots(self) -> list[str]:
        """Worker addresses, each repeated once per thread (once per worker with ``partitions_per="worker"``), in a
        fixed order (placement only, never results)."""
        with contextlib.suppress(Exception):
            nthreads = self._nthreads()
            per = (lambda w: int(nthreads[w])) if self.partitions_per == "thread" else (lambda w: 1)
            return [w for w in sorted(nthreads) for _ in range(per(w))]
        return []

    def _fused_groups(self, s: int) -> int:
        """First-level groups of the merge tree per leaf task (0: a task per partition).

        With ``partitions_per="thread"`` on workers whose threads are a multiple of the fan-in s, one task runs
        k = T / s consecutive groups of s partitions (T partitions, T the fewest threads of a worker) on its
        worker's threads and returns the k groups' partials, each folded in partition order as the tree's first
        level would fold it: a pass has P / T leaf tasks instead of P, the same tree above them, the same bits.
        """
        if self.partitions_per != "thread":
            return 0
        with contextlib.suppress(Exception):
            counts = list(self._nthreads().values())
            if counts and all(t >= s and t % s == 0 for t in counts):
                return min(counts) // s
        return 0

    def _hang_report(self, label: str, futures: dict, merges: dict, timeout: float, names=None) -> str:
        where = {}
        with contextlib.suppress(Exception):
            for worker, keys in self.client.processing().items():
                for key in keys:
                    where[str(key)] = worker
        parts = []
        names = names or {}
        for what, f in [(names.get(p, f"partition {p}"), f) for p, f in futures.items()] + [
            (f"merge {level}.{g}", f) for (level, g), f in merges.items()
        ]:
            if f.status != "pending":
                continue
            w = where.get(str(f.key))
            parts.append(f"{what} " + (f"running on {w}" if w else "waiting for a worker"))
        n_workers = "?"
        with contextlib.suppress(Exception):
            n_workers = len(self.client.scheduler_info()["workers"])
        return (
            f"{label} did not finish within {timeout:g} s: {', '.join(parts) or 'no task pending'} "
            f"({n_workers} worker(s) connected). A task is hung or a worker is unresponsive; the last good "
            f"checkpoint is intact (resume=True continues from it). Raise the limit with "
            f"dask.config.set({{'rffor.round-timeout': '1h'}}) if rounds are legitimately this long."
        )


class _SessionView:
    """A session over another dataset (:meth:`_DaskSession.over`): its own partitions, everything else the
    session's."""

    def __init__(self, session: _DaskSession, layout: _Layout):
        self._session, self._layout = session, layout
        self.partitions = layout.partitions
        self.description = session.description
        self.split_every = session.split_every
        self.partitions_per = session.partitions_per

    @property
    def stats(self) -> list[PassStats]:
        return self._session.stats

    def share(self, obj) -> _Handle:
        return self._session.share(obj)

    def release(self, handle: _Handle) -> None:
        self._session.release(handle)

    def over(self, data):
        return self._session.over(data)

    def map(self, fn, *args, chunks=None, label: str = "pass") -> list:
        return self._session.map(fn, *args, chunks=chunks, label=label, _layout=self._layout)

    def reduce(self, fn, *args, chunks=None, label: str = "sums", split_every=None, combine=None):
        return self._session.reduce(
            fn, *args, chunks=chunks, label=label, split_every=split_every, combine=combine, _layout=self._layout
        )


def _most_common(workers: list) -> Any:
    """The worker most of a merge's inputs were placed on (ties: the earliest child's)."""
    counts: dict = {}
    for w in workers:
        counts[w] = counts.get(w, 0) + 1
    return max(workers, key=lambda w: counts[w]) if workers else None


def _nbytes(value) -> int:
    from dask.sizeof import sizeof

    return 0 if value is None else int(sizeof(value))
