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
