"""Checkpoints (rffor.checkpoint): plain named arrays and JSON, written atomically, refused for another fit."""

from __future__ import annotations

import json

import _cluster as tc  # tests/ is on sys.path (rootdir conftest)
import numpy as np
import pytest

import rffor.checkpoint as ckpt
import rffor.data
from rffor.kernels import Gaussian
from rffor.losses import Huber
from rffor.settings import RFSettings
from rffor.solvers.rff import fit_rff

KW = dict(
    loss=Huber(kappa=0.1, p=1), kernel_x=Gaussian(gamma=0.5), kernel_theta=Gaussian(gamma=30.0), lam=1e-3,
    n_features_x=128, batch_size=64, n_epochs=1, init="zeros", random_state=7, rff_method="sgd",
)  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return tc.write_store(tmp_path_factory.mktemp("ckpt") / "data.zarr", n=1200, chunks=200)


def test_any_named_arrays_round_trip_bit_for_bit(tmp_path):
    state = {"B": np.arange(6.0).reshape(2, 3), "B_prev": np.ones((2, 3), np.float32), "t": np.int64(4)}
    ckpt.save(tmp_path / "s.ckpt", state, 3, [{"round": 3}], {"random_state": 5})
    back = ckpt.load(tmp_path / "s.ckpt")
    assert set(back.state) == set(state) and back.round == 3 and back.info == {"random_state": 5}
    for k, v in state.items():
        np.testing.assert_array_equal(back.state[k], v)
        assert back.state[k].dtype == np.asarray(v).dtype and back.state[k].shape == np.asarray(v).shape


def test_verify_names_every_difference(store):
    a = ckpt.fingerprint(store, RFSettings(lam=1e-3).fingerprint(), 2, 7)
    b = ckpt.fingerprint(store, RFSettings(lam=1e-4, batch_size=8).fingerprint(), 3, 7)
    with pytest.raises(ValueError, match="settings.batch_size.*settings.lam") as info:
        ckpt.verify(ckpt.Checkpoint({}, 0, [], {"fingerprint": a}), b, "x.ckpt")
    assert "n_partitions: checkpoint 2, now 3" in str(info.value)
    assert ckpt.verify(ckpt.Checkpoint({}, 0, [], {"fingerprint": a}), a, "x.ckpt").round == 0


def test_fingerprint_leaves_out_what_does_not_change_the_result():
    assert RFSettings(feature_cache=0).fingerprint() == RFSettings().fingerprint()
    assert RFSettings(split_every=2).fingerprint() != RFSettings().fingerprint()


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    ck = tmp_path / "a.ckpt"
    s1 = {"B": np.ones((4, 3), np.float32), "B_avg": np.ones((4, 3)), "t": np.int64(5)}
    ckpt.save(ck, s1, 0, [{"round": 0, "loss": float("nan")}], {"random_state": 1})
    before = ck.read_bytes()

    def broken_savez(f, **arrays):
        f.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", broken_savez)
    with pytest.raises(OSError, match="disk full"):
        ckpt.save(ck, {"B": np.zeros((4, 3))}, 1, [], {})
    monkeypatch.undo()
    assert ck.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.ckpt"]
    back = ckpt.load(ck)
    assert back.round == 0 and int(back.state["t"]) == 5 and np.isnan(back.history[0]["loss"])
    np.testing.assert_array_equal(back.state["B"], s1["B"])
    assert back.state["B"].dtype == np.float32 and back.state["B_avg"].dtype == np.float64
    (tmp_path / "junk").write_text("hello")
    with pytest.raises(ValueError, match="not a readable rffor checkpoint"):
        ckpt.load(tmp_path / "junk")
    np.savez(tmp_path / "other.npz", a=np.zeros(2))
    with pytest.raises(ValueError, match="not an rffor checkpoint"):
        ckpt.load(tmp_path / "other.npz")


def test_checkpoint_meta_is_json_without_pickle(tmp_path, store):
    ck = tmp_path / "x.ckpt"
    fit_rff(store, n_partitions=2, checkpoint=ck, **KW)
    with np.load(ck, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"][()]))
        assert z["state_B"].dtype == np.float32 and z["state_B_avg"].dtype == np.float64
    assert meta["format"] == ckpt.CHECKPOINT_FORMAT
    assert meta["info"]["fingerprint"]["data"]["n"] == store.n
    assert isinstance(rffor.data.open(store.url), rffor.data.Dataset)
