"""Tests of the Zarr dataset format (rffor.data): round trips, validation, atomic writes."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import pickle
import uuid

import dask
import dask.array as da
import numpy as np
import pytest
import zarr

from rffor import data as rdata
from rffor.chunked import partition_chunks

# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def make_xy(n=53, d=3, m=11, seed=0, nan_frac=0.2):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    Y = rng.standard_normal((n, m))
    mask = rng.random((n, m)) < nan_frac
    mask[:, 0] = False  # every curve keeps an observed value
    Y[mask] = np.nan
    return X, Y


def build_store(
    path,
    *,
    n=20,
    d=3,
    m=5,
    c=8,
    x=None,
    y=None,
    theta=None,
    attrs=None,
    x_chunks=None,
    y_chunks=None,
    x_dtype="float32",
    y_dtype="float32",
    skip=(),
):
    """Write a store with zarr directly (valid by default; override pieces to break it)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, d)) if x is None else x
    y = rng.standard_normal((n, m)) if y is None else y
    theta = np.linspace(0, 1, y.shape[1]) if theta is None else theta
    group = zarr.open_group(zarr.storage.LocalStore(str(path)), mode="w", zarr_format=3)
    if "x" not in skip:
        group.create_array("x", data=np.asarray(x, dtype=x_dtype), chunks=x_chunks or (c, x.shape[1]))
    if "y" not in skip:
        group.create_array("y", data=np.asarray(y, dtype=y_dtype), chunks=y_chunks or (c, y.shape[1]))
    if "theta" not in skip:
        group.create_array("theta", data=np.asarray(theta))
    base = {"rffor_format": 1, "n": x.shape[0], "d": x.shape[1], "m": y.shape[1]}
    base.update(attrs or {})
    group.attrs.update({k: v for k, v in base.items() if v is not None})
    return str(path)


def siblings(path):
    """Names in the destination's parent directory (to spot temporary leftovers)."""
    return sorted(os.listdir(os.path.dirname(str(path))))


def _read_chunk_in_child(ds, i):
    X_i, Y_i = ds.chunk(i)
    return os.getpid(), X_i, Y_i


# --------------------------------------------------------------------------------------------
# round trips
# --------------------------------------------------------------------------------------------


def test_numpy_round_trip_bit_identical(tmp_path):
    X, Y = make_xy(n=53, d=3, m=11)
    ds = rdata.write(tmp_path / "a.zarr", X, Y, chunks=10)
    assert (ds.n, ds.d, ds.m, ds.chunk_rows, ds.n_chunks) == (53, 3, 11, 10, 6)
    assert ds.dtype == np.float32
    Xr, Yr = ds.read()
    assert Xr.dtype == np.float32 and Yr.dtype == np.float32
    np.testing.assert_array_equal(Xr, X.astype(np.float32))
    np.testing.assert_array_equal(Yr, Y.astype(np.float32))  # NaN positions equal too
    assert np.array_equal(np.isnan(Yr), np.isnan(Y))

    group = zarr.open_group(str(tmp_path / "a.zarr"), mode="r")
    assert group["x"].chunks == (10, 3) and group["y"].chunks == (10, 11)
    assert group["x"].shards is None
    assert group["theta"].dtype == np.float64
    assert dict(group.attrs) == {"rffor_format": 1, "n": 53, "d": 3, "m": 11}

    # last, partial chunk
    assert ds.chunk_slice(5) == slice(50, 53)
    X5, Y5 = ds.chunk(5)
    assert X5.shape == (3, 3) and Y5.shape == (3, 11)
    np.testing.assert_array_equal(Y5, Y[50:].astype(np.float32))
    np.testing.assert_array_equal(ds.chunk(-1)[0], X5)


def test_dask_round_trip_misaligned_chunks(tmp_path):
    X, Y = make_xy(n=101, d=4, m=9)
    Xd = da.from_array(X, chunks=(7, 3))  # misaligned with the zarr rows and split by column
    Yd = da.from_array(Y, chunks=(13, 4))
    ds = rdata.write(tmp_path / "b.zarr", Xd, Yd, chunks=10)
    assert ds.chunk_rows == 10 and ds.n_chunks == 11
    Xr, Yr = ds.read()
    np.testing.assert_array_equal(Xr, X.astype(np.float32))
    np.testing.assert_array_equal(Yr, Y.astype(np.float32))
    group = zarr.open_group(str(tmp_path / "b.zarr"), mode="r")
    assert group["x"].chunks == (10, 4) and group["y"].chunks == (10, 9)


