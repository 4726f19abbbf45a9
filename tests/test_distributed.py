"""Distributed training on Dask (rffor.distributed): oracle tests against the serial loop, failures, checkpoints, TLS.

Every fit compares bit for bit with :func:`rffor.solvers.rff.fit_rff` run in this process. Dask's Nanny workers run
one BLAS thread, so this module runs NumPy with one BLAS thread too (BLAS results depend on the thread count).
"""

from __future__ import annotations

import copy
import io
import json
import os
import signal
import threading
import time

import _cluster as tc  # tests/ is on sys.path (rootdir conftest)
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import rffor.data
from rffor import FunctionalRegressor
from rffor import distributed as rd
from rffor.kernels import Gaussian
from rffor.losses import Huber, Square
from rffor.solvers import rff
from rffor.solvers.dsgd import SGDState

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


def assert_same(a, b):
    assert a.coef.dtype == b.coef.dtype
    np.testing.assert_array_equal(a.coef, b.coef)


# ---------------------------------------------------------------------------------------------------------------
# where it runs
# ---------------------------------------------------------------------------------------------------------------


def test_use_dask_rule(store, tmp_path):
    arrays = (np.zeros((4, 2)), np.zeros((4, 3)))
    assert not rd.use_dask(arrays)
    assert not rd.use_dask(arrays, n_partitions=1)
    assert rd.use_dask(arrays, n_partitions=2)
    assert rd.use_dask(arrays, scheduler_address="tcp://127.0.0.1:8786")
    assert rd.use_dask(arrays, client=object())
    assert rd.use_dask(store)
    assert not rd.use_dask(store, n_partitions=1)
    one_chunk = tc.write_store(tmp_path / "one.zarr", n=50, chunks=50)
    assert not rd.use_dask(one_chunk)  # nothing to partition


def test_shipped_dask_config_is_a_default():
    import dask

    config = rd.configure_dask()
    assert config["distributed"]["nanny"]["pre-spawn-environ"]["MALLOC_MMAP_THRESHOLD_"] == 16777216
    assert dask.config.get("distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_") == 16777216
    with dask.config.set({"rffor.round-retries": 5}):  # the user's settings win
        rd.configure_dask()
        assert dask.config.get("rffor.round-retries") == 5


@pytest.mark.timeout(120)
def test_embedded_cluster_sets_worker_environment_and_closes():
    import dask

    def worker_settings():
        return (
            os.environ.get("MALLOC_MMAP_THRESHOLD_"),
            os.environ.get("MALLOC_TRIM_THRESHOLD_"),  # rffor's value replaces Dask's 65536
            os.environ.get("OPENBLAS_NUM_THREADS"),  # Dask's own default survives rffor's
            dask.config.get("distributed.admin.tick.interval"),  # rffor's survives Dask's (loaded before it)
        )

    with rd.connect(n_workers=1) as conn:
        env = conn.client.run(worker_settings)
        cluster = conn.cluster
    assert list(env.values()) == [("16777216", "67108864", "1", "1s")]
    assert cluster.status.name == "closed"


# ---------------------------------------------------------------------------------------------------------------
# oracle tests: the cluster computes what the serial loop computes
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_one_partition_on_cluster_equals_single_process(client, store):
    ref = rff.fit_rff(store, **KW)  # single-process DSGD, P = 1
    out = rd.fit(store, client=client, n_partitions=1, **KW)
    assert out.method == "sgd" and out.plan.n_partitions == 1
    assert_same(out, ref)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("in_memory", [False, True], ids=["zarr", "in-memory"])
def test_partitions_on_cluster_equal_serial_partition_loop(client, store, in_memory):
    ref = rff.fit_rff(store, n_partitions=3, local_steps=7, **KW)
    data = store
    if in_memory:
        X, Y = store.read()
        data = rff.ArrayData(X, Y, store.theta, chunk_rows=store.chunk_rows)
    out = rd.fit(data, client=client, n_partitions=3, local_steps=7, **KW)
    assert out.plan.n_partitions == 3 and out.plan.n_rounds > 3
    assert_same(out, ref)
    assert [h["loss"] for h in out.history] == [h["loss"] for h in ref.history]


