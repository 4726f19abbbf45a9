"""Tests of the losses: every loss the library defines against the conventions of its dual (MATH.md §3, §5), then
the five losses of paper 000 against their closed forms (MATH.md §2 and the §3.1/§3.2 tables).

Every loss
----------
The loss classes are found by walking the library (``tests/_registry.py``: every subclass of
:class:`rffor.losses.Loss` defined in a module of rffor, which includes the spec registry of
:func:`rffor.losses.loss_from_spec` and :class:`rffor.solvers.noncrossing.NonCrossingLoss`), each with the example
parameters of :data:`EXAMPLES`. A new loss class is picked up by every test of this part without an edit (with its
default parameters if it has them), and :func:`test_every_loss_class_has_example_parameters` fails until it has
examples. The tests check, for every example: the gradient against finite differences of ``curve_values``, the
conjugate pair (primal value, gradient, dual penalty ψ and ``dual_quadratic``) by the Fenchel–Young equality,
Moreau's identity for the prox, that the prox minimises its objective, and the spec round trip.

The conjugate pair in the library's coordinates. A curve's loss ``L(r)`` (``curve_values``) is a function of its
m grid values; the dual of MATH.md §3 pairs it with ``L*(α) = sup_r <α, r>_μ − L(r)`` in the μ_m inner product
``<α, r>_μ = (1/m) Σ_j α_j r_j`` (MATH.md §1). (D_s) stores α by its values ``a = (α(θ_j))_j`` and is D multiplied
by m, and its row term is ``(q/2)‖a‖₂² + ψ(a)`` with ``q = dual_quadratic`` and ``ψ = dual_penalty``
(:mod:`rffor.solvers.dual`): ``m L*(α)``, i.e. ½‖a‖² + m g*(α) for the losses ½‖·‖² □ g of MATH.md §2 and
``Σ_j ℓ_θj*(a_j)`` for the pinball losses (:mod:`rffor.losses`, (D_q)). Because ``m <α, r>_μ = aᵀr``,

    Φ(a) := (q/2)‖a‖₂² + ψ(a) = sup_r aᵀr − m L(r) = (mL)*(a)        (Euclidean conjugate of m L)

and Fenchel–Young reads ``m L(r) + Φ(a) ≥ aᵀr`` for every (r, a), with equality iff ``a ∈ m ∂L(r)``. The gradient
``G = grad(r)`` is ``∂L/∂r_j`` (MATH.md §5), so ``a = m G`` is the dual point of r and

    m L(r) + (q/2)‖m G‖₂² + ψ(m G) = m Gᵀr                                                           (FY)

(:func:`test_fenchel_young_equality_at_the_gradient`). For :class:`NonCrossingLoss` the m is its number of levels
(the ``nm`` of (D_s) that :func:`rffor.solvers.noncrossing.noncrossing_problem` keeps), not its number of columns;
the example says which. The eigenbasis dual (D_e, MATH.md §3.2) works on coordinates c ∈ R^r of a curve in an
orthonormal basis of 𝒴: ``L_e(c) = curve_values(√r c)`` (as :meth:`DualProblem.primal_value` evaluates it), its row
term ``(q/2)‖a‖² + ψ_e(a) = L_e*(a)`` with no factor, and ``a = ∇L_e(c) = √r grad(√r c)``.

Moreau's identity ``prox_{γΦ}(u) + γ prox_{Φ*/γ}(u/γ) = u`` with ``Φ* = mL``: by completing the square,
``prox_{γΦ}(u) = prox_{γ'ψ}(u/(1 + γq))`` with ``γ' = γ/(1 + γq)`` (for the pinball losses, q = 0, the library's
``prox_dual(u, γ)`` itself), and ``z = (u − p)/γ`` is the prox of ``mL/γ`` at ``u/γ`` iff ``p ∈ ∂(mL)(z)``, i.e.
iff (FY) holds with equality at (z, p). That is checked exactly, with no numerical minimisation (unreliable on the
non-smooth losses); it fails if the prox is not the prox of the ψ that is conjugate to the primal.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pytest
from _registry import library_subclasses  # tests/ is on sys.path (rootdir conftest)
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.optimize import minimize_scalar

from rffor.losses import (
    LOSS_ALIASES,
    EpsilonInsensitive,
    EpsilonSVR,
    Huber,
    Loss,
    OverAllColumns,
    Pinball,
    Square,
    loss_from_spec,
)
from rffor.solvers.noncrossing import NonCrossingLoss
from rffor.welsch import Welsch

pytestmark = pytest.mark.usefixtures("single_blas_thread")

INF = math.inf


# ================================================================================================================
# every loss of the library
# ================================================================================================================


@dataclass(frozen=True)
class Example:
    """A loss with the shape of the residuals it reads.

    ``m`` is the number of grid locations the loss averages over (the m of the dual's ``nm`` scaling, MATH.md §3.1)
    and ``n_extra`` the number of further columns after them (:class:`NonCrossingLoss`: its anchors θ̃)."""

    loss: Loss
    m: int = 6
    n_extra: int = 0

    @property
    def columns(self) -> int:
        return self.m + self.n_extra

    @property
    def theta(self) -> np.ndarray | None:
        """The locations of the columns, for a loss with ``needs_levels``: levels in (0, 1), then anchors."""
        if not self.loss.needs_levels:
            return None
        return np.concatenate([(np.arange(self.m) + 0.5) / self.m, np.linspace(0.05, 0.95, self.n_extra)])

    def residuals(self, seed: int = 0, n: int = 8) -> np.ndarray:
        """Rows of RMS from 0.03 to 4: both sides of every kink and threshold of the examples' parameters."""
        rng = np.random.default_rng(seed)
        return rng.standard_normal((n, self.columns)) * np.geomspace(0.03, 4.0, n)[:, None]


#: example parameters of every loss class: both regimes of each one's non-smooth part on :meth:`Example.residuals`
EXAMPLES: dict[type, list[Example]] = {
    Square: [Example(Square())],
    Huber: [Example(Huber(kappa=kappa, p=p)) for p in (1, 2) for kappa in (0.3, 1.5)],
    EpsilonInsensitive: [Example(EpsilonInsensitive(epsilon=eps, p=p)) for p in (2, INF) for eps in (0.2, 1.0)],
    EpsilonSVR: [Example(EpsilonSVR(epsilon=eps)) for eps in (0.0, 0.2, 1.0)],
    Pinball: [Example(Pinball(epsilon=eps, kappa=kappa)) for eps, kappa in [(0, 0), (0.3, 0), (0, 0.4), (0.2, 0.5)]],
    NonCrossingLoss: [
        Example(NonCrossingLoss(Pinball(), lam_nc=0.8, m=6, scale=0.4), m=6, n_extra=4),
        Example(NonCrossingLoss(Pinball(epsilon=0.2, kappa=0.5), lam_nc=2.0, m=5, scale=1.0), m=5, n_extra=5),
    ],
    OverAllColumns: [
        Example(OverAllColumns(base))
        for base in (
            Square(),
            Huber(kappa=0.3),
            EpsilonInsensitive(epsilon=0.2, p=INF),
            EpsilonSVR(epsilon=0.2),
            Welsch(kappa=0.5),
        )
    ],
    # residual norms 0.03 … 4: inside the quadratic region, at the inflection (‖r‖ = κ/√2) and far beyond
    Welsch: [Example(Welsch(kappa=kappa)) for kappa in (0.3, 1.5)],
}

#: (test, loss class) -> why that test fails for that class today: marked xfail(strict=True), so that a fix shows
KNOWN_FAILURES: dict[tuple[str, type], str] = {}

LOSS_CLASSES = library_subclasses(Loss)


def _examples(cls: type) -> list[Example]:
    """The examples of ``cls``; a class without any is tested with its default parameters when it has them (and
    :func:`test_every_loss_class_has_example_parameters` fails)."""
    if cls in EXAMPLES:
        return EXAMPLES[cls]
    try:
        return [Example(cls())]
    except (TypeError, ValueError):
        return []


ALL = [pytest.param(ex, id=repr(ex.loss)) for cls in LOSS_CLASSES for ex in _examples(cls)]
EIGEN = [p for p in ALL if p.values[0].loss.supports_eigen]
#: the losses with an exact dual (the convex ones): the conjugate-pair tests
DUAL = [p for p in ALL if p.values[0].loss.has_dual]


@pytest.fixture(autouse=True)
def _known_failures(request):
    """Mark the tests of :data:`KNOWN_FAILURES` as strict expected failures."""
    ex = getattr(request.node, "callspec", None) and request.node.callspec.params.get("ex")
    if isinstance(ex, Example):
        reason = KNOWN_FAILURES.get((request.function.__name__, type(ex.loss)))
        if reason is not None:
            request.applymarker(pytest.mark.xfail(reason=reason, strict=True))


def _dual_rows(loss: Loss, A: np.ndarray, theta) -> np.ndarray:
    """Φ(a_i) = (q/2)‖a_i‖² + ψ(a_i) of each row (ψ = ``dual_penalty``, a sum over rows, called row by row)."""
    psi = np.array([loss.dual_penalty(A[i : i + 1], theta) for i in range(len(A))])
    return 0.5 * loss.dual_quadratic * np.einsum("ij,ij->i", A, A) + psi


def _dual_rows_eigen(loss: Loss, A: np.ndarray) -> np.ndarray:
    psi = np.array([loss.dual_penalty_eigen(A[i : i + 1]) for i in range(len(A))])
    return 0.5 * loss.dual_quadratic * np.einsum("ij,ij->i", A, A) + psi


def _assert_fenchel_young_equality(primal, dual, pairing):
    """``primal + dual = pairing`` row by row, to rounding relative to the size of the three terms."""
    scale = np.abs(primal) + np.abs(dual) + np.abs(pairing)
    assert np.all(np.isfinite(dual)), dual
    assert np.all(np.abs(primal + dual - pairing) <= 1e-10 * scale + 1e-14), (primal + dual - pairing, scale)


def test_every_loss_class_has_example_parameters():
    """Every loss class of the library (found by walking it) has examples in :data:`EXAMPLES`."""
    assert {Square, Huber, EpsilonInsensitive, Pinball, NonCrossingLoss} <= set(LOSS_CLASSES)  # the walk works
    missing = [f"{c.__module__}.{c.__qualname__}" for c in LOSS_CLASSES if not EXAMPLES.get(c)]
    assert not missing, f"add example parameters for {missing} to EXAMPLES in tests/test_losses.py"


def test_the_spec_registry_and_the_command_line_names_build_losses_that_are_tested():
    """Every name ``loss_from_spec`` knows (and every ``rffor fit --loss`` alias) builds a loss of a tested class,
    whose examples write that name back."""
    from rffor.losses import _LOSSES  # the spec registry (private: no public accessor)

    assert set(_LOSSES.values()) <= set(LOSS_CLASSES)
    for name, cls in _LOSSES.items():
        assert {ex.loss.to_spec()["name"] for ex in _examples(cls)} == {name}
    for alias, (name, extra) in LOSS_ALIASES.items():
        assert type(loss_from_spec({"name": name, **extra})) in EXAMPLES, alias


@pytest.mark.parametrize("ex", ALL)
def test_gradient_matches_finite_differences(ex):
    """``grad`` is the derivative of ``curve_values`` in each entry (central differences, step 1e-6: the random
    residuals are nowhere within 1e-6 of a kink), in R's dtype."""
    loss, theta = ex.loss, ex.theta
    R = ex.residuals()
    G = loss.grad(R, theta)
    assert G.shape == R.shape and G.dtype == R.dtype
    h = 1e-6
    for j in range(R.shape[1]):  # one column at a time: each curve's value depends on its own row only
        Rp, Rm = R.copy(), R.copy()
        Rp[:, j] += h
        Rm[:, j] -= h
        fd = (loss.curve_values(Rp, theta) - loss.curve_values(Rm, theta)) / (2 * h)
        np.testing.assert_allclose(G[:, j], fd, rtol=1e-5, atol=1e-8, err_msg=f"column {j}")
    assert loss.grad(R.astype(np.float32), theta).dtype == np.float32
    assert loss.value(R, theta) == pytest.approx(np.mean(loss.curve_values(R, theta)), rel=1e-14)


@pytest.mark.parametrize("ex", ALL)
def test_missing_entries_get_zero_gradient_and_the_gradient_of_the_observed_average(ex):
    """With NaN entries (in every column, some rows) the gradient is 0 there and still the derivative of the
    curve values in the observed entries."""
    loss, theta = ex.loss, ex.theta
    R = ex.residuals(seed=1)
    for j in range(R.shape[1]):
        R[j % (len(R) - 1), j] = np.nan  # never a whole row; the last row stays complete
    G = loss.grad(R, theta)
    assert np.all(G[np.isnan(R)] == 0) and np.all(np.isfinite(G))
    h = 1e-6
    for j in range(R.shape[1]):
        Rp, Rm = R.copy(), R.copy()
        Rp[:, j] += h
        Rm[:, j] -= h
        fd = (loss.curve_values(Rp, theta) - loss.curve_values(Rm, theta)) / (2 * h)
        observed = ~np.isnan(R[:, j])
        np.testing.assert_allclose(G[observed, j], fd[observed], rtol=1e-5, atol=1e-8, err_msg=f"column {j}")


@pytest.mark.parametrize("ex", DUAL)
def test_fenchel_young_equality_at_the_gradient(ex):
    """(FY) of the module docstring: ``m L(r) + (q/2)‖mG‖² + ψ(mG) = m Gᵀr`` for every curve r (G = ``grad(r)``),
    and the inequality ``m L(r_i) + Φ(a_k) ≥ a_kᵀ r_i`` for the dual points a_k = m G_k of the other curves."""
    loss, theta, m = ex.loss, ex.theta, ex.m
    R = ex.residuals()
    A = m * loss.grad(R, theta)
    primal, dual = m * loss.curve_values(R, theta), _dual_rows(loss, A, theta)
    _assert_fenchel_young_equality(primal, dual, np.einsum("ij,ij->i", A, R))
    gaps = primal[:, None] + dual[None, :] - R @ A.T  # [i, k]: the pair (r_i, a_k)
    assert np.all(gaps >= -1e-10 * (1 + np.abs(R @ A.T))), gaps.min()
    assert np.any(gaps > 1e-3)  # the examples pair curves with dual points that are not theirs


@pytest.mark.parametrize("ex", EIGEN)
def test_fenchel_young_equality_in_the_eigenbasis(ex):
    """(D_e): ``L_e(c) + (q/2)‖a‖² + ψ_e(a) = aᵀc`` at ``a = √r grad(√r c)``, ``L_e(c) = curve_values(√r c)``."""
    loss = ex.loss
    C = ex.residuals(seed=2)[:, :5]
    s = math.sqrt(C.shape[1])
    A = s * loss.grad(s * C)
    _assert_fenchel_young_equality(loss.curve_values(s * C), _dual_rows_eigen(loss, A), np.einsum("ij,ij->i", A, C))


@pytest.mark.parametrize("gamma", [0.05, 1.0, 7.0])
@pytest.mark.parametrize("ex", DUAL)
def test_moreau_identity(ex, gamma):
    """``prox_{γΦ}(u) + γ prox_{mL/γ}(u/γ) = u``: with p the library's prox of γΦ (``prox_dual`` after completing
    the square) and z = (u − p)/γ, (FY) holds with equality at (z, p) (module docstring)."""
    loss, theta, m, q = ex.loss, ex.theta, ex.m, ex.loss.dual_quadratic
    U = np.random.default_rng(3).standard_normal((8, ex.columns)) * np.geomspace(0.01, 10.0, 8)[:, None]
    P = loss.prox_dual(U / (1 + gamma * q), gamma / (1 + gamma * q), theta)
    assert P.shape == U.shape and P is not U
    Z = (U - P) / gamma
    _assert_fenchel_young_equality(
        m * loss.curve_values(Z, theta), _dual_rows(loss, P, theta), np.einsum("ij,ij->i", P, Z)
    )


@pytest.mark.parametrize("gamma", [0.05, 1.0, 7.0])
@pytest.mark.parametrize("ex", EIGEN)
def test_moreau_identity_in_the_eigenbasis(ex, gamma):
    """The same for (D_e): ``prox_dual_eigen`` and ``L_e(c) = curve_values(√r c)``."""
    loss, q = ex.loss, ex.loss.dual_quadratic
    U = np.random.default_rng(4).standard_normal((8, 5)) * np.geomspace(0.01, 10.0, 8)[:, None]
    P = loss.prox_dual_eigen(U / (1 + gamma * q), gamma / (1 + gamma * q))
    Z = (U - P) / gamma
    s = math.sqrt(U.shape[1])
    _assert_fenchel_young_equality(loss.curve_values(s * Z), _dual_rows_eigen(loss, P), np.einsum("ij,ij->i", P, Z))


@pytest.mark.parametrize("ex", DUAL)
def test_prox_minimises_its_objective_and_step_zero_projects_on_the_domain(ex):
    """p = prox_{γψ}(U) minimises the 1-strongly convex ``f(A) = γψ(A) + ½‖A − U‖²``, so ``f(W) ≥ f(p) + ½‖W − p‖²``
    for every W (tried: random points around p at three scales and their projections on the domain); a step of 0
    is the projection on the domain of ψ (feasible, idempotent, no farther from U than any feasible point tried)."""
    loss, theta = ex.loss, ex.theta
    rng = np.random.default_rng(5)
    U = rng.standard_normal((6, ex.columns)) * np.geomspace(0.01, 10.0, 6)[:, None]
    gamma = 0.7
    P = loss.prox_dual(U, gamma, theta)

    def f(A):
        return gamma * loss.dual_penalty(A, theta) + 0.5 * np.sum((A - U) ** 2)

    f0 = f(P)
    assert np.isfinite(f0)
    feasible = []
    for scale in (1e-3, 1e-1, 1.0):
        for _ in range(10):
            W = P + scale * rng.standard_normal(U.shape)
            feasible.append(loss.prox_dual(W, 0.0, theta))
            for V in (W, feasible[-1]):
                assert f(V) >= f0 + 0.5 * np.sum((V - P) ** 2) - 1e-9 * (1 + abs(f0))
    P0 = loss.prox_dual(U, 0.0, theta)
    assert np.isfinite(loss.dual_penalty(P0, theta))
    np.testing.assert_allclose(loss.prox_dual(P0, 0.0, theta), P0, rtol=1e-14, atol=1e-15)
    d0 = np.sum((U - P0) ** 2)
    assert all(d0 <= np.sum((U - W) ** 2) + 1e-12 for W in feasible)


@pytest.mark.parametrize("ex", DUAL)
def test_zero_is_the_minimum_of_the_loss_and_of_its_dual(ex):
    """L ≥ 0 = L(0) (a loss of a residual), hence Φ(0) = 0 = min Φ: zero residuals cost nothing, ψ(0) = 0 and the
    prox of zero rows is zero at every step."""
    loss, theta = ex.loss, ex.theta
    Z = np.zeros((3, ex.columns))
    np.testing.assert_array_equal(loss.curve_values(Z, theta), 0.0)
    assert loss.dual_penalty(Z, theta) == 0.0
    for step in (0.0, 0.5, 3.0):
        np.testing.assert_array_equal(loss.prox_dual(Z, step, theta), Z)
    assert np.all(loss.curve_values(ex.residuals(), theta) >= 0)


@pytest.mark.parametrize("ex", ALL)
def test_spec_round_trip(ex):
    """``to_spec`` is JSON and ``loss_from_spec`` inverts it; losses are hashable values (GridSearchCV grids)."""
    loss = ex.loss
    spec = json.loads(json.dumps(loss.to_spec()))
    assert loss_from_spec(loss) is loss
    back = loss_from_spec(spec)
    assert back == loss and type(back) is type(loss) and hash(back) == hash(loss)
    if loss.param_name is not None:
        assert loss.with_param(getattr(loss, loss.param_name)) == loss


# ================================================================================================================
# the five losses of paper 000: closed forms (MATH.md §2) and the §3.1/§3.2 tables
#
# References are written here with plain NumPy and SciPy: the closed forms of the §2 table, the infimal convolution
# ``½‖·‖² □ g`` that defines them, and the convex conjugates ψ* of the tables' ψ for Moreau's identity.
# ================================================================================================================


def make(kind, par):
    return {
        "square": lambda: Square(),
        "huber2": lambda: Huber(kappa=par, p=2),
        "huber1": lambda: Huber(kappa=par, p=1),
        "eps2": lambda: EpsilonInsensitive(epsilon=par, p=2),
        "epsinf": lambda: EpsilonInsensitive(epsilon=par, p=INF),
    }[kind]()


KINDS = ["square", "huber2", "huber1", "eps2", "epsinf"]
EIGEN_KINDS = ["square", "huber2", "eps2"]


# ----------------------------------------------------------------------------------------------------------------
# references
# ----------------------------------------------------------------------------------------------------------------


def ref_curve_value(kind, par, r):
    """L(r) of MATH.md §2 for one fully observed curve r (μ_m norms)."""
    nrm = math.sqrt(np.mean(r**2))
    a = np.abs(r)
    if kind == "square":
        return 0.5 * nrm**2
    if kind == "huber2":
        return 0.5 * nrm**2 if nrm <= par else par * (nrm - par / 2)
    if kind == "huber1":
        return float(np.mean(np.where(a <= par, 0.5 * a**2, par * (a - par / 2))))
    if kind == "eps2":
        return 0.5 * max(nrm - par, 0.0) ** 2
    if kind == "epsinf":
        return float(np.mean(0.5 * np.maximum(a - par, 0.0) ** 2))
    raise AssertionError(kind)


def inf_convolution(kind, par, f):
    """(½‖·‖² □ g)(f) = min_z ½‖f − z‖² + g(z) (μ_m norms), minimised numerically.

    p = 2: by symmetry z = t f/‖f‖, a 1-D problem in t; p = 1 / ∞: separable, one 1-D problem per location."""

    def scalar(obj, lo, hi):  # the minimum may sit on a bound, which "bounded" only approaches
        return min(
            minimize_scalar(obj, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12}).fun, obj(lo), obj(hi)
        )

    nrm = math.sqrt(np.mean(f**2))
    if kind == "huber2":  # g = κ‖·‖₂
        return scalar(lambda t: 0.5 * (nrm - t) ** 2 + par * abs(t), 0.0, nrm)
    if kind == "eps2":  # g = ι{‖·‖₂ ≤ ε}
        return scalar(lambda t: 0.5 * (nrm - t) ** 2, 0.0, min(par, nrm)) if nrm > 0 else 0.0
    if kind == "huber1":  # g = κ‖·‖₁ = κ (1/m) Σ |z_j|
        return float(np.mean([scalar(lambda z, v=v: 0.5 * (v - z) ** 2 + par * abs(z), -abs(v), abs(v)) for v in f]))
    if kind == "epsinf":  # g = ι{‖·‖_∞ ≤ ε}
        return float(np.mean([scalar(lambda z, v=v: 0.5 * (v - z) ** 2, -par, par) for v in f]))
    raise AssertionError(kind)


