"""Structured outputs through an output kernel on the random-feature path (MATH.md §8; issue 24 item 2).

An output kernel k_Y (:mod:`rffor.output_kernels`) is given to the random-feature model by an explicit embedding
``ψ(y) ∈ R^D`` with ``ψ(y)ᵀψ(y') = k_Y(y, y')`` (exactly, or in expectation / on landmarks), which plays the curve
of D values with the identity output operator (:class:`~rffor.outputs.embedding.EmbeddingSpace`):

=============  ================================================================  ===========================
embedding      ψ(y)                                                              for
=============  ================================================================  ===========================
``"exact"``    the kernel's own ψ (:meth:`OutputKernel.embedding`): y for        ``Linear()``, ``Hellinger()``,
               ``Linear()``, √y for ``Hellinger()``, ψ/‖ψ‖ normalised            ``Normalized`` of those
``"rff"``      ``√(2/D) [cos(Wᵀy), sin(Wᵀy)]``, W from the kernel's spectral     ``Gaussian(γ)`` (and
               law (:class:`rffor.features.RandomFourierFeatures`)               normalised, the same)
``"nystrom"``  ``k_Y(y, L) U diag(t^{-1/2})`` on M landmark outputs L with       any kernel on vectors
               ``K_LL = U diag(t) Uᵀ``, eigenpairs below ``rank_tol · t_max``    (``Tanimoto()``: its only
               dropped (:class:`NystromOutputFeatures`)                          one)
=============  ================================================================  ===========================

Which ones a kernel offers is its capability :attr:`~rffor.output_kernels.OutputKernel.feature_embeddings` (the
delta kernel on class labels offers none: the exact solvers, or its one-hot label sets with ``Linear()``). With
M landmarks that are all the distinct training outputs, the Nyström ψ is an exact factor of K_Y on the training
outputs (``Ψ Ψᵀ = K_Y`` up to ``rank_tol``), so the random-feature fit with Nyström input features on all n rows
is the exact solver's (``tests/test_structured.py``).

The data keep the raw outputs (label sets, histograms, scalars: a Zarr store of them, or arrays); the fit reads
them through :class:`EmbeddedOutputs`, a chunked view that applies ψ to each chunk where the chunk is read (on the
Dask workers for a store). Missing labels (NaN) are masked only by a coordinatewise exact embedding (a missing label
is then a missing coordinate of ψ); any other embedding refuses them, chunk by chunk. A row with missing labels is
averaged over all D coordinates, a missing one counting as a zero residual (:attr:`OutputKernelSpace.row_average`,
:class:`rffor.losses.OverAllColumns`), not over its own observed count as curves are (MATH.md §9): with the units
of MATH.md §8 (λ_FR = s Λ, κ/√D, ε/√D) its loss is then ``s L(‖(ψ(y_i) − h(x_i))_{O_i}‖)``, s times the exact
solver's, which sums each row's loss over its observed labels (:mod:`rffor.structured`, "Missing labels"); so the
random-feature fit with Nyström input features on all n rows is the exact solver's on masked labels too.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._linalg import eigh_psd
from ..chunked import read_rows
from ..features import RandomFourierFeatures, feature_map_from_state, register_feature_map, seed_sequence
from ..output_kernels import DEFAULT_RANK_TOL, OutputKernel, output_kernel_from_spec
from .embedding import EmbeddingSpace

__all__ = [
    "OutputKernelSpace",
    "ExactOutputEmbedding",
    "NystromOutputFeatures",
    "EmbeddedOutputs",
    "OUTPUT_EMBEDDINGS",
    "make_output_embedding",
    "landmark_outputs",
]

#: the embeddings of an output kernel on the random-feature path (module docstring)
OUTPUT_EMBEDDINGS = ("exact", "rff", "nystrom")


@register_feature_map
class ExactOutputEmbedding:
    """ψ = the output kernel's own explicit embedding (:meth:`rffor.output_kernels.OutputKernel.embedding`).

    Parameters
    ----------
    kernel : OutputKernel
        A kernel with ``has_embedding``.
    dim : int
        Columns m of the outputs.
    """

    kind = "exact_output_embedding"
    #: ψ is the kernel's own embedding: the kernel's closed-form decoders apply to predictions in its coordinates
    is_kernel_embedding = True

    def __init__(self, kernel: OutputKernel, dim: int):
        self.kernel, self.dim = kernel, int(dim)
        self.n_features = int(kernel.embedding(np.zeros((1, self.dim))).shape[1])

    @property
    def masks(self) -> bool:
        """Whether NaN outputs (missing labels) are masked: a coordinatewise ψ keeps them as NaN coordinates."""
        return bool(self.kernel.coordinatewise)

    def transform(self, Y) -> np.ndarray:
        """ψ of the rows of Y (n, m), shape (n, D), float64 (NaN where a coordinatewise ψ has a missing label)."""
        return np.asarray(self.kernel.embedding(np.asarray(Y, dtype=np.float64)), dtype=np.float64)

    def get_state(self) -> tuple[dict, dict]:
        return {"kind": self.kind, "kernel": self.kernel.to_spec(), "dim": self.dim}, {}

    @classmethod
    def from_state(cls, spec: dict, arrays: dict) -> ExactOutputEmbedding:
        return cls(output_kernel_from_spec(spec["kernel"]), int(spec["dim"]))

    def __repr__(self) -> str:
        return f"ExactOutputEmbedding({self.kernel!r}, D={self.n_features})"


@register_feature_map
class NystromOutputFeatures:
    """Nyström features of an output kernel on M landmark outputs L: ``ψ(y) = k_Y(y, L) U diag(t^{-1/2})`` with the
    kept eigenpairs (t > ``rank_tol`` · t_max) of ``K_LL = U diag(t) Uᵀ``, so that ``ψ(y)ᵀψ(y') = k_Y(y, L) K_LL⁺
    k_Y(L, y')``: k_Y itself when y or y' is a landmark (along the kept eigenvectors). Truncated rather than floored
    (unlike the input features of :class:`rffor.features.NystromFeatures`): landmark outputs repeat (label sets,
    histograms), and a repeated or dependent landmark adds no direction to the output space.

    Parameters
    ----------
    kernel : OutputKernel
    landmarks : array-like of shape (M, m)
        Outputs in the kernel's canonical form (:func:`landmark_outputs` draws distinct training outputs).
    rank_tol : float, default 1e-12

    Attributes
    ----------
    n_features : int
        D = the number of kept eigenpairs (≤ M).
    """

    kind = "nystrom_output"

    def __init__(self, kernel: OutputKernel, landmarks, rank_tol: float = DEFAULT_RANK_TOL):
        L = np.asarray(landmarks, dtype=np.float64)
        if L.ndim != 2 or L.shape[0] < 1 or not np.all(np.isfinite(L)):
            raise ValueError(f"landmarks must be a non-empty finite array of outputs (M, m), got shape {L.shape}")
        self.kernel, self.landmarks, self.rank_tol = kernel, L, float(rank_tol)
        t, U = eigh_psd(kernel.gram(L))
        if not t[0] > 0:
            raise ValueError(f"the landmark outputs' Gram matrix of {kernel!r} is zero: there is nothing to learn")
        keep = t > self.rank_tol * t[0]
        self.eigenvalues = t[keep]
        self.projection = np.ascontiguousarray(U[:, keep] / np.sqrt(self.eigenvalues))

    n_features = property(lambda self: int(self.projection.shape[1]), doc="D, the kept eigenpairs.")
    dim = property(lambda self: int(self.landmarks.shape[1]), doc="Columns m of the outputs.")
    masks = False

    def transform(self, Y) -> np.ndarray:
        """ψ of the rows of Y (n, m), shape (n, D), float64."""
        return self.kernel.gram(np.asarray(Y, dtype=np.float64), self.landmarks) @ self.projection

    def get_state(self) -> tuple[dict, dict]:
        spec = {"kind": self.kind, "kernel": self.kernel.to_spec(), "rank_tol": self.rank_tol}
        return spec, {"landmarks": self.landmarks, "eigenvalues": self.eigenvalues, "projection": self.projection}

    @classmethod
    def from_state(cls, spec: dict, arrays: dict) -> NystromOutputFeatures:
        out = cls.__new__(cls)
        out.kernel, out.rank_tol = output_kernel_from_spec(spec["kernel"]), float(spec["rank_tol"])
        L, t, P = (np.asarray(arrays.get(k), dtype=np.float64) for k in ("landmarks", "eigenvalues", "projection"))
        if L.ndim != 2 or t.ndim != 1 or P.shape != (L.shape[0], t.shape[0]) or not np.all(t > 0):
            raise ValueError("the Nyström output features' arrays do not match (landmarks, eigenvalues, projection)")
        out.landmarks, out.eigenvalues, out.projection = L, t, np.ascontiguousarray(P)
        return out

    def __repr__(self) -> str:
        return f"NystromOutputFeatures({self.kernel!r}, M={len(self.landmarks)}, D={self.n_features})"


def make_output_embedding(
    kernel: OutputKernel,
    how: str,
    *,
    dim: int,
    n_features: int,
    seed,
    landmarks=None,
    rank_tol: float = DEFAULT_RANK_TOL,
):
    """The embedding ψ of ``kernel`` for the random-feature path (module docstring).

    Parameters
    ----------
    kernel : OutputKernel
    how : {"auto", "exact", "rff", "nystrom"}
        "auto": the first of the kernel's :attr:`~rffor.output_kernels.OutputKernel.feature_embeddings`.
    dim : int
        Columns m of the outputs.
    n_features : int
        D of random Fourier features (even).
    seed : int or tuple of ints
        Seed of random Fourier features.
    landmarks : ndarray of shape (M, m), optional
        Landmark outputs of Nyström features (needed for "nystrom").
    rank_tol : float

    Raises
    ------
    ValueError
        The kernel offers no embedding, or not the one asked for; the message names ``kernel_y`` or
        ``output_embedding``.
    """
    offered = kernel.feature_embeddings
    if not offered:
        raise ValueError(
            f"kernel_y={kernel!r} offers no embedding ψ for the random-feature path (its feature_embeddings is "
            "empty): fit it with an exact solver (solver='admm' or 'apgd'); class labels can be given as one-hot "
            "label sets with Linear(), the same kernel as Delta()"
        )
    if how not in ("auto", *OUTPUT_EMBEDDINGS):
        raise ValueError(f"output_embedding must be 'auto' or one of {OUTPUT_EMBEDDINGS}, got {how!r}")
    how = offered[0] if how == "auto" else how
    if how not in offered:
        raise ValueError(
            f"output_embedding={how!r} is not available for kernel_y={kernel!r}: it offers {list(offered)} "
            + ("(it has no spectral law, so no random Fourier features)" if how == "rff" else "(no explicit ψ)")
        )
    if how == "exact":
        return ExactOutputEmbedding(kernel, dim)
    if how == "rff":
        return RandomFourierFeatures(kernel.spectral_kernel, n_features, dim, seed, dtype=np.float64)
    if landmarks is None:
        raise ValueError("output_embedding='nystrom' needs landmark outputs")
    return NystromOutputFeatures(kernel, landmarks, rank_tol)


#: rows drawn per landmark output (:func:`landmark_outputs`)
ROWS_PER_LANDMARK = 20


def landmark_outputs(run, data, n_landmarks: int, seed, *, draw_rows: int | None = None):
    """The distinct outputs of rows drawn from all n rows, and M landmark outputs among them, read where the data is.

    What is read where: the **driver** draws ``R = min(n, draw_rows)`` row indices (default ``draw_rows`` = 20 M)
    uniformly without replacement from all n rows (all rows when n ≤ R; seed ``seed`` extended by the key 0) and
    opens no chunk of the data; the **partition tasks** of the session ``run`` read only those rows' outputs from
    the chunks that hold them and send their partition's distinct complete rows (:func:`rffor.chunked.read_rows`):
    at most R·m float values, R·m·4 bytes for a float32 store (M = 200 landmarks of m = 14 labels: ≤ 224 KB), fewer
    where outputs repeat; the row indices, R·8 bytes, travel the other way. The driver merges them into the distinct
    outputs seen (deduplicated: a repeated output adds no direction to the output space, module docstring) and draws
    M of them uniformly without replacement (seed ``seed``). For n ≤ R the landmarks are those of a draw from all
    the distinct complete outputs of the data. The result depends on the seed alone, not on the executor or P.
    The workers read every chunk that holds a drawn row (R rows drawn uniformly from n ≫ R hit nearly every chunk:
    one pass of chunk reads on the workers, as the Nyström input centres' draw, :func:`rffor.chunked.read_rows`).

    Parameters
    ----------
    run : executor session over ``data`` (:mod:`rffor.executor`)
    data : chunked dataset (:mod:`rffor.chunked`) of raw outputs
    n_landmarks : int
        M (fewer when the rows drawn hold fewer distinct complete outputs).
    seed : int or tuple of ints
    draw_rows : int, optional
        R before the cap at n (default ``ROWS_PER_LANDMARK`` · M).

    Returns
    -------
    seen : ndarray of shape (≤ R, m), float64
        The distinct complete outputs of the rows drawn (rows with a missing entry are left out), lexicographic
        order: what the output kind is judged on.
    landmarks : ndarray of shape (≤ M, m), float64
        M rows of ``seen``.
    """
    R = ROWS_PER_LANDMARK * int(n_landmarks) if draw_rows is None else int(draw_rows)
    if data.n <= R:
        rows = np.arange(data.n)
    else:
        ss = seed_sequence(seed)
        rows_seed = np.random.SeedSequence(ss.entropy, spawn_key=(*ss.spawn_key, 0))
        rows = np.sort(np.random.default_rng(rows_seed).choice(data.n, size=R, replace=False))
    seen = read_rows(run, data, rows, outputs=True, distinct=True, label="landmark outputs")
    rng = np.random.default_rng(seed_sequence(seed))
    landmarks = seen[np.sort(rng.choice(len(seen), size=min(int(n_landmarks), len(seen)), replace=False))]
    return seen, landmarks


class EmbeddedOutputs:
    """A chunked dataset over ``base`` whose outputs are ψ of ``base``'s outputs, computed chunk by chunk where the
    chunk is read (never stored); the same rows, chunks and partitions. Each chunk's outputs are validated by the
    kernel first (the message names the rows of the chunk).

    Parameters
    ----------
    base : chunked dataset
        Raw outputs (n, m) in the output kernel's canonical form.
    embedding : ExactOutputEmbedding, NystromOutputFeatures or RandomFourierFeatures (float64)
        ψ (:func:`make_output_embedding`).
    kernel : OutputKernel
    """

    def __init__(self, base, embedding, kernel: OutputKernel):
        self.base, self.embedding, self.kernel = base, embedding, kernel
        self.n, self.d, self.m = base.n, base.d, int(embedding.n_features)
        self.theta = np.arange(self.m, dtype=np.float64)
        self.chunk_rows, self.n_chunks = base.chunk_rows, base.n_chunks
        self.workers_can_read = base.workers_can_read
        self.cache_tag = getattr(base, "cache_tag", "all")

    def _embed(self, i: int, Y) -> np.ndarray:
        masks = bool(getattr(self.embedding, "masks", False))
        Y = self.kernel.check(Y, name=f"the outputs of chunk {i}", allow_nan=masks)
        Psi = self.embedding.transform(Y)
        if not masks and np.isnan(Psi).any():  # pragma: no cover - kernel.check refuses NaN first
            raise ValueError(f"the outputs of chunk {i} have missing entries, which {self.embedding!r} cannot mask")
        return Psi

    def chunk(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        X, Y = self.base.chunk(i)
        return X, self._embed(i, Y)

    def iter_chunks(self, chunk_ids: Sequence[int] | None = None, **kw):
        for i, X, Y in self.base.iter_chunks(chunk_ids, **kw):
            yield i, X, self._embed(i, Y)

    def partition(self, n_partitions: int) -> list[list[int]]:
        return self.base.partition(n_partitions)

    def subset(self, chunk_ids: Sequence[int]) -> EmbeddedOutputs:
        return EmbeddedOutputs(self.base.subset(chunk_ids), self.embedding, self.kernel)

    def __repr__(self) -> str:
        return f"EmbeddedOutputs({self.base!r}, {self.embedding!r})"


class OutputKernelSpace(EmbeddingSpace):
    """Outputs given by their raw values and an output kernel's embedding ψ (module docstring): an
    :class:`EmbeddingSpace` of dimension D = ``embedding.n_features`` whose :meth:`view` applies ψ to the data's
    outputs chunk by chunk.

    Parameters
    ----------
    kernel : OutputKernel
    embedding : ψ (:func:`make_output_embedding`)
    """

    kind = "output_kernel"
    #: a row with missing labels is averaged over all D coordinates, a missing one a zero residual
    #: (:class:`rffor.losses.OverAllColumns`): its loss is then s L(‖r_O‖), s times the exact structured dual's
    #: row loss summed over the observed labels, in the units of MATH.md §8 (module docstring)
    row_average = "all"

    def __init__(self, kernel: OutputKernel, embedding):
        super().__init__(int(embedding.n_features))
        self.kernel, self.embedding = kernel, embedding

    def view(self, data) -> EmbeddedOutputs:
        """The data's outputs seen through ψ (:class:`EmbeddedOutputs`)."""
        return EmbeddedOutputs(data, self.embedding, self.kernel)

    def to_spec(self) -> dict:
        spec, _ = self.embedding.get_state()
        return {"kind": self.kind, "dim": self.m, "kernel": self.kernel.to_spec(), "embedding": spec}

    def arrays(self) -> dict[str, np.ndarray]:
        return {"grid": self.grid, **self.embedding.get_state()[1]}

    @classmethod
    def from_state(cls, spec: dict, arrays: dict) -> OutputKernelSpace:
        """Inverse of :meth:`to_spec` and :meth:`arrays`."""
        kernel = output_kernel_from_spec(spec["kernel"])
        emb = feature_map_from_state(spec["embedding"], {k: v for k, v in arrays.items() if k != "grid"})
        return cls(kernel, emb)

    def __repr__(self) -> str:
        return f"OutputKernelSpace({self.kernel!r}, {self.embedding!r})"
