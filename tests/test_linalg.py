"""TSQR steps of rffor._linalg (MATH.md §5.2): the structured merge (LAPACK tpqrt) against the dense QR of the
stacked pair, row signs, factors with fewer rows than columns, and what the closed form reads from a factor."""

from __future__ import annotations

import numpy as np
import pytest

from rffor._linalg import append_rows, merge_triangular, positive_diagonal, triangular_update

pytestmark = pytest.mark.usefixtures("single_blas_thread")


def factor(rng, p, k, rows, scale=1.0):
    return triangular_update(np.zeros((p, p + k)), scale * rng.standard_normal((rows, p + k)))


def rel(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


@pytest.mark.parametrize(
    ("p", "k", "rows_a", "rows_b"),
    [(40, 7, 90, 60), (40, 7, 10, 13), (40, 7, 0, 25), (40, 0, 50, 50), (1, 3, 5, 1), (64, 100, 70, 200)],
    ids=["full", "trapezoidal", "one-empty", "no-Z", "one-column", "wide"],
)
def test_merge_equals_the_dense_qr_of_the_pair(p, k, rows_a, rows_b):
    rng = np.random.default_rng(p + k + rows_a)
    a, b = factor(rng, p, k, rows_a), factor(rng, p, k, rows_b)
    m = merge_triangular(a, b)
    assert m.shape == a.shape and m.dtype == np.float64
    assert np.all(np.diag(m[:, :p]) >= 0)
    np.testing.assert_array_equal(np.tril(m[:, :p], -1), 0)
    assert rel(m, positive_diagonal(triangular_update(a, b))) < 1e-14
    R, Z = m[:, :p], m[:, p:]
    Ra, Za, Rb, Zb = a[:, :p], a[:, p:], b[:, :p], b[:, p:]
    np.testing.assert_allclose(R.T @ R, Ra.T @ Ra + Rb.T @ Rb, atol=1e-12 * np.abs(R).max() ** 2)
    np.testing.assert_allclose(R.T @ Z, Ra.T @ Za + Rb.T @ Zb, atol=1e-12 * np.abs(R).max() ** 2)
    if rows_a + rows_b < p:  # rank rows_a + rows_b: the rows below it vanish
        assert np.abs(m[rows_a + rows_b :]).max() < 1e-12 * np.abs(m).max()


def test_append_rows_equals_triangular_update():
    rng = np.random.default_rng(0)
    p, k = 30, 12
    r = factor(rng, p, k, 45)
    for rows in (1, 7, 30, 200):
        A = rng.standard_normal((rows, p + k)).astype(np.float32)  # rows in the fit's dtype
        assert rel(append_rows(r, A), positive_diagonal(triangular_update(r, A))) < 1e-14
    np.testing.assert_array_equal(append_rows(r, np.zeros((0, p + k))), positive_diagonal(r))
    zero = append_rows(np.zeros((p, p + k)), rng.standard_normal((5, p + k)))  # from no row: trapezoidal
    assert np.abs(zero[5:]).max() < 1e-14 * np.abs(zero).max()  # rank 5: rounding below


def test_tree_of_merges_is_the_factor_of_all_rows():
    """Leaves' factors merged by a tree give the factor of all rows: RᵀR = AᵀA and RᵀZ = AᵀY to rounding, and the
    ridge solution from R (the closed form's route, MATH.md §5.2) equals the one from the normal equations on a
    well-conditioned problem."""
    rng = np.random.default_rng(3)
    p, k = 25, 4
    blocks = [rng.standard_normal((rows, p + k)) for rows in (40, 3, 60, 17, 33, 50, 8)]
    leaves = [append_rows(np.zeros((p, p + k)), A) for A in blocks]
    level = leaves
    while len(level) > 1:
        level = [
            merge_triangular(*level[i : i + 2]) if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)
        ]
    r = level[0]
    A = np.vstack(blocks)
    F, Y = A[:, :p], A[:, p:]
    R, Z = r[:, :p], r[:, p:]
    np.testing.assert_allclose(R.T @ R, F.T @ F, rtol=1e-12, atol=1e-11)
    np.testing.assert_allclose(R.T @ Z, F.T @ Y, rtol=1e-12, atol=1e-11)
    lam = 0.3
    B_normal = np.linalg.solve(F.T @ F + lam * np.eye(p), F.T @ Y)
    W, s, Pt = np.linalg.svd(R)
    B_tsqr = Pt.T @ ((s / (s**2 + lam))[:, None] * (W.T @ Z))
    np.testing.assert_allclose(B_tsqr, B_normal, rtol=1e-10, atol=1e-12)


