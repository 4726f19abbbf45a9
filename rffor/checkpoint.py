"""Checkpoints of a random-feature fit: the state of a route after a completed round or pass, written atomically.

A checkpoint is an uncompressed ``.npz`` readable without pickle: the route's state as named plain arrays (stored
as ``state_<name>``: for DSGD rounds the iterate ``B``, its average ``B_avg`` and the step counter ``t``; for MM
passes the point ``B`` and the momentum's previous iterate ``B_prev``), ``round`` (the last completed round or
pass, 0-based) and ``meta``, a JSON string ``{"format": 2, "info": {...}, "history": [...]}``. ``info`` holds the
``random_state``, the number of partitions and the :func:`fingerprint` of the fit (data shape and grid, the
settings' fingerprint, the model), which :func:`load_for_resume` compares with the fit that wants to resume, naming
every difference. This module knows no solver type: each route turns its state into arrays and back.

Writing goes to a temporary file in the same directory, fsync'ed, then :func:`os.replace`: a crash at any moment
leaves either the previous checkpoint or the new one. Nothing here imports Dask: serial and Dask fits share it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["CHECKPOINT_FORMAT", "Checkpoint", "save", "load", "fingerprint", "load_for_resume", "verify"]

#: version of the checkpoint file layout written by :func:`save`
CHECKPOINT_FORMAT = 2


@dataclass
class Checkpoint:
    """The state after a completed round or pass (what :func:`load` returns).

    Attributes
    ----------
    state : dict of str to ndarray
        The route's state, by name.
    round : int
        Last completed round (0-based); a resumed fit starts at ``round + 1``.
    history : list of dict
        Per-round records up to ``round``.
    info : dict
        What the checkpoint belongs to: ``random_state``, ``n_partitions`` and the ``fingerprint`` of the fit's
        settings and data (compared on resume).
    """

    state: dict[str, np.ndarray]
    round: int
    history: list[dict]
    info: dict


def save(path, state: dict[str, np.ndarray], round: int, history: Sequence[dict], info: dict) -> str:
    """Write a checkpoint atomically: a temporary file in the same directory, fsync, then ``os.replace``.

    The file is an uncompressed ``.npz`` (the state's arrays as ``state_<name>``, ``round`` and a JSON string
    ``meta``), readable without pickle. A crash at any moment leaves either the previous checkpoint or the new one.

    Parameters
    ----------
    path : str or os.PathLike
    state : dict of str to array-like
        The route's state (plain numeric arrays or numbers).
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
            arrays = {f"state_{k}": np.asarray(v, order="C") for k, v in state.items()}
            np.savez(
                f, **arrays, round=np.array(int(round), dtype=np.int64), meta=np.array(json.dumps(meta, allow_nan=True))
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


def load(path) -> Checkpoint:
    """Read a checkpoint written by :func:`save` (no pickle).

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
            if {"round", "meta"} <= files:
                meta = json.loads(str(z["meta"][()]))
                r = int(z["round"][()])
                state = {k[6:]: z[k] for k in files if k.startswith("state_")}
    except FileNotFoundError:
        raise
    except (OSError, EOFError, KeyError, ValueError) as exc:  # not an npz, truncated, pickled objects
        raise ValueError(f"{path!r} is not a readable rffor checkpoint: {exc}") from exc
    missing = {"round", "meta"} - files
    if missing:
        raise ValueError(f"{path!r} is not an rffor checkpoint: arrays {sorted(missing)} missing")
    if not isinstance(meta, dict) or meta.get("format") != CHECKPOINT_FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else None
        raise ValueError(f"{path!r} has checkpoint format {found!r}; this rffor reads format {CHECKPOINT_FORMAT}")
    return Checkpoint(state, r, list(meta.get("history", [])), dict(meta.get("info", {})))


def fingerprint(data, settings: dict, n_partitions: int, random_state: int) -> dict:
    """What a checkpoint must agree with to be resumed: the data's shape and grid, every setting of the fit.

    ``settings`` maps setting names to values (the settings' own fingerprint,
    :meth:`rffor.settings.RFSettings.fingerprint`, and the model: loss, kernels); values that are not JSON scalars
    (losses, kernels, grids) are recorded by their ``repr``.
    """
    theta = np.ascontiguousarray(np.asarray(data.theta, dtype=np.float64))
    recorded = {}
    for key, value in sorted(settings.items()):
        recorded[key] = value if value is None or isinstance(value, (bool, int, float, str)) else repr(value)
    return {
        "data": {
            "n": int(data.n),
            "d": int(data.d),
            "m": int(data.m),
            "chunk_rows": int(data.chunk_rows),
            "theta_sha256": hashlib.sha256(theta.tobytes()).hexdigest(),
        },
        "settings": recorded,
        "n_partitions": int(n_partitions),
        "random_state": int(random_state),
    }


def _diff(a: dict, b: dict, prefix: str = "") -> list[str]:
    out = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            out += _diff(va, vb, f"{prefix}{key}.")
        elif va != vb:
            out.append(f"{prefix}{key}: checkpoint {va!r}, now {vb!r}")
    return out


def load_for_resume(path, expected: dict) -> Checkpoint | None:
    """The checkpoint at ``path`` if it exists (None otherwise), after checking that it belongs to this fit.

    Parameters
    ----------
    path : str or os.PathLike
    expected : dict
        The :func:`fingerprint` of the fit that wants to resume.

    Raises
    ------
    ValueError
        The file is not a checkpoint, or it belongs to another fit (the message lists every difference: data,
        settings, partitions, random state).
    """
    if not os.path.exists(os.fspath(path)):
        return None
    return verify(load(path), expected, path)


def verify(ckpt: Checkpoint, expected: dict, path) -> Checkpoint:
    """``ckpt`` if its fingerprint equals ``expected``; else a ValueError listing every difference."""
    diff = _diff(ckpt.info.get("fingerprint", {}), expected)
    if diff:
        raise ValueError(
            f"the checkpoint {os.fspath(path)!r} belongs to another fit: "
            + "; ".join(diff)
            + ". Use the same data and settings, or resume=False to start over."
        )
    return ckpt
