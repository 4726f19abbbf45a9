"""OutputKernelRegressor and OutputKernelRegressorCV (rffor.structured, MATH.md §8; seeds 002 and 004).

Oracles: scikit-learn's multi-output KernelRidge (units: alpha = nΛ), FunctionalRegressor with an identity output
kernel (λ = Λ/m, κ = κ_paper/√m), the primal (P1)–(P3) and dual (D1)–(D3) of seed 002 written here from their
definitions, the optimality conditions of each loss, seed 004's weights (K + nΛI)⁻¹k_x, brute-force decoding, and
per-label kernel ridge regression for masked labels."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_ridge import KernelRidge
from sklearn.utils.estimator_checks import check_estimator

from rffor import FunctionalRegressor, OutputKernelRegressor, OutputKernelRegressorCV, load
from rffor.kernels import Gaussian as GaussianX
from rffor.losses import EpsilonInsensitive, EpsilonSVR, Huber, Square
from rffor.output_kernels import Delta, Gaussian, Hellinger, Linear, Normalized, Tanimoto
from rffor.solvers import EXACT_SOLVERS
from rffor.solvers.dual import DualProblem
from rffor.structured import feature_units, solve_structured

pytestmark = pytest.mark.usefixtures("single_blas_thread")

KX = GaussianX(0.4)
ROBUST = {
    "huber": Huber(kappa=0.4),
    "eps-ridge": EpsilonInsensitive(epsilon=0.4),
    "eps-svr": EpsilonSVR(epsilon=0.6),
}


@pytest.fixture
def multilabel(rng):
    """n = 50 label sets of m = 5 labels depending on 3 inputs, 10% of them complemented (outliers)."""
    X = rng.standard_normal((50, 3))
    W = rng.standard_normal((3, 5))
    Y = (X @ W + 0.5 * rng.standard_normal((50, 5)) > 0).astype(float)
    Y[:5] = 1.0 - Y[:5]
    return X, Y


def _dual_value(loss, A, V, K, lam):
    """F(A) of seed 002 (D1)–(D3) expanded: ½q‖A‖² − <A, V> + Tr(K A Aᵀ)/(2Λn) + Σ ψ(a_i)."""
    n = len(A)
    norms = np.linalg.norm(A, axis=1)
    q = 0.0 if isinstance(loss, EpsilonSVR) else 1.0
    F = 0.5 * q * np.sum(A * A) - np.sum(A * V) + np.trace(K @ A @ A.T) / (2 * lam * n)
    if isinstance(loss, EpsilonInsensitive):
        F += loss.epsilon * norms.sum()
    elif isinstance(loss, EpsilonSVR):
        assert norms.max() <= 1 + 1e-9
        F += loss.epsilon * norms.sum()
    elif isinstance(loss, Huber):
        assert norms.max() <= loss.kappa * (1 + 1e-9)
    return F


def _primal_value(loss, r_norms, h_sq, lam):
    """(P1)–(P3) of seed 002 from the residual norms in the output RKHS and ‖h‖²."""
    if isinstance(loss, Square):
        L = 0.5 * r_norms**2
    elif isinstance(loss, EpsilonInsensitive):
        L = 0.5 * np.maximum(r_norms - loss.epsilon, 0) ** 2
    elif isinstance(loss, Huber):
        k = loss.kappa
        L = np.where(r_norms <= k, 0.5 * r_norms**2, k * (r_norms - k / 2))
    else:
        L = np.maximum(r_norms - loss.epsilon, 0)
    return L.mean() + 0.5 * lam * h_sq


# ------------------------------------------------------------------------------------------------------ oracles


@pytest.mark.parametrize("solver", sorted(EXACT_SOLVERS))
def test_linear_output_kernel_is_multi_output_kernel_ridge(solver, multilabel):
    """Square loss + Linear(): scikit-learn's KernelRidge on the label matrix with alpha = nΛ, to 1e-8."""
    X, Y = multilabel
    n, lam = len(X), 3e-3
    est = OutputKernelRegressor(lam=lam, kernel_x=KX, solver=solver, tol=1e-14).fit(X, Y)
    ref = KernelRidge(alpha=n * lam, kernel="rbf", gamma=KX.gamma).fit(X, Y)
    Xt = X[:10] + 0.1
    assert np.abs(est.predict_embedding(Xt) - ref.predict(Xt)).max() < 1e-8
    assert est.output_type_ == "multilabel"
    assert np.array_equal(est.predict(Xt), (ref.predict(Xt) > 0.5).astype(float))


@pytest.mark.parametrize("name", ["square", "huber"])
def test_units_against_functional_regressor(name, multilabel):
    """MATH.md §8: with an identity output kernel on m labels, λ_FR = Λ/m and κ_FR = κ/√m give the same model."""
    X, Y = multilabel
    m, lam, kappa = Y.shape[1], 2e-3, 0.5
    loss, loss_fr = (Square(), Square()) if name == "square" else (Huber(kappa), Huber(kappa / math.sqrt(m)))
    est = OutputKernelRegressor(loss, lam=lam, kernel_x=KX, tol=1e-12, max_iter=20000).fit(X, Y)
    fr = FunctionalRegressor(
        loss_fr, lam=lam / m, kernel_x=KX, kernel_theta=GaussianX(1e4), solver="admm", tol=1e-12, max_iter=20000
    )
    fr.fit(X, Y, theta=np.arange(m, dtype=float))  # k_Θ(θ_j, θ_l) = exp(−1e4 (j − l)²): K_Θ = I exactly
    assert np.abs(est.predict_embedding(X) - fr.predict(X)).max() < 1e-7


