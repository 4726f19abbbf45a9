"""Oracle test: the square loss with an identity output kernel is scikit-learn's KernelRidge on the grid values.

With K_Θ = I the closed form of MATH.md §3.1 gives predictions ``K_X(X_new, X) (K_X + λnm I)^{-1} Y``, i.e.
multi-output kernel ridge regression on the discretised outputs with ``alpha = λ n m``. A Gaussian output kernel
with a huge γ is exactly the identity on a grid (``exp(-γ Δθ²)`` underflows to 0 for γ Δθ² > 745).
"""

import numpy as np
import pytest
from sklearn.kernel_ridge import KernelRidge

from rffor import FunctionalRegressor
from rffor.kernels import Gaussian
from rffor.losses import Square


def _data(n=60, n_new=25, d=5, m=30, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X_new = rng.normal(size=(n_new, d))
    theta = np.linspace(0.0, 1.0, m)
    W = rng.normal(size=(d, 4))
    basis = np.stack([np.sin((k + 1) * np.pi * theta) for k in range(4)])
    Y = np.tanh(X @ W) @ basis + 0.1 * rng.normal(size=(n, m))
    return X, X_new, Y, theta


IDENTITY_GAMMA = 1e9  # exp(-1e9 / (m - 1)^2) == 0 in float64 for the grids below


def test_identity_output_kernel_is_identity_on_the_grid():
    theta = np.linspace(0.0, 1.0, 30)
    np.testing.assert_array_equal(Gaussian(IDENTITY_GAMMA).gram(theta), np.eye(30))


@pytest.mark.parametrize("solver", ["admm", "apgd"])
@pytest.mark.parametrize("lam", [1e-5, 1e-3, 1e-1])
def test_square_loss_with_identity_output_kernel_equals_kernel_ridge(solver, lam):
    X, X_new, Y, theta = _data()
    n, m = Y.shape
    gamma_x = 0.2
    est = FunctionalRegressor(
        Square(),
        kernel_x=Gaussian(gamma_x),
        kernel_theta=Gaussian(IDENTITY_GAMMA),
        lam=lam,
        solver=solver,
        tol=1e-12,
    ).fit(X, Y, theta)
    krr = KernelRidge(alpha=lam * n * m, kernel="rbf", gamma=gamma_x).fit(X, Y)
    expected = krr.predict(X_new)
    got = est.predict(X_new)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-10 * np.abs(expected).max())
    # training predictions too (where the regularisation shows most)
    np.testing.assert_allclose(est.predict(X), krr.predict(X), rtol=1e-9, atol=1e-10 * np.abs(Y).max())


@pytest.mark.parametrize("solver", ["admm", "apgd"])
def test_kernel_ridge_dual_coef_matches(solver):
    """Our dual matrix A is KernelRidge's dual_coef_ up to the scale c = 1/(λnm) of MATH.md (D_s)."""
    X, _, Y, theta = _data(n=40, m=12, seed=1)
    n, m = Y.shape
    lam, gamma_x = 1e-3, 0.3
    est = FunctionalRegressor(
        Square(), kernel_x=Gaussian(gamma_x), kernel_theta=Gaussian(IDENTITY_GAMMA), lam=lam, solver=solver
    ).fit(X, Y, theta)
    krr = KernelRidge(alpha=lam * n * m, kernel="rbf", gamma=gamma_x).fit(X, Y)
    np.testing.assert_allclose(est.dual_coef_ / (lam * n * m), krr.dual_coef_, rtol=1e-8, atol=1e-12)


def test_robust_loss_with_inactive_threshold_equals_kernel_ridge():
    """A Huber loss whose κ exceeds every residual is the square loss, hence KernelRidge too (through ADMM)."""
    from rffor.losses import Huber

    X, X_new, Y, theta = _data(seed=2)
    n, m = Y.shape
    lam, gamma_x = 1e-3, 0.2
    est = FunctionalRegressor(
        Huber(kappa=1e6, p=1),
        kernel_x=Gaussian(gamma_x),
        kernel_theta=Gaussian(IDENTITY_GAMMA),
        lam=lam,
        solver="admm",
        tol=1e-12,
    ).fit(X, Y, theta)
    krr = KernelRidge(alpha=lam * n * m, kernel="rbf", gamma=gamma_x).fit(X, Y)
    np.testing.assert_allclose(est.predict(X_new), krr.predict(X_new), rtol=1e-9, atol=1e-10)
