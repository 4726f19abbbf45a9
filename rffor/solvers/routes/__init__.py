"""The routes of the random-feature fit (MATH.md §5): each minimises (P_rf) for an
:class:`~rffor.solvers.problem.RFProblem` from a :class:`~rffor.solvers.problem.Start`, one module each, with one
entry function ``fit(run, problem, start, log) -> RFFResult``:

- ``"closed_form"`` (:mod:`.closed_form`): the square loss in one pass of sums;
- ``"mm"`` (:mod:`.mm`): majorize–minimize passes, the default of every other smooth loss;
- ``"sgd"`` (:mod:`.rounds`): rounds of local doubly stochastic gradient with periodic averaging.

A new route is one module plus its line in :data:`ROUTES` (and its name in the settings' ``rff_method`` choices).
"""

from __future__ import annotations

from . import closed_form, mm, rounds

__all__ = ["ROUTES", "route_for"]

#: route name -> entry function ``fit(run, problem, start, log) -> RFFResult``
ROUTES = {"closed_form": closed_form.fit, "mm": mm.fit, "sgd": rounds.fit}


def route_for(settings, loss, resumed: bool = False) -> str:
    """The route that fits ``loss`` under ``settings`` (:meth:`rffor.settings.RFSettings.route`): the square loss
    always starts with its closed form (MM finishes it when outputs are missing), a resumed fit continues the route
    whose checkpoint it holds (MM or DSGD)."""
    method = settings.route(loss)
    if resumed:
        return "sgd" if method == "sgd" else "mm"
    if loss.is_square and method in ("closed_form", "mm"):
        return "closed_form"
    return method
