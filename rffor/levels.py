"""Quantile levels (MATH.md §6): training grids, the level draws of doubly stochastic steps, and the marginal offset.

- :func:`level_grid`: the grid θ_1 < … < θ_m of a fit: m midpoints ``(j − ½)/m`` (the midpoint rule for the
  uniform μ on [0, 1], away from 0 and 1 where the quantiles of an unbounded target do not exist), or the user's
  levels (joint quantile regression at finitely many levels, seed 001).
- :func:`draw_levels`: s levels of one DSGD step (thesis 003 Algorithm 3.2 samples θ ~ μ): i.i.d. uniform (the
  default: unbiased), scrambled Sobol points (unbiased, lower variance; consecutive blocks of one sequence per task,
  balanced when s is a power of 2), or the s
  Gauss–Legendre nodes with their weights (deterministic and exact for polynomials of degree < 2s, but biased for
  the kinks of the plain pinball loss).
- :class:`NormalOffset`: b(θ), a smooth marginal quantile function of the training targets (normal, fitted by their
  median and interquartile range), a fixed intercept curve: the model is ``q(x)(θ) = b(θ) + h(x)(θ)`` with h in the
  RKHS, so that a strongly regularised h falls back on marginal quantiles rather than on 0 (seed 001: an intercept
  is mandatory for quantile regression; this one is not learned, which keeps the dual free of the constraint
  Σ_i α_i = 0).
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
from scipy.special import ndtri

from ._validation import check_choice, check_int, check_levels

__all__ = ["LEVEL_SAMPLING", "level_grid", "gauss_legendre_levels", "draw_levels", "NormalOffset"]

#: the level draws of :func:`draw_levels`
LEVEL_SAMPLING = ("uniform", "sobol", "gauss-legendre")


def level_grid(levels) -> np.ndarray:
    """The training grid: ``levels`` midpoints ``(j − ½)/m`` for an int m ≥ 1, else the given levels (checked).

    Returns
    -------
    ndarray of shape (m,), strictly increasing in [0, 1]
    """
    if isinstance(levels, (int, np.integer)) and not isinstance(levels, (bool, np.bool_)):
        m = check_int(levels, "levels", 1)
        return (np.arange(m) + 0.5) / m
    return check_levels(levels)


@functools.lru_cache(maxsize=32)
def gauss_legendre_levels(s: int) -> tuple[np.ndarray, np.ndarray]:
    """The s Gauss–Legendre nodes on [0, 1] and their weights (summing to 1); cached (read-only arrays)."""
    x, w = np.polynomial.legendre.leggauss(check_int(s, "s", 1))
    nodes, weights = 0.5 * (x + 1.0), 0.5 * w
    nodes.flags.writeable = weights.flags.writeable = False
    return nodes, weights


def sobol_stream(rng: np.random.Generator):
    """A scrambled one-dimensional Sobol sequence seeded by ``rng``: consecutive draws of s = 2^k points are the
    aligned blocks of one sequence, each of them balanced (a (0, k, 1)-net), at the cost of one engine per stream
    rather than per step."""
    from scipy.stats import qmc

    return qmc.Sobol(d=1, scramble=True, seed=rng)


def draw_levels(method: str, s: int, rng: np.random.Generator, stream=None) -> tuple[np.ndarray, np.ndarray | None]:
    """The levels of one doubly stochastic step (module docstring).

    Parameters
    ----------
    method : {"uniform", "sobol", "gauss-legendre"}
    s : int
        Levels per step.
    rng : numpy.random.Generator
    stream : scipy.stats.qmc.Sobol, optional
        "sobol": the sequence to continue (:func:`sobol_stream`); None starts a new one.

    Returns
    -------
    levels : ndarray of shape (s,)
    weights : ndarray of shape (s,) or None
        Quadrature weights (summing to 1) for "gauss-legendre"; None means equal weights 1/s.
    """
    if method == "uniform":
        return rng.random(s), None
    if method == "sobol":
        engine = sobol_stream(rng) if stream is None else stream
        with warnings.catch_warnings():  # s not a power of 2 loses the balance: documented, not warned per step
            warnings.simplefilter("ignore", UserWarning)
            return engine.random(s)[:, 0], None
    check_choice(method, "level_sampling", set(LEVEL_SAMPLING))
    return gauss_legendre_levels(s)


class NormalOffset:
    """b(θ) = μ + s Φ⁻¹(θ): the quantile function of a normal law fitted robustly to the training targets
    (μ their median, s their interquartile range / 1.349), the fixed intercept curve of a quantile model.

    A smooth, increasing baseline, so that a strongly regularised model falls back on sensible marginal quantiles.
    The targets' empirical quantile function would fit their marginal law exactly, but its slope is as rough as the
    gaps between order statistics, and a model ``b + h`` with a smooth h inherits that roughness as crossings
    (measured on the sine toy, engel, BostonHousing and cpus: 3-20 times the crossing of this offset at the same
    held-out pinball loss). Levels are clipped to [1e-6, 1 − 1e-6] (b(0) and b(1) are then finite).

    Parameters
    ----------
    location : float
        μ.
    scale : float
        s ≥ 0.
    """

    EDGE = 1e-6

    def __init__(self, location: float, scale: float):
        self.location = float(location)
        self.scale = float(scale)
        if not (np.isfinite(self.location) and np.isfinite(self.scale) and self.scale >= 0):
            raise ValueError(f"offset location and scale must be finite with scale >= 0, got {location}, {scale}")

    @classmethod
    def fit(cls, y: np.ndarray) -> NormalOffset:
        """From training targets y of shape (n,)."""
        q25, q50, q75 = np.quantile(np.asarray(y, dtype=np.float64), [0.25, 0.5, 0.75])
        return cls(q50, (q75 - q25) / (2.0 * ndtri(0.75)))

    def _z(self, theta) -> np.ndarray:
        return ndtri(np.clip(np.asarray(theta, dtype=np.float64), self.EDGE, 1.0 - self.EDGE))

    def __call__(self, theta) -> np.ndarray:
        """b(θ) for levels of any shape."""
        return self.location + self.scale * self._z(theta)

    def slope(self, theta) -> np.ndarray:
        """b'(θ) = s / φ(Φ⁻¹(θ)) (≥ 0)."""
        z = self._z(theta)
        return self.scale * np.sqrt(2.0 * np.pi) * np.exp(0.5 * z * z)

    def to_array(self) -> np.ndarray:
        """``[location, scale]`` (a model file's array)."""
        return np.array([self.location, self.scale])

    @classmethod
    def from_array(cls, values) -> NormalOffset:
        values = np.asarray(values, dtype=np.float64)
        if values.shape != (2,):
            raise ValueError(f"offset must be an array [location, scale], got shape {values.shape}")
        return cls(*values)

    def __repr__(self) -> str:
        return f"NormalOffset(location={self.location:.4g}, scale={self.scale:.4g})"