def test_the_fit_does_not_depend_on_the_factor_of_K_Y(multilabel, rng):
    """Thin SVD of the embedding, eigh of the Gram matrix, and V Q for an orthogonal Q give the same model: the
    same objective and the same h(x) (in the embedding's coordinates: c K A V⁺ Ψ)."""
    X, Y = multilabel
    K = KX.gram(X)
    f_svd = Linear().factor(Y)
    t, U = np.linalg.eigh(Y @ Y.T)
    keep = t > 1e-12 * t.max()
    V_eigh = U[:, keep] * np.sqrt(t[keep])
    Q, _ = np.linalg.qr(rng.standard_normal((f_svd.rank, f_svd.rank)))
    for loss in [Square(), *ROBUST.values()]:
        models, objectives = [], []
        for V in (f_svd.V, V_eigh, f_svd.V @ Q):
            pb = DualProblem.structured(K, V, 1e-3, loss)
            res = solve_structured(pb, "admm", tol=1e-12, max_iter=20000)
            models.append(pb.c * K @ res.coef @ np.linalg.pinv(V) @ Y)
            objectives.append(res.history["primal"][-1])
        assert np.abs(models[1] - models[0]).max() < 1e-6, loss
        assert np.abs(models[2] - models[0]).max() < 1e-6, loss
        assert np.allclose(objectives, objectives[0], rtol=1e-9)

    # the estimator through a kernel without an embedding (eigh path) equals the Linear() one (SVD path)
    class _NoEmbedding(Linear):
        @property
        def has_embedding(self):
            return False

    a = OutputKernelRegressor(Huber(0.4), lam=1e-3, kernel_x=KX, tol=1e-12, max_iter=20000).fit(X, Y)
    b = OutputKernelRegressor(Huber(0.4), lam=1e-3, kernel_x=KX, kernel_y=_NoEmbedding(), tol=1e-12,
                              max_iter=20000).fit(X, Y)  # fmt: skip
    assert np.abs(a.alpha(X[:7]) - b.alpha(X[:7])).max() < 1e-6
    assert a.objective_ == pytest.approx(b.objective_, rel=1e-9)


@pytest.mark.parametrize("name", list(ROBUST))
@pytest.mark.parametrize("solver", sorted(EXACT_SOLVERS))
def test_certified_gap_recomputed_from_the_definitions(name, solver, multilabel):
    """objective_ is (P1)–(P3) at the returned model and duality_gap_ its gap against −F(A)/n, F of (D1)–(D3)."""
    X, Y = multilabel
    loss, lam = ROBUST[name], 2e-3
    est = OutputKernelRegressor(loss, lam=lam, kernel_x=KX, solver=solver, tol=1e-9, max_iter=50000).fit(X, Y)
    n = len(X)
    K = KX.gram(X)
    A = est.dual_coef_
    V = Linear().factor(Y).V
    H = est.predict_embedding(X)  # h(x_i) in label coordinates
    r_norms = np.linalg.norm(Y - H, axis=1)
    h_sq = np.trace(K @ A @ A.T) / (lam * n) ** 2
    primal = _primal_value(loss, r_norms, h_sq, lam)
    dual = -_dual_value(loss, A, V, K, lam) / n
    assert est.objective_ == pytest.approx(primal, rel=1e-10)
    assert est.duality_gap_ == pytest.approx((primal - dual) / max(abs(primal), abs(dual)), abs=1e-12)
    assert 0 <= est.duality_gap_ <= 1e-9


@pytest.mark.parametrize("name", list(ROBUST))
def test_kkt_row_norms_at_the_optimum(name, multilabel):
    """a_i ∈ ∂L(r_i) (module docstring of rffor.structured): Huber ‖a_i‖ = min(‖r_i‖, κ); ε-Ridge (‖r_i‖ − ε)₊;
    ε-SVR ‖a_i‖ = 1 where ‖r_i‖ > ε and 0 where ‖r_i‖ < ε; and a_i is parallel to r_i where it is not 0."""
    X, Y = multilabel
    loss = EpsilonInsensitive(1.0) if name == "eps-ridge" else ROBUST[name]  # both regimes active at Λ = 1e-2
    lam, tol = 1e-2, (1e-10 if name == "eps-svr" else 1e-13)  # ε-SVR's dual is not strongly convex (q = 0)
    est = OutputKernelRegressor(loss, lam=lam, kernel_x=KX, tol=tol, max_iter=100000).fit(X, Y)
    n = len(X)
    V = Linear().factor(Y).V
    A = est.dual_coef_
    R = V - KX.gram(X) @ A / (lam * n)  # residuals in V coordinates (isometric)
    r, a = np.linalg.norm(R, axis=1), np.linalg.norm(A, axis=1)
    assert np.allclose(r, np.linalg.norm(Y - est.predict_embedding(X), axis=1), atol=1e-10)
    if name == "huber":
        assert np.allclose(a, np.minimum(r, loss.kappa), atol=1e-6)
        assert (r > loss.kappa).sum() >= 3 and (r < loss.kappa).sum() >= 3  # both regimes active
    elif name == "eps-ridge":
        assert np.allclose(a, np.maximum(r - loss.epsilon, 0), atol=1e-6)
        assert (r > loss.epsilon).sum() >= 3 and (r < loss.epsilon).sum() >= 3
    else:
        out, inside = r > loss.epsilon + 1e-5, r < loss.epsilon - 1e-5
        assert out.sum() >= 3 and inside.sum() >= 3
        assert np.allclose(a[out], 1.0, atol=1e-6) and np.allclose(a[inside], 0.0, atol=1e-6)
    nz = a > 1e-6
    cos = np.einsum("ij,ij->i", A[nz], R[nz]) / (a[nz] * r[nz])
    assert np.allclose(cos, 1.0, atol=1e-6)


@pytest.mark.parametrize("kernel_y", [Linear(), Gaussian(0.5)], ids=["linear-rank5", "gaussian-full-rank"])
def test_alpha_is_seed_004_weights_for_the_square_loss(kernel_y, multilabel):
    """α(x) = (K_X + nΛI)⁻¹ k_X(X, x) for the square loss, whatever the rank of K_Y (module docstring)."""
    X, Y = multilabel
    n, lam = len(X), 4e-3
    est = OutputKernelRegressor(lam=lam, kernel_x=KX, kernel_y=kernel_y, tol=1e-14).fit(X, Y)
    Xt = X[:8] * 0.9
    ref = np.linalg.solve(KX.gram(X) + n * lam * np.eye(n), KX.gram(X, Xt)).T
    assert np.abs(est.alpha(Xt) - ref).max() < 1e-10


@pytest.mark.parametrize("name", list(ROBUST))
def test_alpha_reproduces_the_model(name, multilabel):
    """h(x) = Σ_j α_j(x) ψ(y_j) for every loss; α continuous: robust κ → ∞ equals the square loss's weights."""
    X, Y = multilabel
    est = OutputKernelRegressor(ROBUST[name], lam=2e-3, kernel_x=KX, tol=1e-12, max_iter=50000).fit(X, Y)
    assert np.abs(est.alpha(X[:9]) @ Y - est.predict_embedding(X[:9])).max() < 1e-10
    sq = OutputKernelRegressor(lam=2e-3, kernel_x=KX).fit(X, Y)
    big = OutputKernelRegressor(Huber(1e6), lam=2e-3, kernel_x=KX).fit(X, Y)
    assert np.abs(big.alpha(X[:9]) - sq.alpha(X[:9])).max() < 1e-10


