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
    """The float32 map keeps every direction (a float32 whitening once dropped the eigenpairs below its 1e-6
    threshold: rank 430 of 1000 on the learning curve's inputs against 740, 20x the test error; now both floor
    them), and where its floor does not bind it is the float64 map to float32's rounding."""
    X = _points(300, 5, seed=2)
    for whitening in ("eigen", "triangular"):
        f64 = NystromFeatures(Gaussian(0.3), X[:100], whitening=whitening)
        f32 = NystromFeatures(Gaussian(0.3), X[:100], dtype=np.float32, whitening=whitening)
        assert f32.n_features == f64.n_features == 100  # every direction kept, floored at 1e-6 (float32) / 1e-14
        assert f32.transform(X).dtype == np.float32
        assert f32.eigenvalues[-1] >= 1e-6 * f32.eigenvalues[0] > 0
    # the eigen map's columns are the eigendirections: compare them where neither floor binds
    f64 = NystromFeatures(Gaussian(0.3), X[:100], whitening="eigen")
    f32 = NystromFeatures(Gaussian(0.3), X[:100], dtype=np.float32, whitening="eigen")
    above = f64.eigenvalues > 1e-6 * f64.eigenvalues[0]
    ref = f64.transform(X)
    np.testing.assert_allclose(f32.transform(X)[:, above], ref[:, above], atol=2e-3 * np.abs(ref).max())
    # the triangular float32 map reproduces the centres' Gram matrix up to its floor and float32's rounding
    # amplified by cond(R) = 1e3: 1e-6 s_max + 1e3 · 100 · 6e-8
    t32 = NystromFeatures(Gaussian(0.3), X[:100], dtype=np.float32).transform(X[:100]).astype(np.float64)
    K = Gaussian(0.3).gram(X[:100])
    assert np.abs(t32 @ t32.T - K).max() < 1e-6 * f64.eigenvalues[0] + 1e3 * 100 * 6e-8
    with pytest.raises(ValueError, match="columns"):
        f64.transform(X[:, :3])
    for bad in (1.5, 0.0):
        with pytest.raises(ValueError, match="tol"):
            NystromFeatures(Gaussian(0.3), X[:10], tol=bad)
    with pytest.raises(ValueError, match="whitening"):
        NystromFeatures(Gaussian(0.3), X[:10], whitening="cholesky")


def _exact_gram(kernel, A, B) -> np.ndarray:
    """k(A, B) in float64 from the differences (cdist), the reference of the GEMM forms."""
    from scipy.spatial.distance import cdist

    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    if isinstance(kernel, Gaussian):
        return np.exp(-kernel.gamma * cdist(A, B, "sqeuclidean"))
    return np.exp(-kernel.gamma * cdist(A, B))


