"""Tests of ``lam="auto"`` on the random-feature path (rffor.solvers.lam_path): the grid fitted in shared passes
and scored on held-out rows must give what separate fits and a direct evaluation give."""

from __future__ import annotations

import numpy as np
import pytest
from test_dsgd import KT, KX  # tests/ is on sys.path (rootdir conftest)

from rffor.chunked import ArrayData, RowSplit
from rffor.datasets import add_outliers, make_synthetic
from rffor.losses import Huber, Square
from rffor.metrics import curve_mse
from rffor.solvers.rff import fit_rff

pytestmark = pytest.mark.usefixtures("single_blas_thread")

KW = dict(kernel_x=KX, kernel_theta=KT, n_features_x=100, random_state=0, dtype="float64")


@pytest.fixture(scope="module")
def corrupted():
    d = make_synthetic(1500, 200, m=30, p_in=20, nonlinear=True, noise=0.05, random_state=0)
    Y = add_outliers(d.Y_train, 2, 0.1, random_state=1)[0]
    return d, ArrayData(d.X_train, Y, d.theta, chunk_rows=300)


def _direct(d, Y, loss, lams, split, **kw):
    """Separate fits on the training rows, scored on the held-out rows (the selection the path must reproduce)."""
    held = split.mask(0, len(Y))
    fits, scores = [], []
    for lam in lams:
        res = fit_rff((d.X_train[~held], Y[~held], d.theta), loss=loss, lam=lam, **kw)
        E = curve_mse(Y[held], res.predict(d.X_train[held]))
        fits.append(res.coef)
        scores.append(np.median(E) if not loss.is_square else np.mean(E))
    return np.stack(fits), np.array(scores)


def test_row_split_is_global_and_about_one_in_modulus():
    split = RowSplit(10, True)
    n = 20_000
    held = split.mask(0, n)
    assert abs(held.mean() - 0.1) < 0.01
    # the same rows whatever the chunking: masks of chunks concatenate to the mask of the whole
    X, Y = np.arange(n, dtype=float)[:, None], np.zeros((n, 2))
    for c in (7, 1000):
        data = ArrayData(X, Y, chunk_rows=c)
        rows = np.concatenate([Xi[:, 0] for _, Xi, _ in split.view(data).iter_chunks(range(data.n_chunks))])
        np.testing.assert_array_equal(rows, np.flatnonzero(held))
    other = np.concatenate([Xi[:, 0] for _, Xi, _ in split.side(False).view(data).iter_chunks(range(data.n_chunks))])
    np.testing.assert_array_equal(other, np.flatnonzero(~held))


def test_square_path_equals_separate_closed_forms_and_refits_on_all_rows(corrupted):
    d, data = corrupted
    lams = [1e-2, 1e-3, 1e-4, 1e-5, 1e-6]
    res = fit_rff(data, loss=Square(), lam="auto", lams=lams, **KW)
    path = res.path
    fits, scores = _direct(d, data.Y, Square(), path.lams, RowSplit(10, True), **KW)
    # equal up to the summation order of the sums (chunks of 300 rows against one block), amplified at small λ
    np.testing.assert_allclose(path.coefs, fits, rtol=1e-4, atol=1e-6 * np.abs(fits).max())
    np.testing.assert_allclose(path.scores, scores, rtol=1e-7)
    assert res.lam == path.lams[int(np.argmin(scores))] and 0 < path.best < len(path.lams) - 1
    full = fit_rff(data, loss=Square(), lam=res.lam, **KW)  # the selected λ on all rows: the same closed form
    np.testing.assert_allclose(res.coef, full.coef, rtol=1e-5, atol=1e-7 * np.abs(full.coef).max())


def test_robust_path_matches_separate_fits_and_selects_as_direct_evaluation(corrupted):
    """H_κ^2 on 10% outliers: every λ of the lockstep MM path equals its own MM fit on the training rows, the
    held-out median scores and the selected λ are those of a direct evaluation, and the final model is the MM
    optimum at that λ on all rows."""
    d, data = corrupted
    loss, lams = Huber(0.1, 2), [1e-2, 1e-3, 1e-4, 1e-5]
    res = fit_rff(data, loss=loss, lam="auto", lams=lams, tol=1e-10, max_passes=200, **KW)
    path = res.path
    assert path.passes > 1
    fits, scores = _direct(d, data.Y, loss, path.lams, RowSplit(10, True), tol=1e-10, max_passes=200, **KW)
    np.testing.assert_allclose(path.coefs, fits, rtol=1e-4, atol=1e-5 * np.abs(fits).max())
    np.testing.assert_allclose(path.scores, scores, rtol=1e-4)
    assert res.lam == path.lams[int(np.argmin(scores))]
    full = fit_rff(data, loss=loss, lam=res.lam, tol=1e-10, max_passes=200, **KW)
    np.testing.assert_allclose(res.coef, full.coef, rtol=1e-4, atol=1e-5 * np.abs(full.coef).max())
    # robust selection: the median score ignores the outlying validation curves, the robust model beats the
    # square-loss model on clean test curves by a wide margin
    sq = fit_rff(data, loss=Square(), lam="auto", lams=lams, **KW)
    err = np.mean(curve_mse(d.Y_test, res.predict(d.X_test)))
    assert err < 0.5 * np.mean(curve_mse(d.Y_test, sq.predict(d.X_test)))