# ------------------------------------------------------------------------------------------------------ decoding


def test_decode_is_the_brute_force_argmin(multilabel):
    """decode(X, Z) = argmin_z k(z, z) − 2 α(x)ᵀ K_Y(train, z) from the definitions, for a kernel without an
    embedding (Tanimoto) and with one (Linear); over all label sets it equals predict's threshold."""
    X, Y = multilabel
    cube = np.array(list(itertools.product([0.0, 1.0], repeat=Y.shape[1])))
    for kernel in (Tanimoto(), Normalized(Linear()), Linear()):
        est = OutputKernelRegressor(Huber(0.5), lam=3e-3, kernel_x=KX, kernel_y=kernel).fit(X, Y)
        Xt = X[:12] + 0.05
        scores = kernel.diag(cube)[None, :] - 2 * est.alpha(Xt) @ kernel.gram(Y, cube)
        assert np.array_equal(est.decode(Xt, cube), cube[np.argmin(scores, axis=1)])
    assert np.array_equal(est.decode(Xt, cube), est.predict(Xt))  # Linear(): the threshold at ½ is the argmin


def test_hellinger_predict_is_the_argmin_over_a_simplex_grid(rng):
    """Histogram outputs with Hellinger(): predict's closed form z ∝ (w₊)² is never worse than the best point of
    a simplex grid of step 1/60 (objective k(z,z) − 2<h, ψ(z)> from α and the kernel), and within its resolution."""
    X = rng.standard_normal((40, 2))
    logits = np.column_stack([X[:, 0], X[:, 1], -X[:, 0] - X[:, 1]]) + 0.3 * rng.standard_normal((40, 3))
    Yh = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    est = OutputKernelRegressor(EpsilonInsensitive(0.05), lam=1e-3, kernel_x=KX, kernel_y=Hellinger()).fit(X, Yh)
    assert est.output_type_ == "histogram"
    steps = 60
    grid = np.array([[i, j, steps - i - j] for i in range(steps + 1) for j in range(steps + 1 - i)]) / steps
    Xt = rng.standard_normal((15, 2))
    P = est.predict(Xt)
    A = est.alpha(Xt)
    obj = lambda Z: Hellinger().diag(Z)[None, :] - 2 * A @ Hellinger().gram(Yh, Z)  # noqa: E731
    best = obj(grid).min(axis=1)
    mine = np.diag(obj(P))
    assert np.all(mine <= best + 1e-10) and np.all(mine >= best - 0.02)
    assert np.allclose(P.sum(1), 1) and np.all(P >= 0)


def test_scalar_outputs_with_a_gaussian_kernel_are_decoded_by_1d_minimisation(rng):
    """Seed 004's robust regression: y scalar, k_Y Gaussian; predict = argmin over z of 1 − 2 Σ α_j k(z, y_j)."""
    x = rng.uniform(-1, 1, (80, 1))
    y = np.sin(3 * x[:, 0]) + 0.1 * rng.standard_normal(80)
    y[:8] += rng.uniform(-3, 3, 8)
    est = OutputKernelRegressor(lam=1e-3, kernel_x=GaussianX(5.0), kernel_y=Gaussian(2.0)).fit(x, y)
    xt = np.linspace(-0.9, 0.9, 11)[:, None]
    p = est.predict(xt)
    assert p.shape == (11,)
    fine = np.linspace(y.min(), y.max(), 20001)
    obj = 1 - 2 * est.alpha(xt) @ Gaussian(2.0).gram(y, fine)
    assert np.all(np.diag(1 - 2 * est.alpha(xt) @ Gaussian(2.0).gram(y, p)) <= obj.min(axis=1) + 1e-9)
    assert np.abs(p - fine[np.argmin(obj, axis=1)]).max() < 1e-3
    # the linear kernel's scalar decoder is h itself (kernel ridge regression)
    lin = OutputKernelRegressor(lam=1e-3, kernel_x=GaussianX(5.0)).fit(x, y)
    assert np.allclose(lin.predict(xt), lin.predict_embedding(xt)[:, 0])


def test_decode_loss_is_seed_004_alg_1_with_any_loss(rng):
    """decode_loss = argmin_z Σ_j α_j(x) Δ(z, y_j) (seed 004 eq. 17) with α = (K + nΛI)⁻¹k_x: the squared loss gives
    the weighted mean Σα_j y_j / Σα_j; the Cauchy loss of seed 004's toy gives brute force's minimiser on a fine
    grid; this holds with an output kernel whose K_Y has rank 1 (Linear: α is not its part in the range of K_Y)."""
    x = rng.uniform(-1, 1, (80, 1))
    y = np.sin(3 * x[:, 0]) + 0.1 * rng.standard_normal(80)
    y[:8] += rng.uniform(-3, 3, 8)
    xt = np.linspace(-0.9, 0.9, 11)[:, None]
    est = OutputKernelRegressor(lam=1e-3, kernel_x=GaussianX(5.0), kernel_y=Linear()).fit(x, y)
    A = est.alpha(xt)
    K = GaussianX(5.0).gram(x)
    assert np.allclose(A, np.linalg.solve(K + 80 * 1e-3 * np.eye(80), GaussianX(5.0).gram(x, xt)).T, atol=1e-8)
    p_sq = est.decode_loss(xt, lambda Z, Y: (Z - Y.T) ** 2)
    assert p_sq.shape == (11,) and np.all(A.sum(1) > 0)
    assert np.allclose(p_sq, (A @ y) / A.sum(1), atol=1e-6)

    def cauchy(Z, Y, c=0.1):
        return c / 2 * np.log1p((Z - Y.T) ** 2 / c)

    p = est.decode_loss(xt, cauchy)
    fine = np.linspace(y.min(), y.max(), 20001)
    obj = A @ cauchy(fine[:, None], y[:, None]).T
    mine = np.einsum("ij,ij->i", A, cauchy(p[:, None], y[:, None]))
    assert np.all(mine <= obj.min(axis=1) + 1e-9)
    assert np.abs(p - fine[np.argmin(obj, axis=1)]).max() < 1e-3
    assert np.abs(p - p_sq).max() > 0.05  # a robust estimate, not the weighted mean
    # over candidates: the training outputs
    cand = est.decode_loss(xt, cauchy, candidates=y)
    assert np.array_equal(cand, y[np.argmin(A @ cauchy(y[:, None], y[:, None]).T, axis=1)])
    # 2-D outputs (n, 1) give (n_new, 1)
    assert est.fit(x, y[:, None]).decode_loss(xt, cauchy).shape == (11, 1)


