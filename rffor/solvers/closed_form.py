"""Sylvester solutions of the square loss (MATH.md §3.1 and §5).

Both closed forms solve a Sylvester equation ``shift·X + scale·K₁ X K₂ = R`` whose matrices are diagonalised
once, ``K₁ = U diag(s) Uᵀ``, ``K₂ = V diag(t) Vᵀ``::

    X = U [ (Uᵀ R V) ⊘ (shift + scale · s tᵀ) ] Vᵀ

- exact kernel, dual spline coefficients (D_s): ``A = sylvester_kernel(K_X, K_Θ, Y, λ)``, shift 1,
  scale 1/(λnm), i.e. kernel ridge regression with the product kernel on the nm points (x_i, θ_j);
- feature space (P_rf): ``C_X B C_Θ + λ B = M``, shift λ, scale 1 (``sylvester_features``).
"""

from __future__ import annotations

import numpy as np

from .._linalg import eigh_psd

__all__ = ["diagonal_sylvester", "sylvester_kernel", "sylvester_features"]


def diagonal_sylvester(U, s, V, t, R, *, shift: float, scale: float = 1.0) -> np.ndarray:
    """Solve ``shift·X + scale·(U diag(s) Uᵀ) X (V diag(t) Vᵀ) = R``.

    Parameters
    ----------
    U : ndarray (p, p); s : ndarray (p,)
    V : ndarray (q, q) or None (then K₂ = diag(t)); t : ndarray (q,)
    R : ndarray (p, q)

    Returns
    -------
    X : ndarray (p, q)
    """
    R_hat = U.T @ R
    if V is not None:
        R_hat = R_hat @ V
    X_hat = R_hat / (shift + scale * np.outer(s, t))
    X = U @ X_hat
    return X if V is None else X @ V.T


def sylvester_kernel(K_x: np.ndarray, K_theta: np.ndarray, Y: np.ndarray, lam: float) -> np.ndarray:
    """Dual spline coefficients of the square loss (MATH.md §3.1).

    Parameters
    ----------
    K_x : ndarray (n, n); K_theta : ndarray (m, m); Y : ndarray (n, m), no NaN; lam : float > 0

    Returns
    -------
    A : ndarray (n, m) with ``Ĥ = K_X A K_Θ / (λnm)``.
    """
    n, m = Y.shape
    s, U = eigh_psd(K_x)
    t, V = eigh_psd(K_theta)
    return diagonal_sylvester(U, s, V, t, Y, shift=1.0, scale=1.0 / (lam * n * m))


def sylvester_features(C_x: np.ndarray, C_theta: np.ndarray, M: np.ndarray, lam: float) -> np.ndarray:
    """B solving ``C_X B C_Θ + λ B = M`` (MATH.md §5).

    Parameters
    ----------
    C_x : ndarray (D_x, D_x)
        ``Φ_Xᵀ Φ_X / n``.
    C_theta : ndarray (D_θ, D_θ) or (D_θ,)
        ``Φ_Θᵀ Φ_Θ / m``; a 1-D array is a diagonal (the exact output factor gives ``diag(t)/m``).
    M : ndarray (D_x, D_θ)
        ``Φ_Xᵀ Y Φ_Θ / (nm)``.
    lam : float > 0

    Returns
    -------
    B : ndarray (D_x, D_θ), float64.
    """
    a, P = eigh_psd(np.asarray(C_x, dtype=np.float64))
    C_theta = np.asarray(C_theta, dtype=np.float64)
    if C_theta.ndim == 1:
        return diagonal_sylvester(P, a, None, C_theta, np.asarray(M, dtype=np.float64), shift=lam)
    b, Q = eigh_psd(C_theta)
    return diagonal_sylvester(P, a, Q, b, np.asarray(M, dtype=np.float64), shift=lam)
