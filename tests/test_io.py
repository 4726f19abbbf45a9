"""Saved models (rffor.io): exact round trips, refusal of foreign, truncated and corrupted files, atomic saves."""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import stat
import zipfile

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

import rffor
import rffor.io as rio
from rffor import FunctionalRegressor, load
from rffor.datasets import make_synthetic
from rffor.kernels import Gaussian, Laplacian
from rffor.losses import EpsilonInsensitive, Huber, Square

LOSSES = [
    Square(),
    Huber(kappa=0.3, p=1),
    Huber(kappa=0.3, p=2),
    EpsilonInsensitive(epsilon=0.05, p=2),
    EpsilonInsensitive(epsilon=0.05, p=math.inf),
]
LOSS_IDS = ["square", "huber1", "huber2", "eps2", "epsinf"]


@pytest.fixture(scope="module")
def data():
    return make_synthetic(30, 8, m=12, p_in=6, nonlinear=True, random_state=0)


@pytest.fixture(scope="module")
def fitted(data):
    return FunctionalRegressor(Huber(kappa=0.2, p=2), lam=1e-3, kernel_x=Gaussian(0.1)).fit(data.X_train, data.Y_train)


def _assert_same_predictions(a, b, X, theta_off=(0.05, 0.5, 0.93)):
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    np.testing.assert_array_equal(a.predict(X, theta=np.array(theta_off)), b.predict(X, theta=np.array(theta_off)))


# ---------------------------------------------------------------------------------------------------------------
# round trips
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("loss", LOSSES, ids=LOSS_IDS)
@pytest.mark.parametrize("solver", ["admm", "apgd"])
def test_round_trip_exact(tmp_path, data, loss, solver):
    est = FunctionalRegressor(loss, solver=solver, lam=1e-3, kernel_theta=Laplacian(5.0), tol=1e-4)
    est.fit(data.X_train, data.Y_train)
    path = est.save(tmp_path / "model.rffor")
    assert os.path.isfile(path) and zipfile.is_zipfile(path)
    loaded = load(path)
    assert isinstance(loaded, FunctionalRegressor)
    assert loaded.get_params() == est.get_params()
    assert loaded.loss_ == est.loss_ and loaded.solver_ == solver
    assert loaded.kernel_x_ == est.kernel_x_ and loaded.kernel_theta_ == est.kernel_theta_
    np.testing.assert_array_equal(loaded.dual_coef_, est.dual_coef_)
    np.testing.assert_array_equal(loaded.objective_history_, est.objective_history_)
    assert loaded.n_iter_ == est.n_iter_ and loaded.duality_gap_ == est.duality_gap_
    _assert_same_predictions(est, loaded, data.X_test)
    assert loaded.score(data.X_test, data.Y_test) == est.score(data.X_test, data.Y_test)


@pytest.mark.parametrize("loss", [Square(), Huber(0.3, p=2), EpsilonInsensitive(0.05, p=2)], ids=str)
def test_round_trip_eigen_representation(tmp_path, data, loss):
    est = FunctionalRegressor(loss, solver="apgd", representation="eigen", n_eig=5, lam=1e-3, tol=1e-4)
    est.fit(data.X_train, data.Y_train)
    loaded = load(est.save(tmp_path / "eigen.rffor"))
    assert loaded.dual_coef_.shape == (30, 5)
    _assert_same_predictions(est, loaded, data.X_test)


def test_round_trip_directory_format(tmp_path, fitted, data):
    path = fitted.save(tmp_path / "model_dir", format="directory")
    assert os.path.isdir(path)
    assert sorted(os.listdir(path)) == ["arrays", "metadata.json"]
    meta = json.loads((tmp_path / "model_dir" / "metadata.json").read_text())
    assert meta["format"] == "rffor-model" and meta["format_version"] == rio.FORMAT_VERSION
    assert meta["rffor_version"] == rffor.__version__
    assert meta["fitted"]["solver"] == "admm" and meta["fitted"]["loss"] == {"name": "huber", "kappa": 0.2, "p": 2}
    _assert_same_predictions(fitted, load(path), data.X_test)
    # saving again over a model directory replaces it (default format follows the existing directory)
    fitted.save(path)
    assert os.path.isdir(path) and not [f for f in os.listdir(tmp_path) if f.startswith(".")]


