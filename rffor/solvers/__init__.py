"""Solvers of (P) (MATH.md §2): exact duals (:mod:`.admm`, :mod:`.apgd`, on :mod:`.dual`) and random features
(:mod:`.rff`, with the local steps of :mod:`.dsgd`).

:data:`EXACT_SOLVERS` is the one table of the exact solvers: a name maps to the function solving a
:class:`~rffor.solvers.dual.DualProblem`; each function's own keyword defaults (``max_iter``, ``tol``) are the
library's defaults, which the estimator and the command line read from here instead of retyping them.
"""

from __future__ import annotations

import inspect

from .admm import solve_admm
from .apgd import solve_apgd

__all__ = ["EXACT_SOLVERS", "solver_default"]

#: exact solvers by name: ``solve(problem, *, tol, max_iter, callback) -> SolverResult``
EXACT_SOLVERS = {"admm": solve_admm, "apgd": solve_apgd}


def solver_default(solver: str, name: str):
    """The default of keyword ``name`` of the exact solver ``solver`` (e.g. ``solver_default("apgd", "max_iter")``)."""
    return inspect.signature(EXACT_SOLVERS[solver]).parameters[name].default
