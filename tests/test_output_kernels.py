"""Output kernels (rffor.output_kernels, MATH.md §8): Gram matrices against their definitions written here, factors
``K_Y = V Vᵀ`` by thin SVD, eigh and one-hot, the embeddings, the capability queries the random-feature path will
ask, the closed-form decoders against brute force, validation and JSON specs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rffor.output_kernels import (
    DEFAULT_RANK_TOL,
    Delta,
    Gaussian,
    Hellinger,
    Linear,
    Normalized,
    OutputKernel,
    Tanimoto,
    output_kernel_from_spec,
    project_simplex,
)

pytestmark = pytest.mark.usefixtures("single_blas_thread")


@pytest.fixture
def label_sets(rng):
    Y = (rng.random((40, 7)) < 0.35).astype(float)
    Y[3] = 0.0  # an empty label set
    Y[5] = 0.0
    return Y


def _ref_gram(name, Y1, Y2):
    """The definitions of the module docstring's table, one pair at a time."""
    out = np.empty((len(Y1), len(Y2)))
    for i, j in itertools.product(range(len(Y1)), range(len(Y2))):
        a, b = Y1[i], Y2[j]
        if name == "linear":
            out[i, j] = a @ b
        elif name == "hellinger":
            out[i, j] = np.sum(np.sqrt(a * b))
        elif name == "gaussian":
            out[i, j] = np.exp(-0.7 * np.sum((a - b) ** 2))
        elif name == "tanimoto":
            A, B = set(np.flatnonzero(a)), set(np.flatnonzero(b))
            out[i, j] = 1.0 if not (A | B) else len(A & B) / len(A | B)  # the Jaccard index of the sets
        elif name == "normalized-linear":
            na, nb = np.linalg.norm(a), np.linalg.norm(b)
            out[i, j] = 0.0 if na == 0 or nb == 0 else a @ b / (na * nb)
    return out


KERNELS = {
    "linear": Linear(),
    "hellinger": Hellinger(),
    "gaussian": Gaussian(0.7),
    "tanimoto": Tanimoto(),
    "normalized-linear": Normalized(Linear()),
}


@pytest.mark.parametrize("name", list(KERNELS))
def test_gram_matches_its_definition_and_is_psd(name, label_sets, rng):
    k = KERNELS[name]
    Y2 = (rng.random((9, 7)) < 0.5).astype(float)
    assert np.allclose(k.gram(label_sets, Y2), _ref_gram(name, label_sets, Y2), atol=1e-14)
    K = k.gram(label_sets)
    assert np.allclose(K, K.T)
    assert np.linalg.eigvalsh(K).min() > -1e-12 * np.abs(K).max()
    assert np.allclose(k.diag(label_sets), np.diag(K), atol=1e-14)


@pytest.mark.parametrize("name", list(KERNELS))
def test_factor_reproduces_the_gram_matrix(name, label_sets):
    """V Vᵀ = K_Y up to the rank tolerance; V has orthogonal columns of norms √t; with an embedding, Ψ = V T with T
    of orthonormal rows (the thin SVD), otherwise V comes from eigh."""
    k = KERNELS[name]
    f = k.factor(label_sets)
    K = k.gram(label_sets)
    assert np.abs(f.V @ f.V.T - K).max() <= 1e-12 * np.abs(K).max()
    G = f.V.T @ f.V
    assert np.allclose(G, np.diag(f.eigenvalues), atol=1e-10 * f.eigenvalues[0])
    assert np.all(np.diff(f.eigenvalues) <= 1e-12 * f.eigenvalues[0])
    assert f.method == ("svd" if k.has_embedding else "eigh")
    if k.has_embedding:
        assert np.allclose(f.V @ f.to_embedding, k.embedding(label_sets), atol=1e-13)
        assert np.allclose(f.to_embedding @ f.to_embedding.T, np.eye(f.rank), atol=1e-13)
        # the same K_Y as the Gram matrix's eigendecomposition: equal kept eigenvalues
        t = np.linalg.eigvalsh(K)[::-1][: f.rank]
        assert np.allclose(t, f.eigenvalues, rtol=1e-10, atol=1e-12 * t[0])


def test_rank_tolerance_bounds_the_dropped_part(rng):
    """Dropping the eigenpairs with t_j ≤ tol·t_max changes K_Y by at most tol·‖K_Y‖₂ (spectral norm)."""
    x = rng.uniform(-1, 1, (60, 1))
    k = Gaussian(2.0)
    K = k.gram(x)
    for tol in (1e-4, 1e-8, DEFAULT_RANK_TOL):
        f = k.factor(x, tol)
        assert f.rank < 60
        assert np.linalg.norm(K - f.V @ f.V.T, 2) <= tol * np.linalg.norm(K, 2) * (1 + 1e-6) + 1e-14
    with pytest.raises(ValueError, match="rank_tol"):
        k.factor(x, 1.5)