def test_dask_round_trip_sync_scheduler_and_mixed_inputs(tmp_path):
    X, Y = make_xy(n=40, d=2, m=6)
    with dask.config.set(scheduler="sync"):
        ds = rdata.write(tmp_path / "c.zarr", X, da.from_array(Y, chunks=(9, 6)), chunks=8)
    Xr, Yr = ds.read()
    np.testing.assert_array_equal(Xr, X.astype(np.float32))
    np.testing.assert_array_equal(Yr, Y.astype(np.float32))


def test_float64_and_memmap_input(tmp_path):
    X, Y = make_xy(n=30, d=2, m=4)
    mm = np.lib.format.open_memmap(tmp_path / "y.npy", mode="w+", dtype=np.float64, shape=Y.shape)
    mm[:] = Y
    mm.flush()
    ds = rdata.write(tmp_path / "d.zarr", X, mm, chunks=7, dtype="float64")
    assert ds.dtype == np.float64
    Xr, Yr = ds.read()
    np.testing.assert_array_equal(Xr, X)
    np.testing.assert_array_equal(Yr, Y)


def test_theta_default_and_custom(tmp_path):
    X, Y = make_xy(n=10, m=6)
    ds = rdata.write(tmp_path / "t1.zarr", X, Y)
    np.testing.assert_array_equal(ds.theta, np.linspace(0, 1, 6))
    theta = np.array([0.0, 0.1, 0.5, 0.7, 2.0, 3.5])
    ds = rdata.write(tmp_path / "t2.zarr", X, Y, theta=theta)
    assert ds.theta.dtype == np.float64
    np.testing.assert_array_equal(ds.theta, theta)


def test_default_chunk_rows(tmp_path):
    m = 1000  # 8e6 // (4 * 1000) = 2000 rows per chunk
    X = np.zeros((4500, 1))
    Y = np.ones((4500, m))
    ds = rdata.write(tmp_path / "big.zarr", X, Y)
    assert ds.chunk_rows == 2000 and ds.n_chunks == 3
    assert ds.chunk(2)[1].shape == (500, m)
    small = rdata.write(tmp_path / "small.zarr", X[:5], Y[:5])
    assert small.chunk_rows == 5 and small.n_chunks == 1  # capped at n


def test_access_methods(tmp_path):
    X, Y = make_xy(n=23, d=2, m=3)
    ds = rdata.write(tmp_path / "e.zarr", X, Y, chunks=5)
    X32, Y32 = X.astype(np.float32), Y.astype(np.float32)
    for prefetch in (True, False):
        seen = list(ds.iter_chunks(prefetch=prefetch))
        assert [i for i, _, _ in seen] == [0, 1, 2, 3, 4]
        np.testing.assert_array_equal(np.concatenate([x for _, x, _ in seen]), X32)
        np.testing.assert_array_equal(np.concatenate([y for _, _, y in seen]), Y32)
    picked = list(ds.iter_chunks([3, 1]))
    assert [i for i, _, _ in picked] == [3, 1]
    np.testing.assert_array_equal(picked[0][1], X32[15:20])
    Xr, Yr = ds.read(slice(4, 12))
    np.testing.assert_array_equal(Xr, X32[4:12])
    np.testing.assert_array_equal(Yr, Y32[4:12])
    xd, yd = ds.to_dask()
    assert xd.chunks[0] == (5, 5, 5, 5, 3) and yd.shape == (23, 3)
    np.testing.assert_array_equal(yd.compute(), Y32)
    with pytest.raises(IndexError):
        ds.chunk(5)
    with pytest.raises(TypeError):
        ds.read([1, 2])
    assert "n=23" in repr(ds) and "chunk_rows=5" in repr(ds)
    assert ds.validate(full=True) is ds


def test_partition_is_the_protocols(tmp_path):
    """A store's partitions are :func:`rffor.chunked.partition_chunks` of its chunks (tested in test_chunked.py),
    with its short last chunk."""
    ds = rdata.write(tmp_path / "p.zarr", np.zeros((103, 1)), np.ones((103, 2)), chunks=10)
    assert ds.n_chunks == 11 and ds.chunk_slice(10) == slice(100, 103)
    for P in (1, 2, 3, 4, 7, 50):
        assert ds.partition(P) == partition_chunks(11, P)