@pytest.mark.timeout(120)
def test_preconditioned_partitions_on_cluster_equal_serial_loop(client, store):
    kw = dict(KW, precondition_rank=16)
    ref = rff.fit_rff(store, n_partitions=2, local_steps=7, **kw)
    out = rd.fit(store, client=client, n_partitions=2, local_steps=7, **kw)
    assert out.plan.config.precond is not None and out.plan.config.precond.rank == 16
    assert_same(out, ref)


@pytest.mark.timeout(120)
def test_estimator_on_cluster_equals_serial(client, store):
    kw = {k: v for k, v in KW.items() if k != "init"}
    est = FunctionalRegressor(solver="rff", client=client, n_partitions=2, init="zeros", **kw).fit(store)
    ref = rff.fit_rff(store, n_partitions=2, **KW)
    np.testing.assert_array_equal(est.coef_, ref.coef)
    X, _ = store.chunk(0)
    assert est.predict(X).shape == (X.shape[0], store.m)


@pytest.mark.timeout(120)
def test_averaged_local_sgd_converges_to_closed_form(client, store):
    kw = dict(KW, loss=Square(), lam=1e-2, n_epochs=40, step_decay=0.5)
    exact = rff.fit_rff(store, **kw)  # square loss: the one-pass closed form, the optimum of (P_rf)
    assert exact.method == "closed_form"
    sgd = rd.fit(store, client=client, n_partitions=4, rff_method="sgd", **kw)
    phi = exact.input_features
    Phi_theta = exact.output_features.transform(store.theta)
    J_star = rff.objective(store, exact.coef, phi, Phi_theta, Square(), kw["lam"])
    J = rff.objective(store, sgd.coef, phi, Phi_theta, Square(), kw["lam"])
    assert J_star <= J <= J_star * (1 + 1e-3), (J, J_star)