def test_hellinger_is_the_linear_kernel_on_square_roots(rng):
    H = rng.dirichlet(np.ones(5), size=20)
    assert np.allclose(Hellinger().gram(H), Linear().gram(np.sqrt(H)))
    assert np.allclose(Hellinger().embedding(H), np.sqrt(H))
    # the induced loss is the squared Hellinger distance Σ (√y − √y')²
    K = Hellinger().gram(H)
    D = np.diag(K)[:, None] + np.diag(K)[None, :] - 2 * K
    assert np.allclose(D[0, 1], np.sum((np.sqrt(H[0]) - np.sqrt(H[1])) ** 2))


def test_delta_factor_is_one_hot_and_its_embedding_needs_n_classes(rng):
    y = rng.integers(0, 5, 50)
    y[:3] = 7
    k = Delta()
    f = k.factor(y)
    assert f.method == "one-hot" and f.rank == len(np.unique(y))
    assert np.array_equal(f.V @ f.V.T, (y[:, None] == y[None, :]).astype(float))
    assert np.array_equal(f.eigenvalues, np.sort(np.bincount(y)[np.bincount(y) > 0])[::-1].astype(float))
    assert not k.has_embedding and f.to_embedding is None
    with pytest.raises(ValueError, match="no finite explicit embedding"):
        k.embedding(y)
    k8 = Delta(n_classes=8)
    f8 = k8.factor(y)
    assert k8.has_embedding
    assert np.array_equal(f8.V @ f8.to_embedding, k8.embedding(y))
    assert np.array_equal(k8.embedding(y) @ k8.embedding(y).T, k8.gram(y))


def test_capabilities_for_the_random_feature_path(rng):
    """Only kernels with a spectral law draw frequencies; the others refuse with what to use instead."""
    assert Gaussian(1.0).has_spectral_law and Normalized(Gaussian(1.0)).has_spectral_law
    for k in (Linear(), Hellinger(), Tanimoto(), Delta(3), Normalized(Linear()), Normalized(Tanimoto())):
        assert not k.has_spectral_law
    with pytest.raises(ValueError, match="no spectral law"):
        Delta(3).sample_frequencies(10, 1, rng)
    with pytest.raises(ValueError, match="Nyström"):
        Tanimoto().sample_frequencies(10, 4, rng)
    with pytest.raises(ValueError, match="embedding"):
        Linear().sample_frequencies(10, 4, rng)
    assert Linear().coordinatewise and Hellinger().coordinatewise
    assert not Normalized(Linear()).coordinatewise and not Gaussian(1.0).coordinatewise
    # random Fourier features of the Gaussian output kernel: E[cos ωᵀ(y − y')] = k(y, y') (ω ~ N(0, 2γ I))
    y = rng.standard_normal((4, 3))
    W = Gaussian(0.4).sample_frequencies(200_000, 3, np.random.default_rng(1))
    Z = np.hstack([np.cos(y @ W), np.sin(y @ W)]) / np.sqrt(W.shape[1])
    assert np.abs(Z @ Z.T - Gaussian(0.4).gram(y)).max() < 0.01


def test_normalized_kernel_has_a_unit_diagonal(label_sets):
    k = Normalized(Linear())
    d = k.diag(label_sets)
    assert np.array_equal(d, (label_sets.sum(1) > 0).astype(float))  # 0 for the empty sets (ψ = 0)
    E = k.embedding(label_sets)
    assert np.allclose(E @ E.T, k.gram(label_sets))
    with pytest.raises(TypeError, match="base"):
        Normalized(3.0)


@pytest.mark.parametrize(
    ("kernel", "y", "match"),
    [
        (Tanimoto(), [[0, 1], [0.5, 1]], "binary"),
        (Hellinger(), [[0.5, -0.1], [0.3, 0.7]], "non-negative"),
        (Linear(), [[0.5, np.inf]], "inf"),
        (Linear(), [[0.5, np.nan]], "NaN"),
        (Delta(), [0, 1.5, 2], "class labels"),
        (Delta(), [0, -1], "class labels"),
        (Delta(3), [0, 1, 3], "n_classes"),
        (Delta(), [[0, 1], [1, 0]], "1-D"),
        (Linear(), np.zeros((0, 2)), "empty"),
        (Gaussian(1.0), np.zeros((2, 2, 2)), "1-D or 2-D"),
    ],
)
def test_bad_outputs_are_refused_naming_the_argument(kernel, y, match):
    with pytest.raises(ValueError, match=match) as info:
        kernel.check(np.asarray(y, dtype=float), name="candidates")
    assert "candidates" in str(info.value)


