"""Shared small fixtures of the test suite.

Keep everything here small (n, m of a few tens at most) so that the default suite stays fast; the data fixtures are
session-scoped and must not be modified by the tests that use them (copy first).
"""

from __future__ import annotations

import math
import os

# scikit-learn's estimator checks include an array-API check that only runs when SciPy's array-API mode is on
# (read when SciPy is first imported, hence before the imports below): on, so that no check is skipped in CI
os.environ.setdefault("SCIPY_ARRAY_API", "1")

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from rffor.datasets import add_outliers, make_synthetic
from rffor.losses import EpsilonInsensitive, Huber, Square

#: The five losses of paper 000 (MATH.md §2), with parameters that make both regimes of their non-smooth parts
#: active on ``tiny_curves`` with λ = 1e-3 (residual RMS 0.1–0.4 per curve, entries from 0.01 to 0.5).
FIVE_LOSSES = {
    "square": Square(),
    "huber2": Huber(kappa=0.25, p=2),
    "huber1": Huber(kappa=0.2, p=1),
    "eps2": EpsilonInsensitive(epsilon=0.25, p=2),
    "epsinf": EpsilonInsensitive(epsilon=0.1, p=math.inf),
}


@pytest.fixture(params=list(FIVE_LOSSES), ids=list(FIVE_LOSSES))
def any_loss(request):
    """Each of the five losses, as ``(name, Loss)``."""
    return request.param, FIVE_LOSSES[request.param]


@pytest.fixture
def single_blas_thread():
    """Run the test with one BLAS thread. The tests' matrices are tiny, and on a machine whose cores are busy
    (CI runners, shared hosts) OpenBLAS's threads spin-wait for each other: 10–100x slower with no gain.
    Use it with ``pytestmark = pytest.mark.usefixtures("single_blas_thread")``."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def die_after_checkpoint(round_: int, monkeypatch, then=None) -> None:
    """Make the next fits stop right after writing the checkpoint of ``round_`` (as a killed driver would), after
    calling ``then()`` when given; ``monkeypatch.undo()`` restores the checkpoint writer."""
    import rffor.checkpoint as ckpt

    save = ckpt.save

    def save_then_die(path, state, r, history, info):
        save(path, state, r, history, info)
        if r == round_:
            if then is not None:
                then()
            raise KeyboardInterrupt

    monkeypatch.setattr(ckpt, "save", save_then_die)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def tiny_curves():
    """Nonlinear synthetic curves, n = 14 train / 10 test, m = 9 grid points, 12-point input curves, noise 0.05,
    with 2 training curves replaced by Type 2 outliers (``Y_train_outliers``, rows ``outlier_idx``)."""
    data = make_synthetic(14, 10, m=9, p_in=12, nonlinear=True, noise=0.05, random_state=0)
    data.Y_train_outliers, data.outlier_idx = add_outliers(data.Y_train, 2, 0.15, random_state=1)
    return data


@pytest.fixture(scope="session")
def small_curves():
    """Nonlinear synthetic curves, n = 40 train / 30 test, m = 20, 20-point input curves, noise 0.02, with 10%
    Type 2 outliers in ``Y_train_outliers``."""
    data = make_synthetic(40, 30, m=20, p_in=20, nonlinear=True, noise=0.02, random_state=3)
    data.Y_train_outliers, data.outlier_idx = add_outliers(data.Y_train, 2, 0.1, random_state=4)
    return data