def test_partition_rejects_bad_count(tmp_path):
    ds = rdata.write(tmp_path / "q.zarr", np.zeros((4, 1)), np.ones((4, 2)), chunks=2)
    with pytest.raises(ValueError, match="n_partitions"):
        ds.partition(0)


def test_dataset_pickles_and_reads_in_another_process(tmp_path):
    X, Y = make_xy(n=30, d=2, m=4)
    ds = rdata.write(tmp_path / "f.zarr", X, Y, chunks=8)
    ds.chunk(0)  # open (and cache) handles in this process first
    blob = pickle.dumps(ds)
    assert len(blob) < 2000  # metadata only, no array data or open handles
    clone = pickle.loads(blob)
    assert clone == ds and hash(clone) == hash(ds)
    assert dask.base.tokenize(clone) == dask.base.tokenize(ds)
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: nothing inherited
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        pid, X2, Y2 = pool.submit(_read_chunk_in_child, ds, 3).result(timeout=120)
    assert pid != os.getpid()
    np.testing.assert_array_equal(X2, X[24:].astype(np.float32))
    np.testing.assert_array_equal(Y2, Y[24:].astype(np.float32))


def test_memory_url_round_trip():
    url = f"memory://rffor-test-{uuid.uuid4().hex}/ds.zarr"
    X, Y = make_xy(n=25, d=2, m=5)
    ds = rdata.write(url, X, da.from_array(Y, chunks=(6, 5)), chunks=10)
    assert ds.url == url
    again = rdata.open(url, validate="full")
    assert again == ds
    Xr, Yr = again.read()
    np.testing.assert_array_equal(Xr, X.astype(np.float32))
    np.testing.assert_array_equal(Yr, Y.astype(np.float32))
    with pytest.raises(FileExistsError):
        rdata.write(url, X, Y)
    with pytest.raises(FileNotFoundError):
        rdata.open(f"memory://rffor-test-{uuid.uuid4().hex}/nothing.zarr")


