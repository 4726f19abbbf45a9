"""Helpers of the distributed tests: Zarr stores on disk, real ``dask scheduler`` / ``dask worker`` processes on
127.0.0.1, certificates for TLS, and a dataset that hangs on demand."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

import rffor.data

REPO = Path(__file__).resolve().parents[1]
DASK = str(Path(sys.executable).with_name("dask"))


def write_store(path, n=3000, d=6, m=24, chunks=250, missing=0.0, seed=0):
    """A nonlinear function-valued data set written to a Zarr store; returns the opened Dataset."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    theta = np.linspace(0, 1, m)
    Y = np.sin(2 * X[:, :1] + 3 * theta) * np.cos(X[:, 1:2]) + 0.3 * X[:, 2:3] * theta
    Y += 0.05 * rng.standard_normal((n, m))
    if missing:
        holes = rng.random((n, m)) < missing
        holes[:, 0] = False  # every curve keeps an observation
        Y[holes] = np.nan
    return rffor.data.write(os.fspath(path), X, Y, theta, chunks=chunks)


def _env() -> dict:
    env = dict(os.environ)
    env["DASK_CONFIG"] = str(REPO / "cluster" / "dask.yaml")  # the recommended worker configuration
    # tests/ on the workers' path too: the executor tests' reductions (tests/_reductions.py) run there
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(REPO / "tests")) if p)
    env.pop("DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT", None)
    return env


def _wait_for_file(path: Path, timeout: float, procs) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"{p.args[:2]} exited with {p.returncode}")
        if path.exists():
            with contextlib.suppress(ValueError):
                return json.loads(path.read_text())
        time.sleep(0.05)
    raise TimeoutError(f"{path} did not appear within {timeout} s")


def _wait_for_workers(sfile: Path, n_workers: int, timeout: float, certs: dict | None) -> None:
    """Block until ``n_workers`` workers are connected to the scheduler of ``sfile``."""
    from distributed import Client
    from distributed.security import Security

    security = None
    if certs is not None:
        security = Security(tls_ca_file=certs["ca"], tls_client_cert=certs["cert"], tls_client_key=certs["key"],
                            require_encryption=True)  # fmt: skip
    with Client(scheduler_file=str(sfile), security=security, timeout=timeout) as client:
        client.wait_for_workers(n_workers, timeout=timeout)


def tls_args(certs: dict | None) -> list[str]:
    if certs is None:
        return []
    return ["--tls-ca-file", certs["ca"], "--tls-cert", certs["cert"], "--tls-key", certs["key"]]


@contextlib.contextmanager
def dask_processes(
    tmp_path: Path,
    n_workers: int = 2,
    certs: dict | None = None,
    timeout: float = 60.0,
    keep_scheduler_pid: bool = False,
    nthreads: int = 1,
):
    """Start ``dask scheduler`` and ``n_workers`` ``dask worker`` processes of ``nthreads`` threads on 127.0.0.1;
    yield the address (and the scheduler's pid, with ``keep_scheduler_pid``).

    Only processes started here are stopped (by their own pid) when the block exits.
    """
    sfile = tmp_path / "scheduler.json"
    log = open(tmp_path / "dask.log", "ab")  # noqa: SIM115 - closed below
    procs: list[subprocess.Popen] = []
    try:
        protocol = ["--protocol", "tls"] if certs else []
        procs.append(
            subprocess.Popen(
                [
                    DASK,
                    "scheduler",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "--no-dashboard",
                    "--dashboard-address",
                    "127.0.0.1:0",
                    "--scheduler-file",
                    str(sfile),
                    *protocol,
                    *tls_args(certs),
                ],
                stdout=log,
                stderr=log,
                env=_env(),
            )
        )
        info = _wait_for_file(sfile, timeout, procs)
        for _ in range(n_workers):
            procs.append(
                subprocess.Popen(
                    [
                        DASK,
                        "worker",
                        "--scheduler-file",
                        str(sfile),
                        "--nthreads",
                        str(nthreads),
                        "--host",
                        "127.0.0.1",
                        "--no-dashboard",
                        "--dashboard-address",
                        "127.0.0.1:0",
                        *tls_args(certs),
                    ],
                    stdout=log,
                    stderr=log,
                    env=_env(),
                )
            )
        # every worker connected before the test starts: a fit sizes its partitions by the workers it finds, so a
        # slow worker start (a loaded machine) would otherwise change P, and the model, between two fits
        _wait_for_workers(sfile, n_workers, timeout, certs)
        yield (info["address"], procs[0].pid) if keep_scheduler_pid else info["address"]
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        log.close()


def wait_for_workers(client, n: int, timeout: float = 60.0) -> None:
    client.wait_for_workers(n, timeout=timeout)


def make_certificates(directory: Path) -> dict:
    """A CA and a cluster certificate made by the shipped ``cluster/tls/make-certs.sh`` (openssl CLI)."""
    subprocess.run(
        ["bash", str(REPO / "cluster" / "tls" / "make-certs.sh"), str(directory), "127.0.0.1"],
        check=True,
        capture_output=True,
    )
    return {k: str(directory / f) for k, f in (("ca", "ca.pem"), ("cert", "cert.pem"), ("key", "key.pem"))}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------------------------
# a Dataset whose chunk reads block until released (a hung task, in an in-process cluster)
# ---------------------------------------------------------------------------------------------------------------

RELEASE = threading.Event()


class HangingDataset(rffor.data.Dataset):
    """Reads of chunks block until :data:`RELEASE` is set (at most 60 s), then fail."""

    def chunk(self, i):
        RELEASE.wait(60)
        raise RuntimeError("released")

    @classmethod
    def of(cls, ds: rffor.data.Dataset) -> HangingDataset:
        return cls(ds.url, ds.storage_options, ds.metadata)
