"""Distributed training on Dask: rounds of local DSGD with periodic parameter averaging (MATH.md §5).

The driver loop is the one of :func:`rffor.solvers.rff.run_rounds`; this module supplies where the partition tasks
run, the map-reduce of the square-loss closed form, checkpoints, progress and the cluster's life cycle.

The round protocol
------------------
The rows are split into P logical partitions of whole Zarr chunks (:meth:`rffor.data.Dataset.partition`). Each
round the driver

1. scatters the current state (B, its Polyak–Ruppert average and the step counter) once
   (``client.scatter(state, hash=False)``): one copy on one worker, which the other workers fetch peer to peer
   when their task starts. (``broadcast=True`` replicates it from the scheduler instead, but a worker killed during
   the replication made distributed 2026.8 retry the dead address until the key is released: the round hung.);
2. submits one task per partition, ``plan.run_partition(state, round, p)``, spread over the worker threads by soft
   placement hints (a task whose worker is gone runs elsewhere): the task opens the Zarr store on the worker, reads
   only its partition's chunks and runs K local DSGD steps seeded by ``(random_state, round, p)``
   (:func:`rffor.solvers.dsgd.partition_steps`); input-feature frequencies are regenerated from their seed on the
   worker, never shipped;
3. gathers the P results and averages them in partition order (:func:`rffor.solvers.rff.average_states`);
4. writes a checkpoint atomically (temporary file, then ``os.replace``).

The square-loss closed form is one map-reduce on the cluster (:func:`dask_feature_sums`); the warm start of the
other losses (the closed form on at most ``init_max_rows`` rows) is computed by the driver, exactly as in a
single-process fit. Only the state crosses the network (and, for in-memory arrays, each partition's rows once per
fit). Because the computation is defined by partitions and seeds, not by workers, a task rerun on another worker,
a round rerun after a lost worker, or a fit resumed from a checkpoint gives the same bits as an undisturbed run:
P partitions on a cluster equal the serial P-partition loop (:func:`rffor.solvers.rff.serial_map_partitions`), and
P = 1 on a cluster equals the single-process fit. Bit-for-bit equality assumes every process runs NumPy with the
same number of BLAS threads: Dask's Nanny starts workers with one (``OPENBLAS_NUM_THREADS=1``); a single-process
fit compared with a cluster fit should run under ``threadpoolctl.threadpool_limits(1)``. With more BLAS threads the
results agree to rounding only (measured: largest difference 2e-9 on a float32 model).

Where it runs
-------------
:func:`use_dask` is the rule the estimator follows:

- ``client=`` or ``scheduler_address=`` given: that cluster (``security=`` carries TLS settings);
- otherwise a :class:`rffor.data.Dataset` (out of core) of more than one chunk, or ``n_partitions > 1``: an
  embedded ``LocalCluster`` sized to the machine (one single-threaded worker process per CPU, at most one per chunk
  or partition, bound to 127.0.0.1, no dashboard), started for the fit and closed after it. Scripts that fit this
  way need an ``if __name__ == "__main__":`` guard, because worker processes import the main module;
- otherwise (in-memory arrays, one partition; a Dataset with ``n_partitions=1`` or a single chunk): in process,
  no Dask.

P (``n_partitions``) defaults to the number of worker threads of the cluster at the start of the fit (the number of
workers with the default of one thread each), or to the P stored in the checkpoint when resuming.

Resilience
----------
- A worker that dies mid-round: the scheduler reruns its task elsewhere; if the round's tasks or the scattered state
  are lost anyway (``KilledWorker``, ``FutureCancelledError``, lost data), the round is rerun from the same state,
  up to ``round_retries`` times. The result is bit-identical to the undisturbed run.
- An unreachable scheduler raises :class:`SchedulerUnreachableError` after ``connect_timeout``.
- A round that does not finish within ``round_timeout`` raises :class:`RoundTimeoutError` naming the partitions
  still pending and where they are.
- A task that raises (bad data, out of memory) fails the fit with that exception; the checkpoint of the last good
  round is left intact, and ``resume=True`` continues from it.

Configuration
-------------
rffor ships ``rffor/dask.yaml`` and loads it as Dask *defaults* before starting or joining a cluster
(:func:`configure_dask`): it sets ``MALLOC_MMAP_THRESHOLD_`` in the Nanny's worker environment (without it NumPy
loops run about 1.9x slower in Nanny workers, see DASK_NOTES.md) and the ``rffor.*`` keys ``connect-timeout``,
``round-timeout``, ``round-retries`` and ``local-cluster.*``, which ``dask.config.set`` or a Dask YAML file override.
Clusters started outside rffor should use ``cluster/dask.yaml``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import math
import numbers
import operator
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import CancelledError as _CFCancelledError
from dataclasses import dataclass
from typing import Any

import numpy as np

from .solvers.dsgd import SGDState
from .solvers.rff import (
    FeatureSums,
    RFFResult,
    RoundPlan,
    as_data,
    closed_form_from_sums,
    feature_sums,
    fit_rff,
    output_gram,
    resolve_random_state,
    square_objective_from_sums,
)

__all__ = [
    "CHECKPOINT_FORMAT",
    "Checkpoint",
    "DaskMapPartitions",
    "RoundFailedError",
    "RoundProgress",
    "RoundTimeoutError",
    "SchedulerUnreachableError",
    "configure_dask",
    "connect",
    "dask_config_path",
    "dask_feature_sums",
    "fit",
    "load_checkpoint",
    "save_checkpoint",
    "use_dask",
]

logger = logging.getLogger("rffor.distributed")

#: version of the checkpoint file layout written by :func:`save_checkpoint`
CHECKPOINT_FORMAT = 1


# ---------------------------------------------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------------------------------------------


class SchedulerUnreachableError(ConnectionError):
    """The Dask scheduler could not be reached (or refused the connection) within the connect timeout."""


class RoundTimeoutError(TimeoutError):
    """A round of partition tasks did not finish within the round timeout (a hung worker or task)."""


class RoundFailedError(RuntimeError):
    """A round kept losing its tasks to dying workers after every allowed rerun."""


# ---------------------------------------------------------------------------------------------------------------
# Dask configuration
# ---------------------------------------------------------------------------------------------------------------


def dask_config_path() -> str:
    """Path of the Dask configuration shipped with rffor (``rffor/dask.yaml``)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "dask.yaml")