def test_sharded_store_reads_whole_shards(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((20, 2)).astype(np.float32)
    y = rng.standard_normal((20, 3)).astype(np.float32)
    group = zarr.open_group(zarr.storage.LocalStore(str(tmp_path / "s.zarr")), mode="w")
    group.create_array("x", data=x, chunks=(2, 2), shards=(8, 2))
    group.create_array("y", data=y, chunks=(4, 3), shards=(8, 3))
    group.create_array("theta", data=np.linspace(0, 1, 3))
    group.attrs.update({"rffor_format": 1, "n": 20, "d": 2, "m": 3})
    ds = rdata.open(tmp_path / "s.zarr")
    assert ds.chunk_rows == 8 and ds.n_chunks == 3
    np.testing.assert_array_equal(ds.chunk(2)[1], y[16:])


# --------------------------------------------------------------------------------------------
# malformed stores: open raises before anything else happens
# --------------------------------------------------------------------------------------------


def test_open_missing_store(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing exists"):
        rdata.open(tmp_path / "nope.zarr")


def test_open_directory_without_group(tmp_path):
    (tmp_path / "empty.zarr").mkdir()
    with pytest.raises(ValueError, match="no Zarr group"):
        rdata.open(tmp_path / "empty.zarr")


def test_open_array_instead_of_group(tmp_path):
    zarr.create_array(zarr.storage.LocalStore(str(tmp_path / "arr.zarr")), shape=(3,), dtype="f8")
    with pytest.raises(ValueError, match="not a group"):
        rdata.open(tmp_path / "arr.zarr")


def test_open_zarr_v2_group(tmp_path):
    zarr.open_group(str(tmp_path / "v2.zarr"), mode="w", zarr_format=2)
    with pytest.raises(ValueError, match="Zarr v2"):
        rdata.open(tmp_path / "v2.zarr")


@pytest.mark.parametrize("name", ["x", "y", "theta"])
def test_open_missing_array(tmp_path, name):
    path = build_store(tmp_path / "m.zarr", skip=(name,))
    with pytest.raises(ValueError, match=f"array '{name}' missing"):
        rdata.open(path)


def test_open_wrong_format_version(tmp_path):
    path = build_store(tmp_path / "v.zarr", attrs={"rffor_format": 2})
    with pytest.raises(ValueError, match=r"rffor_format 2 .*expected 1"):
        rdata.open(path)


def test_open_missing_format_attribute(tmp_path):
    path = build_store(tmp_path / "v.zarr", attrs={"rffor_format": None})
    with pytest.raises(ValueError, match="'rffor_format' missing"):
        rdata.open(path)


def test_open_attribute_inconsistent_with_shape(tmp_path):
    path = build_store(tmp_path / "a.zarr", attrs={"m": 6})
    with pytest.raises(ValueError, match=r"attribute 'm' .* is 6, but the arrays give m=5"):
        rdata.open(path)


def test_open_shape_mismatch_x_y(tmp_path):
    rng = np.random.default_rng(0)
    path = build_store(tmp_path / "s.zarr", x=rng.standard_normal((20, 3)), y=rng.standard_normal((19, 5)))
    with pytest.raises(ValueError, match=r"'x' and 'y' .* differ in rows"):
        rdata.open(path)


def test_open_wrong_dtype(tmp_path):
    path = build_store(tmp_path / "i.zarr", y=np.arange(100).reshape(20, 5), y_dtype="int32")
    with pytest.raises(ValueError, match=r"array 'y' .* dtype int32; expected float32 or float64"):
        rdata.open(path)


@pytest.mark.parametrize(
    "theta, match",
    [
        (np.array([0.0, 0.2, 0.2, 0.5, 1.0]), "strictly increasing"),
        (np.array([0.0, 0.5, 0.4, 0.8, 1.0]), "strictly increasing"),
        (np.array([0.0, 0.2, np.nan, 0.5, 1.0]), "expected finite"),
    ],
)
def test_open_bad_theta(tmp_path, theta, match):
    path = build_store(tmp_path / "t.zarr", theta=theta)
    with pytest.raises(ValueError, match=match):
        rdata.open(path)


def test_open_theta_wrong_length(tmp_path):
    path = build_store(tmp_path / "t.zarr", theta=np.linspace(0, 1, 4))
    with pytest.raises(ValueError, match=r"'theta' .* shape \(4,\); expected \(5,\)"):
        rdata.open(path)


def test_open_column_chunks_and_unequal_row_chunks(tmp_path):
    path = build_store(tmp_path / "col.zarr", y_chunks=(8, 2))
    with pytest.raises(ValueError, match="chunked along columns"):
        rdata.open(path)
    path = build_store(tmp_path / "rows.zarr", x_chunks=(8, 3), y_chunks=(5, 5))
    with pytest.raises(ValueError, match="different row chunks"):
        rdata.open(path)


def _bad_values(kind):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((20, 3))
    y = rng.standard_normal((20, 5))
    if kind == "nan_x":
        x[13, 1] = np.nan
    elif kind == "inf_x":
        x[13, 1] = -np.inf
    elif kind == "inf_y":
        y[13, 1] = np.inf
    elif kind == "empty_curve":
        y[13] = np.nan
    return x, y


@pytest.mark.parametrize(
    "kind, match",
    [
        ("nan_x", r"array 'x' .* nan at row 13, column 1"),
        ("inf_x", r"array 'x' .* -inf at row 13, column 1"),
        ("inf_y", r"array 'y' .* inf at row 13, column 1"),
        ("empty_curve", r"array 'y' .* row 13 has no observed value"),
    ],
)
def test_open_full_validation_scans_values(tmp_path, kind, match):
    x, y = _bad_values(kind)
    path = build_store(tmp_path / "bad.zarr", x=x, y=y)
    ds = rdata.open(path)  # metadata only: does not read the data
    with pytest.raises(ValueError, match=match):
        rdata.open(path, validate="full")
    with pytest.raises(ValueError, match=match):
        ds.validate()
    ds.validate(full=False)


def test_open_bad_validate_argument(tmp_path):
    path = build_store(tmp_path / "ok.zarr")
    with pytest.raises(ValueError, match="validate"):
        rdata.open(path, validate="yes")


# --------------------------------------------------------------------------------------------
# write: bad arguments and bad values raise and leave nothing behind
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"X": np.zeros(10)}, r"X must be 2-D .* got shape \(10,\)"),
        ({"Y": np.zeros(10)}, r"Y must be 2-D .* got shape \(10,\)"),
        ({"Y": np.zeros((9, 4))}, r"X and Y must have the same number of rows: X has 10"),
        ({"theta": np.linspace(0, 1, 3)}, r"theta .* expected length m=4, got length 3"),
        ({"theta": np.array([0.0, 1.0, 0.5, 2.0])}, r"theta must be strictly increasing"),
        ({"theta": np.array([0.0, 1.0, np.inf, 2.0])}, r"theta contains inf"),
        ({"chunks": 0}, r"chunks must be a positive int"),
        ({"dtype": "int32"}, r"dtype must be 'float32' or 'float64'"),
        ({"X": np.array([["a"] * 2] * 10)}, r"X must hold real numbers"),
        ({"storage_options": {"anon": True}}, r"storage_options .* local path"),
    ],
)
def test_write_bad_arguments(tmp_path, kwargs, match):
    args = {"X": np.zeros((10, 2)), "Y": np.ones((10, 4))}
    args.update(kwargs)
    X, Y = args.pop("X"), args.pop("Y")
    with pytest.raises(ValueError, match=match):
        rdata.write(tmp_path / "w.zarr", X, Y, **args)
    assert os.listdir(tmp_path) == []


