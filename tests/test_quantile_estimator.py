"""QuantileFunctionRegressor (and its CV, metrics, plots, command line): calibration and pinball loss against the
true quantiles of Sangnier et al.'s heteroscedastic sine, the non-crossing penalty and the rearrangement, model
files, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.metrics import mean_pinball_loss
from sklearn.model_selection import KFold

from rffor import QuantileFunctionRegressor, load
from rffor.kernels import Gaussian, Laplacian
from rffor.losses import Pinball, Square
from rffor.metrics import calibration_error, crossing_loss, pinball_loss, quantile_coverage
from rffor.model_selection import QuantileFunctionRegressorCV

pytestmark = pytest.mark.usefixtures("single_blas_thread")

TAU = np.array([0.1, 0.3, 0.5, 0.7, 0.9])
KW = dict(kernel_x=Gaussian(10.0), kernel_theta=Gaussian(10.0))


def sine(n, seed):
    """x ~ U[0, 1.5], y = −sin(2πx)(1 + sin(2πx/3)) + N(0, σ(x)²), σ from 1.2 at x = 0 to 0.2 at x = 1.5, with the
    true quantiles at TAU."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1.5, n)
    f = -np.sin(2 * np.pi * x) * (1 + np.sin(2 * np.pi * x / 3))
    sd = 0.2 + (1.5 - x) / 1.5
    return x[:, None], f + sd * rng.standard_normal(n), f[:, None] + sd[:, None] * norm.ppf(TAU)


@pytest.fixture(scope="module")
def fitted():
    from threadpoolctl import threadpool_limits

    X, y, _ = sine(400, 0)
    with threadpool_limits(limits=1, user_api="blas"):  # module scope: outside the single_blas_thread fixture
        return QuantileFunctionRegressor(levels=20, lam=3e-4, **KW).fit(X, y)


def test_quantiles_are_calibrated_and_near_the_oracle_pinball(fitted):
    X, y, Q_true = sine(4000, 1)
    Q = fitted.predict(X, levels=TAU)
    assert fitted.duality_gap_ <= 1e-5
    # held-out coverage of every level within 0.04 of τ (sampling noise at n = 4000: ~0.008)
    assert calibration_error(y, Q, TAU) < 0.04
    # the pinball loss (Table 5.1's scale: sum over the 5 levels) within 3% of the true quantiles' own
    assert pinball_loss(y, Q, TAU) < 1.03 * pinball_loss(y, Q_true, TAU)
    # and far below the marginal quantiles' (an x-blind model)
    assert pinball_loss(y, Q, TAU) < 0.8 * pinball_loss(y, np.tile(np.quantile(y, TAU), (len(y), 1)), TAU)


def test_predict_levels_semantics_and_rearrangement(fitted):
    X = np.linspace(0, 1.5, 30)[:, None]
    med = fitted.predict(X)
    assert med.shape == (30,)
    np.testing.assert_array_equal(med, fitted.predict(X, 0.5))
    np.testing.assert_allclose(med, fitted.predict(X, [0.2, 0.5])[:, 1], rtol=0, atol=0)
    # on the rearrangement's own grid, the rearranged quantile function is the sorted model: same values, monotone
    fine = fitted._rearrangement_grid()
    np.testing.assert_array_equal(fitted.predict(X, fine), np.sort(fitted.predict_raw(X, fine), axis=1))
    assert crossing_loss(fitted.predict(X, fine)) == 0.0
    # where the model is monotone in τ, rearranging changes nothing at the requested levels
    raw = fitted.predict_raw(X, TAU)
    mono = np.all(np.diff(fitted.predict_raw(X, fine), axis=1) >= 0, axis=1)
    assert mono.sum() >= 10
    np.testing.assert_allclose(fitted.predict(X, TAU)[mono], raw[mono], rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="levels"):
        fitted.predict(X, [0.5, 0.2])
    with pytest.raises(ValueError, match="levels"):
        fitted.predict(X, 1.5)


def test_noncrossing_penalty_removes_crossings_of_the_model():
    """Thesis 003 Figure 5.2's setting (n = 40, 20 anchors): crossings of 100 predicted quantile curves (within the
    training levels, on held-out inputs) drop by an order of magnitude with λ_nc = 10, with a pinball loss no worse
    than 2% on held-out data."""
    X, y, _ = sine(40, 2)
    Xt, yt, _ = sine(2000, 3)
    levels100 = np.linspace(0.03, 0.97, 100)
    res = {}
    for lam_nc in (0.0, 10.0):
        est = QuantileFunctionRegressor(levels=20, lam=1e-3, noncrossing=lam_nc, rearrange=False, **KW).fit(X, y)
        res[lam_nc] = (crossing_loss(est.predict(Xt, levels100)), pinball_loss(yt, est.predict(Xt, TAU), TAU))
    assert res[0.0][0] > 1e-3
    assert res[10.0][0] < 0.1 * res[0.0][0]
    assert res[10.0][1] < 1.02 * res[0.0][1]