def test_decode_loss_with_the_hamming_loss_thresholds_at_half_the_weights(multilabel):
    """Label sets, Hamming loss Δ(z, y) = Σ_k |z_k − y_k|: Σ_j α_j Δ(z, y_j) separates by label, so the best of all
    2^m candidates sets z_k = 1 exactly where (Yᵀα)_k > Σ_j α_j / 2."""
    X, Y = multilabel
    est = OutputKernelRegressor(Huber(0.4), lam=1e-2, kernel_x=KX, kernel_y=Linear()).fit(X, Y)
    cand = np.array(list(itertools.product([0.0, 1.0], repeat=5)))
    P = est.decode_loss(X, lambda Z, Yt: np.abs(Z[:, None, :] - Yt[None, :, :]).sum(-1), candidates=cand)
    A = est.alpha(X)
    assert np.array_equal(P, (A @ Y > A.sum(1, keepdims=True) / 2).astype(float))
    with pytest.raises(ValueError, match="scalar outputs only"):
        est.decode_loss(X, lambda Z, Yt: np.abs(Z - Yt).sum())
    with pytest.raises(ValueError, match="candidates must be outputs with 5 columns"):
        est.decode_loss(X, lambda Z, Yt: np.zeros((len(Z), len(Yt))), candidates=cand[:, :3])
    with pytest.raises(TypeError, match="delta must be a callable"):
        est.decode_loss(X, "hamming", candidates=cand)
    with pytest.raises(ValueError, match="delta.*must return shape"):
        est.decode_loss(X, lambda Z, Yt: np.zeros(3), candidates=cand)
    rff = OutputKernelRegressor(lam=1e-2, kernel_x=KX, solver="rff", n_features_x=20, random_state=0).fit(X, Y)
    with pytest.raises(ValueError, match="alpha: weights on the training outputs are an exact-solver notion"):
        rff.decode_loss(X, lambda Z, Yt: np.abs(Z[:, None, :] - Yt[None, :, :]).sum(-1), candidates=cand)


def test_class_labels_with_the_delta_kernel(rng):
    X = rng.standard_normal((60, 2))
    y = (np.arctan2(X[:, 1], X[:, 0]) // (2 * np.pi / 3)).astype(int) + 1  # 3 sectors: labels 0, 1, 2
    y[y < 0] = 0
    est = OutputKernelRegressor(EpsilonSVR(0.3), lam=1e-3, kernel_x=GaussianX(1.0), kernel_y=Delta()).fit(X, y)
    assert est.output_type_ == "labels" and set(est.classes_) == set(y)
    p = est.predict(X)
    assert p.shape == (60,) and np.mean(p == y) > 0.9
    scores = 1 - 2 * est.alpha(X) @ Delta().gram(y, est.classes_)
    assert np.array_equal(p, est.classes_[np.argmin(scores, axis=1)])
    assert est.score(X, y) == pytest.approx(-2 * np.mean(p != y))


# ------------------------------------------------------------------------------------------------------ masking


def test_masked_labels_square_loss_is_per_label_kernel_ridge(multilabel, rng):
    """Missing labels are left out of the loss: with the square loss the problem splits by label into kernel
    ridge regressions on the rows where that label is observed (alpha = nΛ with n all rows)."""
    X, Y = multilabel
    Ym = Y.copy()
    Ym[rng.random(Y.shape) < 0.2] = np.nan
    Ym[0] = Y[0]  # no row entirely missing
    n, lam = len(X), 3e-3
    est = OutputKernelRegressor(lam=lam, kernel_x=KX, tol=1e-13, max_iter=50000).fit(X, Ym)
    assert est.masked_ and est.duality_gap_ <= 1e-13
    K = KX.gram(X)
    Xt = X[:6] + 0.2
    for j in range(Y.shape[1]):
        obs = ~np.isnan(Ym[:, j])
        beta = np.linalg.solve(K[np.ix_(obs, obs)] + n * lam * np.eye(obs.sum()), Ym[obs, j])
        # a relative gap g on this quadratic bounds the coefficients' error by about √g
        assert np.abs(KX.gram(Xt, X[obs]) @ beta - est.predict_embedding(Xt)[:, j]).max() < 1e-6
    with pytest.raises(ValueError, match="alpha"):
        est.alpha(Xt)


def test_masked_labels_robust_loss_is_certified(multilabel, rng):
    """Huber on observed labels only: the primal recomputed on the observed entries matches, the gap is
    certified, the dual coefficients vanish on missing entries."""
    X, Y = multilabel
    Ym = Y.copy()
    miss = rng.random(Y.shape) < 0.2
    miss[:, 0] = False
    Ym[miss] = np.nan
    lam = 3e-3
    est = OutputKernelRegressor(Huber(0.4), lam=lam, kernel_x=KX, tol=1e-10, max_iter=50000).fit(X, Ym)
    A = est.dual_coef_
    assert np.all(A[miss] == 0)
    R = np.where(miss, 0.0, Y - est.predict_embedding(X))
    n = len(X)
    h_sq = np.trace(KX.gram(X) @ A @ A.T) / (lam * n) ** 2
    assert est.objective_ == pytest.approx(_primal_value(Huber(0.4), np.linalg.norm(R, axis=1), h_sq, lam))
    assert est.duality_gap_ <= 1e-10
    assert est.predict(X).shape == Y.shape


# ------------------------------------------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    ("kwargs", "y_kind", "match"),
    [
        (dict(kernel_y=Tanimoto()), "nan", "masked"),
        (dict(kernel_y=Gaussian(1.0)), "nan", "coordinatewise"),
        (dict(loss=Huber(0.3, p=1)), "labels", "loss"),
        (dict(loss=EpsilonInsensitive(0.1, p=np.inf)), "labels", "loss"),
        (dict(kernel_y=Tanimoto()), "real", "binary"),
        (dict(output_type="histogram"), "labels", "histogram"),
        (dict(output_type="labels"), "labels", "Delta"),
        (dict(kernel_y=Delta()), "real", "class labels"),
        (dict(), "rows", "same number of rows"),
        (dict(), "all-nan", "no observed value"),
    ],
)
def test_bad_input_is_refused_naming_the_argument(kwargs, y_kind, match, multilabel):
    X, Y = multilabel
    y = {
        "nan": np.where(np.eye(*Y.shape, dtype=bool), np.nan, Y),
        "labels": Y,
        "real": Y + 0.3,
        "rows": Y[:-1],
        "all-nan": np.vstack([np.full(Y.shape[1], np.nan), Y[1:]]),
    }[y_kind]
    with pytest.raises(ValueError, match=match):
        OutputKernelRegressor(kernel_x=KX, **kwargs).fit(X, y)


