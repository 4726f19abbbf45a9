"""The exact dual solvers on quantile problems (MATH.md §6; rffor.solvers.noncrossing): certified gaps recomputed
here from the definitions, agreement of ADMM and APGD, joint quantile regression on user levels against separate
single-level fits solved by SciPy, and the non-crossing penalty of thesis 003 Theorem 5.27 (kernel derivatives by
finite differences, the exact-penalty property at the anchors)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize

from rffor.kernels import Gaussian, Laplacian
from rffor.losses import Pinball
from rffor.solvers import EXACT_SOLVERS
from rffor.solvers.noncrossing import (
    augmented_gram,
    noncrossing_problem,
    output_columns,
    output_derivative_columns,
)

pytestmark = pytest.mark.usefixtures("single_blas_thread")


def sine_toy(n, seed):
    """Sangnier et al.'s heteroscedastic sine: std 1.2 at x = 0 down to 0.2 at x = 1.5."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1.5, n)
    y = -np.sin(2 * np.pi * x) * (1 + np.sin(2 * np.pi * x / 3)) + (0.2 + (1.5 - x) / 1.5) * rng.standard_normal(n)
    return x[:, None], y


def pinball_sum(R, th):
    return np.maximum(th * R, (th - 1) * R)


@pytest.fixture(scope="module")
def toy():
    X, y = sine_toy(40, 0)
    m = 10
    th = (np.arange(m) + 0.5) / m
    K_x = Gaussian(10.0).gram(X)
    return X, y, th, K_x, np.repeat(y[:, None], m, axis=1)


@pytest.mark.parametrize("loss", [Pinball(), Pinball(epsilon=0.1), Pinball(kappa=0.2)], ids=["plain", "eps", "smooth"])
def test_admm_and_apgd_reach_a_certified_gap_and_the_same_model(toy, loss):
    X, y, th, K_x, Y = toy
    n, m = Y.shape
    lam = 1e-3
    K_t = Gaussian(10.0).gram(th)
    models = {}
    for name in ("admm", "apgd"):
        pb = noncrossing_problem(K_x, Y, th, Gaussian(10.0), lam, loss)
        res = EXACT_SOLVERS[name](pb, tol=1e-7, max_iter=100_000)
        A = res.coef
        assert res.converged and res.gap <= 1e-7
        # the gap recomputed from the definitions (MATH.md §3.1 and the pinball conjugate (Q*)):
        assert np.all(A <= th + 1e-12) and np.all(A >= th - 1 - 1e-12)
        c = 1.0 / (lam * n * m)
        H = c * K_x @ A @ K_t
        quad = np.sum((K_x @ A @ K_t) * A)
        P = loss.value(Y - H, th) + 0.5 * lam * c**2 * quad
        w = np.where(A < 0, 1 - th, th)
        conj = loss.epsilon * np.abs(A).sum() + 0.5 * loss.kappa * np.sum(A * A / w)
        F = -np.sum(A * Y) + 0.5 * c * quad + conj
        assert (P + F / (n * m)) / P == pytest.approx(res.gap, abs=1e-10)
        models[name] = H
    # two certified solutions of a problem whose primal is strongly convex: the same model, to the gaps' accuracy
    np.testing.assert_allclose(models["admm"], models["apgd"], atol=2e-3)


def test_joint_levels_with_a_diagonal_output_kernel_are_separate_quantile_regressions(toy):
    """Seed 001's joint quantile regression on user levels: with k_Θ(θ_j, θ_l) = δ_jl the problem decouples into one
    kernel quantile regression per level with λ' = mλ, whose dual ``min −αᵀy + αᵀK_Xα/(2λ'n)`` over the box
    [τ − 1, τ]ⁿ is solved here by L-BFGS-B."""
    X, y, _, K_x, _ = toy
    n = len(y)
    levels = np.array([0.1, 0.5, 0.9])
    lam = 1e-3
    pb = noncrossing_problem(K_x, np.repeat(y[:, None], 3, axis=1), levels, Gaussian(1e5), lam, Pinball())
    res = EXACT_SOLVERS["admm"](pb, tol=1e-9, max_iter=100_000)
    joint = pb.kernel_product(res.coef)
    lam1 = lam * len(levels)
    for j, tau in enumerate(levels):

        def dual(a, tau=tau):
            Ka = K_x @ a
            return -a @ y + a @ Ka / (2 * lam1 * n), -y + Ka / (lam1 * n)

        a = minimize(
            dual, np.zeros(n), jac=True, method="L-BFGS-B", bounds=[(tau - 1, tau)] * n, options={"ftol": 1e-15}
        ).x
        np.testing.assert_allclose(joint[:, j], K_x @ a / (lam1 * n), atol=2e-4)