def conj_prox(kind, par, v, gamma, radius_scale):
    """prox of ψ*/γ at v, row-wise, for the conjugate ψ* of the dual penalty ψ of MATH.md §3.1 (radius_scale = √m)
    or §3.2 (radius_scale = 1), written independently of the library:

    - square: ψ = 0, ψ* = ι{0}, prox = 0;
    - H_κ^2: ψ = ι{‖a‖₂ ≤ sκ}, ψ* = sκ‖·‖₂, prox = block soft-threshold at sκ/γ;
    - H_κ^1: ψ = ι{‖a‖_∞ ≤ κ}, ψ* = κ‖·‖₁, prox = soft-threshold at κ/γ;
    - ℓ_ε^2: ψ = εs‖a‖₂, ψ* = ι{‖·‖₂ ≤ εs}, prox = projection on that ball;
    - ℓ_ε^∞: ψ = ε‖a‖₁, ψ* = ι{‖·‖_∞ ≤ ε}, prox = clipping to [−ε, ε].
    """
    rows = np.sqrt((v**2).sum(axis=1, keepdims=True))
    safe = np.where(rows > 0, rows, 1.0)
    if kind == "square":
        return np.zeros_like(v)
    if kind == "huber2":
        return v * np.maximum(1 - radius_scale * par / gamma / safe, 0.0)
    if kind == "huber1":
        return np.sign(v) * np.maximum(np.abs(v) - par / gamma, 0.0)
    if kind == "eps2":
        return v * np.minimum(1.0, radius_scale * par / safe)
    if kind == "epsinf":
        return np.clip(v, -par, par)
    raise AssertionError(kind)


