"""Tests of rffor.solvers.mm: full-batch majorize–minimize passes on the random-feature model (P_rf).

The reference optimum is a full-batch L-BFGS solve of J in float64 (``test_dsgd.lbfgs_optimum``), certified by
strong convexity; MM must reach it in a few passes, decreasing J at every accepted pass.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import die_after_checkpoint  # tests/ is on sys.path (rootdir conftest)
from test_dsgd import KT, KX, LAM, lbfgs_optimum  # tests/ is on sys.path (rootdir conftest)

from rffor import FunctionalRegressor
from rffor.chunked import ArrayData
from rffor.datasets import add_outliers, make_synthetic
from rffor.losses import EpsilonInsensitive, Huber, Square
from rffor.solvers.mm import SquareMetric, mm_step
from rffor.solvers.prediction import objective
from rffor.solvers.rff import fit_rff

pytestmark = pytest.mark.usefixtures("single_blas_thread")

ROBUST = [Huber(0.05, 1), Huber(0.1, 2), EpsilonInsensitive(0.05, 2), EpsilonInsensitive(0.05, math.inf)]
KW = dict(kernel_x=KX, kernel_theta=KT, lam=LAM, n_features_x=100, random_state=0, dtype="float64")


@pytest.fixture(scope="module")
def corrupted():
    """n = 1000 nonlinear curves (m = 40), 15% Type 2 outliers, 10% of the entries missing, 4 chunks."""
    d = make_synthetic(1000, 10, m=40, p_in=20, nonlinear=True, noise=0.1, random_state=0)
    Y = add_outliers(d.Y_train, 2, 0.15, random_state=1)[0]
    rng = np.random.default_rng(2)
    Y[rng.random(Y.shape) < 0.1] = np.nan
    Y[:, 0] = d.Y_train[:, 0]
    return d, ArrayData(d.X_train, Y, d.theta, chunk_rows=250)


@pytest.mark.parametrize("loss", ROBUST, ids=repr)
def test_mm_reaches_the_optimum_monotonically(corrupted, loss):
    """Every loss of paper 000 (Huber p = 1, 2; ε-insensitive p = 2, ∞) with outliers and missing entries: MM
    passes from the square-loss closed form reach the L-BFGS optimum of the masked objective within 1e-7 relative,
    in at most 30 passes (measured 4 to 27), every accepted pass lowering J."""
    d, data = corrupted
    res = fit_rff(data, loss=loss, tol=1e-9, **KW)
    assert res.method == "mm" and res.n_iter <= 30
    phi, Pt = res.input_features, res.output_features.transform(d.theta)
    _, J_opt = lbfgs_optimum(phi.transform(d.X_train), data.Y, Pt, loss, LAM, res.coef)
    J = objective(data, res.coef, phi, Pt, loss, LAM)
    assert -1e-9 < (J - J_opt) / J_opt < 1e-7, (J, J_opt)
    passes = [h for h in res.history if h["round"] >= 0]
    accepted = [h["objective"] for h in passes]
    assert all(b <= a for a, b in zip(accepted, accepted[1:], strict=False))
    # the warm start (square-loss closed form) is far from the robust optimum: MM did the work
    J_warm = objective(data, res.warm_coef, phi, Pt, loss, LAM)
    assert (J_warm - J_opt) / J_opt > 100 * (J - J_opt) / J_opt


def test_mm_that_runs_out_of_passes_says_so(corrupted):
    """A fit stopped by max_passes before convergence warns (ConvergenceWarning) and is measurably short of the
    optimum; the same fit given the passes it needs converges without a warning."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    d, data = corrupted
    loss = Huber(0.05, 1)
    with pytest.warns(ConvergenceWarning, match="max_passes=2"):
        short = fit_rff(data, loss=loss, tol=1e-9, max_passes=2, **KW)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        full = fit_rff(data, loss=loss, tol=1e-9, **KW)
    phi, Pt = full.input_features, full.output_features.transform(d.theta)
    J_short = objective(data, short.coef, phi, Pt, loss, LAM)
    J_full = objective(data, full.coef, phi, Pt, loss, LAM)
    assert short.n_iter == 2 and (J_short - J_full) / J_full > 1e-3


def test_mm_step_is_the_minimiser_of_the_bound():
    """``mm_step`` minimises the quadratic bound (MM): for the square loss the bound is J itself, so one step from
    anywhere is the closed form (the solution of C_X B C_Θ + λB = M), and the decrement is ``<∇J, H⁻¹∇J>``."""
    rng = np.random.default_rng(0)
    Phi, Pt = rng.standard_normal((200, 12)), rng.standard_normal((15, 5))
    Y = rng.standard_normal((200, 15))
    n, m, lam = 200, 15, 1e-2
    C_x, C_t, M = Phi.T @ Phi / n, Pt.T @ Pt / m, Phi.T @ Y @ Pt / (n * m)
    B_star = np.linalg.solve(np.kron(C_x, C_t) + lam * np.eye(60), M.ravel()).reshape(12, 5)
    metric = SquareMetric(C_x, C_t, lam)
    B = rng.standard_normal((12, 5))
    grad = -(Phi.T @ Square().grad(Y - Phi @ B @ Pt.T) @ Pt) / n + lam * B
    B1, dec = mm_step(metric, B, grad, 1.0)
    np.testing.assert_allclose(B1, B_star, rtol=1e-9, atol=1e-12)
    H = np.kron(C_x, C_t) + lam * np.eye(60)
    assert dec == pytest.approx(grad.ravel() @ np.linalg.solve(H, grad.ravel()), rel=1e-9)
    B2, _ = mm_step(metric, B, grad, 2.0)  # a stronger metric: half the step of the data part
    assert np.linalg.norm(B2 - B) < np.linalg.norm(B1 - B)


