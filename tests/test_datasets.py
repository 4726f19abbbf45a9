"""Tests of rffor.datasets: synthetic GP data, outliers (MATH.md §7) and metrics."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import LinearRegression, Ridge

from rffor.datasets import add_outliers, make_synthetic, sample_synthetic, synthetic_signal_energy
from rffor.metrics import mse, nmse


@pytest.fixture(scope="module")
def data():
    return make_synthetic(60, 20, m=40, p_in=30, random_state=0)


@pytest.fixture(scope="module")
def Y(data):
    return data.Y_train


# ---------------------------------------------------------------------------------------------------------------
# make_synthetic
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("nonlinear", [False, True])
def test_shapes_and_grids(nonlinear):
    d = make_synthetic(7, 5, m=11, p_in=13, nonlinear=nonlinear, random_state=1)
    assert d.X_train.shape == (7, 13) and d.X_test.shape == (5, 13)
    assert d.Y_train.shape == (7, 11) and d.Y_test.shape == (5, 11)
    assert d.components_in.shape == (4, 13) and d.components_out.shape == (4, 11)
    np.testing.assert_array_equal(d.theta, np.linspace(0, 1, 11))
    np.testing.assert_array_equal(d.theta_in, np.linspace(0, 1, 13))
    for key in ("X_train", "Y_train", "X_test", "Y_test"):
        assert d[key].dtype == np.float64 and np.all(np.isfinite(d[key]))


def test_defaults_match_paper():
    d = make_synthetic(random_state=0)
    assert d.X_train.shape == (100, 100) and d.Y_test.shape == (100, 100)


def test_no_test_set():
    d = make_synthetic(5, 0, m=4, p_in=6, random_state=0)
    assert d.X_test.shape == (0, 6) and d.Y_test.shape == (0, 4)


@pytest.mark.parametrize("nonlinear", [False, True])
def test_deterministic_and_seed_dependent(nonlinear):
    kw = dict(m=20, p_in=15, nonlinear=nonlinear, noise=0.1)
    a = make_synthetic(10, 5, random_state=3, **kw)
    b = make_synthetic(10, 5, random_state=3, **kw)
    c = make_synthetic(10, 5, random_state=4, **kw)
    for key in ("X_train", "Y_train", "X_test", "Y_test"):
        np.testing.assert_array_equal(a[key], b[key])
        assert not np.allclose(a[key], c[key])
    g1, g2 = np.random.default_rng(5), np.random.default_rng(5)
    np.testing.assert_array_equal(
        make_synthetic(4, 2, m=5, p_in=6, random_state=g1).Y_train,
        make_synthetic(4, 2, m=5, p_in=6, random_state=g2).Y_train,
    )


def test_linear_variant_is_exactly_linear():
    d = make_synthetic(30, 10, m=25, p_in=20, random_state=2)
    # y = u G_out and x = u G_in, so Y lies in the span of the 4 output components and is a linear map of X.
    U, *_ = np.linalg.lstsq(d.components_in.T, d.X_train.T, rcond=None)
    np.testing.assert_allclose(U.T @ d.components_out, d.Y_train, atol=1e-8)
    assert np.all(np.abs(U) <= 0.5 + 1e-8)
    pred = LinearRegression().fit(d.X_train, d.Y_train).predict(d.X_test)
    assert nmse(d.Y_test, pred) < 1e-12


def test_same_draws_in_both_variants():
    a = make_synthetic(10, 3, m=8, p_in=9, random_state=7)
    b = make_synthetic(10, 3, m=8, p_in=9, nonlinear=True, random_state=7)
    np.testing.assert_array_equal(a.components_out, b.components_out)
    # nonlinear inputs use orthonormalised components: ||x_i - x_j||^2 = p_in ||u_i - u_j||^2
    np.testing.assert_allclose(b.components_in @ b.components_in.T, 9 * np.eye(4), atol=1e-10)


def test_output_scale_comparable():
    lin = make_synthetic(300, 0, random_state=0).Y_train.std()
    non = make_synthetic(300, 0, nonlinear=True, random_state=0).Y_train.std()
    assert 0.1 < lin < 1.5 and 0.1 < non < 1.5
    assert 0.5 < non / lin < 2.0


def test_noise_on_train_outputs_only():
    clean = make_synthetic(50, 20, m=30, p_in=10, random_state=0)
    noisy = make_synthetic(50, 20, m=30, p_in=10, noise=0.5, random_state=0)
    np.testing.assert_array_equal(clean.X_train, noisy.X_train)
    np.testing.assert_array_equal(clean.X_test, noisy.X_test)
    np.testing.assert_array_equal(clean.Y_test, noisy.Y_test)
    resid = noisy.Y_train - clean.Y_train
    assert abs(resid.std() - 0.5) < 0.03 and abs(resid.mean()) < 0.03


def test_nonlinear_variant_needs_a_nonlinear_model():
    d = make_synthetic(100, 100, nonlinear=True, random_state=0)
    krr = KernelRidge(kernel="rbf", gamma=0.01, alpha=1e-3).fit(d.X_train, d.Y_train)
    err_kernel = nmse(d.Y_test, krr.predict(d.X_test))
    err_linear = min(
        nmse(d.Y_test, model.fit(d.X_train, d.Y_train).predict(d.X_test))
        for model in (LinearRegression(), Ridge(alpha=1e-3), Ridge(alpha=1.0), Ridge(alpha=100.0))
    )
    variance = np.mean(d.Y_test.var(axis=0))
    assert err_linear > 2 * err_kernel
    assert err_kernel < 0.1 * variance  # the kernel model learns it well
    assert err_linear > 0.3 * variance  # no linear model does


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        (dict(n_train=0), "n_train"),
        (dict(n_train=2.5), "n_train"),
        (dict(n_train=True), "n_train"),
        (dict(n_test=-1), "n_test"),
        (dict(m=0), "m"),
        (dict(p_in=0), "p_in"),
        (dict(p_in=3, nonlinear=True), "p_in"),
        (dict(noise=-0.1), "noise"),
        (dict(noise=float("nan")), "noise"),
        (dict(nonlinear="yes"), "nonlinear"),
        (dict(random_state="seed"), "random_state"),
        (dict(random_state=-1), "random_state"),
    ],
)
def test_make_synthetic_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        make_synthetic(**{"m": 5, "p_in": 5, **kwargs})


# ---------------------------------------------------------------------------------------------------------------
# add_outliers
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [1, 2, 3])
@pytest.mark.parametrize("tau", [0.0, 0.1, 0.29, 1.0])
def test_outlier_count_and_only_those_rows_change(Y, kind, tau):
    Y0 = Y.copy()
    Yc, idx = add_outliers(Y, kind, tau, xi=0.3, random_state=0)
    np.testing.assert_array_equal(Y, Y0)  # input not modified
    assert Yc is not Y and Yc.shape == Y.shape and Yc.dtype == Y.dtype
    n = Y.shape[0]
    assert idx.shape == (int(np.floor(tau * n + 1e-9)),)
    assert len(np.unique(idx)) == len(idx) and np.all((idx >= 0) & (idx < n))
    clean = np.setdiff1d(np.arange(n), idx)
    np.testing.assert_array_equal(Yc[clean], Y[clean])
    changed = np.any(Yc[idx] != Y[idx], axis=1)
    assert np.all(changed)


def test_tau_rounding():
    Y = np.zeros((100, 3)) + np.arange(3)
    assert len(add_outliers(Y, 1, 0.29, random_state=0)[1]) == 29
    assert len(add_outliers(Y, 1, 0.019, random_state=0)[1]) == 1


def test_type1_is_minus_the_next_corrupted_row(Y):
    Yc, idx = add_outliers(Y, 1, 0.2, random_state=1)
    np.testing.assert_array_equal(Yc[idx], -Y[np.roll(idx, -1)])
    Yc1, idx1 = add_outliers(Y, "type1", 1 / Y.shape[0], random_state=1)
    np.testing.assert_array_equal(Yc1[idx1], -Y[idx1])  # |I| = 1: the cycle is the identity


def test_type2_replaces_and_adds(Y):
    n, m = Y.shape
    Yc, idx = add_outliers(Y, 2, 0.5, zeta=2.0, random_state=2)
    Ya, idx_a = add_outliers(Y, "2", 0.5, zeta=2.0, additive=True, random_state=2)
    np.testing.assert_array_equal(idx, idx_a)
    np.testing.assert_allclose(Ya[idx] - Y[idx], Yc[idx])  # same curves, added instead of replacing
    # a mixture of 4 unit-variance GPs with |a| <= zeta / 2 is bounded by about 4 * zeta / 2 * 4 sd
    assert np.max(np.abs(Yc[idx])) < 16.0
    small, _ = add_outliers(Y, 2, 0.5, zeta=0.2, random_state=2)
    np.testing.assert_allclose(small[idx], 0.1 * Yc[idx])  # intensity scales the curves linearly
    zero, _ = add_outliers(Y, 2, 0.5, zeta=0.0, random_state=2)
    np.testing.assert_array_equal(zero[idx], 0.0)


@pytest.mark.parametrize("xi", [0.1, 0.3, 1.0])
def test_type3_local_corruption(Y, xi):
    n, m = Y.shape
    b_max = np.max(np.abs(Y))
    Yc, idx = add_outliers(Y, 3, 0.5, xi=xi, random_state=3)
    diff = Yc[idx] != Y[idx]
    k = int(np.floor(xi * m + 1e-9))
    assert np.all(diff.sum(axis=1) == k)  # exactly floor(xi m) entries per corrupted row (ties: prob. 0)
    assert np.all(np.abs(Yc[idx][diff]) <= b_max)
    # changed positions differ from row to row
    assert xi == 1.0 or len({tuple(np.flatnonzero(r)) for r in diff}) > 1


def test_nan_preserved():
    rng = np.random.default_rng(0)
    Y = rng.standard_normal((40, 25))
    Y[rng.random(Y.shape) < 0.2] = np.nan
    mask = np.isnan(Y)
    Y0 = Y.copy()
    for kind in (1, 2, 3):
        Yc, idx = add_outliers(Y, kind, 0.5, xi=0.5, additive=False, random_state=kind)
        np.testing.assert_array_equal(Y, Y0)
        assert np.all(np.isnan(Yc[mask]))
        if kind in (2, 3):  # same observation pattern exactly
            np.testing.assert_array_equal(np.isnan(Yc), mask)
    # Type 3 corrupts floor(xi * m_i) of the m_i observed entries of each corrupted row
    Yc, idx = add_outliers(Y, 3, 0.5, xi=0.5, random_state=3)
    obs = ~mask[idx]
    changed = (Yc[idx] != Y[idx]) & obs
    np.testing.assert_array_equal(changed.sum(axis=1), np.floor(0.5 * obs.sum(axis=1) + 1e-9))
    assert np.nanmax(np.abs(Yc)) <= np.nanmax(np.abs(Y))


def test_outliers_deterministic(Y):
    for kind in (1, 2, 3):
        a = add_outliers(Y, kind, 0.3, random_state=5)
        b = add_outliers(Y, kind, 0.3, random_state=5)
        c = add_outliers(Y, kind, 0.3, random_state=6)
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
        assert not np.array_equal(a[0], c[0])


def test_float32_and_int_inputs():
    Y32 = np.random.default_rng(0).standard_normal((10, 6)).astype(np.float32)
    for kind in (1, 2, 3):
        assert add_outliers(Y32, kind, 0.5, random_state=0)[0].dtype == np.float32
    Yint = np.arange(60).reshape(10, 6)
    Yc, _ = add_outliers(Yint, 3, 0.5, random_state=0)
    assert Yc.dtype == np.float64


@pytest.mark.parametrize(
    "spelling, kind",
    [("1", 1), ("2", 2), ("3", 3), ("type1", 1), ("Type 2", 2), ("type_3", 3), (" TYPE3 ", 3), (np.int64(2), 2)],
)
def test_kind_spellings(Y, spelling, kind):
    """Every accepted spelling of a kind gives the canonical kind's result (same rows, same corrupted values) for the
    same random_state, and the three kinds give three different results (so that equality names the kind)."""
    Yc, idx = add_outliers(Y, spelling, 0.2, random_state=0)
    Yk, idx_k = add_outliers(Y, kind, 0.2, random_state=0)
    np.testing.assert_array_equal(idx, idx_k)
    np.testing.assert_array_equal(Yc, Yk)
    others = [add_outliers(Y, k, 0.2, random_state=0)[0] for k in (1, 2, 3) if k != kind]
    assert len(idx) > 0 and not any(np.array_equal(Yc, other) for other in others)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        (dict(kind=0), "kind"),
        (dict(kind=4), "kind"),
        (dict(kind="type4"), "kind"),
        (dict(kind=1.0), "kind"),
        (dict(kind=True), "kind"),
        (dict(tau=-0.1), "tau"),
        (dict(tau=1.5), "tau"),
        (dict(tau=float("nan")), "tau"),
        (dict(xi=2.0), "xi"),
        (dict(zeta=-1.0), "zeta"),
        (dict(additive=1), "additive"),
        (dict(random_state=1.5), "random_state"),
        (dict(Y=np.zeros(5)), "Y"),
        (dict(Y=np.array([["a", "b"]])), "Y"),
    ],
)
def test_add_outliers_bad_arguments(kwargs, name):
    args = {"Y": np.ones((10, 4)), "kind": 1, "tau": 0.2, **kwargs}
    with pytest.raises(ValueError, match=name):
        add_outliers(args.pop("Y"), args.pop("kind"), args.pop("tau"), **args)


# ---------------------------------------------------------------------------------------------------------------
# metrics
# ---------------------------------------------------------------------------------------------------------------


def test_metrics_values():
    Y = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    P = np.array([[1.0, 0.0, 3.0], [1.0, 1.0, 1.0]])
    assert mse(Y, P) == pytest.approx((4.0 + 3.0) / 2)
    assert nmse(Y, P) == pytest.approx((4.0 + 3.0) / 6)
    assert mse(Y, Y) == 0.0
    assert mse(Y[0], P[0]) == pytest.approx(4.0)  # 1-D: one curve


def test_metrics_ignore_missing():
    Y = np.array([[1.0, np.nan, 3.0], [np.nan, 0.0, 0.0]])
    P = np.array([[2.0, 100.0, 3.0], [100.0, 1.0, 1.0]])
    assert mse(Y, P) == pytest.approx((1.0 + 2.0) / 2)
    assert nmse(Y, P) == pytest.approx((1.0 + 2.0) / 6)


def test_metrics_bad_shapes():
    with pytest.raises(ValueError, match="Y_pred"):
        mse(np.zeros((3, 2)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="Y_true"):
        nmse(np.zeros((2, 2, 2)), np.zeros((2, 2, 2)))


def test_real_data_loader_is_reachable_from_datasets():
    import rffor.realdata
    from rffor import datasets

    assert datasets.load_gait is rffor.realdata.load_gait
    assert "load_gait" in datasets.__all__


@pytest.mark.parametrize("nonlinear", [False, True])
def test_sample_synthetic_continues_make_synthetic(nonlinear):
    """make_synthetic(n₁ + n₂) = make_synthetic(n₁) then sample_synthetic(n₂) on the same Generator: block-wise
    samples come from the same distribution (same curves, same coefficient law, same map)."""
    whole = make_synthetic(9, 0, m=12, p_in=15, nonlinear=nonlinear, random_state=np.random.default_rng(4))
    rng = np.random.default_rng(4)
    head = make_synthetic(2, 0, m=12, p_in=15, nonlinear=nonlinear, random_state=rng)
    X, Y = sample_synthetic(head.components_in, head.components_out, 7, nonlinear=nonlinear, random_state=rng)
    np.testing.assert_array_equal(np.vstack([head.X_train, X]), whole.X_train)
    np.testing.assert_array_equal(np.vstack([head.Y_train, Y]), whole.Y_train)
    assert sample_synthetic(head.components_in, head.components_out, 0)[0].shape == (0, 15)


def test_sample_synthetic_checks_its_arguments():
    d = make_synthetic(3, 0, m=5, p_in=6, random_state=0)
    with pytest.raises(ValueError, match="must have 4 rows"):
        sample_synthetic(d.components_in[:3], d.components_out, 2)
    with pytest.raises(ValueError, match="n must be"):
        sample_synthetic(d.components_in, d.components_out, -1)
    with pytest.raises(ValueError, match="nonlinear must be a bool"):
        sample_synthetic(d.components_in, d.components_out, 2, nonlinear="yes")


@pytest.mark.parametrize("nonlinear", [False, True])
def test_signal_energy_is_the_mean_square_of_the_curves(nonlinear):
    """The closed form of E[(1/m) Σ_j y_j²] equals the Monte Carlo mean over 400,000 curves of the same draw (within
    5 standard errors of that mean), for both variants; it is what the noise of a stated SNR scales by."""
    d = make_synthetic(1, 0, m=50, nonlinear=nonlinear, random_state=3)
    _, Y = sample_synthetic(d.components_in, d.components_out, 400_000, nonlinear=nonlinear, random_state=4)
    energy = np.mean(Y**2, axis=1)  # per curve
    expected = synthetic_signal_energy(d.components_out, nonlinear=nonlinear)
    assert abs(energy.mean() - expected) < 5 * energy.std() / np.sqrt(len(energy))
    linear = synthetic_signal_energy(d.components_out)
    assert expected == pytest.approx(linear * (11 / 72) / (1 / 12) if nonlinear else linear)
    with pytest.raises(ValueError, match="components_out"):
        synthetic_signal_energy(d.components_out[:3])