@pytest.mark.parametrize("kernel", [Gaussian(0.2), Laplacian(0.2)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gram_block_is_the_gram_matrix_to_its_rounding_bound(kernel, dtype):
    """Kernel.gram_block (one GEMM for ‖a‖² + ‖b‖² − 2a·b, the profile in place) against k from the differences,
    within the rounding bound of that form: the squared distance is off by at most δ = (d + 4) u (‖a‖² + ‖b‖²),
    which moves the Gaussian's k by k γ δ and the Laplacian's distance by δ / (2‖a − b‖), except where the
    Laplacian recomputes near pairs from their differences (there, by (d + 4) u ‖a − b‖): a coincident pair gives
    k = 1 exactly, where the GEMM form alone would give 1 − γ √δ (1e-7 γ in float64)."""
    rng = np.random.default_rng(0)
    d = 20
    A = rng.normal(size=(50, d)).astype(dtype)
    B = np.vstack([rng.normal(size=(30, d)), A[:3], A[3:5] + 1e-6]).astype(dtype)  # coincident and near pairs
    out = np.full((A.shape[0], B.shape[0]), np.nan, dtype=dtype)
    got = kernel.gram_block(A, B, out)
    assert got is out and got.dtype == dtype
    ref = _exact_gram(kernel, A, B)
    u = np.finfo(dtype).eps / 2
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    S = np.sum(A64**2, 1)[:, None] + np.sum(B64**2, 1)[None, :]
    delta = (d + 4) * u * S
    if isinstance(kernel, Gaussian):
        bound = ref * kernel.gamma * delta + 2 * u
    else:
        dist = -np.log(ref) / kernel.gamma
        recomputed = dist**2 < 0.01 * S
        err_dist = np.where(recomputed, (d + 4) * u * dist, delta / (2 * np.maximum(dist, 1e-300)))
        bound = ref * kernel.gamma * err_dist + 2 * u
        np.testing.assert_array_equal(got[np.arange(3), 30 + np.arange(3)], 1.0)
    assert np.all(np.abs(got - ref) <= bound), np.max(np.abs(got - ref) / bound)
    # the squared norms of B, when the caller keeps them, give the same block
    b2 = np.einsum("ij,ij->i", B, B)
    assert np.array_equal(kernel.gram_block(A, B, np.empty_like(out), b_sqnorms=b2), got)
    with pytest.raises(ValueError, match="rows"):
        kernel.gram_block(A, B, np.empty((3, B.shape[0]), dtype=dtype))
    with pytest.raises(ValueError, match="C-contiguous"):
        kernel.gram_block(A.astype(np.float64 if dtype == np.float32 else np.float32), B, out)


def test_gram_block_of_a_kernel_without_a_fast_path_is_its_gram():
    """The base class falls back on ``gram`` (a kernel that only defines ``_gram``)."""
    from dataclasses import dataclass

    from rffor.kernels import Kernel

    @dataclass(frozen=True)
    class Cauchy(Kernel):
        name = "cauchy"

        def _gram(self, A, B):
            return 1.0 / (1.0 + self.gamma * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))

    A, B = _points(7, 3), _points(4, 3, seed=1)
    out = np.empty((7, 4))
    assert Cauchy(0.5).gram_block(A, B, out) is out
    np.testing.assert_array_equal(out, Cauchy(0.5).gram(A, B))


def test_solve_upper_right_in_place():
    """``B R⁻¹`` written over B, for both dtypes, the strict lower triangle of R ignored."""
    from rffor._linalg import solve_upper_right

    rng = np.random.default_rng(1)
    for dtype, rtol in ((np.float64, 1e-12), (np.float32, 1e-4)):
        R = np.triu(rng.normal(size=(40, 40))) + 10 * np.eye(40)
        B = rng.normal(size=(25, 40))
        expected = np.linalg.solve(R.T, B.T).T
        R_junk = (R + np.tril(rng.normal(size=(40, 40)), -1)).astype(dtype)  # not read
        B_d = B.astype(dtype)
        got = solve_upper_right(B_d, R_junk)
        assert got is B_d
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol * np.abs(expected).max())
    with pytest.raises(ValueError, match="shape"):
        solve_upper_right(np.ones((3, 4)), np.eye(3))
    with pytest.raises(ValueError, match="C-contiguous"):
        solve_upper_right(np.ones((4, 3)).T, np.eye(4))


def _curve_points(n=300, seed=4):
    """Points on a curve in R^3: the centres' Gram matrix is numerically singular (the floor binds)."""
    t = np.random.default_rng(seed).uniform(size=(n, 1))
    return np.hstack([np.sin(3 * t), np.cos(2 * t), t**2])