def test_mm_with_a_sampled_covariance_rejects_bad_steps_and_converges(corrupted):
    """With the warm start (and the metric) from 1 chunk of 4, the bound can fail: steps that would raise J are
    rejected (J never increases), the metric is doubled, and MM still reaches the optimum."""
    d, data = corrupted
    loss = Huber(0.1, 2)
    full = fit_rff(data, loss=loss, tol=1e-10, **KW)
    sampled = fit_rff(data, loss=loss, tol=1e-10, init_max_rows=250, max_passes=80, **KW)
    assert sampled.history[0]["c"] == 1.0
    passes = sampled.history
    accepted = [h["objective"] for h in passes]
    assert all(b <= a for a, b in zip(accepted, accepted[1:], strict=False))
    phi, Pt = full.input_features, full.output_features.transform(d.theta)
    J_full = objective(data, full.coef, phi, Pt, loss, LAM)
    J_sampled = objective(data, sampled.coef, phi, Pt, loss, LAM)
    assert abs(J_sampled - J_full) / J_full < 1e-6
    assert sampled.n_iter > full.n_iter  # the sampled metric is a weaker majorizer: more passes


def test_mm_checkpoint_resume_is_bit_identical(corrupted, tmp_path, monkeypatch):
    d, data = corrupted
    kw = dict(KW, loss=Huber(0.05, 1), n_partitions=2, tol=1e-10)
    full = fit_rff(data, **kw)
    die_after_checkpoint(2, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        fit_rff(data, **kw, checkpoint=tmp_path / "mm.ckpt")
    monkeypatch.undo()
    resumed = fit_rff(data, **kw, checkpoint=tmp_path / "mm.ckpt", resume=True)
    assert np.array_equal(resumed.coef, full.coef) and resumed.n_iter == full.n_iter
    assert [h["objective"] for h in resumed.history] == [h["objective"] for h in full.history]


def test_estimator_default_for_robust_losses_is_mm(corrupted):
    d, data = corrupted
    est = FunctionalRegressor(Huber(0.1, 2), solver="rff", kernel_x=KX, kernel_theta=KT, lam=LAM, n_features_x=100)
    est.set_params(random_state=0, tol=1e-9).fit(data.X, data.Y, theta=d.theta)
    ref = fit_rff((data.X, data.Y, d.theta), loss=Huber(0.1, 2), tol=1e-9, **KW)  # Nyström, float64: the default
    assert est.rff_method_ == "mm" and est.input_features_.kind == "nystrom"
    assert np.array_equal(est.coef_, ref.coef)
    # one objective per pass, the first at the warm start (the square-loss closed form), decreasing
    assert len(est.objective_history_) == est.n_iter_ and np.all(np.diff(est.objective_history_) <= 0)


class _WhitenedOnly:
    """A Nyström map without its kernel basis: the passes multiply its whitened features (the route before)."""

    def __init__(self, phi):
        self.phi = phi
        self.dtype, self.n_features = phi.dtype, phi.n_features

    def transform(self, X):
        return self.phi.transform(X)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_passes_on_the_kernel_basis_equal_passes_on_the_features(corrupted, dtype):
    """A gradient pass (one B and a stack of K), the held-out errors and the predictions computed on the Nyström
    kernel basis (``k(X, C)`` against ``Wᵀ B``: no whitening a row) equal those of the whitened features, with and
    without the feature cache: within 1e-10 relative in float64, 1e-4 in float32 (the whitening's rounding,
    cond(W) ≤ tol^{-1/2} = 1e3, either way)."""
    from rffor.solvers.maps import FitMaps
    from rffor.solvers.mm import curve_errors_task, grad_task
    from rffor.solvers.prediction import predict

    d, data = corrupted
    res = fit_rff(data, loss=Huber(0.1, 2), **{**KW, "dtype": dtype})
    phi = res.input_features
    assert hasattr(phi, "kernel_block")  # the MM route's default features are Nyström's
    Pt = np.asarray(res.output_features.transform(d.theta), dtype=dtype)
    rng = np.random.default_rng(3)
    B = res.coef
    Bs = np.stack([B, B + 1e-3 * rng.normal(size=B.shape)])
    ids = range(data.n_chunks)
    rtol = 1e-10 if dtype == "float64" else 1e-4
    before = FitMaps(_WhitenedOnly(phi), Pt)
    for maps in (FitMaps(phi, Pt), FitMaps(phi, Pt, "fit-key", 2**30)):
        for _ in range(2):  # the second pass reads the cache
            for coef in (B, Bs):
                a, b = (
                    grad_task(data, 0, ids, maps, coef, Huber(0.1, 2)),
                    grad_task(data, 0, ids, before, coef, Huber(0.1, 2)),
                )
                assert a.n == b.n == data.n and a.g.shape == b.g.shape
                assert np.abs(a.g - b.g).max() <= rtol * np.abs(b.g).max()
                np.testing.assert_allclose(a.loss, b.loss, rtol=rtol)
            np.testing.assert_allclose(
                curve_errors_task(data, 0, ids, maps, Bs), curve_errors_task(data, 0, ids, before, Bs), rtol=rtol * 10
            )
    Y_hat = predict(B, phi, Pt, d.X_test)
    Y_ref = predict(B, _WhitenedOnly(phi), Pt, d.X_test)
    assert np.abs(Y_hat - Y_ref).max() <= rtol * np.abs(Y_ref).max()
