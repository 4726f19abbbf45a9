"""rffor.plot: figures are drawn from fitted models and data, without pyplot's global state."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from rffor import FunctionalRegressor  # noqa: E402
from rffor.datasets import make_synthetic  # noqa: E402
from rffor.losses import EpsilonInsensitive, Huber, Square  # noqa: E402
from rffor.plot import compute_path, dual_sparsity, plot_curves, plot_history, plot_path  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return make_synthetic(40, 10, m=15, p_in=8, nonlinear=True, noise=0.05, random_state=0)


@pytest.fixture(scope="module")
def models(data):
    return {
        "square": FunctionalRegressor(Square(), lam=1e-3).fit(data.X_train, data.Y_train),
        "huber": FunctionalRegressor(Huber(0.2, p=2), lam=1e-3).fit(data.X_train, data.Y_train),
    }


def _is_png(path) -> bool:
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_curves(tmp_path, data, models):
    preds = {k: m.predict(data.X_test) for k, m in models.items()}
    fig = plot_curves(data.theta, data.Y_test, preds, n_curves=3, title="t", Y_observed=data.Y_test + 0.1)
    visible = [a for a in fig.axes if a.get_visible()]
    assert len(visible) == 3
    assert len(visible[0].lines) == 1 + 1 + 2  # observed, true, two models
    fig.savefig(tmp_path / "c.png")
    assert _is_png(tmp_path / "c.png")


def test_plot_curves_off_grid_and_into_axes(data, models):
    from matplotlib.figure import Figure

    fig = Figure()
    axes = fig.subplots(1, 2)
    theta = np.linspace(0, 1, 50)
    out = plot_curves(data.theta, data.Y_test, models["huber"].predict(data.X_test, theta=theta),
                      theta_pred=theta, indices=[0, 5], ax=axes, panel_titles=["a", "b"])  # fmt: skip
    assert out is fig and axes[1].get_title() == "b"
    assert len(axes[0].lines[-1].get_xdata()) == 50


def test_plot_curves_checks_shapes(data):
    with pytest.raises(ValueError, match="prediction 'predicted' has shape"):
        plot_curves(data.theta, data.Y_test, data.Y_test[:, :3])
    with pytest.raises(ValueError, match="indices"):
        plot_curves(data.theta, data.Y_test, data.Y_test, indices=[99])
    with pytest.raises(ValueError, match="panel titles"):
        plot_curves(data.theta, data.Y_test, data.Y_test, indices=[0, 1], panel_titles=["x"])


def test_plot_history(tmp_path, models):
    fig = plot_history(models)
    assert len(fig.axes[0].lines) == 2
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["square", "huber"]
    fig = plot_history(models["huber"])
    assert len(fig.axes[0].lines) == 1
    fig = plot_history([np.array([3.0, 2.0, 1.0]), [5.0, 4.0]], labels=["a", "b"], log=False)
    assert fig.axes[0].get_yscale() == "linear"
    fig.savefig(tmp_path / "h.png")
    assert _is_png(tmp_path / "h.png")
    with pytest.raises(ValueError, match="labels"):
        plot_history([[1.0], [2.0]], labels=["only one"])


def test_dual_sparsity(data):
    """The sparsity is what complementary slackness says it is: a curve (ℓ_ε^2) or a value (ℓ_ε^∞) has a zero dual
    coefficient when its training residual is strictly inside the ε-tube (RMS over the grid, or absolute value)
    and a non-zero one when strictly outside: the share inside <= sparsity <= 1 - the share outside."""

    def sizes(R, p):
        return np.sqrt(np.mean(R**2, axis=1)) if p == 2 else np.abs(R)

    R0 = data.Y_train - FunctionalRegressor(Square(), lam=1e-2).fit(data.X_train, data.Y_train).predict(data.X_train)
    for p in (2, np.inf):
        eps = float(np.median(sizes(R0, p)))  # a tube that leaves residuals on both sides
        est = FunctionalRegressor(EpsilonInsensitive(eps, p=p), lam=1e-2, tol=1e-10).fit(data.X_train, data.Y_train)
        size = sizes(data.Y_train - est.predict(data.X_train), p)
        inside, outside = np.mean(size < eps * (1 - 1e-4)), np.mean(size > eps * (1 + 1e-4))
        sparsity = dual_sparsity(est)
        assert inside <= sparsity <= 1 - outside + 1e-12, (p, inside, sparsity, outside)
        assert 0.05 < inside and 0.05 < outside  # both sides of the tube are populated: the bound bites


def test_compute_and_plot_path(tmp_path, data):
    est = FunctionalRegressor(EpsilonInsensitive(0.1, p=2), lam=1e-2, tol=1e-4)
    path = compute_path(est, data.X_train, data.Y_train, [0.01, 0.1, 0.5], X_test=data.X_test, Y_test=data.Y_test)
    assert path["param"] == "epsilon" and path["mse"].shape == (3,) and path["sparsity"].shape == (3,)
    assert np.all(np.diff(path["sparsity"]) >= 0)  # a wider tube leaves more curves out of the model
    fig = plot_path(path, None)
    assert len(fig.axes) == 2 and fig.axes[0].get_xscale() == "log"
    fig.savefig(tmp_path / "p.png")
    assert _is_png(tmp_path / "p.png")
    huber = compute_path(FunctionalRegressor(Huber(1.0, p=1), lam=1e-2, tol=1e-4), data.X_train, data.Y_train,
                         [0.1, 1.0])  # fmt: skip
    assert huber["param"] == "kappa"
    fig = plot_path(huber["values"], huber["mse"], param="kappa")
    assert fig.axes[0].get_xlabel() == "κ"
    with pytest.raises(ValueError, match="param must be"):
        compute_path(FunctionalRegressor(Square()), data.X_train, data.Y_train, [1.0])
