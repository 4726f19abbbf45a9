"""Scalar kernels on inputs and on the output index set Θ (MATH.md §4).

A kernel knows its Gram matrix and the spectral law of its random Fourier features, so that the same object
serves the exact solvers (``gram``) and the random-feature solver (``sample_frequencies``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from scipy.spatial.distance import cdist

from ._validation import check_real

__all__ = [
    "Kernel",
    "Gaussian",
    "Laplacian",
    "Identity",
    "as_2d_points",
    "median_heuristic",
    "kernel_from_spec",
    "kernel_to_spec",
]

#: rows of the sample :func:`median_heuristic` uses (about 500,000 pairs)
MEDIAN_HEURISTIC_ROWS = 1000

#: :meth:`Laplacian.gram_block` recomputes from the differences the pairs whose squared distance is below this
#: fraction of ``‖a‖² + max ‖b‖²`` (where the GEMM form's cancellation, amplified by the square root, would show)
_LAPLACIAN_RECOMPUTE = 0.01


def as_2d_points(A: np.ndarray, name: str = "A") -> np.ndarray:
    """Return ``A`` as an (n, d) float array; a 1-D array is n points of dimension 1 (a grid on Θ)."""
    A = np.asarray(A)
    if A.ndim == 1:
        A = A[:, None]
    if A.ndim != 2:
        raise ValueError(f"{name} must be a 1-D or 2-D array, got shape {A.shape}")
    if not np.issubdtype(A.dtype, np.floating):
        A = A.astype(np.float64)
    return A


def _check_block(A: np.ndarray, B: np.ndarray, out: np.ndarray) -> None:
    """Shapes and types of :meth:`Kernel.gram_block`'s arguments."""
    if out.ndim != 2 or out.dtype not in (np.float32, np.float64) or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous 2-D float32 or float64 array, got {out.dtype} {out.shape}")
    for name, a, rows in (("A", A, out.shape[0]), ("B", B, out.shape[1])):
        if a.ndim != 2 or a.shape[0] != rows or a.dtype != out.dtype or not a.flags.c_contiguous:
            raise ValueError(
                f"{name} must be a C-contiguous {out.dtype} array with {rows} rows (out has shape {out.shape}), "
                f"got {a.dtype} {a.shape}"
            )
    if A.shape[1] != B.shape[1]:
        raise ValueError(f"A and B must have the same number of columns, got {A.shape[1]} and {B.shape[1]}")


def _cross_products(A: np.ndarray, B: np.ndarray, out: np.ndarray, b_sqnorms) -> tuple[np.ndarray, np.ndarray]:
    """``out = A Bᵀ`` (one GEMM) and the squared norms ``(‖a_i‖², ‖b_j‖²)`` in ``out``'s dtype."""
    _check_block(A, B, out)
    np.matmul(A, B.T, out=out)
    a2 = np.einsum("ij,ij->i", A, A)
    if b_sqnorms is None:
        b2 = np.einsum("ij,ij->i", B, B)
    else:
        b2 = np.asarray(b_sqnorms, dtype=out.dtype)
        if b2.shape != (B.shape[0],):
            raise ValueError(f"b_sqnorms must have shape ({B.shape[0]},), got {b2.shape}")
    return a2, b2