def test_kernel_derivatives_match_finite_differences():
    k = Gaussian(7.0)
    a, b = np.array([0.1, 0.4, 0.75]), np.array([0.0, 0.3, 0.5, 0.9])
    d2, d12 = k.gram_derivatives(a, b)
    h = 1e-6
    np.testing.assert_allclose(d2, (k.gram(a, b + h) - k.gram(a, b - h)) / (2 * h), rtol=1e-7, atol=1e-9)
    fd12 = (k.gram_derivatives(a + h, b)[0] - k.gram_derivatives(a - h, b)[0]) / (2 * h)
    np.testing.assert_allclose(d12, fd12, rtol=1e-6, atol=1e-8)
    # the columns of the model and of its θ-derivative (thesis (5.29)) agree with finite differences in θ
    levels, anchors, theta = np.linspace(0.05, 0.95, 6), np.array([0.2, 0.6]), np.array([0.33, 0.71])
    G = output_derivative_columns(k, levels, anchors, theta)
    fd = (output_columns(k, levels, anchors, theta + h) - output_columns(k, levels, anchors, theta - h)) / (2 * h)
    np.testing.assert_allclose(G, fd, rtol=1e-6, atol=1e-8)
    # the augmented Gram matrix is the Gram matrix of those functionals: symmetric PSD, its columns at the levels
    K = augmented_gram(k, levels, anchors)
    np.testing.assert_allclose(K, K.T, atol=1e-12)
    assert np.linalg.eigvalsh(K).min() > -1e-10
    np.testing.assert_allclose(K[:, :6], output_columns(k, levels, anchors, levels), atol=1e-12)
    with pytest.raises(ValueError, match="C²"):
        Laplacian(1.0).gram_derivatives(a, b)


def test_noncrossing_penalty_is_exact_at_the_anchors_and_its_gap_is_certified(toy):
    """Without the penalty the fitted quantile curves decrease in θ at some anchors (crossings); with a large λ_nc
    the ℓ1 penalty is exact: ∂_θ h ≥ 0 at every (x_i, θ̃_l). The reported gap is that of problem (5.28): the
    penalty, recomputed here, is part of the primal value."""
    X, y, th, K_x, Y = toy
    n, m = Y.shape
    lam, k = 1e-3, Gaussian(10.0)
    slopes = {}
    for lam_nc in (0.0, 10.0):
        pb = noncrossing_problem(K_x, Y, th, k, lam, Pinball(), lam_nc=lam_nc)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            res = EXACT_SOLVERS["admm"](pb, tol=1e-7, max_iter=200_000)
        anchors = th if lam_nc else np.array([])
        c = 1.0 / (lam * n * m)
        slopes[lam_nc] = c * K_x @ res.coef @ output_derivative_columns(k, th, anchors, th)
        H = c * K_x @ res.coef @ output_columns(k, th, anchors, th)
        norm2 = c**2 * np.sum((K_x @ res.coef @ pb.K_out) * res.coef)
        P = np.mean(pinball_sum(Y - H, th)) + lam_nc * np.mean(np.maximum(-slopes[lam_nc], 0)) + 0.5 * lam * norm2
        assert res.history["primal"][-1] == pytest.approx(P, rel=1e-10)
    assert slopes[0.0].min() < -0.5
    assert slopes[10.0].min() > -1e-4


def test_admm_over_relaxation_reaches_the_same_certified_model_in_fewer_iterations(toy):
    """α = 1.8 (the default for the pinball dual) against plain ADMM: the same model at a relative gap of 1e-6, in
    fewer iterations (module docstring of rffor.solvers.admm: 1.7-1.9x fewer measured)."""
    X, y, th, K_x, Y = toy
    pb = noncrossing_problem(K_x, Y, th, Gaussian(10.0), 1e-4, Pinball())
    plain = EXACT_SOLVERS["admm"](pb, tol=1e-6, max_iter=100_000, relax=1.0)
    relaxed = EXACT_SOLVERS["admm"](pb, tol=1e-6, max_iter=100_000)
    assert plain.converged and relaxed.converged
    assert relaxed.n_iter < plain.n_iter
    np.testing.assert_allclose(pb.kernel_product(relaxed.coef), pb.kernel_product(plain.coef), atol=1e-3)
    with pytest.raises(ValueError, match="relax"):
        EXACT_SOLVERS["admm"](pb, relax=2.0)
