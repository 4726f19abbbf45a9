"""Linear-algebra helpers shared by the exact solvers, the closed forms, the feature maps and the preconditioner."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from scipy.linalg import solve_triangular
from scipy.linalg.blas import get_blas_funcs

__all__ = [
    "append_rows",
    "eigh_psd",
    "inner",
    "merge_triangular",
    "positive_diagonal",
    "solve_upper",
    "solve_upper_right",
    "triangular_update",
]


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


def solve_upper(R: np.ndarray, B: np.ndarray, *, transpose: bool = False) -> np.ndarray:
    """``R⁻¹ B`` (or ``R⁻ᵀ B`` with ``transpose``) for an upper-triangular R, in float64 (LAPACK ``trtrs``), for a
    stack of right-hand sides too.

    Parameters
    ----------
    R : ndarray of shape (M, M)
        Upper triangular, nonsingular (its strict lower triangle is not read).
    B : ndarray of shape (M, D) or (K, M, D)

    Returns
    -------
    ndarray of B's shape, float64
    """
    R = np.asarray(R, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    trans = "T" if transpose else "N"
    if B.ndim == 2:
        return solve_triangular(R, B, trans=trans, lower=False)
    # the K systems share R: one solve of the (M, K·D) right-hand side
    K, M, D = B.shape
    X = solve_triangular(R, B.transpose(1, 0, 2).reshape(M, K * D), trans=trans, lower=False)
    return np.ascontiguousarray(X.reshape(M, K, D).transpose(1, 0, 2))


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
    routine = _trsm_routine(B.dtype.char) if B.dtype.char in "fd" else None
    if routine is not None:
        import ctypes

        scalar = ctypes.c_double if B.dtype.char == "d" else ctypes.c_float
        M, rows = ctypes.c_int(R.shape[0]), ctypes.c_int(B.shape[0])
        flag = ctypes.c_char_p
        routine(flag(b"L"), flag(b"L"), flag(b"N"), flag(b"N"), ctypes.byref(M), ctypes.byref(rows),
                ctypes.byref(scalar(1.0)), R.ctypes.data, ctypes.byref(M), B.ctypes.data, ctypes.byref(M))  # fmt: skip
        return B
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


#: Block size of LAPACK's ``tpqrt`` (the rows of its T factor): 32–128 were within noise at D_x = 1000 and 4000.
_TPQRT_BLOCK = 64


def _check_factor(r: np.ndarray, name: str) -> np.ndarray:
    r = np.asarray(r, dtype=np.float64)
    if r.ndim != 2 or r.shape[1] < r.shape[0]:
        raise ValueError(
            f"{name} must be an upper-trapezoidal factor [R | Z] of shape (p, q) with q >= p, got shape {r.shape}"
        )
    return r


def _capsule_pointer(capsule) -> tuple[int, str]:
    """The address and the name (the C signature) of a PyCapsule of a Cython module's ``__pyx_capi__``."""
    import ctypes

    name = ctypes.pythonapi.PyCapsule_GetName
    name.restype, name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    pointer = ctypes.pythonapi.PyCapsule_GetPointer
    pointer.restype, pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    signature = name(capsule)
    return int(pointer(capsule, signature)), signature.decode()


@functools.cache
def _trsm_routine(char: str) -> Callable | None:
    """SciPy's own BLAS ``dtrsm`` (``char`` "d", float64) or ``strsm`` ("f", float32) called through ctypes, which
    releases the GIL during the call, as :func:`_tpqr_routines` does for ``tpqrt``: SciPy's f2py ``trsm`` holds it
    (tests/test_linalg.py: a Python thread does not advance during that call), and the whitening is most of a
    Nyström feature pass (M² of its 2Md + M² flops a row); with it released, 2 threads run the closed form 1.95x
    as fast as one, 1.63x before (benchmarks/scale_out.py ``--pool``). The same library and arguments as the f2py
    wrapper, hence the same bits; None where it cannot be found (then the wrapper serves)."""
    import ctypes

    try:
        from scipy.linalg import cython_blas

        address, signature = _capsule_pointer(cython_blas.__pyx_capi__[{"d": "d", "f": "s"}[char] + "trsm"])
    except (ImportError, AttributeError, KeyError, ValueError):  # pragma: no cover - SciPy without its Cython API
        return None
    if not signature.startswith("void (char *, char *, char *, char *, int *, int *,"):
        return None  # pragma: no cover - an unknown signature: keep the wrapper
    # CFUNCTYPE (not PYFUNCTYPE): ctypes releases the GIL for the duration of the call
    return ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 11)(address)