_CONFIGURED = False


def configure_dask() -> dict:
    """Load rffor's Dask configuration as Dask defaults (idempotent).

    Called before rffor starts a LocalCluster or connects to a scheduler. Defaults never override what the user set
    (Dask YAML files, ``DASK_*`` variables, ``dask.config.set``). The worker-environment fix
    (``distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_``) takes effect for Nanny workers started by this
    process afterwards, i.e. the embedded LocalCluster.

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


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


# ---------------------------------------------------------------------------------------------------------------
# where it runs
# ---------------------------------------------------------------------------------------------------------------


def _is_zarr_dataset(data) -> bool:
    from .data import Dataset

    return isinstance(data, Dataset)


def use_dask(data, *, client=None, scheduler_address=None, n_partitions=None) -> bool:
    """Whether a random-feature fit runs on Dask (the estimator's rule).

    Parameters
    ----------
    data : Dataset, ArrayData or tuple (X, Y[, theta])
    client : distributed.Client or None
    scheduler_address : str or None
    n_partitions : int or None

    Returns
    -------
    bool
        True when ``client`` or ``scheduler_address`` is given; else True for a Zarr :class:`rffor.data.Dataset`
        of more than one chunk unless ``n_partitions == 1``, and for any data when ``n_partitions > 1`` (embedded
        LocalCluster); False otherwise (single process).
    """
    if client is not None or scheduler_address is not None:
        return True
    if n_partitions is not None and n_partitions > 1:
        return True
    return _is_zarr_dataset(data) and n_partitions is None and data.n_chunks > 1


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
        yield _Connection(client, f"client {client.scheduler.address}")
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
            client.close()
        return

    import dask.config
    from distributed import LocalCluster

    cfg = dask.config.get("rffor.local-cluster", {}) or {}
    if n_workers is None:
        n_workers = cfg.get("n-workers", "auto")
        n_workers = _usable_cpus() if n_workers in (None, "auto") else int(n_workers)
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


# ---------------------------------------------------------------------------------------------------------------
# checkpoints
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class Checkpoint:
    """The state after a completed round (what :func:`load_checkpoint` returns).

    Attributes
    ----------
    state : SGDState
    round : int
        Last completed round (0-based); a resumed fit starts at ``round + 1``.
    history : list of dict
        Per-round records up to ``round``.
    info : dict
        What the checkpoint belongs to: ``random_state``, ``n_partitions`` and the ``fingerprint`` of the fit's
        settings and data (compared on resume).
    """

    state: SGDState
    round: int
    history: list[dict]
    info: dict


def save_checkpoint(path, state: SGDState, round: int, history: Sequence[dict], info: dict) -> str:
    """Write a checkpoint atomically: a temporary file in the same directory, fsync, then ``os.replace``.

    The file is an uncompressed ``.npz`` (NumPy arrays ``B``, ``B_avg``, ``t``, ``round`` and a JSON string
    ``meta``), readable without pickle. A crash at any moment leaves either the previous checkpoint or the new one.

    Parameters
    ----------
    path : str or os.PathLike
    state : SGDState
    round : int
        The round just completed.
    history : sequence of dict
    info : dict
        JSON-serialisable description of the fit (see :class:`Checkpoint`).

    Returns
    -------
    path : str
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    meta = {"format": CHECKPOINT_FORMAT, "info": info, "history": list(history)}
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(
                f,
                B=np.ascontiguousarray(state.B),
                B_avg=np.ascontiguousarray(state.B_avg),
                t=np.array(int(state.t), dtype=np.int64),
                round=np.array(int(round), dtype=np.int64),
                meta=np.array(json.dumps(meta, allow_nan=True)),
            )
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename durable (best effort; not every FS allows it)
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    return path


def load_checkpoint(path) -> Checkpoint:
    """Read a checkpoint written by :func:`save_checkpoint` (no pickle).

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    Checkpoint

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    ValueError
        The file is not an rffor checkpoint of a supported format.
    """
    path = os.fspath(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            files = set(getattr(z, "files", ()))
            if {"B", "B_avg", "t", "round", "meta"} <= files:
                meta = json.loads(str(z["meta"][()]))
                B, B_avg = z["B"], z["B_avg"]
                t, r = int(z["t"][()]), int(z["round"][()])
    except FileNotFoundError:
        raise
    except (OSError, EOFError, KeyError, ValueError) as exc:  # not an npz, truncated, pickled objects
        raise ValueError(f"{path!r} is not a readable rffor checkpoint: {exc}") from exc
    missing = {"B", "B_avg", "t", "round", "meta"} - files
    if missing:
        raise ValueError(f"{path!r} is not an rffor checkpoint: arrays {sorted(missing)} missing")
    if not isinstance(meta, dict) or meta.get("format") != CHECKPOINT_FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else None
        raise ValueError(f"{path!r} has checkpoint format {found!r}; this rffor reads format {CHECKPOINT_FORMAT}")
    return Checkpoint(SGDState(B=B, B_avg=B_avg, t=t), r, list(meta.get("history", [])), dict(meta.get("info", {})))


def _fingerprint(data, fit_kwargs: dict, n_partitions: int, random_state: int) -> dict:
    """What a checkpoint must agree with to be resumed: the data's shape and grid, every setting of the fit."""
    theta = np.ascontiguousarray(np.asarray(data.theta, dtype=np.float64))
    settings = {}
    for key, value in sorted(fit_kwargs.items()):
        if key in ("verbose", "random_state"):
            continue
        if value is None or isinstance(value, (bool, int, float, str)):
            settings[key] = value
        else:
            settings[key] = repr(value)
    return {
        "data": {
            "n": int(data.n),
            "d": int(data.d),
            "m": int(data.m),
            "chunk_rows": int(data.chunk_rows),
            "theta_sha256": hashlib.sha256(theta.tobytes()).hexdigest(),
        },
        "settings": settings,
        "n_partitions": int(n_partitions),
        "random_state": int(random_state),
    }


def _fingerprint_diff(a: dict, b: dict, prefix: str = "") -> list[str]:
    out = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            out += _fingerprint_diff(va, vb, f"{prefix}{key}.")
        elif va != vb:
            out.append(f"{prefix}{key}: checkpoint {va!r}, now {vb!r}")
    return out


# ---------------------------------------------------------------------------------------------------------------
# progress
# ---------------------------------------------------------------------------------------------------------------


class RoundProgress:
    """Per-round progress: round, loss, samples/s and elapsed time.

    A one-line bar redrawn in place on an interactive stream (a terminal), one plain line per round otherwise (logs,
    CI, notebooks' captured stderr). Every round is also logged at INFO level to the ``rffor.distributed`` logger.

    Parameters
    ----------
    n_rounds : int
    stream : file-like, default sys.stderr
        None: log only.
    interactive : bool, optional
        Default ``stream.isatty()``.
    width : int, default 24
        Characters of the bar.
    """

    def __init__(self, n_rounds: int, *, stream=sys.stderr, interactive: bool | None = None, width: int = 24):
        self.n_rounds = int(n_rounds)
        self.stream = stream
        if interactive is None:
            isatty = getattr(stream, "isatty", None)
            interactive = bool(isatty()) if callable(isatty) else False
        self.interactive = interactive and stream is not None
        self.width = width
        self._open_line = False

    def line(self, record: dict, elapsed: float) -> str:
        """The text of one round's report."""
        r = int(record["round"]) + 1
        loss = record.get("loss", float("nan"))
        sps = record.get("samples_per_s", float("nan"))
        sps_text = f"{sps:,.0f} samples/s" if math.isfinite(sps) else "- samples/s"
        return f"round {r}/{self.n_rounds}  loss {loss:.5g}  {sps_text}  elapsed {_format_seconds(elapsed)}"

    def update(self, record: dict, elapsed: float) -> None:
        """Report a completed round (a record of :func:`rffor.solvers.rff.run_rounds`)."""
        text = self.line(record, elapsed)
        logger.info("%s", text)
        if self.stream is None:
            return
        if self.interactive:
            done = min(self.n_rounds, int(record["round"]) + 1)
            filled = int(round(self.width * done / max(1, self.n_rounds)))
            bar = "#" * filled + "." * (self.width - filled)
            self.stream.write(f"\r[rffor] [{bar}] {text}\x1b[K")
            self._open_line = True
            if done >= self.n_rounds:
                self.close()
        else:
            self.stream.write(f"[rffor] {text}\n")
        self.stream.flush()

    def message(self, text: str) -> None:
        """A one-off message (start, resume, retries), on its own line."""
        logger.info("%s", text)
        if self.stream is None:
            return
        self.close()
        self.stream.write(f"[rffor] {text}\n")
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line (interactive mode)."""
        if self._open_line and self.stream is not None:
            self.stream.write("\n")
            self.stream.flush()
        self._open_line = False


def _format_seconds(s: float) -> str:
    if s < 60:
        return f"{s:.1f}s"
    m, s = divmod(int(round(s)), 60)
    return f"{m}m{s:02d}s" if m < 60 else f"{m // 60}h{m % 60:02d}m{s:02d}s"


class _Reporter:
    """Messages to a RoundProgress when verbose, to the logger only otherwise."""

    def __init__(self, verbose: int):
        self.verbose = verbose
        self.progress: RoundProgress | None = None

    def message(self, text: str) -> None:
        if self.progress is not None:
            self.progress.message(text)
        elif self.verbose:
            sys.stderr.write(f"[rffor] {text}\n")
            sys.stderr.flush()
        else:
            logger.info("%s", text)

    def start_rounds(self, n_rounds: int) -> RoundProgress:
        if self.progress is None:
            self.progress = RoundProgress(n_rounds, stream=sys.stderr if self.verbose else None)
        return self.progress

    def close(self) -> None:
        if self.progress is not None:
            self.progress.close()


# ---------------------------------------------------------------------------------------------------------------
# tasks (module-level functions: importable on every worker)
# ---------------------------------------------------------------------------------------------------------------


class _ChunkSubset:
    """Some chunks of in-memory data with the chunk interface of the whole (global ids, ``n``, ``chunk_rows``).

    What is scattered to the cluster for one partition (or chunk group) of in-memory arrays: only its rows travel.
    """

    def __init__(self, data, chunk_ids: Sequence[int]):
        self.n, self.d, self.m = int(data.n), int(data.d), int(data.m)
        self.chunk_rows = int(data.chunk_rows)
        self.theta = np.asarray(data.theta, dtype=np.float64)
        self._chunks = {int(i): tuple(np.ascontiguousarray(a) for a in data.chunk(int(i))) for i in chunk_ids}

    @property
    def n_chunks(self) -> int:
        return -(-self.n // self.chunk_rows)

    def chunk(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        try:
            return self._chunks[int(i)]
        except KeyError:
            raise IndexError(f"chunk {i} is not part of this partition ({sorted(self._chunks)})") from None

    def iter_chunks(self, chunk_ids=None, **_):
        ids = sorted(self._chunks) if chunk_ids is None else chunk_ids
        for i in ids:
            yield (int(i), *self.chunk(int(i)))


def _partition_task(plan: RoundPlan, data, state: SGDState, round: int, partition: int):
    """One partition of one round on a worker (``data``: that partition's rows, or None when in ``plan``)."""
    if data is not None:
        plan = dataclasses.replace(plan, data=data)
    return plan.run_partition(state, round, partition)


def _sums_task(data, input_features, Phi_theta, chunk_ids) -> FeatureSums:
    return feature_sums(data, input_features, Phi_theta, chunk_ids)


def _lost_exceptions() -> tuple[type[BaseException], ...]:
    from distributed import KilledWorker
    from distributed.comm import CommClosedError

    # distributed's FutureCancelledError / FuturesCancelledError derive from concurrent.futures.CancelledError
    return (KilledWorker, CommClosedError, _CFCancelledError)


class _DataOnCluster:
    """The data as the tasks see it: a Zarr Dataset travels as is (it is a small description and each task opens
    the store where it runs); in-memory data is scattered once per group of chunks and re-scattered if lost."""

    def __init__(self, client, data, groups: Sequence[Sequence[int]]):
        self.client = client
        self.groups = [list(g) for g in groups]
        self.inline = _is_zarr_dataset(data)
        self.data = data
        self._futures: list[Any] = []
        if not self.inline:
            self._futures = [None] * len(self.groups)
            self.refresh()

    def refresh(self) -> None:
        """(Re-)scatter the groups whose data is not on the cluster any more."""
        if self.inline:
            return
        for g, fut in enumerate(self._futures):
            if fut is None or fut.status != "finished":
                if fut is not None:
                    self.client.cancel([fut])
                self._futures[g] = self.client.scatter(_ChunkSubset(self.data, self.groups[g]), hash=False)

    def ref(self, g: int):
        return None if self.inline else self._futures[g]

    def value(self, g: int):
        """What a task gets as data: the Dataset itself, or the scattered subset's future."""
        return self.data if self.inline else self._futures[g]

    def release(self) -> None:
        if self._futures:
            with contextlib.suppress(Exception):
                self.client.cancel([f for f in self._futures if f is not None])
        self._futures = []


# ---------------------------------------------------------------------------------------------------------------
# the round runner
# ---------------------------------------------------------------------------------------------------------------


class DaskMapPartitions:
    """``map_partitions(plan, state, round)`` on a Dask cluster, for :func:`rffor.solvers.rff.fit_rff`.

    Returns exactly what :func:`rffor.solvers.rff.serial_map_partitions` returns (one ``(SGDState, steps,
    loss_sum)`` per partition, in partition order), computed by one task per partition.

    Parameters
    ----------
    client : distributed.Client
    round_timeout : float, str or None
        A round taking longer raises :class:`RoundTimeoutError`. None: Dask config ``rffor.round-timeout``
        ("auto": 30 minutes for the first round, then max(2 minutes, 20x the slowest completed round)).
    round_retries : int, optional
        Reruns of a round whose tasks were lost with workers (default ``rffor.round-retries``, 3).
    on_start : callable ``(plan)``, optional
        Called once, before the first round (to announce the plan).
    name : str, optional
        Prefix of the task keys (default ``rffor-<random>``): keys are ``<name>-r<round>-p<partition>-a<attempt>``.

    Attributes
    ----------
    round_seconds : list of float
        Wall time of every completed round (scatter to gather).
    reruns : int
        Rounds rerun after lost tasks.
    """

    def __init__(self, client, *, round_timeout=None, round_retries=None, on_start=None, name=None, reporter=None):
        self.client = client
        self.round_timeout = _config_seconds("round-timeout", round_timeout)
        self.round_retries = _config_int("round-retries", round_retries)
        self.on_start = on_start
        self.name = name or f"rffor-{uuid.uuid4().hex[:8]}"
        self.reporter = reporter
        self.round_seconds: list[float] = []
        self.reruns = 0
        self._plan = None
        self._light_plan = None
        self._data: _DataOnCluster | None = None

    # --------------------------------------------------------------------------------------------- set-up
    def _prepare(self, plan: RoundPlan) -> None:
        if self._data is not None:
            self._data.release()
        self._data = _DataOnCluster(self.client, plan.data, plan.partitions)
        self._light_plan = plan if self._data.inline else dataclasses.replace(plan, data=None)
        self._plan = plan
        if self.on_start is not None:
            self.on_start(plan)

    def close(self) -> None:
        """Release the data scattered to the cluster."""
        if self._data is not None:
            self._data.release()
            self._data = None
        self._plan = None

    def _timeout(self) -> float:
        if self.round_timeout is not None:
            return self.round_timeout
        if not self.round_seconds:
            return 1800.0
        return max(120.0, 20.0 * max(self.round_seconds))

    # --------------------------------------------------------------------------------------------- a round
    def __call__(self, plan: RoundPlan, state: SGDState, round: int) -> list[tuple[SGDState, int, float]]:
        if plan is not self._plan:
            self._prepare(plan)
        lost = _lost_exceptions()
        last: BaseException | None = None
        for attempt in range(self.round_retries + 1):
            if attempt:
                self.reruns += 1
                self._say(
                    f"round {round + 1}: tasks lost with a worker ({type(last).__name__}: {last}); rerunning the "
                    f"round from the same state (attempt {attempt + 1}/{self.round_retries + 1})"
                )
                with contextlib.suppress(Exception):
                    self.client.wait_for_workers(1, timeout=self._timeout())
                try:
                    self._data.refresh()
                except lost + (OSError,) as exc:
                    last = exc
                    continue
            try:
                return self._run_round(plan, state, round, attempt)
            except lost as exc:
                last = exc
            except RoundTimeoutError:
                raise
            except OSError as exc:  # scatter or comm failure talking to a dying worker (also comm timeouts)
                last = exc
        raise RoundFailedError(
            f"round {round + 1} lost its tasks {self.round_retries + 1} times (last: {type(last).__name__}: "
            f"{last}); the cluster keeps losing workers"
        ) from last

    def _run_round(self, plan: RoundPlan, state: SGDState, round: int, attempt: int):
        from distributed import wait

        client = self.client
        tic = time.perf_counter()
        fstate = client.scatter(state, hash=False, timeout=self._timeout())
        futures = []
        try:
            # Where tasks go: with the state on a single worker, locality would queue every task of the round on
            # that worker (measured: 2 workers, the second task started when the first ended). So spread the
            # partitions over the worker threads with soft hints (allow_other_workers: a task whose worker died runs
            # elsewhere; never a hard pin, see DASK_NOTES.md). In-memory partitions are already spread by scatter:
            # their tasks follow their data.
            slots = self._worker_slots() if self._data.inline else []
            for p in range(plan.n_partitions):
                where = {"workers": [slots[p % len(slots)]], "allow_other_workers": True} if slots else {}
                futures.append(
                    client.submit(
                        _partition_task,
                        self._light_plan,
                        self._data.value(p),
                        fstate,
                        round,
                        p,
                        key=f"{self.name}-r{round}-p{p}-a{attempt}",
                        pure=False,
                        **where,
                    )
                )
            timeout = self._timeout()
            try:
                with client.as_current():  # distributed.wait uses the current client, not necessarily ours
                    wait(futures, timeout=timeout)
            except TimeoutError:
                raise RoundTimeoutError(self._hang_report(round, futures, timeout)) from None
            for f in futures:  # a lost task (KilledWorker, cancelled) is retried; a task's own error fails the fit
                if f.status == "cancelled":
                    raise _CFCancelledError(f"task {f.key} was cancelled (its worker or its input was lost)")
                if f.status == "error":
                    f.result()  # raises the task's exception with its traceback
            results = client.gather(futures)
        finally:
            with contextlib.suppress(Exception):
                client.cancel([*futures, fstate])
        self.round_seconds.append(time.perf_counter() - tic)
        return results

    def _worker_slots(self) -> list[str]:
        """Worker addresses, each repeated once per thread, in a fixed order (placement only, never results)."""
        with contextlib.suppress(Exception):
            nthreads = self.client.nthreads()
            return [w for w in sorted(nthreads) for _ in range(int(nthreads[w]))]
        return []

    def _hang_report(self, round: int, futures, timeout: float) -> str:
        pending = [(p, f) for p, f in enumerate(futures) if f.status == "pending"]
        where = {}
        with contextlib.suppress(Exception):
            processing = self.client.processing()
            for worker, keys in processing.items():
                for key in keys:
                    where[str(key)] = worker
        parts = []
        for p, f in pending:
            w = where.get(str(f.key))
            parts.append(f"partition {p} " + (f"running on {w}" if w else "waiting for a worker"))
        n_workers = "?"
        with contextlib.suppress(Exception):
            n_workers = len(self.client.scheduler_info()["workers"])
        return (
            f"round {round + 1} did not finish within {timeout:g} s: {', '.join(parts) or 'no task pending'} "
            f"({n_workers} worker(s) connected). A task is hung or a worker is unresponsive; the last good "
            f"checkpoint is intact (resume=True continues from it). Raise the limit with "
            f"dask.config.set({{'rffor.round-timeout': '1h'}}) if rounds are legitimately this long."
        )

    def _say(self, text: str) -> None:
        logger.warning("%s", text)
        if self.reporter is not None and self.reporter.verbose:
            self.reporter.message(text)


# ---------------------------------------------------------------------------------------------------------------
# map-reduce of the square-loss closed form
# ---------------------------------------------------------------------------------------------------------------


def dask_feature_sums(
    client,
    data,
    input_features,
    Phi_theta: np.ndarray,
    *,
    n_groups: int | None = None,
    timeout: float | None = None,
    round_retries: int | None = None,
    name: str | None = None,
) -> FeatureSums:
    """The chunk sums of the square-loss closed form (MATH.md §5) as one map-reduce on the cluster.

    The chunks are split into ``n_groups`` contiguous groups; one task per group returns its
    :class:`rffor.solvers.rff.FeatureSums` (reading its chunks straight from the Zarr store), and the sums are added
    on the cluster by a fixed binary tree (group 0 + group 1, group 2 + group 3, ...), so the result does not depend
    on which worker ran what. Only the final sums (a D_x × D_x and a D_x × D_θ matrix) reach the driver.

    Parameters
    ----------
    client : distributed.Client
    data : Dataset or ArrayData
    input_features : RandomFourierFeatures
    Phi_theta : ndarray of shape (m, D_θ)
    n_groups : int, optional
        Default: twice the number of worker threads, at most the number of chunks. With one group the result
        equals :func:`rffor.solvers.rff.feature_sums` bit for bit; otherwise to rounding (float64 sums).
    timeout : float, optional
        Seconds before the map-reduce is reported hung (default: Dask config ``rffor.round-timeout``, "auto" = 30
        minutes).
    round_retries : int, optional
        Reruns after tasks lost with workers (default ``rffor.round-retries``).
    name : str, optional
        Prefix of the task keys.

    Returns
    -------
    FeatureSums
    """
    from distributed import wait

    data = as_data(data)
    if n_groups is None:
        n_groups = 2 * max(1, _total_threads(client))
    groups = data.partition(min(int(n_groups), data.n_chunks))
    timeout = _config_seconds("round-timeout", timeout) or 1800.0
    retries = _config_int("round-retries", round_retries)
    name = name or f"rffor-sums-{uuid.uuid4().hex[:8]}"
    on_cluster = _DataOnCluster(client, data, groups)
    lost = _lost_exceptions()
    last: BaseException | None = None
    try:
        for attempt in range(retries + 1):
            if attempt:
                logger.warning("closed-form sums lost with a worker (%s); rerunning (attempt %d)", last, attempt + 1)
                on_cluster.refresh()
            futures = [
                client.submit(
                    _sums_task,
                    on_cluster.value(g),
                    input_features,
                    Phi_theta,
                    ids,
                    key=f"{name}-g{g}-a{attempt}",
                    pure=False,
                )
                for g, ids in enumerate(groups)
            ]
            level, all_futures = 0, list(futures)
            while len(futures) > 1:
                nxt = []
                for k in range(0, len(futures) - 1, 2):
                    nxt.append(
                        client.submit(
                            operator.add,
                            futures[k],
                            futures[k + 1],
                            key=f"{name}-add{level}-{k // 2}-a{attempt}",
                            pure=False,
                        )
                    )
                if len(futures) % 2:
                    nxt.append(futures[-1])
                futures, level = nxt, level + 1
                all_futures += nxt
            try:
                try:
                    with client.as_current():
                        wait(futures[:1], timeout=timeout)
                except TimeoutError:
                    raise RoundTimeoutError(
                        f"the closed-form map-reduce over {len(groups)} chunk groups did not finish within "
                        f"{timeout:g} s"
                    ) from None
                if futures[0].status == "cancelled":
                    raise _CFCancelledError("the map-reduce lost its input")
                return futures[0].result()
            except RoundTimeoutError:
                raise
            except lost + (OSError,) as exc:
                last = exc
            finally:
                with contextlib.suppress(Exception):
                    client.cancel(all_futures)
        raise RoundFailedError(f"the closed-form map-reduce lost its tasks {retries + 1} times: {last}") from last
    finally:
        on_cluster.release()


# ---------------------------------------------------------------------------------------------------------------
# the fit
# ---------------------------------------------------------------------------------------------------------------


def _feature_maps(data, rs: int, kw: dict):
    """φ_X, φ_Θ and Φ_Θ exactly as :func:`rffor.solvers.rff.fit_rff` builds them (seeds (rs, 0) and (rs, 1))."""
    from .features import RandomFourierFeatures, make_output_features

    dtype = np.dtype(kw.get("dtype", "float32")).name
    theta = np.asarray(data.theta, dtype=np.float64)
    phi_x = RandomFourierFeatures(kw["kernel_x"], kw.get("n_features_x", 1000), data.d, seed=(rs, 0), dtype=dtype)
    phi_theta = make_output_features(
        kw.get("output_features", "exact"),
        kw["kernel_theta"],
        theta,
        n_features=kw.get("n_features_theta"),
        tol=kw.get("output_rank_tol", 1e-10),
        seed=(rs, 1),
        dtype=dtype,
    )
    Phi_theta = np.ascontiguousarray(phi_theta.transform(theta), dtype=dtype)
    return phi_x, phi_theta, Phi_theta, theta, dtype


def fit(
    data,
    *,
    client=None,
    scheduler_address: str | None = None,
    security=None,
    n_partitions: int | None = None,
    checkpoint=None,
    resume: bool = False,
    verbose: int = 0,
    distributed: bool | None = None,
    on_round: Callable[[int, SGDState, list[dict]], None] | None = None,
    round_timeout: float | str | None = None,
    connect_timeout: float | str | None = None,
    round_retries: int | None = None,
    n_workers: int | None = None,
    **fit_kwargs,
) -> RFFResult:
    """Fit the random-feature model (P_rf), on Dask or in process, with checkpoints and progress.

    The same model as :func:`rffor.solvers.rff.fit_rff` with P partitions, wherever it runs (see the module
    docstring for the protocol and the guarantees).

    Parameters
    ----------
    data : Dataset, ArrayData or tuple (X, Y[, theta])
        A Zarr :class:`rffor.data.Dataset` is read by the workers straight from its store (which they must be able
        to reach: a shared file system or an fsspec URL); in-memory data is scattered, each partition's rows once.
    client : distributed.Client, optional
        Run on this cluster (left open).
    scheduler_address : str, optional
        Connect to this scheduler (``tcp://host:8786``, ``tls://host:8786``) for the fit.
    security : distributed.Security, optional
        TLS settings for ``scheduler_address`` (or for the embedded cluster).
    n_partitions : int, optional
        P. Default: the number of worker threads on Dask, 1 in process, the checkpoint's P when resuming.
    checkpoint : str or os.PathLike, optional
        Written atomically after every round of DSGD (:func:`save_checkpoint`). A closed-form-only fit (square loss,
        no missing outputs) has no rounds and writes none.
    resume : bool, default False
        Continue from ``checkpoint`` if the file exists (after checking that it belongs to this fit: data shape and
        grid, settings, P, random state); the result equals the uninterrupted fit bit for bit.
    verbose : int, default 0
        > 0: where it runs, the plan, and per-round progress (a bar on a terminal, lines otherwise) on stderr.
    distributed : bool, optional
        Force Dask (True) or in process (False); default :func:`use_dask`.
    on_round : callable ``(round, state, history)``, optional
        Called after every round, after the checkpoint is written.
    round_timeout, connect_timeout : float or str, optional
        Seconds (or Dask duration strings); defaults from the Dask config ``rffor.round-timeout`` and
        ``rffor.connect-timeout`` (see ``rffor/dask.yaml``).
    round_retries : int, optional
        Reruns of a round whose tasks were lost (default ``rffor.round-retries``).
    n_workers : int, optional
        Workers of the embedded LocalCluster (default: one per usable CPU, at most P when P is given).
    **fit_kwargs
        Everything else of :func:`rffor.solvers.rff.fit_rff` (``loss``, ``kernel_x``, ``kernel_theta``, ``lam``,
        ``n_features_x``, ``batch_size``, ``n_epochs``, ``local_steps``, ``random_state``, ...).

    Returns
    -------
    RFFResult
        ``history`` holds one record per round (and ``round = -1`` for the closed form).

    Raises
    ------
    SchedulerUnreachableError, RoundTimeoutError, RoundFailedError
        See the module docstring; a task's own exception propagates unchanged.
    """
    for key in ("map_partitions", "initial_state", "start_round", "history", "initial_sums", "on_message"):
        if key in fit_kwargs:
            raise TypeError(f"{key} is managed by rffor.distributed.fit; it cannot be passed")
    if resume and checkpoint is None:
        raise ValueError("resume=True needs checkpoint= (the path of the checkpoint to continue from)")
    if n_partitions is not None and (
        isinstance(n_partitions, bool) or not isinstance(n_partitions, numbers.Integral) or n_partitions < 1
    ):
        raise ValueError(f"n_partitions must be a positive integer or None, got {n_partitions!r}")
    data = as_data(data)
    if distributed is None:
        distributed = use_dask(data, client=client, scheduler_address=scheduler_address, n_partitions=n_partitions)
    elif not distributed and (client is not None or scheduler_address is not None):
        raise ValueError("distributed=False contradicts client/scheduler_address")

    ckpt = None
    if resume and os.path.exists(os.fspath(checkpoint)):
        ckpt = load_checkpoint(checkpoint)
    reporter = _Reporter(verbose)
    try:
        if not distributed:
            P = n_partitions or (ckpt.info.get("n_partitions") if ckpt else None) or 1
            return _fit_rounds(data, None, P, ckpt, checkpoint, reporter, on_round, "in process", fit_kwargs)
        if n_workers is None and client is None and scheduler_address is None:  # no idle workers
            n_workers = max(1, min(_usable_cpus(), n_partitions or data.n_chunks, data.n_chunks))
        with connect(client, scheduler_address, security, connect_timeout=connect_timeout, n_workers=n_workers) as conn:
            threads = _total_threads(conn.client)
            if threads == 0:
                timeout = _config_seconds("connect-timeout", connect_timeout) or 30.0
                reporter.message(f"waiting up to {timeout:g} s for a worker on {conn.description}")
                try:
                    conn.client.wait_for_workers(1, timeout=timeout)
                except TimeoutError:
                    raise SchedulerUnreachableError(
                        f"the {conn.description} has no worker, and none joined within {timeout:g} s "
                        f"(rffor.connect-timeout): start workers (dask worker {conn.client.scheduler.address})"
                    ) from None
                threads = _total_threads(conn.client)
            P = n_partitions or (ckpt.info.get("n_partitions") if ckpt else None) or threads
            mapper = DaskMapPartitions(
                conn.client, round_timeout=round_timeout, round_retries=round_retries, reporter=reporter
            )
            try:
                return _fit_rounds(
                    data,
                    conn.client,
                    P,
                    ckpt,
                    checkpoint,
                    reporter,
                    on_round,
                    f"{conn.description}, {threads} worker thread(s)",
                    fit_kwargs,
                    mapper=mapper,
                    round_timeout=round_timeout,
                    round_retries=round_retries,
                )
            finally:
                mapper.close()
    finally:
        reporter.close()


def _fit_rounds(
    data,
    client,
    P,
    ckpt,
    checkpoint,
    reporter,
    on_round,
    where,
    fit_kwargs,
    *,
    mapper=None,
    round_timeout=None,
    round_retries=None,
) -> RFFResult:
    from .losses import Square
    from .solvers.rff import serial_map_partitions

    kw = dict(fit_kwargs)
    user_rs = kw.pop("random_state", None)
    if ckpt is not None:
        rs = int(ckpt.info.get("random_state"))
        if user_rs is not None and not (isinstance(user_rs, numbers.Integral) and int(user_rs) == rs):
            raise ValueError(
                f"random_state={user_rs!r} differs from the checkpoint's random_state={rs}; pass random_state={rs} "
                f"(or None) to resume, or resume=False to start over"
            )
    else:
        rs = resolve_random_state(user_rs)
    fingerprint = _fingerprint(data, kw, P, rs)
    if ckpt is not None:
        diff = _fingerprint_diff(ckpt.info.get("fingerprint", {}), fingerprint)
        if diff:
            raise ValueError(
                f"the checkpoint {os.fspath(checkpoint)!r} belongs to another fit: "
                + "; ".join(diff)
                + ". Use the same data and settings, or resume=False to start over."
            )
    reporter.message(f"random-feature fit on {where}: P = {P} partition(s)")
    info = {"random_state": rs, "n_partitions": int(P), "fingerprint": fingerprint}

    # ---- the square-loss closed form as a map-reduce on the cluster ---------------------------------------------
    history: list[dict] | None = None
    initial_state = None
    initial_sums = None
    start_round = 0
    loss = kw.get("loss")
    rff_method = kw.get("rff_method", "auto")
    if ckpt is not None:
        initial_state, start_round, history = ckpt.state, ckpt.round + 1, list(ckpt.history)
        reporter.message(f"resuming from {os.fspath(checkpoint)!r} after round {ckpt.round + 1}")
    elif client is not None and (loss is None or isinstance(loss, Square)) and rff_method in ("auto", "closed_form"):
        phi_x, phi_theta, Phi_theta, theta, dtype = _feature_maps(data, rs, kw)
        lam = float(kw["lam"])
        tic = time.perf_counter()
        sums = dask_feature_sums(client, data, phi_x, Phi_theta, timeout=round_timeout, round_retries=round_retries)
        C_theta = output_gram(phi_theta, Phi_theta)
        B0 = closed_form_from_sums(sums, C_theta, lam, data.m)
        J0 = square_objective_from_sums(sums, B0, C_theta, lam, data.m)
        seconds = time.perf_counter() - tic
        history = [
            {
                "round": -1,
                "t": 0,
                "steps": 0,
                "loss": J0 - 0.5 * lam * float(np.sum(B0 * B0)),
                "objective": J0,
                "seconds": seconds,
                "samples_per_s": sums.n / seconds if seconds > 0 else float("nan"),
            }
        ]
        reporter.message(f"closed form (map-reduce) on {sums.n} curves: objective {J0:.6g} ({seconds:.1f} s)")
        if rff_method == "closed_form" or sums.n_missing == 0:
            return RFFResult(
                coef=B0.astype(dtype),
                input_features=phi_x,
                output_features=phi_theta,
                theta=theta,
                n_iter=0,
                history=history,
                method="closed_form",
                random_state=rs,
            )
        initial_state, initial_sums = SGDState.from_coef(B0, dtype), sums

    # ---- rounds ----------------------------------------------------------------------------------------------------
    tic = time.perf_counter()
    progress: list[RoundProgress] = []

    def announce(plan: RoundPlan) -> None:
        K = plan.round_steps[0] if plan.round_steps else 0
        reporter.message(
            f"DSGD: {plan.n_rounds} round(s) of {K} local steps x {plan.n_partitions} partition(s), batch "
            f"{plan.config.batch_size}, D_x = {plan.input_features.n_features}, D_θ = {plan.Phi_theta.shape[1]}"
        )
        progress.append(reporter.start_rounds(plan.n_rounds))

    if mapper is None:
        started = []

        def mapper(plan, state, r):  # the serial loop, announcing the plan once
            if not started:
                started.append(True)
                announce(plan)
            return serial_map_partitions(plan, state, r)
    else:
        mapper.on_start = announce

    def after_round(r: int, state: SGDState, hist: list[dict]) -> None:
        if checkpoint is not None:
            save_checkpoint(checkpoint, state, r, hist, info)
        if progress:
            progress[0].update(hist[-1], time.perf_counter() - tic)
        if on_round is not None:
            on_round(r, state, hist)

    return fit_rff(  # verbose=0: the progress above replaces fit_rff's own per-round lines
        data,
        **kw,
        random_state=rs,
        n_partitions=P,
        verbose=0,
        map_partitions=mapper,
        on_round=after_round,
        initial_state=initial_state,
        start_round=start_round,
        history=history,
        initial_sums=initial_sums,
        on_message=reporter.message,
    )
