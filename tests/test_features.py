"""Tests of rffor.features: random Fourier features and the exact output factor (MATH.md §4, §5)."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from rffor.features import (
    ExactOutputFactor,
    NystromFeatures,
    RandomFourierFeatures,
    RandomOutputFeatures,
    feature_map_from_state,
    make_output_features,
    seed_sequence,
)
from rffor.kernels import Gaussian, Laplacian

# one BLAS thread: on a busy 2-core machine OpenBLAS threads spin-wait (an eigh of 1000 x 1000 took 14 s, not 0.15)
pytestmark = pytest.mark.usefixtures("single_blas_thread")


def _points(n=80, d=5, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, size=(n, d))


# ---------------------------------------------------------------------------------------------------------------
# random Fourier features
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", [Gaussian(0.5), Laplacian(0.5)])
def test_rff_error_shrinks_like_inverse_sqrt_D(kernel):
    """RMS error of φ(x)·φ(z) against k(x, z), averaged over seeds, has log-log slope −1/2 in D."""
    X = _points()
    K = kernel.gram(X)
    Ds = np.array([32, 64, 128, 256, 512, 1024, 2048])
    errs = []
    for D in Ds:
        e = []
        for seed in range(6):
            Phi = RandomFourierFeatures(kernel, int(D), X.shape[1], seed=seed, dtype=np.float64).transform(X)
            e.append(np.sqrt(np.mean((Phi @ Phi.T - K) ** 2)))
        errs.append(np.mean(e))
    slope = np.polyfit(np.log(Ds), np.log(errs), 1)[0]
    assert -0.6 < slope < -0.4, (slope, errs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rff_unit_norm_shape_and_dtype(dtype):
    X = _points(30, 3)
    f = RandomFourierFeatures(Gaussian(1.0), 64, 3, seed=1, dtype=dtype)
    Phi = f.transform(X)
    assert Phi.shape == (30, 64) and Phi.dtype == dtype
    np.testing.assert_allclose(np.linalg.norm(Phi, axis=1), 1.0, rtol=1e-5 if dtype == np.float32 else 1e-12)
    assert f.W.shape == (3, 32) and f.W.dtype == dtype


def test_rff_float32_matches_float64():
    X = _points(50, 8)
    f32 = RandomFourierFeatures(Gaussian(0.3), 200, 8, seed=3, dtype=np.float32).transform(X)
    f64 = RandomFourierFeatures(Gaussian(0.3), 200, 8, seed=3, dtype=np.float64).transform(X)
    np.testing.assert_allclose(f32, f64, atol=1e-6)


def test_rff_regenerated_from_seed():
    X = _points(20, 4)
    a = RandomFourierFeatures(Gaussian(1.0), 100, 4, seed=(7, 0))
    b = RandomFourierFeatures(Gaussian(1.0), 100, 4, seed=(7, 0))
    c = RandomFourierFeatures(Gaussian(1.0), 100, 4, seed=(7, 1))
    assert np.array_equal(a.transform(X), b.transform(X))
    assert not np.allclose(a.W, c.W)
    # the frequencies are not pickled, and come back identical
    a.W  # noqa: B018 - draw them
    blob = pickle.dumps(a)
    assert len(blob) < 2000
    a2 = pickle.loads(blob)
    assert a2._W is None
    assert np.array_equal(a2.transform(X), a.transform(X))
    # the saved state rebuilds the same map (from the stored frequencies, not the seed)
    spec, arrays = a.get_state()
    a3 = feature_map_from_state(json.loads(json.dumps(spec)), {k: v.copy() for k, v in arrays.items()})
    assert type(a3) is RandomFourierFeatures
    assert np.array_equal(a3.transform(X), a.transform(X))
    arrays["frequencies"] = arrays["frequencies"][:, :-1]
    with pytest.raises(ValueError, match="frequencies"):
        feature_map_from_state(spec, arrays)


def test_rff_seed_streams_are_independent():
    s = seed_sequence((5, 0)).generate_state(4)
    assert not np.array_equal(s, seed_sequence((5, 1)).generate_state(4))
    assert not np.array_equal(s, seed_sequence((5, 2, 0, 0)).generate_state(4))
    assert np.array_equal(seed_sequence(5).generate_state(4), np.random.SeedSequence(5).generate_state(4))


def test_rff_blocks_and_out():
    X = _points(9000, 2)  # more rows than one internal block
    f = RandomFourierFeatures(Gaussian(1.0), 10, 2, seed=0, dtype=np.float64)
    Phi = f.transform(X)
    np.testing.assert_allclose(Phi[8500:], f.transform(X[8500:]), rtol=0, atol=1e-15)
    out = np.empty((9000, 10))
    assert f.transform(X, out=out) is out


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_features": 7}, "even"),
        ({"n_features": 0}, "n_features"),
        ({"dim": 0}, "dim"),
        ({"seed": -1}, "seed"),
        ({"seed": "a"}, "seed"),
        ({"dtype": np.int32}, "dtype"),
    ],
)
def test_rff_argument_errors(kwargs, match):
    args = {"kernel": Gaussian(1.0), "n_features": 8, "dim": 2, "seed": 0} | kwargs
    with pytest.raises(ValueError, match=match):
        RandomFourierFeatures(**args)


def test_rff_kernel_type_and_input_shape_errors():
    with pytest.raises(TypeError, match="kernel"):
        RandomFourierFeatures("gaussian", 8, 2, seed=0)
    f = RandomFourierFeatures(Gaussian(1.0), 8, 2, seed=0)
    with pytest.raises(ValueError, match="dim=2"):
        f.transform(np.ones((3, 4)))


# ---------------------------------------------------------------------------------------------------------------
# exact output factor
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gamma", [30.0, 100.0, 1000.0])
def test_exact_factor_reproduces_K_theta_on_grid(gamma):
    theta = np.linspace(0, 1, 60)
    kt = Gaussian(gamma)
    f = ExactOutputFactor(kt, theta, dtype=np.float64)
    Phi = f.transform(theta)
    K = kt.gram(theta)
    np.testing.assert_allclose(Phi @ Phi.T, K, atol=1e-8)
    # Φ_Θᵀ Φ_Θ / m = diag(t) / m, with C_theta its diagonal
    np.testing.assert_allclose(Phi.T @ Phi / 60, np.diag(f.C_theta), atol=1e-10)
    assert f.n_features == Phi.shape[1] <= 60


def test_exact_factor_rank_and_tolerance():
    theta = np.linspace(0, 1, 50)
    small = ExactOutputFactor(Gaussian(30.0), theta, tol=1e-6)
    big = ExactOutputFactor(Gaussian(30.0), theta, tol=1e-12)
    assert small.n_features < big.n_features
    assert np.all(small.eigenvalues > 1e-6 * small.eigenvalues[0])
    # MATH.md §5: rank 21 for γ_θ = 30 on 50 points at the tolerance of its measurement (1e-10; the default is
    # lower now, rffor.features.DEFAULT_OUTPUT_RANK_TOL)
    assert ExactOutputFactor(Gaussian(30.0), theta, tol=1e-10).n_features in range(19, 24)


def test_exact_factor_nystrom_off_grid():
    theta = np.linspace(0, 1, 40)
    kt = Gaussian(30.0)
    f = ExactOutputFactor(kt, theta, dtype=np.float64)
    new = np.linspace(0.013, 0.987, 33)  # between grid points
    P = f.transform(new)
    np.testing.assert_allclose(P @ f.transform(theta).T, kt.gram(new, theta), atol=1e-6)
    np.testing.assert_allclose(P @ P.T, kt.gram(new), atol=1e-5)


def test_exact_factor_float32_and_grid_identity():
    theta = np.linspace(0, 1, 30)
    f = ExactOutputFactor(Gaussian(50.0), theta)
    assert f.grid_features.dtype == np.float32
    assert np.array_equal(f.transform(theta), f.grid_features)
    f64 = ExactOutputFactor(Gaussian(50.0), theta, dtype=np.float64)
    np.testing.assert_allclose(f.transform(theta[3:7] + 0.001), f64.transform(theta[3:7] + 0.001), atol=1e-5)


@pytest.mark.parametrize(
    "kwargs, match", [({"tol": 1.0}, "tol"), ({"tol": -1e-3}, "tol"), ({"theta_grid": []}, "theta_grid")]
)
def test_exact_factor_errors(kwargs, match):
    args = {"kernel_theta": Gaussian(1.0), "theta_grid": np.linspace(0, 1, 5)} | kwargs
    with pytest.raises(ValueError, match=match):
        ExactOutputFactor(**args)


# ---------------------------------------------------------------------------------------------------------------
# random output features and the factory
# ---------------------------------------------------------------------------------------------------------------


def test_random_output_features_multidim_theta():
    rng = np.random.default_rng(0)
    theta = rng.uniform(0, 1, size=(40, 2))
    kt = Gaussian(5.0)
    f = RandomOutputFeatures(kt, 4000, seed=0, dtype=np.float64, dim=2)
    P = f.transform(theta)
    assert P.shape == (40, 4000)
    assert np.max(np.abs(P @ P.T - kt.gram(theta))) < 0.1


def test_make_output_features():
    theta = np.linspace(0, 1, 20)
    ex = make_output_features("exact", Gaussian(30.0), theta)
    assert isinstance(ex, ExactOutputFactor)
    rf = make_output_features("rff", Gaussian(30.0), theta, n_features=64, seed=(1, 1))
    assert isinstance(rf, RandomOutputFeatures) and rf.n_features == 64 and rf.dim == 1
    assert rf.transform(theta).shape == (20, 64)
    with pytest.raises(ValueError, match="output_features"):
        make_output_features("nope", Gaussian(30.0), theta)
    with pytest.raises(ValueError, match="even"):
        make_output_features("rff", Gaussian(30.0), theta, n_features=63)


@pytest.mark.parametrize("kind", ["rff", "exact", "rff_theta", "nystrom"])
def test_feature_map_state_round_trip_is_exact(kind):
    """get_state / feature_map_from_state rebuilds every kind of map bit for bit, through JSON for the spec."""
    theta = np.linspace(0, 1, 30)
    if kind == "rff":
        f = RandomFourierFeatures(Laplacian(0.5), 40, 3, seed=(3, 0))
        pts = _points(20, 3)
    elif kind == "nystrom":
        f = NystromFeatures(Gaussian(0.5), _points(30, 3, seed=5))
        pts = _points(20, 3)
    else:
        f = make_output_features("exact" if kind == "exact" else "rff", Gaussian(50.0), theta, n_features=40, seed=4)
        pts = np.linspace(-0.1, 1.1, 17)
    spec, arrays = f.get_state()
    assert spec["kind"] == kind
    g = feature_map_from_state(json.loads(json.dumps(spec)), {k: np.array(v) for k, v in arrays.items()})
    assert type(g) is type(f) and g.n_features == f.n_features and g.dtype == f.dtype
    assert np.array_equal(g.transform(pts), f.transform(pts))
    with pytest.raises(ValueError, match="unknown feature map kind"):
        feature_map_from_state({**spec, "kind": "nope"}, arrays)


# ---------------------------------------------------------------------------------------------------------------
# Nyström features
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", [Gaussian(0.7), Laplacian(0.7)])
def test_nystrom_is_exact_at_the_centres_and_converges_as_centres_grow(kernel):
    """φ(c_i)·φ(c_j) = k(c_i, c_j) on the centres (to the kept rank), and on other points the error of
    φ(x)·φ(z) against k(x, z) shrinks as centres are added, to 0 when every point is a centre."""
    X = _points(200, 4, seed=1)
    K = kernel.gram(X)
    errors = []
    for M in (10, 40, 200):
        f = NystromFeatures(kernel, X[:M])
        P = f.transform(X)
        np.testing.assert_allclose(P[:M] @ P[:M].T, K[:M, :M], atol=1e-9)
        errors.append(np.abs(P @ P.T - K).max())
    assert errors[0] > errors[1] > errors[2] and errors[2] < 1e-8, errors
    # the projection view: the residual of k(·, x) off the span of the centres' is orthogonal (PSD remainder)
    f = NystromFeatures(kernel, X[:40])
    P = f.transform(X)
    assert np.linalg.eigvalsh(K - P @ P.T).min() > -1e-9


def test_nystrom_float32_blocks_and_rank():
    X = _points(300, 5, seed=2)
    f64 = NystromFeatures(Gaussian(0.3), X[:100])
    f32 = NystromFeatures(Gaussian(0.3), X[:100], dtype=np.float32)
    assert f32.n_features == f64.n_features == 100  # every direction kept, floored at 1e-6 (float32) / 1e-14
    above = f64.eigenvalues > 1e-6 * f64.eigenvalues[0]  # where the two floors do not bind, the same map
    ref = f64.transform(X)
    np.testing.assert_allclose(f32.transform(X)[:, above], ref[:, above], atol=2e-3 * np.abs(ref).max())
    out = np.empty((300, f64.n_features))
    got = f64.transform(X, out=out, work=np.empty((7, 100)))  # blocks of 7 rows
    assert got is out
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12)
    g = pickle.loads(pickle.dumps(f64))
    assert np.array_equal(g.transform(X), ref)
    with pytest.raises(ValueError, match="columns"):
        f64.transform(X[:, :3])
    for bad in (1.5, 0.0):
        with pytest.raises(ValueError, match="tol"):
            NystromFeatures(Gaussian(0.3), X[:10], tol=bad)


def test_nystrom_keeps_the_whole_span_of_the_centres():
    """The floored map spans every k(c_j, ·), even where K_MM is numerically singular: least squares on the
    features reproduces a function ``f = k(·, C) a`` to rounding, which a map dropping the eigenpairs below the
    floor cannot (checked on the same data, so the test has teeth); duplicated centres give a zero feature, not
    an error."""
    rng = np.random.default_rng(4)
    t = rng.uniform(size=(400, 1))
    X = np.hstack([np.sin(3 * t), np.cos(2 * t), t**2])  # a curve in R^3: K_MM is nearly singular
    kernel = Gaussian(0.5)
    C = X[:60]
    f = NystromFeatures(kernel, C)
    s = np.linalg.eigvalsh(kernel.gram(C))
    assert f.n_features == 60 and (s < 1e-13 * s.max()).sum() > 10  # many directions below the old cut
    w, U = np.linalg.eigh(kernel.gram(C))
    target = kernel.gram(X, C) @ U[:, w < 1e-13 * w.max()].sum(axis=1)  # a function along the smallest directions
    P = f.transform(X)
    fit = P @ np.linalg.lstsq(P, target, rcond=None)[0]
    assert np.linalg.norm(fit - target) < 1e-3 * np.linalg.norm(target)
    keep = f.eigenvalues > 1e-13 * f.eigenvalues[0]  # the truncating map of the earlier releases
    Pt = P[:, keep]
    truncated = Pt @ np.linalg.lstsq(Pt, target, rcond=None)[0]
    assert np.linalg.norm(truncated - target) > 100 * np.linalg.norm(fit - target)
    dup = NystromFeatures(kernel, np.vstack([C[:5], C[:5]]))
    assert dup.n_features == 10 and np.all(np.isfinite(dup.transform(X)))


def test_orthogonal_random_features_have_the_gaussian_law_and_a_lower_error():
    """ORF (Yu et al. 2016): frequency norms and directions as N(0, 2γ I), orthogonal within a block; the kernel
    estimate's mean squared error, averaged over 20 seeds, below that of plain random features at the same D
    (Yu et al. Theorem 1; measured here about 0.5x); saved and rebuilt exactly; refused for a non-Gaussian kernel."""
    kernel, d, D = Gaussian(0.1), 16, 64
    X = _points(60, d, seed=3)
    K = kernel.gram(X)
    err = {False: [], True: []}
    for seed in range(20):
        for orth in err:
            f = RandomFourierFeatures(kernel, D, d, seed=seed, dtype=np.float64, orthogonal=orth)
            P = f.transform(X)
            err[orth].append(np.mean((P @ P.T - K) ** 2))
    assert np.mean(err[True]) < 0.8 * np.mean(err[False]), (np.mean(err[True]), np.mean(err[False]))
    f = RandomFourierFeatures(kernel, 2 * d, d, seed=0, dtype=np.float64, orthogonal=True)
    W = f.W / np.sqrt(2 * kernel.gamma)
    G = W.T @ W
    np.testing.assert_allclose(G - np.diag(np.diag(G)), 0, atol=1e-10)  # one block: orthogonal directions
    norms = np.sqrt(np.diag(G))
    big = RandomFourierFeatures(kernel, 4000, d, seed=1, dtype=np.float64, orthogonal=True).W / np.sqrt(0.2)
    assert abs(np.mean(np.sum(big**2, axis=0)) - d) < 0.05 * d  # E‖ω‖² = d for N(0, I_d)
    assert norms.shape == (d,)
    spec, arrays = f.get_state()
    g = feature_map_from_state(json.loads(json.dumps(spec)), arrays)
    assert g.orthogonal and np.array_equal(g.transform(X), f.transform(X))
    with pytest.raises(ValueError, match="Gaussian"):
        RandomFourierFeatures(Laplacian(0.1), D, d, seed=0, orthogonal=True)