def test_candidates_of_another_kind_are_refused(multilabel):
    X, Y = multilabel
    est = OutputKernelRegressor(kernel_x=KX, kernel_y=Tanimoto()).fit(X, Y)
    with pytest.raises(ValueError, match="candidates must be outputs with 5 columns"):
        est.decode(X[:2], Y[:, :4])
    with pytest.raises(ValueError, match="candidates must be binary"):
        est.decode(X[:2], Y + 0.5)
    with pytest.raises(ValueError, match="candidates must not contain NaN"):
        est.decode(X[:2], np.where(Y == 1, np.nan, Y))
    with pytest.raises(ValueError, match="no closed-form decoder"):
        est.predict(X[:2])
    lab = OutputKernelRegressor(kernel_x=KX, kernel_y=Delta()).fit(X, Y[:, 0].astype(int))
    with pytest.raises(ValueError, match="candidates must hold class labels"):
        lab.decode(X[:2], [0.5, 1.0])


def test_convergence_warning_states_the_gap(multilabel):
    X, Y = multilabel
    with pytest.warns(ConvergenceWarning, match=r"relative duality gap \S+ > tol"):
        est = OutputKernelRegressor(EpsilonSVR(0.3), lam=1e-5, kernel_x=KX, max_iter=2, tol=1e-12).fit(X, Y)
    assert est.duality_gap_ > 1e-12 and est.n_iter_ == 2


# ------------------------------------------------------------------------------------------------------ model files


@pytest.mark.parametrize(
    ("kernel", "kind"),
    [(Tanimoto(), "multilabel"), (Delta(), "labels"), (Linear(), "masked"), (Normalized(Gaussian(0.5)), "multilabel")],
)
def test_save_load_round_trip(kernel, kind, multilabel, tmp_path):
    X, Y = multilabel
    y = Y[:, 0].astype(int) if kind == "labels" else Y
    if kind == "masked":
        y = Y.copy()
        y[1, 2] = np.nan
    est = OutputKernelRegressor(Huber(0.5), lam=1e-3, kernel_x=KX, kernel_y=kernel).fit(X, y)
    path = est.save(tmp_path / "m.rffor")
    back = load(path)
    assert type(back) is OutputKernelRegressor and back.get_params() == est.get_params()
    Xt = X[:7] + 0.1
    assert np.array_equal(back.predict_embedding(Xt), est.predict_embedding(Xt))
    cands = np.unique(y) if kind == "labels" else Y[:20]
    assert np.array_equal(back.decode(Xt, cands), est.decode(Xt, cands))
    assert back.duality_gap_ == est.duality_gap_ and back.output_type_ == est.output_type_
    if kind != "masked":
        assert np.array_equal(back.alpha(Xt), est.alpha(Xt))


# ------------------------------------------------------------------------------------------------------ CV


def test_cv_scores_equal_separate_fits_and_refit_equals_the_estimator(multilabel):
    """Each fold score is the validation score of a separate fit of the estimator (the midmean, the mean of the
    middle half, over samples of ‖h(x) − ψ(y)‖² for a robust loss); the refit is the estimator at the selected
    (Λ, κ)."""
    from sklearn.model_selection import KFold

    X, Y = multilabel
    cv = OutputKernelRegressorCV(Huber(0.4), lams=[1e-1, 1e-2, 1e-3], loss_params=[0.2, 0.4, 0.8], cv=3,
                                 kernel_x=KX, tol=1e-10, max_iter=20000).fit(X, Y)  # fmt: skip
    folds = list(KFold(3, shuffle=True, random_state=0).split(X))
    i = 4
    lam, kappa = cv.cv_results_["lam"][i], cv.cv_results_["loss_param"][i]
    for f, (tr, va) in enumerate(folds):
        est = OutputKernelRegressor(Huber(kappa), lam=lam, kernel_x=KX, tol=1e-10, max_iter=20000).fit(X[tr], Y[tr])
        E = np.sum((est.predict_embedding(X[va]) - Y[va]) ** 2, axis=1)
        assert cv.cv_results_["fold_scores"][i][f] == pytest.approx(stats.trim_mean(E, 0.25), rel=1e-5)
    ref = OutputKernelRegressor(cv.loss_, lam=cv.lam_, kernel_x=KX, tol=1e-10, max_iter=20000).fit(X, Y)
    assert np.abs(cv.best_estimator_.predict_embedding(X) - ref.predict_embedding(X)).max() < 1e-12
    assert np.array_equal(cv.predict(X), ref.predict(X))


def test_cv_decoded_scoring_is_the_hamming_count(multilabel):
    from sklearn.model_selection import KFold

    X, Y = multilabel
    cv = OutputKernelRegressorCV(lams=[1e-2, 1e-3], cv=3, kernel_x=KX, scoring="decoded", max_extensions=0).fit(X, Y)
    tr, va = next(iter(KFold(3, shuffle=True, random_state=0).split(X)))
    lam = cv.cv_results_["lam"][0]
    est = OutputKernelRegressor(lam=lam, kernel_x=KX).fit(X[tr], Y[tr])
    assert cv.cv_results_["fold_scores"][0][0] == pytest.approx(np.mean(np.sum(est.predict(X[va]) != Y[va], axis=1)))
    with pytest.raises(ValueError, match="closed-form decoder"):
        OutputKernelRegressorCV(kernel_x=KX, kernel_y=Tanimoto(), scoring="decoded").fit(X, Y)