def test_write_dask_unknown_chunks(tmp_path):
    Xd = da.from_array(np.zeros((10, 2)), chunks=5)
    Xd = Xd[Xd[:, 0] >= 0]  # unknown number of rows
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        rdata.write(tmp_path / "w.zarr", Xd, np.ones((10, 3)))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("as_dask", [False, True])
@pytest.mark.parametrize(
    "kind, match",
    [
        ("nan_x", r"X contains nan at row 13, column 1"),
        ("inf_x", r"X contains -inf at row 13, column 1"),
        ("inf_y", r"Y contains inf at row 13, column 1"),
        ("empty_curve", r"Y row 13 has no observed value"),
    ],
)
def test_write_bad_values_leave_nothing(tmp_path, as_dask, kind, match):
    x, y = _bad_values(kind)
    if as_dask:
        x, y = da.from_array(x, chunks=(6, 3)), da.from_array(y, chunks=(7, 2))
    with pytest.raises(ValueError, match=match):
        rdata.write(tmp_path / "w.zarr", x, y, chunks=4)
    assert os.listdir(tmp_path) == []


def test_write_overflow_to_float32(tmp_path):
    X = np.zeros((5, 1))
    X[2, 0] = 1e300
    with pytest.raises(ValueError, match=r"X value 1e\+300 at row 2, column 0 overflows float32"):
        rdata.write(tmp_path / "w.zarr", X, np.ones((5, 2)))
    rdata.write(tmp_path / "w.zarr", X, np.ones((5, 2)), dtype="float64")  # fine in float64


def _exploding_y(n=60, m=4, c=10, bad_block=3):
    blocks = []
    for b in range(n // c):
        if b == bad_block:

            def boom():
                raise RuntimeError("simulated failure in block 3")

            blocks.append(da.from_delayed(dask.delayed(boom)(), shape=(c, m), dtype=np.float64))
        else:
            blocks.append(da.ones((c, m), chunks=(c, m)))
    return da.concatenate(blocks, axis=0)


def test_failed_write_leaves_no_store(tmp_path):
    X = np.zeros((60, 2))
    dest = tmp_path / "fail.zarr"
    with pytest.raises(RuntimeError, match="simulated failure"):
        rdata.write(dest, X, _exploding_y(), chunks=10)
    assert not dest.exists()
    assert siblings(dest) == []  # no temporary directory left either


def test_failed_overwrite_keeps_old_dataset(tmp_path):
    dest = tmp_path / "keep.zarr"
    X, Y = make_xy(n=60, d=2, m=4)
    old = rdata.write(dest, X, Y, chunks=10)
    with pytest.raises(RuntimeError, match="simulated failure"):
        rdata.write(dest, np.zeros((60, 2)), _exploding_y(), chunks=10, overwrite=True)
    assert siblings(dest) == ["keep.zarr"]
    again = rdata.open(dest, validate="full")
    assert again == old
    np.testing.assert_array_equal(again.read()[1], Y.astype(np.float32))


def test_overwrite_semantics(tmp_path):
    dest = tmp_path / "o.zarr"
    X, Y = make_xy(n=20, d=2, m=3)
    rdata.write(dest, X, Y)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        rdata.write(dest, X, Y)
    X2, Y2 = make_xy(n=12, d=5, m=7, seed=3)
    ds = rdata.write(dest, X2, Y2, overwrite=True, chunks=4)
    assert (ds.n, ds.d, ds.m, ds.chunk_rows) == (12, 5, 7, 4)
    np.testing.assert_array_equal(rdata.open(dest).read()[1], Y2.astype(np.float32))
    assert siblings(dest) == ["o.zarr"]

    # never remove something that is not a Zarr store
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("important")
    with pytest.raises(ValueError, match="not a Zarr store"):
        rdata.write(other, X, Y, overwrite=True)
    assert (other / "keep.txt").read_text() == "important"


def test_write_with_distributed_client(tmp_path):
    distributed = pytest.importorskip("distributed")
    X, Y = make_xy(n=70, d=3, m=5)
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster,
        distributed.Client(cluster),
    ):
        ds = rdata.write(
            tmp_path / "dist.zarr", da.from_array(X, chunks=(9, 3)), da.from_array(Y, chunks=(11, 5)), chunks=10
        )
        np.testing.assert_array_equal(ds.read()[1], Y.astype(np.float32))
        dest = tmp_path / "dist-fail.zarr"
        with pytest.raises(RuntimeError, match="simulated failure"):
            rdata.write(dest, np.zeros((60, 2)), _exploding_y(), chunks=10)
        assert not dest.exists()


