"""Tests of the pinball losses (rffor.losses.Pinball) against their definitions: the closed forms (Q) of the module
docstring, written again here entry by entry; the conjugate pair (Q)/(Q*) checked by numerical suprema; the box
θ − 1 ≤ A ≤ θ of the dual (D_q) checked by a duality gap of zero at a dual optimum found by SciPy's L-BFGS-B, with
the primal and dual objectives written here from MATH.md §3 (not from rffor's solvers or certificate code).

What every loss must satisfy (gradient by finite differences, Fenchel–Young at the gradient, Moreau's identity, the
prox's optimality, the spec round trip) is tested for the pinball losses with the others, in tests/test_losses.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar

from rffor.kernels import Gaussian
from rffor.losses import Pinball

pytestmark = pytest.mark.usefixtures("single_blas_thread")

PARAMS = [(0.0, 0.0), (0.3, 0.0), (0.0, 0.4), (0.2, 0.5)]  # (epsilon, kappa)
IDS = ["plain", "eps", "smooth", "eps+smooth"]


def ref_pointwise(r: float, th: float, eps: float, kappa: float) -> float:
    """ℓ_θ(r) of seed 001 Table 1 (ε) and thesis 003 §5.4.2 (κ), one entry at a time."""
    if eps == 0 and kappa == 0:
        return max(th * r, (th - 1) * r)
    if kappa == 0:  # ε-insensitive pinball, seed 001 Table 1
        if abs(r) <= eps:
            return 0.0
        return th * (r - eps) if r >= eps else (th - 1) * (r + eps)
    t = max(abs(r) - eps, 0.0)
    smoothed_abs = t * t / (2 * kappa) if t <= kappa else t - kappa / 2  # Moreau envelope of |·|
    return abs(th - (1.0 if r < 0 else 0.0)) * smoothed_abs


def ref_conjugate(a: float, th: float, eps: float, kappa: float) -> float:
    """sup_r a r − ℓ_θ(r), maximised numerically over a wide interval (the supremum is reached within it)."""
    res = minimize_scalar(
        lambda r: -(a * r - ref_pointwise(r, th, eps, kappa)),
        bounds=(-50, 50),
        method="bounded",
        options={"xatol": 1e-11},
    )
    return -res.fun


def levels(m: int) -> np.ndarray:
    return (np.arange(m) + 0.5) / m


# ----------------------------------------------------------------------------------------------------------------
# primal values and gradients
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("eps, kappa", PARAMS, ids=IDS)
def test_curve_values_match_the_pointwise_definitions(eps, kappa, rng):
    m = 7
    th = levels(m)
    R = rng.standard_normal((9, m)) * rng.uniform(0.05, 3, size=(9, 1))
    R[2, 3] = np.nan  # unobserved: each curve averaged over its own count
    loss = Pinball(epsilon=eps, kappa=kappa)
    expected = [
        np.mean([ref_pointwise(r, t, eps, kappa) for r, t in zip(row, th, strict=True) if not np.isnan(r)]) for row in R
    ]
    np.testing.assert_allclose(loss.curve_values(R, th), expected, rtol=1e-12, atol=1e-15)
    assert loss.value(R, th) == pytest.approx(np.mean(expected), rel=1e-12)


def test_one_level_is_the_classical_pinball_and_the_median_is_half_the_absolute_error(rng):
    r = rng.standard_normal(50)
    for tau in (0.1, 0.5, 0.93):
        expected = np.maximum(tau * r, (tau - 1) * r)
        np.testing.assert_allclose(Pinball().curve_values(r[:, None], [tau]), expected, rtol=1e-14)
    np.testing.assert_allclose(Pinball().curve_values(r[:, None], [0.5]), 0.5 * np.abs(r), rtol=1e-14)


def test_gradient_of_the_plain_pinball_is_mathmd_section_6():
    """G = (θ_j − 1{r < 0}) / m (MATH.md §6), including a residual of exactly 0 (subgradient θ)."""
    th = np.array([0.1, 0.5, 0.9])
    R = np.array([[0.3, -2.0, 0.0]])
    np.testing.assert_array_equal(Pinball().grad(R, th), [[0.1 / 3, -0.5 / 3, 0.9 / 3]])
    assert Pinball().grad(R.astype(np.float32), th).dtype == np.float32


# ----------------------------------------------------------------------------------------------------------------
# the dual: conjugate pair, box, prox (module docstring (Q*) and the prox formula)
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("eps, kappa", PARAMS, ids=IDS)
@pytest.mark.parametrize("th", [0.0, 0.2, 0.5, 0.85, 1.0])
def test_dual_penalty_is_the_conjugate_and_its_domain_is_the_box(eps, kappa, th):
    """ψ(a) = sup_r a r − ℓ_θ(r) inside [θ − 1, θ] (numerical supremum), +∞ just outside: the box of (D_q)."""
    loss = Pinball(epsilon=eps, kappa=kappa)
    for a in np.linspace(th - 1, th, 9):
        assert loss.dual_penalty(np.array([[a]]), [th]) == pytest.approx(ref_conjugate(a, th, eps, kappa), abs=2e-8)
    assert loss.dual_penalty(np.array([[th + 1e-6]]), [th]) == math.inf
    assert loss.dual_penalty(np.array([[th - 1 - 1e-6]]), [th]) == math.inf
    # and outside the box the conjugate is indeed unbounded: a slope beyond [θ − 1, θ] wins over the loss
    assert ref_conjugate(th + 0.05, th, eps, kappa) > 1.0
    assert ref_conjugate(th - 1.05, th, eps, kappa) > 1.0


@pytest.mark.parametrize("eps, kappa", PARAMS, ids=IDS)
def test_step_zero_projects_on_the_box(eps, kappa, rng):
    """A prox step of 0 is the projection on the box θ − 1 ≤ A ≤ θ of (D_q), whatever ε and κ (the prox's
    optimality, Moreau's identity and the conjugate pair are tested for every loss in tests/test_losses.py)."""
    th = levels(6)
    U = rng.standard_normal((5, 6)) * 2
    np.testing.assert_array_equal(Pinball(epsilon=eps, kappa=kappa).prox_dual(U, 0.0, th), np.clip(U, th - 1, th))


# ----------------------------------------------------------------------------------------------------------------
# duality gap of zero at an optimum found independently of rffor's solvers
# ----------------------------------------------------------------------------------------------------------------


def _small_problem(n=8, m=5, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1.5, n)
    y = np.sin(2 * np.pi * x) + (0.2 + 0.5 * x) * rng.standard_normal(n)
    th = levels(m)
    K_x = Gaussian(2.0).gram(x[:, None])
    K_t = Gaussian(5.0).gram(th)
    return K_x, K_t, np.repeat(y[:, None], m, axis=1), th


def _primal(A, K_x, K_t, Y, th, lam, eps, kappa):
    """P(h_A) of MATH.md (P) with h_A = K_X A K_Θ/(λnm) on the data and ‖h_A‖² = Tr(K_X A K_Θ Aᵀ)/(λnm)²."""
    n, m = Y.shape
    c = 1.0 / (lam * n * m)
    R = Y - c * K_x @ A @ K_t
    data = np.mean([np.mean([ref_pointwise(r, t, eps, kappa) for r, t in zip(row, th, strict=True)]) for row in R])
    return data + 0.5 * lam * c**2 * np.sum((K_x @ A @ K_t) * A)


def _dual_by_lbfgsb(K_x, K_t, Y, th, lam, eps, kappa):
    """min F(A) of (D_q) by L-BFGS-B on the box θ_j − 1 ≤ A_ij ≤ θ_j (ε|a| through a = a⁺ − a⁻, a± ≥ 0)."""
    n, m = Y.shape
    c = 1.0 / (lam * n * m)
    lo, hi = np.tile(th - 1, n), np.tile(th, n)

    def split(z):
        return z[: n * m].reshape(n, m), z[n * m :].reshape(n, m)

    def F(z):
        P, N = split(z)
        A = P - N
        KAK = K_x @ A @ K_t
        w = np.where(A < 0, 1 - th, th)
        quad = np.divide(A * A, w, out=np.zeros_like(A), where=w > 0)
        val = -np.sum(A * Y) + 0.5 * c * np.sum(KAK * A) + eps * np.sum(P + N) + 0.5 * kappa * np.sum(quad)
        gA = -Y + c * KAK + kappa * np.divide(A, w, out=np.zeros_like(A), where=w > 0)
        return val, np.concatenate([(gA + eps).ravel(), (-gA + eps).ravel()])

    # a⁺ ∈ [0, θ], a⁻ ∈ [0, 1 − θ]: with ε > 0 at most one is non-zero at the optimum
    bounds = list(zip(np.zeros(n * m), hi, strict=True)) + list(zip(np.zeros(n * m), -lo, strict=True))
    z0 = np.zeros(2 * n * m)
    res = minimize(
        F, z0, jac=True, method="L-BFGS-B", bounds=bounds, options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 50_000}
    )
    P, N = split(res.x)
    return P - N, res.fun


