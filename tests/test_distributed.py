"""The Dask executor (rffor.executor.dask): oracle tests against the serial executor, failures, checkpoints, TLS.

Every fit on a cluster is compared bit for bit with the same fit (same P) on :class:`rffor.executor.SerialExecutor`
in this process. Dask's Nanny workers run one BLAS thread, so this module runs NumPy with one BLAS thread too (BLAS
results depend on the thread count).
"""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
import threading
import time

import _cluster as tc  # tests/ is on sys.path (rootdir conftest)
import numpy as np
import pytest
from conftest import die_after_checkpoint  # tests/ is on sys.path (rootdir conftest)
from threadpoolctl import threadpool_limits

import rffor.checkpoint as ckpt
import rffor.data
from rffor import FunctionalRegressor
from rffor.chunked import ArrayData
from rffor.executor import (
    RoundFailedError,
    RoundTimeoutError,
    SchedulerUnreachableError,
    make_executor,
    usable_cpus,
)
from rffor.executor.dask import DaskExecutor, connect
from rffor.kernels import Gaussian
from rffor.losses import Huber, Square
from rffor.settings import DEFAULTS
from rffor.solvers.prediction import objective
from rffor.solvers.rff import fit_rff

KW = dict(
    loss=Huber(kappa=0.1, p=1),
    kernel_x=Gaussian(gamma=0.5),
    kernel_theta=Gaussian(gamma=30.0),
    lam=1e-3,
    n_features_x=128,
    batch_size=64,
    n_epochs=3,
    init="zeros",
    random_state=7,
    rff_method="sgd",
    input_features="rff",  # also for the closed forms some tests compare with
)


#: LocalCluster options: no dashboard, and the scheduler's HTTP server (always started) on a loopback port
NO_DASHBOARD = dict(dashboard_address="127.0.0.1:0", scheduler_kwargs={"dashboard": False})


@pytest.fixture(scope="module", autouse=True)
def one_blas_thread():
    with threadpool_limits(1):
        yield


