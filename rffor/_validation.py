"""Input validation and missing-output handling shared by the estimator and the solvers.

Every check raises before any work starts, with the argument named and what was expected (DESIGN.md,
"Errors users should get").
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import scipy.sparse as sp

__all__ = [
    "check_X",
    "check_Y",
    "check_theta",
    "check_levels",
    "check_targets",
    "check_real",
    "check_int",
    "check_choice",
    "check_dtype",
    "check_seed",
    "check_generator",
    "fill_missing",
]


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
    """Validate inputs: 2-D, numeric, real, finite, dense (a 1-D array is refused, as by scikit-learn: it is
    ambiguous between one sample and one feature).

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
    if X.ndim == 1:
        raise ValueError(
            f"Expected a 2-D array for {name}, got a 1-D array of shape {X.shape}. Reshape your data either using "
            f"{name}.reshape(-1, 1) if it has a single feature or {name}.reshape(1, -1) if it is a single sample"
        )
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
        raise ValueError(f"{name} has {X.shape[1]} features, but {owner} is expecting {n_features} features as input")
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


def check_levels(levels, name: str = "levels", *, allow_scalar: bool = False) -> np.ndarray:
    """Quantile levels: finite, in [0, 1], strictly increasing (a 1-D array; a scalar too with ``allow_scalar``).

    Returns
    -------
    levels : ndarray of shape (q,), float64
    """
    try:
        arr = np.asarray(levels, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a number or a 1-D array of quantile levels in [0, 1]: {exc}") from None
    if arr.ndim == 0 and allow_scalar:
        arr = arr[None]
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array of quantile levels in [0, 1], got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(arr > 1):
        raise ValueError(f"{name} must hold quantile levels in [0, 1], got {arr.tolist()[:10]}")
    if arr.size > 1 and not np.all(np.diff(arr) > 0):
        raise ValueError(f"{name} must be strictly increasing, got {arr.tolist()[:10]}")
    return arr


def check_targets(y, *, n_samples: int, name: str = "y") -> np.ndarray:
    """Scalar targets: a 1-D array (a column vector is raveled with scikit-learn's DataConversionWarning), finite,
    one per sample.

    Returns
    -------
    y : ndarray of shape (n,), float64
    """
    from sklearn.utils.validation import column_or_1d

    y = _as_real_array(y, name, "(n_samples,)", np.float64)
    if y.ndim == 2 and y.shape[1] != 1:
        raise ValueError(
            f"{name} must be a 1-D array of scalar targets (n_samples,), got shape {y.shape}: a quantile function "
            "is learned for one scalar output"
        )
    y = column_or_1d(y, warn=True).astype(np.float64, copy=False)
    if y.shape[0] != n_samples:
        raise ValueError(f"X and {name} must have the same number of rows, got {n_samples} and {y.shape[0]}")
    if not np.all(np.isfinite(y)):
        raise ValueError(f"{name} must be finite (no NaN or inf): quantile regression needs every target observed")
    return y


def check_real(
    value,
    name: str,
    *,
    low: float = -math.inf,
    high: float = math.inf,
    low_open: bool = False,
    high_open: bool = False,
    allow_inf: bool = False,
) -> float:
    """A real number in an interval (a bool is refused); returns it as a float.

    Parameters
    ----------
    value : object
    name : str
        Argument name, for the message.
    low, high : float
        Bounds of the interval; ``low_open`` / ``high_open`` exclude them.
    allow_inf : bool, default False
        Whether ±inf is accepted (when inside the bounds).

    Raises
    ------
    TypeError
        ``value`` is not a real number.
    ValueError
        ``value`` is NaN, infinite (unless allowed) or outside the interval.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    bad = (
        math.isnan(value)
        or (math.isinf(value) and not allow_inf)
        or value < low
        or value > high
        or (low_open and value == low)
        or (high_open and value == high)
    )
    if bad:
        parts = []
        if low > -math.inf:
            parts.append(f"{'>' if low_open else '>='} {low:g}")
        if high < math.inf:
            parts.append(f"{'<' if high_open else '<='} {high:g}")
        finite = "" if allow_inf else "finite "
        raise ValueError(f"{name} must be a {finite}number {' and '.join(parts)}".rstrip() + f", got {value!r}")
    return value


def check_int(value, name: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer (a bool is refused) in ``[minimum, maximum]``; returns it as an int.

    Raises
    ------
    ValueError
        Not an integer, or out of range (the message names the argument and the range).
    """
    ok = not isinstance(value, (bool, np.bool_)) and isinstance(value, numbers.Integral)
    ok = ok and (minimum is None or value >= minimum) and (maximum is None or value <= maximum)
    if not ok:
        if minimum is not None and maximum is not None:
            what = f"an integer in [{minimum}, {maximum}]"
        elif minimum is not None:
            what = f"an integer >= {minimum}"
        elif maximum is not None:
            what = f"an integer <= {maximum}"
        else:
            what = "an integer"
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return int(value)


def check_choice(value, name: str, options):
    """``value`` if it is one of ``options``, else a ValueError listing them."""
    if not any(value == o and type(value) is type(o) for o in options):
        raise ValueError(f"{name} must be one of {sorted(options, key=repr)}, got {value!r}")
    return value


def check_dtype(dtype, name: str = "dtype") -> np.dtype:
    """``float32`` or ``float64`` (any spelling NumPy understands); returns the NumPy dtype."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"{name} must be 'float32' or 'float64', got {dtype!r}") from None
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"{name} must be 'float32' or 'float64', got {dtype!r}")
    return dt


def check_seed(random_state) -> int:
    """An int seed: from None (fresh OS entropy), an int >= 0, a numpy Generator or RandomState (drawn from it).

    Every random draw of a fit derives from this one integer (feature maps, DSGD streams), so that it can be
    recorded in a checkpoint or a model file and the fit reproduced.
    """
    if random_state is None:
        return int(np.random.SeedSequence().entropy % (2**63))
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, (bool, np.bool_)):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative int, got {random_state!r}")
        return int(random_state)
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(2**63))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(2**31 - 1))
    raise ValueError(f"random_state must be None, an int, a numpy Generator or RandomState, got {random_state!r}")


def check_generator(random_state) -> np.random.Generator:
    """A numpy Generator from None, an int >= 0, a SeedSequence, or a Generator (returned as is)."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None or isinstance(random_state, np.random.SeedSequence):
        return np.random.default_rng(random_state)
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, (bool, np.bool_)):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative integer, got {random_state!r}")
        return np.random.default_rng(int(random_state))
    raise ValueError(
        "random_state must be None, a non-negative int, a numpy.random.SeedSequence or a "
        f"numpy.random.Generator, got {random_state!r}"
    )


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
