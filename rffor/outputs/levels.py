"""Quantile levels (MATH.md §6): a scalar target y_i is the constant curve y_i(θ) over levels θ ∈ [0, 1], minus a
fixed intercept curve b(θ); the model is a quantile function ``q(x)(θ) = b(θ) + h(x)(θ)``."""

from __future__ import annotations

import numpy as np

from ..chunked import ExpandedTargets
from ..kernels import Gaussian, Kernel
from .curves import CurveGrid

__all__ = ["QuantileLevels"]


class QuantileLevels(CurveGrid):
    """Quantile levels as the output grid (MATH.md §6).

    The data are scalar targets (a chunked dataset with m = 1); the fit sees them as curves ``y_i − b(θ_j)`` on the
    levels (:meth:`view`). A target is never missing (refused by the estimators). DSGD steps may draw levels
    anywhere in [0, 1] and read the scalar targets themselves (:attr:`scalar_targets`).

    Parameters
    ----------
    levels : array-like of shape (m,)
        Strictly increasing levels in [0, 1].
    offset : callable or None
        b: ``offset(θ)`` and ``offset.slope(θ)`` (:class:`rffor.levels.NormalOffset`), or None for b = 0.
    """

    kind = "levels"
    scalar_targets = True

    def __init__(self, levels, offset=None):
        super().__init__(levels)
        self.offset = offset

    def default_kernel(self) -> Kernel:
        """``Gaussian(10)`` on the levels."""
        return Gaussian(gamma=10.0)

    def intercept(self) -> np.ndarray:
        """b on the levels, shape (m,) (zeros without an offset)."""
        return np.zeros(self.m) if self.offset is None else self.offset(self.grid)

    def init_shift(self) -> np.ndarray:
        """``b(θ_j) − b(½)``, shape (m,): the closed-form warm start fits ``Y + shift``, so that it starts at the
        marginal quantile function moved by the conditional location, not at a flat curve at the mean."""
        median = 0.0 if self.offset is None else float(self.offset(0.5))
        return self.intercept() - median

    def view(self, data) -> ExpandedTargets:
        """The scalar targets of ``data`` (m = 1) seen as curves ``y − b`` on the levels."""
        return ExpandedTargets(data, self.grid, self.intercept())

    def __repr__(self) -> str:
        return f"QuantileLevels(m={self.m}, offset={self.offset!r})"