def test_lost_chunk_write_is_detected(tmp_path, monkeypatch):
    original = rdata._BlockWriter.__setitem__

    def drop_one(self, region, value):
        if self.kind == "y" and region[0].start == 20:
            return  # simulate a write that never reached the store
        original(self, region, value)

    monkeypatch.setattr(rdata._BlockWriter, "__setitem__", drop_one)
    X, Y = make_xy(n=40, d=2, m=3)
    dest = tmp_path / "lost.zarr"
    with pytest.raises(RuntimeError, match=r"only 3 of 4 chunks of 'y'"):
        rdata.write(dest, da.from_array(X, chunks=10), da.from_array(Y, chunks=10), chunks=10)
    assert siblings(dest) == []


# --------------------------------------------------------------------------------------------
# chunks read from their files (rffor.data._ChunkFiles)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_chunks_read_from_their_files_have_zarrs_bits(tmp_path, dtype):
    """The direct reads of a store :func:`write` made (the last chunk partial, NaNs) give Zarr's arrays exactly:
    same bytes, dtype and shape, writable and C-contiguous."""
    X, Y = make_xy(n=1037, d=5, m=7)
    ds = rdata.write(tmp_path / "a.zarr", X, Y, dtype=dtype, chunks=100)
    key = rdata._HandleKey(ds._url, ds._storage_options, ds._signature())
    assert rdata._chunk_files(key) is not None  # the direct path is the one tested
    zx, zy = ds._arrays()
    for i in range(ds.n_chunks):
        sl = ds.chunk_slice(i)
        X_i, Y_i = ds.chunk(i)
        for ours, zarrs in ((X_i, zx[sl]), (Y_i, zy[sl])):
            assert ours.dtype == zarrs.dtype and ours.shape == zarrs.shape
            assert ours.tobytes() == zarrs.tobytes()
            assert ours.flags.writeable and ours.flags.c_contiguous
    assert X_i.shape == (37, 5)


def test_chunk_files_fall_back_to_zarr(tmp_path):
    """A chunk without a file reads as Zarr's fill value (NaN); a store of other codecs is read by Zarr."""
    X, Y = make_xy(n=40, d=2, m=3, nan_frac=0.0)
    ds = rdata.write(tmp_path / "a.zarr", X, Y, chunks=10)
    os.remove(tmp_path / "a.zarr" / "y" / "c" / "2" / "0")
    X_2, Y_2 = ds.chunk(2)
    np.testing.assert_array_equal(X_2, X[20:30].astype(np.float32))
    assert np.isnan(Y_2).all() and Y_2.shape == (10, 3)
    group = zarr.open_group(zarr.storage.LocalStore(str(tmp_path / "c.zarr")), mode="w", zarr_format=3)
    group.create_array("x", data=np.ones((20, 2), np.float32), chunks=(8, 2), compressors=None)
    group.create_array("y", data=np.arange(60, dtype=np.float32).reshape(20, 3), chunks=(8, 3), compressors=None)
    group.create_array("theta", data=np.linspace(0, 1, 3))
    group.attrs.update({"rffor_format": 1, "n": 20, "d": 2, "m": 3})
    plain = rdata.open(tmp_path / "c.zarr")
    assert rdata._chunk_files(rdata._HandleKey(plain._url, None, plain._signature())) is None
    np.testing.assert_array_equal(plain.chunk(2)[1], np.arange(48, 60, dtype=np.float32).reshape(4, 3))