def test_nan_is_accepted_only_when_asked():
    Y = np.array([[1.0, np.nan], [0.0, 1.0]])
    assert np.isnan(Linear().check(Y, allow_nan=True)).sum() == 1
    with pytest.raises(ValueError, match="NaN"):
        Normalized(Linear()).check(Y, allow_nan=True)


@pytest.mark.parametrize(
    "kernel",
    [Linear(), Hellinger(), Gaussian(0.3), Tanimoto(), Normalized(Tanimoto()), Normalized(Gaussian(2.0)), Delta(4)],
)
def test_spec_round_trip(kernel):
    import json

    spec = json.loads(json.dumps(kernel.to_spec()))
    assert output_kernel_from_spec(spec) == kernel
    assert output_kernel_from_spec(kernel) is kernel


def test_unknown_or_malformed_spec_raises():
    with pytest.raises(ValueError, match="unknown output kernel"):
        output_kernel_from_spec({"name": "cosine"})
    with pytest.raises(ValueError, match="malformed"):
        output_kernel_from_spec({"name": "gaussian", "sigma": 1.0})


def _kernel_objective(kernel: OutputKernel, h: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """k(z, z) − 2 <h, ψ(z)> for candidates Z (the decoding objective, MATH.md §8)."""
    return kernel.diag(Z) - 2.0 * kernel.embedding(Z) @ h


def test_linear_threshold_decoder_is_the_argmin_over_all_label_sets(rng):
    m = 5
    cube = np.array(list(itertools.product([0.0, 1.0], repeat=m)))
    H = rng.uniform(-0.5, 1.5, (30, m))
    dec = Linear().decoder("multilabel")(H)
    for h, z in zip(H, dec, strict=True):
        f = _kernel_objective(Linear(), h, cube)
        assert f.min() == pytest.approx(_kernel_objective(Linear(), h, z[None])[0], abs=1e-12)


def _simplex_grid(m: int, steps: int) -> np.ndarray:
    pts = [c for c in itertools.product(range(steps + 1), repeat=m - 1) if sum(c) <= steps]
    return np.array([[*c, steps - sum(c)] for c in pts], dtype=float) / steps


@pytest.mark.parametrize("kernel", [Hellinger(), Linear()], ids=["hellinger", "linear"])
def test_histogram_decoders_beat_a_fine_simplex_grid(kernel, rng):
    """The closed forms (Hellinger: z ∝ (w₊)²; linear: the projection on the simplex) are minimisers over the
    simplex: never above the best point of a grid of step 1/60, and within the grid's resolution of it."""
    grid = _simplex_grid(3, 60)
    H = rng.uniform(-0.3, 1.0, (25, 3))
    H[0] = [-0.2, -0.1, -0.3]  # no positive entry: the vertex of the largest
    dec = kernel.decoder("histogram")(H)
    assert np.all(dec >= 0) and np.allclose(dec.sum(1), 1.0)
    for h, z in zip(H, dec, strict=True):
        best = _kernel_objective(kernel, h, grid).min()
        mine = _kernel_objective(kernel, h, z[None])[0]
        assert mine <= best + 1e-12
        assert mine >= best - 0.02


def test_project_simplex_is_the_euclidean_projection(rng):
    from scipy.optimize import minimize

    H = rng.standard_normal((5, 4))
    P = project_simplex(H)
    for h, p in zip(H, P, strict=True):
        res = minimize(
            lambda z, h=h: np.sum((z - h) ** 2), np.full(4, 0.25), bounds=[(0, 1)] * 4,
            constraints=[{"type": "eq", "fun": lambda z: z.sum() - 1}], method="SLSQP", options={"ftol": 1e-14},
        )  # fmt: skip
        assert np.allclose(p, res.x, atol=1e-6)


def test_decoders_exist_where_the_docstring_says():
    assert Linear().decoder("vector") is not None and Linear().decoder("labels") is None
    assert Hellinger().decoder("histogram") is not None and Hellinger().decoder("multilabel") is None
    for k in (Gaussian(1.0), Tanimoto(), Normalized(Linear()), Delta(3)):
        assert all(k.decoder(t) is None for t in ("vector", "multilabel", "histogram", "labels"))