@pytest.fixture(scope="module")
def client():
    """An in-process cluster: 2 worker threads, no dashboard."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, **NO_DASHBOARD) as cluster:
        with Client(cluster, set_as_default=False) as c:
            yield c


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return tc.write_store(tmp_path_factory.mktemp("data") / "train.zarr")


@pytest.fixture(scope="module")
def store_missing(tmp_path_factory):
    return tc.write_store(tmp_path_factory.mktemp("data") / "missing.zarr", n=1200, chunks=200, missing=0.2)


def on(client, **kw):
    return DaskExecutor(client=client, **kw)


def assert_same(a, b):
    assert a.coef.dtype == b.coef.dtype
    np.testing.assert_array_equal(a.coef, b.coef)


# ---------------------------------------------------------------------------------------------------------------
# oracle tests: the cluster computes what the serial executor computes (executor-only tests: test_executor.py)
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_one_partition_on_cluster_equals_single_process(client, store):
    ref = fit_rff(store, **KW)  # serial, P = 1
    out = fit_rff(store, n_partitions=1, executor=on(client), **KW)
    assert out.method == "sgd" and out.n_partitions == 1
    assert_same(out, ref)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("in_memory", [False, True], ids=["zarr", "in-memory"])
@pytest.mark.parametrize("init", ["zeros", "closed_form"])
def test_partitions_on_cluster_equal_serial_partitions(client, store, in_memory, init):
    """P = 3 partitions: the Dask executor gives the serial executor's model bit for bit, warm start (map-reduced
    over partitions, reweighted) and preconditioner included."""
    kw = dict(KW, loss=Huber(0.1, 2), init=init, n_partitions=3, local_steps=7)
    ref = fit_rff(store, **kw)
    data = store
    if in_memory:
        X, Y = store.read()
        data = ArrayData(X, Y, store.theta, chunk_rows=store.chunk_rows)
    out = fit_rff(data, executor=on(client), **kw)
    assert out.plan.n_partitions == 3 and out.plan.n_rounds > 3
    assert (out.plan.config.precond is not None) == (init == "closed_form") or kw["init"] == "zeros"
    assert_same(out, ref)
    assert [h["loss"] for h in out.history] == [h["loss"] for h in ref.history]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("in_memory", [False, True], ids=["zarr", "in-memory"])
def test_mm_passes_on_cluster_equal_serial_passes(client, store, in_memory):
    """MM (the default for robust losses): every pass's gradient map-reduced over 3 partitions on the cluster gives
    the serial executor's model bit for bit, and converges (the last step's promised decrease is below tol)."""
    kw = dict(KW, loss=Huber(0.1, 2), init="closed_form", rff_method="mm", n_partitions=3, tol=1e-8)
    ref = fit_rff(store, **kw)
    data = store
    if in_memory:
        X, Y = store.read()
        data = ArrayData(X, Y, store.theta, chunk_rows=store.chunk_rows)
    out = fit_rff(data, executor=on(client), **kw)
    assert out.method == "mm" and 2 < out.n_iter < kw.get("max_passes", 50)
    assert_same(out, ref)
    assert [h["objective"] for h in out.history] == [h["objective"] for h in ref.history]
    objectives = [h["objective"] for h in out.history]
    assert all(b <= a for a, b in zip(objectives, objectives[1:], strict=False))  # monotone


@pytest.mark.timeout(120)
def test_lam_path_on_cluster_equals_serial(client, store):
    """``lam="auto"`` (closed forms, then MM candidates scored on held-out rows): on the cluster as in process, bit for
    bit."""
    kw = dict(KW, loss=Huber(0.1, 2), lam="auto", lams=[1e-2, 1e-3, 1e-4], rff_method="auto", n_partitions=3)
    ref = fit_rff(store, **kw)
    out = fit_rff(store, executor=on(client), **kw)
    assert ref.path.passes > 1
    assert [c.score for c in out.path.candidates] == [c.score for c in ref.path.candidates]
    assert out.lam == ref.lam
    assert_same(out, ref)


@pytest.mark.timeout(400)
def test_sampled_selection_spreads_over_worker_processes_as_in_process(store, tmp_path):
    """``lam="auto"`` on a sample of 3 of the 12 chunks (``selection_rows=600``), P = 4: on 2 worker processes every
    selection pass runs 4 tasks (row pieces), with the serial bits; with ``partitions_per="worker"`` on separate
    worker processes of 2 threads, the serial executor's bits at any thread count."""
    from distributed import Client, LocalCluster

    from rffor.executor import SerialExecutor

    kw = dict(KW, loss=Huber(0.1, 2), lam="auto", lams=[1e-2, 1e-3], rff_method="auto", n_partitions=4,
              selection_rows=600, max_passes=60, tol=1e-3)  # fmt: skip
    ref = fit_rff(store, **kw)
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", **NO_DASHBOARD) as cluster,
        Client(cluster, set_as_default=False) as c,
    ):
        ex = on(c)
        seen = []
        inner = ex.open

        def recording_open(*args, **kwargs):  # keep the session's pass statistics
            import contextlib

            @contextlib.contextmanager
            def session():
                with inner(*args, **kwargs) as s:
                    yield s
                    seen.extend(s.stats)

            return session()

        ex.open = recording_open
        out = fit_rff(store, executor=ex, **kw)
    sel = [st for st in seen if st.label in ("selection pass", "held-out errors")]
    assert len(sel) >= 4 and {(st.leaves, st.driver_merges) for st in sel} == {(4, 0)}
    assert [c.score for c in out.path.candidates] == [c.score for c in ref.path.candidates]
    assert_same(out, ref)
    pooled = fit_rff(store, executor=SerialExecutor(threads=1), partitions_per="worker", **kw)
    with tc.dask_processes(tmp_path, n_workers=2, nthreads=2) as address:
        remote = fit_rff(store, executor=DaskExecutor(scheduler_address=address), partitions_per="worker", **kw)
    assert_same(remote, pooled)
    assert pooled.lam == ref.lam


@pytest.mark.timeout(120)
def test_estimator_on_cluster_equals_serial(client, store):
    kw = {k: v for k, v in KW.items() if k != "init"}
    est = FunctionalRegressor(solver="rff", client=client, n_partitions=2, init="zeros", **kw).fit(store)
    ref = fit_rff(store, n_partitions=2, **KW)
    np.testing.assert_array_equal(est.coef_, ref.coef)
    X, _ = store.chunk(0)
    assert est.predict(X).shape == (X.shape[0], store.m)


