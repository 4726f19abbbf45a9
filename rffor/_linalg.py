"""Linear-algebra helpers shared by the exact solvers, the closed forms, the feature maps and the preconditioner."""

from __future__ import annotations

import numpy as np

__all__ = ["eigh_psd", "inner"]


def inner(A: np.ndarray, B: np.ndarray) -> float:
    """Frobenius inner product ``<A, B>_F`` of two arrays of the same shape.

    NumPy's own reduction, not BLAS ``ddot`` (``np.vdot``, ``np.linalg.norm``): a threaded level-1 BLAS call costs
    microseconds on an idle machine but can cost milliseconds when its threads wait for busy cores, i.e. more than
    the whole iteration it belongs to.
    """
    return float(np.einsum("ij,ij->", A, B))


def eigh_psd(K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigendecomposition ``K = U diag(s) Uᵀ`` of a symmetric PSD matrix, eigenvalues clipped at 0.

    Parameters
    ----------
    K : ndarray of shape (n, n)

    Returns
    -------
    s : ndarray of shape (n,)
        Eigenvalues in decreasing order, clipped at 0 (rounding makes tiny ones negative).
    U : ndarray of shape (n, n)
        Orthonormal eigenvectors (columns), C-contiguous, in the order of ``s``.
    """
    s, U = np.linalg.eigh(K)
    return np.maximum(s[::-1], 0.0), np.ascontiguousarray(U[:, ::-1])