def test_joint_quantile_regression_on_user_levels():
    """Seed 001's joint quantile regression at three levels: calibrated within 0.06 (estimation error at n = 800;
    sampling noise at n = 3000 is 0.01) and within 5% of the true quantiles' pinball loss."""
    X, y, _ = sine(800, 4)
    levels = [0.1, 0.5, 0.9]
    est = QuantileFunctionRegressor(levels=levels, lam=3e-4, rearrange=False, **KW).fit(X, y)
    np.testing.assert_array_equal(est.levels_, levels)
    Xt, yt, Q_true = sine(3000, 5)
    Q = est.predict(Xt, levels)
    np.testing.assert_allclose(quantile_coverage(yt, Q), levels, atol=0.06)
    assert pinball_loss(yt, Q, levels) < 1.05 * pinball_loss(yt, Q_true[:, [0, 2, 4]], levels)


@pytest.mark.parametrize("noncrossing", [0.0, 5.0], ids=["plain", "noncrossing"])
def test_save_load_round_trip(tmp_path, noncrossing):
    X, y, _ = sine(60, 6)
    est = QuantileFunctionRegressor(Pinball(epsilon=0.05), levels=8, noncrossing=noncrossing, **KW).fit(X, y)
    path = est.save(tmp_path / "q.rffor")
    back = load(path)
    assert isinstance(back, QuantileFunctionRegressor)
    Xt = np.linspace(0, 1.5, 17)[:, None]
    for levels in (None, TAU, 0.05):
        np.testing.assert_array_equal(back.predict(Xt, levels), est.predict(Xt, levels))
    assert back.loss_ == Pinball(epsilon=0.05) and back.duality_gap_ == est.duality_gap_
    assert len(back.anchors_) == (8 if noncrossing else 0)


def test_offset_is_a_normal_quantile_function_under_strong_regularisation():
    """With λ huge, h ≈ 0 and the model is the intercept curve b: median + IQR/1.349 Φ⁻¹(τ) of the targets."""
    X, y, _ = sine(200, 7)
    est = QuantileFunctionRegressor(levels=10, lam=1e3, rearrange=False, **KW).fit(X, y)
    q25, q50, q75 = np.quantile(y, [0.25, 0.5, 0.75])
    b = q50 + (q75 - q25) / (norm.ppf(0.75) - norm.ppf(0.25)) * norm.ppf(TAU)
    np.testing.assert_allclose(est.predict(X[:3], TAU), np.tile(b, (3, 1)), atol=1e-3)
    # its slope (for the non-crossing penalty) is the derivative of b
    h = 1e-6
    np.testing.assert_allclose(
        est.offset_.slope(TAU), (est.offset_(TAU + h) - est.offset_(TAU - h)) / (2 * h), rtol=1e-6
    )
    none = QuantileFunctionRegressor(levels=10, lam=1e3, offset="none", rearrange=False, **KW).fit(X, y)
    np.testing.assert_allclose(none.predict(X[:3], TAU), 0.0, atol=1e-3)


def test_errors_name_the_argument():
    X, y, _ = sine(20, 8)
    with pytest.raises(ValueError, match="1-D array of scalar targets"):
        QuantileFunctionRegressor().fit(X, np.c_[y, y])
    bad = y.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="y must be finite"):
        QuantileFunctionRegressor().fit(X, bad)
    with pytest.raises(ValueError, match="levels"):
        QuantileFunctionRegressor(levels=[0.5, 0.2]).fit(X, y)
    with pytest.raises(ValueError, match="C²"):
        QuantileFunctionRegressor(kernel_theta=Laplacian(1.0), noncrossing=1.0).fit(X, y)
    with pytest.raises(ValueError, match="loss"):
        QuantileFunctionRegressor(Square()).fit(X, y)


def test_cv_path_equals_separate_fits_on_the_same_folds():
    X, y, _ = sine(120, 9)
    lams = [1e-2, 1e-3, 1e-4]
    cv = QuantileFunctionRegressorCV(lams=lams, cv=3, levels=10, tol=1e-8, max_iter=50_000, **KW).fit(X, y)
    direct = []
    for lam in cv.cv_results_["lam"]:
        scores = []
        for tr, va in KFold(3, shuffle=True, random_state=0).split(X):
            est = QuantileFunctionRegressor(levels=10, lam=lam, tol=1e-8, max_iter=50_000, rearrange=False, **KW)
            est.fit(X[tr], y[tr])
            scores.append(pinball_loss(y[va], est.predict(X[va], est.levels_), est.levels_, average=True))
        direct.append(np.mean(scores))
    np.testing.assert_allclose(cv.cv_results_["mean_score"], direct, rtol=1e-4)
    assert cv.lam_ == cv.cv_results_["lam"][int(np.argmin(direct))]
    ref = QuantileFunctionRegressor(levels=10, lam=cv.lam_, tol=1e-8, max_iter=50_000, **KW).fit(X, y)
    np.testing.assert_allclose(cv.predict(X[:5], TAU), ref.predict(X[:5], TAU), atol=1e-10)


