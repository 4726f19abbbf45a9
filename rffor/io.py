"""Save and load fitted models without pickle: ``est.save(path)`` and ``rffor.load(path)``.

The format
----------
A model is a **zip archive** (the default: one file to share, e.g. ``model.rffor``) or a **directory** with the
same members (``format="directory"``; handy to inspect)::

    model.rffor
      metadata.json        UTF-8 JSON, described below
      arrays/<name>.npy    NumPy ``.npy`` files, numeric dtypes only (saved with ``allow_pickle=False``)

``metadata.json`` holds::

    {
      "format": "rffor-model",            # what this file is
      "format_version": 1,                # bumped on any incompatible change; readers refuse other versions
      "rffor_version": "0.1.0",           # library that wrote it (information only)
      "estimator": "FunctionalRegressor",
      "params": {...},                    # constructor parameters that are JSON values; loss and kernels as
                                          # specs ({"name": "huber", "kappa": 0.1, "p": 1}; null = default)
      "not_saved": [...],                 # runtime parameters reset to their defaults (client, security,
                                          # scheduler_address, checkpoint, resume, a non-integer random_state)
      "fitted": {                         # what fit() learned, besides the arrays
        "solver": "admm" | "apgd" | "rff",
        "loss": spec, "kernel_x": spec, "kernel_theta": spec,
        "n_features_in": d, "y_1d": false, "n_iter": int, "duality_gap": float or null,
        "solver_state": {...}             # solver specific (rff: feature maps, seeds, dtype)
      },
      "arrays": {"<name>": {"dtype": "<f8", "shape": [n, m], "sha256": "..."}, ...}
    }

Arrays of the exact solvers (``solver`` "admm" or "apgd"): ``theta`` (the training grid), ``x_fit`` (training
inputs), ``dual_coef`` (A of MATH.md (D_s) or (D_e)), ``w`` and ``w_grid`` (the prediction weights, so that
``predict`` is the same computation as in the original), ``objective_history``.

Arrays of random-feature models (``"rff"``): ``theta``, ``coef`` (B of MATH.md (P_rf)), ``input_frequencies`` (the
frequencies of φ_X), ``phi_theta_grid`` (φ_Θ on the training grid), ``objective_history``, and for the output map
either ``output_grid``, ``output_eigenvalues``, ``output_proj``, ``output_grid_features`` (the exact factor of K_Θ)
or ``output_frequencies`` (random output features). The *values* of the feature maps are stored, not only their
seeds: NumPy does not promise the same random stream across versions, and an eigendecomposition may differ in sign
across BLAS builds, so regenerating them on another machine could change the predictions. The seeds and kernels
are still recorded in ``fitted.solver_state`` (``input_features``, ``output_features``, ``random_state``), with the
per-round training history.

Non-finite floats in ``metadata.json`` (``Huber(kappa=inf)``) use the ``Infinity`` / ``NaN`` tokens that Python's
:mod:`json` reads and writes.

Safety
------
Loading reads JSON with :func:`json.loads` and arrays with ``np.load(..., allow_pickle=False)``: nothing in a model
file can execute code. Member names are fixed by the format (never taken from the file), sizes are checked before
anything is read, every array is checked against its SHA-256, dtype and shape, and the fitted state is checked for
consistency. A file of another kind, of another format version, truncated or corrupted raises a ``ValueError``
that says which.

Saving writes to a temporary sibling (``.NAME.tmp-XXXX``) and renames it into place with :func:`os.replace`: an
interrupted or failed save leaves the previous file (or nothing) at ``path``, never half a model.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import numbers
import os
import re
import shutil
import uuid
import zipfile
import zlib
from typing import Any

import numpy as np

from ._atomic import replace_directory

__all__ = ["save", "load", "read_metadata", "is_model", "FORMAT_NAME", "FORMAT_VERSION"]

FORMAT_NAME = "rffor-model"
"""Value of the ``format`` field of ``metadata.json``."""

FORMAT_VERSION = 1
"""Version of the format written by :func:`save`; :func:`load` reads exactly this version."""

METADATA = "metadata.json"
_MAX_METADATA_BYTES = 64 * 2**20  # the metadata is small; refuse to parse anything huge
_NPY_HEADER_SLACK = 4096  # an .npy file is its data plus a header of at most a few hundred bytes
_ARRAY_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_DTYPES = {"<f4", "<f8", "<i8", "<i4", "|b1", "<u8"}

#: parameters describing where and how a fit ran, not the model: reset to their defaults in a saved model
_RUNTIME_PARAMS = ("client", "security", "scheduler_address", "checkpoint", "resume")


# -------------------------------------------------------------------------------------------------------------
# JSON helpers
# -------------------------------------------------------------------------------------------------------------


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def _is_json_value(value: Any) -> bool:
    try:
        json.dumps(value, default=_json_default)
    except (TypeError, ValueError):
        return False
    return True


def _spec(obj: Any) -> Any:
    return None if obj is None else obj.to_spec()


# -------------------------------------------------------------------------------------------------------------
# gathering the state of a fitted estimator
# -------------------------------------------------------------------------------------------------------------


def _params_for_save(est) -> tuple[dict, list[str]]:
    params, not_saved = {}, []
    for name, value in est.get_params(deep=False).items():
        if name in ("loss", "kernel_x", "kernel_theta"):
            params[name] = _spec(value)
        elif name in _RUNTIME_PARAMS:
            if value is not None and value is not False:
                not_saved.append(name)
        elif name == "random_state" and not (
            value is None or (isinstance(value, numbers.Integral) and not isinstance(value, bool))
        ):
            not_saved.append(name)
            params[name] = None
        elif _is_json_value(value):
            params[name] = value.item() if isinstance(value, np.generic) else value
        else:
            not_saved.append(name)
    return params, not_saved


def _exact_state(est) -> tuple[dict, dict[str, np.ndarray]]:
    arrays = {
        "theta": est.theta_,
        "x_fit": est.X_fit_,
        "dual_coef": est.dual_coef_,
        "w": est._W,
        "w_grid": est._W_grid,
        "objective_history": np.asarray(est.objective_history_, dtype=np.float64),
    }
    return {}, arrays


def _rff_state(est) -> tuple[dict, dict[str, np.ndarray]]:
    from .features import ExactOutputFactor

    inp, out = est.input_features_, est.output_features_
    arrays = {
        "theta": est.theta_,
        "coef": est.coef_,
        "input_frequencies": inp.W,
        "phi_theta_grid": est._Phi_theta_grid,
        "objective_history": np.asarray(est.objective_history_, dtype=np.float64),
    }
    if isinstance(out, ExactOutputFactor):
        out_spec = {"kind": "exact", "kernel": out.kernel.to_spec(), "tol": out.tol, "dtype": out.dtype.name}
        arrays.update(
            output_grid=out.theta_grid,
            output_eigenvalues=out.eigenvalues,
            output_proj=out._proj,
            output_grid_features=out.grid_features,
        )
    else:
        out_spec = out.to_spec()
        arrays["output_frequencies"] = out.W
    history = getattr(est, "rff_history_", None)
    state = {
        "input_features": inp.to_spec(),
        "output_features": out_spec,
        "random_state": int(est.random_state_),
        "method": getattr(est, "rff_method_", None),
        "history": history if history is not None and _is_json_value(history) else None,
    }
    return state, arrays


def _frequencies(arrays: dict, name: str, dim: int, n_features: int, dtype: str, path: str) -> np.ndarray:
    W = arrays.get(name)
    _check(W is not None, path, f"array {name!r} is missing")
    _check(W.shape == (dim, n_features // 2), path, f"{name} has shape {W.shape}, expected {(dim, n_features // 2)}")
    _check(W.dtype == np.dtype(dtype), path, f"{name} has dtype {W.dtype}, expected {dtype}")
    return np.ascontiguousarray(W)


def _rff_set_state(est, state: dict, arrays: dict[str, np.ndarray], path: str) -> None:
    """Rebuild the feature maps from the stored values (frequencies, output factor), not from their seeds."""
    from .features import ExactOutputFactor, RandomFourierFeatures, RandomOutputFeatures
    from .kernels import kernel_from_spec

    required = ("theta", "coef", "input_frequencies", "phi_theta_grid", "objective_history")
    missing = [n for n in required if n not in arrays]
    _check(not missing, path, f"arrays {missing} are missing")
    spec_in, spec_out = state.get("input_features"), state.get("output_features")
    _check(isinstance(spec_in, dict) and isinstance(spec_out, dict), path, "the feature maps are not described")
    inp = RandomFourierFeatures.from_spec(spec_in)
    _check(inp.dim == est.n_features_in_, path, "the input feature map does not match n_features_in")
    inp._W = _frequencies(arrays, "input_frequencies", inp.dim, inp.n_features, inp.dtype.name, path)

    theta = arrays["theta"]
    _check(theta.ndim == 1 and theta.size >= 1 and np.all(np.isfinite(theta)), path, "theta is not a finite grid")
    kind = spec_out.get("kind")
    if kind == "exact":
        out = ExactOutputFactor.__new__(ExactOutputFactor)
        out.kernel = kernel_from_spec(spec_out["kernel"])
        out.tol = float(spec_out["tol"])
        out.dtype = np.dtype(spec_out["dtype"])
        _check(out.dtype.name in ("float32", "float64"), path, "the output features have an invalid dtype")
        grid, t = arrays.get("output_grid"), arrays.get("output_eigenvalues")
        proj, feats = arrays.get("output_proj"), arrays.get("output_grid_features")
        _check(all(a is not None for a in (grid, t, proj, feats)), path, "the output factor arrays are missing")
        r = t.shape[0] if t.ndim == 1 else -1
        _check(grid.ndim == 2 and t.ndim == 1 and np.all(t > 0), path, "invalid output factor eigenvalues or grid")
        _check(proj.shape == (grid.shape[0], r) and feats.shape == (grid.shape[0], r), path, "invalid output factor")
        out.theta_grid, out.eigenvalues, out._proj = grid, t, proj
        out._V = proj * np.sqrt(t)
        out.grid_features = np.ascontiguousarray(feats, dtype=out.dtype)
    elif kind == "rff_theta":
        sub = dict(spec_out, kind="rff")
        base = RandomFourierFeatures.from_spec(sub)
        out = RandomOutputFeatures(base.kernel, base.n_features, base.seed, dtype=base.dtype, dim=base.dim)
        out._W = _frequencies(arrays, "output_frequencies", out.dim, out.n_features, out.dtype.name, path)
    else:
        raise ValueError(f"{path!r} is corrupted: unknown output feature map {kind!r}")
    coef, phi = arrays["coef"], arrays["phi_theta_grid"]
    expected = (inp.n_features, out.n_features)
    _check(coef.shape == expected, path, f"coef has shape {coef.shape}, expected {expected}")
    _check(phi.shape == (theta.shape[0], out.n_features), path, "phi_theta_grid does not match the grid and features")
    est.theta_ = theta
    est.coef_ = coef
    est.input_features_ = inp
    est.output_features_ = out
    est._Phi_theta_grid = phi
    est.objective_history_ = arrays["objective_history"]
    rs = state.get("random_state")
    _check(isinstance(rs, int) and not isinstance(rs, bool), path, "random_state must be an integer")
    est.random_state_ = rs
    est.rff_method_ = state.get("method")
    est.rff_history_ = state.get("history")


def _collect(est) -> tuple[dict, dict[str, np.ndarray]]:
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(est, "solver_")
    params, not_saved = _params_for_save(est)
    if est.solver_ == "rff":
        solver_state, arrays = _rff_state(est)
    else:
        solver_state, arrays = _exact_state(est)
    gap = getattr(est, "duality_gap_", None)
    fitted = {
        "solver": est.solver_,
        "loss": est.loss_.to_spec(),
        "kernel_x": est.kernel_x_.to_spec(),
        "kernel_theta": est.kernel_theta_.to_spec(),
        "n_features_in": int(est.n_features_in_),
        "y_1d": bool(getattr(est, "_y_1d", False)),
        "n_iter": None if getattr(est, "n_iter_", None) is None else int(est.n_iter_),
        "duality_gap": None if gap is None else float(gap),
        "solver_state": solver_state,
    }
    from . import __version__

    meta = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "rffor_version": __version__,
        "estimator": type(est).__name__,
        "params": params,
        "not_saved": not_saved,
        "fitted": fitted,
        "arrays": {},
    }
    clean = {}
    for name, a in arrays.items():
        if not _ARRAY_NAME.match(name):  # pragma: no cover - names are ours
            raise ValueError(f"invalid array name {name!r}")
        a = np.ascontiguousarray(a)
        if a.dtype.byteorder == ">" or a.dtype.str not in _DTYPES:
            a = a.astype(a.dtype.newbyteorder("<")) if a.dtype.kind in "fiu" else a
        if a.dtype.str not in _DTYPES:
            raise TypeError(f"cannot save array {name!r} of dtype {a.dtype}")
        clean[name] = a
    return meta, clean


def _npy_bytes(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


# -------------------------------------------------------------------------------------------------------------
# save
# -------------------------------------------------------------------------------------------------------------


def save(estimator, path: str | os.PathLike, *, format: str | None = None) -> str:  # noqa: A002
    """Save a fitted :class:`~rffor.FunctionalRegressor` (see the module docstring for the format).

    Parameters
    ----------
    estimator : FunctionalRegressor
        A fitted estimator.
    path : str or os.PathLike
        Destination, e.g. ``"model.rffor"``. An existing file is replaced; an existing directory is replaced only
        if it is an rffor model saved with ``format="directory"``.
    format : {"zip", "directory"} or None, default None
        A single zip file, or a directory with the same members. None: "directory" if ``path`` is an existing
        directory, else "zip".

    Returns
    -------
    path : str
        The path written.

    Raises
    ------
    sklearn.exceptions.NotFittedError
        The estimator is not fitted.
    ValueError
        Bad ``format``, or ``path`` is a directory that is not an rffor model.
    """
    path = os.fspath(path)
    if format is None:
        format = "directory" if os.path.isdir(path) else "zip"  # noqa: A001
    if format not in ("zip", "directory"):
        raise ValueError(f"format must be 'zip' or 'directory', got {format!r}")
    meta, arrays = _collect(estimator)
    payload = {}
    for name, a in arrays.items():
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
    for key, kind in (("params", dict), ("fitted", dict), ("arrays", dict)):
        if not isinstance(meta.get(key), kind):
            raise ValueError(f"{reader.path!r} is corrupted: {METADATA} field {key!r} is missing or not an object")
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


def _check(cond: bool, path: str, what: str) -> None:
    if not cond:
        raise ValueError(f"{path!r} is corrupted: {what}")


def load(path: str | os.PathLike):
    """Load a model saved by :func:`save` (or ``FunctionalRegressor.save``).

    Nothing in the file can execute code: JSON metadata and ``.npy`` arrays read with ``allow_pickle=False``.

    Parameters
    ----------
    path : str or os.PathLike
        A zip file or a directory written by :func:`save`.

    Returns
    -------
    FunctionalRegressor
        Fitted; predicts exactly as the saved estimator did.

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
        _check(len(names) == len(meta["arrays"]), path, "invalid array names")
        arrays = {name: _read_array(reader, meta, name) for name in names}
    try:
        return _build(meta, arrays, path)
    except ValueError as exc:
        if str(exc).startswith(repr(path)):
            raise
        raise ValueError(f"{path!r} is corrupted: {exc}") from None
    except (TypeError, KeyError, IndexError, AttributeError) as exc:
        raise ValueError(f"{path!r} is corrupted: inconsistent model state ({type(exc).__name__}: {exc})") from None


