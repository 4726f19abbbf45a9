"""scikit-learn's own estimator checks, with no expected failures, for the exact solvers and the random-feature
solver (issue 11 §4): the target is ``y``, a 1-D X is refused, predictions are float64 and batch-invariant,
``n_iter_`` is at least 1, ``score`` checks the number of features."""

from __future__ import annotations

import pytest
from sklearn.utils.estimator_checks import check_estimator

from rffor import FunctionalRegressor, QuantileFunctionRegressor

pytestmark = pytest.mark.usefixtures("single_blas_thread")


@pytest.mark.parametrize(
    "params",
    [dict(solver="admm"), dict(solver="apgd"), dict(solver="rff", n_features_x=100)],
    ids=["admm", "apgd", "rff"],
)
def test_check_estimator_passes(params):
    results = check_estimator(FunctionalRegressor(**params), on_fail=None)
    failed = {r["check_name"]: str(r["exception"])[:200] for r in results if r["status"] == "failed"}
    assert not failed, failed
    assert sum(r["status"] == "passed" for r in results) >= 50  # the checks ran (scikit-learn 1.9: 52)


@pytest.mark.parametrize(
    "params",
    [dict(solver="admm"), dict(solver="apgd"), dict(solver="rff", n_features_x=100)],
    ids=["admm", "apgd", "rff"],
)
def test_quantile_estimator_passes_check_estimator(params):
    """The quantile function regressor: scalar targets (a column vector warns and is raveled), ``predict(X)`` is the
    median, float64 and batch-invariant; the random-feature fit draws its levels (DSGD)."""
    results = check_estimator(QuantileFunctionRegressor(levels=10, **params), on_fail=None)
    failed = {r["check_name"]: str(r["exception"])[:200] for r in results if r["status"] == "failed"}
    assert not failed, failed
    assert sum(r["status"] == "passed" for r in results) >= 50
