"""The maps of a random-feature fit (MATH.md §5, §5.1): φ_X, built once per fit, and the output side Φ_Θ, shared
with the tasks once (or once per output kernel a selection tries).

- :func:`make_input_features`: random Fourier, orthogonal random or Nyström features of k_X (seed
  ``(random_state, 0)``), Nyström centres drawn by :func:`sample_centres` (seed ``(random_state, 2)``);
- :func:`make_output_map`: the output space's factor of k_Θ (seed ``(random_state, 1)`` for random output features);
- :class:`FitMaps`: what every task of a fit reads besides its data (φ_X, Φ_Θ, the output space, the feature cache's
  key), shared with the executor session once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..chunked import read_rows
from ..features import NystromFeatures, RandomFourierFeatures, seed_sequence
from ..kernels import Kernel
from ..outputs import CurveGrid, OutputMap
from ..settings import DEFAULT_N_FEATURES_THETA
from .feature_cache import cached_block

__all__ = [
    "FitMaps",
    "make_input_features",
    "make_output_map",
    "make_feature_maps",
    "sample_centres",
    "share_output_side",
]


@dataclass
class FitMaps:
    """The feature maps every task of a fit needs, shared with the tasks once per fit.

    Attributes
    ----------
    input_features : feature map
        φ_X (random Fourier features pickle without their frequencies: redrawn from the seed where used).
    Phi_theta : ndarray of shape (m, D_θ)
        φ_Θ on the training grid, in the fit's dtype.
    cache_key : str or None
        The fit's key in every process's feature cache (:mod:`rffor.solvers.feature_cache`); None: no cache.
    cache_bytes : int
        Bytes of features each process may keep for this fit.
    space : OutputSpace or None
        The outputs' kind: how the closed form's sums fill missing values (None: interpolation along the data's
        grid, :class:`~rffor.outputs.CurveGrid`).
    """

    input_features: Any
    Phi_theta: np.ndarray
    cache_key: str | None = None
    cache_bytes: int = 0
    space: Any = None

    def basis_block(self, part, chunk_id: int, start: int, X_block: np.ndarray) -> np.ndarray:
        """What the passes multiply for the rows ``X_block`` (rows ``start …`` of chunk ``chunk_id`` of ``part``),
        through the feature cache (read-only when cached: do not modify it): ``k(X_block, C)`` for a map with a
        kernel basis (Nyström, ``φ_X = k(·, C) Wᵀ``: :meth:`rffor.features.NystromFeatures.kernel_block`), else
        ``φ_X(X_block)``; shape (rows, D_x). With :meth:`to_basis` and :meth:`from_basis`,
        ``φ_X(X) B = basis · to_basis(B)`` and ``φ_X(X)ᵀ V = from_basis(basisᵀ V)``."""
        phi = self.input_features
        compute = getattr(phi, "kernel_block", phi.transform)
        return cached_block(
            self.cache_key,
            self.cache_bytes,
            getattr(part, "cache_tag", "all"),
            chunk_id,
            start,
            lambda: compute(X_block),
        )

    def block_features(self, part, chunk_id: int, start: int, X_block: np.ndarray) -> np.ndarray:
        """``φ_X`` of the rows ``X_block`` (as :meth:`basis_block`), shape (rows, D_x): the basis block whitened,
        for the passes that need ``φ_Xᵀ φ_X`` (read-only when cached: do not modify it)."""
        A = self.basis_block(part, chunk_id, start, X_block)
        whiten = getattr(self.input_features, "whiten", None)
        return A if whiten is None else whiten(A)

    def to_basis(self, B: np.ndarray) -> np.ndarray:
        """Coefficients B of shape (D_x, D_θ) or (K, D_x, D_θ) on the basis of :meth:`basis_block` (B itself when
        that basis is φ_X)."""
        fold = getattr(self.input_features, "to_kernel_basis", None)
        return B if fold is None else fold(B)

    def from_basis(self, H: np.ndarray) -> np.ndarray:
        """Sums ``basisᵀ V`` of shape (D_x, ·) or (K, D_x, ·) as sums ``φ_Xᵀ V`` (H itself when the basis is φ_X)."""
        unfold = getattr(self.input_features, "from_kernel_basis", None)
        return H if unfold is None else unfold(H)


def make_input_features(
    d: int,
    random_state: int,
    *,
    kernel_x: Kernel,
    n_features_x: int = 1000,
    input_features: str = "rff",
    centres: np.ndarray | None = None,
    dtype: str = "float32",
):
    """φ_X of a fit (seed ``(random_state, 0)`` for random features).

    Parameters
    ----------
    d : int
        Input dimension.
    random_state : int
    kernel_x : Kernel
    n_features_x : int
        D_x of random features (Nyström: the centres give it).
    input_features : {"rff", "orf", "nystrom"}
    centres : ndarray of shape (M, d), optional
        Nyström centres (rows of the training inputs: :func:`sample_centres`).
    dtype : str
    """
    if input_features == "nystrom":
        if centres is None:
            raise ValueError("input_features='nystrom' needs centres (rows of the training inputs)")
        return NystromFeatures(kernel_x, centres, dtype=dtype)
    orf = {"orthogonal": True} if input_features == "orf" else {}
    return RandomFourierFeatures(kernel_x, n_features_x, d, seed=(random_state, 0), dtype=dtype, **orf)


def make_output_map(space, kernel_theta: Kernel, settings, random_state: int) -> OutputMap:
    """The output side of a fit with output kernel ``kernel_theta`` (seed ``(random_state, 1)`` for random output
    features), by the output space's rule (:meth:`rffor.outputs.OutputSpace.output_map`) with the settings'
    ``output_features``, ``n_features_theta``, ``output_rank_tol`` and ``dtype``."""
    return space.output_map(
        kernel_theta,
        kind=settings.output_features,
        n_features=settings.n_features_theta or DEFAULT_N_FEATURES_THETA,
        rank_tol=settings.output_rank_tol,
        seed=(random_state, 1),
        dtype=settings.dtype,
    )


def make_feature_maps(d, theta, random_state, *, kernel_x, kernel_theta, settings, centres=None):
    """The feature maps of a fit on curves on ``theta`` exactly as :func:`rffor.solvers.rff.fit_rff` builds them
    (``settings``: resolved :class:`rffor.settings.RFSettings`); returns ``(φ_X, OutputMap)``."""
    phi_x = make_input_features(
        d, random_state, kernel_x=kernel_x, n_features_x=settings.n_features_x,
        input_features=settings.input_features, centres=centres, dtype=settings.dtype,
    )  # fmt: skip
    return phi_x, make_output_map(CurveGrid(theta), kernel_theta, settings, random_state)


def share_output_side(run, problem, kernel_theta: Kernel):
    """The output side of ``problem`` with another output kernel, and the fit's maps with its Φ_Θ shared with the
    session ``run`` (the same cache key: the workers' cached input features serve every output side).

    Returns
    -------
    output : OutputMap
    maps : handle
        Of the fit's :class:`FitMaps` with ``output.Phi_theta``.
    """
    out = make_output_map(problem.space, kernel_theta, problem.settings, problem.random_state)
    return out, run.share(replace(problem.fit_maps, Phi_theta=out.Phi_theta))


def sample_centres(run, data, n_centres: int, seed) -> np.ndarray:
    """Nyström centres: ``min(M, n)`` input rows drawn uniformly without replacement from all n rows.

    The row indices are drawn on the driver (``numpy`` Generator seeded by ``seed``); the rows are read by the
    partition tasks of the chunks that hold them (:func:`rffor.chunked.read_rows`), only M rows of d values travel.

    Parameters
    ----------
    run : executor session
    data : chunked dataset
    n_centres : int
        M.
    seed : int or tuple of ints
        Seed of the draw (:func:`rffor.features.seed_sequence`).

    Returns
    -------
    ndarray of shape (min(M, n), d), float64
        In increasing row order.
    """
    rng = np.random.default_rng(seed_sequence(seed))
    rows = np.sort(rng.choice(data.n, size=min(int(n_centres), data.n), replace=False))
    return read_rows(run, data, rows, label="Nyström centres")
