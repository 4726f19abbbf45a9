"""Synthetic functional data and outlier corruptions (MATH.md §7); error metrics are in :mod:`rffor.metrics`.

The generator and the three outlier types follow Lambert, Bouche, Szabó & d'Alché-Buc (ICML 2022; seed paper
000), §5.1 and appendix B.2.1. Conventions fixed here where the paper leaves room:

- A "Gaussian covariance of standard deviation σ" is the squared-exponential covariance
  ``k_σ(s, t) = exp(-(s - t)² / (2 σ²))`` with unit marginal variance, i.e. σ is the length scale. This is what
  the authors' code does (scikit-learn's ``RBF(length_scale=σ)``).
- Curves are discretised on equispaced grids of [0, 1]; a Gaussian-process draw on a grid is
  ``L z`` with ``L`` the Cholesky factor of the covariance matrix (plus a tiny jitter) and ``z ~ N(0, I)``.
- All randomness comes from the ``random_state`` argument; there is no global state.

Public functions: :func:`make_synthetic`, :func:`sample_synthetic`, :func:`synthetic_signal_energy` (the scale of
observation noise stated as a signal-to-noise ratio), :func:`add_outliers`, and the real-data loader
:func:`load_gait` (defined in :mod:`rffor.realdata`, which needs the optional ``realdata`` extra when called).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike
from sklearn.utils import Bunch

from ._validation import check_generator, check_int, check_real
from .realdata import load_gait

__all__ = ["make_synthetic", "sample_synthetic", "synthetic_signal_energy", "add_outliers", "load_gait"]

#: Length scales of the r = 4 components of the synthetic data (paper 000, B.2.1).
SYNTHETIC_LENGTH_SCALES: tuple[float, ...] = (0.05, 0.1, 0.5, 0.7)
#: Length scales of the Type 2 outlier components (paper 000, B.2.1 and Fig. 3).
OUTLIER_LENGTH_SCALES: tuple[float, ...] = (0.01, 0.05, 1.0, 4.0)

RandomStateLike = int | np.integer | np.random.Generator | np.random.SeedSequence | None

# Guard against floor(0.29 * 100) == 28 and the like (binary rounding of τ n and ξ m).
_FLOOR_EPS = 1e-9


# ----------------------------------------------------------------------------------------------------------------
# argument checking
# ----------------------------------------------------------------------------------------------------------------


def _check_kind(kind: int | str) -> int:
    """Map 1, 2, 3, "1", "type1", "Type 2", "type_3", ... to 1, 2 or 3."""
    code: object = kind
    if isinstance(kind, str):
        s = kind.strip().lower()
        s = s.removeprefix("type").strip(" _-")
        code = int(s) if s in {"1", "2", "3"} else None
    elif isinstance(kind, bool) or not isinstance(kind, numbers.Integral):
        code = None
    if code not in (1, 2, 3):
        raise ValueError(f"kind must be one of 1, 2, 3 (or '1', 'type1', ...), got {kind!r}")
    return int(code)  # type: ignore[arg-type]


def _as_float_2d(Y: ArrayLike, name: str) -> np.ndarray:
    Y = np.asarray(Y)
    if Y.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array of shape (n, m), got shape {Y.shape}")
    if not np.issubdtype(Y.dtype, np.floating):
        if not (np.issubdtype(Y.dtype, np.integer) or Y.dtype == bool):
            raise ValueError(f"{name} must hold real numbers, got dtype {Y.dtype}")
        Y = Y.astype(np.float64)
    return Y


def _n_of(fraction: float, total: int | np.ndarray) -> int | np.ndarray:
    """floor(fraction * total), robust to binary rounding (0.29 * 100 -> 29, not 28)."""
    return np.floor(np.asarray(fraction) * total + _FLOOR_EPS).astype(np.int64)


# ----------------------------------------------------------------------------------------------------------------
# Gaussian-process curves
# ----------------------------------------------------------------------------------------------------------------


def _gp_curves(grid: np.ndarray, length_scales: Sequence[float], rng: np.random.Generator) -> np.ndarray:
    """Draw one zero-mean GP curve per length scale on ``grid``.

    The covariance is ``exp(-(s - t)² / (2 σ²))`` (unit variance). Sampling uses the Cholesky factor of the
    covariance matrix plus the smallest jitter in 1e-10, 1e-9, ... that makes it positive definite (long length
    scales make the matrix numerically singular); the jitter adds white noise of standard deviation
    ≤ sqrt(jitter), negligible next to the unit-variance curves.

    Returns
    -------
    G : ndarray of shape (len(length_scales), len(grid))
    """
    grid = np.asarray(grid, dtype=np.float64)
    sq = (grid[:, None] - grid[None, :]) ** 2
    eye = np.eye(grid.size)
    Z = rng.standard_normal((len(length_scales), grid.size))
    G = np.empty_like(Z)
    for c, sigma in enumerate(length_scales):
        K = np.exp(-sq / (2.0 * sigma**2))
        for jitter in 10.0 ** np.arange(-10, -1):
            try:
                L = np.linalg.cholesky(K + jitter * eye)
                break
            except np.linalg.LinAlgError:  # pragma: no cover - depends on the grid
                continue
        else:  # pragma: no cover - jitter 1e-2 always suffices for a correlation matrix
            raise np.linalg.LinAlgError(f"could not factor the GP covariance of length scale {sigma}")
        G[c] = L @ Z[c]
    return G


def _orthonormal_rows(G: np.ndarray) -> np.ndarray:
    """Gram–Schmidt on the rows of G (in order), each scaled to unit root-mean-square over its columns."""
    Q, R = np.linalg.qr(G.T)
    signs = np.where(np.diag(R) < 0, -1.0, 1.0)  # unique factor with diag(R) > 0: plain Gram–Schmidt
    return (Q * signs).T * np.sqrt(G.shape[1])


def _nonlinear_coefficients(U: np.ndarray) -> np.ndarray:
    """f_c(u) = ½ sin(2π u_c) + 2 u_c u_{c+1} (c + 1 taken cyclically), for U of shape (n, r)."""
    return 0.5 * np.sin(2.0 * np.pi * U) + 2.0 * U * np.roll(U, -1, axis=1)


# ----------------------------------------------------------------------------------------------------------------
# public API
# ----------------------------------------------------------------------------------------------------------------


def make_synthetic(
    n_train: int = 100,
    n_test: int = 100,
    *,
    m: int = 100,
    p_in: int = 100,
    nonlinear: bool = False,
    noise: float = 0.0,
    random_state: RandomStateLike = None,
) -> Bunch:
    """Function-to-function synthetic data: mixtures of Gaussian-process curves (MATH.md §7).

    Follows paper 000, appendix B.2.1. Draw once r = 4 input curves ``g_c^in`` and 4 output curves ``g_c^out``,
    independent zero-mean Gaussian processes on [0, 1] with squared-exponential covariance
    ``k_σ(s, t) = exp(-(s - t)² / (2 σ²))`` (unit variance) and length scales ``σ = (0.05, 0.1, 0.5, 0.7)``,
    discretised on ``theta_in`` and ``theta``. Every sample (train and test alike) has coefficients
    ``u_ic ~ U[-0.5, 0.5]`` i.i.d. and is

    - ``nonlinear=False`` (the paper's data): ``x_i = Σ_c u_ic g_c^in``, ``y_i = Σ_c u_ic g_c^out``. Then y is an
      exactly linear function of x (rank r), which a linear function-on-function model fits perfectly.
    - ``nonlinear=True``: ``y_i = Σ_c f_c(u_i) g_c^out`` with
      ``f_c(u) = ½ sin(2π u_c) + 2 u_c u_{c+1}`` (index c + 1 taken cyclically), and ``x_i = Σ_c u_ic q_c``
      where ``q_1, …, q_4`` are the input GP curves orthonormalised by Gram–Schmidt (in the order of σ) and
      scaled to unit root-mean-square on the grid. Then ``‖x_i − x_j‖² = p_in ‖u_i − u_j‖²`` exactly, so a
      Gaussian input kernel with ``γ_X ≈ 1/p_in`` (0.01 for the default 100 points, the paper's ρ_in) sees
      every coefficient at the same scale: without orthonormalisation some draws make a coefficient almost
      invisible in x. The same seed gives the same GP draws and coefficients in both variants. Outputs have
      a scale comparable to the linear variant (standard deviation about 0.6 instead of 0.5). A linear model
      explains only about half of the output variance (test NMSE ≈ 0.22 for a variance ≈ 0.41), while a
      Gaussian kernel ridge regression (γ_X = 0.01, α = 1e-3) reaches a test NMSE about 20 times smaller
      with n_train = 100 (≈ 0.013) and about 280 times smaller with n_train = 2000 (≈ 0.0008); medians
      over 12 draws with 500 test curves.

    Parameters
    ----------
    n_train : int, default=100
        Number of training samples, >= 1.
    n_test : int, default=100
        Number of test samples, >= 0.
    m : int, default=100
        Number of points of the output grid ``theta = linspace(0, 1, m)``, >= 1.
    p_in : int, default=100
        Number of points of the input grid ``theta_in = linspace(0, 1, p_in)``, >= 1 (>= 4 when
        ``nonlinear=True``).
    nonlinear : bool, default=False
        Use the nonlinear input-output relation described above instead of the paper's linear one.
    noise : float, default=0.0
        Standard deviation of i.i.d. Gaussian noise ``N(0, noise²)`` added to every entry of ``Y_train`` only;
        inputs and test outputs stay clean. The paper uses 0.5 in its ε-insensitive experiments (§5.1).
    random_state : None, int, numpy.random.SeedSequence or numpy.random.Generator, default=None
        Seed of every random draw (GP curves, coefficients, noise). A Generator is used, and advanced, in
        place; an int gives reproducible data.

    Returns
    -------
    data : sklearn.utils.Bunch
        With fields

        - ``X_train`` : ndarray of shape (n_train, p_in), input curves on ``theta_in``;
        - ``Y_train`` : ndarray of shape (n_train, m), output curves on ``theta`` (noisy if ``noise > 0``);
        - ``X_test`` : ndarray of shape (n_test, p_in);
        - ``Y_test`` : ndarray of shape (n_test, m), always noise-free;
        - ``theta`` : ndarray of shape (m,), the output grid ``linspace(0, 1, m)``;
        - ``theta_in`` : ndarray of shape (p_in,), the input grid ``linspace(0, 1, p_in)``;
        - ``components_in`` : ndarray of shape (4, p_in), the input curves ``g_c^in`` (``q_c`` if nonlinear);
        - ``components_out`` : ndarray of shape (4, m), the output curves ``g_c^out``.

        All arrays are float64.

    See Also
    --------
    add_outliers : corrupt ``Y_train`` with the outliers of the paper's §5.1.

    Examples
    --------
    >>> from rffor.datasets import make_synthetic
    >>> data = make_synthetic(100, 50, m=30, random_state=0)
    >>> data.X_train.shape, data.Y_train.shape, data.Y_test.shape
    ((100, 100), (100, 30), (50, 30))
    """
    n_train = check_int(n_train, "n_train", 1)
    n_test = check_int(n_test, "n_test", 0)
    m = check_int(m, "m", 1)
    r = len(SYNTHETIC_LENGTH_SCALES)
    p_in = check_int(p_in, "p_in", r if nonlinear else 1)
    if not isinstance(nonlinear, bool | np.bool_):
        raise ValueError(f"nonlinear must be a bool, got {nonlinear!r}")
    noise = check_real(noise, "noise", low=0.0)
    rng = check_generator(random_state)

    theta_in = np.linspace(0.0, 1.0, p_in)
    theta = np.linspace(0.0, 1.0, m)
    G_in = _gp_curves(theta_in, SYNTHETIC_LENGTH_SCALES, rng)
    G_out = _gp_curves(theta, SYNTHETIC_LENGTH_SCALES, rng)
    if nonlinear:
        G_in = _orthonormal_rows(G_in)
    X, Y = sample_synthetic(G_in, G_out, n_train + n_test, nonlinear=nonlinear, random_state=rng)

    Y_train = Y[:n_train]
    if noise > 0:
        Y_train = Y_train + noise * rng.standard_normal(Y_train.shape)
    return Bunch(
        X_train=X[:n_train],
        Y_train=Y_train,
        X_test=X[n_train:],
        Y_test=Y[n_train:],
        theta=theta,
        theta_in=theta_in,
        components_in=G_in,
        components_out=G_out,
    )


def sample_synthetic(
    components_in: ArrayLike,
    components_out: ArrayLike,
    n: int,
    *,
    nonlinear: bool = False,
    random_state: RandomStateLike = None,
) -> tuple[np.ndarray, np.ndarray]:
    """New samples from the distribution of a :func:`make_synthetic` draw: the same curves, new coefficients.

    For data sets too large for memory, generated block by block (each block with its own seed) with the
    ``components_in`` / ``components_out`` of one ``make_synthetic`` call: ``u_i ~ U[-0.5, 0.5]^4``,
    ``x_i = Σ_c u_ic components_in[c]`` and ``y_i = Σ_c u_ic components_out[c]`` (``f_c(u_i)`` instead of
    ``u_ic`` when ``nonlinear=True``; MATH.md §7). ``make_synthetic`` itself draws its samples with this function
    right after the curves, so ``make_synthetic(n₁ + n₂)`` equals ``make_synthetic(n₁)`` followed by
    ``sample_synthetic(..., n₂)`` on the same Generator.

    Parameters
    ----------
    components_in : array-like of shape (4, p_in)
        ``make_synthetic(...).components_in``.
    components_out : array-like of shape (4, m)
        ``make_synthetic(...).components_out``.
    n : int
        Number of samples, >= 0.
    nonlinear : bool, default=False
        Must match the ``make_synthetic`` call the components come from.
    random_state : None, int, numpy.random.SeedSequence or numpy.random.Generator, default=None
        Seed of the coefficients.

    Returns
    -------
    X : ndarray of shape (n, p_in)
    Y : ndarray of shape (n, m)
        Noise-free outputs.
    """
    G_in = _as_float_2d(components_in, "components_in")
    G_out = _as_float_2d(components_out, "components_out")
    r = len(SYNTHETIC_LENGTH_SCALES)
    if G_in.shape[0] != r or G_out.shape[0] != r:
        raise ValueError(
            f"components_in and components_out must have {r} rows (the curves of make_synthetic), got "
            f"{G_in.shape[0]} and {G_out.shape[0]}"
        )
    n = check_int(n, "n", 0)
    if not isinstance(nonlinear, bool | np.bool_):
        raise ValueError(f"nonlinear must be a bool, got {nonlinear!r}")
    U = check_generator(random_state).uniform(-0.5, 0.5, size=(n, r))
    return U @ G_in, (_nonlinear_coefficients(U) if nonlinear else U) @ G_out


def synthetic_signal_energy(components_out: ArrayLike, *, nonlinear: bool = False) -> float:
    """The expected energy per grid point of the output curves of :func:`sample_synthetic`,
    ``E[(1/m) Σ_j y(θ_j)²]`` over the coefficients, in closed form.

    With ``y = Σ_c a_c g_c`` (``a_c = u_c``, or ``f_c(u)`` when ``nonlinear``) and ``u ~ U[-0.5, 0.5]^4``, the
    coefficients are uncorrelated with ``E[a_c²] = 1/12`` (linear) or ``1/8 + 1/36 = 11/72`` (nonlinear:
    ``E[sin²(2π u)]/4 = 1/8``, ``4 E[u²]² = 1/36``, and every cross moment vanishes by symmetry), so the energy is
    ``E[a_c²] · (1/m) Σ_j Σ_c g_c(θ_j)²``. Observation noise of variance ``ρ`` times this energy on every grid point
    is a signal-to-noise ratio of 1/ρ.

    Parameters
    ----------
    components_out : array-like of shape (4, m)
        ``make_synthetic(...).components_out``.
    nonlinear : bool, default=False
        Must match the ``make_synthetic`` call the components come from.

    Returns
    -------
    float
    """
    G = _as_float_2d(components_out, "components_out")
    if G.shape[0] != len(SYNTHETIC_LENGTH_SCALES):
        raise ValueError(f"components_out must have {len(SYNTHETIC_LENGTH_SCALES)} rows, got {G.shape[0]}")
    if not isinstance(nonlinear, bool | np.bool_):
        raise ValueError(f"nonlinear must be a bool, got {nonlinear!r}")
    second_moment = 11.0 / 72.0 if nonlinear else 1.0 / 12.0
    return float(second_moment * np.mean(np.sum(G**2, axis=0)))


def add_outliers(
    Y: ArrayLike,
    kind: int | str,
    tau: float,
    *,
    xi: float = 0.5,
    zeta: float = 2.0,
    additive: bool = False,
    random_state: RandomStateLike = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Corrupt a fraction of output curves with the functional outliers of paper 000 (MATH.md §7).

    A set ``I = (I_1, …, I_k)`` of ``k = floor(tau * n)`` distinct rows is drawn uniformly at random (in random
    order), then for ``i`` in ``I``:

    - ``kind=1`` (global): ``y_i ← -y_ω(i)`` with ω the cyclic shift of I, ``ω(I_j) = I_{j+1}``,
      ``ω(I_k) = I_1``. Corrupted curves look like clean ones but are paired with the wrong inputs. With
      ``k = 1`` the curve is just negated.
    - ``kind=2`` (global): ``y_i ← Σ_c a_ic g_c`` with 4 fresh zero-mean GP curves ``g_c`` drawn on
      ``linspace(0, 1, m)`` with covariance ``exp(-(s - t)² / (2 σ_c²))``, ``σ = (0.01, 0.05, 1, 4)``, and
      ``a_ic ~ U[-ζ/2, ζ/2]`` i.i.d. These curves are unlike the clean ones.
    - ``kind=3`` (local): in each corrupted curve, ``floor(xi * m_i)`` of its ``m_i`` observed values, chosen at
      random, are replaced by draws of ``U[-b_max, b_max]``, ``b_max = max_ij abs(y_ij)`` over the observed
      entries of the input ``Y``.

    Missing entries (NaN) of ``Y`` stay NaN. For Type 1 a corrupted curve takes the observation pattern of
    ``y_i``: where ``y_i`` is observed but ``y_ω(i)`` is missing there is no value to copy and the result is NaN
    too. Type 3 only draws among observed entries.

    Parameters
    ----------
    Y : array-like of shape (n, m)
        Output curves on a grid (rows are samples), possibly with NaN for missing observations. Not modified.
    kind : {1, 2, 3} or str
        Outlier type; strings such as ``"2"``, ``"type2"`` or ``"Type 2"`` are accepted.
    tau : float in [0, 1]
        Proportion of corrupted curves, τ in the paper.
    xi : float in [0, 1], default=0.5
        Type 3 only: proportion of the observations of a corrupted curve that are replaced, ξ in the paper.
    zeta : float >= 0, default=2.0
        Type 2 only: intensity ζ of the outliers. The default is the paper's value in Fig. 3 and Fig. 4
        (paper 000, appendix B.2); its Fig. 2 varies ζ.
    additive : bool, default=False
        Type 2 only: add the outlier curve to ``y_i`` instead of replacing ``y_i``. §5.1 of the paper (and
        MATH.md §7) replace; appendix B.2.1 and the authors' code add.
    random_state : None, int, numpy.random.SeedSequence or numpy.random.Generator, default=None
        Seed of every random draw.

    Returns
    -------
    Y_corrupted : ndarray of shape (n, m)
        A corrupted copy of ``Y``, in its floating dtype (float64 for integer input).
    indices : ndarray of shape (floor(tau * n),), int64
        The corrupted rows ``I_1, …, I_k`` in the order that defines ω for Type 1, so that
        ``Y_corrupted[indices[j]] == -Y[indices[(j + 1) % k]]``.

    Examples
    --------
    >>> from rffor.datasets import add_outliers, make_synthetic
    >>> data = make_synthetic(random_state=0)
    >>> Y_bad, idx = add_outliers(data.Y_train, kind=3, tau=0.2, xi=0.1, random_state=1)
    >>> idx.shape
    (20,)
    """
    Y = _as_float_2d(Y, "Y")
    kind = _check_kind(kind)
    tau = check_real(tau, "tau", low=0.0, high=1.0)
    xi = check_real(xi, "xi", low=0.0, high=1.0)
    zeta = check_real(zeta, "zeta", low=0.0)
    if not isinstance(additive, bool | np.bool_):
        raise ValueError(f"additive must be a bool, got {additive!r}")
    rng = check_generator(random_state)

    n, m = Y.shape
    out = Y.copy()
    k = int(_n_of(tau, n))
    idx = rng.choice(n, size=k, replace=False).astype(np.int64)
    if k == 0:
        return out, idx
    missing = np.isnan(Y[idx])

    if kind == 1:
        out[idx] = -Y[np.roll(idx, -1)]
    elif kind == 2:
        G = _gp_curves(np.linspace(0.0, 1.0, m), OUTLIER_LENGTH_SCALES, rng)
        A = rng.uniform(-0.5 * zeta, 0.5 * zeta, size=(k, G.shape[0]))
        curves = (A @ G).astype(Y.dtype, copy=False)
        out[idx] = Y[idx] + curves if additive else curves
    else:
        observed = ~missing
        if not np.any(np.isfinite(Y)):
            raise ValueError("Y must have at least one observed (finite) value for kind=3")
        b_max = float(np.nanmax(np.abs(Y)))
        # Rank uniform keys within each row, missing entries last: the n_change_i smallest ranks form a
        # uniformly random subset of the row's observed entries.
        keys = np.where(observed, rng.random((k, m)), np.inf)
        ranks = np.argsort(np.argsort(keys, axis=1, kind="stable"), axis=1, kind="stable")
        n_change = _n_of(xi, observed.sum(axis=1))
        change = ranks < n_change[:, None]
        values = rng.uniform(-b_max, b_max, size=(k, m)).astype(Y.dtype, copy=False)
        rows = out[idx]
        rows[change] = values[change]
        out[idx] = rows

    rows = out[idx]
    rows[missing] = np.nan
    out[idx] = rows
    return out, idx