def _build(meta: dict, arrays: dict[str, np.ndarray], path: str):
    from .estimator import FunctionalRegressor
    from .kernels import kernel_from_spec
    from .losses import loss_from_spec

    _check(meta.get("estimator") == "FunctionalRegressor", path, f"unknown estimator {meta.get('estimator')!r}")
    params = dict(meta["params"])
    known = FunctionalRegressor().get_params(deep=False)
    unknown = sorted(set(params) - set(known))
    _check(not unknown, path, f"unknown estimator parameters {unknown}")
    for name in ("loss",):
        if params.get(name) is not None:
            params[name] = loss_from_spec(params[name])
    for name in ("kernel_x", "kernel_theta"):
        if params.get(name) is not None:
            params[name] = kernel_from_spec(params[name])
    est = FunctionalRegressor(**params)

    fitted = meta["fitted"]
    solver = fitted.get("solver")
    _check(solver in ("admm", "apgd", "rff"), path, f"unknown solver {solver!r}")
    est.solver_ = solver
    est.loss_ = loss_from_spec(fitted["loss"])
    est.kernel_x_ = kernel_from_spec(fitted["kernel_x"])
    est.kernel_theta_ = kernel_from_spec(fitted["kernel_theta"])
    d = fitted["n_features_in"]
    _check(isinstance(d, int) and d >= 1, path, f"n_features_in must be a positive integer, got {d!r}")
    est.n_features_in_ = d
    est._y_1d = bool(fitted.get("y_1d", False))
    if fitted.get("n_iter") is not None:
        est.n_iter_ = int(fitted["n_iter"])
    if fitted.get("duality_gap") is not None:
        est.duality_gap_ = float(fitted["duality_gap"])

    if solver == "rff":
        _rff_set_state(est, fitted.get("solver_state") or {}, arrays, path)
        return est

    required = ("theta", "x_fit", "dual_coef", "w", "w_grid", "objective_history")
    missing = [n for n in required if n not in arrays]
    _check(not missing, path, f"arrays {missing} are missing")
    theta, X_fit, W, W_grid = arrays["theta"], arrays["x_fit"], arrays["w"], arrays["w_grid"]
    _check(theta.ndim == 1 and theta.size >= 1 and np.all(np.isfinite(theta)), path, "theta is not a finite grid")
    m = theta.shape[0]
    _check(X_fit.ndim == 2 and X_fit.shape[1] == d, path, "X_fit does not have n_features_in columns")
    n = X_fit.shape[0]
    _check(W.shape == (n, m) and W_grid.shape == (n, m), path, "the prediction weights do not match (n, m)")
    _check(arrays["dual_coef"].ndim == 2 and arrays["dual_coef"].shape[0] == n, path, "dual_coef has a wrong shape")
    est.theta_ = theta
    est.X_fit_ = X_fit
    est.dual_coef_ = arrays["dual_coef"]
    est._W = W
    est._W_grid = W_grid
    est.objective_history_ = arrays["objective_history"]
    return est
