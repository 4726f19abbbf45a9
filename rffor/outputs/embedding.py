"""Explicit output embeddings (MATH.md §8): each output y_i is given by its embedding ψ(y_i) ∈ R^D (labels as
indicators, histograms as √y, random features of a Gaussian output kernel, Nyström on landmark outputs), and the
random-feature model learns ``h(x) = Bᵀ φ_X(x) ∈ R^D`` with the identity output operator.

The loss sees a residual ``r_i = ψ(y_i) − h(x_i)`` as a "curve" of D values, averaged over its D columns as every
curve loss is (MATH.md §1: ``‖r‖² = (1/D) Σ_j r_j²``), so the units against the output-RKHS norm of seed 002 are
λ_FR = Λ/D and κ_FR = κ/√D (ε too), MATH.md §8. A missing entry (NaN) is **masked**: left out of the loss (each
row averaged over its own observed entries, :attr:`~rffor.outputs.base.OutputSpace.row_average` "observed"; the
output-kernel embeddings of :class:`~rffor.outputs.OutputKernelSpace` average over all D instead, as the exact
structured solver does), never interpolated (there is no order among the columns).
"""

from __future__ import annotations

import numpy as np

from ..features import register_feature_map
from ..kernels import Identity, Kernel
from .base import OutputMap, OutputSpace

__all__ = ["EmbeddingSpace", "IdentityOutputFeatures"]


@register_feature_map
class IdentityOutputFeatures:
    """φ_Θ of the identity output operator on D columns: ``φ_Θ(j) = e_j``, so ``Φ_Θ = I_D`` and
    ``C_Θ = Φ_Θᵀ Φ_Θ / D = I / D`` (exact, diagonal).

    Parameters
    ----------
    dim : int
        D.
    dtype : str, default "float64"
    """

    kind = "identity"

    def __init__(self, dim: int, dtype="float64"):
        self.dim, self.dtype = int(dim), np.dtype(dtype)

    @property
    def n_features(self) -> int:
        return self.dim

    @property
    def C_theta(self) -> np.ndarray:
        """``1/D`` on the diagonal, shape (D,)."""
        return np.full(self.dim, 1.0 / self.dim)

    def transform(self, where) -> np.ndarray:
        """The rows of I_D at column positions ``where`` (shape (q,), integers in [0, D)), shape (q, D)."""
        idx = np.asarray(where, dtype=np.float64).ravel()
        if not np.all((idx == np.round(idx)) & (idx >= 0) & (idx < self.dim)):
            raise ValueError(f"embedding columns must be integers in [0, {self.dim}), got {where!r}")
        return np.eye(self.dim, dtype=self.dtype)[idx.astype(int)]

    def get_state(self) -> tuple[dict, dict]:
        return {"kind": self.kind, "dim": self.dim, "dtype": self.dtype.name}, {}

    @classmethod
    def from_state(cls, spec: dict, arrays: dict) -> IdentityOutputFeatures:
        return cls(int(spec["dim"]), spec["dtype"])

    def __repr__(self) -> str:
        return f"IdentityOutputFeatures(dim={self.dim})"


class EmbeddingSpace(OutputSpace):
    """Outputs given by an explicit embedding ψ(y) ∈ R^D (module docstring).

    Parameters
    ----------
    dim : int
        D, the embedding's dimension (the columns of the output matrix).
    """

    kind = "embedding"
    missing = "mask"

    def __init__(self, dim: int):
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
            raise ValueError(f"dim must be a positive integer (the embedding's dimension), got {dim!r}")
        self.grid = np.arange(int(dim), dtype=np.float64)

    def check_outputs(self, Y, *, n_samples: int, name: str = "y") -> np.ndarray:
        Y = np.asarray(Y, dtype=np.float64)
        if Y.ndim != 2 or Y.shape != (n_samples, self.m):
            raise ValueError(f"{name} must have shape ({n_samples}, {self.m}) (the embedding ψ), got {Y.shape}")
        if np.isinf(Y).any():
            raise ValueError(f"{name} must be finite (NaN marks a masked entry), got inf")
        if np.isnan(Y).all(axis=1).any():
            raise ValueError(f"{name} has a row with no observed entry: nothing to learn from it")
        return Y

    def fill(self, Y: np.ndarray) -> np.ndarray:
        """Missing entries as 0 for the closed form's sums: a warm start only, the fit then minimises the masked
        objective (the closed-form route hands over to MM passes when entries are missing)."""
        return np.where(np.isnan(Y), 0.0, Y)

    def default_kernel(self) -> Kernel:
        """The identity output operator."""
        return Identity()

    def output_map(self, kernel, *, kind, n_features, rank_tol, seed, dtype) -> OutputMap:
        if not isinstance(kernel, Identity):
            raise ValueError(
                f"an explicit embedding has the identity output operator; kernel_theta must be None or "
                f"rffor.kernels.Identity(), got {kernel!r} (an output kernel is chosen by its embedding ψ)"
            )
        features = IdentityOutputFeatures(self.m, dtype)
        Phi = features.transform(self.grid)
        return OutputMap(kernel, features, Phi, features.C_theta)

    def to_spec(self) -> dict:
        return {"kind": self.kind, "dim": self.m}

    def __repr__(self) -> str:
        return f"EmbeddingSpace(dim={self.m})"