@pytest.mark.parametrize("kernel", [Gaussian(0.7), Laplacian(0.7)])
@pytest.mark.parametrize("whitening", ["triangular", "eigen"])
@pytest.mark.parametrize("points", ["cloud", "curve"])
def test_nystrom_features_equal_a_float64_reference(kernel, whitening, points):
    """φ(X) against its definition computed apart in float64: the kernel from the differences (cdist), the
    floored K̃ = U diag(s̃) Uᵀ from NumPy's eigh, and the whitening W (Wᵀ W = K̃⁻¹) applied by SciPy's triangular
    solve (triangular) or a product (eigen), for blocks of 1, 7 and all rows, with and without ``out=``/``work=``.

    Tolerance per row: 10 M u cond(W) (‖φ_ref(x)‖ + 1), with cond(W) = (s̃_max / s̃_min)^{1/2}: the kernel row and
    the whitening each carry a few units of rounding u (the GEMM form of the kernel, the backward error of the
    triangular solve or of the product), amplified by the whitening's condition number, at most 1e7 at the floor
    1e-14. On the cloud (floor not binding, cond(W) about 1e2) that is about 1e-11; on the curve with the
    Gaussian (cond(W) = 1e7) about 1e-6, where only the rotation-invariant Nyström kernel, checked below, is
    better determined."""
    X = _points(300, 4, seed=1) if points == "cloud" else _curve_points()
    M = 60
    C = X[:M]
    f = NystromFeatures(kernel, C, whitening=whitening)
    s, U = np.linalg.eigh(_exact_gram(kernel, C, C))
    s = np.maximum(s, 0)
    s_t = np.maximum(s, f.tol * s.max())
    np.testing.assert_allclose(np.sort(f.eigenvalues), s_t, rtol=1e-8, atol=1e-14 * s.max())
    K_t = (U * s_t) @ U.T
    k_ref = _exact_gram(kernel, X, C)
    if whitening == "triangular":
        from scipy.linalg import solve_triangular

        R = f.factor
        assert np.array_equal(R, np.triu(R)) and np.all(np.diag(R) > 0)
        np.testing.assert_allclose(R.T @ R, K_t, atol=100 * M * 1.1e-16 * s.max())  # K̃ = RᵀR (its Cholesky)
        ref = solve_triangular(R, k_ref.T, trans="T", lower=False).T  # k R⁻¹
    else:
        P = f.projection  # U diag(s̃)^{-1/2}, whose inverse is diag(s̃) Pᵀ: K̃ = P diag(s̃)² Pᵀ
        np.testing.assert_allclose((P * f.eigenvalues**2) @ P.T, K_t, atol=100 * M * 1.1e-16 * s.max())
        ref = k_ref @ f.projection
    cond = np.sqrt(f.eigenvalues[0] / f.eigenvalues[-1])
    if points == "cloud":
        assert cond < 1e3
    elif isinstance(kernel, Gaussian):  # the Laplacian's spectrum decays slowly: its floor does not bind here
        assert cond > 1e6 and np.sum(f.eigenvalues == f.eigenvalues[-1]) > 10  # the floor binds
    bound = 10 * M * 1.1e-16 * cond * (np.linalg.norm(ref, axis=1) + 1)
    for block in (None, 1, 7, X.shape[0]):
        out = None if block is None else np.empty((X.shape[0], M))
        work = None if block is None else np.empty((block, M))
        got = f.transform(X, out=out, work=work)
        assert got.shape == (X.shape[0], M) and (out is None or got is out)
        err = np.linalg.norm(got - ref, axis=1)
        assert np.all(err <= bound), np.max(err / bound)
    # the Nyström kernel φ(x)·φ(z) = k(x, C) K̃⁻¹ k(C, z), the same for both whitenings, and K on the centres
    P = f.transform(X)
    other = NystromFeatures(kernel, C, whitening="eigen" if whitening == "triangular" else "triangular")
    Q = other.transform(X)
    np.testing.assert_allclose(P @ P.T, Q @ Q.T, atol=1e3 * M * 1.1e-16 * cond)
    np.testing.assert_allclose(P[:M] @ P[:M].T, _exact_gram(kernel, C, C), atol=1e-9)


@pytest.mark.parametrize("kernel", [Gaussian(0.7), Laplacian(0.7)])
@pytest.mark.parametrize("whitening", ["triangular", "eigen"])
@pytest.mark.parametrize("points", ["cloud", "curve"])
def test_nystrom_kernel_basis_gives_the_features_products(kernel, whitening, points):
    """FALKON's parametrisation (MATH.md §5.1) as the passes use it: ``k(X, C) (Wᵀ B) = φ(X) B`` and
    ``W (k(X, C)ᵀ V) = φ(X)ᵀ V`` against the float64 reference features of the test above, within the same
    per-row bound (10 M u cond(W)), times ‖B‖₂ or ‖V‖ (the floor binds on the curve: cond(W) = 1e7); stacks of
    K coefficient matrices give each one's result; and ``whiten(kernel_block(X))`` is ``transform(X)`` to the bit."""
    X = _points(300, 4, seed=1) if points == "cloud" else _curve_points()
    M = 60
    C = X[:M]
    f = NystromFeatures(kernel, C, whitening=whitening)
    s, U = np.linalg.eigh(_exact_gram(kernel, C, C))
    s_t = np.maximum(np.maximum(s, 0), f.tol * s.max())
    ref = _exact_gram(kernel, X, C) @ (U / np.sqrt(s_t)) @ U.T  # k(X, C) K̃^{-1/2}, one φ of the Nyström kernel
    ref = ref @ np.linalg.lstsq(ref[:M], f.transform(C), rcond=None)[0]  # rotated to f's whitening
    cond = np.sqrt(f.eigenvalues[0] / f.eigenvalues[-1])
    rng = np.random.default_rng(7)
    B = rng.normal(size=(M, 5))
    V = rng.normal(size=(X.shape[0], 5))
    K = f.kernel_block(X)
    assert K.shape == (X.shape[0], M) and np.array_equal(K, _gram_block_reference(f, X))
    got = K @ f.to_kernel_basis(B)
    bound = 10 * M * 1.1e-16 * cond * (np.linalg.norm(ref, axis=1) + 1) * np.linalg.norm(B, 2)
    assert np.all(np.linalg.norm(got - ref @ B, axis=1) <= bound)
    g = f.from_kernel_basis(K.T @ V)
    assert np.linalg.norm(g - ref.T @ V) <= 10 * M * 1.1e-16 * cond * (np.linalg.norm(ref) + 1) * np.linalg.norm(V)
    Bs = np.stack([B, -2 * B, B[:, ::-1]])
    np.testing.assert_array_equal(f.to_kernel_basis(Bs)[2], f.to_kernel_basis(B[:, ::-1]))
    np.testing.assert_allclose(f.from_kernel_basis(np.stack([K.T @ V, K.T @ V]))[1], g, rtol=1e-12, atol=0)
    assert np.array_equal(f.whiten(f.kernel_block(X)), f.transform(X))
    assert np.array_equal(f.whiten(np.asarray(K, order="F")), f.transform(X))  # a non-C block is copied, not wrong
    with pytest.raises(ValueError, match="columns"):
        f.whiten(K[:, :10])


