"""Tests of rffor.losses against MATH.md §2 (primal values), §3 (dual penalties and their prox) and §5 (gradients).

References are written here with plain NumPy and SciPy: the closed forms of the §2 table, the infimal convolution
``½‖·‖² □ g`` that defines them, the convex conjugates ψ* for Moreau's identity, and finite differences.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.optimize import minimize_scalar

from rffor.losses import EpsilonInsensitive, Huber, Loss, Square, loss_from_spec

pytestmark = pytest.mark.usefixtures("single_blas_thread")

INF = math.inf


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
# gradients
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("par", [0.1, 0.8])
def test_gradient_matches_finite_differences(kind, par, rng):
    loss = make(kind, par)
    R = rng.standard_normal((6, 7)) * np.array([[0.05], [0.2], [0.5], [1.0], [2.0], [0.7]])
    R[1, [0, 3]] = np.nan
    R[4, 1:] = np.nan
    # keep clear of the kinks |r| = par (p = 1, ∞) where the loss is only once differentiable
    close = np.abs(np.abs(R) - par) < 1e-3
    R[close] += 1e-2
    G = loss.grad(R)
    assert G.shape == R.shape
    observed = ~np.isnan(R)
    assert np.all(G[~observed] == 0)
    h = 1e-6
    for i, j in zip(*np.nonzero(observed), strict=True):
        Rp, Rm = R.copy(), R.copy()
        Rp[i, j] += h
        Rm[i, j] -= h
        fd = (loss.curve_values(Rp)[i] - loss.curve_values(Rm)[i]) / (2 * h)
        assert G[i, j] == pytest.approx(fd, rel=1e-5, abs=1e-9), (i, j)
    # and the gradient of the mean loss is G/n
    assert loss.value(R + 1e-7 * observed * np.nan_to_num(G)) >= loss.value(R)


@pytest.mark.parametrize("kind", KINDS)
def test_gradient_keeps_float32(kind, rng):
    R = rng.standard_normal((3, 4)).astype(np.float32)
    assert make(kind, 0.3).grad(R).dtype == np.float32


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
def test_moreau_decomposition_splines(U, gamma, par, kind):
    """prox_{γψ}(u) + γ prox_{ψ*/γ}(u/γ) = u, with ψ* derived independently (see ``conj_prox``)."""
    loss = make(kind, par)
    s = math.sqrt(U.shape[1])
    P = loss.prox_dual(U, gamma)
    assert P.shape == U.shape and P is not U
    np.testing.assert_allclose(P + gamma * conj_prox(kind, par, U / gamma, gamma, s), U, rtol=1e-12, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(U=matrices, gamma=positive, par=positive, kind=st.sampled_from(EIGEN_KINDS))
def test_moreau_decomposition_eigenbasis(U, gamma, par, kind):
    loss = make(kind, par)
    P = loss.prox_dual_eigen(U, gamma)
    np.testing.assert_allclose(P + gamma * conj_prox(kind, par, U / gamma, gamma, 1.0), U, rtol=1e-12, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(U=matrices, gamma=positive, par=positive, kind=st.sampled_from(KINDS), seed=st.integers(0, 2**32 - 1))
def test_prox_minimises_its_objective(U, gamma, par, kind, seed):
    """p = prox_{γψ}(u) satisfies γψ(p) + ½‖p − u‖² ≤ γψ(q) + ½‖q − u‖² for feasible q near p."""
    loss = make(kind, par)
    s = math.sqrt(U.shape[1])
    P = loss.prox_dual(U, gamma)

    def obj(Q):
        return gamma * ref_psi(kind, par, Q, s) + 0.5 * np.sum((Q - U) ** 2)

    f0 = obj(P)
    assert np.isfinite(f0)
    rng = np.random.default_rng(seed)
    for scale in (1e-3, 1e-1, 1.0):
        Q = P + scale * rng.standard_normal(U.shape)
        fq = obj(Q)
        assert fq >= f0 - 1e-9 * (1 + abs(f0))


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


def test_prox_of_zero_rows_is_zero():
    Z = np.zeros((3, 4))
    for kind in KINDS:
        np.testing.assert_array_equal(make(kind, 0.5).prox_dual(Z, 2.0), Z)


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


@pytest.mark.parametrize("kind", KINDS)
def test_spec_round_trip(kind):
    loss = make(kind, 0.25)
    assert isinstance(loss, Loss)
    assert loss_from_spec(loss.to_spec()) == loss
    assert loss_from_spec(loss) is loss
    assert hash(loss) == hash(make(kind, 0.25))  # frozen: usable as a GridSearchCV parameter value


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
