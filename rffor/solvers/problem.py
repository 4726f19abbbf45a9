"""The random-feature problem (P_rf) of MATH.md §5 as the routes see it: the counterpart of
:class:`rffor.solvers.dual.DualProblem` for the large-scale path.

    J(B) = (1/n) Σ_i L(y_i − Φ_Θ Bᵀ φ_X(x_i)) + (λ/2) ‖B‖_F²                                       (P_rf)

An :class:`RFProblem` lives inside one executor session: it holds the data, the resolved settings, the output space,
the loss and λ, the maps (φ_X, and the output side Φ_Θ with its Gram C_Θ) and their handle as shared with the
session, and the row split of a held-out selection. A selection changes λ, the loss's κ or ε and the output side
(:meth:`RFProblem.replace`); a route (:mod:`rffor.solvers.routes`) minimises J for the problem it is given.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..kernels import Kernel
from ..losses import Loss
from ..outputs import OutputMap, OutputSpace
from ..settings import RFSettings

__all__ = ["RFProblem", "Start"]


@dataclass
class RFProblem:
    """(P_rf) inside one executor session.

    Attributes
    ----------
    data : chunked dataset
        The training rows as the fit sees them (:mod:`rffor.chunked`).
    settings : RFSettings
        Resolved (:meth:`RFSettings.resolved`: concrete input features and dtype).
    space : OutputSpace
        The kind of output (missing values, output factor).
    loss : Loss
    lam : float
        λ > 0.
    input_features : feature map
        φ_X (D_x features).
    output : OutputMap
        The output side: k_Θ, φ_Θ, Φ_Θ on the grid, C_Θ.
    maps : handle
        The fit's :class:`~rffor.solvers.maps.FitMaps` with ``output.Phi_theta``, as shared with the session.
    fit_maps : FitMaps
        The driver's copy of those maps (to share them again with another output side).
    random_state : int
        Every random draw of the fit derives from it.
    kernel_x : Kernel
        k_X.
    split : RowSplit or None
        With ``lam="auto"``: every pass reads the rows side by side of the selection's split, so that the refit
        reuses the features the selection's passes cached (and a resumed refit makes the same sums).
    metric_chunks : list of int or None
        The chunks whose rows give the MM metric or the DSGD preconditioner when they are computed apart
        (None: all).
    """

    data: Any
    settings: RFSettings
    space: OutputSpace
    loss: Loss
    lam: float
    input_features: Any
    output: OutputMap
    maps: Any = field(repr=False)
    fit_maps: Any = field(repr=False)
    random_state: int
    kernel_x: Kernel
    split: Any = None
    metric_chunks: list[int] | None = None

    @property
    def m(self) -> int:
        """Columns of the outputs (grid size)."""
        return int(self.data.m)

    @property
    def n(self) -> int:
        """Rows (curves)."""
        return int(self.data.n)

    @property
    def Phi_theta(self) -> np.ndarray:
        """φ_Θ on the grid, shape (m, D_θ)."""
        return self.output.Phi_theta

    @property
    def C_theta(self) -> np.ndarray:
        """``Φ_Θᵀ Φ_Θ / m``, shape (D_θ,) (diagonal) or (D_θ, D_θ)."""
        return self.output.C_theta

    @property
    def dtype(self) -> str:
        """Type of the features and of B."""
        return self.settings.dtype

    @property
    def shape(self) -> tuple[int, int]:
        """Shape (D_x, D_θ) of B."""
        return (int(self.input_features.n_features), self.output.n_features)

    def replace(self, **changes) -> RFProblem:
        """A copy with some attributes changed (λ, loss, output side and its maps after a selection)."""
        return dataclasses.replace(self, **changes)

    def with_output(self, output: OutputMap, maps) -> RFProblem:
        """The problem with another output side and the maps handle that carries its Φ_Θ."""
        return self.replace(output=output, maps=maps)


@dataclass
class Start:
    """Where a route starts (:mod:`rffor.solvers.routes`).

    Attributes
    ----------
    coef : ndarray of shape (D_x, D_θ) or None
        A model to start from (a selected candidate); None: the route's own warm start.
    sums : FeatureSums or None
        Closed-form sums of the problem's rows (or of the rows of its metric) already computed: the route needs no
        pass to compute them again.
    state : dict of str to ndarray or None
        A resumed fit: the route's state from its checkpoint (plain arrays).
    first : int
        The first round or pass to run (a resumed fit's: the checkpoint's round + 1).
    """

    coef: np.ndarray | None = None
    sums: Any = None
    state: dict | None = None
    first: int = 0
