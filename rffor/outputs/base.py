"""The output space of a model: what depends on the kind of output (MATH.md §1, §5, §6, §8, §9).

The inner mathematics of both solvers is output-agnostic: the exact dual sees an output Gram matrix K_out, the
random-feature model ``h_B(x) = φ_X(x)ᵀ B Φ_Θᵀ`` sees an output factor Φ_Θ and its Gram ``C_Θ = Φ_Θᵀ Φ_Θ / m``
(MATH.md §5). An :class:`OutputSpace` owns the rest, for one kind of output:

- how outputs are validated (:meth:`OutputSpace.check_outputs`) and what a missing value means
  (:attr:`OutputSpace.missing`: ``"interpolate"`` along the grid for curves, MATH.md §3.3; ``"mask"``, left out of
  the loss, where interpolation has no meaning, MATH.md §8), how the closed form's sums see them
  (:meth:`OutputSpace.fill`) and how the loss averages a row that has them (:attr:`OutputSpace.row_average`,
  :meth:`OutputSpace.masked_loss`: over its observed entries, or over all m as the exact structured dual does);
- the output factor of the random-feature model (:meth:`OutputSpace.output_map`: an :class:`OutputMap`) and the
  output features where a prediction is wanted (:meth:`OutputSpace.features_at`);
- its own description in a model file (:meth:`OutputSpace.to_spec`).

Implementations: :class:`~rffor.outputs.curves.CurveGrid` (curves on a shared increasing grid θ, MATH.md §1) and
:class:`~rffor.outputs.levels.QuantileLevels` (a scalar target as a constant curve over quantile levels, MATH.md
§6). A new kind of output is one module with a subclass and its registration in :data:`rffor.outputs.OUTPUT_SPACES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..kernels import Kernel
from ..losses import Loss, OverAllColumns

__all__ = ["OutputSpace", "OutputMap", "output_gram"]


def output_gram(output_features, Phi_theta: np.ndarray) -> np.ndarray:
    """``C_Θ = Φ_Θᵀ Φ_Θ / m`` on the grid: the exact diagonal for the exact factor, else a (D_θ, D_θ) matrix.

    Parameters
    ----------
    output_features : feature map
        φ_Θ; a map that knows its Gram on the grid (``C_theta``, the exact factor's diagonal) says so.
    Phi_theta : ndarray of shape (m, D_θ)
        φ_Θ on the grid.

    Returns
    -------
    ndarray of shape (D_θ,) (a diagonal) or (D_θ, D_θ)
    """
    exact = getattr(output_features, "C_theta", None)
    if exact is not None:
        return exact
    P = np.asarray(Phi_theta, dtype=np.float64)
    return P.T @ P / P.shape[0]


@dataclass
class OutputMap:
    """The output side of the random-feature model (MATH.md §5): k_Θ, its feature map φ_Θ, ``Φ_Θ`` on the training
    grid and ``C_Θ = Φ_Θᵀ Φ_Θ / m``. A fit has one; a selection of k_Θ (``kernel_theta_params``) one per γ tried.

    Attributes
    ----------
    kernel : Kernel
        k_Θ.
    features : ExactOutputFactor or RandomOutputFeatures
        φ_Θ (evaluates anywhere on Θ).
    Phi_theta : ndarray of shape (m, D_θ)
        φ_Θ on the training grid, in the fit's dtype.
    C_theta : ndarray of shape (D_θ,) or (D_θ, D_θ)
        :func:`output_gram` (1-D: diagonal, the exact factor).
    """

    kernel: Kernel
    features: Any
    Phi_theta: np.ndarray = field(repr=False)
    C_theta: np.ndarray = field(repr=False)

    @property
    def n_features(self) -> int:
        """D_θ."""
        return int(self.Phi_theta.shape[1])

    def coef_from(self, other: OutputMap, B: np.ndarray) -> np.ndarray:
        """A model B of ``other``'s output map expressed in this one: the least-squares fit, on the grid, of its
        curve coefficients ``W = B Φ_Θ,otherᵀ`` (D_x × m) by ``X Φ_Θᵀ`` (the warm start of a selection candidate
        whose k_Θ differs from its neighbour's).

        Parameters
        ----------
        other : OutputMap
        B : ndarray of shape (D_x, other.n_features)

        Returns
        -------
        ndarray of shape (D_x, self.n_features), float64
        """
        B = np.asarray(B, dtype=np.float64)
        if other is self:
            return B
        W = B @ np.asarray(other.Phi_theta, dtype=np.float64).T
        return np.linalg.lstsq(np.asarray(self.Phi_theta, dtype=np.float64), W.T, rcond=None)[0].T


class OutputSpace:
    """Base class of the kinds of output (module docstring). Subclasses set :attr:`kind` and :attr:`missing` and
    implement the methods below.

    Attributes
    ----------
    grid : ndarray of shape (m,)
        The locations of the columns of the output matrix Y (n, m): θ for curves, levels for quantile functions.
    """

    #: the name of the kind in model files and in :data:`rffor.outputs.OUTPUT_SPACES`
    kind: ClassVar[str] = ""
    #: what a NaN output means: "interpolate" (filled along the grid for the closed form's sums and the exact
    #: dual, masked by the gradient passes) or "mask" (left out of the loss wherever the loss is evaluated)
    missing: ClassVar[str] = "interpolate"
    #: how the loss averages a row with missing entries: "observed" (over its own observed count m_i: curves,
    #: MATH.md §5, §9) or "all" (over all m columns, a missing entry a zero residual: :meth:`masked_loss`)
    row_average: ClassVar[str] = "observed"
    #: whether the outputs are scalar targets seen on the grid (steps may then draw levels anywhere)
    scalar_targets: ClassVar[bool] = False
    #: the intercept curve b of the outputs (quantile functions), None for the others
    offset: Any = None

    grid: np.ndarray

    @property
    def m(self) -> int:
        """Columns of the output matrix."""
        return int(self.grid.shape[0])

    def check_outputs(self, Y, *, n_samples: int, name: str = "y") -> np.ndarray:
        """The outputs validated: ndarray of shape (n_samples, m), float64."""
        raise NotImplementedError  # pragma: no cover - abstract

    def view(self, data):
        """The chunked dataset the fit reads from ``data`` (the data itself, or scalar targets seen on the grid)."""
        return data

    def fill(self, Y: np.ndarray) -> np.ndarray:
        """The outputs the closed form's sums read, shape (rows, m): missing values filled by the space's rule."""
        raise NotImplementedError  # pragma: no cover - abstract

    def masked_loss(self, loss: Loss) -> Loss:
        """The loss a random-feature fit evaluates on this space's rows: ``loss`` itself when each row is averaged
        over its own observed entries (:attr:`row_average` "observed"), else :class:`rffor.losses.OverAllColumns`
        of it (every row over all m columns, missing entries as zero residuals)."""
        return loss if self.row_average == "observed" else OverAllColumns(loss)

    def default_kernel(self) -> Kernel:
        """k_Θ when the user gives none."""
        raise NotImplementedError  # pragma: no cover - abstract

    def init_shift(self) -> np.ndarray | None:
        """A shift of the outputs for the closed-form warm start of the robust routes, shape (m,), or None."""
        return None

    def output_map(self, kernel: Kernel, *, kind: str, n_features: int, rank_tol: float, seed, dtype: str) -> OutputMap:
        """The output side of a random-feature model with output kernel ``kernel``.

        Parameters
        ----------
        kernel : Kernel
        kind : {"exact", "rff"}
            The exact factor of the output Gram on the grid, or random output features.
        n_features : int
            D_θ of random output features.
        rank_tol : float
            Relative eigenvalue threshold of the exact factor.
        seed : int or tuple of ints
            Seed of random output features.
        dtype : str
            Type of Φ_Θ.
        """
        raise NotImplementedError  # pragma: no cover - abstract

    def features_at(self, output_map_features, where: np.ndarray | None) -> np.ndarray:
        """φ_Θ where predictions are wanted, shape (q, D_θ): at ``where`` (q locations), or on the grid (None)."""
        return output_map_features.transform(self.grid if where is None else where)

    def to_spec(self) -> dict:
        """A JSON description (``{"kind": ...}`` plus the space's own scalars); arrays go in :meth:`arrays`."""
        return {"kind": self.kind}

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays that define the space (saved beside :meth:`to_spec`)."""
        return {"grid": self.grid}
