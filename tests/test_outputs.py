"""Output spaces (rffor.outputs): what depends on the kind of output, behind one seam."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import Ridge

from rffor.chunked import ArrayData
from rffor.io import json_value
from rffor.kernels import Gaussian, Identity
from rffor.losses import Huber, Square
from rffor.outputs import OUTPUT_SPACES, CurveGrid, EmbeddingSpace, QuantileLevels
from rffor.solvers.rff import fit_rff

pytestmark = pytest.mark.usefixtures("single_blas_thread")
KW = dict(kernel_x=Gaussian(0.3), n_features_x=60, input_features="rff", dtype="float64", random_state=0)


def _data(n=300, D=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    Y = np.tanh(X @ rng.standard_normal((3, D))) + 0.05 * rng.standard_normal((n, D))
    return X, Y


def test_registry_and_specs():
    assert set(OUTPUT_SPACES) == {"curves", "levels", "embedding"}
    for space in (CurveGrid(np.linspace(0, 1, 5)), QuantileLevels([0.1, 0.5, 0.9]), EmbeddingSpace(4)):
        assert OUTPUT_SPACES[space.to_spec()["kind"]] is type(space) and json_value(space.to_spec())
    assert CurveGrid(np.linspace(0, 2, 5)).missing == "interpolate" and EmbeddingSpace(3).missing == "mask"


def test_embedding_closed_form_is_ridge_on_the_features_in_the_units_of_mathmd_section_8():
    """Square loss, identity output operator: J = (1/n) Σ ½ (1/D) ‖ψ_i − Bᵀφ_i‖² + (λ/2)‖B‖², so B is ridge
    regression on the features with α = n D λ."""
    X, Y = _data()
    n, D = Y.shape
    lam = 1e-3
    res = fit_rff(ArrayData(X, Y), outputs=EmbeddingSpace(D), lam=lam, **KW)
    Phi = res.input_features.transform(X)
    ridge = Ridge(alpha=n * D * lam, fit_intercept=False, solver="svd").fit(Phi, Y)
    np.testing.assert_allclose(res.coef, ridge.coef_.T, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(res.predict(X), ridge.predict(Phi), rtol=1e-8, atol=1e-10)
    assert isinstance(res.kernel_theta, Identity) and res.method == "closed_form"


def test_masked_entries_are_left_out_of_the_loss():
    """NaN entries of an embedding are masked: at the fit, the gradient of the masked objective (each row averaged
    over its own observed entries) vanishes, whatever the closed form's fill of the warm start."""
    X, Y = _data(seed=1)
    rng = np.random.default_rng(2)
    Y[rng.random(Y.shape) < 0.2] = np.nan
    Y[np.isnan(Y).all(axis=1), 0] = 0.0
    n, D = Y.shape
    lam = 1e-3
    res = fit_rff(ArrayData(X, Y), outputs=EmbeddingSpace(D), lam=lam, tol=1e-14, max_passes=2000, **KW)
    assert res.method == "mm"
    Phi = res.input_features.transform(X)
    R = Y - Phi @ res.coef
    mask = ~np.isnan(Y)
    G = np.where(mask, R, 0.0) / mask.sum(axis=1, keepdims=True)
    grad = -Phi.T @ G / n + lam * res.coef
    assert np.abs(grad).max() < 1e-7 * np.abs(Phi.T @ np.where(mask, Y, 0.0) / n).max()


def test_embedding_refuses_what_it_cannot_mean():
    X, Y = _data()
    with pytest.raises(ValueError, match="kernel_theta must be None or rffor.kernels.Identity"):
        fit_rff(ArrayData(X, Y), outputs=EmbeddingSpace(Y.shape[1]), kernel_theta=Gaussian(1.0), lam=1e-3, **KW)
    with pytest.raises(ValueError, match="no spectral law"):
        Identity().sample_frequencies(4, 1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="shape"):
        EmbeddingSpace(3).check_outputs(np.zeros((4, 2)), n_samples=4)
    with pytest.raises(ValueError, match="dim must be a positive integer"):
        EmbeddingSpace(0)


def test_robust_loss_on_an_embedding_runs_mm():
    X, Y = _data()
    res = fit_rff(ArrayData(X, Y), outputs=EmbeddingSpace(Y.shape[1]), loss=Huber(0.05, 2), lam=1e-3, **KW)
    sq = fit_rff(ArrayData(X, Y), outputs=EmbeddingSpace(Y.shape[1]), loss=Square(), lam=1e-3, **KW)
    assert res.method == "mm" and not np.allclose(res.coef, sq.coef)
