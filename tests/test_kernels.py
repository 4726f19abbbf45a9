"""Tests of rffor.kernels (MATH.md §4): Gram matrices, parameter validation, specs, spectral laws."""

from __future__ import annotations

import numpy as np
import pytest

from rffor.kernels import Gaussian, Kernel, Laplacian, kernel_from_spec, kernel_to_spec

pytestmark = pytest.mark.usefixtures("single_blas_thread")


def ref_gram(name, gamma, A, B):
    A = np.asarray(A, dtype=float).reshape(len(A), -1)
    B = np.asarray(B, dtype=float).reshape(len(B), -1)
    D = A[:, None, :] - B[None, :, :]
    if name == "gaussian":
        return np.exp(-gamma * (D**2).sum(-1))
    return np.exp(-gamma * np.sqrt((D**2).sum(-1)))


KERNELS = [("gaussian", Gaussian), ("laplacian", Laplacian)]


@pytest.mark.parametrize("name, cls", KERNELS)
@pytest.mark.parametrize("gamma", [1e-3, 0.5, 30.0])
def test_gram_matches_the_formula(name, cls, gamma, rng):
    A, B = rng.standard_normal((7, 3)), rng.standard_normal((5, 3))
    k = cls(gamma=gamma)
    np.testing.assert_allclose(k.gram(A, B), ref_gram(name, gamma, A, B), rtol=1e-10, atol=1e-14)
    K = k.gram(A)
    np.testing.assert_allclose(K, ref_gram(name, gamma, A, A), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(K, K.T, atol=1e-15)
    np.testing.assert_allclose(np.diag(K), 1.0)
    assert np.linalg.eigvalsh(K).min() > -1e-10  # positive semi-definite


@pytest.mark.parametrize("name, cls", KERNELS)
def test_one_dimensional_points_are_a_grid(name, cls):
    theta = np.linspace(0, 1, 6)
    k = cls(gamma=4.0)
    np.testing.assert_allclose(k.gram(theta), ref_gram(name, 4.0, theta, theta), rtol=1e-12)
    np.testing.assert_allclose(k.gram(theta, theta[:2]), k.gram(theta[:, None], theta[:2, None]))


def test_gaussian_far_points_do_not_produce_negative_distances():
    A = np.full((3, 4), 1e4) + np.arange(3)[:, None] * 1e-6  # cancellation in ‖a‖² + ‖b‖² − 2ab
    K = Gaussian(gamma=1.0).gram(A)
    assert np.all(K <= 1.0) and np.all(K > 0.99)


@pytest.mark.parametrize("cls", [Gaussian, Laplacian])
def test_dtype_follows_the_input(cls, rng):
    A = rng.standard_normal((4, 2))
    assert cls(1.0).gram(A.astype(np.float32)).dtype == np.float32
    assert cls(1.0).gram(A).dtype == np.float64
    assert cls(1.0).gram(np.arange(4)).dtype == np.float64  # integers become float64


@pytest.mark.parametrize("cls", [Gaussian, Laplacian])
@pytest.mark.parametrize(
    "gamma, exc",
    [
        (0.0, ValueError),
        (-1.0, ValueError),
        (np.inf, ValueError),
        (np.nan, ValueError),
        ("1", TypeError),
        (None, TypeError),
        (True, TypeError),
    ],
)
def test_invalid_gamma_raises_naming_it(cls, gamma, exc):
    with pytest.raises(exc, match="gamma"):
        cls(gamma=gamma)


def test_shape_errors():
    k = Gaussian(1.0)
    with pytest.raises(ValueError, match="same number of columns"):
        k.gram(np.zeros((3, 2)), np.zeros((3, 4)))
    with pytest.raises(ValueError, match="1-D or 2-D"):
        k.gram(np.zeros((2, 2, 2)))


def test_kernels_are_immutable_values():
    k = Gaussian(0.5)
    assert k == Gaussian(gamma=0.5) and k != Laplacian(0.5) and k != Gaussian(0.6)
    assert hash(k) == hash(Gaussian(0.5))
    with pytest.raises(AttributeError):
        k.gamma = 2.0
    assert isinstance(k, Kernel)


@pytest.mark.parametrize("k", [Gaussian(0.01), Laplacian(3.0)])
def test_specs_round_trip(k):
    assert kernel_from_spec(kernel_to_spec(k)) == k
    assert kernel_from_spec(k) is k
    assert kernel_from_spec(f"{k.name}:{k.gamma}") == k
    assert kernel_from_spec(f" {k.name.upper()} :{k.gamma}") == k


@pytest.mark.parametrize("spec", ["gaussian", "gaussian:abc", "cosine:1", {"name": "poly", "gamma": 1}, 3])
def test_bad_specs_raise(spec):
    with pytest.raises(ValueError):
        kernel_from_spec(spec)


@pytest.mark.parametrize("name, cls", KERNELS)
def test_spectral_law_reproduces_the_kernel(name, cls):
    """E[cos(ωᵀ(x − z))] = k(x, z) for ω from the kernel's spectral law (Bochner; MATH.md §4 table)."""
    rng = np.random.default_rng(0)
    gamma, dim = 0.7, 3
    W = cls(gamma).sample_frequencies(200_000, dim, rng)
    assert W.shape == (dim, 200_000)
    X = np.random.default_rng(1).standard_normal((4, dim)) * 0.8
    D = X[:, None, :] - X[None, :, :]
    mc = np.cos(D @ W).mean(-1)
    np.testing.assert_allclose(mc, ref_gram(name, gamma, X, X), atol=0.01)


def test_median_heuristic_puts_the_typical_pair_at_exp_minus_half_in_any_units():
    """γ = 1 / (2 median ‖x_i − x_j‖²): the median of k over the pairs is exp(−1/2), and scaling the inputs by c
    divides γ by c² (the kernel sees the same pairs)."""
    from scipy.spatial.distance import pdist

    from rffor.kernels import median_heuristic

    X = np.random.default_rng(0).standard_normal((302, 7)) * np.arange(1, 8)  # an odd number of pairs
    k = median_heuristic(X)
    assert isinstance(k, Gaussian)
    assert np.median(np.exp(-k.gamma * pdist(X, "sqeuclidean"))) == pytest.approx(np.exp(-0.5), rel=1e-12)
    assert median_heuristic(1000.0 * X).gamma == pytest.approx(k.gamma / 1e6, rel=1e-12)
    with pytest.raises(ValueError, match="two distinct"):
        median_heuristic(np.ones((5, 3)))


@pytest.mark.parametrize("solver", ["admm", "rff"])
def test_default_input_kernel_follows_the_units_of_the_inputs(solver):
    """FunctionalRegressor() with kernel_x=None: inputs in other units (x 1000) give the same model (the median
    heuristic rescales γ), where a fixed γ would smooth them to a constant."""
    from rffor import FunctionalRegressor
    from rffor.datasets import make_synthetic

    d = make_synthetic(300, 50, m=20, nonlinear=True, random_state=0)
    kw = dict(solver=solver, lam=1e-5, random_state=0, n_features_x=200)
    a = FunctionalRegressor(**kw).fit(d.X_train, d.Y_train, theta=d.theta)
    b = FunctionalRegressor(**kw).fit(1000.0 * d.X_train, d.Y_train, theta=d.theta)
    assert b.kernel_x_.gamma == pytest.approx(a.kernel_x_.gamma / 1e6, rel=1e-9)
    pa, pb = a.predict(d.X_test), b.predict(1000.0 * d.X_test)
    np.testing.assert_allclose(pb, pa, atol=1e-3 * np.abs(pa).max())
    assert a.score(d.X_test, d.Y_test) > 0.8
    fixed = FunctionalRegressor(kernel_x=Gaussian(a.kernel_x_.gamma), **kw).fit(1000.0 * d.X_train, d.Y_train)
    assert fixed.score(1000.0 * d.X_test, d.Y_test) < 0.5