def test_cv_for_class_labels_and_kernels_without_embedding(rng):
    X = rng.standard_normal((45, 2))
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)
    for scoring in ("embedding", "decoded"):
        cv = OutputKernelRegressorCV(kernel_y=Delta(), lams=[1e-1, 1e-2, 1e-3], cv=3, scoring=scoring).fit(X, y)
        assert cv.best_estimator_.output_type_ == "labels"
        assert np.mean(cv.predict(X) == y) > 0.8


# ------------------------------------------------------------------------------------------------------ contract


@pytest.mark.parametrize("params", [dict(), dict(loss=EpsilonSVR(0.1), solver="apgd")], ids=["default", "svr-apgd"])
def test_check_estimator_passes(params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        results = check_estimator(OutputKernelRegressor(**params), on_fail=None)
    failed = {r["check_name"]: str(r["exception"])[:200] for r in results if r["status"] == "failed"}
    assert not failed, failed
    assert sum(r["status"] == "passed" for r in results) >= 50


def test_cv_decoded_scoring_of_scalars_equals_separate_fits(rng):
    """Scalar outputs with a Gaussian output kernel: the fold score is the mean kernel loss 2 − 2k(ŷ, y) of the
    decoded (1-D minimisation) predictions of a separate fit."""
    from sklearn.model_selection import KFold

    x = rng.uniform(-1, 1, (60, 1))
    y = np.sin(3 * x[:, 0]) + 0.1 * rng.standard_normal(60)
    ky = Gaussian(2.0)
    cv = OutputKernelRegressorCV(lams=[1e-2, 1e-3], cv=3, kernel_x=GaussianX(5.0), kernel_y=ky, scoring="decoded",
                                 max_extensions=0).fit(x, y)  # fmt: skip
    tr, va = next(iter(KFold(3, shuffle=True, random_state=0).split(x)))
    est = OutputKernelRegressor(lam=cv.cv_results_["lam"][1], kernel_x=GaussianX(5.0), kernel_y=ky).fit(x[tr], y[tr])
    ref = np.mean(2 - 2 * np.exp(-2.0 * (est.predict(x[va]) - y[va]) ** 2))
    assert cv.cv_results_["fold_scores"][1][0] == pytest.approx(ref, rel=1e-6)
    assert cv.predict(x).shape == (60,)


# ---------------------------------------------------------------------------------------------------------------
# the random-feature path (rffor.outputs.kernel_embedding; issue 24 item 2)
# ---------------------------------------------------------------------------------------------------------------

#: ψ of each output kernel with M = n landmarks: an exact factor of K_Y on the training outputs
RFF_EXACT_CASES = {
    "linear (identity ψ)": (Linear(), "exact"),
    "tanimoto (Nyström, M = n)": (Tanimoto(), "nystrom"),
    "gaussian (Nyström, M = n)": (Gaussian(0.5), "nystrom"),
}


def _rff_pair(X, Y, ky, how, loss, lam=1e-3):
    """The exact solver's fit and the random-feature fit with Nyström input features on all n rows (M = n) and the
    output embedding ``how`` with M = n landmarks, both run to their optimum."""
    n = len(X)
    kx = GaussianX(1.5)
    exact = OutputKernelRegressor(loss, kernel_x=kx, kernel_y=ky, lam=lam, tol=1e-12, max_iter=50000).fit(X, Y)
    rff = OutputKernelRegressor(
        loss, kernel_x=kx, kernel_y=ky, lam=lam, solver="rff", input_features="nystrom", n_features_x=n,
        output_embedding=how, n_features_y=n, tol=1e-16, max_iter=3000, random_state=0,
    ).fit(X, Y)  # fmt: skip
    return exact, rff


@pytest.mark.parametrize("loss", [Square(), Huber(kappa=0.3)], ids=["square", "huber"])
@pytest.mark.parametrize("case", list(RFF_EXACT_CASES))
def test_rff_path_with_nystrom_m_equal_n_is_the_exact_solver(multilabel, case, loss):
    """With every training row a Nyström centre (φ_X(x_i)ᵀφ_X(x_j) = K_X) and ψ an exact factor of K_Y, the
    random-feature problem in the units of feature_units is seed 002's (P): the same objective (the rff J_FR is
    s times it) and the same model. The square loss is one closed form on each side (models equal to rounding);
    a robust one is two iterative solves stopped at a relative gap of 1e-12 (exact) and at MM's own test (rff), and
    Λ-strong convexity bounds the models' distance by √(2 ΔJ/Λ) ≈ 1e-5 for ΔJ ≈ 1e-13."""
    X, Y = multilabel
    ky, how = RFF_EXACT_CASES[case]
    exact, rff = _rff_pair(X, Y, ky, how, loss)
    _, s = feature_units(loss, rff.rank_)
    assert rff.lam_ == pytest.approx(1e-3, rel=1e-12) and rff.loss_ == loss
    assert rff.objective_history_[-1] / s == pytest.approx(exact.objective_, rel=1e-9)
    Z = np.unique(Y, axis=0)
    inner_e, inner_r = exact._inner_with(X, Z), rff._inner_with(X, Z)
    tol = 1e-9 if loss.is_square else 1e-4
    np.testing.assert_allclose(inner_r, inner_e, atol=tol * np.abs(inner_e).max())
    np.testing.assert_array_equal(rff.decode(X, Z), exact.decode(X, Z))
    if how == "exact":
        np.testing.assert_allclose(rff.predict_embedding(X), exact.predict_embedding(X), atol=tol)
        np.testing.assert_array_equal(rff.predict(X), exact.predict(X))


def test_rff_path_histograms_and_scalars_match_the_exact_solver(rng):
    """Hellinger ψ = √y (its closed-form decoder on the rff path) and a scalar output with a Gaussian output kernel
    (the 1-D minimisation of k(z, z) − 2<h(x), ψ(z)>) with Nyström M = n: the exact solver's predictions."""
    X = rng.uniform(-1, 1, (40, 2))
    P = np.exp(np.c_[X, -X[:, :1]] + 0.2 * rng.standard_normal((40, 3)))
    H = P / P.sum(axis=1, keepdims=True)
    exact, rff = _rff_pair(X, H, Hellinger(), "exact", Square())
    np.testing.assert_allclose(rff.predict(X), exact.predict(X), atol=1e-9)
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(40)
    exact, rff = _rff_pair(X, y, Gaussian(2.0), "nystrom", Square())
    assert rff.predict(X).shape == (40,)
    np.testing.assert_allclose(rff.predict(X), exact.predict(X), atol=1e-6)


@pytest.mark.parametrize("loss", [Square(), Huber(0.7), EpsilonInsensitive(0.4), EpsilonSVR(0.5)], ids=repr)
def test_feature_units_are_the_functional_problem_s_loss_up_to_the_factor_s(loss, rng):
    """L_FR(r) = s L(‖r‖) on every residual, inside and outside κ/ε (MATH.md §8): s = 1/D for the losses of
    quadratic growth, 1/√D for ε-SVR."""
    D = 7
    loss_fr, s = feature_units(loss, D)
    assert s == pytest.approx(1 / math.sqrt(D) if isinstance(loss, EpsilonSVR) else 1 / D, rel=1e-12)
    R = rng.standard_normal((30, D)) * np.geomspace(0.01, 5, 30)[:, None]
    np.testing.assert_allclose(loss_fr.curve_values(R), s * loss.curve_values(R * math.sqrt(D)), rtol=1e-12, atol=0)


def test_rff_path_refuses_what_it_cannot_do(multilabel):
    X, Y = multilabel
    with pytest.raises(ValueError, match="output_embedding='rff' is not available for kernel_y=Tanimoto"):
        OutputKernelRegressor(kernel_y=Tanimoto(), solver="rff", output_embedding="rff").fit(X, Y)
    with pytest.raises(ValueError, match="kernel_y=Delta.*offers no embedding"):
        OutputKernelRegressor(kernel_y=Delta(), solver="rff").fit(X, Y[:, 0].astype(int))
    Yn = Y.copy()
    Yn[0, 1] = np.nan
    with pytest.raises(ValueError, match="y has missing entries"):
        OutputKernelRegressor(kernel_y=Tanimoto(), solver="rff").fit(X, Yn)
    with pytest.raises(ValueError, match="loss=EpsilonSVR.*not smooth"):
        OutputKernelRegressor(EpsilonSVR(0.3), solver="rff", rff_method="mm", lam=1e-3).fit(X, Y)
    with pytest.raises(ValueError, match="lam='auto' selects Λ on the random-feature path"):
        OutputKernelRegressor(lam="auto").fit(X, Y)
    est = OutputKernelRegressor(solver="rff", n_features_x=20, random_state=0).fit(X, Y)
    with pytest.raises(ValueError, match="alpha: weights on the training outputs"):
        est.alpha(X)
    with pytest.raises(ValueError, match="candidates must be outputs with 5 columns"):
        est.decode(X, Y[:, :3])


def test_rff_path_masks_missing_labels_of_a_coordinatewise_embedding(multilabel):
    """Linear ψ on the rff path with 10% of the labels missing: MM passes on the masked objective (a missing label
    is a missing coordinate of ψ, left out of the loss); the fit differs from the complete data's and predicts label
    sets."""
    X, Y = multilabel
    Yn = Y.copy()
    Yn[np.random.default_rng(1).random(Y.shape) < 0.1] = np.nan
    Yn[np.isnan(Yn).all(axis=1), 0] = 1.0
    kw = dict(solver="rff", n_features_x=30, lam=1e-3, random_state=0, tol=1e-10, max_iter=2000)
    masked = OutputKernelRegressor(**kw).fit(X, Yn)
    full = OutputKernelRegressor(**kw).fit(X, Y)
    assert masked.rff_method_ == "mm" and full.rff_method_ == "closed_form"
    assert not np.allclose(masked.coef_, full.coef_)
    assert set(np.unique(masked.predict(X))) <= {0.0, 1.0}


@pytest.mark.parametrize("loss", [Square(), Huber(kappa=0.3), EpsilonInsensitive(0.2)], ids=repr)
def test_rff_path_on_masked_labels_with_nystrom_m_equal_n_is_the_exact_solver(multilabel, loss):
    """Masked labels (15% of the entries missing, every row keeping one): the exact solver sums each row's loss over
    its observed labels, L(‖r_{O_i}‖); the random-feature path averages each row over all D coordinates, a missing
    one a zero residual (OutputKernelSpace.row_average), so that in the units of feature_units its row loss is
    s L(‖r_{O_i}‖) and, with Nyström input features on all n rows and the identity ψ, its objective is s times the
    exact one and its model the exact model. (Averaging each row over its own observed count m_i instead, the rule
    of curves, solves another problem: its objective differs by 1.7-4.3% here, its h by 0.04.)"""
    from rffor.outputs import OutputKernelSpace

    X, Y = multilabel
    Yn = Y.copy()
    Yn[np.random.default_rng(3).random(Y.shape) < 0.15] = np.nan
    Yn[np.isnan(Yn).all(axis=1), 0] = 1.0
    assert 0.1 < np.isnan(Yn).mean() < 0.2
    exact, rff = _rff_pair(X, Yn, Linear(), "exact", loss)
    assert exact.masked_ and rff.rff_method_ == "mm" and rff.rank_ == exact.rank_ == Y.shape[1]
    _, s = feature_units(loss, rff.rank_)
    assert rff.objective_history_[-1] / s == pytest.approx(exact.objective_, rel=1e-9)
    H_e, H_r = exact.predict_embedding(X), rff.predict_embedding(X)
    np.testing.assert_allclose(H_r, H_e, atol=1e-5 * np.abs(H_e).max())
    np.testing.assert_array_equal(rff.predict(X), exact.predict(X))
    with pytest.MonkeyPatch.context() as mp:  # each row over its own observed count: another problem
        mp.setattr(OutputKernelSpace, "row_average", "observed")
        other = OutputKernelRegressor(**rff.get_params()).fit(X, Yn)
    assert abs(other.objective_history_[-1] / s / exact.objective_ - 1) > 1e-2
    assert np.abs(other.predict_embedding(X) - H_e).max() > 1e-2


def test_rff_path_lam_auto_save_load_and_a_zarr_store_on_dask(multilabel, tmp_path):
    """lam='auto' reports Λ = λ_FR / s of the selected λ_FR; a saved model predicts the same; the same fit from a
    Zarr store of the raw label sets in chunks, on a Dask cluster with 2 partitions, equals the in-memory fit up to
    the order of the sums."""
    distributed = pytest.importorskip("distributed")
    from rffor import data as rdata

    X, Y = multilabel
    kw = dict(loss=Huber(0.5), solver="rff", n_features_x=30, random_state=0, tol=1e-10)
    est = OutputKernelRegressor(lam="auto", **kw).fit(X, Y)
    _, s = feature_units(Huber(0.5), Y.shape[1])
    assert est.lam_ == pytest.approx(est.lam_path_["lam"] / s, rel=1e-12) and est.loss_ == Huber(0.5)
    path = est.save(tmp_path / "m.rffor")
    again = load(path)
    np.testing.assert_array_equal(again.predict_embedding(X), est.predict_embedding(X))
    np.testing.assert_array_equal(again.predict(X), est.predict(X))
    mem = OutputKernelRegressor(lam=1e-3, **kw).fit(X, Y)
    store = rdata.write(tmp_path / "y.zarr", X, Y, chunks=10, dtype="float64")
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as c,
        distributed.Client(c) as client,
    ):
        dist = OutputKernelRegressor(lam=1e-3, client=client, n_partitions=2, **kw).fit(store)
    assert dist.output_type_ == "multilabel" and dist.n_features_in_ == X.shape[1]
    np.testing.assert_allclose(dist.predict_embedding(X), mem.predict_embedding(X), rtol=1e-7, atol=1e-9)


