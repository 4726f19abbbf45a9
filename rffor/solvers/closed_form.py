"""Sylvester solutions of the square loss (MATH.md §3.1 and §5).

Both closed forms solve a Sylvester equation ``shift·X + scale·K₁ X K₂ = R`` whose matrices are diagonalised
once, ``K₁ = U diag(s) Uᵀ``, ``K₂ = V diag(t) Vᵀ``::

    X = U [ (Uᵀ R V) ⊘ (shift + scale · s tᵀ) ] Vᵀ

- exact kernel, dual spline coefficients (D_s): ``A = sylvester_kernel(K_X, K_Θ, Y, λ)``, shift 1,
  scale 1/(λnm), i.e. kernel ridge regression with the product kernel on the nm points (x_i, θ_j);
- feature space (P_rf): ``C_X B C_Θ + λ B = M``, shift λ, scale 1 (:class:`rffor.solvers.mm.SquareMetric`, whose
  eigenpairs of C_X come from the features' triangular factor).
"""

from __future__ import annotations

import numpy as np

from .._linalg import eigh_psd

__all__ = ["diagonal_sylvester", "rotated_sylvester", "sylvester_kernel"]


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
    return rotated_sylvester(U, s, V, t, U.T @ R, shift=shift, scale=scale)


def rotated_sylvester(U, s, V, t, R_hat, *, shift: float, scale: float = 1.0) -> np.ndarray:
    """:func:`diagonal_sylvester` from ``R_hat = Uᵀ R`` (p, q): for a right-hand side known only in that basis
    (the closed form from a triangular factor, :meth:`rffor.solvers.mm.SquareMetric.closed_form`)."""
    if V is not None:
        R_hat = R_hat @ V
    X = U @ (R_hat / (shift + scale * np.outer(s, t)))
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