@pytest.mark.parametrize("eps, kappa", PARAMS, ids=IDS)
def test_duality_gap_is_zero_at_the_optimum_of_the_box_dual(eps, kappa):
    """The optimum of (D_q) over the box θ − 1 ≤ A ≤ θ, found by L-BFGS-B, defines a model whose primal objective
    equals minus the dual optimum: P(h_A) + F(A)/(nm) = 0 (to the solver's accuracy). With the box of the opposite
    sign convention, [−θ, 1 − θ], the same computation leaves a large gap."""
    K_x, K_t, Y, th = _small_problem()
    n, m = Y.shape
    lam = 1e-2
    A, F = _dual_by_lbfgsb(K_x, K_t, Y, th, lam, eps, kappa)
    P = _primal(A, K_x, K_t, Y, th, lam, eps, kappa)
    assert P + F / (n * m) == pytest.approx(0.0, abs=1e-7 * abs(P))
    assert np.all(A <= th + 1e-12) and np.all(A >= th - 1 - 1e-12)
    # the library's penalty and objective agree with this independent evaluation
    loss = Pinball(epsilon=eps, kappa=kappa)
    assert loss.value(Y - K_x @ A @ K_t / (lam * n * m), th) == pytest.approx(
        P - 0.5 * lam * np.sum((K_x @ A @ K_t) * A) / (lam * n * m) ** 2, rel=1e-12
    )
    if eps == 0 and kappa == 0:
        A_wrong, F_wrong = _dual_by_lbfgsb(K_x, K_t, Y, 1 - th, lam, eps, kappa)  # box [−θ, 1 − θ]
        P_wrong = _primal(A_wrong, K_x, K_t, Y, th, lam, eps, kappa)
        assert P_wrong + F_wrong / (n * m) > 0.05 * P