@pytest.mark.timeout(120)
def test_averaged_local_sgd_converges_to_closed_form(client, store):
    kw = dict(KW, loss=Square(), lam=1e-2, n_epochs=40, step_decay=0.5)
    # square loss: the one-pass closed form is the optimum of (P_rf)
    exact = fit_rff(store, **{**kw, "rff_method": "closed_form"})
    assert exact.method == "closed_form"
    sgd = fit_rff(store, executor=on(client), n_partitions=4, **{**kw, "rff_method": "sgd"})
    phi = exact.input_features
    Phi_theta = exact.output_features.transform(store.theta)
    J_star = objective(store, exact.coef, phi, Phi_theta, Square(), kw["lam"])
    J = objective(store, sgd.coef, phi, Phi_theta, Square(), kw["lam"])
    assert J_star <= J <= J_star * (1 + 1e-3), (J, J_star)


@pytest.mark.timeout(120)
def test_map_reduce_closed_form(client, store):
    """The square-loss closed form: sums reduced by P tasks on the cluster equal the serial P-partition fit bit for
    bit, and the in-memory single-pass fit to float32 rounding."""
    kw = dict(KW, loss=Square(), rff_method="auto")
    X, Y = store.read()
    ref = fit_rff((X, Y, store.theta), **kw)
    serial = fit_rff(store, n_partitions=5, **kw)
    out = fit_rff(store, executor=on(client), n_partitions=5, **kw)
    assert out.method == ref.method == "closed_form"
    assert_same(out, serial)
    np.testing.assert_allclose(out.coef, ref.coef, rtol=1e-5, atol=1e-5 * np.abs(ref.coef).max())


@pytest.mark.timeout(120)
def test_closed_form_start_with_missing_outputs_then_dsgd(client, store_missing):
    # init_max_rows below the data: the preconditioner must come from the closed form's sums over all rows
    kw = dict(KW, loss=Square(), n_epochs=2, init_max_rows=200, rff_method="auto")
    out = fit_rff(store_missing, executor=on(client), n_partitions=2, **kw)
    ref = fit_rff(store_missing, n_partitions=2, **kw)
    assert out.method == ref.method == "mm"  # the closed form on filled outputs, then MM on the masked objective
    assert out.history[0]["round"] == -1
    assert_same(out, ref)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("method", ["mm", "sgd"])
def test_driver_reads_metadata_not_chunks(tmp_path, method):
    """A distributed Huber fit from a Zarr store on a LocalCluster of worker processes: every pass over the data
    (warm start, reweighting, preconditioner, rounds) runs on the workers; the driver process reads < 1% of the
    store's bytes (``/proc/self/io`` rchar)."""
    if not os.path.exists("/proc/self/io"):
        pytest.skip("needs Linux /proc/self/io")
    ds = tc.write_store(tmp_path / "big.zarr", n=40_000, d=60, m=100, chunks=4_000)
    size = sum(f.stat().st_size for f in (tmp_path / "big.zarr").rglob("*") if f.is_file())
    kw = dict(KW, loss=Huber(0.1, 2), init="closed_form", n_epochs=1, n_features_x=64, rff_method=method)

    def rchar():
        with open("/proc/self/io") as f:
            return int(next(line for line in f if line.startswith("rchar")).split()[1])

    with connect(n_workers=2) as conn:
        fit_rff(ds, executor=on(conn.client), n_partitions=2, **{**kw, "n_epochs": 0.01, "max_passes": 2})  # warm-up
        before = rchar()
        out = fit_rff(ds, executor=on(conn.client), n_partitions=2, **kw)
        read = rchar() - before
    assert out.method == method and out.n_iter > 1
    assert read < 0.01 * size, (read, size)


# ---------------------------------------------------------------------------------------------------------------
# real processes
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_fit_through_scheduler_address_with_separate_processes(tmp_path, store):
    ref = fit_rff(store, n_partitions=2, **KW)
    with tc.dask_processes(tmp_path, n_workers=2) as address:
        from distributed import Client

        with Client(address, set_as_default=False) as c:
            c.wait_for_workers(2, timeout=60)
            env = c.run(lambda: os.environ.get("MALLOC_MMAP_THRESHOLD_"))
        assert set(env.values()) == {"16777216"}  # cluster/dask.yaml reached the workers
        out = fit_rff(store, executor=DaskExecutor(scheduler_address=address), **KW)  # P = the 2 worker threads
        est = FunctionalRegressor(solver="rff", scheduler_address=address, **{k: v for k, v in KW.items()}).fit(store)
    assert out.n_partitions == 2
    assert_same(out, ref)
    np.testing.assert_array_equal(est.coef_, ref.coef)


