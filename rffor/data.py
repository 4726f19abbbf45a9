"""Zarr v3 dataset format for function-valued regression: write, open, validate, iterate chunks.

A dataset is a Zarr v3 group::

    dataset.zarr/
      x       float32 (n, d)   chunks (c, d)
      y       float32 (n, m)   chunks (c, m)   NaN = not observed
      theta   float64 (m,)
      attrs   {"rffor_format": 1, "n": n, "d": d, "m": m}

Rows of ``x`` and ``y`` are chunked together (same ``c``), chunks span the full width, so that a
chunk of rows is one read of each array. ``write`` creates such a store from NumPy or Dask arrays,
``open`` validates one and returns a :class:`Dataset`: a small picklable description (location,
storage options, metadata) that opens the arrays lazily in whichever process uses it, e.g. a Dask
worker reading its partition's chunks.

Local paths use ``zarr.storage.LocalStore``; any URL with a scheme (``s3://``, ``gs://``,
``memory://``, chained ``simplecache::s3://``) uses ``zarr.storage.FsspecStore`` where the
filesystem package is installed.
"""

from __future__ import annotations

import builtins
import functools
import math
import os
import shutil
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import zarr
import zarr.errors

from ._atomic import replace_directory
from .chunked import partition_chunks

__all__ = ["Dataset", "FORMAT_VERSION", "open", "write"]

FORMAT_VERSION = 1
"""Version of the on-disk format written by :func:`write` (group attribute ``rffor_format``)."""

_DEFAULT_CHUNK_BYTES = 8_000_000  # ~8 MB of y per chunk
_WRITE_BATCH_BYTES = 64_000_000  # NumPy input: rows converted and written per zarr call
_FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_LAYOUT = "expected a Zarr v3 group with arrays x (n, d), y (n, m), theta (m,)"


# --------------------------------------------------------------------------------------------
# locations and stores
# --------------------------------------------------------------------------------------------


def _is_remote(location: str) -> bool:
    return "://" in location or "::" in location


def _normalize_location(path_or_url: str | os.PathLike, storage_options: dict | None) -> tuple[str, dict | None]:
    """Return (absolute local path or URL, storage options or None)."""
    if isinstance(path_or_url, os.PathLike):
        location = os.fspath(path_or_url)
    elif isinstance(path_or_url, str):
        location = path_or_url
    else:
        raise TypeError(f"path_or_url must be a str path or URL or an os.PathLike, got {type(path_or_url).__name__}")
    if not location:
        raise ValueError("path_or_url must not be empty")
    if storage_options is not None and not isinstance(storage_options, dict):
        raise TypeError(f"storage_options must be a dict or None, got {type(storage_options).__name__}")
    if location.startswith("file://"):
        location = location[len("file://") :]
    if _is_remote(location):
        location = location.rstrip("/")
        return location, (dict(storage_options) if storage_options else None)
    if storage_options:
        raise ValueError(
            f"storage_options are only used with fsspec URLs (s3://, gs://, ...); "
            f"got a local path {location!r} with storage_options {sorted(storage_options)}"
        )
    return os.path.abspath(os.path.expanduser(location)), None


def _make_store(url: str, storage_options: dict | None, *, read_only: bool) -> Any:
    if _is_remote(url):
        return zarr.storage.FsspecStore.from_url(url, storage_options=storage_options, read_only=read_only)
    return zarr.storage.LocalStore(url, read_only=read_only)


def _remote_fs(url: str, storage_options: dict | None) -> tuple[Any, str]:
    import fsspec

    return fsspec.core.url_to_fs(url, **(storage_options or {}))


def _exists(url: str, storage_options: dict | None) -> bool:
    if _is_remote(url):
        fs, path = _remote_fs(url, storage_options)
        return bool(fs.exists(path))
    return os.path.lexists(url)


def _freeze(obj: Any) -> Any:
    """A hashable, order-independent stand-in for (nested) storage options."""
    if isinstance(obj, dict):
        return ("__dict__", tuple(sorted((str(k), _freeze(v)) for k, v in obj.items())))
    if isinstance(obj, (list, tuple)):
        return ("__seq__", tuple(_freeze(v) for v in obj))
    if isinstance(obj, (set, frozenset)):
        return ("__set__", frozenset(_freeze(v) for v in obj))
    try:
        hash(obj)
    except TypeError:
        return ("__repr__", repr(obj))
    return obj


# --------------------------------------------------------------------------------------------
# value checks shared by write (on input blocks) and validate (on stored chunks)
# --------------------------------------------------------------------------------------------


def _check_x_block(block: np.ndarray, row0: int, label: str, source: np.ndarray | None = None):
    """Raise ValueError if a block of x holds NaN or inf; ``row0`` is its first global row."""
    bad = ~np.isfinite(block)
    if bad.any():
        r, j = (int(v) for v in np.argwhere(bad)[0])
        value = block[r, j]
        if source is not None and np.isfinite(source[r, j]):
            raise ValueError(
                f"{label} value {float(source[r, j])!r} at row {row0 + r}, column {j} overflows "
                f"{block.dtype} (becomes {value}); {label} must be finite in the stored dtype"
            )
        raise ValueError(
            f"{label} contains {value} at row {row0 + r}, column {j}; expected finite values "
            f"(NaN and inf are not allowed in {label})"
        )


