"""Linear-algebra helpers shared by the exact solvers, the closed forms, the feature maps and the preconditioner."""

from __future__ import annotations

import numpy as np
from scipy.linalg.blas import get_blas_funcs

__all__ = ["eigh_psd", "inner", "solve_upper_right", "triangular_update"]


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


def solve_upper_right(B: np.ndarray, R: np.ndarray) -> np.ndarray:
    """``B R⁻¹`` in place: the solution X of ``X R = B``, written over B (BLAS ``trsm``, backward stable).

    Half the flops of a product by a dense (M, M) matrix (M² per row, not 2M²) and no second array of B's size:
    the whitening of :class:`rffor.features.NystromFeatures`.

    Parameters
    ----------
    B : ndarray of shape (rows, M)
        C-contiguous float32 or float64; overwritten.
    R : ndarray of shape (M, M)
        C-contiguous upper-triangular matrix of B's dtype, nonsingular (its strict lower triangle is not read).

    Returns
    -------
    B : ndarray of shape (rows, M)
        The same array, holding ``B R⁻¹``.
    """
    if not (B.ndim == 2 and B.flags.c_contiguous and R.flags.c_contiguous and R.dtype == B.dtype):
        raise ValueError("B and R must be C-contiguous arrays of one dtype")
    if R.shape != (B.shape[1], B.shape[1]):
        raise ValueError(f"R must have shape {(B.shape[1], B.shape[1])}, got {R.shape}")
    if B.size == 0:
        return B
    # Fortran views of the C arrays: Bᵀ (M, rows) and Rᵀ (lower triangular); X R = B is Rᵀ Xᵀ = Bᵀ, solved from the
    # left in place (overwrite_b on an F-contiguous array of the routine's type: no copy)
    trsm = get_blas_funcs("trsm", (R, B))
    X = trsm(1.0, R.T, B.T, side=0, lower=1, trans_a=0, diag=0, overwrite_b=1)
    if not np.shares_memory(X, B):  # pragma: no cover - SciPy copies only for arrays it cannot take as they are
        B[...] = X.T
    return B


def triangular_update(r: np.ndarray, A: np.ndarray) -> np.ndarray:
    """One step of a tall-skinny QR factorisation (TSQR): the first p rows of the R factor of ``[r; A]``.

    For a matrix ``[F | G]`` (F with p columns) seen a block of rows at a time, ``r = [R | Z]`` is the
    upper-trapezoidal factor of the rows seen so far: ``FᵀF = RᵀR`` and ``FᵀG = RᵀZ``; the rows below p of a full
    factor depend on G alone and are never needed, so two factors combine by the same step (``triangular_update
    (r₁, r₂)``). Unlike the sums ``FᵀF``, R holds F's small singular values to the rounding of the largest
    (backward stable), not of its square: the closed form at the tiny λ of noise-free curves needs them.

    Parameters
    ----------
    r : ndarray of shape (p, q), q >= p
        The factor so far (zeros before any row).
    A : ndarray of shape (rows, q)
        New rows (or another factor).

    Returns
    -------
    ndarray of shape (p, q), float64
    """
    p = r.shape[0]
    F = np.linalg.qr(np.vstack([np.asarray(r, dtype=np.float64), np.asarray(A, dtype=np.float64)]), mode="r")
    if F.shape[0] < p:  # fewer rows than columns so far
        F = np.vstack([F, np.zeros((p - F.shape[0], F.shape[1]))])
    return np.ascontiguousarray(F[:p])