def test_cv_with_random_features_equals_separate_fits_and_extends_its_grid():
    """solver="rff": each candidate's fold score is that of the random-feature estimator fitted on the fold (same
    random_state, same k_X), the λ grid is extended past a winning end, and the refit is the estimator at the
    selected λ on all rows."""
    X, y, _ = sine(1500, 21)
    rff = {"n_features_x": 100, "n_epochs": 5}
    cv = QuantileFunctionRegressorCV(lams=[1e-1, 1e-2], cv=3, levels=10, solver="rff", rff_params=rff,
                                     kernel_x=Gaussian(10.0), kernel_theta=Gaussian(10.0)).fit(X, y)  # fmt: skip
    # 1e-2 is too strong here: extensions down, one decade at a time, to an interior minimum (measured at 1e-5)
    assert len(cv.extensions_) >= 2 and all(e.startswith("lam low") for e in cv.extensions_) and not cv.at_edge_
    assert cv.edges_["lam"] in ("interior", "flat low")
    assert 1e-6 < cv.lam_ < 1e-2
    folds = list(KFold(3, shuffle=True, random_state=0).split(X))
    for lam, score in zip(cv.cv_results_["lam"], cv.cv_results_["mean_score"], strict=True):
        scores = []
        for tr, va in folds:
            est = QuantileFunctionRegressor(levels=10, lam=lam, solver="rff", random_state=0, kernel_x=Gaussian(10.0),
                                            kernel_theta=Gaussian(10.0), **rff).fit(X[tr], y[tr])  # fmt: skip
            scores.append(pinball_loss(y[va], est.predict_raw(X[va], est.levels_), est.levels_, average=True))
        assert score == pytest.approx(np.mean(scores), rel=1e-12)
    assert cv.lam_ == cv.cv_results_["lam"][int(np.argmin(cv.cv_results_["mean_score"]))]
    ref = QuantileFunctionRegressor(levels=10, lam=cv.lam_, solver="rff", random_state=0, kernel_x=Gaussian(10.0),
                                    kernel_theta=Gaussian(10.0), **rff).fit(X, y)  # fmt: skip
    np.testing.assert_array_equal(cv.predict(X[:5], TAU), ref.predict(X[:5], TAU))
    with pytest.raises(ValueError, match="rff_params"):
        QuantileFunctionRegressorCV(solver="rff", rff_params={"lam": 1.0}).fit(X, y)
    with pytest.raises(ValueError, match="rff_params"):
        QuantileFunctionRegressorCV(rff_params={"n_epochs": 2}).fit(X, y)


def test_quantile_metrics_against_their_definitions(rng):
    y = rng.standard_normal(50)
    Q = np.sort(rng.standard_normal((50, 5)), axis=1)
    expected = sum(mean_pinball_loss(y, Q[:, k], alpha=t) for k, t in enumerate(TAU))
    assert pinball_loss(y, Q, TAU) == pytest.approx(expected, rel=1e-14)
    assert pinball_loss(y, Q, TAU, average=True) == pytest.approx(expected / 5, rel=1e-14)
    assert crossing_loss(Q) == 0.0
    assert crossing_loss(np.array([[0.0, 1.0, 0.5, 2.0, 1.0], [3.0, 2.0, 1.0, 0.0, 0.0]])) == pytest.approx(
        (0.5 + 1.0 + 3.0) / 2
    )
    np.testing.assert_array_equal(
        quantile_coverage([1.0, 2.0, 3.0], [[2.0, 0.0], [2.0, 5.0], [2.0, 5.0]]), [2 / 3, 2 / 3]
    )
    assert calibration_error([1.0, 2.0, 3.0], [[2.0, 0.0], [2.0, 5.0], [2.0, 5.0]], [0.5, 0.9]) == pytest.approx(
        max(abs(2 / 3 - 0.5), abs(2 / 3 - 0.9))
    )


def test_calibration_and_quantile_curve_plots(tmp_path, fitted):
    from rffor.plot import plot_calibration, plot_quantile_curves

    X, y, _ = sine(500, 10)
    levels = np.linspace(0.05, 0.95, 19)
    cov = quantile_coverage(y, fitted.predict(X, levels))
    fig = plot_calibration(levels, {"rffor": cov})
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == [f"rffor (max |cov − τ| {calibration_error(y, fitted.predict(X, levels), levels):.3f})"]
    xs = np.linspace(0, 1.5, 50)
    fig = plot_quantile_curves(xs, fitted.predict(xs[:, None], levels), levels, X_observed=X, y_observed=y)
    assert len(fig.axes[0].lines) == len(levels) + 1  # one line per level and the data
    fig.savefig(tmp_path / "q.png")


