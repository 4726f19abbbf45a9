"""Tests of the Welsch loss (:mod:`rffor.welsch`): the properties its MM passes rely on, that the exact path refuses
it, and what it is for, a fit that outliers independent of x do not bias, where every convex loss is biased.

The gradient against finite differences, NaN handling and the spec round trip are in ``tests/test_losses.py``
(every loss class of the library is tested there).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rffor import FunctionalRegressor, Welsch
from rffor.kernels import Gaussian
from rffor.losses import Huber, Square
from rffor.solvers.dual import DualProblem

pytestmark = pytest.mark.usefixtures("single_blas_thread")


def _mu_norm(R):
    return np.sqrt(np.mean(R**2, axis=-1))


@pytest.mark.parametrize("kappa", [0.2, 1.0, 5.0])
def test_the_gradient_is_1_lipschitz_in_the_mu_norm(kappa):
    """The square loss's Hessian majorises the loss (the MM passes' bound, module docstring): in the μ_m norm the
    gradient ``m ∇L`` moves by at most what r moves, over pairs across the quadratic region, the inflection
    (‖r‖ = κ/√2) and the flat tail; 1.1 L would fail."""
    rng = np.random.default_rng(0)
    m, loss = 7, Welsch(kappa)
    R = rng.standard_normal((4000, m)) * np.geomspace(0.01, 4, 4000)[:, None] * kappa
    D = rng.standard_normal((4000, m)) * 0.05 * kappa
    G, G2 = m * loss.grad(R), m * loss.grad(R + D)
    ratio = _mu_norm(G2 - G) / _mu_norm(D)
    assert ratio.max() <= 1.0 + 1e-9
    assert ratio.max() > 0.95  # near r = 0 the bound is tight: the check can fail
    assert (1.1 * ratio).max() > 1.0  # 1.1 L breaks the bound the check enforces


@pytest.mark.parametrize("kappa", [0.3, 2.0])
def test_irls_weights_give_a_majoriser_touching_at_the_point(kappa):
    """``L(r) ≤ L(r₀) + ½ w(r₀) (‖r‖² − ‖r₀‖²)`` for every r (the tangent of a concave function of ‖r‖²), with
    equality at r = r₀: a reweighted closed form never increases the objective."""
    rng = np.random.default_rng(1)
    loss = Welsch(kappa)
    R0 = rng.standard_normal((500, 9)) * np.geomspace(0.01, 5, 500)[:, None] * kappa
    R = rng.standard_normal((500, 9)) * np.geomspace(5, 0.01, 500)[:, None] * kappa
    w = loss.irls_weights(R0)
    bound = loss.curve_values(R0) + 0.5 * w * (_mu_norm(R) ** 2 - _mu_norm(R0) ** 2)
    assert np.all(loss.curve_values(R) <= bound + 1e-12 * kappa**2)
    np.testing.assert_allclose(w, np.exp(-(_mu_norm(R0) ** 2) / kappa**2), rtol=1e-12)
    # at r₀ the weighted square loss's gradient is the loss's: the bound touches
    np.testing.assert_allclose(loss.grad(R0), w[:, None] * Square().grad(R0), rtol=1e-12, atol=1e-300)


def test_redescending_bounded_and_the_square_loss_at_infinite_kappa():
    """Far curves cost κ²/2 and pull with a vanishing force; small residuals cost ½‖r‖² to second order;
    κ = ∞ is the square loss (no IRLS weights, ``is_square``)."""
    loss = Welsch(0.5)
    far = np.full((1, 4), 50.0)
    assert loss.curve_values(far)[0] == pytest.approx(0.125, rel=1e-12)
    assert np.abs(loss.grad(far)).max() == 0.0  # e^{−10⁴}
    small = np.full((1, 4), 1e-4)
    assert loss.curve_values(small)[0] == pytest.approx(0.5e-8, rel=1e-7)
    inf = Welsch(math.inf)
    R = np.random.default_rng(2).standard_normal((5, 3))
    assert inf.is_square and not inf.has_irls_weights and inf.irls_weights(R) is None
    np.testing.assert_allclose(inf.curve_values(R), Square().curve_values(R), rtol=1e-15)
    np.testing.assert_allclose(inf.grad(R), Square().grad(R), rtol=1e-15)


@pytest.mark.parametrize("kappa", [0.0, -1.0, float("nan"), "0.1", True])
def test_invalid_kappa_is_refused_naming_it(kappa):
    with pytest.raises((ValueError, TypeError), match="kappa"):
        Welsch(kappa)


def test_the_exact_path_refuses_it_and_auto_takes_the_random_features():
    """No dual for a non-convex loss: the exact solvers and (D_s) refuse it with the argument named; solver="auto"
    fits it with random features even at n = 40."""
    rng = np.random.default_rng(3)
    X, Y = rng.standard_normal((40, 2)), rng.standard_normal((40, 5))
    for solver in ("admm", "apgd"):
        with pytest.raises(ValueError, match=rf"solver='{solver}'.*Welsch.*solver='rff'"):
            FunctionalRegressor(Welsch(0.5), solver=solver, lam=1e-3).fit(X, Y)
    with pytest.raises(ValueError, match="not convex"):
        DualProblem.splines(np.eye(3), np.eye(2), np.zeros((3, 2)), 1e-3, Welsch(0.5))
    est = FunctionalRegressor(Welsch(0.5), lam=1e-3, n_features_x=20, random_state=0).fit(X, Y)
    assert est.solver_ == "rff" and np.isfinite(est.predict(X)).all()
    assert Welsch(0.5).has_dual is False and Huber(0.5).has_dual is True


# --------------------------------------------------------------------------------------- what it is for
def _location_problem(seed=0, n=6000, sd=0.3):
    """Five inputs, 1,200 curves each: noise of standard deviation ``sd`` on every point, and 10% of the curves
    replaced by random cosines with coefficients ~ U[−2, 2] that do not depend on x (centred at 0, as Type 2
    outliers). Returns X, Y, the outlier mask, the five inputs and their true curves."""
    rng = np.random.default_rng(seed)
    theta, xs = np.linspace(0, 1, 20), np.linspace(0, 2, 5)
    X = np.repeat(xs, n // 5)[:, None]
    Y = np.sin(2 * np.pi * theta + X) + sd * rng.standard_normal((n, theta.size))
    out = rng.random(n) < 0.1
    k = rng.integers(1, 4, size=n)
    Y[out] = rng.uniform(-2, 2, size=(out.sum(), 1)) * np.cos(2 * np.pi * k[out, None] * theta)
    return X, Y, out, xs[:, None], np.sin(2 * np.pi * theta + xs[:, None])


def _error(loss, X, Y, xs, F, lam=1e-7, **kw):
    est = FunctionalRegressor(loss, kernel_x=Gaussian(1.0), kernel_theta=Gaussian(100.0), solver="rff", lam=lam,
                              input_features="rff", n_features_x=200, random_state=0, **kw).fit(X, Y)  # fmt: skip
    return float(np.mean((est.predict(xs) - F) ** 2)), est


def test_outliers_independent_of_x_do_not_bias_it_where_they_bias_huber():
    """With 1,200 curves per input the error is the loss's bias: the square loss on the clean curves alone is the
    reference (its error is its variance). Welsch with κ at the noise level on the corrupted curves matches it within
    1.3x, while the best of three Huber κ is more than 4x worse (the outliers, centred at 0, pull every h(x) toward
    0: the contamination floor)."""
    X, Y, out, xs, F = _location_problem()
    clean, _ = _error(Square(), X[~out], Y[~out], xs, F)
    welsch, est = _error(Welsch(0.3), X, Y, xs, F)
    J = np.asarray(est.objective_history_)  # MM passes on a non-convex J still never increase it
    assert len(J) > 2 and np.all(np.diff(J) <= 1e-12 * abs(J[0]))
    huber = min(_error(Huber(kappa, 2), X, Y, xs, F)[0] for kappa in (0.1, 0.3, 0.6))
    assert welsch <= 1.3 * clean, (welsch, clean)
    assert huber >= 4 * welsch, (huber, welsch)


def test_the_kappa_walk_starts_at_the_residuals_scale_not_below():
    """From a κ far below the noise (0.01, where every weight e^{−‖r‖²/κ²} vanishes and MM passes stall at their
    start) the held-out selection starts at the square fit's residual norm
    and never goes below it; the model it selects is as good as the clean-data reference within 2x."""
    X, Y, out, xs, F = _location_problem()
    clean, _ = _error(Square(), X[~out], Y[~out], xs, F)
    err, est = _error(Welsch(0.01), X, Y, xs, F, lam="auto", loss_params="auto")
    scale = math.sqrt(min(est.lam_path_["closed_forms"]["scores"]))  # the square fit's held-out midmean curve MSE
    assert est.loss_.kappa >= scale * (1 - 1e-12) and 0.25 < scale < 0.4  # the noise's μ_m norm is about 0.3
    assert all(p >= scale * (1 - 1e-12) for p in est.lam_path_["params"])
    assert err <= 2 * clean, (err, clean)


def test_a_saved_model_loads_with_its_loss(tmp_path):
    """The model file names the loss by its spec ("welsch", no pickle): the loaded model predicts the same."""
    from rffor import load

    X, Y, _, xs, _ = _location_problem(n=500)
    _, est = _error(Welsch(0.3), X, Y, xs, np.zeros((5, 20)))
    loaded = load(est.save(tmp_path / "welsch.rffor"))
    assert loaded.loss_ == Welsch(0.3)
    np.testing.assert_array_equal(loaded.predict(xs), est.predict(xs))