def ref_psi(kind, par, A, radius_scale):
    rows = np.sqrt((A**2).sum(axis=1))
    if kind == "square":
        return 0.0
    if kind == "huber2":
        return 0.0 if rows.max() <= radius_scale * par * (1 + 1e-9) else INF
    if kind == "huber1":
        return 0.0 if np.abs(A).max() <= par * (1 + 1e-9) else INF
    if kind == "eps2":
        return par * radius_scale * rows.sum()
    if kind == "epsinf":
        return par * np.abs(A).sum()
    raise AssertionError(kind)


# ----------------------------------------------------------------------------------------------------------------
# primal values
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("par", [0.05, 0.3, 2.0])
def test_curve_values_match_the_closed_forms(kind, par, rng):
    loss = make(kind, par)
    R = rng.standard_normal((12, 7)) * rng.uniform(0.01, 3, size=(12, 1))  # curves on both sides of the kinks
    expected = np.array([ref_curve_value(kind, par, r) for r in R])
    np.testing.assert_allclose(loss.curve_values(R), expected, rtol=1e-12, atol=1e-15)
    assert loss.value(R) == pytest.approx(expected.mean(), rel=1e-12)


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "square"])
@pytest.mark.parametrize("par", [0.1, 0.7])
def test_closed_forms_are_the_infimal_convolution(kind, par, rng):
    loss = make(kind, par)
    R = rng.standard_normal((6, 5)) * np.array([[0.01], [0.1], [0.3], [0.6], [1.0], [3.0]])
    for r in R:
        assert loss.curve_values(r[None, :])[0] == pytest.approx(inf_convolution(kind, par, r), rel=1e-7, abs=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_missing_entries_are_ignored_and_each_curve_averaged_over_its_own_count(kind, rng):
    loss = make(kind, 0.2)
    R = rng.standard_normal((5, 8))
    R[0, [1, 4]] = np.nan
    R[3, :7] = np.nan  # a single observed value
    values = loss.curve_values(R)
    for i, r in enumerate(R):
        assert values[i] == pytest.approx(ref_curve_value(kind, 0.2, r[~np.isnan(r)]), rel=1e-12)
    assert np.isfinite(loss.value(R))


@pytest.mark.parametrize(
    "loss",
    [
        Huber(kappa=1e9, p=2),
        Huber(kappa=1e9, p=1),
        Huber(kappa=INF, p=2),
        Huber(kappa=INF, p=1),
        EpsilonInsensitive(0.0, 2),
        EpsilonInsensitive(0.0, INF),
    ],
)
def test_large_kappa_and_zero_epsilon_are_the_square_loss(loss, rng):
    R = rng.standard_normal((6, 9)) * 10
    R[1, 2] = np.nan
    np.testing.assert_allclose(loss.curve_values(R), Square().curve_values(R), rtol=1e-12)
    np.testing.assert_allclose(loss.grad(R), Square().grad(R), rtol=1e-12)


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "square"])
def test_one_location_gives_the_classical_scalar_loss(kind, rng):
    par = 0.3
    t = np.concatenate([rng.uniform(-3, 3, 50), [0.0, par, -par, 0.9 * par]])
    if kind.startswith("huber"):
        expected = np.where(np.abs(t) <= par, 0.5 * t**2, par * (np.abs(t) - par / 2))
    else:  # squared ε-insensitive
        expected = 0.5 * np.maximum(np.abs(t) - par, 0) ** 2
    np.testing.assert_allclose(make(kind, par).curve_values(t[:, None]), expected, rtol=1e-12, atol=1e-15)