@functools.cache
def _tpqr_routines() -> tuple[Callable, Callable] | None:
    """SciPy's own LAPACK ``dtpqrt`` and ``dtpmqrt`` called through ctypes, which releases the GIL during the call
    (SciPy's f2py wrappers hold it: two threads appending rows ran 1.04x as fast as one); None where they cannot be
    found (then :func:`_tpqr` uses the f2py wrappers).

    The routines are those of :mod:`scipy.linalg.cython_lapack` (its C function pointers, public API): the same
    library, hence the same bits, as :mod:`scipy.linalg.lapack`, with no search for a library file or for the
    symbol names of its build (``scipy_dtpqrt_``, ``..._64_``). Their signature is checked for 32-bit integers
    (``int *``; SciPy's Cython LAPACK has no other).
    """
    import ctypes

    try:
        from scipy.linalg import cython_lapack

        capi = cython_lapack.__pyx_capi__
        (qrt, qrt_sig), (mqrt, mqrt_sig) = _capsule_pointer(capi["dtpqrt"]), _capsule_pointer(capi["dtpmqrt"])
    except (ImportError, AttributeError, KeyError, ValueError):  # pragma: no cover - SciPy without its Cython API
        return None
    if not (
        qrt_sig.startswith("void (int *, int *, int *, int *,") and mqrt_sig.startswith("void (char *, char *, int *,")
    ):
        return None  # pragma: no cover - an unknown signature: keep the wrappers
    vp = ctypes.c_void_p
    # CFUNCTYPE (not PYFUNCTYPE): ctypes releases the GIL for the duration of the call
    dtpqrt = ctypes.CFUNCTYPE(None, *[vp] * 12)(qrt)
    dtpmqrt = ctypes.CFUNCTYPE(None, *[vp] * 17)(mqrt)
    return dtpqrt, dtpmqrt


def _tpqr_lapack(r: np.ndarray, B: np.ndarray, l: int, routines: tuple[Callable, Callable]) -> np.ndarray:
    """:func:`_tpqr` by ``routines`` (:func:`_tpqr_routines`): the arguments the f2py wrappers pass (Fortran-ordered
    copies of the blocks, T of ``nb`` rows, workspaces of ``nb · columns``), hence the same bits."""
    import ctypes

    dtpqrt, dtpmqrt = routines
    p, q = r.shape
    m = B.shape[0]
    nb = min(_TPQRT_BLOCK, p)
    ldb = max(1, m)
    A1 = np.array(r[:, :p], dtype=np.float64, order="F")
    B1 = np.zeros((ldb, p), dtype=np.float64, order="F")
    B1[:m] = B[:, :p]
    T = np.zeros((nb, p), dtype=np.float64, order="F")
    work = np.empty(nb * max(p, q - p), dtype=np.float64)
    ints = [ctypes.c_int(v) for v in (m, p, l, nb, p, ldb, nb)]
    im, ip, il, inb, ilda, ildb, ildt = (ctypes.byref(v) for v in ints)
    info = ctypes.c_int(0)
    dtpqrt(
        im,
        ip,
        il,
        inb,
        A1.ctypes.data,
        ilda,
        B1.ctypes.data,
        ildb,
        T.ctypes.data,
        ildt,
        work.ctypes.data,
        ctypes.byref(info),
    )
    if info.value != 0:  # pragma: no cover - only for invalid arguments
        raise RuntimeError(f"LAPACK dtpqrt failed (info={info.value})")
    out = np.empty((p, q))
    out[:, :p] = np.triu(A1)
    if q > p:
        A2 = np.array(r[:, p:], dtype=np.float64, order="F")
        B2 = np.zeros((ldb, q - p), dtype=np.float64, order="F")
        B2[:m] = B[:, p:]
        n = ctypes.c_int(q - p)
        dtpmqrt(
            ctypes.c_char_p(b"L"),
            ctypes.c_char_p(b"T"),
            im,
            ctypes.byref(n),
            ip,
            il,
            inb,
            B1.ctypes.data,
            ildb,
            T.ctypes.data,
            ildt,
            A2.ctypes.data,
            ilda,
            B2.ctypes.data,
            ildb,
            work.ctypes.data,
            ctypes.byref(info),
        )
        if info.value != 0:  # pragma: no cover
            raise RuntimeError(f"LAPACK dtpmqrt failed (info={info.value})")
        out[:, p:] = A2
    return out


def _tpqr(r: np.ndarray, B: np.ndarray, l: int) -> np.ndarray:
    """The first p rows of the R factor of ``[r; B]`` by LAPACK's triangle-pentagonal QR (``dtpqrt`` on the first p
    columns, ``dtpmqrt`` applying its Qᵀ to the others), diagonal of R made nonnegative.

    Through ctypes without the GIL (:func:`_tpqr_routines`: two threads folding chunks run at once), else through
    SciPy's f2py wrappers, with the same bits."""
    p, q = r.shape
    if p == 0:
        return np.zeros((0, q))
    routines = _tpqr_routines()
    if routines is not None:
        return positive_diagonal(_tpqr_lapack(r, B, l, routines), overwrite=True)
    return positive_diagonal(_tpqr_f2py(r, B, l), overwrite=True)