def test_row_signs_cancel_in_what_the_closed_form_reads():
    """Negating rows of [R | Z] (positive_diagonal) leaves RᵀR, RᵀZ and diag(σ) Wᵀ Z (R = W diag(σ) Pᵀ) unchanged:
    the closed form is sign-blind, so the merge may normalise signs."""
    rng = np.random.default_rng(5)
    p, k = 20, 6
    r = factor(rng, p, k, 50)
    assert np.any(np.diag(r) < 0)  # LAPACK's Householder convention leaves negative entries
    q = positive_diagonal(r)
    assert np.all(np.diag(q) >= 0)
    for x in (r, q):
        assert np.array_equal(np.abs(x), np.abs(r))

    def read(x):
        R, Z = x[:, :p], x[:, p:]
        W, s, Pt = np.linalg.svd(R)
        return R.T @ R, R.T @ Z, Pt.T @ (s[:, None] * (W.T @ Z))

    for u, v in zip(read(r), read(q), strict=True):
        np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(positive_diagonal(q), q)
    positive_diagonal(r, overwrite=True)
    np.testing.assert_array_equal(r, q)


def test_bad_shapes_are_refused():
    a = np.zeros((4, 6))
    with pytest.raises(ValueError, match="a must be an upper-trapezoidal factor"):
        merge_triangular(np.zeros((6, 4)), a)
    with pytest.raises(ValueError, match="same shape"):
        merge_triangular(a, np.zeros((4, 7)))
    with pytest.raises(ValueError, match=r"A must have shape \(rows, 6\)"):
        append_rows(a, np.zeros((3, 5)))


@pytest.mark.parametrize(
    ("p", "k", "rows", "merge"),
    [
        (40, 7, 90, False),
        (40, 0, 90, False),
        (40, 7, 13, False),
        (130, 20, 300, False),
        (40, 7, 0, True),
        (40, 7, 90, True),
        (40, 0, 90, True),
        (1, 3, 1, True),
        (130, 20, 60, True),
    ],
    ids=[
        "append",
        "append-p=q",
        "append-rows<p",
        "append-nb<p",
        "merge-zero",
        "merge",
        "merge-p=q",
        "merge-1",
        "merge-nb<p",
    ],
)
def test_tpqr_through_ctypes_has_the_bits_of_scipys_wrappers(p, k, rows, merge):
    """The GIL-free path calls the LAPACK routines SciPy's f2py wrappers call, with their arguments: same bits."""
    from rffor import _linalg

    if _linalg._tpqr_routines() is None:  # pragma: no cover - SciPy without cython_lapack's pointers
        pytest.skip("SciPy's Cython LAPACK is not available")
    rng = np.random.default_rng(p + k + rows)
    r = factor(rng, p, k, 2 * p)
    B = factor(rng, p, k, rows) if merge else rng.standard_normal((rows, p + k))
    l = p if merge else 0
    ours = _linalg._tpqr(r, B, l)
    scipys = positive_diagonal(_linalg._tpqr_f2py(r, B, l), overwrite=True)
    assert ours.tobytes() == scipys.tobytes()
    assert rel(ours, positive_diagonal(triangular_update(r, B))) < 1e-12  # and it is the factor


def _counter_steps(*makers, repeats: int = 3) -> list[list[int]]:
    """For each of ``makers`` (each returns the call to watch, its inputs prepared outside the count), the steps a
    Python counter thread takes while the call runs, ``repeats`` times. The switch interval is made huge so that the
    calling thread gives up the GIL only where the call releases it itself."""
    import sys
    import threading
    import time

    count, stop, started = [0], threading.Event(), threading.Event()

    def counter():
        started.set()
        while not stop.is_set():
            count[0] += 1
            time.sleep(0)  # releases the GIL (and asks for it back) at every step

    def steps(make):
        call = make()
        before = count[0]
        call()
        return count[0] - before

    interval = sys.getswitchinterval()
    thread = threading.Thread(target=counter, daemon=True)
    sys.setswitchinterval(1000.0)
    try:
        thread.start()
        started.wait()
        return [[steps(make) for _ in range(repeats)] for make in makers]
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(interval)