@pytest.mark.timeout(120)
def test_map_reduce_closed_form_equals_in_memory(client, store):
    phi, _, Phi_theta, _, _ = rd._feature_maps(store, 3, dict(KW))
    X, Y = store.read()
    mem = rff.feature_sums(rff.ArrayData(X, Y, store.theta, chunk_rows=store.chunk_rows), phi, Phi_theta)
    one = rd.dask_feature_sums(client, store, phi, Phi_theta, n_groups=1)
    np.testing.assert_array_equal(one.xx, mem.xx)
    np.testing.assert_array_equal(one.xy, mem.xy)
    assert (one.n, one.yy) == (mem.n, mem.yy)
    many = rd.dask_feature_sums(client, store, phi, Phi_theta, n_groups=5)
    np.testing.assert_allclose(many.xx, mem.xx, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(many.xy, mem.xy, rtol=1e-12, atol=1e-9)
    # the whole square-loss fit: map-reduce on the cluster vs in-memory closed form
    kw = dict(KW, loss=Square())
    ref = rff.fit_rff((X, Y, store.theta), **kw)
    out = rd.fit(store, client=client, **kw)
    assert out.method == ref.method == "closed_form"
    np.testing.assert_allclose(out.coef, ref.coef, rtol=1e-5, atol=1e-5 * np.abs(ref.coef).max())


@pytest.mark.timeout(120)
def test_closed_form_start_with_missing_outputs_then_dsgd(client, store_missing):
    # init_max_rows below the data: the preconditioner must come from the cluster's sums over all rows, as in the
    # serial fit, not from a second pass over one chunk on the driver
    kw = dict(KW, loss=Square(), n_epochs=2, init_max_rows=200)
    out = rd.fit(store_missing, client=client, n_partitions=2, **kw)
    ref = rff.fit_rff(store_missing, n_partitions=2, **kw)
    assert out.method == ref.method == "sgd"
    assert out.history[0]["round"] == -1
    np.testing.assert_allclose(out.coef, ref.coef, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------------------------------------------
# real processes
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_fit_through_scheduler_address_with_separate_processes(tmp_path, store):
    ref = rff.fit_rff(store, n_partitions=2, **KW)
    with tc.dask_processes(tmp_path, n_workers=2) as address:
        from distributed import Client

        with Client(address, set_as_default=False) as c:
            c.wait_for_workers(2, timeout=60)
            env = c.run(lambda: os.environ.get("MALLOC_MMAP_THRESHOLD_"))
        assert set(env.values()) == {"16777216"}  # cluster/dask.yaml reached the workers
        out = rd.fit(store, scheduler_address=address, **KW)  # P defaults to the 2 worker threads
        est = FunctionalRegressor(solver="rff", scheduler_address=address, **{k: v for k, v in KW.items()}).fit(store)
    assert out.plan.n_partitions == 2
    assert_same(out, ref)
    np.testing.assert_array_equal(est.coef_, ref.coef)


@pytest.mark.timeout(180)
def test_worker_killed_mid_round_gives_identical_model(tmp_path):
    from distributed import Client, LocalCluster

    ds = tc.write_store(tmp_path / "big.zarr", n=8000, d=6, m=24, chunks=500)
    kw = dict(KW, n_features_x=512, batch_size=32, n_epochs=6)
    ref = rff.fit_rff(ds, n_partitions=2, **kw)
    killed = {}
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", **NO_DASHBOARD) as cluster,
        Client(cluster, set_as_default=False) as c,
    ):
        pids = c.run(os.getpid)
        stop = threading.Event()

        def killer():  # SIGKILL the worker running partition 1 of round 2, mid-task
            while not stop.is_set() and not killed:
                for worker, keys in c.processing().items():
                    if any("-r2-p1-" in str(k) for k in keys) and worker in pids:
                        time.sleep(0.05)
                        os.kill(pids[worker], signal.SIGKILL)
                        killed[worker] = pids[worker]
                        return
                time.sleep(0.01)

        t = threading.Thread(target=killer, daemon=True)
        t.start()
        try:
            out = rd.fit(ds, client=c, n_partitions=2, **kw)
        finally:
            stop.set()
            t.join()
    assert killed, "the worker was not killed during the fit"
    assert out.plan.n_rounds >= 4
    assert_same(out, ref)


@pytest.mark.timeout(180)
def test_tls_scheduler_refuses_clients_without_certificate(tmp_path, store):
    from distributed.security import Security

    certs = tc.make_certificates(tmp_path / "certs")
    rogue = tc.make_certificates(tmp_path / "rogue")  # a certificate from another CA
    good = Security(
        tls_ca_file=certs["ca"], tls_client_cert=certs["cert"], tls_client_key=certs["key"], require_encryption=True
    )
    ref = rff.fit_rff(store, n_partitions=1, **KW)
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
            with pytest.raises(rd.SchedulerUnreachableError, match="could not connect"):
                rd.fit(store, scheduler_address=address, security=security, connect_timeout=5, **KW)
            assert time.perf_counter() - tic < 20
        with pytest.raises(rd.SchedulerUnreachableError):  # plain TCP to a TLS scheduler
            rd.fit(store, scheduler_address=address.replace("tls://", "tcp://"), connect_timeout=5, **KW)
        out = rd.fit(store, scheduler_address=address, security=good, **KW)
    assert_same(out, ref)


def test_unreachable_scheduler_fails_fast_with_clear_error(store):
    address = f"tcp://127.0.0.1:{tc.free_port()}"
    tic = time.perf_counter()
    with pytest.raises(rd.SchedulerUnreachableError, match=r"could not connect to the Dask scheduler.*within 2 s"):
        rd.fit(store, scheduler_address=address, connect_timeout=2, **KW)
    assert time.perf_counter() - tic < 15


# ---------------------------------------------------------------------------------------------------------------
# checkpoints, failures, hangs
# ---------------------------------------------------------------------------------------------------------------


class Interrupt(Exception):
    pass


@pytest.mark.timeout(120)
def test_checkpoint_resume_gives_the_uninterrupted_model(client, store, tmp_path):
    kw = dict(KW, local_steps=9)
    ref = rd.fit(store, client=client, n_partitions=2, **kw)
    ck = tmp_path / "fit.ckpt"

    def stop_after_two(r, state, history):
        if r == 1:
            raise Interrupt

    with pytest.raises(Interrupt):
        rd.fit(store, client=client, n_partitions=2, checkpoint=ck, on_round=stop_after_two, **kw)
    saved = rd.load_checkpoint(ck)
    assert saved.round == 1 and len(saved.history) == 2
    assert saved.info["n_partitions"] == 2 and saved.info["random_state"] == KW["random_state"]
    # resume: P and the random state come from the checkpoint; the result is the same bits
    out = rd.fit(store, client=client, checkpoint=ck, resume=True, **{**kw, "random_state": None})
    assert_same(out, ref)
    assert [h["loss"] for h in out.history] == [h["loss"] for h in ref.history]
    assert rd.load_checkpoint(ck).round == ref.plan.n_rounds - 1
    # in process too (same checkpoint format)
    with pytest.raises(Interrupt):
        rd.fit(store, distributed=False, n_partitions=2, checkpoint=ck, on_round=stop_after_two, **kw)
    out = rd.fit(store, distributed=False, checkpoint=ck, resume=True, **kw)
    assert_same(out, ref)


def test_resume_refuses_a_checkpoint_of_another_fit(store, tmp_path):
    ck = tmp_path / "fit.ckpt"
    kw = dict(KW, n_epochs=1)
    rd.fit(store, distributed=False, n_partitions=2, checkpoint=ck, **kw)
    with pytest.raises(ValueError, match=r"belongs to another fit: settings\.lam"):
        rd.fit(store, distributed=False, checkpoint=ck, resume=True, **{**kw, "lam": 0.5})
    with pytest.raises(ValueError, match="random_state"):
        rd.fit(store, distributed=False, checkpoint=ck, resume=True, **{**kw, "random_state": 8})
    with pytest.raises(ValueError, match="resume=True needs checkpoint"):
        rd.fit(store, resume=True, **kw)


@pytest.mark.parametrize(
    "key", ["map_partitions", "initial_state", "start_round", "history", "initial_sums", "on_message"]
)
def test_fit_refuses_the_arguments_it_manages(store, key):
    with pytest.raises(TypeError, match=f"{key} is managed by rffor.distributed.fit"):
        rd.fit(store, distributed=False, **KW, **{key: None})


@pytest.mark.timeout(120)
def test_failed_fit_leaves_last_good_checkpoint(client, tmp_path):
    ds = tc.write_store(tmp_path / "data.zarr", n=1500, chunks=250)
    ck = tmp_path / "fit.ckpt"
    kw = dict(KW, local_steps=5)
    states = {}

    def remember(r, state, history):
        states[r] = state.copy()

    rd.fit(ds, client=client, n_partitions=2, on_round=remember, **kw)

    def corrupt_after_first(r, state, history):
        if r == 0:
            for chunk in (tmp_path / "data.zarr" / "y" / "c").rglob("*"):
                if chunk.is_file():
                    chunk.write_bytes(b"not a zstd frame")

    with pytest.raises(Exception) as info:  # the task's own error (a codec error), not a retry loop
        rd.fit(ds, client=client, n_partitions=2, checkpoint=ck, on_round=corrupt_after_first, **kw)
    assert not isinstance(info.value, (rd.RoundFailedError, rd.RoundTimeoutError))
    saved = rd.load_checkpoint(ck)
    assert saved.round == 0
    np.testing.assert_array_equal(saved.state.B, states[0].B)
    np.testing.assert_array_equal(saved.state.B_avg, states[0].B_avg)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".fit.ckpt")] == []