@pytest.mark.timeout(240)
def test_rff_path_from_a_store_opens_no_chunk_on_the_driver(multilabel, tmp_path, monkeypatch):
    """A Zarr store fitted on the embedded cluster of worker processes (n_partitions=2) with Nyström output features
    on landmark outputs drawn from a part of the rows (R = 20 M = 40 of the 50): every chunk read of the store is
    forbidden in the driver's process (reading one raises), yet the fit runs (the landmark outputs and the output
    kind come from rows read by the partition tasks, as everything else), starts the cluster once for the landmarks'
    pass and the fit, and equals the in-memory fit: the same landmarks, the same model up to the order of the sums."""
    distributed = pytest.importorskip("distributed")
    from rffor import data as rdata

    X, Y = multilabel
    kw = dict(
        loss=Huber(0.5), kernel_y=Tanimoto(), output_embedding="nystrom", n_features_y=2, solver="rff",
        n_features_x=30, lam=1e-3, random_state=0, tol=1e-10,
    )  # fmt: skip
    mem = OutputKernelRegressor(**kw).fit(X, Y)
    store = rdata.write(tmp_path / "y.zarr", X, Y, chunks=10, dtype="float64")

    def forbidden(*args, **kwargs):
        raise AssertionError("the driver read a chunk of the store")

    for name in ("chunk", "read", "_arrays"):  # every way Dataset reads rows; metadata stay readable
        monkeypatch.setattr(rdata.Dataset, name, forbidden)
    with pytest.raises(AssertionError, match="the driver read a chunk"):
        store.chunk(0)
    started = []

    class CountedCluster(distributed.LocalCluster):
        def __init__(self, *args, **kwargs):
            started.append(kwargs.get("processes"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(distributed, "LocalCluster", CountedCluster)
    dist = OutputKernelRegressor(n_partitions=2, **kw).fit(store)
    assert started == [True]  # one cluster, of worker processes: the driver's patched Dataset is not theirs
    assert dist.output_type_ == mem.output_type_ == "multilabel"
    np.testing.assert_array_equal(dist.output_embedding_.landmarks, mem.output_embedding_.landmarks)
    np.testing.assert_allclose(dist.predict_embedding(X), mem.predict_embedding(X), rtol=1e-7, atol=1e-9)


def test_landmark_outputs_are_distinct_rows_drawn_by_seed_on_any_partitioning(rng):
    """landmark_outputs: the distinct complete outputs of R rows drawn from all n (all of them when n <= R), M of
    them as landmarks; the same for a fixed seed whatever the partitions, other for another seed."""
    from rffor.chunked import ArrayData
    from rffor.executor import SerialExecutor
    from rffor.outputs.kernel_embedding import landmark_outputs

    Y = rng.integers(0, 2, (300, 4)).astype(float)  # at most 16 distinct outputs
    Y[::7, 1] = np.nan
    data = ArrayData(rng.standard_normal((300, 2)), Y, chunk_rows=32)
    complete = np.unique(Y[~np.isnan(Y).any(axis=1)], axis=0)

    def draw(P, seed, draw_rows=None):
        with SerialExecutor().open(data, P) as run:
            return landmark_outputs(run, data, 5, seed, draw_rows=draw_rows)

    seen, L = draw(1, (0, 7), draw_rows=300)
    np.testing.assert_array_equal(seen, complete)  # n <= R: every row
    assert len(L) == 5 and len(np.unique(L, axis=0)) == 5 and all((complete == row).all(1).any() for row in L)
    seen_20, L_20 = draw(1, (0, 7), draw_rows=20)
    assert len(seen_20) <= 20 and all((complete == row).all(1).any() for row in seen_20)
    for P in (3, 10):
        again = draw(P, (0, 7), draw_rows=20)
        np.testing.assert_array_equal(again[0], seen_20)
        np.testing.assert_array_equal(again[1], L_20)
    assert not np.array_equal(draw(1, (1, 7), draw_rows=300)[1], L)


def test_output_kernel_space_spec_round_trip_and_embeddings(multilabel):
    """Each embedding of OutputKernelSpace rebuilt from its spec and arrays gives the same ψ; Nyström features on
    all the distinct outputs are an exact factor of K_Y (ΨΨᵀ = K_Y), random Fourier features approach it."""
    from rffor.outputs import OUTPUT_SPACES, OutputKernelSpace
    from rffor.outputs.kernel_embedding import make_output_embedding

    _, Y = multilabel
    L = np.unique(Y, axis=0)
    for ky, how in [(Linear(), "exact"), (Tanimoto(), "nystrom"), (Gaussian(0.3), "rff"), (Gaussian(0.3), "nystrom")]:
        emb = make_output_embedding(ky, how, dim=Y.shape[1], n_features=4000, seed=(0, 8), landmarks=L)
        space = OutputKernelSpace(ky, emb)
        again = OUTPUT_SPACES[space.to_spec()["kind"]].from_state(space.to_spec(), space.arrays())
        np.testing.assert_array_equal(again.embedding.transform(Y), emb.transform(Y))
        Psi = emb.transform(Y)
        err = np.abs(Psi @ Psi.T - ky.gram(Y)).max()
        assert err < (0.05 if how == "rff" else 1e-10), (ky, how, err)
    with pytest.raises(ValueError, match="output_embedding must be 'auto' or one of"):
        make_output_embedding(Linear(), "svd", dim=3, n_features=2, seed=0)