def test_tpqr_releases_the_gil():
    """While one thread is inside the LAPACK call another Python thread runs: a counter thread advances during the
    call (:func:`_counter_steps`); SciPy's f2py wrapper, called alike on arrays it takes as they are (no copy),
    holds it: the counter does not move (the control that shows the test can fail)."""
    import ctypes

    from scipy.linalg import lapack

    from rffor import _linalg

    routines = _linalg._tpqr_routines()
    if routines is None:  # pragma: no cover
        pytest.skip("SciPy's Cython LAPACK is not available")
    rng = np.random.default_rng(0)
    p, m = 500, 4000  # a call of tens of milliseconds
    a0 = np.asfortranarray(np.triu(rng.standard_normal((p, p))))
    b0 = np.asfortranarray(rng.standard_normal((m, p)))

    def ctypes_call():
        a, b, t, w = a0.copy(order="F"), b0.copy(order="F"), np.zeros((64, p), order="F"), np.empty(64 * p)
        ints = [ctypes.byref(ctypes.c_int(v)) for v in (m, p, 0, 64, p, m, 64)]
        info = ctypes.c_int(0)
        args = ints[:4] + [a.ctypes.data, ints[4], b.ctypes.data, ints[5], t.ctypes.data, ints[6], w.ctypes.data]
        return lambda arrays=(a, b, t, w): routines[0](*args, ctypes.byref(info))  # the arrays kept alive

    def f2py_call():
        a, b = a0.copy(order="F"), b0.copy(order="F")
        return lambda: lapack.dtpqrt(0, 64, a, b, overwrite_a=1, overwrite_b=1)

    advanced, held = _counter_steps(ctypes_call, f2py_call)
    assert min(advanced) > 0, advanced
    assert max(held) == 0, held


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_trsm_through_ctypes_has_the_bits_of_scipys_wrapper(dtype):
    """The Nyström whitening B R⁻¹ through ctypes (no GIL) calls the BLAS routine SciPy's f2py ``trsm`` calls, with
    its arguments: the same bits, for both dtypes, the strict lower triangle of R not read."""
    from scipy.linalg import get_blas_funcs

    from rffor import _linalg

    if _linalg._trsm_routine(np.dtype(dtype).char) is None:  # pragma: no cover - SciPy without cython_blas
        pytest.skip("SciPy's Cython BLAS is not available")
    rng = np.random.default_rng(3)
    M, rows = 300, 1000
    R = (np.triu(rng.standard_normal((M, M))) + 20 * np.eye(M) + np.tril(rng.standard_normal((M, M)), -1)).astype(dtype)
    B = rng.standard_normal((rows, M)).astype(dtype)
    ours = _linalg.solve_upper_right(B.copy(), R)
    trsm = get_blas_funcs("trsm", (R, B))
    scipys = trsm(1.0, R.T, B.copy().T, side=0, lower=1, trans_a=0, diag=0).T
    assert ours.tobytes() == np.ascontiguousarray(scipys).tobytes()
    tol = 1e-10 if dtype == np.float64 else 1e-3
    np.testing.assert_allclose(ours @ np.triu(R.astype(np.float64)), B, rtol=tol, atol=tol * np.abs(B).max())


def test_trsm_releases_the_gil():
    """As for tpqrt: a counter thread advances while the whitening runs through ctypes, and not while SciPy's f2py
    ``trsm`` runs on the same arrays (the control)."""
    from scipy.linalg import get_blas_funcs

    from rffor import _linalg

    if _linalg._trsm_routine("d") is None:  # pragma: no cover
        pytest.skip("SciPy's Cython BLAS is not available")
    rng = np.random.default_rng(0)
    M, rows = 600, 6000  # a call of tens of milliseconds
    R = np.triu(rng.standard_normal((M, M))) + 30 * np.eye(M)
    B0 = rng.standard_normal((rows, M))
    trsm = get_blas_funcs("trsm", (R, B0))

    def ours():
        B = B0.copy()
        return lambda: _linalg.solve_upper_right(B, R)

    def scipys():
        B = B0.copy()
        return lambda: trsm(1.0, R.T, B.T, side=0, lower=1, trans_a=0, diag=0, overwrite_b=1)

    advanced, held = _counter_steps(ours, scipys)
    assert min(advanced) > 0, advanced
    assert max(held) == 0, held