@dataclass(frozen=True)
class Kernel:
    """Base class of translation-invariant scalar kernels ``k(x, z) = κ(x − z)`` with ``κ(0) = 1``."""

    gamma: float = 1.0
    name = "kernel"
    #: the bandwidth a selection may walk along (``kernel_theta_params``); :meth:`with_param` sets it
    param_name = "gamma"
    #: whether :meth:`orthogonal_frequencies` is available (orthogonal random features)
    has_orthogonal_features = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "gamma", check_real(self.gamma, "gamma", low=0, low_open=True))

    def with_param(self, value: float) -> Kernel:
        """The same kernel with its bandwidth :attr:`param_name` set to ``value``."""
        return dataclasses.replace(self, **{self.param_name: float(value)})

    def gram(self, A: np.ndarray, B: np.ndarray | None = None) -> np.ndarray:
        """Gram matrix ``K[i, j] = k(A[i], B[j])``.

        Parameters
        ----------
        A : array of shape (n_a, d) or (n_a,)
        B : array of shape (n_b, d) or (n_b,), default A

        Returns
        -------
        K : ndarray of shape (n_a, n_b), in the floating dtype of A.
        """
        A = as_2d_points(A, "A")
        B = A if B is None else as_2d_points(B, "B")
        if A.shape[1] != B.shape[1]:
            raise ValueError(f"A and B must have the same number of columns, got {A.shape[1]} and {B.shape[1]}")
        return self._gram(A, B).astype(np.result_type(A.dtype, np.float32), copy=False)

    def _gram(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def gram_block(self, A: np.ndarray, B: np.ndarray, out: np.ndarray, *, b_sqnorms: np.ndarray | None = None):
        """The Gram block ``k(A, B)`` written into ``out``, computed in ``out``'s dtype: the hot path of the Nyström
        features (:meth:`rffor.features.NystromFeatures.transform`), which calls it on every block of rows.

        A kernel with a profile of the squared distance (Gaussian, Laplacian) computes it from one GEMM,
        ``‖a‖² + ‖b‖² − 2 a·b``, and its profile applied in place: no (n_a, n_b, d) temporary and no other array of
        ``out``'s size. That form cancels where ‖a − b‖² is small against ‖a‖² + ‖b‖²: translate the points so that
        they are centred (distances do not change) before calling it. Other kernels fall back to :meth:`gram`.

        Parameters
        ----------
        A : ndarray of shape (n_a, d)
            C-contiguous, of ``out``'s dtype.
        B : ndarray of shape (n_b, d)
            C-contiguous, of ``out``'s dtype.
        out : ndarray of shape (n_a, n_b)
            C-contiguous float32 or float64 array to write into.
        b_sqnorms : ndarray of shape (n_b,), optional
            ``‖b_j‖²`` in ``out``'s dtype when the caller keeps them (the Nyström centres); computed otherwise.

        Returns
        -------
        out : ndarray of shape (n_a, n_b)
        """
        _check_block(A, B, out)
        out[...] = self.gram(A, B)
        return out

    def gram_derivatives(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Derivatives of the kernel on the real line (Θ = [0, 1]): ``(∂k(a_i, b_j)/∂b, ∂²k(a_i, b_j)/∂a∂b)``.

        The non-crossing penalty (thesis 003 Theorem 5.27) evaluates ∂_θ h through them, so it needs k ∈ C².

        Parameters
        ----------
        a : array of shape (n_a,)
        b : array of shape (n_b,)

        Returns
        -------
        d2 : ndarray of shape (n_a, n_b)
        d12 : ndarray of shape (n_a, n_b)
        """
        raise ValueError(
            f"{self!r} is not twice differentiable: the non-crossing penalty needs a C² kernel on the levels "
            "(e.g. Gaussian)"
        )

    def sample_frequencies(self, n_frequencies: int, dim: int, rng: np.random.Generator) -> np.ndarray:
        """Draw frequencies ω from the kernel's spectral law (MATH.md §4 table).

        Returns
        -------
        W : ndarray of shape (dim, n_frequencies), float64.
        """
        raise NotImplementedError  # pragma: no cover - abstract

    def orthogonal_frequencies(self, n_frequencies: int, dim: int, rng: np.random.Generator) -> np.ndarray:
        """Frequencies of orthogonal random features (Yu et al. 2016), shape (dim, n_frequencies): a capability of
        kernels whose spectral law is rotation invariant with a known radial law (the Gaussian)."""
        raise ValueError(f"orthogonal random features are for the Gaussian kernel, got {self!r}")

    def to_spec(self) -> dict:
        return {"name": self.name, "gamma": self.gamma}


@dataclass(frozen=True)
class Gaussian(Kernel):
    """Gaussian kernel ``k(x, z) = exp(−γ ‖x − z‖₂²)``; spectral law N(0, 2γ I_d)."""

    name = "gaussian"
    has_orthogonal_features = True

    def _gram(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        # ||a||^2 + ||b||^2 - 2ab via BLAS is far faster than cdist for large d
        a2 = np.einsum("ij,ij->i", A, A, dtype=np.float64)
        b2 = a2 if B is A else np.einsum("ij,ij->i", B, B, dtype=np.float64)
        d2 = a2[:, None] + b2[None, :] - 2.0 * (A.astype(np.float64) @ B.astype(np.float64).T)
        np.maximum(d2, 0.0, out=d2)
        return np.exp(-self.gamma * d2)

    def gram_block(self, A: np.ndarray, B: np.ndarray, out: np.ndarray, *, b_sqnorms: np.ndarray | None = None):
        """``exp(γ (2 a·b − ‖a‖² − ‖b‖²))`` into ``out`` (see :meth:`Kernel.gram_block`): the GEMM, three passes
        over ``out`` and the exponential, in place. The rounding of the squared distance, about
        ``d u (‖a‖² + ‖b‖²)`` for unit roundoff u, moves k by γ times that: no more than rounding k itself does
        for centred points."""
        a2, b2 = _cross_products(A, B, out, b_sqnorms)
        g = out.dtype.type(self.gamma)
        out *= 2 * g
        out -= (g * a2)[:, None]
        out -= (g * b2)[None, :]
        np.minimum(out, 0, out=out)  # the distance's rounding may make it negative
        return np.exp(out, out=out)

    def gram_derivatives(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """With D = a − b and k = exp(−γD²): ``∂_b k = 2γ D k`` and ``∂_a ∂_b k = 2γ (1 − 2γ D²) k``."""
        D = np.subtract.outer(np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel())
        g = self.gamma
        K = np.exp(-g * D * D)
        return 2.0 * g * D * K, 2.0 * g * (1.0 - 2.0 * g * D * D) * K

    def sample_frequencies(self, n_frequencies: int, dim: int, rng: np.random.Generator) -> np.ndarray:
        return rng.standard_normal((dim, n_frequencies)) * np.sqrt(2.0 * self.gamma)

    def orthogonal_frequencies(self, n_frequencies: int, dim: int, rng: np.random.Generator) -> np.ndarray:
        """Frequencies of orthogonal random features (Yu et al. 2016): ceil(h / dim) blocks ``Q_b diag(ℓ_b)`` with
        Q_b the orthogonal factor of a dim × dim Gaussian matrix (signs fixed by R's diagonal, so Q_b is Haar) and
        ℓ_b chi(dim) lengths, times ``sqrt(2γ)``: every frequency has the spectral law N(0, 2γ I), and those of a
        block are orthogonal.

        Returns
        -------
        W : ndarray of shape (dim, n_frequencies), float64
        """
        blocks = []
        for _ in range(-(-n_frequencies // dim)):
            Q, R = np.linalg.qr(rng.standard_normal((dim, dim)))
            Q *= np.sign(np.diag(R))[None, :]
            lengths = np.sqrt(rng.chisquare(dim, size=dim))
            blocks.append(Q * lengths[None, :])
        return np.concatenate(blocks, axis=1)[:, :n_frequencies] * np.sqrt(2.0 * self.gamma)


@dataclass(frozen=True)
class Laplacian(Kernel):
    """Laplacian kernel ``k(x, z) = exp(−γ ‖x − z‖₂)``; spectral law: multivariate Cauchy of scale γ."""

    name = "laplacian"

    def _gram(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        return np.exp(-self.gamma * cdist(A.astype(np.float64), B.astype(np.float64)))

    def gram_block(self, A: np.ndarray, B: np.ndarray, out: np.ndarray, *, b_sqnorms: np.ndarray | None = None):
        """``exp(−γ ‖a − b‖)`` into ``out`` (see :meth:`Kernel.gram_block`), the distance from the GEMM form.

        Unlike the Gaussian's ``exp(−γ ‖a − b‖²)``, the square root amplifies the form's cancellation near 0: an
        error δ ≈ c u (‖a‖² + ‖b‖²) of the squared distance (u the unit roundoff, c ≈ √d typically, d at worst)
        moves ‖a − b‖ by δ / (2 ‖a − b‖), and by √δ at a coincident pair (a training row that is a centre:
        k = 1 − γ √δ, about 1 − 1e-7 γ in float64, instead of 1). The pairs with ``‖a − b‖² < 0.01 (‖a_i‖² +
        max_j ‖b_j‖²)`` are therefore recomputed from their differences (vectorised; in high dimension only the
        near-coincident pairs), and the others have ‖a − b‖ to a relative error of at most 50 c u."""
        a2, b2 = _cross_products(A, B, out, b_sqnorms)
        out *= -2
        out += a2[:, None]
        out += b2[None, :]
        np.maximum(out, 0, out=out)
        near = np.nonzero(out < (_LAPLACIAN_RECOMPUTE * (a2 + b2.max(initial=0)))[:, None])
        if near[0].size:
            diff = A[near[0]] - B[near[1]]
            out[near] = np.einsum("ij,ij->i", diff, diff)
        np.sqrt(out, out=out)
        out *= -out.dtype.type(self.gamma)
        return np.exp(out, out=out)

    def sample_frequencies(self, n_frequencies: int, dim: int, rng: np.random.Generator) -> np.ndarray:
        g = rng.standard_normal((dim, n_frequencies))
        w = rng.standard_normal(n_frequencies)
        return self.gamma * g / np.abs(w)


@dataclass(frozen=True)
class Identity(Kernel):
    """The identity (delta) kernel ``k(i, j) = 1{i = j}`` on the columns of an explicit output embedding: the output
    operator T = I of MATH.md §1 (MATH.md §8, the random-feature path of structured outputs). It has no bandwidth to
    choose and no spectral law: random features of it do not exist (its exact factor is the identity)."""

    name = "identity"
    param_name = None

    def _gram(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        return np.all(A[:, None, :] == B[None, :, :], axis=2).astype(np.float64)

    def sample_frequencies(self, n_frequencies: int, dim: int, rng: np.random.Generator) -> np.ndarray:
        raise ValueError("the identity (delta) kernel has no spectral law: it has no random Fourier features")


def median_heuristic(X: np.ndarray) -> Gaussian:
    """The Gaussian kernel of the median heuristic: ``γ = 1 / (2 σ²)`` with σ² the median of the squared distances
    between the rows of X (Schölkopf & Smola 2002; Garreau, Jitkrittum & Kanagawa 2017), so that a typical pair of
    inputs has ``k(x, z) = exp(−1/2)``, whatever the units of the inputs.

    Parameters
    ----------
    X : array-like of shape (n, d)
        The inputs, or a sample of them (the fits pass :data:`MEDIAN_HEURISTIC_ROWS` rows at most).

    Returns
    -------
    Gaussian

    Raises
    ------
    ValueError
        Fewer than two distinct rows (no scale to read).
    """
    from scipy.spatial.distance import pdist

    X = as_2d_points(np.asarray(X, dtype=np.float64), "X")
    d2 = pdist(X, "sqeuclidean") if X.shape[0] > 1 else np.zeros(0)
    positive = d2[d2 > 0]
    if positive.size == 0:
        raise ValueError(
            f"the median heuristic needs at least two distinct input rows to set the kernel's scale, got "
            f"n_samples = {X.shape[0]} with {'no two' if X.shape[0] > 1 else 'no pair of'} distinct rows; pass kernel_x"
        )
    return Gaussian(gamma=float(1.0 / (2.0 * np.median(positive))))


_KERNELS = {"gaussian": Gaussian, "laplacian": Laplacian, "identity": Identity}


def kernel_from_spec(spec: dict | str | Kernel) -> Kernel:
    """Build a kernel from ``{"name": ..., "gamma": ...}``, from ``"name:gamma"``, or return a Kernel as is."""
    if isinstance(spec, Kernel):
        return spec
    if isinstance(spec, str):
        name, sep, gamma = spec.partition(":")
        if not sep:
            raise ValueError(f"kernel must be written NAME:GAMMA (e.g. gaussian:0.01), got {spec!r}")
        try:
            spec = {"name": name.strip().lower(), "gamma": float(gamma)}
        except ValueError:
            raise ValueError(f"kernel gamma must be a number, got {gamma!r} in {spec!r}") from None
    if not isinstance(spec, dict) or spec.get("name") not in _KERNELS:
        raise ValueError(f"unknown kernel {spec!r}; expected one of {sorted(_KERNELS)}")
    return _KERNELS[spec["name"]](gamma=spec["gamma"])


def kernel_to_spec(kernel: Kernel) -> dict:
    return kernel.to_spec()