def test_one_dimensional_outputs_round_trip(tmp_path, data):
    est = FunctionalRegressor(lam=1e-2).fit(data.X_train, data.Y_train[:, 3])
    loaded = load(est.save(tmp_path / "scalar.rffor"))
    assert loaded.predict(data.X_test).shape == (8,)
    np.testing.assert_array_equal(loaded.predict(data.X_test), est.predict(data.X_test))


def test_default_kernels_and_missing_outputs(tmp_path, data):
    Y = data.Y_train.copy()
    Y[0, :4] = np.nan
    est = FunctionalRegressor(Huber(0.5, p=1), lam=1e-2).fit(data.X_train, Y, theta=np.linspace(2, 5, 12))
    loaded = load(est.save(tmp_path / "m.rffor"))
    assert loaded.get_params()["kernel_x"] is None and loaded.kernel_x_ == est.kernel_x_
    np.testing.assert_array_equal(loaded.theta_, np.linspace(2, 5, 12))
    _assert_same_predictions(est, loaded, data.X_test, theta_off=(2.5, 4.1))


def test_runtime_parameters_are_not_saved(tmp_path, data):
    est = FunctionalRegressor(lam=1e-2, checkpoint=str(tmp_path / "ck"), random_state=np.random.RandomState(0))
    est.fit(data.X_train, data.Y_train)
    path = est.save(tmp_path / "m.rffor")
    meta = rio.read_metadata(path)
    assert set(meta["not_saved"]) == {"checkpoint", "random_state"}
    loaded = load(path)
    assert loaded.checkpoint is None and loaded.random_state is None and loaded.lam == 1e-2


def test_loaded_model_refits_and_clones(tmp_path, fitted, data):
    from sklearn.base import clone

    loaded = load(fitted.save(tmp_path / "m.rffor"))
    again = clone(loaded).fit(data.X_train, data.Y_train)
    np.testing.assert_allclose(again.predict(data.X_test), fitted.predict(data.X_test))


def test_save_unfitted_raises(tmp_path):
    with pytest.raises(NotFittedError):
        FunctionalRegressor().save(tmp_path / "m.rffor")
    assert not os.listdir(tmp_path)


def test_saved_file_honours_umask(tmp_path, fitted):
    old = os.umask(0o022)
    try:
        path = fitted.save(tmp_path / "m.rffor")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644


def test_read_metadata_and_is_model(tmp_path, fitted):
    path = fitted.save(tmp_path / "m.rffor")
    meta = rio.read_metadata(path)
    assert set(meta["arrays"]) == {"theta", "x_fit", "dual_coef", "w", "w_grid", "objective_history"}
    assert rio.is_model(path)
    (tmp_path / "other.txt").write_text("hello")
    assert not rio.is_model(tmp_path / "other.txt")
    assert not rio.is_model(tmp_path / "missing")


# ---------------------------------------------------------------------------------------------------------------
# files that are not (valid) models
# ---------------------------------------------------------------------------------------------------------------


