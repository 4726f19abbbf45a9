"""The ε-SVR loss of seed 002 (P3) (rffor.losses.EpsilonSVR, MATH.md §8): primal value, gradient, dual penalty and
its prox in both coordinates, against references written here (the definition ``(‖f‖ − ε)₊``, the infimal
convolution ``‖·‖ □ ι{‖·‖ ≤ ε}``, finite differences, the prox's objective minimised numerically), and an exact fit
of curves whose certificate and optimality conditions are recomputed."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar

from rffor import FunctionalRegressor
from rffor.kernels import Gaussian
from rffor.losses import EpsilonSVR, loss_from_spec

pytestmark = pytest.mark.usefixtures("single_blas_thread")


@pytest.mark.parametrize("eps", [0.0, 0.2, 1.5])
def test_value_is_the_clipped_norm_and_the_infimal_convolution(eps, rng):
    R = rng.standard_normal((6, 9)) * rng.uniform(0.1, 2, (6, 1))
    vals = EpsilonSVR(eps).curve_values(R)
    nrm = np.sqrt(np.mean(R**2, axis=1))  # the μ_m norm
    assert np.allclose(vals, np.maximum(nrm - eps, 0.0))
    for v, n_ in zip(vals, nrm, strict=True):  # min_z ‖f − z‖ + ι{‖z‖ ≤ ε}: z = t f/‖f‖, t ∈ [0, ε]
        obj, hi = (lambda t, n_=n_: abs(n_ - t)), min(eps, n_)
        ref = min(minimize_scalar(obj, bounds=(0, hi), method="bounded").fun, obj(0.0), obj(hi)) if hi > 0 else n_
        assert v == pytest.approx(ref if eps > 0 else n_, abs=1e-6)


def test_missing_entries_are_ignored(rng):
    R = rng.standard_normal((4, 6))
    R[0, :3] = np.nan
    v = EpsilonSVR(0.3).curve_values(R)
    assert v[0] == pytest.approx(max(math.sqrt(np.mean(R[0, 3:] ** 2)) - 0.3, 0.0))


@pytest.mark.parametrize("eps", [0.1, 0.9])
def test_gradient_matches_finite_differences(eps, rng):
    R = rng.standard_normal((5, 7))
    loss = EpsilonSVR(eps)
    G = loss.grad(R)
    h = 1e-6
    for i in range(5):
        if abs(math.sqrt(np.mean(R[i] ** 2)) - eps) < 1e-3:
            continue  # the kink
        for j in range(7):
            E = np.zeros_like(R)
            E[i, j] = h
            fd = (loss.curve_values(R + E)[i] - loss.curve_values(R - E)[i]) / (2 * h)
            assert G[i, j] == pytest.approx(fd, abs=1e-6)
    # outside the ε-ball the gradient is r/(m ‖r‖): unit μ_m-dual norm; inside it is 0
    inside = np.sqrt(np.mean(R**2, axis=1)) < eps
    assert np.all(G[inside] == 0)
    assert np.allclose(np.sqrt(np.sum(G[~inside] ** 2, axis=1) * 7), 1.0)


def _prox_ref(u, step, eps, radius, weight):
    """argmin_a weight·‖a‖ + ι{‖a‖ ≤ radius} + ‖a − u‖²/(2 step), by a numerical solver."""
    cons = [{"type": "ineq", "fun": lambda a: radius**2 - a @ a}]
    res = minimize(
        lambda a: step * weight * np.sqrt(a @ a + 1e-30) + 0.5 * np.sum((a - u) ** 2), np.zeros_like(u),
        constraints=cons, method="SLSQP", options={"ftol": 1e-14, "maxiter": 500},
    )  # fmt: skip
    return res.x


@pytest.mark.parametrize("step", [0.05, 0.7, 3.0])
def test_prox_minimises_its_objective_in_both_coordinates(step, rng):
    """(D_s): ψ(a) = ε√m‖a‖ + ι{‖a‖ ≤ √m}; (D_e): ψ_e(a) = ε‖a‖ + ι{‖a‖ ≤ 1}."""
    eps = 0.4
    U = rng.standard_normal((6, 4)) * np.array([[0.1], [0.5], [1.0], [2.0], [4.0], [0.02]])
    loss = EpsilonSVR(eps)
    m = U.shape[1]
    P_s, P_e = loss.prox_dual(U, step), loss.prox_dual_eigen(U, step)
    for u, ps, pe in zip(U, P_s, P_e, strict=True):
        assert np.allclose(ps, _prox_ref(u, step, eps, math.sqrt(m), eps * math.sqrt(m)), atol=1e-5)
        assert np.allclose(pe, _prox_ref(u, step, eps, 1.0, eps), atol=1e-5)
    assert np.isfinite(loss.dual_penalty(P_s)) and np.isfinite(loss.dual_penalty_eigen(P_e))
    assert loss.dual_penalty_eigen(2 * np.ones((1, 4))) == math.inf
    assert loss.dual_penalty_eigen(np.array([[0.6, 0.0]])) == pytest.approx(0.4 * 0.6)
    # a step of 0 is the projection on the domain
    assert np.allclose(np.linalg.norm(loss.prox_dual_eigen(U, 0.0), axis=1), np.minimum(np.linalg.norm(U, axis=1), 1))


def test_flags_spec_and_parameter():
    loss = EpsilonSVR(0.25)
    assert loss.dual_quadratic == 0 and loss.supports_eigen and not loss.integral
    assert not EpsilonSVR(0.0).is_square  # the norm loss, not the square loss
    assert loss.param_name == "epsilon" and loss.with_param(0.5) == EpsilonSVR(0.5)
    assert loss_from_spec(loss.to_spec()) == loss
    with pytest.raises(ValueError, match="epsilon"):
        EpsilonSVR(-0.1)


def test_exact_curve_fit_is_certified_and_sparse(tiny_curves):
    """On curves (splines dual (D_s) with q = 0): the duality gap recomputed from the definitions, and the
    optimality conditions ‖α_i‖_μ = 1 outside the tube, 0 inside."""
    d = tiny_curves
    lam, eps = 1e-2, 0.3  # 6 curves outside the tube, 2 inside, the others on its boundary
    est = FunctionalRegressor(EpsilonSVR(eps), lam=lam, kernel_x=Gaussian(0.1), kernel_theta=Gaussian(50.0),
                              solver="admm", tol=1e-10, max_iter=20000).fit(d.X_train, d.Y_train)  # fmt: skip
    n, m = d.Y_train.shape
    K = Gaussian(0.1).gram(d.X_train)
    Kt = Gaussian(50.0).gram(np.linspace(0, 1, m))
    A = est.dual_coef_
    c = 1.0 / (lam * n * m)
    H = c * K @ A @ Kt
    R = d.Y_train - H
    norms = np.sqrt(np.mean(R**2, axis=1))
    primal = np.mean(np.maximum(norms - eps, 0)) + 0.5 * lam * c**2 * np.trace(K @ A @ Kt @ A.T)
    anorm = np.linalg.norm(A, axis=1) / math.sqrt(m)  # ‖α_i‖_μ
    assert anorm.max() <= 1 + 1e-9
    dual = -(
        -np.sum(A * d.Y_train)
        + 0.5 * c * np.trace(K @ A @ Kt @ A.T)
        + eps * math.sqrt(m) * np.linalg.norm(A, axis=1).sum()
    ) / (n * m)
    assert primal == pytest.approx(est.objective_, rel=1e-9)
    assert (primal - dual) / max(abs(primal), abs(dual)) == pytest.approx(est.duality_gap_, abs=1e-12)
    assert est.duality_gap_ <= 1e-10
    out, inside = norms > eps + 1e-4, norms < eps - 1e-4
    assert out.any() and inside.any()
    assert np.allclose(anorm[out], 1.0, atol=1e-4)
    assert np.allclose(anorm[inside], 0.0, atol=1e-4)