def test_command_line_fits_and_evaluates_a_quantile_model(tmp_path):
    from rffor import data as rdata
    from rffor.cli import main

    X, y, _ = sine(80, 11)
    rdata.write(tmp_path / "train.zarr", X, y[:, None], np.array([0.0]))
    Xt, yt, _ = sine(200, 12)
    rdata.write(tmp_path / "test.zarr", Xt, yt[:, None], np.array([0.0]))
    model = tmp_path / "q.rffor"
    args = ["fit", str(tmp_path / "train.zarr"), "--loss", "pinball", "--levels", "10", "--noncrossing", "1",
            "--kernel-x", "gaussian:10", "--kernel-theta", "gaussian:10", "--out", str(model), "-q"]  # fmt: skip
    assert main(args) == 0
    est = load(model)
    assert isinstance(est, QuantileFunctionRegressor) and est.noncrossing == 1.0 and len(est.levels_) == 10
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["evaluate", str(model), str(tmp_path / "test.zarr"), "--json"]) == 0
    scores = json.loads(out.getvalue())
    Xt, Yt = rdata.open(tmp_path / "test.zarr").read()  # as stored (float32), as the command reads them
    Xt, yt = np.asarray(Xt, dtype=np.float64), np.asarray(Yt, dtype=np.float64)[:, 0]
    assert scores["pinball"] == pytest.approx(pinball_loss(yt, est.predict(Xt, TAU), TAU), rel=1e-12)
    assert scores["crossing"] == pytest.approx(crossing_loss(est.predict_raw(Xt, TAU)), abs=1e-15)
    assert scores["calibration_error"] == pytest.approx(calibration_error(yt, est.predict(Xt, TAU), TAU))
    grid = est.levels_
    assert scores["integral_pinball"] == pytest.approx(pinball_loss(yt, est.predict(Xt, grid), grid, average=True))
    # a quantile function needs scalar targets; the quantile options need the pinball loss
    rdata.write(tmp_path / "curves.zarr", X, np.c_[y, y], np.array([0.0, 1.0]))
    assert main(["fit", str(tmp_path / "curves.zarr"), "--loss", "pinball", "-q"]) == 2
    assert main(["fit", str(tmp_path / "train.zarr"), "--levels", "5", "-q"]) == 2
    # held-out selection (--lam auto and its companions) is for curves: a usage error that says so
    for extra in (["--lam", "auto"], ["--lam", "auto", "--loss-params", "auto", "--kappa", "0.1"]):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            assert main(["fit", str(tmp_path / "train.zarr"), "--loss", "pinball", *extra, "-q"]) == 2
        assert "not --loss pinball" in err.getvalue() and "QuantileFunctionRegressorCV" in err.getvalue()


def test_command_line_fits_a_quantile_model_with_random_features(tmp_path):
    """``--solver rff`` with given levels and the penalty: the model file holds a random-feature quantile model
    whose quantiles are those of the same estimator fitted in Python on the stored (float32) data."""
    from rffor import data as rdata
    from rffor.cli import main

    X, y, _ = sine(600, 13)
    rdata.write(tmp_path / "train.zarr", X, y[:, None], np.array([0.0]), chunks=600)  # one chunk: in process
    model = tmp_path / "q.rffor"
    args = ["fit", str(tmp_path / "train.zarr"), "--loss", "pinball", "--solver", "rff", "--levels", "8",
            "--noncrossing", "0.1", "--lam", "1e-4", "--kernel-x", "gaussian:10", "--kernel-theta", "gaussian:10",
            "--features-x", "100", "--epochs", "3", "--seed", "0", "--out", str(model), "-q"]  # fmt: skip
    assert main(args) == 0
    est = load(model)
    assert est.solver_ == "rff" and est.rff_method_ == "sgd" and est.noncrossing == 0.1
    ref = QuantileFunctionRegressor(
        levels=8, noncrossing=0.1, lam=1e-4, kernel_x=Gaussian(10.0), kernel_theta=Gaussian(10.0), solver="rff",
        n_features_x=100, n_epochs=3, random_state=0, dtype="float32",
    ).fit(rdata.open(tmp_path / "train.zarr"))  # fmt: skip
    Xt = np.linspace(0, 1.5, 9)[:, None]
    np.testing.assert_allclose(est.predict(Xt, TAU), ref.predict(Xt, TAU), rtol=1e-6, atol=1e-6)
