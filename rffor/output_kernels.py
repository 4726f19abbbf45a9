"""Kernels on structured outputs (MATH.md §8: seed 002's robust IOKR, seed 004's loss trick).

An output kernel ``k_Y(y, y') = <ψ(y), ψ(y')>`` turns outputs that are not curves (label sets, histograms, class
labels, scalars seen through a Gaussian kernel) into elements ψ(y) of a Hilbert space, and the exact dual of
MATH.md §3.2 with ``Y := V`` and t = 1 fits them once a factor ``K_Y = V Vᵀ`` of the training outputs' Gram matrix
is known (:meth:`OutputKernel.factor`). Each kernel is a small frozen object that answers capability queries
instead of being asked its type:

=================  =======================================  ==============================  ======================
kernel             k(y, y')                                 explicit embedding ψ            random features
=================  =======================================  ==============================  ======================
``Linear()``       yᵀy'                                     y (identity, coordinatewise)    no (use ψ itself)
``Hellinger()``    Σ_j √y_j √y'_j  (histograms, y ≥ 0)      √y (coordinatewise)             no (use ψ itself)
``Gaussian(γ)``    exp(−γ‖y − y'‖²)                         none (infinite-dimensional)     yes: N(0, 2γ I)
``Tanimoto()``     <y, y'>/(‖y‖² + ‖y'‖² − <y, y'>),        none                            no (Nyström on
                   y ∈ {0, 1}^m (1 for two empty sets)                                      landmark outputs)
``Normalized(k)``  k(y, y')/√(k(y, y) k(y', y'))            ψ/‖ψ‖ when k has ψ              k's, when k(y,y) = 1
``Delta(C)``       1[y = y'] on labels 0 … C−1              one-hot (with ``n_classes``)    no: no spectral law
=================  =======================================  ==============================  ======================

- :meth:`OutputKernel.check` validates outputs (the training targets, decoding candidates) and returns them in
  the kernel's canonical form: a 2-D float array (n, m) for vector outputs (1-D input is n scalars), a 1-D integer
  array for the labels of :class:`Delta`. Bad input raises a ValueError naming the argument.
- :meth:`OutputKernel.factor` returns :class:`OutputFactor`: the thin SVD of the embedding Ψ = P S Qᵀ when one
  exists (O(n D²) instead of the O(n³) of a Gram eigendecomposition; V = P S), else ``eigh`` of the Gram matrix;
  in both cases the eigenpairs of K_Y with t_j ≤ ``rank_tol`` · t_max are dropped, so ``‖K_Y − VVᵀ‖₂ ≤ rank_tol ·
  ‖K_Y‖₂``. V has orthogonal columns of decreasing norms √t_j.
- :attr:`OutputKernel.has_spectral_law` is the question the random-feature path asks before drawing features of
  the output kernel (:meth:`OutputKernel.sample_frequencies` raises, with what to use instead, for the kernels
  that have none); :attr:`OutputKernel.has_embedding` and :attr:`OutputKernel.coordinatewise` (each coordinate of
  ψ(y) depends on the same coordinate of y alone, so a missing label is a missing coordinate of ψ) say whether the
  embedding can serve as the "curves" and whether missing entries can be masked.
- :meth:`OutputKernel.decoder` returns the closed-form decoder of an output type (``argmin_z k(z, z) − 2<h, ψ(z)>``
  over that type's outputs, MATH.md §8), a function of the predicted embedding, or None.
- :meth:`OutputKernel.to_spec` / :func:`output_kernel_from_spec`: JSON descriptions (model files, no pickle).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ._linalg import eigh_psd
from ._validation import _as_real_array, check_int, check_real
from .kernels import Gaussian as _GaussianKernel

__all__ = [
    "OutputKernel",
    "OutputFactor",
    "Linear",
    "Hellinger",
    "Gaussian",
    "Tanimoto",
    "Normalized",
    "Delta",
    "OUTPUT_TYPES",
    "DEFAULT_RANK_TOL",
    "output_kernel_from_spec",
    "project_simplex",
]

#: Relative eigenvalue threshold of the factor of K_Y: eigenpairs with t_j ≤ tol · t_max are dropped. The
#: eigenvalues of a Gram matrix computed in float64 are exact to about n·1e-16·t_max; 1e-12 keeps every direction
#: above that noise (for n up to thousands) and changes K_Y by at most 1e-12 of its norm.
DEFAULT_RANK_TOL = 1e-12

#: output types with a closed-form decoder for some kernel (:meth:`OutputKernel.decoder`): real vectors (a 1-D
#: target is scalars), label sets in {0, 1}^m, histograms (rows on the simplex), class labels
OUTPUT_TYPES = ("vector", "multilabel", "histogram", "labels")


@dataclass(frozen=True)
class OutputFactor:
    """A factor ``K_Y = V Vᵀ`` of the Gram matrix of n outputs (MATH.md §8).

    Attributes
    ----------
    V : ndarray of shape (n, r)
        Orthogonal columns of decreasing norms (``VᵀV = diag(eigenvalues)``): V = P S of the thin SVD of Ψ, or
        ``U_r diag(√t_r)`` of ``eigh(K_Y)``.
    eigenvalues : ndarray of shape (r,)
        The kept eigenvalues t of K_Y, decreasing.
    to_embedding : ndarray of shape (r, D) or None
        With an explicit embedding: the matrix with orthonormal rows such that ``Ψ = V @ to_embedding`` (Qᵀ of the
        SVD); None otherwise.
    method : str
        "svd" (of the embedding), "eigh" (of the Gram matrix) or "one-hot" (:class:`Delta`).
    """

    V: np.ndarray
    eigenvalues: np.ndarray
    to_embedding: np.ndarray | None
    method: str

    @property
    def rank(self) -> int:
        return int(self.V.shape[1])


def _kept(t: np.ndarray, rank_tol: float) -> np.ndarray:
    """Indices of the eigenvalues (decreasing) above ``rank_tol · t_max`` (none when all are 0)."""
    if t.size == 0 or t[0] <= 0:
        return np.zeros(0, dtype=int)
    return np.flatnonzero(t > rank_tol * t[0])


def _check_rank_tol(rank_tol) -> float:
    return check_real(rank_tol, "rank_tol", low=0, high=1, high_open=True)


# ---------------------------------------------------------------------------------------------------------------
# closed-form decoders of the predicted embedding H (n_new, D) (MATH.md §8, "Decoding")
# ---------------------------------------------------------------------------------------------------------------


def _decode_identity(H: np.ndarray) -> np.ndarray:
    """Linear kernel on R^m: ``argmin_z ‖z‖² − 2 zᵀh = h``."""
    return H


def _decode_threshold(H: np.ndarray) -> np.ndarray:
    """Linear kernel on {0, 1}^m: ``Σ_j z_j (z_j − 2 h_j)`` is minimised coordinate by coordinate by z_j = 1 iff
    h_j > ½ (the threshold at 0.5 of Y_trainᵀα(x), seed 002's "clamping"); a tie h_j = ½ gives 0."""
    return (H > 0.5).astype(np.float64)


def project_simplex(H: np.ndarray) -> np.ndarray:
    """Euclidean projection of each row of H on the probability simplex (the sort-based algorithm of Held, Wolfe
    & Crowder 1974; Duchi et al. 2008): the linear kernel's decoder of histograms, ``argmin_z ‖z‖² − 2 zᵀh``.

    Parameters
    ----------
    H : ndarray of shape (n, m)

    Returns
    -------
    Z : ndarray of shape (n, m)
        Non-negative rows summing to 1.
    """
    H = np.asarray(H, dtype=np.float64)
    n, m = H.shape
    S = -np.sort(-H, axis=1)
    css = np.cumsum(S, axis=1) - 1.0
    ind = np.arange(1, m + 1)
    cond = S - css / ind > 0
    rho = m - 1 - np.argmax(cond[:, ::-1], axis=1)  # the last index where cond holds (it holds at 0)
    tau = css[np.arange(n), rho] / (rho + 1)
    return np.maximum(H - tau[:, None], 0.0)


def _decode_hellinger(H: np.ndarray) -> np.ndarray:
    """Hellinger kernel on the simplex: with w = Σ_i α_i √y_i the predicted embedding, k(z, z) = Σ_j z_j = 1 and
    ``argmax_z Σ_j w_j √z_j`` over the simplex is u = √z on the unit sphere's positive orthant maximising wᵀu:
    u ∝ w₊, i.e. ``z = w₊² / ‖w₊‖²`` (MATH.md §8); when w has no positive entry, the vertex e_j of the largest w_j."""
    H = np.asarray(H, dtype=np.float64)
    P = np.maximum(H, 0.0) ** 2
    s = P.sum(axis=1, keepdims=True)
    vertex = np.zeros_like(H)
    vertex[np.arange(H.shape[0]), np.argmax(H, axis=1)] = 1.0
    return np.where(s > 0, P / np.where(s > 0, s, 1.0), vertex)


# ---------------------------------------------------------------------------------------------------------------
# kernels
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OutputKernel:
    """Base class of output kernels (module docstring). Subclasses set ``name`` and implement ``_gram``."""

    name: ClassVar[str] = "output_kernel"
    #: ψ(y)_j depends on y_j alone (a missing label is a missing coordinate of ψ: masking is possible)
    coordinatewise: ClassVar[bool] = False

    # ------------------------------------------------------------ capabilities
    @property
    def has_embedding(self) -> bool:
        """Whether :meth:`embedding` gives a finite explicit ψ with ``Ψ(Y1) Ψ(Y2)ᵀ = K(Y1, Y2)``."""
        return False

    @property
    def has_spectral_law(self) -> bool:
        """Whether the kernel is translation-invariant with a spectral law, so that random Fourier features of it
        exist (:meth:`sample_frequencies`)."""
        return False

    @property
    def unit_diagonal(self) -> bool:
        """Whether k(y, y) = 1 for every output."""
        return False

    @property
    def spectral_kernel(self):
        """The translation-invariant input kernel (:class:`rffor.kernels.Kernel`) with this kernel's spectral law,
        whose random Fourier features (:class:`rffor.features.RandomFourierFeatures`) are features of this kernel;
        None when :attr:`has_spectral_law` is False."""
        return None

    @property
    def feature_embeddings(self) -> tuple[str, ...]:
        """The explicit embeddings ψ the random-feature path can use for this kernel, preferred first
        (:mod:`rffor.outputs.kernel_embedding`): ``"exact"`` (:attr:`has_embedding`), ``"rff"`` (random Fourier
        features, :attr:`has_spectral_law`), ``"nystrom"`` (Nyström features on landmark outputs: the kernel's
        values only). Empty: none (the message of :meth:`sample_frequencies` says what to use)."""
        return (("exact",) if self.has_embedding else ()) + (("rff",) if self.has_spectral_law else ()) + ("nystrom",)

    # ------------------------------------------------------------ outputs
    def check(self, y, *, name: str = "y", allow_nan: bool = False) -> np.ndarray:
        """Validate outputs and return them in the kernel's canonical form.

        Parameters
        ----------
        y : array-like of shape (n,) or (n, m)
            Outputs (targets, or decoding candidates).
        name : str
            The argument's name, for the messages.
        allow_nan : bool, default False
            Accept NaN entries (missing labels, masked by the caller); inf is always refused.

        Returns
        -------
        ndarray of shape (n, m), float64 (1-D input: (n, 1))
        """
        Y = _as_real_array(y, name, "(n_samples, n_outputs)", np.float64)
        if Y.ndim == 1:
            Y = Y[:, None]
        if Y.ndim != 2:
            raise ValueError(f"{name} must be a 1-D or 2-D array of outputs, got shape {Y.shape}")
        if Y.shape[0] == 0 or Y.shape[1] == 0:
            raise ValueError(f"{name} is empty (shape {Y.shape})")
        bad = np.isinf(Y) if allow_nan else ~np.isfinite(Y)
        if bad.any():
            where = tuple(np.argwhere(bad)[0])
            what = "inf (NaN marks a missing label)" if allow_nan else "NaN or inf"
            raise ValueError(f"{name} must not contain {what}; found {Y[where]} at index {where}")
        self._check_values(Y, name)
        return Y

    def _check_values(self, Y: np.ndarray, name: str) -> None:
        """Kernel-specific checks of finite (or NaN) canonical outputs."""

    def gram(self, Y1: np.ndarray, Y2: np.ndarray | None = None) -> np.ndarray:
        """Gram matrix ``K[i, j] = k(Y1[i], Y2[j])`` of outputs in canonical form (:meth:`check`).

        Returns
        -------
        K : ndarray of shape (n1, n2), float64
        """
        Y1 = self._canonical(Y1)
        Y2 = Y1 if Y2 is None else self._canonical(Y2)
        return self._gram(Y1, Y2)

    def _gram(self, Y1: np.ndarray, Y2: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def diag(self, Y: np.ndarray) -> np.ndarray:
        """``k(y_i, y_i)`` for each output, shape (n,)."""
        return self._diag(self._canonical(Y))

    def _diag(self, Y: np.ndarray) -> np.ndarray:  # pragma: no cover - every kernel here has its own
        return np.array([self._gram(Y[i : i + 1], Y[i : i + 1])[0, 0] for i in range(len(Y))])

    def _canonical(self, Y) -> np.ndarray:
        Y = np.asarray(Y, dtype=np.float64)
        return Y[:, None] if Y.ndim == 1 else Y

    def embedding(self, Y: np.ndarray) -> np.ndarray:
        """The explicit embedding Ψ (n, D) of outputs in canonical form, ``Ψ(Y1) Ψ(Y2)ᵀ = K(Y1, Y2)``."""
        raise ValueError(
            f"{self!r} has no finite explicit embedding: its fitted models are expressed in the coordinates of the "
            "factor of the training outputs' Gram matrix (OutputKernelRegressor.predict_embedding)"
        )

    def factor(self, Y: np.ndarray, rank_tol: float = DEFAULT_RANK_TOL) -> OutputFactor:
        """A factor ``K_Y = V Vᵀ`` of the Gram matrix of outputs Y (canonical form, no NaN): the thin SVD of the
        embedding when there is one, else ``eigh`` of the Gram matrix; eigenpairs with ``t_j ≤ rank_tol · t_max``
        dropped (module docstring).

        Raises
        ------
        ValueError
            The Gram matrix is 0 (nothing to learn).
        """
        rank_tol = _check_rank_tol(rank_tol)
        Y = self._canonical(Y)
        if self.has_embedding:
            Psi = self.embedding(Y)
            P, s, Qt = np.linalg.svd(Psi, full_matrices=False)
            t = s**2
            keep = _kept(t, rank_tol)
            out = OutputFactor(P[:, keep] * s[keep], t[keep], Qt[keep], "svd")
        else:
            t, U = eigh_psd(self.gram(Y))
            keep = _kept(t, rank_tol)
            out = OutputFactor(U[:, keep] * np.sqrt(t[keep]), t[keep], None, "eigh")
        if out.rank == 0:
            raise ValueError(f"the output Gram matrix of {self!r} on these outputs is zero: there is nothing to learn")
        return out

    # ------------------------------------------------------------ random features
    def sample_frequencies(self, n_frequencies: int, dim: int, rng: np.random.Generator) -> np.ndarray:
        """Frequencies ω of random Fourier features of the output kernel (MATH.md §4), shape (dim, n_frequencies).

        Raises
        ------
        ValueError
            The kernel has no spectral law (:attr:`has_spectral_law` is False); the message says what to use.
        """
        route = (
            "use its explicit embedding ψ as the outputs"
            if self.has_embedding
            else "use Nyström features on landmark outputs, which need only the kernel's values"
        )
        raise ValueError(f"{self!r} has no random Fourier features (it has no spectral law): {route}")

    # ------------------------------------------------------------ decoding
    def decoder(self, output_type: str) -> Callable[[np.ndarray], np.ndarray] | None:
        """The closed-form decoder ``H ↦ argmin_z k(z, z) − 2<h, ψ(z)>`` over the outputs of ``output_type``
        (:data:`OUTPUT_TYPES`), as a function of the predicted embedding H (n_new, D) in this kernel's embedding
        coordinates, or None when there is none (then decode over candidates, or the 1-D minimisation of scalar
        outputs)."""
        return None

    # ------------------------------------------------------------ specs
    def to_spec(self) -> dict:
        return {"name": self.name}


@dataclass(frozen=True)
class Linear(OutputKernel):
    """``k(y, y') = yᵀy'`` on real vectors (labels in {0, 1}^m, scalars, anything in R^m); ψ(y) = y.

    Multi-output kernel ridge regression when the loss is the square loss (seed 002's IOKR on YEAST).
    Decoders: vectors and scalars h itself, label sets the threshold at ½, histograms the projection on the
    simplex.
    """

    name: ClassVar[str] = "linear"
    coordinatewise: ClassVar[bool] = True

    @property
    def has_embedding(self) -> bool:
        return True

    def _gram(self, Y1, Y2):
        return Y1 @ Y2.T

    def _diag(self, Y):
        return np.einsum("ij,ij->i", Y, Y)

    def embedding(self, Y):
        return np.array(self._canonical(Y), dtype=np.float64)

    def decoder(self, output_type):
        return {"vector": _decode_identity, "multilabel": _decode_threshold, "histogram": project_simplex}.get(
            output_type
        )


@dataclass(frozen=True)
class Hellinger(OutputKernel):
    """``k(y, y') = Σ_j √(y_j y'_j)`` on histograms (non-negative vectors): the linear kernel on ψ(y) = √y, whose
    induced loss ``k(y,y) − 2k(y,y') + k(y',y') = Σ_j (√y_j − √y'_j)²`` is the squared Hellinger distance of seed
    004 (eq. 23). Decoder of histograms (rows on the simplex): ``z ∝ (w₊)²``, w the predicted embedding."""

    name: ClassVar[str] = "hellinger"
    coordinatewise: ClassVar[bool] = True

    @property
    def has_embedding(self) -> bool:
        return True

    def _check_values(self, Y, name):
        neg = Y < 0
        if neg.any():
            where = tuple(np.argwhere(neg)[0])
            raise ValueError(f"{name} must be non-negative histograms for Hellinger(); found {Y[where]} at {where}")

    def _gram(self, Y1, Y2):
        return self.embedding(Y1) @ self.embedding(Y2).T

    def _diag(self, Y):
        return np.sum(Y, axis=1)

    def embedding(self, Y):
        return np.sqrt(np.maximum(self._canonical(Y), 0.0))

    def decoder(self, output_type):
        return _decode_hellinger if output_type == "histogram" else None


@dataclass(frozen=True)
class Gaussian(OutputKernel):
    """``k(y, y') = exp(−γ ‖y − y'‖²)`` on real vectors or scalars: no finite embedding (the factor comes from
    ``eigh`` of the Gram matrix), random Fourier features from N(0, 2γ I) (:class:`rffor.kernels.Gaussian`). The
    induced loss ``2 − 2k(y, y')`` is bounded: decoding scalars with it is a robust, mode-seeking estimate (seed
    004's robust estimation experiment)."""

    gamma: float = 1.0
    name: ClassVar[str] = "gaussian"

    def __post_init__(self) -> None:
        object.__setattr__(self, "gamma", check_real(self.gamma, "gamma", low=0, low_open=True))

    @property
    def has_spectral_law(self) -> bool:
        return True

    @property
    def unit_diagonal(self) -> bool:
        return True

    def _gram(self, Y1, Y2):
        return _GaussianKernel(self.gamma).gram(Y1, Y2).astype(np.float64, copy=False)

    def _diag(self, Y):
        return np.ones(len(Y))

    @property
    def spectral_kernel(self):
        return _GaussianKernel(self.gamma)

    def sample_frequencies(self, n_frequencies, dim, rng):
        return _GaussianKernel(self.gamma).sample_frequencies(n_frequencies, dim, rng)

    def to_spec(self):
        return {"name": self.name, "gamma": self.gamma}


@dataclass(frozen=True)
class Tanimoto(OutputKernel):
    """``k(y, y') = <y, y'> / (‖y‖² + ‖y'‖² − <y, y'>)`` on binary vectors (molecular fingerprints, label sets):
    the Jaccard index |A ∩ B| / |A ∪ B| of the sets, 1 for two empty sets (positive definite: Gower 1971; Bouchard
    et al. 2013). No finite embedding, no spectral law."""

    name: ClassVar[str] = "tanimoto"

    @property
    def unit_diagonal(self) -> bool:
        return True

    def _check_values(self, Y, name):
        bad = ~((Y == 0) | (Y == 1) | np.isnan(Y))
        if bad.any():
            where = tuple(np.argwhere(bad)[0])
            raise ValueError(f"{name} must be binary (0 or 1) for Tanimoto(); found {Y[where]} at {where}")

    def _gram(self, Y1, Y2):
        inner = Y1 @ Y2.T
        union = Y1.sum(axis=1)[:, None] + Y2.sum(axis=1)[None, :] - inner
        return np.divide(inner, union, out=np.ones_like(inner), where=union > 0)

    def _diag(self, Y):
        return np.ones(len(Y))


@dataclass(frozen=True)
class Normalized(OutputKernel):
    """``k(y, y') / √(k(y, y) k(y', y'))`` of a base output kernel (cosine normalisation: every ψ(y) on the unit
    sphere, seed 002 Remark 6); 0 against an output with k(y, y) = 0. Embedding ψ/‖ψ‖ when the base has one (not
    coordinatewise); random features when the base has them and is already normalised (Gaussian)."""

    base: OutputKernel = None  # type: ignore[assignment]
    name: ClassVar[str] = "normalized"

    def __post_init__(self) -> None:
        if not isinstance(self.base, OutputKernel):
            raise TypeError(f"Normalized(base) needs an output kernel as base, got {self.base!r}")

    @property
    def has_embedding(self) -> bool:
        return self.base.has_embedding

    @property
    def has_spectral_law(self) -> bool:
        return self.base.has_spectral_law and self.base.unit_diagonal

    @property
    def unit_diagonal(self) -> bool:
        return True

    def check(self, y, *, name="y", allow_nan=False):
        if allow_nan:  # the normalisation mixes coordinates: a missing entry is not a missing coordinate of ψ
            Y = self.base.check(y, name=name, allow_nan=True)
            if np.isnan(Y).any():
                raise ValueError(f"{name} has missing entries (NaN), which {self!r} cannot mask")
            return Y
        return self.base.check(y, name=name)

    def _canonical(self, Y):
        return self.base._canonical(Y)

    @staticmethod
    def _scale(d: np.ndarray) -> np.ndarray:
        return np.divide(1.0, np.sqrt(d), out=np.zeros_like(d, dtype=np.float64), where=d > 0)

    def _gram(self, Y1, Y2):
        K = self.base._gram(Y1, Y2)
        d1 = self.base.diag(Y1)
        d2 = d1 if Y2 is Y1 else self.base.diag(Y2)
        return K * self._scale(d1)[:, None] * self._scale(d2)[None, :]

    def _diag(self, Y):
        return (self.base.diag(Y) > 0).astype(np.float64)

    def embedding(self, Y):
        if not self.base.has_embedding:
            return super().embedding(Y)
        Psi = self.base.embedding(Y)
        return Psi * self._scale(np.einsum("ij,ij->i", Psi, Psi))[:, None]

    @property
    def spectral_kernel(self):
        return self.base.spectral_kernel if self.has_spectral_law else None

    def sample_frequencies(self, n_frequencies, dim, rng):
        if self.has_spectral_law:
            return self.base.sample_frequencies(n_frequencies, dim, rng)
        return super().sample_frequencies(n_frequencies, dim, rng)

    def to_spec(self):
        return {"name": self.name, "base": self.base.to_spec()}


@dataclass(frozen=True)
class Delta(OutputKernel):
    """``k(y, y') = 1[y = y']`` on class labels given as integers 0, 1, … (multiclass outputs).

    The factor of K_Y is exact and O(n): the one-hot matrix of the training labels (``VVᵀ = K_Y``). With
    ``n_classes`` the one-hot vector of length C is an explicit embedding. Decoding over the classes is
    ``argmax_c Σ_{i: y_i = c} α_i(x)``. There are no random Fourier features: a kernel on a finite set has no
    spectral law (:meth:`sample_frequencies` raises).

    Parameters
    ----------
    n_classes : int or None, default None
        Number C of classes (labels 0 … C−1); None: any non-negative integer labels, no explicit embedding.
    """

    n_classes: int | None = None
    name: ClassVar[str] = "delta"

    def __post_init__(self) -> None:
        if self.n_classes is not None:
            object.__setattr__(self, "n_classes", check_int(self.n_classes, "n_classes", minimum=1))

    @property
    def has_embedding(self) -> bool:
        return self.n_classes is not None

    @property
    def unit_diagonal(self) -> bool:
        return True

    def check(self, y, *, name="y", allow_nan=False):
        Y = _as_real_array(y, name, "(n_samples,)", np.float64)
        if Y.ndim == 2 and Y.shape[1] == 1:
            Y = Y[:, 0]
        if Y.ndim != 1 or Y.size == 0:
            raise ValueError(f"{name} must be a non-empty 1-D array of class labels for {self!r}, got shape {Y.shape}")
        if not np.all(np.isfinite(Y)):
            raise ValueError(f"{name} must hold class labels (integers >= 0) for {self!r}: found NaN or inf")
        if np.any(Y != np.round(Y)) or np.any(Y < 0):
            raise ValueError(f"{name} must hold class labels (integers >= 0) for {self!r}, got {Y[:5].tolist()} …")
        if self.n_classes is not None and np.any(Y >= self.n_classes):
            raise ValueError(f"{name} has labels >= n_classes = {self.n_classes} (max {int(Y.max())})")
        return Y.astype(np.int64)

    def _canonical(self, Y):
        Y = np.asarray(Y)
        return (Y[:, 0] if Y.ndim == 2 else Y).astype(np.int64)

    def _gram(self, Y1, Y2):
        return (Y1[:, None] == Y2[None, :]).astype(np.float64)

    def _diag(self, Y):
        return np.ones(len(Y))

    def embedding(self, Y):
        if self.n_classes is None:
            return super().embedding(Y)
        Y = self._canonical(Y)
        E = np.zeros((len(Y), self.n_classes))
        E[np.arange(len(Y)), Y] = 1.0
        return E

    def factor(self, Y, rank_tol=DEFAULT_RANK_TOL):
        """The one-hot matrix of the training labels (columns: the classes present, by decreasing count)."""
        _check_rank_tol(rank_tol)
        Y = self._canonical(Y)
        classes, inverse, counts = np.unique(Y, return_inverse=True, return_counts=True)
        order = np.argsort(-counts, kind="stable")
        rank_of = np.empty_like(order)
        rank_of[order] = np.arange(len(order))
        V = np.zeros((len(Y), len(classes)))
        V[np.arange(len(Y)), rank_of[inverse]] = 1.0
        to_emb = None
        if self.n_classes is not None:
            to_emb = np.zeros((len(classes), self.n_classes))
            to_emb[np.arange(len(classes)), classes[order]] = 1.0
        return OutputFactor(V, counts[order].astype(np.float64), to_emb, "one-hot")

    @property
    def feature_embeddings(self) -> tuple[str, ...]:
        """None: class labels keep their exact one-hot factor (the exact solvers). On the random-feature path,
        give the one-hot label sets with ``Linear()``: the same kernel, ``1[y = y'] = <e_y, e_y'>``."""
        return ()

    def sample_frequencies(self, n_frequencies, dim, rng):
        raise ValueError(
            f"{self!r} has no random Fourier features: the delta kernel on a finite set of labels has no spectral "
            "law. Use its exact one-hot factor (Delta(n_classes=C) gives the one-hot embedding)"
        )

    def to_spec(self):
        return {"name": self.name, "n_classes": self.n_classes}


_OUTPUT_KERNELS: dict[str, type[OutputKernel]] = {
    k.name: k for k in (Linear, Hellinger, Gaussian, Tanimoto, Normalized, Delta)
}


def output_kernel_from_spec(spec: dict | OutputKernel) -> OutputKernel:
    """Inverse of :meth:`OutputKernel.to_spec` (an OutputKernel is returned as is).

    Raises
    ------
    ValueError
        Unknown kernel name or malformed spec.
    """
    if isinstance(spec, OutputKernel):
        return spec
    if not isinstance(spec, dict) or spec.get("name") not in _OUTPUT_KERNELS:
        raise ValueError(f"unknown output kernel {spec!r}; expected one of {sorted(_OUTPUT_KERNELS)}")
    params = {k: v for k, v in spec.items() if k != "name"}
    if spec["name"] == "normalized":
        params["base"] = output_kernel_from_spec(params.get("base"))
    try:
        return _OUTPUT_KERNELS[spec["name"]](**params)
    except TypeError as exc:
        raise ValueError(f"malformed output kernel spec {spec!r}: {exc}") from None
