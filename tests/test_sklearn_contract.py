"""scikit-learn's estimator checks over every public estimator of rffor (issue 11 §4; issue 22 item 5).

The estimators are found by walking the library (every class named in a module's ``__all__`` that subclasses
scikit-learn's ``BaseEstimator``: ``tests/_registry.py``), each with the configurations of :data:`CONFIGS`, small
enough to keep every check fast (the CV estimators: 2 folds, 2 values of λ). A new public estimator is checked with
its default parameters until :data:`CONFIGS` has its own, and :func:`test_every_public_estimator_is_configured`
fails meanwhile.

:data:`EXPECTED_FAILED_CHECKS` is the one list of the checks an estimator fails today, each with its reason; they run
as strict expected failures, so that a fix shows up as an unexpected pass (then remove its entry).
"""

from __future__ import annotations

import pytest
from _registry import public_classes  # tests/ is on sys.path (rootdir conftest)
from sklearn.base import BaseEstimator
from sklearn.utils.estimator_checks import parametrize_with_checks

from rffor import FunctionalRegressor, QuantileFunctionRegressor
from rffor.losses import Huber
from rffor.model_selection import FunctionalRegressorCV, QuantileFunctionRegressorCV

pytestmark = pytest.mark.usefixtures("single_blas_thread")

#: the configurations checked, per public estimator class
CONFIGS: dict[type, list[BaseEstimator]] = {
    FunctionalRegressor: [
        FunctionalRegressor(solver="admm"),
        FunctionalRegressor(solver="apgd"),
        FunctionalRegressor(Huber(0.5, p=2), lam=1e-2, solver="apgd", tol=1e-5),
        FunctionalRegressor(solver="rff", n_features_x=100),
    ],
    # scalar targets (a column vector warns and is raveled), predict(X) is the median; rff draws its levels (DSGD)
    QuantileFunctionRegressor: [
        QuantileFunctionRegressor(levels=10, solver="admm"),
        QuantileFunctionRegressor(levels=10, solver="apgd"),
        QuantileFunctionRegressor(levels=10, solver="rff", n_features_x=100),
    ],
    FunctionalRegressorCV: [
        FunctionalRegressorCV(lams=[1e-2, 1e-4], cv=2, max_extensions=1),
        FunctionalRegressorCV(
            Huber(0.5, p=2), lams=[1e-2, 1e-4], loss_params=[0.2, 1.0], cv=2, max_extensions=0, solver="apgd"
        ),
    ],
    QuantileFunctionRegressorCV: [
        QuantileFunctionRegressorCV(levels=5, lams=[1e-2, 1e-4], cv=2, max_extensions=0),
        QuantileFunctionRegressorCV(
            levels=5, lams=[1e-2, 1e-4], cv=2, max_extensions=0, solver="rff", rff_params={"n_features_x": 50}
        ),
    ],
}

#: estimator class -> {check: why it fails}; run as xfail(strict=True)
EXPECTED_FAILED_CHECKS: dict[type, dict[str, str]] = {}

PUBLIC_ESTIMATORS = public_classes(BaseEstimator)


def _configs(cls: type) -> list[BaseEstimator]:
    """The configurations of ``cls``; its default parameters when it has none (and the test below fails)."""
    return CONFIGS.get(cls) or [cls()]


def test_every_public_estimator_is_configured():
    assert set(CONFIGS) <= set(PUBLIC_ESTIMATORS)  # the walk finds them
    missing = [c.__name__ for c in PUBLIC_ESTIMATORS if c not in CONFIGS]
    assert not missing, f"add configurations for {missing} to CONFIGS in tests/test_sklearn_contract.py"
    assert set(EXPECTED_FAILED_CHECKS) <= set(CONFIGS)


@parametrize_with_checks(
    [est for cls in PUBLIC_ESTIMATORS for est in _configs(cls)],
    expected_failed_checks=lambda est: EXPECTED_FAILED_CHECKS.get(type(est), {}),
    xfail_strict=True,
)
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)