def _gram_block_reference(f, X):
    """k(X, C) as :meth:`NystromFeatures.transform` computes it before whitening (translated rows and centres)."""
    K = np.empty((X.shape[0], f.n_centres))
    f.kernel.gram_block(X - f._shift, f._shifted_centres, K, b_sqnorms=f._norms)
    return K


def test_nystrom_triangular_features_of_the_centres_are_the_cholesky_factor():
    """With the floor not binding, φ(c_i) = row i of Rᵀ (K = RᵀR): the features of the centres are lower
    triangular, φ(c_1) = (1, 0, …, 0); and the two whitenings differ by an orthogonal matrix."""
    C = _points(40, 4, seed=3)
    f = NystromFeatures(Gaussian(0.5), C)
    P = f.transform(C)
    assert np.abs(np.triu(P, 1)).max() < 1e-12
    np.testing.assert_allclose(np.diag(P), np.diag(f.factor), rtol=1e-12)
    Q = np.linalg.lstsq(NystromFeatures(Gaussian(0.5), C, whitening="eigen").transform(C), P, rcond=None)[0]
    np.testing.assert_allclose(Q.T @ Q, np.eye(40), atol=1e-9)


def test_nystrom_memory_per_block_is_bounded():
    """The triangular pass allocates nothing of the output's size: beyond ``out``, only the block's translated
    rows (and for the Laplacian the mask of near pairs, a byte per entry); the eigen pass holds one kernel block
    of ``work``'s rows."""
    import tracemalloc

    X = _points(3000, 5, seed=6)
    for kernel in (Gaussian(0.5), Laplacian(0.5)):
        f = NystromFeatures(kernel, X[:200])
        out = np.empty((3000, 200))
        f.transform(X[:10])  # imports, BLAS buffers
        tracemalloc.start()
        f.transform(X, out=out)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < out.nbytes / 4, (kernel, peak, out.nbytes)  # the eigen pass: a kernel block, out.nbytes


def test_nystrom_states_of_both_whitenings_and_of_older_models():
    """get_state / from_state for both whitenings; a state or pickle of a map saved before the triangular
    whitening existed (no ``whitening``, a ``projection``) loads as the eigen map it was."""
    X = _points(50, 3, seed=7)
    for whitening in ("triangular", "eigen"):
        f = NystromFeatures(Laplacian(0.4), X[:20], whitening=whitening)
        spec, arrays = f.get_state()
        assert spec["whitening"] == whitening and ("factor" in arrays) == (whitening == "triangular")
        g = feature_map_from_state(json.loads(json.dumps(spec)), {k: np.array(v) for k, v in arrays.items()})
        assert g.whitening == whitening and np.array_equal(g.transform(X), f.transform(X))
    old_spec = {k: v for k, v in spec.items() if k != "whitening"}
    g = feature_map_from_state(old_spec, arrays)
    assert g.whitening == "eigen" and np.array_equal(g.transform(X), f.transform(X))
    state = {k: v for k, v in f.__getstate__().items() if k != "whitening"}
    h = NystromFeatures.__new__(NystromFeatures)
    h.__setstate__(state)
    assert h.whitening == "eigen" and np.array_equal(h.transform(X), f.transform(X))
    bad = dict(arrays, projection=arrays["projection"][:, :-1])
    with pytest.raises(ValueError, match="projection"):
        feature_map_from_state(spec, bad)
    spec_t, arrays_t = NystromFeatures(Laplacian(0.4), X[:20]).get_state()
    with pytest.raises(ValueError, match="factor"):
        feature_map_from_state(spec_t, dict(arrays_t, factor=-arrays_t["factor"]))
    with pytest.raises(ValueError, match="whitening"):
        feature_map_from_state(dict(spec_t, whitening="qr"), arrays_t)


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