@pytest.mark.timeout(60)
def test_hung_round_is_detected_and_reported(client, store):
    tc.RELEASE.clear()
    hanging = tc.HangingDataset.of(store)
    tic = time.perf_counter()
    try:
        with pytest.raises(rd.RoundTimeoutError, match=r"round 1 did not finish within 1\.5 s: partition 0"):
            # precondition_rank=0: the preconditioner's covariance pass reads the data on the driver, before rounds
            rd.fit(hanging, client=client, n_partitions=2, round_timeout=1.5, **dict(KW, precondition_rank=0))
    finally:
        tc.RELEASE.set()
    assert time.perf_counter() - tic < 20


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    ck = tmp_path / "a.ckpt"
    s1 = SGDState.from_coef(np.ones((4, 3)), "float32", t=5)
    rd.save_checkpoint(ck, s1, 0, [{"round": 0, "loss": float("nan")}], {"random_state": 1})
    before = ck.read_bytes()

    def broken_savez(f, **arrays):
        f.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", broken_savez)
    with pytest.raises(OSError, match="disk full"):
        rd.save_checkpoint(ck, SGDState.zeros(4, 3), 1, [], {})
    monkeypatch.undo()
    assert ck.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.ckpt"]
    back = rd.load_checkpoint(ck)
    assert back.round == 0 and back.state.t == 5 and np.isnan(back.history[0]["loss"])
    np.testing.assert_array_equal(back.state.B, s1.B)
    (tmp_path / "junk").write_text("hello")
    with pytest.raises(ValueError, match="not a readable rffor checkpoint"):
        rd.load_checkpoint(tmp_path / "junk")
    np.savez(tmp_path / "other.npz", a=np.zeros(2))
    with pytest.raises(ValueError, match="not an rffor checkpoint"):
        rd.load_checkpoint(tmp_path / "other.npz")