def test_smoothed_primal_minimum_equals_the_dual_optimum():
    """κ > 0: the primal (smooth) minimised over representer coefficients by L-BFGS equals −min F/(nm)."""
    K_x, K_t, Y, th = _small_problem(seed=1)
    n, m = Y.shape
    lam, eps, kappa = 3e-3, 0.1, 0.3
    _, F = _dual_by_lbfgsb(K_x, K_t, Y, th, lam, eps, kappa)
    loss = Pinball(epsilon=eps, kappa=kappa)
    c = 1.0 / (lam * n * m)

    def J(z):  # h = c K_X A K_Θ, written with the library's loss (its value and gradient are tested above)
        A = z.reshape(n, m)
        H = c * K_x @ A @ K_t
        G = loss.grad(Y - H, th) / n  # the mean loss's gradient in H is −G/n
        val = loss.value(Y - H, th) + 0.5 * lam * np.sum(H * A) * c
        return val, (c * K_x @ (-G + lam * c * A) @ K_t).ravel()

    res = minimize(J, np.zeros(n * m), jac=True, method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-12})
    assert res.fun == pytest.approx(-F / (n * m), rel=1e-6)


# ----------------------------------------------------------------------------------------------------------------
# parameters
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "factory, name, exc",
    [
        (lambda: Pinball(epsilon=-0.1), "epsilon", ValueError),
        (lambda: Pinball(kappa=-1.0), "kappa", ValueError),
        (lambda: Pinball(kappa=math.inf), "kappa", ValueError),
        (lambda: Pinball(epsilon="0.1"), "epsilon", TypeError),
    ],
)
def test_invalid_parameters_raise_naming_them(factory, name, exc):
    with pytest.raises(exc, match=rf"\b{name}\b"):
        factory()


def test_levels_are_required_and_checked():
    R = np.zeros((2, 3))
    with pytest.raises(ValueError, match="theta"):
        Pinball().curve_values(R)
    with pytest.raises(ValueError, match="3 columns"):
        Pinball().grad(R, [0.2, 0.5])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        Pinball().prox_dual(R, 1.0, [0.2, 0.5, 1.5])


def test_flags():
    """Spec round trip, gradient, conjugate pair and prox: tests/test_losses.py, for every loss."""
    loss = Pinball(epsilon=0.1, kappa=0.2)
    assert loss.integral and loss.needs_levels and loss.dual_quadratic == 0 and not loss.supports_eigen
    assert not loss.is_square
