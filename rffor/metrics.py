"""Error metrics in one place: curves over their observed entries (MATH.md §7) and quantile functions (§6).

Every curve metric takes true curves ``Y`` of shape (n, m) whose NaN entries are unobserved (ignored) and
predictions of the same shape. :class:`CurveScores` accumulates the same metrics chunk by chunk (out-of-core
evaluation). The quantile metrics take scalar targets y (n,) and predicted quantiles (n, q) at increasing levels:
pinball loss, crossing and calibration (coverage).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "mse",
    "nmse",
    "r2_score",
    "curve_mse",
    "curve_median_mse",
    "CurveScores",
    "pinball_loss",
    "crossing_loss",
    "quantile_coverage",
    "calibration_error",
]


def _residuals(Y_true: ArrayLike, Y_pred: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Residuals (0 at unobserved entries) and the observation mask, both (n, m); 1-D inputs are one curve."""
    Y_true = np.asarray(Y_true, dtype=np.float64)
    Y_pred = np.asarray(Y_pred, dtype=np.float64)
    if Y_true.ndim == 1:
        Y_true = Y_true[None, :]
    if Y_pred.ndim == 1:
        Y_pred = Y_pred[None, :]
    if Y_true.ndim != 2:
        raise ValueError(f"Y_true must be a 1-D or 2-D array, got shape {Y_true.shape}")
    if Y_pred.shape != Y_true.shape:
        raise ValueError(f"Y_pred must have the shape of Y_true {Y_true.shape}, got {Y_pred.shape}")
    if Y_true.size == 0:
        raise ValueError(f"Y_true must have at least one row and one column, got shape {Y_true.shape}")
    mask = ~np.isnan(Y_true)
    return np.where(mask, Y_true - Y_pred, 0.0), mask


def mse(Y_true: ArrayLike, Y_pred: ArrayLike) -> float:
    """Mean squared error of curves, ``(1/n) Σ_i Σ_j (y_ij − ŷ_ij)²`` over observed entries (MATH.md §7).

    The metric of paper 000's tables: a sum over the grid, a mean over curves.

    Parameters
    ----------
    Y_true : array-like of shape (n, m) or (m,)
        True curves; NaN entries are unobserved and contribute 0. A 1-D array is one curve.
    Y_pred : array-like of the same shape
        Predicted curves. Non-finite predictions at observed entries make the result non-finite.

    Returns
    -------
    float
    """
    R, _ = _residuals(Y_true, Y_pred)
    return float(np.sum(R**2) / R.shape[0])


def nmse(Y_true: ArrayLike, Y_pred: ArrayLike) -> float:
    """Normalised mean squared error, ``mse(Y_true, Y_pred) / m`` (MATH.md §7).

    Without missing values, the mean of ``(y_ij − ŷ_ij)²`` over all entries.

    Parameters
    ----------
    Y_true : array-like of shape (n, m) or (m,)
    Y_pred : array-like of the same shape

    Returns
    -------
    float
    """
    R, _ = _residuals(Y_true, Y_pred)
    return float(np.sum(R**2) / R.size)


def curve_mse(Y_true: ArrayLike, Y_pred: ArrayLike) -> np.ndarray:
    """Per-curve mean squared error over each curve's observed entries, ``(1/m_i) Σ_j (y_ij − ŷ_ij)²``.

    Returns
    -------
    ndarray of shape (n,)
    """
    R, mask = _residuals(Y_true, Y_pred)
    return np.sum(R**2, axis=1) / np.maximum(mask.sum(axis=1), 1)


def curve_median_mse(Y_true: ArrayLike, Y_pred: ArrayLike) -> float:
    """Median over curves of the per-curve mean squared error (:func:`curve_mse`).

    The validation score of paper 000 §5.1 on corrupted data ("the mean was replaced with median"): a minority of
    outlying validation curves does not move it, so cross-validation does not reward fitting outliers.
    """
    return float(np.median(curve_mse(Y_true, Y_pred)))


