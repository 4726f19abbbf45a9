"""Independent reference solutions shared by several test modules (tests/ is on sys.path)."""

from __future__ import annotations

import numpy as np


def masked_square_optimum(Phi, Pt, Y, lam: float) -> np.ndarray:
    """The minimiser B of (P_rf) for the square loss with missing entries (NaN in Y) left out of the loss:
    ``J(B) = (1/n) Σ_i (1/(2|o_i|)) Σ_{j ∈ o_i} (y_ij − φ_iᵀ B p_j)² + (λ/2)‖B‖²`` (MATH.md §5: each curve averaged
    over its own observed entries o_i), by a dense float64 solve of its normal equations over the observed entries
    only — no filling, no solver of the library.

    Parameters
    ----------
    Phi : array of shape (n, D_x)
        Input features of the training rows.
    Pt : array of shape (m, D_θ)
        Output features on the grid.
    Y : array of shape (n, m)
        Outputs, NaN where not observed.
    lam : float

    Returns
    -------
    B : ndarray of shape (D_x, D_θ)
    """
    Phi, Pt, Y = (np.asarray(a, dtype=np.float64) for a in (Phi, Pt, Y))
    obs = ~np.isnan(Y)
    ii, jj = np.nonzero(obs)
    w = 1.0 / obs.sum(axis=1)[ii] / Y.shape[0]
    Z = (Phi[ii][:, :, None] * Pt[jj][:, None, :]).reshape(len(ii), -1)  # rows φ(x_i) ⊗ φ_Θ(θ_j)
    H = Z.T @ (w[:, None] * Z) + lam * np.eye(Z.shape[1])
    return np.linalg.solve(H, Z.T @ (w * Y[ii, jj])).reshape(Phi.shape[1], Pt.shape[1])