# ----------------------------------------------------------------------------------------------------------------
# dual penalties and their prox (MATH.md §3.1, §3.2)
# ----------------------------------------------------------------------------------------------------------------

matrices = arrays(
    np.float64,
    st.tuples(st.integers(1, 5), st.integers(1, 6)),
    elements=st.floats(-10, 10, allow_nan=False, allow_infinity=False),
)
positive = st.floats(1e-3, 5.0)


@settings(max_examples=60, deadline=None)
@given(U=matrices, gamma=positive, par=positive, kind=st.sampled_from(KINDS))
def test_moreau_decomposition_matches_the_table_splines(U, gamma, par, kind):
    """prox_{γψ}(u) + γ prox_{ψ*/γ}(u/γ) = u, with ψ* derived independently (see ``conj_prox``)."""
    loss = make(kind, par)
    s = math.sqrt(U.shape[1])
    P = loss.prox_dual(U, gamma)
    assert P.shape == U.shape and P is not U
    np.testing.assert_allclose(P + gamma * conj_prox(kind, par, U / gamma, gamma, s), U, rtol=1e-12, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(U=matrices, gamma=positive, par=positive, kind=st.sampled_from(EIGEN_KINDS))
def test_moreau_decomposition_matches_the_table_eigenbasis(U, gamma, par, kind):
    loss = make(kind, par)
    P = loss.prox_dual_eigen(U, gamma)
    np.testing.assert_allclose(P + gamma * conj_prox(kind, par, U / gamma, gamma, 1.0), U, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_dual_penalty_is_psi(kind, rng):
    par = 0.4
    loss = make(kind, par)
    A = rng.standard_normal((5, 9)) * 0.05  # inside every domain
    assert loss.dual_penalty(A) == pytest.approx(ref_psi(kind, par, A, 3.0), rel=1e-12, abs=0)
    big = A.copy()
    big[2] *= 1000
    assert loss.dual_penalty(big) == ref_psi(kind, par, big, 3.0)  # inf for the Huber domains
    if kind in EIGEN_KINDS:
        assert loss.dual_penalty_eigen(A) == pytest.approx(ref_psi(kind, par, A, 1.0), rel=1e-12, abs=0)
    else:
        with pytest.raises(ValueError, match="eigen"):
            loss.dual_penalty_eigen(A)
        with pytest.raises(ValueError, match="eigen"):
            loss.prox_dual_eigen(A, 1.0)


# ----------------------------------------------------------------------------------------------------------------
# parameters
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "factory, name, exc",
    [
        (lambda: Huber(kappa=0.0), "kappa", ValueError),
        (lambda: Huber(kappa=-1.0), "kappa", ValueError),
        (lambda: Huber(kappa=float("nan")), "kappa", ValueError),
        (lambda: Huber(kappa="0.1"), "kappa", TypeError),
        (lambda: Huber(kappa=True), "kappa", TypeError),
        (lambda: Huber(kappa=0.1, p=3), "p", ValueError),
        (lambda: Huber(kappa=0.1, p=INF), "p", ValueError),
        (lambda: EpsilonInsensitive(epsilon=-0.1), "epsilon", ValueError),
        (lambda: EpsilonInsensitive(epsilon=INF), "epsilon", ValueError),
        (lambda: EpsilonInsensitive(epsilon=float("nan")), "epsilon", ValueError),
        (lambda: EpsilonInsensitive(epsilon=None), "epsilon", TypeError),
        (lambda: EpsilonInsensitive(epsilon=0.1, p=1), "p", ValueError),
        (lambda: EpsilonInsensitive(epsilon=0.1, p="two"), "p", ValueError),
    ],
)
def test_invalid_parameters_raise_naming_them(factory, name, exc):
    with pytest.raises(exc, match=rf"\b{name}\b"):
        factory()


def test_valid_parameter_spellings():
    assert EpsilonInsensitive(0.1, p="inf").p == INF
    assert EpsilonInsensitive(0.1, p=np.inf).p == INF
    assert Huber(np.float32(0.5), p=np.int64(1)).p == 1
    assert isinstance(Huber(1, 2).kappa, float)


def test_unknown_spec_raises():
    with pytest.raises(ValueError, match="unknown loss"):
        loss_from_spec({"name": "hinge"})
    with pytest.raises(ValueError, match="unknown loss"):
        loss_from_spec("square")


def test_flags():
    assert Huber(0.1, p=1).integral and not Huber(0.1, p=2).integral
    assert EpsilonInsensitive(0.1, p=INF).integral and not EpsilonInsensitive(0.1, p=2).integral
    assert [make(k, 0.1).supports_eigen for k in KINDS] == [True, True, False, True, False]


def test_residuals_must_be_2d():
    with pytest.raises(ValueError, match="2-D"):
        Square().curve_values(np.zeros(3))


@pytest.mark.parametrize(
    "base", [Square(), Huber(kappa=0.3), Huber(kappa=0.3, p=1), EpsilonInsensitive(0.2), EpsilonSVR(0.2)], ids=repr
)
def test_over_all_columns_averages_a_masked_row_over_all_m(base, rng):
    """OverAllColumns: a row with missing entries is the row with zero residuals there, averaged over all m columns
    (for a norm loss L(‖r_O‖₂/√m), not the base's L(‖r_O‖₂/√m_i)); zero gradient at the missing entries; complete
    rows are the base loss itself; κ/ε, the route's properties and the spec are the base's."""
    m = 6
    R = rng.standard_normal((40, m)) * np.geomspace(0.05, 3, 40)[:, None]
    Rn = R.copy()
    Rn[rng.random(R.shape) < 0.3] = np.nan
    Rn[np.isnan(Rn).all(axis=1), 0] = 0.5
    missing = np.isnan(Rn)
    Rz = np.where(missing, 0.0, Rn)
    loss = OverAllColumns(base)
    np.testing.assert_array_equal(loss.curve_values(R), base.curve_values(R))
    np.testing.assert_array_equal(loss.grad(R), base.grad(R))
    np.testing.assert_array_equal(loss.curve_values(Rn), base.curve_values(Rz))
    G = loss.grad(Rn)
    assert np.all(G[missing] == 0)
    np.testing.assert_array_equal(G[~missing], base.grad(Rz)[~missing])
    if not base.integral:  # a norm loss: L of the observed entries' norm scaled as a complete row's
        norms = np.sqrt(np.nansum(Rn**2, axis=1) / m)
        complete = base.curve_values(norms[:, None] * np.ones((1, m)))
        np.testing.assert_allclose(loss.curve_values(Rn), complete, rtol=1e-12)
        assert not np.allclose(base.curve_values(Rn), complete)  # the base averages over m_i
    name = base.param_name
    if name is not None:
        assert getattr(loss, name) == getattr(base, name)
        assert loss.with_param(0.7) == OverAllColumns(base.with_param(0.7))
    assert (loss.is_square, loss.is_smooth, loss.param_name) == (base.is_square, base.is_smooth, base.param_name)
    assert loss_from_spec(json.loads(json.dumps(loss.to_spec()))) == loss
