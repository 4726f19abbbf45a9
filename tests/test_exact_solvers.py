"""Tests of the exact dual solvers (MATH.md §3): APGD, ADMM, the closed form, splines and eigenbasis.

Every certificate here is recomputed from the formulas of MATH.md §2–3 with plain NumPy (Gram matrices, the
closed forms of the losses, ψ of (D_s)/(D_e)), never through ``DualProblem.certificate`` or the loss objects:
a test passes only if the solver minimises the problem written in MATH.md.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning

from rffor.losses import EpsilonInsensitive, Huber, Square
from rffor.solvers.admm import solve_admm
from rffor.solvers.apgd import solve_apgd
from rffor.solvers.closed_form import sylvester_kernel
from rffor.solvers.dual import DualProblem

pytestmark = pytest.mark.usefixtures("single_blas_thread")

SOLVERS = {"apgd": solve_apgd, "admm": solve_admm}
LAM = 1e-3
GAMMA_X = 1.0 / 12  # 12-point input curves: about 1/p_in (MATH.md §4, datasets docstring)
GAMMA_T = 100.0

# ----------------------------------------------------------------------------------------------------------------
# reference formulas, written from MATH.md with plain numpy
# ----------------------------------------------------------------------------------------------------------------


def gauss(A, B, gamma):
    A = np.asarray(A, dtype=float).reshape(len(A), -1)
    B = np.asarray(B, dtype=float).reshape(len(B), -1)
    d2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
    return np.exp(-gamma * d2)


def kind_of(loss):
    """(kind, parameter) of a loss object, read from its public attributes only."""
    if isinstance(loss, Square):
        return "square", None
    if isinstance(loss, Huber):
        return ("huber2" if loss.p == 2 else "huber1"), loss.kappa
    if isinstance(loss, EpsilonInsensitive):
        return ("eps2" if loss.p == 2 else "epsinf"), loss.epsilon
    raise AssertionError(loss)


def ref_curve_losses(kind, par, R, *, coefficients=False):
    """L(r_i) of MATH.md §2 for residual curves R (n, m) on the grid (μ_m norms), or for coefficient rows in an
    orthonormal basis of 𝒴 (``coefficients=True``: the norm is the plain Euclidean norm)."""
    nrm = np.sqrt((R**2).sum(1)) if coefficients else np.sqrt((R**2).mean(1))
    if kind == "square":
        return 0.5 * nrm**2
    if kind == "huber2":
        return np.where(nrm <= par, 0.5 * nrm**2, par * (nrm - par / 2))
    if kind == "eps2":
        return 0.5 * np.maximum(nrm - par, 0.0) ** 2
    a = np.abs(R)
    if kind == "huber1":
        return np.where(a <= par, 0.5 * a**2, par * (a - par / 2)).mean(1)
    if kind == "epsinf":
        return (0.5 * np.maximum(a - par, 0.0) ** 2).mean(1)
    raise AssertionError(kind)


def ref_psi(kind, par, A, *, radius_scale):
    """Σ_i ψ(a_i) of (D_s) (``radius_scale = √m``) or (D_e) (``radius_scale = 1``); indicators are checked."""
    rows = np.sqrt((A**2).sum(1))
    if kind == "square":
        return 0.0
    if kind == "huber2":
        assert rows.max() <= radius_scale * par * (1 + 1e-9), "dual iterate outside the H_κ^2 ball"
        return 0.0
    if kind == "huber1":
        assert np.abs(A).max() <= par * (1 + 1e-9), "dual iterate outside the H_κ^1 box"
        return 0.0
    if kind == "eps2":
        return par * radius_scale * rows.sum()
    if kind == "epsinf":
        return par * np.abs(A).sum()
    raise AssertionError(kind)


def spline_certificate(A, K_x, K_t, Y, lam, loss):
    """(P(A), −F(A)/(nm)) of MATH.md §3.1: primal value of the dual iterate and scaled dual value."""
    n, m = Y.shape
    kind, par = kind_of(loss)
    KAK = K_x @ A @ K_t
    quad = np.sum(A * KAK)  # Tr(K_X A K_Θ Aᵀ)
    H = KAK / (lam * n * m)
    primal = ref_curve_losses(kind, par, Y - H).mean() + 0.5 * lam * quad / (lam * n * m) ** 2
    F = 0.5 * np.sum(A * A) - np.sum(A * Y) + quad / (2 * lam * n * m) + ref_psi(kind, par, A, radius_scale=m**0.5)
    return primal, -F / (n * m)


def rel_gap(primal, dual):
    return (primal - dual) / max(abs(primal), abs(dual))


def distance_bound(A, K_x, K_t, Y, lam, loss):
    """Upper bound on ‖A − A*‖_F from the duality gap: F is 1-strongly convex, so
    ½‖A − A*‖² ≤ F(A) − F(A*) ≤ nm (P(A) + F(A)/(nm)) (weak duality, MATH.md §3.1).
    The gap is evaluated in floating point: allow ~100 ulps of the terms that make up F."""
    primal, dual = spline_certificate(A, K_x, K_t, Y, lam, loss)
    n, m = Y.shape
    terms = 0.5 * np.sum(A * A) + abs(np.sum(A * Y)) + abs(np.sum(A * (K_x @ A @ K_t))) / (2 * lam * n * m)
    roundoff = 1e-14 * (terms + n * m * abs(primal))
    return math.sqrt(2 * (n * m * max(primal - dual, 0.0) + roundoff))


def kron_square_solution(K_x, K_t, Y, lam):
    """Square loss: ∇F = 0 ⇔ (I + K_X ⊗ K_Θ/(λnm)) vec(A) = vec(Y) (row-major vec), solved densely."""
    n, m = Y.shape
    M = np.eye(n * m) + np.kron(K_x, K_t) / (lam * n * m)
    return np.linalg.solve(M, Y.ravel()).reshape(n, m)


def direct_primal(K_x, K_t, Y, lam, kind, par):
    """Minimise (P) over the RKHS of k_X ⊗ k_Θ directly, by BFGS, with the representer form on the nm points
    h = S_X B S_Θ (S = K^{1/2}, so ‖h‖² = ‖B‖_F²), using the gradients of the closed forms of MATH.md §2 (every
    loss there is C¹). Returns the grid values of h and the primal value P(h)."""
    n, m = Y.shape

    def sqrtm(K):
        w, V = np.linalg.eigh(K)
        return (V * np.sqrt(np.maximum(w, 0))) @ V.T

    S_x, S_t = sqrtm(K_x), sqrtm(K_t)

    def dloss(R):  # ∂L(r_i)/∂r_ij
        nrm = np.sqrt((R**2).mean(1, keepdims=True))
        if kind == "square":
            return R / m
        if kind == "huber2":
            return R / m * np.minimum(1.0, par / np.maximum(nrm, 1e-300))
        if kind == "eps2":
            return R / m * np.maximum(1.0 - par / np.maximum(nrm, 1e-300), 0.0)
        if kind == "huber1":
            return np.clip(R, -par, par) / m
        if kind == "epsinf":
            return np.sign(R) * np.maximum(np.abs(R) - par, 0.0) / m
        raise AssertionError(kind)

    def fun(b):
        B = b.reshape(n, m)
        R = Y - S_x @ B @ S_t
        J = ref_curve_losses(kind, par, R).mean() + 0.5 * lam * np.sum(B * B)
        G = -(S_x @ dloss(R) @ S_t) / n + lam * B
        return J, G.ravel()

    res = minimize(fun, np.zeros(n * m), jac=True, method="BFGS", options={"gtol": 1e-12, "maxiter": 5000})
    return S_x @ res.x.reshape(n, m) @ S_t, float(res.fun)


def sup_distance_bound(value, dual, lam):
    """Bound on sup_{x_i, θ_j} |h − h*| for a model h of primal value P(h) = ``value``: P is λ-strongly convex in h,
    P(h*) ≥ D (weak duality), and |h(x, θ)| ≤ ‖h‖ sqrt(k_X(x, x) k_Θ(θ, θ)) = ‖h‖ for Gaussian kernels, so
    ‖h − h*‖_∞ ≤ ‖h − h*‖ ≤ sqrt(2 (P(h) − D)/λ)."""
    assert value - dual >= -1e-12 * max(1.0, abs(value)), "weak duality violated"
    return math.sqrt(2 * max(value - dual, 0.0) / lam)


# ----------------------------------------------------------------------------------------------------------------
# fixtures
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def grams(tiny_curves):
    d = tiny_curves
    return gauss(d.X_train, d.X_train, GAMMA_X), gauss(d.theta, d.theta, GAMMA_T), d.Y_train_outliers.copy()


def spline_problem(grams, loss, lam=LAM):
    K_x, K_t, Y = grams
    return DualProblem.splines(K_x, K_t, Y, lam, loss)


def solve(name, problem, **kw):
    kw.setdefault("tol", 1e-11)
    kw.setdefault("max_iter", 20000 if name == "apgd" else 5000)
    return SOLVERS[name](problem, **kw)


# ----------------------------------------------------------------------------------------------------------------
# square loss: closed form
# ----------------------------------------------------------------------------------------------------------------


def test_closed_form_solves_the_kronecker_system(grams):
    K_x, K_t, Y = grams
    A_ref = kron_square_solution(K_x, K_t, Y, LAM)
    np.testing.assert_allclose(sylvester_kernel(K_x, K_t, Y, LAM), A_ref, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(spline_problem(grams, Square()).closed_form(), A_ref, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_square_loss_from_zero_reaches_the_closed_form(grams, solver):
    K_x, K_t, Y = grams
    res = solve(solver, spline_problem(grams, Square()), warm_start=False, tol=1e-13)
    assert res.converged and res.n_iter > 1  # it really iterated from 0
    A_ref = kron_square_solution(K_x, K_t, Y, LAM)
    bound = distance_bound(res.coef, K_x, K_t, Y, LAM, Square())
    assert np.linalg.norm(res.coef - A_ref) <= bound < 1e-5 * np.linalg.norm(A_ref)


# ----------------------------------------------------------------------------------------------------------------
# duality
# ----------------------------------------------------------------------------------------------------------------


def test_weak_duality_at_random_feasible_points(grams, any_loss, rng):
    """P(A) + F(A)/(nm) ≥ 0 for every feasible A: checks that the reference P and D are a primal–dual pair."""
    K_x, K_t, Y = grams
    name, loss = any_loss
    kind, par = kind_of(loss)
    n, m = Y.shape
    for scale in (1e-3, 0.1, 1.0, 10.0):
        A = scale * rng.standard_normal((n, m))
        if kind == "huber2":
            rows = np.sqrt((A**2).sum(1, keepdims=True))
            A = A * np.minimum(1.0, math.sqrt(m) * par / rows)
        elif kind == "huber1":
            A = np.clip(A, -par, par)
        primal, dual = spline_certificate(A, K_x, K_t, Y, LAM, loss)
        assert primal - dual >= -1e-12 * max(1.0, abs(primal))


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_zero_duality_gap_at_convergence(grams, any_loss, solver):
    K_x, K_t, Y = grams
    name, loss = any_loss
    res = solve(solver, spline_problem(grams, loss))
    assert res.converged
    primal, dual = spline_certificate(res.coef, K_x, K_t, Y, LAM, loss)
    gap = rel_gap(primal, dual)
    assert -1e-12 <= gap <= 1e-9, gap
    # the solver's own certificate is the same number
    assert res.gap == pytest.approx(gap, abs=1e-10)
    assert res.history["primal"][-1] == pytest.approx(primal, rel=1e-10)
    assert res.history["dual"][-1] == pytest.approx(dual, rel=1e-10)
    # the non-smooth part of the loss is active at the solution (otherwise this test would only test the square)
    kind, par = kind_of(loss)
    A = res.coef
    rows = np.sqrt((A**2).sum(1))
    if kind == "huber2":
        radius = math.sqrt(Y.shape[1]) * par
        assert np.any(rows >= radius * (1 - 1e-9)) and np.any(rows < radius * 0.99)
    elif kind == "huber1":
        assert np.any(np.abs(A) >= par * (1 - 1e-9)) and np.any(np.abs(A) < par * 0.99)
    elif kind == "eps2":
        assert np.any(rows == 0) and np.any(rows > 0)
    elif kind == "epsinf":
        assert np.any(A == 0) and np.any(A != 0)


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_solution_minimises_the_primal_directly(grams, any_loss, solver):
    """Predictions of the dual solution equal those of an independent BFGS on (P) in the product RKHS."""
    K_x, K_t, Y = grams
    name, loss = any_loss
    n, m = Y.shape
    res = solve(solver, spline_problem(grams, loss))
    primal, dual = spline_certificate(res.coef, K_x, K_t, Y, LAM, loss)
    H_dual = K_x @ res.coef @ K_t / (LAM * n * m)
    H_primal, P_direct = direct_primal(K_x, K_t, Y, LAM, *kind_of(loss))
    bound = sup_distance_bound(primal, dual, LAM) + sup_distance_bound(P_direct, dual, LAM)
    assert np.abs(H_dual - H_primal).max() <= bound < 1e-3 * np.abs(Y).max()


@pytest.mark.parametrize("solver", list(SOLVERS))
@pytest.mark.parametrize("kind", ["huber2", "huber1"])
def test_every_dual_iterate_is_feasible(grams, solver, kind):
    K_x, K_t, Y = grams
    m = Y.shape[1]
    kappa = 0.05
    loss = Huber(kappa=kappa, p=2 if kind == "huber2" else 1)
    seen = []

    def check(it, A, gap):
        if kind == "huber2":
            assert np.sqrt((A**2).sum(1)).max() <= math.sqrt(m) * kappa * (1 + 1e-12)
        else:
            assert np.abs(A).max() <= kappa * (1 + 1e-12)
        seen.append(it)

    for warm in (True, False):
        seen.clear()
        res = solve(solver, spline_problem(grams, loss), callback=check, warm_start=warm, tol=1e-9)
        check(0, res.coef, res.gap)
        assert len(seen) > 2


# ----------------------------------------------------------------------------------------------------------------
# limits: κ → ∞, ε = 0, m = 1
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("solver", list(SOLVERS))
@pytest.mark.parametrize(
    "loss",
    [
        Huber(kappa=1e6, p=2),
        Huber(kappa=1e6, p=1),
        Huber(kappa=math.inf, p=2),
        Huber(kappa=math.inf, p=1),
        EpsilonInsensitive(epsilon=0.0, p=2),
        EpsilonInsensitive(epsilon=0.0, p=math.inf),
    ],
    ids=["huber2-1e6", "huber1-1e6", "huber2-inf", "huber1-inf", "eps2-0", "epsinf-0"],
)
def test_large_kappa_and_zero_epsilon_give_the_square_loss(grams, loss, solver):
    K_x, K_t, Y = grams
    res = solve(solver, spline_problem(grams, loss), warm_start=False, tol=1e-12)
    A_ref = kron_square_solution(K_x, K_t, Y, LAM)
    bound = distance_bound(res.coef, K_x, K_t, Y, LAM, Square())  # the square loss's certificate
    assert np.linalg.norm(res.coef - A_ref) <= bound < 1e-5 * np.linalg.norm(A_ref)


SCALAR_CASES = {
    # classical scalar losses of a residual t: Huber, and the squared ε-insensitive loss
    "huber2": (
        Huber(kappa=0.1, p=2),
        lambda t: np.where(np.abs(t) <= 0.1, 0.5 * t**2, 0.1 * (np.abs(t) - 0.05)),
        lambda t: np.clip(t, -0.1, 0.1),
    ),
    "huber1": (
        Huber(kappa=0.1, p=1),
        lambda t: np.where(np.abs(t) <= 0.1, 0.5 * t**2, 0.1 * (np.abs(t) - 0.05)),
        lambda t: np.clip(t, -0.1, 0.1),
    ),
    "eps2": (
        EpsilonInsensitive(epsilon=0.1, p=2),
        lambda t: 0.5 * np.maximum(np.abs(t) - 0.1, 0) ** 2,
        lambda t: np.sign(t) * np.maximum(np.abs(t) - 0.1, 0),
    ),
    "epsinf": (
        EpsilonInsensitive(epsilon=0.1, p=math.inf),
        lambda t: 0.5 * np.maximum(np.abs(t) - 0.1, 0) ** 2,
        lambda t: np.sign(t) * np.maximum(np.abs(t) - 0.1, 0),
    ),
}


@pytest.mark.parametrize("solver", list(SOLVERS))
@pytest.mark.parametrize("case", list(SCALAR_CASES))
def test_one_grid_point_gives_the_scalar_regression(case, solver):
    """m = 1: kernel Huber / squared ε-insensitive regression, min_c (1/n) Σ ℓ(y − K c)_i + (λ/2) cᵀ K c, solved
    independently by BFGS in h = K^{1/2} b (‖h‖ = ‖b‖)."""
    loss, ell, dell = SCALAR_CASES[case]
    rng = np.random.default_rng(7)
    n, lam = 30, 1e-4
    x = np.sort(rng.uniform(-1, 1, n))
    y = np.sin(3 * x) + 0.15 * rng.standard_normal(n)
    y[::10] += 1.0  # outliers
    K = gauss(x, x, 2.0)
    w, V = np.linalg.eigh(K)
    S = (V * np.sqrt(np.maximum(w, 0))) @ V.T

    def fun(b):
        r = y - S @ b
        return ell(r).mean() + 0.5 * lam * b @ b, -S @ dell(r) / n + lam * b

    opt = minimize(fun, np.zeros(n), jac=True, method="BFGS", options={"gtol": 1e-12, "maxiter": 5000})
    h_ref = S @ opt.x
    problem = DualProblem.splines(K, np.ones((1, 1)), y[:, None], lam, loss)
    res = solve(solver, problem)
    h = (K @ res.coef)[:, 0] / (lam * n)
    primal, dual = spline_certificate(res.coef, K, np.ones((1, 1)), y[:, None], lam, loss)
    bound = sup_distance_bound(primal, dual, lam) + sup_distance_bound(opt.fun, dual, lam)
    assert np.abs(h - h_ref).max() <= bound < 1e-3
    # the losses are really active: some residuals beyond the threshold, some within
    r = np.abs(y - h)
    assert np.any(r > 0.1) and np.any(r < 0.1)


# ----------------------------------------------------------------------------------------------------------------
# eigenbasis representation (MATH.md §3.2)
# ----------------------------------------------------------------------------------------------------------------


def eigen_certificate(A, K_x, R, delta, lam, kind, par):
    """(P_e(A), −F_e(A)/n) of (D_e) (MATH.md §3.2): R = Y V_r/√m, Δ = diag(delta), coefficients in the
    orthonormal basis ψ_j, so that the loss uses the Euclidean norm of the coefficient rows."""
    n = R.shape[0]
    KAD = K_x @ (A * delta)
    quad = np.sum(A * KAD)
    primal = (
        ref_curve_losses(kind, par, R - KAD / (lam * n), coefficients=True).mean() + 0.5 * lam * quad / (lam * n) ** 2
    )
    F = 0.5 * np.sum(A * A) - np.sum(A * R) + quad / (2 * lam * n) + ref_psi(kind, par, A, radius_scale=1.0)
    return primal, -F / n


@pytest.mark.parametrize("solver", list(SOLVERS))
@pytest.mark.parametrize(
    "loss", [Square(), Huber(kappa=0.1, p=2), EpsilonInsensitive(epsilon=0.05, p=2)], ids=["square", "huber2", "eps2"]
)
@pytest.mark.parametrize("r", [4, 9])
def test_eigenbasis_zero_gap(grams, loss, solver, r):
    K_x, K_t, Y = grams
    problem = DualProblem.eigenbasis(K_x, K_t, Y, LAM, loss, r)
    res = solve(solver, problem)
    assert res.coef.shape == (Y.shape[0], r)
    # recompute with the solver's basis (eigenvector signs and order of equal eigenvalues are arbitrary)
    R = Y @ problem.V_r / math.sqrt(Y.shape[1])
    np.testing.assert_allclose(problem.V_r.T @ problem.V_r, np.eye(r), atol=1e-10)
    np.testing.assert_allclose(K_t @ problem.V_r, problem.V_r * problem.t_r, atol=1e-10)
    primal, dual = eigen_certificate(res.coef, K_x, R, problem.t_r / Y.shape[1], LAM, *kind_of(loss))
    assert -1e-12 <= rel_gap(primal, dual) <= 1e-9


@pytest.mark.parametrize("solver", list(SOLVERS))
@pytest.mark.parametrize(
    "loss", [Square(), Huber(kappa=0.1, p=2), EpsilonInsensitive(epsilon=0.05, p=2)], ids=["square", "huber2", "eps2"]
)
def test_eigenbasis_with_all_eigenpairs_equals_splines(grams, loss, solver):
    K_x, K_t, Y = grams
    n, m = Y.shape
    spl = solve(solver, spline_problem(grams, loss))
    pe = DualProblem.eigenbasis(K_x, K_t, Y, LAM, loss, m)
    eig = solve(solver, pe)
    H_spl = K_x @ spl.coef @ K_t / (LAM * n * m)
    # MATH.md §3.2 prediction: (1/(λn)) K_X A Δ Ψᵀ with Ψ[l, j] = √m V[l, j] on the grid
    H_eig = K_x @ (eig.coef * (pe.t_r / m)) @ (math.sqrt(m) * pe.V_r).T / (LAM * n)
    np.testing.assert_allclose(H_eig, H_spl, atol=1e-8 * np.abs(Y).max())
    # and the dual variables correspond: A_s = √m A_e V_rᵀ
    np.testing.assert_allclose(math.sqrt(m) * eig.coef @ pe.V_r.T, spl.coef, atol=1e-6 * np.abs(spl.coef).max())


# ----------------------------------------------------------------------------------------------------------------
# sparsity of the ε-insensitive duals
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [2, math.inf], ids=["eps2-rows", "epsinf-entries"])
def test_sparsity_grows_with_epsilon(small_curves, p):
    d = small_curves
    K_x, K_t = gauss(d.X_train, d.X_train, 1 / 20), gauss(d.theta, d.theta, 30.0)
    Y = d.Y_train_outliers
    # beyond max |y_ij| (hence beyond every curve's RMS) A = 0 is optimal: all zero
    eps_grid = [0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.01 * np.abs(Y).max()]
    sparsity = []
    for eps in eps_grid:
        res = solve_admm(DualProblem.splines(K_x, K_t, Y, 1e-3, EpsilonInsensitive(eps, p)), tol=1e-10, max_iter=5000)
        assert res.converged
        zero = np.all(res.coef == 0, axis=1) if p == 2 else res.coef == 0
        sparsity.append(zero.mean())
    assert sparsity[0] == 0.0 and sparsity[-1] == 1.0, sparsity
    assert all(b >= a for a, b in zip(sparsity, sparsity[1:], strict=False)), sparsity
    assert sum(0 < s < 1 for s in sparsity) >= 3, sparsity  # a real path, not a jump from 0 to 1


# ----------------------------------------------------------------------------------------------------------------
# the two solvers; max_iter; warm starts
# ----------------------------------------------------------------------------------------------------------------


def test_apgd_and_admm_reach_the_same_solution_and_certificate(grams, any_loss):
    K_x, K_t, Y = grams
    name, loss = any_loss
    problem = spline_problem(grams, loss)
    a, b = solve("apgd", problem), solve("admm", problem)
    bound = distance_bound(a.coef, K_x, K_t, Y, LAM, loss) + distance_bound(b.coef, K_x, K_t, Y, LAM, loss)
    assert np.linalg.norm(a.coef - b.coef) <= bound < 1e-4 * np.linalg.norm(a.coef)
    ca = spline_certificate(a.coef, K_x, K_t, Y, LAM, loss)
    cb = spline_certificate(b.coef, K_x, K_t, Y, LAM, loss)
    np.testing.assert_allclose(ca, cb, rtol=1e-9)
    assert a.history["primal"][-1] == pytest.approx(b.history["primal"][-1], rel=1e-9)
    assert a.gap <= 1e-11 and b.gap <= 1e-11


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_max_iter_warns_and_keeps_the_last_iterate(grams, solver):
    problem = spline_problem(grams, Huber(kappa=0.02, p=2), lam=1e-4)
    last = {}

    def remember(it, A, gap):
        last.update(it=it, A=A.copy(), gap=gap)

    with pytest.warns(ConvergenceWarning, match="max_iter=3"):
        res = solve(solver, problem, max_iter=3, tol=1e-14, callback=remember)
    assert not res.converged and res.n_iter == 3 and last["it"] == 3
    np.testing.assert_array_equal(res.coef, last["A"])
    assert res.gap == last["gap"] == res.history["gap"][-1] > 1e-14
    # the start, then every iteration (ADMM) or every check_every = 10 iterations and the last one (APGD)
    assert len(res.history["gap"]) == (4 if solver == "admm" else 2)
    # the returned iterate is feasible: its independently computed certificate is finite and the same
    K_x, K_t, Y = grams
    primal, dual = spline_certificate(res.coef, K_x, K_t, Y, 1e-4, problem.loss)
    assert res.gap == pytest.approx(rel_gap(primal, dual), rel=1e-8)


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_max_iter_zero_returns_the_warm_start(grams, solver):
    problem = spline_problem(grams, Huber(kappa=0.05, p=1))
    with pytest.warns(ConvergenceWarning):
        res = solve(solver, problem, max_iter=0, tol=1e-14)
    assert res.n_iter == 0
    np.testing.assert_allclose(res.coef, np.clip(problem.closed_form(), -0.05, 0.05))


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_warm_start_from_an_array(grams, solver):
    loss = EpsilonInsensitive(epsilon=0.05, p=math.inf)
    problem = spline_problem(grams, loss)
    ref = solve(solver, problem)
    again = solve(solver, problem, warm_start=ref.coef)
    assert again.n_iter == 0  # started at the solution, not at a prox of it
    np.testing.assert_array_equal(again.coef, ref.coef)
    # an infeasible start is projected onto the domain of ψ (Huber: the ball)
    huber = spline_problem(grams, Huber(kappa=0.01, p=2))
    start = solve(solver, huber, warm_start=10 * ref.coef, max_iter=10_000)
    assert start.converged


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_solver_is_deterministic(grams, solver):
    problem = spline_problem(grams, Huber(kappa=0.1, p=1))
    a, b = solve(solver, problem), solve(solver, problem)
    np.testing.assert_array_equal(a.coef, b.coef)
    assert a.n_iter == b.n_iter


@pytest.mark.parametrize("solver, check_every", [("admm", 1), ("apgd", 1), ("apgd", 10), ("apgd", 7)])
def test_gap_history(grams, solver, check_every):
    kw = {} if solver == "admm" else {"check_every": check_every}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = solve(solver, spline_problem(grams, Huber(kappa=0.1, p=2)), tol=1e-8, **kw)
    assert res.n_iter % check_every == 0  # stopped at a check
    assert len(res.history["gap"]) == len(res.history["primal"]) == len(res.history["dual"])
    assert len(res.history["gap"]) == res.n_iter // check_every + 1
    assert res.history["gap"][-1] == res.gap <= 1e-8 < res.history["gap"][0]
    assert all(p >= d for p, d in zip(res.history["primal"], res.history["dual"], strict=True))


@pytest.mark.parametrize("lam", [1e-3, 1e-5])
def test_apgd_converges_at_the_accelerated_linear_rate(grams, any_loss, lam):
    """F is 1-strongly convex and L-smooth: accelerated gradient needs O(√L log(1/tol)) iterations, not O(L log).
    Observed from zero to 1e-10 on this problem: 0.17–0.5 √L ln(1/tol) iterations (L ≈ 90 and 9,200); a wrong
    momentum or step shows up here even when the limit is right."""
    name, loss = any_loss
    problem = spline_problem(grams, loss, lam=lam)
    tol = 1e-10
    res = solve("apgd", problem, warm_start=False, tol=tol, check_every=1)
    assert res.converged
    assert res.n_iter <= math.sqrt(problem.lipschitz) * math.log(1 / tol)


def test_apgd_check_every_does_not_change_the_iterates(grams):
    problem = spline_problem(grams, EpsilonInsensitive(epsilon=0.1, p=math.inf))
    a = solve("apgd", problem, check_every=1, tol=1e-9)
    b = solve("apgd", problem, check_every=5, tol=1e-9)
    assert a.n_iter <= b.n_iter < a.n_iter + 5
    with pytest.raises(ValueError, match="check_every"):
        solve("apgd", problem, check_every=0)


@pytest.mark.parametrize("r", [4, 10, 40])
def test_eigen_certificate_is_that_of_the_returned_model_for_P(r):
    """representation="eigen" with r < m (m = 40, H_κ^2): ``objective_`` is (P) at the model ``predict`` uses,
    evaluated here independently (the loss of the training residuals + (λ/2)‖h‖² with ‖h‖² = <W, K_X W K_Θ>), and
    ``duality_gap_`` bounds its distance to the optimum of (P) (computed by ADMM on the splines dual to 1e-11);
    the reduced problem's own gap (what tol stops on) is reported apart and does not bound it for small r."""
    from rffor import FunctionalRegressor
    from rffor.datasets import add_outliers, make_synthetic
    from rffor.kernels import Gaussian
    from rffor.losses import Huber

    d = make_synthetic(60, 5, m=40, p_in=10, nonlinear=True, noise=0.1, random_state=0)
    Y = add_outliers(d.Y_train, 2, 0.1, random_state=1)[0]
    loss, lam = Huber(0.1, 2), 1e-4
    kw = dict(kernel_x=Gaussian(0.05), kernel_theta=Gaussian(30.0), lam=lam, tol=1e-11)
    opt = FunctionalRegressor(loss, solver="admm", **kw).fit(d.X_train, Y, d.theta)
    P_star = opt.objective_
    est = FunctionalRegressor(loss, solver="apgd", representation="eigen", n_eig=r, max_iter=20000, **kw)
    est.fit(d.X_train, Y, d.theta)
    K_x, K_t = Gaussian(0.05).gram(d.X_train), Gaussian(30.0).gram(d.theta)
    W = est._W
    H = K_x @ W @ K_t
    np.testing.assert_allclose(est.predict(d.X_train), H, rtol=1e-10, atol=1e-12)
    P_model = loss.value(Y - H) + 0.5 * lam * np.sum(W * (K_x @ W @ K_t))
    assert est.objective_ == pytest.approx(P_model, rel=1e-10)
    assert P_model >= P_star * (1 - 1e-9)
    bound = est.duality_gap_ * max(abs(est.objective_), 1e-300) * 1.01  # relative gap → absolute (|D| ≈ |P|)
    assert P_model - P_star <= bound + 1e-12
    if r < 40:
        assert P_model - P_star > 1e-6 * P_star  # the reduction costs something for small r...
        assert est.reduced_duality_gap_ < est.duality_gap_  # ...which the reduced gap does not see