def _check_y_block(block: np.ndarray, row0: int, label: str, source: np.ndarray | None = None):
    """Raise ValueError if a block of y holds inf or a row with no observed (non-NaN) value."""
    inf = np.isinf(block)
    if inf.any():
        r, j = (int(v) for v in np.argwhere(inf)[0])
        if source is not None and np.isfinite(source[r, j]):
            raise ValueError(
                f"{label} value {float(source[r, j])!r} at row {row0 + r}, column {j} overflows "
                f"{block.dtype} (becomes {block[r, j]}); {label} must be finite or NaN"
            )
        raise ValueError(
            f"{label} contains {block[r, j]} at row {row0 + r}, column {j}; expected finite "
            f"values or NaN (NaN marks a value as not observed; inf is not allowed)"
        )
    empty = np.isnan(block).all(axis=1)
    if empty.any():
        r = int(np.argmax(empty))
        raise ValueError(
            f"{label} row {row0 + r} has no observed value (all {block.shape[1]} entries are NaN); "
            f"expected at least one observed value per curve: drop that row"
        )


def _cast(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Convert to the storage dtype; overflow to inf is reported by the block checks."""
    with np.errstate(over="ignore", invalid="ignore"):
        return a.astype(dtype, copy=False)


def _check_theta(theta: np.ndarray, m: int, label: str) -> None:
    if theta.ndim != 1:
        raise ValueError(f"{label} must be 1-D of shape (m,) = ({m},); got shape {theta.shape}")
    if theta.shape[0] != m:
        raise ValueError(
            f"{label} must have one value per column of y: expected length m={m}, got length {theta.shape[0]}"
        )
    bad = ~np.isfinite(theta)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{label} contains {theta[i]} at index {i}; expected finite values")
    steps = np.diff(theta)
    if (steps <= 0).any():
        i = int(np.argmax(steps <= 0))
        raise ValueError(
            f"{label} must be strictly increasing; got {label}[{i}] = {theta[i]!r} and "
            f"{label}[{i + 1}] = {theta[i + 1]!r}"
        )


# --------------------------------------------------------------------------------------------
# Dataset
# --------------------------------------------------------------------------------------------


class _HandleKey:
    """Cache key for open zarr arrays: compares by URL and frozen storage options."""

    __slots__ = ("url", "storage_options", "signature", "_key")

    def __init__(self, url: str, storage_options: dict | None, signature: tuple):
        self.url = url
        self.storage_options = storage_options
        self.signature = signature
        self._key = (url, _freeze(storage_options), signature)

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _HandleKey) and self._key == other._key


@functools.lru_cache(maxsize=32)
def _open_arrays(key: _HandleKey) -> tuple[Any, Any]:
    """Open (x, y) read-only, once per process and location."""
    store = _make_store(key.url, key.storage_options, read_only=True)
    group = zarr.open_group(store, mode="r")
    zx, zy = group["x"], group["y"]
    n, d, m = key.signature[:3]
    if zx.shape != (n, d) or zy.shape != (n, m):
        raise ValueError(
            f"the store at {key.url!r} changed since it was opened: expected x {(n, d)} and "
            f"y {(n, m)}, found x {zx.shape} and y {zy.shape}; open it again"
        )
    return zx, zy


class _ChunkFiles:
    """Whole chunks of one local Zarr v3 array read from their files and decoded here, not by Zarr's async
    pipeline: the same bytes (the codecs are lossless), 2.4x faster on one thread, and two threads reading at once
    ran 1.9x as fast as one (Zarr's reads: 1.3x), so that the threads of a worker sharing a partition's chunks
    (``partitions_per="worker"``) are not held up by their reads (benchmarks/scale_out.py ``--pool``).

    Only for the layout :func:`write` produces (one chunk across all columns, the bytes codec then Zstandard, the
    default chunk keys); :meth:`for_array` returns None for any other, and :meth:`read` None for a chunk without a
    file (Zarr's fill value): the caller then reads through Zarr.
    """

    def __init__(self, directory: str, chunk_shape: tuple[int, int], dtype: np.dtype, key):
        self.directory, self.chunk_shape, self.dtype, self.key = directory, chunk_shape, dtype, key

    @classmethod
    def for_array(cls, root: str, array) -> _ChunkFiles | None:
        try:
            from numcodecs import Zstd  # noqa: F401  (Zarr's own Zstandard codec)
            from zarr.codecs import BytesCodec, ZstdCodec
            from zarr.core.chunk_grids import RegularChunkGrid
            from zarr.core.chunk_key_encodings import DefaultChunkKeyEncoding

            meta = array.metadata
            codecs = tuple(meta.codecs)
            if not (
                meta.zarr_format == 3
                and isinstance(meta.chunk_grid, RegularChunkGrid)
                and isinstance(meta.chunk_key_encoding, DefaultChunkKeyEncoding)
                and len(codecs) == 2
                and isinstance(codecs[0], BytesCodec)
                and isinstance(codecs[1], ZstdCodec)
                and len(array.shape) == 2
                and tuple(meta.chunk_grid.chunk_shape)[1] == array.shape[1]
            ):
                return None
            endian = codecs[0].endian
            dtype = np.dtype(array.dtype)
            if endian is not None and dtype.itemsize > 1:
                dtype = dtype.newbyteorder("<" if endian.value == "little" else ">")
            shape = tuple(int(c) for c in meta.chunk_grid.chunk_shape)
            return cls(os.path.join(root, array.path), shape, dtype, meta.chunk_key_encoding.encode_chunk_key)
        except (ImportError, AttributeError, TypeError, ValueError):  # pragma: no cover - another Zarr
            return None

    def read(self, rows: slice) -> np.ndarray | None:
        """Rows ``rows`` (within one chunk, from its first row) in the array's dtype (native byte order), or None."""
        from numcodecs import Zstd

        c = self.chunk_shape[0]
        k, offset = divmod(rows.start, c)
        if offset or rows.stop - rows.start > c:
            return None
        try:
            with builtins.open(os.path.join(self.directory, *self.key((k, 0)).split("/")), "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        out = np.empty(self.chunk_shape, dtype=self.dtype)
        Zstd().decode(raw, out=out)  # raises if the chunk does not decode to exactly its shape
        out = out[: rows.stop - rows.start]
        return out if out.dtype.isnative else out.astype(out.dtype.newbyteorder("="))


@functools.lru_cache(maxsize=32)
def _chunk_files(key: _HandleKey) -> tuple[_ChunkFiles, _ChunkFiles] | None:
    """:class:`_ChunkFiles` of (x, y) of a local store when both qualify, else None (once per process and
    location)."""
    if _is_remote(key.url):
        return None
    zx, zy = _open_arrays(key)
    files = (_ChunkFiles.for_array(key.url, zx), _ChunkFiles.for_array(key.url, zy))
    return None if None in files else files


class Dataset:
    """A validated rffor Zarr dataset, opened lazily: a chunked dataset of :mod:`rffor.chunked` that workers can
    read themselves (``workers_can_read``).

    Holds only the location, storage options and metadata, so it is cheap to pickle and ship to
    Dask workers; each process opens the Zarr arrays on first use and caches them. Create one
    with :func:`open` (or get it back from :func:`write`) rather than directly.

    Parameters
    ----------
    url : str
        Absolute local path or fsspec URL of the Zarr group.
    storage_options : dict or None
        Options for the fsspec filesystem (remote URLs only).
    metadata : dict
        Keys ``n``, ``d``, ``m``, ``chunk_rows``, ``x_dtype``, ``y_dtype`` and ``theta``
        (ndarray of shape (m,)), as established by :func:`open`.

    Attributes
    ----------
    n, d, m : int
        Number of samples, input dimension, number of grid points per curve.
    chunk_rows : int
        Rows per chunk ``c`` (the last chunk may be shorter).
    n_chunks : int
        Number of row chunks, ``ceil(n / c)``.
    theta : ndarray of shape (m,)
        The output grid (float64).
    dtype : numpy.dtype
        Storage dtype of the data (common type of x and y).

    Examples
    --------
    >>> ds = rffor.data.open("train.zarr")                      # doctest: +SKIP
    >>> for i, X_i, Y_i in ds.iter_chunks(ds.partition(4)[0]):  # doctest: +SKIP
    ...     ...
    """

    #: a pickled Dataset is a description of the store: each process (a Dask worker) reads its own chunks
    workers_can_read = True

    def __init__(self, url: str, storage_options: dict | None, metadata: dict):
        self._url = url
        self._storage_options = dict(storage_options) if storage_options else None
        meta = dict(metadata)
        meta["theta"] = np.asarray(meta["theta"], dtype=np.float64)
        meta["x_dtype"] = np.dtype(meta["x_dtype"])
        meta["y_dtype"] = np.dtype(meta["y_dtype"])
        self._meta = meta

    # ---- description -------------------------------------------------------------------
    @property
    def url(self) -> str:
        """Absolute local path or fsspec URL of the store."""
        return self._url

    @property
    def storage_options(self) -> dict | None:
        """fsspec storage options (a copy), or None."""
        return dict(self._storage_options) if self._storage_options else None

    @property
    def n(self) -> int:
        """Number of samples (rows)."""
        return self._meta["n"]

    @property
    def d(self) -> int:
        """Input dimension (columns of x)."""
        return self._meta["d"]

    @property
    def m(self) -> int:
        """Number of grid points per curve (columns of y)."""
        return self._meta["m"]

    @property
    def chunk_rows(self) -> int:
        """Rows per chunk ``c``; the last chunk holds ``n - (n_chunks - 1) * c`` rows."""
        return self._meta["chunk_rows"]

    @property
    def n_chunks(self) -> int:
        """Number of row chunks."""
        return -(-self.n // self.chunk_rows)

    @property
    def theta(self) -> np.ndarray:
        """The output grid, ndarray of shape (m,), float64 (a copy)."""
        return self._meta["theta"].copy()

    @property
    def dtype(self) -> np.dtype:
        """Storage dtype of the data: the common type of x and y."""
        return np.result_type(self._meta["x_dtype"], self._meta["y_dtype"])

    @property
    def metadata(self) -> dict:
        """A copy of the metadata dictionary (n, d, m, chunk_rows, dtypes, theta)."""
        meta = dict(self._meta)
        meta["theta"] = meta["theta"].copy()
        return meta

    def _signature(self) -> tuple:
        m = self._meta
        return (m["n"], m["d"], m["m"], m["chunk_rows"], m["x_dtype"].str, m["y_dtype"].str)

    def __repr__(self) -> str:
        return (
            f"Dataset({self._url!r}, n={self.n}, d={self.d}, m={self.m}, "
            f"chunk_rows={self.chunk_rows}, n_chunks={self.n_chunks}, dtype={self.dtype})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Dataset):
            return NotImplemented
        return (
            self._url == other._url
            and _freeze(self._storage_options) == _freeze(other._storage_options)
            and self._signature() == other._signature()
            and np.array_equal(self._meta["theta"], other._meta["theta"])
        )

    def __hash__(self) -> int:
        return hash((self._url, _freeze(self._storage_options), self._signature()))

    def __dask_tokenize__(self) -> tuple:
        return (
            "rffor.data.Dataset",
            self._url,
            _freeze(self._storage_options),
            self._signature(),
            self._meta["theta"].tobytes(),
        )

    # ---- access ------------------------------------------------------------------------
    def _arrays(self) -> tuple[Any, Any]:
        return _open_arrays(_HandleKey(self._url, self._storage_options, self._signature()))

    def _chunk_id(self, i: int) -> int:
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"chunk id must be an int, got {type(i).__name__}")
        k = self.n_chunks
        if not -k <= i < k:
            raise IndexError(f"chunk id {i} out of range for {k} chunks")
        return int(i) % k

    def chunk_slice(self, i: int) -> slice:
        """Rows of chunk ``i``.

        Parameters
        ----------
        i : int
            Chunk id in ``[0, n_chunks)`` (negative ids count from the end).

        Returns
        -------
        slice
            ``slice(i * c, min((i + 1) * c, n))``.
        """
        i = self._chunk_id(i)
        c = self.chunk_rows
        return slice(i * c, min((i + 1) * c, self.n))

    def chunk(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Read chunk ``i`` (one whole-chunk read of x and of y): from the chunk files of a local store in
        :func:`write`'s layout (:class:`_ChunkFiles`: Zarr's bytes, with the GIL released while decoding), else
        through Zarr.

        Parameters
        ----------
        i : int
            Chunk id in ``[0, n_chunks)``.

        Returns
        -------
        X_i : ndarray of shape (rows_i, d)
        Y_i : ndarray of shape (rows_i, m)
            In the stored dtype; NaN in ``Y_i`` marks unobserved values.
        """
        sl = self.chunk_slice(i)
        files = _chunk_files(_HandleKey(self._url, self._storage_options, self._signature()))
        if files is not None:
            X_i, Y_i = files[0].read(sl), files[1].read(sl)
            if X_i is not None and Y_i is not None:
                return X_i, Y_i
        zx, zy = self._arrays()
        return zx[sl], zy[sl]

    def iter_chunks(
        self, chunk_ids: Sequence[int] | None = None, *, prefetch: bool = True
    ) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """Iterate over chunks, reading the next one in the background.

        Parameters
        ----------
        chunk_ids : sequence of int, optional
            Chunks to read, in this order; default all chunks in order.
        prefetch : bool, default True
            Read chunk ``k + 1`` in a background thread while the caller works on chunk ``k``.

        Yields
        ------
        i : int
            Chunk id.
        X_i : ndarray of shape (rows_i, d)
        Y_i : ndarray of shape (rows_i, m)
        """
        ids = range(self.n_chunks) if chunk_ids is None else [self._chunk_id(i) for i in chunk_ids]
        if not prefetch or len(ids) <= 1:
            for i in ids:
                yield (i, *self.chunk(i))
            return
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rffor-prefetch")
        try:
            future = pool.submit(self.chunk, ids[0])
            for k, i in enumerate(ids):
                X_i, Y_i = future.result()
                if k + 1 < len(ids):
                    future = pool.submit(self.chunk, ids[k + 1])
                yield i, X_i, Y_i
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def read(self, rows: slice | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Read a range of rows into memory.

        Parameters
        ----------
        rows : slice, optional
            Rows to read; default all (beware: the whole dataset).

        Returns
        -------
        X : ndarray of shape (n_rows, d)
        Y : ndarray of shape (n_rows, m)
        """
        if rows is None:
            rows = slice(None)
        if not isinstance(rows, slice):
            raise TypeError(f"rows must be a slice or None, got {type(rows).__name__}")
        zx, zy = self._arrays()
        return zx[rows], zy[rows]

    def to_dask(self) -> tuple[Any, Any]:
        """Lazy Dask arrays over the store, one Dask block per row chunk.

        Returns
        -------
        x : dask.array.Array of shape (n, d), chunks (c, d)
        y : dask.array.Array of shape (n, m), chunks (c, m)
        """
        import dask.array as da

        zx, zy = self._arrays()
        c = self.chunk_rows
        return da.from_zarr(zx, chunks=(c, self.d)), da.from_zarr(zy, chunks=(c, self.m))

    def partition(self, n_partitions: int) -> list[list[int]]:
        """Contiguous groups of chunk ids of about equal numbers of rows (:func:`rffor.chunked.partition_chunks`).

        Parameters
        ----------
        n_partitions : int
            Number of groups P wanted (e.g. the number of workers).

        Returns
        -------
        list of list of int
            ``min(P, n_chunks)`` non-empty groups of consecutive chunk ids, together every chunk once, in order.
        """
        return partition_chunks(self.n_chunks, n_partitions)

    def validate(self, full: bool = True) -> Dataset:
        """Check the store again.

        Parameters
        ----------
        full : bool, default True
            Besides the metadata (layout, attributes, shapes, dtypes, chunking, theta), scan
            every chunk: x must be finite, y must hold no inf and at least one observed
            value per row.

        Returns
        -------
        Dataset
            ``self``.

        Raises
        ------
        ValueError
            Naming the array or attribute, what was found and what was expected.
        """
        meta = _read_metadata(self._url, self._storage_options)
        current = Dataset(self._url, self._storage_options, meta)
        if current != self:
            raise ValueError(
                f"the store at {self._url!r} changed since it was opened: now {current!r}, was {self!r}; open it again"
            )
        if full:
            _scan(self)
        return self


def _scan(ds: Dataset) -> None:
    for i, X_i, Y_i in ds.iter_chunks():
        row0 = ds.chunk_slice(i).start
        _check_x_block(X_i, row0, f"array 'x' of {ds.url!r} (chunk {i})")
        _check_y_block(Y_i, row0, f"array 'y' of {ds.url!r} (chunk {i})")


# --------------------------------------------------------------------------------------------
# open
# --------------------------------------------------------------------------------------------


def _read_metadata(url: str, storage_options: dict | None) -> dict:
    """Open the group at ``url``, check its layout and return the Dataset metadata."""
    if not _exists(url, storage_options):
        raise FileNotFoundError(f"no rffor dataset at {url!r}: nothing exists there")
    store = _make_store(url, storage_options, read_only=True)
    where = repr(url)
    try:
        group = zarr.open_group(store, mode="r")
    except zarr.errors.ContainsArrayError:
        raise ValueError(f"{where} holds a single Zarr array, not a group; {_LAYOUT}") from None
    except zarr.errors.NodeNotFoundError:
        raise ValueError(f"no Zarr group found at {where}; {_LAYOUT}") from None
    fmt = group.metadata.zarr_format
    if fmt != 3:
        raise ValueError(f"{where} is a Zarr v{fmt} group; expected Zarr v3 (rewrite it with rffor.data.write)")

    attrs = dict(group.attrs)
    if "rffor_format" not in attrs:
        raise ValueError(
            f"attribute 'rffor_format' missing from {where}: not an rffor dataset, or an "
            f"incomplete write; expected rffor_format={FORMAT_VERSION}"
        )
    version = attrs["rffor_format"]
    if version != FORMAT_VERSION or isinstance(version, bool):
        raise ValueError(
            f"unsupported rffor_format {version!r} in {where}: expected {FORMAT_VERSION} "
            f"(this rffor reads format {FORMAT_VERSION} only)"
        )

    arrays = {}
    for name in ("x", "y", "theta"):
        try:
            node = group[name]
        except KeyError:
            raise ValueError(f"array '{name}' missing from {where}; {_LAYOUT}") from None
        if not isinstance(node, zarr.Array):
            raise ValueError(f"'{name}' in {where} is a {type(node).__name__}, expected an array")
        arrays[name] = node
    zx, zy, zt = arrays["x"], arrays["y"], arrays["theta"]

    for name, arr, ndim, shape in (("x", zx, 2, "(n, d)"), ("y", zy, 2, "(n, m)"), ("theta", zt, 1, "(m,)")):
        if arr.ndim != ndim:
            raise ValueError(f"array '{name}' in {where} has shape {arr.shape}; expected {ndim}-D {shape}")
    n, d = zx.shape
    m = zy.shape[1]
    if zy.shape[0] != n:
        raise ValueError(
            f"arrays 'x' and 'y' in {where} differ in rows: x has shape {zx.shape}, y has shape "
            f"{zy.shape}; expected the same n"
        )
    if zt.shape != (m,):
        raise ValueError(f"array 'theta' in {where} has shape {zt.shape}; expected ({m},), one value per column of y")
    if n < 1 or d < 1 or m < 1:
        raise ValueError(f"{where} is empty (n={n}, d={d}, m={m}); expected n, d, m >= 1")

    for key, value in (("n", n), ("d", d), ("m", m)):
        found = attrs.get(key)
        if isinstance(found, bool) or not isinstance(found, int) or found != value:
            raise ValueError(f"attribute '{key}' of {where} is {found!r}, but the arrays give {key}={value}")

    for name, arr, allowed in (("x", zx, _FLOAT_DTYPES), ("y", zy, _FLOAT_DTYPES), ("theta", zt, _FLOAT_DTYPES)):
        dtype = np.dtype(arr.dtype)
        if dtype not in allowed:
            raise ValueError(f"array '{name}' in {where} has dtype {dtype}; expected float32 or float64")

    rows = {}
    for name, arr, width in (("x", zx, d), ("y", zy, m)):
        unit = arr.shards if arr.shards is not None else arr.chunks  # whole read unit
        if unit[1] != width:
            raise ValueError(
                f"array '{name}' in {where} is chunked along columns (chunks {unit}); expected "
                f"full-width chunks ({unit[0]}, {width}): rewrite it with rffor.data.write"
            )
        rows[name] = unit[0]
    if rows["x"] != rows["y"]:
        raise ValueError(
            f"arrays 'x' and 'y' in {where} have different row chunks: x {rows['x']}, "
            f"y {rows['y']}; expected the same number of rows per chunk"
        )

    theta = np.asarray(zt[...], dtype=np.float64)
    _check_theta(theta, m, f"array 'theta' in {where}")

    return {
        "n": int(n),
        "d": int(d),
        "m": int(m),
        "chunk_rows": int(min(rows["x"], n)),
        "x_dtype": np.dtype(zx.dtype),
        "y_dtype": np.dtype(zy.dtype),
        "theta": theta,
    }


def open(  # noqa: A001 - deliberately shadows the builtin inside this module
    path_or_url: str | os.PathLike,
    storage_options: dict | None = None,
    *,
    validate: str = "metadata",
) -> Dataset:
    """Open and validate an rffor dataset.

    Parameters
    ----------
    path_or_url : str or os.PathLike
        Local path or fsspec URL (``s3://bucket/train.zarr``) of the Zarr v3 group.
    storage_options : dict, optional
        fsspec filesystem options (credentials, endpoint, ...), remote URLs only.
    validate : {"metadata", "full"}, default "metadata"
        ``"metadata"`` checks the layout, attributes, shapes, dtypes, chunking and theta
        (reads theta only). ``"full"`` also scans every chunk: x finite, y without inf and
        with at least one observed value per row.

    Returns
    -------
    Dataset

    Raises
    ------
    FileNotFoundError
        Nothing exists at ``path_or_url``.
    ValueError
        The store is malformed: the message names the array or attribute, what was found and
        what was expected.
    """
    if validate not in ("metadata", "full"):
        raise ValueError(f"validate must be 'metadata' or 'full', got {validate!r}")
    url, options = _normalize_location(path_or_url, storage_options)
    ds = Dataset(url, options, _read_metadata(url, options))
    if validate == "full":
        _scan(ds)
    return ds


# --------------------------------------------------------------------------------------------
# write
# --------------------------------------------------------------------------------------------


def _is_dask(a: Any) -> bool:
    try:
        import dask.array as da
    except ImportError:  # pragma: no cover - dask is a dependency
        return False
    return isinstance(a, da.Array)


def _as_array_like(a: Any, name: str) -> Any:
    """Keep NumPy, Dask and sliceable arrays (memmap, zarr, h5py); convert anything else."""
    if _is_dask(a) or all(hasattr(a, attr) for attr in ("shape", "dtype", "ndim", "__getitem__")):
        return a
    try:
        return np.asarray(a)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{name} could not be converted to an array: {exc}") from exc


def _check_numeric(a: Any, name: str) -> None:
    kind = np.dtype(a.dtype).kind
    if kind not in "fiu":
        raise ValueError(f"{name} must hold real numbers; got dtype {a.dtype}")


class _BlockWriter:
    """``da.store`` target: converts a block, checks it, then writes it to the zarr array.

    Blocks arrive aligned with the zarr chunks, so every task writes whole chunks of its own.
    ``sentinel`` (local writes) is a file of the temporary store: once a failed write has
    removed the store, late tasks skip their write instead of re-creating directories.
    """

    def __init__(self, array: Any, label: str, dtype: np.dtype, kind: str, sentinel: str | None):
        self.array = array
        self.label = label
        self.dtype = np.dtype(dtype)
        self.kind = kind
        self.sentinel = sentinel
        self.shape = array.shape
        self.ndim = array.ndim

    def __setitem__(self, region: tuple[slice, ...], value: np.ndarray) -> None:
        source = np.asarray(value)
        block = _cast(source, self.dtype)
        row0 = region[0].start or 0
        check = _check_x_block if self.kind == "x" else _check_y_block
        check(block, row0, self.label, source if source.dtype != block.dtype else None)
        if self.sentinel is not None and not os.path.exists(self.sentinel):
            return  # the write was aborted and its store removed
        self.array[region] = block


def _compute_store(stored: Any) -> None:
    """Compute a ``da.store(..., compute=False)`` graph; on failure wait for running tasks.

    With Dask's default threaded scheduler the graph runs on a pool of our own, which is shut
    down (waiting for running tasks) before an error propagates, so that cleanup happens after
    the last write. Other schedulers (sync, processes, distributed) are used as configured.
    """
    import dask
    import dask.threaded
    from dask.base import get_scheduler

    scheduler = get_scheduler()
    if scheduler is None or scheduler is dask.threaded.get:
        workers = dask.config.get("num_workers", None) or os.cpu_count() or 1
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rffor-write")
        try:
            dask.compute(stored, scheduler=pool)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    else:
        dask.compute(stored)


def _write_into(
    store: Any,
    X: Any,
    Y: Any,
    theta: np.ndarray,
    c: int,
    dtype: np.dtype,
    sentinel: str | None,
) -> None:
    n, d = X.shape
    m = Y.shape[1]
    group = zarr.open_group(store, mode="w", zarr_format=3)
    zx = group.create_array(
        "x",
        shape=(n, d),
        chunks=(c, d),
        dtype=dtype,
        fill_value=np.nan,
        dimension_names=("sample", "feature"),
    )
    zy = group.create_array(
        "y",
        shape=(n, m),
        chunks=(c, m),
        dtype=dtype,
        fill_value=np.nan,
        dimension_names=("sample", "theta"),
    )
    zt = group.create_array(
        "theta",
        shape=(m,),
        chunks=(m,),
        dtype=np.float64,
        fill_value=np.nan,
        dimension_names=("theta",),
    )
    zt[:] = theta

    if _is_dask(X) or _is_dask(Y):
        import dask.array as da

        Xd = X if _is_dask(X) else da.from_array(X, chunks=(c, d))
        Yd = Y if _is_dask(Y) else da.from_array(Y, chunks=(c, m))
        # exactly the zarr chunking: each task writes whole chunks no other task touches
        Xd = Xd.rechunk((c, d))
        Yd = Yd.rechunk((c, m))
        stored = da.store(
            [Xd, Yd],
            [_BlockWriter(zx, "X", dtype, "x", sentinel), _BlockWriter(zy, "Y", dtype, "y", sentinel)],
            lock=False,
            compute=False,
        )
        _compute_store(stored)
    else:
        row_bytes = (d + m) * dtype.itemsize
        per_write = max(1, _WRITE_BATCH_BYTES // max(1, c * row_bytes)) * c
        for start in range(0, n, per_write):
            sl = slice(start, min(start + per_write, n))
            xs, ys = np.asarray(X[sl]), np.asarray(Y[sl])
            xb, yb = _cast(xs, dtype), _cast(ys, dtype)
            _check_x_block(xb, start, "X", xs if xs.dtype != xb.dtype else None)
            _check_y_block(yb, start, "Y", ys if ys.dtype != yb.dtype else None)
            zx[sl] = xb
            zy[sl] = yb

    # Every chunk must exist now: no chunk of x or y can equal the NaN fill value (x is finite,
    # every row of y has an observation), so a missing one is a lost write (e.g. Dask workers
    # that do not see this path), never an empty chunk that zarr chose not to store.
    for name, arr in (("x", zx), ("y", zy)):
        written, expected = arr.nchunks_initialized, arr.nchunks
        if written != expected:
            raise RuntimeError(
                f"only {written} of {expected} chunks of '{name}' reached the store; if Dask "
                f"workers run on other machines, write to a URL they share (s3://, gs://, ...)"
            )

    # attributes last: a store whose write did not finish has no rffor_format and won't open
    group.attrs.update({"rffor_format": FORMAT_VERSION, "n": int(n), "d": int(d), "m": int(m)})


def _looks_like_zarr_local(path: str) -> bool:
    return os.path.isdir(path) and any(
        os.path.exists(os.path.join(path, f)) for f in ("zarr.json", ".zgroup", ".zarray")
    )


def write(
    path_or_url: str | os.PathLike,
    X: Any,
    Y: Any,
    theta: Any = None,
    *,
    chunks: int | None = None,
    storage_options: dict | None = None,
    overwrite: bool = False,
    dtype: str | np.dtype = "float32",
) -> Dataset:
    """Write an rffor dataset (Zarr v3 group) from NumPy or Dask arrays.

    Everything is validated before the data reaches its destination: argument shapes and
    types up front, values block by block while writing (nothing is loaded at once). Local
    paths are written to a temporary sibling directory and renamed into place, so a failed
    write leaves nothing at ``path_or_url`` (and, with ``overwrite=True``, the old dataset
    intact). fsspec URLs are written in place; a failed write is removed on a best-effort
    basis and never carries the ``rffor_format`` attribute, so it does not open.

    Parameters
    ----------
    path_or_url : str or os.PathLike
        Destination: a local path or an fsspec URL (``s3://bucket/train.zarr``).
    X : array-like or dask.array.Array of shape (n, d)
        Inputs; real numbers, finite (also after conversion to ``dtype``).
    Y : array-like or dask.array.Array of shape (n, m)
        Curves on the grid ``theta``; NaN marks an unobserved value, inf is an error, and every
        row needs at least one observed value.
    theta : array-like of shape (m,), optional
        Strictly increasing, finite grid; default ``np.linspace(0, 1, m)``. Stored as float64.
    chunks : int, optional
        Rows per chunk ``c`` (for x and y alike). Default: about 8 MB of y per chunk,
        ``max(1, 8e6 // (itemsize * m))``, capped at n.
    storage_options : dict, optional
        fsspec filesystem options, remote URLs only.
    overwrite : bool, default False
        Replace an existing Zarr store at the destination. Anything else found there (a file,
        a directory that is not a Zarr store) is never removed.
    dtype : {"float32", "float64"}, default "float32"
        Storage dtype of x and y.

    Returns
    -------
    Dataset
        The written dataset, opened and validated.

    Raises
    ------
    FileExistsError
        The destination exists and ``overwrite`` is False.
    ValueError
        Bad arguments or values, naming the argument, the offending row and what was expected.

    Notes
    -----
    Dask inputs are rechunked to exactly the Zarr chunking ``(c, d)`` / ``(c, m)`` before
    storing, so parallel writers never share a chunk, and computed with the active scheduler
    (a ``dask.distributed`` Client if there is one; local workers must then see the path).
    """
    url, options = _normalize_location(path_or_url, storage_options)

    # ---- arguments -------------------------------------------------------------------------
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}") from None
    if dtype not in _FLOAT_DTYPES:
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype}")
    X = _as_array_like(X, "X")
    Y = _as_array_like(Y, "Y")
    if X.ndim != 2:
        hint = " (use X.reshape(-1, 1) for a single feature)" if X.ndim == 1 else ""
        raise ValueError(f"X must be 2-D of shape (n, d); got shape {tuple(X.shape)}{hint}")
    if Y.ndim != 2:
        raise ValueError(f"Y must be 2-D of shape (n, m), one curve per row; got shape {tuple(Y.shape)}")
    for name, a in (("X", X), ("Y", Y)):
        if any(isinstance(s, float) and math.isnan(s) for s in a.shape):
            raise ValueError(
                f"{name} is a Dask array with unknown chunk sizes (shape {a.shape}); call "
                f"{name}.compute_chunk_sizes() first"
            )
        _check_numeric(a, name)
    n, d = (int(s) for s in X.shape)
    n_y, m = (int(s) for s in Y.shape)
    if n_y != n:
        raise ValueError(
            f"X and Y must have the same number of rows: X has {n} (shape {tuple(X.shape)}), "
            f"Y has {n_y} (shape {tuple(Y.shape)})"
        )
    if n < 1 or d < 1 or m < 1:
        raise ValueError(f"X and Y must be non-empty: got X of shape {(n, d)} and Y of shape {(n_y, m)}")
    if theta is None:
        theta = np.linspace(0.0, 1.0, m)
    else:
        try:
            theta = np.array(theta, dtype=np.float64)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"theta must be an array of real numbers: {exc}") from exc
        _check_theta(theta, m, "theta")
    if chunks is None:
        c = max(1, _DEFAULT_CHUNK_BYTES // (dtype.itemsize * m))
    elif isinstance(chunks, (bool, np.bool_)) or not isinstance(chunks, (int, np.integer)):
        raise ValueError(f"chunks must be a positive int (rows per chunk), got {chunks!r}")
    elif chunks < 1:
        raise ValueError(f"chunks must be a positive int (rows per chunk), got {chunks}")
    else:
        c = int(chunks)
    c = min(c, n)

    # ---- destination -----------------------------------------------------------------------
    if _is_remote(url):
        fs, path = _remote_fs(url, options)
        if fs.exists(path):
            if not overwrite:
                raise FileExistsError(f"{url!r} already exists; pass overwrite=True to replace it")
            if not fs.exists(path.rstrip("/") + "/zarr.json"):
                raise ValueError(f"refusing to overwrite {url!r}: it is not a Zarr v3 store")
            fs.rm(path, recursive=True)
        store = _make_store(url, options, read_only=False)
        try:
            _write_into(store, X, Y, theta, c, dtype, sentinel=None)
        except BaseException:
            try:
                if fs.exists(path):
                    fs.rm(path, recursive=True)
            except Exception:  # noqa: BLE001 - best effort; the original error matters
                pass
            raise
        return open(url, options)

    if os.path.lexists(url):
        if not overwrite:
            raise FileExistsError(f"{url!r} already exists; pass overwrite=True to replace it")
        if not _looks_like_zarr_local(url):
            raise ValueError(f"refusing to overwrite {url!r}: it is not a Zarr store (no zarr.json inside)")
    parent, base = os.path.split(url)
    os.makedirs(parent, exist_ok=True)
    token = uuid.uuid4().hex[:12]
    tmp = os.path.join(parent, f".{base}.tmp-{token}")
    try:
        _write_into(
            zarr.storage.LocalStore(tmp),
            X,
            Y,
            theta,
            c,
            dtype,
            sentinel=os.path.join(tmp, "zarr.json"),
        )
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    replace_directory(tmp, url)
    return open(url)