@pytest.mark.timeout(180)
def test_worker_killed_mid_round_gives_identical_model(tmp_path):
    from distributed import Client, LocalCluster

    ds = tc.write_store(tmp_path / "big.zarr", n=8000, d=6, m=24, chunks=500)
    kw = dict(KW, n_features_x=512, batch_size=32, n_epochs=6)
    ref = fit_rff(ds, n_partitions=2, **kw)
    killed = {}
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", **NO_DASHBOARD) as cluster,
        Client(cluster, set_as_default=False) as c,
    ):
        pids = c.run(os.getpid)
        stop = threading.Event()

        def killer():  # SIGKILL the worker running partition 1 of round 3, mid-task
            while not stop.is_set() and not killed:
                for worker, keys in c.processing().items():
                    if any("-round-3-p1-" in str(k) for k in keys) and worker in pids:
                        time.sleep(0.05)
                        os.kill(pids[worker], signal.SIGKILL)
                        killed[worker] = pids[worker]
                        return
                time.sleep(0.01)

        t = threading.Thread(target=killer, daemon=True)
        t.start()
        try:
            out = fit_rff(ds, executor=on(c), n_partitions=2, **kw)
        finally:
            stop.set()
            t.join()
    assert killed, "the worker was not killed during the fit"
    assert out.plan.n_rounds >= 4
    assert_same(out, ref)