def r2_score(Y_true: ArrayLike, Y_pred: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
    """Coefficient of determination over observed entries: per-location R², averaged uniformly over locations.

    scikit-learn's multi-output ``r2_score(multioutput="uniform_average")`` with NaN entries of ``Y_true`` left out
    of both sums of squares; a location with no variance scores 1 if predicted exactly, else 0.

    Parameters
    ----------
    Y_true : array-like of shape (n, m) or (n,)
    Y_pred : array-like of the same shape
    sample_weight : array-like of shape (n,), optional

    Returns
    -------
    float
    """
    Y = np.asarray(Y_true, dtype=np.float64)
    Y_hat = np.asarray(Y_pred, dtype=np.float64)
    if Y.ndim == 1:
        Y, Y_hat = Y[:, None], Y_hat.reshape(-1, 1)
    if Y.shape != Y_hat.shape:
        raise ValueError(f"y has shape {Y.shape}, but the predictions have shape {Y_hat.shape}")
    scores = CurveScores(Y.shape[1])
    scores.add(Y, Y_hat, sample_weight)
    return scores.r2


class CurveScores:
    """MSE, NMSE and R² over observed entries, accumulated chunk by chunk.

    Per location it keeps the weighted count, mean and sum of squared deviations of the observed values (merged
    across chunks by Chan et al.'s formulas) and the sum of squared residuals, so that the result equals the
    in-memory :func:`mse`, :func:`nmse` and :func:`r2_score` of all chunks at once (to rounding).

    Parameters
    ----------
    m : int
        Locations per curve.
    """

    def __init__(self, m: int):
        self.m = int(m)
        self.n = 0
        self.observed = 0
        self.sse = 0.0
        self._count = np.zeros(self.m)
        self._mean = np.zeros(self.m)
        self._m2 = np.zeros(self.m)
        self._ss_res = np.zeros(self.m)

    def add(self, Y: np.ndarray, Y_hat: np.ndarray, sample_weight: np.ndarray | None = None) -> None:
        """Add a chunk of true curves Y (rows, m), NaN = unobserved, and predictions Y_hat (rows, m)."""
        Y = np.asarray(Y, dtype=np.float64)
        Y_hat = np.asarray(Y_hat, dtype=np.float64)
        mask = ~np.isnan(Y)
        w = mask.astype(np.float64)
        if sample_weight is not None:
            w = w * np.asarray(sample_weight, dtype=np.float64)[:, None]
        Y0 = np.where(mask, Y, 0.0)
        R2 = np.where(mask, (Y0 - Y_hat) ** 2, 0.0)
        self.n += Y.shape[0]
        self.observed += int(mask.sum())
        self.sse += float(R2.sum())
        self._ss_res += (w * R2).sum(axis=0)
        cnt = w.sum(axis=0)
        mean_b = np.divide((w * Y0).sum(axis=0), cnt, out=np.zeros_like(cnt), where=cnt > 0)
        m2_b = (w * (Y0 - mean_b) ** 2).sum(axis=0)
        total = self._count + cnt
        delta = mean_b - self._mean
        frac = np.divide(cnt, total, out=np.zeros_like(cnt), where=total > 0)
        self._mean = self._mean + delta * frac
        self._m2 = self._m2 + m2_b + delta**2 * self._count * frac
        self._count = total

    @property
    def mse(self) -> float:
        return self.sse / self.n if self.n else float("nan")

    @property
    def nmse(self) -> float:
        return self.mse / self.m

    @property
    def r2(self) -> float:
        ok = self._count > 0
        if not ok.any():
            return float("nan")
        ss_tot, ss_res = self._m2, self._ss_res
        r2 = np.where(
            ss_tot > 0,
            1 - np.divide(ss_res, ss_tot, out=np.zeros_like(ss_res), where=ss_tot > 0),
            np.where(ss_res > 0, 0.0, 1.0),
        )
        return float(np.mean(r2[ok]))

    def as_dict(self) -> dict:
        """``{"n", "m", "observed", "mse", "nmse", "r2"}``."""
        return {"n": self.n, "m": self.m, "observed": self.observed, "mse": self.mse, "nmse": self.nmse, "r2": self.r2}


# ---------------------------------------------------------------------------------------------------------------
# quantile functions (MATH.md §6)
# ---------------------------------------------------------------------------------------------------------------


def _quantile_inputs(y: ArrayLike, Q: ArrayLike, levels: ArrayLike | None = None):
    y = np.asarray(y, dtype=np.float64).ravel()
    Q = np.asarray(Q, dtype=np.float64)
    if Q.ndim == 1:
        Q = Q[:, None]
    if Q.ndim != 2 or Q.shape[0] != y.shape[0]:
        raise ValueError(f"predicted quantiles must have shape (n, q) with n = {y.shape[0]}, got {Q.shape}")
    if levels is None:
        return y, Q, None
    levels = np.atleast_1d(np.asarray(levels, dtype=np.float64))
    if levels.shape != (Q.shape[1],):
        raise ValueError(f"levels must have one entry per column of the quantiles ({Q.shape[1]}), got {levels.shape}")
    return y, Q, levels


def pinball_loss(y: ArrayLike, Q: ArrayLike, levels: ArrayLike, *, average: bool = False) -> float:
    """Pinball loss of predicted quantiles, summed over the levels (or averaged with ``average=True``).

    ``Σ_k (1/n) Σ_i ρ_τk(y_i − Q[i, k])`` with ``ρ_τ(r) = max(τ r, (τ − 1) r)`` (scikit-learn's
    ``mean_pinball_loss`` per level). The sum over τ ∈ {0.1, 0.3, 0.5, 0.7, 0.9} times 100 is the scale of thesis
    003 Table 5.1; the average over a level grid is the integral pinball loss of MATH.md §6.

    Parameters
    ----------
    y : array-like of shape (n,)
    Q : array-like of shape (n, q)
        Predicted quantiles at the levels.
    levels : array-like of shape (q,)
    average : bool, default False

    Returns
    -------
    float
    """
    from sklearn.metrics import mean_pinball_loss

    y, Q, levels = _quantile_inputs(y, Q, levels)
    total = sum(mean_pinball_loss(y, Q[:, k], alpha=float(t)) for k, t in enumerate(levels))
    return float(total / len(levels) if average else total)


def crossing_loss(Q: ArrayLike) -> float:
    """Crossing of predicted quantiles at increasing levels: the mean over samples of
    ``Σ_k max(Q[i, k] − Q[i, k+1], 0)`` over consecutive levels (torch_itl's crossing loss, per sample).

    0 exactly when every row is non-decreasing. Thesis 003 Table 5.1 reports 100 times it at
    τ ∈ {0.1, 0.3, 0.5, 0.7, 0.9}.

    Parameters
    ----------
    Q : array-like of shape (n, q)
        Quantiles at increasing levels.

    Returns
    -------
    float
    """
    Q = np.asarray(Q, dtype=np.float64)
    if Q.ndim != 2:
        raise ValueError(f"Q must be a 2-D array (n, q), got shape {Q.shape}")
    return float(np.maximum(Q[:, :-1] - Q[:, 1:], 0.0).sum(axis=1).mean()) if Q.shape[1] > 1 else 0.0


def quantile_coverage(y: ArrayLike, Q: ArrayLike) -> np.ndarray:
    """Share of targets at or below each predicted quantile: ``(1/n) Σ_i 1{y_i ≤ Q[i, k]}``, shape (q,).

    For calibrated quantiles it equals the level τ_k (up to sampling noise, about ``sqrt(τ(1 − τ)/n)``).
    """
    y, Q, _ = _quantile_inputs(y, Q)
    return np.mean(y[:, None] <= Q, axis=0)


def calibration_error(y: ArrayLike, Q: ArrayLike, levels: ArrayLike) -> float:
    """``max_k |coverage_k − τ_k|`` of :func:`quantile_coverage` (held-out data: a calibration number)."""
    y, Q, levels = _quantile_inputs(y, Q, levels)
    return float(np.max(np.abs(quantile_coverage(y, Q) - levels)))