def _rewrite_zip(src, dst, *, meta=None, members=None, drop=()):
    """Copy a model zip, replacing metadata (a dict) and/or members (name -> bytes), dropping some."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            if info.filename in drop:
                continue
            data = zin.read(info.filename)
            if info.filename == "metadata.json" and meta is not None:
                data = json.dumps(meta).encode()
            if members and info.filename in members:
                data = members.pop(info.filename)
            zout.writestr(info.filename, data)
        for name, data in (members or {}).items():
            zout.writestr(name, data)
    return dst


def test_missing_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="no model"):
        load(tmp_path / "nothing.rffor")


@pytest.mark.parametrize("content", [b"", b"not a model at all", b"PK\x03\x04garbage", b"\x80\x04K\x01."])
def test_foreign_bytes(tmp_path, content):
    path = tmp_path / "x.rffor"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="not an rffor model"):
        load(path)


def test_foreign_zip(tmp_path):
    path = tmp_path / "other.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("hello.txt", "hi")
    with pytest.raises(ValueError, match="metadata.json"):
        load(path)


def test_npz_is_not_a_model(tmp_path):
    path = tmp_path / "arrays.npz"
    np.savez(path, a=np.zeros(3))
    with pytest.raises(ValueError, match="metadata.json"):
        load(path)


def test_directory_that_is_not_a_model(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(ValueError, match="no metadata.json"):
        load(tmp_path / "d")


def test_other_format_name(tmp_path, fitted):
    src = fitted.save(tmp_path / "m.rffor")
    meta = rio.read_metadata(src)
    meta["format"] = "someone-elses-model"
    bad = _rewrite_zip(src, tmp_path / "bad.rffor", meta=meta)
    with pytest.raises(ValueError, match="not an rffor model: its format is 'someone-elses-model'"):
        load(bad)


@pytest.mark.parametrize("version,hint", [(2, "upgrade rffor"), (0, "older rffor"), ("1", "must be an integer")])
def test_other_format_version(tmp_path, fitted, version, hint):
    src = fitted.save(tmp_path / "m.rffor")
    meta = rio.read_metadata(src)
    meta["format_version"] = version
    bad = _rewrite_zip(src, tmp_path / "bad.rffor", meta=meta)
    with pytest.raises(ValueError, match=hint):
        load(bad)


def test_invalid_json_metadata(tmp_path, fitted):
    path = fitted.save(tmp_path / "d", format="directory")
    (tmp_path / "d" / "metadata.json").write_text('{"format": "rffor-model", ')
    with pytest.raises(ValueError, match="not valid JSON"):
        load(path)


@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.5, 0.9, 0.999])
def test_truncated_file(tmp_path, fitted, fraction):
    src = fitted.save(tmp_path / "m.rffor")
    data = open(src, "rb").read()
    bad = tmp_path / "truncated.rffor"
    bad.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(ValueError, match="not an rffor model|truncated|corrupted"):
        load(bad)


def test_corrupted_array_bytes(tmp_path, fitted):
    path = fitted.save(tmp_path / "d", format="directory")
    target = tmp_path / "d" / "arrays" / "w_grid.npy"
    raw = bytearray(target.read_bytes())
    raw[-3] ^= 0xFF
    target.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="'w_grid' does not match its checksum"):
        load(path)


def test_truncated_array_in_directory(tmp_path, fitted):
    path = fitted.save(tmp_path / "d", format="directory")
    target = tmp_path / "d" / "arrays" / "x_fit.npy"
    target.write_bytes(target.read_bytes()[:100])
    with pytest.raises(ValueError, match="x_fit"):
        load(path)


def test_missing_array(tmp_path, fitted):
    path = fitted.save(tmp_path / "d", format="directory")
    os.remove(tmp_path / "d" / "arrays" / "dual_coef.npy")
    with pytest.raises(ValueError, match="incomplete: member 'arrays/dual_coef.npy' is missing"):
        load(path)


def test_inconsistent_shapes(tmp_path, fitted):
    src = fitted.save(tmp_path / "m.rffor")
    w = np.zeros((3, 3))
    buf = io.BytesIO()
    np.save(buf, w)
    data = buf.getvalue()
    meta = rio.read_metadata(src)
    meta["arrays"]["w"] = {"dtype": "<f8", "shape": [3, 3], "sha256": hashlib.sha256(data).hexdigest()}
    bad = _rewrite_zip(src, tmp_path / "bad.rffor", meta=meta, members={"arrays/w.npy": data})
    with pytest.raises(ValueError, match="corrupted: the prediction weights"):
        load(bad)


def test_unknown_parameter_and_bad_specs(tmp_path, fitted):
    src = fitted.save(tmp_path / "m.rffor")
    meta = rio.read_metadata(src)
    meta["params"]["evil"] = "os.system('x')"
    with pytest.raises(ValueError, match="unknown estimator parameters"):
        load(_rewrite_zip(src, tmp_path / "b1.rffor", meta=meta))
    meta = rio.read_metadata(src)
    meta["fitted"]["loss"] = {"name": "__import__"}
    with pytest.raises(ValueError, match="corrupted"):
        load(_rewrite_zip(src, tmp_path / "b2.rffor", meta=meta))
    meta = rio.read_metadata(src)
    meta["fitted"]["solver"] = "pickle"
    with pytest.raises(ValueError, match="unknown solver"):
        load(_rewrite_zip(src, tmp_path / "b3.rffor", meta=meta))


class _Boom:
    """Unpickling this would create a file: a model file must never get that far."""

    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        return (open, (self.target, "w"))


@pytest.mark.parametrize("declared", ["|O", "<f8"])
def test_pickled_payload_is_never_executed(tmp_path, fitted, declared):
    src = fitted.save(tmp_path / "m.rffor")
    sentinel = tmp_path / "pwned"
    payload = np.empty(1, dtype=object)
    payload[0] = _Boom(str(sentinel))
    buf = io.BytesIO()
    np.save(buf, payload, allow_pickle=True)
    data = buf.getvalue()
    meta = rio.read_metadata(src)
    meta["arrays"]["w"] = {"dtype": declared, "shape": [1], "sha256": hashlib.sha256(data).hexdigest()}
    bad = _rewrite_zip(src, tmp_path / "bad.rffor", meta=meta, members={"arrays/w.npy": data})
    with pytest.raises(ValueError):
        load(bad)
    assert not sentinel.exists()


def test_oversized_member_is_not_read(tmp_path, fitted):
    src = fitted.save(tmp_path / "m.rffor")
    meta = rio.read_metadata(src)
    meta["arrays"]["theta"]["shape"] = [1]  # declares 8 bytes; the member is bigger than that plus a header
    huge = b"\x00" * (rio._NPY_HEADER_SLACK + 1000)
    bad = _rewrite_zip(src, tmp_path / "bad.rffor", meta=meta, members={"arrays/theta.npy": huge})
    with pytest.raises(ValueError, match="member 'arrays/theta.npy' is .* bytes, expected"):
        load(bad)


# ---------------------------------------------------------------------------------------------------------------
# atomic saves
# ---------------------------------------------------------------------------------------------------------------


def _failing_after(monkeypatch, name, calls):
    real = getattr(rio, name)
    count = {"n": 0}

    def fail(*args, **kwargs):
        count["n"] += 1
        if count["n"] > calls:
            raise OSError("disk full (simulated)")
        return real(*args, **kwargs)

    monkeypatch.setattr(rio, name, fail)


@pytest.mark.parametrize("fmt,hook", [("zip", "_zipinfo"), ("directory", "_write_file")])
def test_failed_save_leaves_nothing(tmp_path, fitted, monkeypatch, fmt, hook):
    _failing_after(monkeypatch, hook, 2)
    with pytest.raises(OSError, match="simulated"):
        fitted.save(tmp_path / "m.rffor", format=fmt)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("fmt,hook", [("zip", "_zipinfo"), ("directory", "_write_file")])
def test_failed_save_keeps_the_previous_model(tmp_path, fitted, data, monkeypatch, fmt, hook):
    path = tmp_path / "m.rffor"
    fitted.save(path, format=fmt)
    before = fitted.predict(data.X_test)
    other = FunctionalRegressor(lam=1.0).fit(data.X_train, data.Y_train)
    _failing_after(monkeypatch, hook, 2)
    with pytest.raises(OSError, match="simulated"):
        other.save(path, format=fmt)
    assert sorted(os.listdir(tmp_path)) == ["m.rffor"]
    np.testing.assert_array_equal(load(path).predict(data.X_test), before)


def test_save_replaces_an_existing_model_file(tmp_path, fitted, data):
    path = tmp_path / "m.rffor"
    FunctionalRegressor(lam=1.0).fit(data.X_train, data.Y_train).save(path)
    fitted.save(path)
    np.testing.assert_array_equal(load(path).predict(data.X_test), fitted.predict(data.X_test))
    assert os.listdir(tmp_path) == ["m.rffor"]


def test_save_refuses_to_replace_a_foreign_directory(tmp_path, fitted):
    target = tmp_path / "photos"
    target.mkdir()
    (target / "cat.jpg").write_bytes(b"meow")
    with pytest.raises(ValueError, match="directory"):
        fitted.save(target)
    with pytest.raises(ValueError, match="not an rffor model directory"):
        fitted.save(target, format="directory")
    assert (target / "cat.jpg").read_bytes() == b"meow"


def test_bad_format_argument(tmp_path, fitted):
    with pytest.raises(ValueError, match="format must be"):
        fitted.save(tmp_path / "m", format="pickle")


# ---------------------------------------------------------------------------------------------------------------
# random-feature models
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("loss", LOSSES, ids=LOSS_IDS)
@pytest.mark.parametrize("output_features", ["exact", "rff"])
def test_round_trip_rff(tmp_path, data, loss, output_features):
    est = FunctionalRegressor(
        loss,
        solver="rff",
        lam=1e-3,
        n_features_x=40,
        output_features=output_features,
        n_features_theta=20 if output_features == "rff" else None,
        n_epochs=1,
        batch_size=8,
        random_state=3,
    )
    est.fit(data.X_train, data.Y_train)
    loaded = load(est.save(tmp_path / "rff.rffor"))
    assert loaded.solver_ == "rff"
    np.testing.assert_array_equal(loaded.coef_, est.coef_)
    _assert_same_predictions(est, loaded, data.X_test)


def test_rff_features_are_stored_not_regenerated(tmp_path, data, monkeypatch):
    est = FunctionalRegressor(solver="rff", n_features_x=40, output_features="rff", n_features_theta=20,
                              input_features="rff", random_state=5).fit(data.X_train, data.Y_train)  # fmt: skip
    path = est.save(tmp_path / "rff.rffor")
    meta = rio.read_metadata(path)
    assert meta["fitted"]["solver_state"]["random_state"] == 5
    assert {"input_frequencies", "output_frequencies", "coef"} <= set(meta["arrays"])

    def no_draws(self, *args, **kwargs):
        raise AssertionError("a loaded model must not draw frequencies again")

    monkeypatch.setattr(Gaussian, "sample_frequencies", no_draws)
    loaded = load(path)
    _assert_same_predictions(est, loaded, data.X_test)


def test_rff_inconsistent_arrays(tmp_path, data):
    est = FunctionalRegressor(solver="rff", n_features_x=40, input_features="rff", random_state=0)
    est.fit(data.X_train, data.Y_train)
    src = est.save(tmp_path / "rff.rffor")
    W = np.zeros((3, 3), dtype=np.float32)
    buf = io.BytesIO()
    np.save(buf, W)
    raw = buf.getvalue()
    meta = rio.read_metadata(src)
    meta["arrays"]["input_frequencies"] = {"dtype": "<f4", "shape": [3, 3], "sha256": hashlib.sha256(raw).hexdigest()}
    bad = _rewrite_zip(src, tmp_path / "bad.rffor", meta=meta, members={"arrays/input_frequencies.npy": raw})
    with pytest.raises(ValueError, match="corrupted: feature map array .frequencies. has shape"):
        load(bad)
    meta = rio.read_metadata(src)
    meta["fitted"]["solver_state"]["output_features"]["kind"] = "wavelets"
    with pytest.raises(ValueError, match="unknown feature map kind .wavelets."):
        load(_rewrite_zip(src, tmp_path / "bad2.rffor", meta=meta))


def test_rff_fitted_on_a_dataset_round_trip(tmp_path, data):
    import rffor.data

    ds = rffor.data.write(tmp_path / "train.zarr", data.X_train, data.Y_train, data.theta, chunks=10)
    est = FunctionalRegressor(Huber(0.2, p=1), solver="rff", n_features_x=40, n_epochs=1, batch_size=8,
                              n_partitions=1, random_state=0).fit(ds)  # fmt: skip
    loaded = load(est.save(tmp_path / "m.rffor"))
    _assert_same_predictions(est, loaded, data.X_test)
