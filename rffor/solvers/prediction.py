"""Evaluating a random-feature model (MATH.md §5): predictions ``Ĥ = Φ_X(X) B Φ_Θᵀ`` and the objective J(B) of
(P_rf) by one pass over the data in this process."""

from __future__ import annotations

import numpy as np

from ..losses import Loss

__all__ = ["predict", "objective"]

#: rows whose features are computed at once
_BLOCK_ROWS = 4096


def objective(
    data,
    B: np.ndarray,
    input_features,
    Phi_theta: np.ndarray,
    loss: Loss,
    lam: float,
    chunk_ids=None,
) -> float:
    """The exact objective J(B) of (P_rf) by one pass over the data in this process (missing entries masked,
    float64 products).

    Parameters
    ----------
    data : chunked dataset
    B : ndarray of shape (D_x, D_θ)
    input_features : feature map
    Phi_theta : ndarray of shape (m, D_θ)
    loss : Loss
    lam : float
    chunk_ids : sequence of int, optional
        Restrict the data term to these chunks (default all).

    Returns
    -------
    J : float
        ``(1/n) Σ_i L(y_i − Φ_Θ Bᵀ φ_X(x_i)) + (λ/2) ‖B‖_F²``.
    """
    B = np.asarray(B, dtype=np.float64)
    block, BPt = _basis(input_features, B, np.asarray(Phi_theta, dtype=np.float64), np.float64)  # (D_x, m)
    theta = np.asarray(data.theta)
    total, n = 0.0, 0
    ids = range(data.n_chunks) if chunk_ids is None else [int(i) for i in chunk_ids]
    for _, X_i, Y_i in data.iter_chunks(ids):
        for s in range(0, X_i.shape[0], _BLOCK_ROWS):
            A = block(X_i[s : s + _BLOCK_ROWS]).astype(np.float64)
            R = np.asarray(Y_i[s : s + _BLOCK_ROWS], dtype=np.float64) - A @ BPt
            total += float(np.sum(loss.curve_values(R, theta)))
            n += R.shape[0]
    return total / n + 0.5 * lam * float(np.sum(B * B))


def predict(
    coef: np.ndarray,
    input_features,
    Phi_theta: np.ndarray,
    X: np.ndarray,
) -> np.ndarray:
    """``Ĥ = Φ_X(X) B Φ_Θᵀ`` (MATH.md §5), a block of rows at a time.

    Parameters
    ----------
    coef : ndarray of shape (D_x, D_θ)
    input_features : feature map
    Phi_theta : ndarray of shape (q, D_θ)
        Output features where the curves are wanted.
    X : ndarray of shape (n, d)

    Returns
    -------
    Y_hat : ndarray of shape (n, q), in the features' dtype.
    """
    dtype = input_features.dtype
    block, BPt = _basis(input_features, coef, np.asarray(Phi_theta, dtype=dtype), dtype)  # (D_x, q)
    out = np.empty((X.shape[0], BPt.shape[1]), dtype=dtype)
    for s in range(0, X.shape[0], _BLOCK_ROWS):
        np.matmul(block(X[s : s + _BLOCK_ROWS]), BPt, out=out[s : s + _BLOCK_ROWS])
    return out


def _basis(input_features, B: np.ndarray, Phi_theta: np.ndarray, dtype):
    """``(block, B Φ_Θᵀ)`` on the basis the feature map offers: ``(k(·, C), Wᵀ B Φ_Θᵀ)`` for Nyström features
    (FALKON's parametrisation, MATH.md §5.1: no M² whitening a row), else ``(φ_X, B Φ_Θᵀ)``; the product in
    ``dtype``. B of shape (D_x, D_θ), Φ_Θ of shape (q, D_θ)."""
    fold = getattr(input_features, "to_kernel_basis", None)
    if fold is None:
        return input_features.transform, np.asarray(B, dtype=dtype) @ np.asarray(Phi_theta, dtype=dtype).T
    return input_features.kernel_block, np.ascontiguousarray(fold(B) @ np.asarray(Phi_theta, np.float64).T, dtype)