def test_a_grid_edge_is_extended(corrupted):
    _, data = corrupted
    res = fit_rff(data, loss=Square(), lam="auto", lams=[1e-5, 1e-6], **KW)
    path = res.path
    assert path.extensions and path.extensions[0].startswith("down")
    assert 0 < path.best < len(path.lams) - 1  # the extension found the interior minimum
    assert path.lams.min() < 1e-7 and not path.at_edge


def test_auto_lambda_is_refused_for_dsgd_and_bad_grids(corrupted):
    _, data = corrupted
    with pytest.raises(ValueError, match="rff_method"):
        fit_rff(data, loss=Huber(0.1, 2), lam="auto", rff_method="sgd", **KW)
    with pytest.raises(ValueError, match="lams"):
        fit_rff(data, lam="auto", lams=[1e-3], **KW)
    with pytest.raises(ValueError, match="lam"):
        fit_rff(data, lam="best", **KW)


def test_estimator_lam_auto_saves_its_choice(corrupted, tmp_path):
    from rffor import FunctionalRegressor, load

    d, data = corrupted
    est = FunctionalRegressor(Huber(0.1, 2), kernel_x=KX, kernel_theta=KT, lam="auto", solver="rff",
                              n_features_x=100, random_state=0, dtype="float64")  # fmt: skip
    est.fit(d.X_train, data.Y, theta=d.theta)
    ref = fit_rff((d.X_train, data.Y, d.theta), loss=Huber(0.1, 2), lam="auto", **KW)
    assert est.lam_ == ref.lam and est.lam_path_["lams"] == ref.path.lams.tolist()
    np.testing.assert_array_equal(est.coef_, ref.coef)
    back = load(est.save(tmp_path / "m.rffor"))
    assert back.lam_ == est.lam_ and back.lam_path_ == est.lam_path_
    np.testing.assert_array_equal(back.predict(d.X_test), est.predict(d.X_test))
    with pytest.raises(ValueError, match="FunctionalRegressorCV"):
        FunctionalRegressor(lam="auto", solver="admm").fit(d.X_train[:50], d.Y_train[:50])


def _fit_and_cache_state(data, **kw):
    """fit_rff, and this process's feature cache as it was when the fit ended (just before its release)."""
    import rffor.solvers.rff as rff_mod
    from rffor.solvers.feature_cache import cache_info

    seen, release = [], rff_mod.release_task
    rff_mod.release_task = lambda *args: seen.append(cache_info())
    try:
        out = fit_rff(data, **kw)
    finally:
        rff_mod.release_task = release
    return out, (seen[0] if seen else None)


def test_feature_cache_changes_the_time_not_the_bits(corrupted):
    """Passes reuse the features kept by the process (:mod:`rffor.solvers.feature_cache`): the same model bit for
    bit as without a cache, with a budget that holds every block or only some of them; the budget is respected
    and the blocks are released when the fit ends."""
    from rffor.solvers.feature_cache import cache_info

    _, data = corrupted
    kw = dict(KW, loss=Huber(0.1, 2), lam="auto", lams=[1e-2, 1e-3, 1e-4])
    ref, none = _fit_and_cache_state(data, feature_cache=0, **kw)
    assert none is None  # no cache, nothing to release
    full, info = _fit_and_cache_state(data, **kw)
    # the refit on all rows (the last phase, its own cache key): every pass after its first reads the cache
    assert info["misses"] > 0 and info["hits"] >= (full.n_iter - 1) * info["misses"]
    block = 300 * 100 * 8  # one chunk of 300 rows, D_x = 100 float64 features
    part, some = _fit_and_cache_state(data, feature_cache=3 * block, **kw)
    assert some["bytes"] <= 3 * block and 0 < some["blocks"] < info["blocks"]
    fit_rff(data, **kw)
    assert cache_info()["blocks"] == 0  # released when the fit ended
    for out in (full, part):
        np.testing.assert_array_equal(out.coef, ref.coef)
        np.testing.assert_array_equal(out.path.scores, ref.path.scores)