# ---------------------------------------------------------------------------------------------------------------
# progress
# ---------------------------------------------------------------------------------------------------------------


def test_progress_lines_and_bar():
    rec = {"round": 0, "loss": 0.125, "samples_per_s": 12345.6}
    out = io.StringIO()
    p = rd.RoundProgress(3, stream=out, interactive=False)
    p.update(rec, 1.5)
    p.update({**rec, "round": 1}, 75.0)
    lines = out.getvalue().splitlines()
    assert lines == [
        "[rffor] round 1/3  loss 0.125  12,346 samples/s  elapsed 1.5s",
        "[rffor] round 2/3  loss 0.125  12,346 samples/s  elapsed 1m15s",
    ]
    out = io.StringIO()
    p = rd.RoundProgress(2, stream=out, interactive=True, width=4)
    p.update(rec, 1.0)
    p.update({**rec, "round": 1}, 2.0)
    text = out.getvalue()
    assert text.startswith("\r[rffor] [##..] round 1/2") and "\r[rffor] [####] round 2/2" in text
    assert text.endswith("\n") and text.count("\n") == 1


@pytest.mark.timeout(120)
def test_verbose_fit_reports_every_round(client, store, capsys):
    rd.fit(store, client=client, n_partitions=2, verbose=1, **{**KW, "n_epochs": 2, "init": "closed_form"})
    err = capsys.readouterr().err
    assert "P = 2 partition(s)" in err and "DSGD: 2 round(s)" in err
    # the driver's own work before the rounds is reported too
    assert "warm start: closed form on" in err and "reweighting(s)" in err
    assert "preconditioner: rank" in err
    assert "round 2/2  loss" in err and "samples/s" in err and "elapsed" in err


# ---------------------------------------------------------------------------------------------------------------
# the embedded LocalCluster (worker processes started and closed by the fit)
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_embedded_local_cluster(store):
    out = rd.fit(store, **KW)  # a Dataset and no client: a LocalCluster sized to the machine
    P = out.plan.n_partitions
    assert P == min(rd._usable_cpus(), store.n_chunks)
    ref = rff.fit_rff(store, n_partitions=P, **KW)
    assert_same(out, ref)


def test_checkpoint_meta_is_json_without_pickle(tmp_path, store):
    ck = tmp_path / "x.ckpt"
    rd.fit(store, distributed=False, n_partitions=2, checkpoint=ck, **{**KW, "n_epochs": 1})
    with np.load(ck, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"][()]))
        assert z["B"].dtype == np.float32 and z["B_avg"].dtype == np.float64
    assert meta["format"] == rd.CHECKPOINT_FORMAT
    assert meta["info"]["fingerprint"]["data"]["n"] == store.n
    assert isinstance(rffor.data.open(store.url), rffor.data.Dataset)


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
    assert "--nthreads 1" in script and "--nworkers 32" in script and "--nanny" in script
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
        with pytest.raises(rd.SchedulerUnreachableError, match="has no worker, and none joined within 1 s"):
            rd.fit(store, scheduler_address=cluster.scheduler_address, connect_timeout=1, **KW)
