"""Input validation and missing-output handling shared by the estimator and the solvers.

Every check raises before any work starts, with the argument named and what was expected (DESIGN.md,
"Errors users should get").
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp

__all__ = ["check_X", "check_Y", "check_theta", "check_positive", "fill_missing"]


def _as_real_array(A, name: str, shape_doc: str, dtype) -> np.ndarray:
    """``A`` as a dense real array of ``dtype``; sparse, complex and non-numeric input refused, argument named."""
    if sp.issparse(A):
        raise TypeError(f"{name} is sparse; rffor needs a dense array of shape {shape_doc} (use {name}.toarray())")
    try:
        A = np.asarray(A)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array of shape {shape_doc}: {exc}") from None
    if np.iscomplexobj(A):
        raise ValueError(f"Complex data not supported: {name} must be real")
    try:
        return A.astype(dtype, copy=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array of shape {shape_doc}: {exc}") from None


def check_X(
    X, *, name: str = "X", n_features: int | None = None, dtype=np.float64, owner: str = "the model"
) -> np.ndarray:
    """Validate inputs: 2-D (a 1-D array is one feature per sample), numeric, real, finite, dense.

    Parameters
    ----------
    X : array-like of shape (n, d)
    n_features : int or None
        Expected number of features (d of the fitted model).
    owner : str
        Who expects ``n_features`` (named in the error message).

    Returns
    -------
    X : ndarray of shape (n, d)
    """
    X = _as_real_array(X, name, "(n_samples, n_features)", dtype)
    one_d = X.ndim == 1
    if one_d:
        X = X[:, None]
    if X.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array of shape (n_samples, n_features), got shape {X.shape}")
    if X.shape[0] == 0:
        raise ValueError(f"{name} has 0 sample(s) (shape={X.shape}) while a minimum of 1 is required.")
    if X.shape[1] == 0:
        raise ValueError(f"{name} has 0 feature(s) (shape={X.shape}) while a minimum of 1 is required.")
    if not np.all(np.isfinite(X)):
        bad = np.argwhere(~np.isfinite(X))[0]
        raise ValueError(f"{name} must be finite (no NaN or inf); found {X[tuple(bad)]} at index {tuple(bad)}")
    if n_features is not None and X.shape[1] != n_features:
        hint = (
            "; a 1-D X is read as n samples of one feature: Reshape your data with X.reshape(1, -1) "
            "if it is a single sample"
            if one_d
            else ""
        )
        raise ValueError(
            f"{name} has {X.shape[1]} features, but {owner} is expecting {n_features} features as input{hint}"
        )
    return X


def check_Y(Y, *, n_samples: int, name: str = "Y", m: int | None = None) -> np.ndarray:
    """Validate output curves: 2-D (n, m), NaN allowed (missing), no inf, no curve entirely missing.

    Parameters
    ----------
    Y : array-like of shape (n, m)

    Returns
    -------
    Y : ndarray of shape (n, m), float64
    """
    Y = _as_real_array(Y, name, "(n_samples, n_locations)", np.float64)
    if Y.ndim == 1:
        Y = Y[:, None]
    if Y.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array of shape (n_samples, n_locations), got shape {Y.shape}")
    if Y.shape[0] != n_samples:
        raise ValueError(f"X and {name} must have the same number of rows, got {n_samples} and {Y.shape[0]}")
    if m is not None and Y.shape[1] != m:
        raise ValueError(f"{name} has {Y.shape[1]} columns but theta has {m} locations")
    if np.isinf(Y).any():
        bad = np.argwhere(np.isinf(Y))[0]
        raise ValueError(f"{name} must not contain inf (NaN marks a missing value); found inf at {tuple(bad)}")
    empty = np.isnan(Y).all(axis=1)
    if empty.any():
        raise ValueError(
            f"{name} has curves with no observed value (all NaN) at rows {np.flatnonzero(empty)[:10].tolist()}; "
            "drop them before fitting"
        )
    return Y


def check_theta(theta, m: int, *, name: str = "theta") -> np.ndarray:
    """Validate the output grid: 1-D of length m, finite, strictly increasing; None gives linspace(0, 1, m)."""
    if theta is None:
        return np.linspace(0.0, 1.0, m)
    try:
        theta = np.asarray(theta, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric 1-D array: {exc}") from None
    if theta.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of locations, got shape {theta.shape}")
    if theta.shape[0] != m:
        raise ValueError(f"{name} has {theta.shape[0]} locations but Y has {m} columns")
    if not np.all(np.isfinite(theta)):
        raise ValueError(f"{name} must be finite")
    if m > 1 and not np.all(np.diff(theta) > 0):
        i = int(np.flatnonzero(np.diff(theta) <= 0)[0])
        raise ValueError(
            f"{name} must be strictly increasing; theta[{i}] = {theta[i]} >= theta[{i + 1}] = {theta[i + 1]}"
        )
    return theta


def check_positive(value, name: str, *, allow_zero: bool = False) -> float:
    """A finite real number > 0 (or >= 0)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    if not np.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be a finite number {'>=' if allow_zero else '>'} 0, got {value!r}")
    return float(value)


def fill_missing(Y: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Fill NaN entries of each curve by linear interpolation along θ, constant beyond the ends (MATH.md §3.3).

    Vectorised over curves: for every entry the nearest observed locations on each side are found with
    running maxima/minima of their indices.

    Parameters
    ----------
    Y : ndarray of shape (n, m)
        NaN marks a missing value; every curve must have at least one observed value.
    theta : ndarray of shape (m,)

    Returns
    -------
    Y_filled : ndarray of shape (n, m) (``Y`` itself when nothing is missing).
    """
    mask = ~np.isnan(Y)
    if mask.all():
        return Y
    if not mask.any(axis=1).all():
        raise ValueError("cannot fill a curve with no observed value")
    n, m = Y.shape
    cols = np.arange(m)
    prev = np.maximum.accumulate(np.where(mask, cols, -1), axis=1)
    nxt = np.minimum.accumulate(np.where(mask, cols, m)[:, ::-1], axis=1)[:, ::-1]
    # beyond the ends: constant extrapolation from the only neighbour there is
    prev_c = np.where(prev < 0, nxt, prev)
    nxt_c = np.where(nxt >= m, prev_c, nxt)
    rows = np.arange(n)[:, None]
    y0, y1 = Y[rows, prev_c], Y[rows, nxt_c]
    t0, t1 = theta[prev_c], theta[nxt_c]
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(t1 > t0, (theta[None, :] - t0) / (t1 - t0), 0.0)
    return np.where(mask, Y, y0 + w * (y1 - y0))
