"""Curves on a shared grid (MATH.md §1): ``Y[i, j] = y_i(θ_j)`` on an increasing grid θ_1 < … < θ_m."""

from __future__ import annotations

import numpy as np

from .._validation import check_theta, check_Y, fill_missing
from ..features import make_output_features
from ..kernels import Gaussian, Kernel
from .base import OutputMap, OutputSpace, output_gram

__all__ = ["CurveGrid"]


class CurveGrid(OutputSpace):
    """Output curves observed on a shared strictly increasing grid θ (MATH.md §1).

    A missing value (NaN) is interpolated linearly along θ for the closed form's sums and the exact dual (MATH.md
    §3.3) and masked by every loss evaluation (gradient passes, DSGD steps).

    Parameters
    ----------
    theta : array-like of shape (m,)
        The grid (validated: finite, strictly increasing).
    """

    kind = "curves"
    missing = "interpolate"

    def __init__(self, theta):
        theta = np.asarray(theta, dtype=np.float64)
        self.grid = check_theta(theta, theta.shape[0] if theta.ndim == 1 else -1)

    def check_outputs(self, Y, *, n_samples: int, name: str = "y") -> np.ndarray:
        return check_Y(Y, n_samples=n_samples, name=name, m=self.m)

    def fill(self, Y: np.ndarray) -> np.ndarray:
        """Each curve's missing values interpolated along θ, constant beyond its ends (MATH.md §3.3)."""
        return fill_missing(Y, self.grid)

    def default_kernel(self) -> Kernel:
        """``Gaussian(100 / span²)``: a length scale of a tenth of the grid's span."""
        span = float(self.grid[-1] - self.grid[0]) if self.m > 1 else 1.0
        return Gaussian(gamma=100.0 / span**2)

    def output_map(self, kernel, *, kind, n_features, rank_tol, seed, dtype) -> OutputMap:
        features = make_output_features(
            kind, kernel, self.grid, n_features=n_features, tol=rank_tol, seed=seed, dtype=dtype
        )
        Phi = np.ascontiguousarray(features.transform(self.grid), dtype=dtype)
        return OutputMap(kernel, features, Phi, output_gram(features, Phi))

    def __repr__(self) -> str:
        return f"CurveGrid(m={self.m}, θ ∈ [{self.grid[0]:g}, {self.grid[-1]:g}])"