def _tpqr_f2py(r: np.ndarray, B: np.ndarray, l: int) -> np.ndarray:
    """:func:`_tpqr` (before the signs) by SciPy's f2py wrappers of ``dtpqrt`` and ``dtpmqrt`` (they hold the GIL)."""
    from scipy.linalg import lapack

    p, q = r.shape
    R, V, T, info = lapack.dtpqrt(l, min(_TPQRT_BLOCK, p), r[:, :p], B[:, :p])
    if info != 0:  # pragma: no cover - only for invalid arguments
        raise RuntimeError(f"LAPACK dtpqrt failed (info={info})")
    out = np.empty((p, q))
    out[:, :p] = np.triu(R)
    if q > p:
        Z, _, info = lapack.dtpmqrt(l, V, T, r[:, p:], B[:, p:], trans="T")
        if info != 0:  # pragma: no cover
            raise RuntimeError(f"LAPACK dtpmqrt failed (info={info})")
        out[:, p:] = Z
    return out


def positive_diagonal(r: np.ndarray, overwrite: bool = False) -> np.ndarray:
    """``[R | Z]`` with the rows whose diagonal entry of R is negative negated (the diagonal made nonnegative).

    Negating a whole row of ``[R | Z]`` changes neither ``RᵀR`` nor ``RᵀZ``, nor anything the closed form computes
    from the SVD ``R = W diag(σ) Pᵀ`` (the row's sign cancels in ``diag(σ) Wᵀ Z``, MATH.md §5.2); with a nonnegative
    diagonal the factor of a full-rank block is unique, so factors computed along different paths compare equal up
    to rounding.

    Parameters
    ----------
    r : ndarray of shape (p, q), q >= p
    overwrite : bool
        Negate the rows of ``r`` in place (else of a copy).

    Returns
    -------
    ndarray of shape (p, q)
    """
    out = r if overwrite else np.array(r, dtype=np.float64)
    p = out.shape[0]
    neg = np.flatnonzero(np.diagonal(out[:, :p]) < 0)
    if neg.size:
        out[neg] *= -1.0
    return out


def merge_triangular(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Merge two TSQR factors: the first p rows of the R factor of ``[a; b]``, for two upper-trapezoidal ``[R | Z]``
    (MATH.md §5.2), by LAPACK's triangle-pentagonal QR (``tpqrt``), which keeps the pair's structure.

    The result ``r = [R | Z]`` has ``RᵀR = R_aᵀR_a + R_bᵀR_b`` and ``RᵀZ = R_aᵀZ_a + R_bᵀZ_b``, as
    :func:`triangular_update` ``(a, b)`` (a dense QR of the stacked pair), 3.2-3.4x faster on one thread at
    D_x + k = 1100 and 4100 (benchmarks/scale_out.py ``--tpqrt``, a loaded machine) and equal to it up to rounding
    (3e-16 relative) once the signs of its rows are normalised: the diagonal of R is made nonnegative
    (:func:`positive_diagonal`). Factors with fewer rows than columns so far (zero rows at the bottom, or zeros
    before any row) merge alike.

    Parameters
    ----------
    a, b : ndarray of shape (p, q), q >= p
        ``[R | Z]`` with R upper triangular (entries below the diagonal of R are not read: they must be zero).

    Returns
    -------
    ndarray of shape (p, q), float64, diagonal of R nonnegative
    """
    a = _check_factor(a, "a")
    b = _check_factor(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape, got {a.shape} and {b.shape}")
    return _tpqr(a, b, a.shape[0])


def append_rows(r: np.ndarray, A: np.ndarray) -> np.ndarray:
    """One TSQR step with a block of new rows: the first p rows of the R factor of ``[r; A]``, as
    :func:`triangular_update` ``(r, A)`` but by ``tpqrt`` with a rectangular lower block (no QR of the stacked
    triangle), diagonal of R nonnegative.

    Parameters
    ----------
    r : ndarray of shape (p, q), q >= p
        The factor so far ``[R | Z]``, R upper triangular (zeros before any row).
    A : ndarray of shape (rows, q)
        New rows.

    Returns
    -------
    ndarray of shape (p, q), float64, diagonal of R nonnegative
    """
    r = _check_factor(r, "r")
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 2 or A.shape[1] != r.shape[1]:
        raise ValueError(f"A must have shape (rows, {r.shape[1]}), got {A.shape}")
    if A.shape[0] == 0:
        return positive_diagonal(r)
    return _tpqr(r, A, 0)
