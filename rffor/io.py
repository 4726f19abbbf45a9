"""The model file container: JSON metadata plus ``.npy`` arrays, in a zip archive or a directory, without pickle.

This module knows the container, not the models: an estimator gathers its own state (``_get_fitted_state`` in
:mod:`rffor.estimator`) and hands :func:`write` a metadata dictionary and named arrays; :func:`read` returns them
after every check below, and :func:`rffor.load` asks the estimator class named in the metadata to rebuild itself.

The format
----------
A model is a **zip archive** (the default: one file to share, e.g. ``model.rffor``) or a **directory** with the
same members (``format="directory"``; handy to inspect)::

    model.rffor
      metadata.json        UTF-8 JSON, described below
      arrays/<name>.npy    NumPy ``.npy`` files, numeric dtypes only (saved with ``allow_pickle=False``)

``metadata.json`` holds what the writer gave (for the estimators: ``estimator``, ``params``, ``not_saved``,
``fitted``; see :mod:`rffor.estimator`) and what this module adds::

    {
      "format": "rffor-model",            # what this file is
      "format_version": 1,                # bumped on any incompatible change; readers refuse other versions
      "rffor_version": "0.1.0",           # library that wrote it (information only)
      "arrays": {"<name>": {"dtype": "<f8", "shape": [n, m], "sha256": "..."}, ...},
      ...                                 # the writer's keys
    }

Non-finite floats (``Huber(kappa=inf)``) use the ``Infinity`` / ``NaN`` tokens that Python's :mod:`json` reads and
writes.

Safety
------
Reading parses JSON with :func:`json.loads` and arrays with ``np.load(..., allow_pickle=False)``: nothing in a model
file can execute code. Member names are fixed by the format (never taken from the file as paths), sizes are checked
before anything is read, and every array is checked against its SHA-256, dtype and shape. A file of another kind,
of another format version, truncated or corrupted raises a ``ValueError`` that says which.

Writing goes to a temporary sibling (``.NAME.tmp-XXXX``) renamed into place with :func:`os.replace`: an
interrupted or failed save leaves the previous file (or nothing) at the path, never half a model.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import shutil
import uuid
import zipfile
import zlib
from typing import Any

import numpy as np

from ._atomic import replace_directory
from ._version import __version__

__all__ = ["write", "read", "read_metadata", "is_model", "json_value", "FORMAT_NAME", "FORMAT_VERSION"]

FORMAT_NAME = "rffor-model"
"""Value of the ``format`` field of ``metadata.json``."""

FORMAT_VERSION = 1
"""Version of the format written by :func:`write`; :func:`read` reads exactly this version."""

METADATA = "metadata.json"
_MAX_METADATA_BYTES = 64 * 2**20  # the metadata is small; refuse to parse anything huge
_NPY_HEADER_SLACK = 4096  # an .npy file is its data plus a header of at most a few hundred bytes
_ARRAY_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_DTYPES = {"<f4", "<f8", "<i8", "<i4", "|b1", "<u8"}


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def json_value(value: Any) -> bool:
    """Whether ``value`` can be written into ``metadata.json`` (JSON, NumPy scalars and arrays included)."""
    try:
        json.dumps(value, default=_json_default)
    except (TypeError, ValueError):
        return False
    return True


def _clean_arrays(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    clean = {}
    for name, a in arrays.items():
        if not isinstance(name, str) or not _ARRAY_NAME.match(name):
            raise ValueError(f"invalid array name {name!r}: lowercase letters, digits and '_', at most 64")
        a = np.ascontiguousarray(a)
        if a.ndim > 3:
            raise ValueError(f"array {name!r} has {a.ndim} dimensions; the format stores at most 3")
        if a.dtype.byteorder == ">" and a.dtype.kind in "fiu":
            a = a.astype(a.dtype.newbyteorder("<"))
        if a.dtype.str not in _DTYPES:
            raise TypeError(f"cannot save array {name!r} of dtype {a.dtype}")
        clean[name] = a
    return clean


def _npy_bytes(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


# -------------------------------------------------------------------------------------------------------------
# save
# -------------------------------------------------------------------------------------------------------------


def write(
    path: str | os.PathLike,
    metadata: dict,
    arrays: dict[str, np.ndarray],
    *,
    format: str | None = None,  # noqa: A002
) -> str:
    """Write a model container atomically.

    Parameters
    ----------
    path : str or os.PathLike
        Destination, e.g. ``"model.rffor"``. An existing file is replaced; an existing directory only if it is an
        rffor model written with ``format="directory"``.
    metadata : dict
        JSON-serialisable description (NumPy scalars and arrays are converted); must not use the keys this module
        writes (``format``, ``format_version``, ``rffor_version``, ``arrays``).
    arrays : dict of str to ndarray
        Named numeric arrays (names: lowercase letters, digits and ``_``; at most 3 dimensions).
    format : {"zip", "directory"} or None, default None
        None: "directory" if ``path`` is an existing directory, else "zip".

    Returns
    -------
    path : str

    Raises
    ------
    ValueError
        Bad ``format`` or array name, reserved metadata key, or ``path`` is a directory that is not an rffor model.
    TypeError
        An array of a dtype the format does not store.
    """
    path = os.fspath(path)
    if format is None:
        format = "directory" if os.path.isdir(path) else "zip"  # noqa: A001
    if format not in ("zip", "directory"):
        raise ValueError(f"format must be 'zip' or 'directory', got {format!r}")
    reserved = {"format", "format_version", "rffor_version", "arrays"} & set(metadata)
    if reserved:
        raise ValueError(f"metadata must not set the container's keys {sorted(reserved)}")
    meta = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "rffor_version": __version__, **metadata}
    meta["arrays"] = {}
    payload = {}
    for name, a in _clean_arrays(arrays).items():
        data = _npy_bytes(a)
        payload[f"arrays/{name}.npy"] = data
        meta["arrays"][name] = {
            "dtype": a.dtype.str,
            "shape": list(a.shape),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
    meta_bytes = json.dumps(meta, indent=2, default=_json_default).encode("utf-8")

    parent, base = os.path.split(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    if format == "zip":
        if os.path.isdir(path):
            raise ValueError(f"{path!r} is a directory; pass format='directory' or choose another path")
        tmp = os.path.join(parent, f".{base}.tmp-{uuid.uuid4().hex[:12]}")
        try:
            # os.open honours the umask (mkstemp would make the model readable by its owner only)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
            with os.fdopen(fd, "wb") as f:
                with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED) as zf:
                    for member, data in payload.items():
                        zf.writestr(_zipinfo(member), data)
                    zf.writestr(_zipinfo(METADATA), meta_bytes)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            _remove(tmp)
            raise
        return path

    # directory: build a sibling, then swap it into place
    if os.path.lexists(path) and not (os.path.isdir(path) and _is_model_dir(path)):
        raise ValueError(f"refusing to replace {path!r}: it exists and is not an rffor model directory")
    token = uuid.uuid4().hex[:12]
    tmp = os.path.join(parent, f".{base}.tmp-{token}")
    try:
        os.makedirs(os.path.join(tmp, "arrays"))
        for member, data in payload.items():
            _write_file(os.path.join(tmp, member), data)
        _write_file(os.path.join(tmp, METADATA), meta_bytes)  # last: a directory without it is no model
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    replace_directory(tmp, path)
    return path


def _zipinfo(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))  # reproducible archives
    info.compress_type = zipfile.ZIP_STORED
    info.external_attr = 0o644 << 16
    return info


def _write_file(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# -------------------------------------------------------------------------------------------------------------
# reading
# -------------------------------------------------------------------------------------------------------------


class _Reader:
    """Fixed-name member access to a zip archive or a directory, with size limits."""

    def __init__(self, path: str):
        self.path = path
        self._zip: zipfile.ZipFile | None = None
        if os.path.isdir(path):
            if not os.path.isfile(os.path.join(path, METADATA)):
                raise ValueError(f"{path!r} is not an rffor model: the directory has no {METADATA}")
        elif os.path.isfile(path):
            try:
                self._zip = zipfile.ZipFile(path, "r")
            except zipfile.BadZipFile:
                raise ValueError(
                    f"{path!r} is not an rffor model file (not a zip archive, or a truncated one)"
                ) from None
            except OSError as exc:
                raise ValueError(f"{path!r} could not be read as an rffor model: {exc}") from None
        elif not os.path.exists(path):
            raise FileNotFoundError(f"no model at {path!r}")
        else:
            raise ValueError(f"{path!r} is neither a file nor a directory")

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()

    def __enter__(self) -> _Reader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def size(self, member: str) -> int | None:
        if self._zip is not None:
            try:
                return self._zip.getinfo(member).file_size
            except KeyError:
                return None
        full = os.path.join(self.path, *member.split("/"))
        if not os.path.isfile(full) or os.path.islink(full):
            return None
        return os.path.getsize(full)

    def read(self, member: str, max_bytes: int) -> bytes:
        size = self.size(member)
        if size is None:
            raise ValueError(f"{self.path!r} is incomplete: member {member!r} is missing")
        if size > max_bytes:
            raise ValueError(f"{self.path!r} is corrupted: member {member!r} is {size} bytes, expected <= {max_bytes}")
        try:
            if self._zip is not None:
                with self._zip.open(member) as f:
                    data = f.read(max_bytes + 1)
            else:
                with open(os.path.join(self.path, *member.split("/")), "rb") as f:
                    data = f.read(max_bytes + 1)
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as exc:
            raise ValueError(f"{self.path!r} is truncated or corrupted: reading {member!r} failed ({exc})") from None
        if len(data) != size:
            raise ValueError(f"{self.path!r} is truncated: member {member!r} has {len(data)} of {size} bytes")
        return data


def _parse_metadata(reader: _Reader) -> dict:
    raw = reader.read(METADATA, _MAX_METADATA_BYTES)
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{reader.path!r} is corrupted: {METADATA} is not valid JSON ({exc})") from None
    if not isinstance(meta, dict) or "format" not in meta:
        raise ValueError(f"{reader.path!r} is not an rffor model: {METADATA} has no 'format' field")
    if meta["format"] != FORMAT_NAME:
        raise ValueError(
            f"{reader.path!r} is not an rffor model: its format is {meta['format']!r}, not {FORMAT_NAME!r}"
        )
    version = meta.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise ValueError(f"{reader.path!r} is corrupted: format_version must be an integer, got {version!r}")
    if version != FORMAT_VERSION:
        hint = "upgrade rffor to read it" if version > FORMAT_VERSION else "it was written by an older rffor"
        raise ValueError(
            f"{reader.path!r} has model format version {version}; this rffor reads version {FORMAT_VERSION} ({hint})"
        )
    if not isinstance(meta.get("arrays"), dict):
        raise ValueError(f"{reader.path!r} is corrupted: {METADATA} field 'arrays' is missing or not an object")
    return meta


def read_metadata(path: str | os.PathLike) -> dict:
    """Read and validate the metadata of a saved model without loading its arrays.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    dict
        The parsed ``metadata.json``.

    Raises
    ------
    FileNotFoundError
        Nothing at ``path``.
    ValueError
        ``path`` is not an rffor model, has another format version, or is corrupted.
    """
    with _Reader(os.fspath(path)) as reader:
        return _parse_metadata(reader)


def is_model(path: str | os.PathLike) -> bool:
    """Whether ``path`` looks like an rffor model (its metadata names the format); never raises."""
    try:
        read_metadata(path)
    except (OSError, ValueError):
        return False
    return True


def _is_model_dir(path: str) -> bool:
    return os.path.isfile(os.path.join(path, METADATA)) and is_model(path)


def _read_array(reader: _Reader, meta: dict, name: str) -> np.ndarray:
    entry = meta["arrays"].get(name)
    if not isinstance(entry, dict):
        raise ValueError(f"{reader.path!r} is corrupted: array {name!r} is not described in {METADATA}")
    dtype, shape, digest = entry.get("dtype"), entry.get("shape"), entry.get("sha256")
    if dtype not in _DTYPES:
        raise ValueError(f"{reader.path!r} is corrupted: array {name!r} has unsupported dtype {dtype!r}")
    if not (
        isinstance(shape, list)
        and len(shape) <= 3
        and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)
    ):
        raise ValueError(f"{reader.path!r} is corrupted: array {name!r} has an invalid shape {shape!r}")
    if not isinstance(digest, str):
        raise ValueError(f"{reader.path!r} is corrupted: array {name!r} has no sha256")
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    data = reader.read(f"arrays/{name}.npy", nbytes + _NPY_HEADER_SLACK)
    if hashlib.sha256(data).hexdigest() != digest:
        raise ValueError(f"{reader.path!r} is corrupted: array {name!r} does not match its checksum")
    try:
        a = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise ValueError(f"{reader.path!r} is corrupted: array {name!r} could not be read ({exc})") from None
    if not isinstance(a, np.ndarray) or a.dtype.str != dtype or list(a.shape) != shape:
        raise ValueError(f"{reader.path!r} is corrupted: array {name!r} does not have the declared dtype and shape")
    return a


# -------------------------------------------------------------------------------------------------------------
# load
# -------------------------------------------------------------------------------------------------------------


def read(path: str | os.PathLike) -> tuple[dict, dict[str, np.ndarray]]:
    """Read a model container written by :func:`write`, checking everything (see the module docstring).

    Parameters
    ----------
    path : str or os.PathLike
        A zip file or a directory.

    Returns
    -------
    metadata : dict
        The parsed ``metadata.json`` (with the container's keys).
    arrays : dict of str to ndarray
        Every array it lists, each checked against its checksum, dtype and shape.

    Raises
    ------
    FileNotFoundError
        Nothing at ``path``.
    ValueError
        ``path`` is not an rffor model, has another format version, or is truncated or corrupted.
    """
    path = os.fspath(path)
    with _Reader(path) as reader:
        meta = _parse_metadata(reader)
        names = [n for n in meta["arrays"] if isinstance(n, str) and _ARRAY_NAME.match(n)]
        if len(names) != len(meta["arrays"]):
            raise ValueError(f"{path!r} is corrupted: invalid array names")
        arrays = {name: _read_array(reader, meta, name) for name in names}
    return meta, arrays
