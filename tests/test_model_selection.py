"""FunctionalRegressorCV: the shared-eigendecomposition, warm-started path must select what separate fits on the
same folds select, with the same scores."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.model_selection import KFold

from rffor import FunctionalRegressor
from rffor.datasets import add_outliers, make_synthetic
from rffor.kernels import Gaussian
from rffor.losses import Huber, Square
from rffor.metrics import curve_mse
from rffor.model_selection import FunctionalRegressorCV

pytestmark = pytest.mark.usefixtures("single_blas_thread")
KW = dict(kernel_x=Gaussian(0.05), kernel_theta=Gaussian(30.0))


@pytest.fixture(scope="module")
def corrupted():
    d = make_synthetic(80, 40, m=20, p_in=10, nonlinear=True, noise=0.1, random_state=0)
    return d, add_outliers(d.Y_train, 2, 0.15, random_state=1)[0]


def _direct(d, Y, loss, lam, folds):
    scores = []
    for tr, va in folds:
        est = FunctionalRegressor(loss, lam=lam, solver="admm", tol=1e-10, **KW).fit(d.X_train[tr], Y[tr], d.theta)
        E = curve_mse(Y[va], est.predict(d.X_train[va]))
        scores.append(np.mean(E) if loss.is_square else stats.trim_mean(E, 0.25))  # the midmean
    return np.mean(scores)


@pytest.mark.parametrize("loss, params", [(Square(), None), (Huber(0.1, 2), [0.03, 0.3])], ids=["square", "huber"])
def test_cv_path_equals_separate_fits_and_picks_their_best(corrupted, loss, params):
    d, Y = corrupted
    lams = [1e-2, 1e-3, 1e-4]
    cv = FunctionalRegressorCV(loss, lams=lams, loss_params=params, cv=3, tol=1e-10, **KW).fit(d.X_train, Y, d.theta)
    folds = list(KFold(3, shuffle=True, random_state=0).split(d.X_train))
    res = cv.cv_results_
    direct = []
    for lam, p in zip(res["lam"], res["loss_param"], strict=True):
        cand = loss if params is None else Huber(float(p), 2)
        direct.append(_direct(d, Y, cand, lam, folds))
    np.testing.assert_allclose(res["mean_score"], direct, rtol=1e-4)  # both solved to a relative gap of 1e-10
    i = int(np.argmin(direct))
    assert cv.lam_ == res["lam"][i]
    if params is not None:
        assert cv.loss_.kappa == res["loss_param"][i]
    lam_grid = sorted(set(res["lam"]))
    assert lam_grid.index(cv.lam_) not in (0, len(lam_grid) - 1) or cv.extensions_  # an edge was extended
    ref = FunctionalRegressor(cv.loss_, lam=cv.lam_, solver="admm", tol=1e-10, **KW).fit(d.X_train, Y, d.theta)
    np.testing.assert_allclose(cv.predict(d.X_test), ref.predict(d.X_test), rtol=1e-10, atol=1e-12)
    # the robust choice on corrupted data beats the square loss's on clean test curves
    if params is not None:
        sq = FunctionalRegressorCV(Square(), lams=lams, cv=3, **KW).fit(d.X_train, Y, d.theta)
        assert np.mean(curve_mse(d.Y_test, cv.predict(d.X_test))) < np.mean(curve_mse(d.Y_test, sq.predict(d.X_test)))


def test_cv_refuses_what_it_cannot_choose(corrupted):
    d, Y = corrupted
    with pytest.raises(ValueError, match="lam='auto'"):
        FunctionalRegressorCV(solver="rff").fit(d.X_train, Y, d.theta)
    with pytest.raises(ValueError, match="loss_params"):
        FunctionalRegressorCV(Square(), loss_params=[0.1]).fit(d.X_train, Y, d.theta)


def test_cv_extends_a_winning_loss_parameter_edge_and_takes_a_predefined_split(corrupted):
    """κ grid {1, 3} on 15% outliers: the smallest κ wins, so the grid is extended down until an interior κ wins;
    with a ``PredefinedSplit`` (one held-out set) the scores are those of a direct evaluation on that split."""
    from sklearn.model_selection import PredefinedSplit

    d, Y = corrupted
    test_fold = np.where(np.arange(len(Y)) % 4 == 0, 0, -1)
    split = PredefinedSplit(test_fold)
    cv = FunctionalRegressorCV(Huber(1.0, 2), lams=[1e-2, 1e-3, 1e-4], loss_params=[1.0, 3.0], cv=split,
                               tol=1e-10, **KW).fit(d.X_train, Y, d.theta)  # fmt: skip
    kappas = sorted(set(cv.cv_results_["loss_param"]))
    assert min(kappas) < 1.0 and any(e.startswith("kappa low") for e in cv.extensions_)
    assert cv.edges_["kappa"] in ("interior", "flat low", "flat high")
    assert not cv.at_edge_ and min(kappas) < cv.loss_.kappa < max(kappas)
    folds = list(split.split(d.X_train))
    res = cv.cv_results_
    for lam, p, score in list(zip(res["lam"], res["loss_param"], res["mean_score"], strict=True))[::4]:
        assert score == pytest.approx(_direct(d, Y, Huber(float(p), 2), lam, folds), rel=1e-4)