@pytest.mark.timeout(300)
def test_lost_scheduler_is_not_retried_and_resume_gives_the_uninterrupted_model(tmp_path):
    """Killed after round 1 of ``rffor fit --scheduler … --checkpoint``, the scheduler's loss fails the command at
    once (no retries) with a message naming the checkpoint's round and the command that resumes; a new cluster and
    ``--resume`` give the model of an uninterrupted fit, bit for bit."""
    tc.write_store(tmp_path / "train.zarr", n=6000, d=6, m=24, chunks=500)
    ck = tmp_path / "fit.ckpt"
    for name in ("c1", "c2", "c3"):
        (tmp_path / name).mkdir()
    args = [
        sys.executable, "-m", "rffor.cli", "fit", str(tmp_path / "train.zarr"), "--solver", "rff", "--loss", "huber2",
        "--kappa", "0.1", "--lam", "1e-3", "--kernel-x", "gaussian:0.5", "--kernel-theta", "gaussian:30",
        "--features-x", "256", "--epochs", "8", "--batch-size", "16", "--seed", "7", "--checkpoint", str(ck),
        "--method", "sgd",
    ]  # fmt: skip
    with tc.dask_processes(tmp_path / "c1", n_workers=2) as address:
        full = args + ["--scheduler", address, "--out", str(tmp_path / "ref.rffor")]
        assert subprocess.run(full, capture_output=True, text=True, timeout=200).returncode == 0
    ck.unlink()
    with tc.dask_processes(tmp_path / "c2", n_workers=2, keep_scheduler_pid=True) as (address, scheduler_pid):
        proc = subprocess.Popen(
            args + ["--scheduler", address, "--out", str(tmp_path / "part.rffor")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and not (ck.exists() and ckpt.load(ck).round >= 0):
            time.sleep(0.05)
        os.kill(scheduler_pid, signal.SIGKILL)
        tic = time.monotonic()
        _, err = proc.communicate(timeout=120)
        seconds = time.monotonic() - tic
    assert proc.returncode == 1, err
    assert "lost the connection to the Dask scheduler" in err and "rerunning" not in err
    held = ckpt.load(ck).round + 1
    assert f"holds round {held}/" in err and "--resume" in err
    assert seconds < 60  # no retry loop against a dead scheduler
    with tc.dask_processes(tmp_path / "c3", n_workers=2) as address:
        resumed = args + ["--scheduler", address, "--resume", "--out", str(tmp_path / "resumed.rffor")]
        out = subprocess.run(resumed, capture_output=True, text=True, timeout=200)
    assert out.returncode == 0, out.stderr
    a, b = rffor.load(tmp_path / "ref.rffor"), rffor.load(tmp_path / "resumed.rffor")
    np.testing.assert_array_equal(a.coef_, b.coef_)


@pytest.mark.timeout(180)
def test_tls_scheduler_refuses_clients_without_certificate(tmp_path, store):
    from distributed.security import Security

    certs = tc.make_certificates(tmp_path / "certs")
    rogue = tc.make_certificates(tmp_path / "rogue")  # a certificate from another CA
    good = Security(
        tls_ca_file=certs["ca"], tls_client_cert=certs["cert"], tls_client_key=certs["key"], require_encryption=True
    )
    ref = fit_rff(store, n_partitions=1, **KW)
    with tc.dask_processes(tmp_path, n_workers=1, certs=certs) as address:
        assert address.startswith("tls://")
        for security in (
            None,
            Security(
                tls_ca_file=certs["ca"],
                tls_client_cert=rogue["cert"],
                tls_client_key=rogue["key"],
                require_encryption=True,
            ),
        ):
            tic = time.perf_counter()
            with pytest.raises(SchedulerUnreachableError, match="could not connect"):
                ex = DaskExecutor(scheduler_address=address, security=security, connect_timeout=5)
                fit_rff(store, executor=ex, **KW)
            assert time.perf_counter() - tic < 20
        with pytest.raises(SchedulerUnreachableError):  # plain TCP to a TLS scheduler
            ex = DaskExecutor(scheduler_address=address.replace("tls://", "tcp://"), connect_timeout=5)
            fit_rff(store, executor=ex, **KW)
        out = fit_rff(store, executor=DaskExecutor(scheduler_address=address, security=good), **KW)
    assert_same(out, ref)


def test_unreachable_scheduler_fails_fast_with_clear_error(store):
    address = f"tcp://127.0.0.1:{tc.free_port()}"
    tic = time.perf_counter()
    with pytest.raises(SchedulerUnreachableError, match=r"could not connect to the Dask scheduler.*within 2 s"):
        fit_rff(store, executor=DaskExecutor(scheduler_address=address, connect_timeout=2), **KW)
    assert time.perf_counter() - tic < 15


# ---------------------------------------------------------------------------------------------------------------
# checkpoints, failures, hangs
# ---------------------------------------------------------------------------------------------------------------


def _die_after(round_: int, monkeypatch, then=None):
    die_after_checkpoint(round_, monkeypatch, then)


@pytest.mark.timeout(120)
def test_checkpoint_resume_gives_the_uninterrupted_model(client, store, tmp_path, monkeypatch):
    kw = dict(KW, local_steps=9)
    ref = fit_rff(store, executor=on(client), n_partitions=2, **kw)
    ck = tmp_path / "fit.ckpt"
    _die_after(1, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        fit_rff(store, executor=on(client), n_partitions=2, checkpoint=ck, **kw)
    monkeypatch.undo()
    saved = ckpt.load(ck)
    assert saved.round == 1 and len(saved.history) == 2
    assert saved.info["n_partitions"] == 2 and saved.info["random_state"] == KW["random_state"]
    # resume: P and the random state come from the checkpoint; the result is the same bits
    out = fit_rff(store, executor=on(client), checkpoint=ck, resume=True, **{**kw, "random_state": None})
    assert_same(out, ref)
    assert [h["loss"] for h in out.history] == [h["loss"] for h in ref.history]
    assert ckpt.load(ck).round == ref.plan.n_rounds - 1
    # in process too (same checkpoint format), and across executors
    _die_after(1, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        fit_rff(store, n_partitions=2, checkpoint=ck, **kw)
    monkeypatch.undo()
    assert_same(fit_rff(store, checkpoint=ck, resume=True, **kw), ref)


def test_resume_refuses_a_checkpoint_of_another_fit(store, tmp_path):
    ck = tmp_path / "fit.ckpt"
    kw = dict(KW, n_epochs=1)
    fit_rff(store, n_partitions=2, checkpoint=ck, **kw)
    with pytest.raises(ValueError, match=r"belongs to another fit: settings\.lam"):
        fit_rff(store, checkpoint=ck, resume=True, **{**kw, "lam": 0.5})
    with pytest.raises(ValueError, match="random_state"):
        fit_rff(store, checkpoint=ck, resume=True, **{**kw, "random_state": 8})
    with pytest.raises(ValueError, match="resume=True needs checkpoint"):
        fit_rff(store, resume=True, **kw)


@pytest.mark.timeout(120)
def test_failed_fit_leaves_last_good_checkpoint(client, tmp_path, monkeypatch):
    ds = tc.write_store(tmp_path / "data.zarr", n=1500, chunks=250)
    ck = tmp_path / "fit.ckpt"
    kw = dict(KW, local_steps=5)
    save, states = ckpt.save, {}

    def remember(path, state, r, history, info):
        states[r] = {k: np.array(v) for k, v in state.items()}

    monkeypatch.setattr(ckpt, "save", remember)
    fit_rff(ds, n_partitions=2, checkpoint=ck, **kw)  # the states an undisturbed fit has after each round
    monkeypatch.undo()

    def corrupt_store():
        for chunk in (tmp_path / "data.zarr" / "y" / "c").rglob("*"):
            if chunk.is_file():
                chunk.write_bytes(b"not a zstd frame")

    def save_then_corrupt(path, state, r, history, info):
        save(path, state, r, history, info)
        if r == 0:
            corrupt_store()

    monkeypatch.setattr(ckpt, "save", save_then_corrupt)
    with pytest.raises(Exception) as info:  # the task's own error (a codec error), not a retry loop
        fit_rff(ds, executor=on(client), n_partitions=2, checkpoint=ck, **kw)
    assert not isinstance(info.value, (RoundFailedError, RoundTimeoutError))
    saved = ckpt.load(ck)
    assert saved.round == 0
    np.testing.assert_array_equal(saved.state["B"], states[0]["B"])
    np.testing.assert_array_equal(saved.state["B_avg"], states[0]["B_avg"])
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".fit.ckpt")] == []


@pytest.mark.timeout(60)
def test_hung_round_is_detected_and_reported(client, store):
    tc.RELEASE.clear()
    hanging = tc.HangingDataset.of(store)
    tic = time.perf_counter()
    try:
        with pytest.raises(RoundTimeoutError, match=r"round 1 did not finish within 1\.5 s: partition 0"):
            fit_rff(hanging, executor=on(client, round_timeout=1.5), n_partitions=2, **dict(KW, precondition_rank=0))
    finally:
        tc.RELEASE.set()
    assert time.perf_counter() - tic < 20


# ---------------------------------------------------------------------------------------------------------------
# progress of a fit on the cluster (rffor.progress itself: tests/test_progress.py)
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_verbose_fit_says_what_runs_where(client, store, capsys):
    fit_rff(store, executor=on(client), n_partitions=2, verbose=1, **{**KW, "n_epochs": 2, "init": "closed_form"})
    err = capsys.readouterr().err
    assert "P = 2 partition(s)" in err and "DSGD: 2 round(s)" in err
    assert f"over all {store.n} curves" in err
    # the warm start: on which rows, computed where, and what the driver does
    assert f"warm start: square-loss closed form on {store.n} curves (all chunks" in err
    assert "sums computed where the data is, solved on the driver" in err and "reweighted closed form(s)" in err
    assert "preconditioner: rank" in err
    assert "round 2/2  loss" in err and "samples/s" in err and "elapsed" in err
    # MM, the default for robust losses: every pass over all rows where the data is, the step on the driver
    mm_kw = {**KW, "init": "closed_form", "rff_method": "mm"}
    fit_rff(store, executor=on(client), n_partitions=2, verbose=1, **mm_kw)
    err = capsys.readouterr().err
    assert f"MM: full-batch passes over all {store.n} curves (each pass: gradient sums computed by 2 partition" in err
    assert f"pass 1/{DEFAULTS.max_passes}  loss" in err and "objective" in err and "MM converged" in err


# ---------------------------------------------------------------------------------------------------------------
# the embedded LocalCluster (worker processes started and closed by the fit)
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_embedded_local_cluster(store):
    out = fit_rff(store, executor=make_executor(store), **KW)  # a store and no client: a LocalCluster
    P = out.n_partitions
    assert P == min(usable_cpus(), store.n_chunks)
    ref = fit_rff(store, n_partitions=P, **KW)
    assert_same(out, ref)


# ---------------------------------------------------------------------------------------------------------------
# cluster/ recipes: the configurations parse and match what their tools expect
# ---------------------------------------------------------------------------------------------------------------


def _schema_errors(value, schema: dict, path: str = "") -> list[str]:
    """A small OpenAPI v3 structural check (types, required, unknown fields, anyOf) of a Kubernetes object."""
    if "anyOf" in schema:
        if all(_schema_errors(value, s, path) for s in schema["anyOf"]):
            return [f"{path}: {value!r} matches none of {schema['anyOf']}"]
        return []
    kind = schema.get("type")
    types = {"object": dict, "array": list, "string": str, "integer": int, "boolean": bool, "number": (int, float)}
    if kind in types and not isinstance(value, types[kind]):
        return [f"{path}: expected {kind}, got {type(value).__name__}"]
    errors = []
    if isinstance(value, dict):
        props = schema.get("properties")
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{path}.{key}: required")
        for key, sub in value.items():
            if props is not None and key in props:
                errors += _schema_errors(sub, props[key], f"{path}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                errors += _schema_errors(sub, schema["additionalProperties"], f"{path}.{key}")
            elif props is not None and not schema.get("x-kubernetes-preserve-unknown-fields"):
                errors.append(f"{path}.{key}: unknown field")
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += _schema_errors(item, schema["items"], f"{path}[{i}]")
    return errors


@pytest.mark.parametrize("name", ["daskcluster.yaml", "daskjob.yaml"])
def test_kubernetes_manifests_match_the_operator_crds(name):
    import yaml

    dk = pytest.importorskip("dask_kubernetes")
    manifest = yaml.safe_load((tc.REPO / "cluster" / "kubernetes" / name).read_text())
    crds = os.path.join(
        os.path.dirname(dk.__file__), "operator", "deployment", "helm", "dask-kubernetes-operator", "crds", name
    )
    crd = yaml.safe_load(open(crds).read())
    assert manifest["apiVersion"] == f"{crd['spec']['group']}/v1" and manifest["kind"] == crd["spec"]["names"]["kind"]
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert _schema_errors(manifest["spec"], schema["properties"]["spec"], "spec") == []
    assert _schema_errors({"spec": {"worker": {"replicas": "8"}}}, schema["properties"]["spec"])  # the check bites


def test_slurm_jobqueue_config_renders_a_worker_job(monkeypatch, tmp_path):
    pytest.importorskip("dask_jobqueue")
    import importlib.util

    import dask

    spec = importlib.util.spec_from_file_location("rffor_slurm_launch", tc.REPO / "cluster" / "slurm" / "launch.py")
    launch = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launch)
    monkeypatch.delenv("DASK_CONFIG", raising=False)
    monkeypatch.delenv("RFFOR_CLUSTER_DIR", raising=False)
    saved = copy.deepcopy(dask.config.config)  # dask.config.get binds the dict itself: restore it in place
    try:
        launch.load_config()
        cluster = launch.make_cluster(
            0, scheduler_options={"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"}, log_directory=str(tmp_path)
        )
        try:
            script = cluster.job_script()
        finally:
            cluster.close()
    finally:
        dask.config.config.clear()
        dask.config.config.update(saved)
        os.environ.pop("RFFOR_CLUSTER_DIR", None)
    # the per-node layout: one worker process of a thread per core per job
    assert "--nthreads 32" in script and "--nworkers" not in script and "--nanny" in script
    assert 'export DASK_CONFIG="$RFFOR_CLUSTER_DIR/dask.yaml"' in script


def test_shipped_yaml_files_parse():
    import yaml

    for path in [
        tc.REPO / "cluster" / "dask.yaml",
        tc.REPO / "cluster" / "docker" / "compose.yaml",
        tc.REPO / "cluster" / "kubernetes" / "data-pvc.yaml",
        tc.REPO / "cluster" / "slurm" / "jobqueue.yaml",
    ]:
        assert isinstance(yaml.safe_load(path.read_text()), dict), path
    compose = yaml.safe_load((tc.REPO / "cluster" / "docker" / "compose.yaml").read_text())
    assert set(compose["services"]) == {"scheduler", "worker", "trainer"}
    env = yaml.safe_load((tc.REPO / "cluster" / "dask.yaml").read_text())["distributed"]["nanny"]["pre-spawn-environ"]
    assert env["MALLOC_MMAP_THRESHOLD_"] == 16777216


@pytest.mark.timeout(60)
def test_scheduler_without_workers_fails_clearly(store):
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, processes=False, **NO_DASHBOARD) as cluster:
        with pytest.raises(SchedulerUnreachableError, match="has no worker, and none joined within 1 s"):
            fit_rff(store, executor=DaskExecutor(scheduler_address=cluster.scheduler_address, connect_timeout=1), **KW)
