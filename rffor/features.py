"""Feature maps of the random-feature model (MATH.md §4 and §5).

The model of MATH.md (P_rf) is ``h_B(x)(θ) = φ_X(x)ᵀ B φ_Θ(θ)`` with

- φ_X : random Fourier features of the input kernel k_X (:class:`RandomFourierFeatures`), and
- φ_Θ : either the exact factor of the output Gram matrix K_Θ on the training grid (:class:`ExactOutputFactor`,
  the operator random Fourier features of a decomposable kernel, the default) or random Fourier features of k_Θ
  (:class:`RandomOutputFeatures`, the "double ORFF" of thesis 003 §3.3.2).

Random frequencies are never stored: a feature map holds its kernel, its size and its seed, and draws the
frequencies again from the seed wherever it is used (a Dask worker, a reloaded model). Pickling drops them.

Seeds are an int or a tuple of ints ``(entropy, *key)``; a tuple means ``np.random.SeedSequence(entropy,
spawn_key=key)``, which is how one ``random_state`` yields independent streams (see :func:`seed_sequence`).

Every feature map saves and restores its own state: ``get_state()`` returns a JSON-serialisable ``spec`` (with a
``kind``) and the arrays that define the map (frequencies, factors: the *values*, since NumPy does not promise the
same random stream across versions and an eigendecomposition may differ in sign across BLAS builds), and
:func:`feature_map_from_state` rebuilds the map from them, validating shapes and dtypes.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np

from ._linalg import eigh_psd, solve_upper, solve_upper_right
from ._validation import check_dtype, check_int
from .kernels import Kernel, as_2d_points

__all__ = [
    "RandomFourierFeatures",
    "NystromFeatures",
    "ExactOutputFactor",
    "RandomOutputFeatures",
    "make_output_features",
    "feature_map_from_state",
    "register_feature_map",
    "seed_sequence",
    "DEFAULT_OUTPUT_RANK_TOL",
]

Seed = int | Sequence[int]

#: Relative eigenvalue threshold of the exact output factor: keep the eigenpairs of K_Θ with t_j > tol · t_max.
#: Low on purpose: directions of K_Θ far down its spectrum still carry curves sharper than k_Θ (on the curves of
#: benchmarks/learning_curve.py, k_Θ = Gaussian(100) on 100 points, projecting the test curves on the kept
#: eigenvectors leaves an NMSE of 3.4e-7 at tol 1e-10 (rank 35), 5.2e-9 at 1e-13 (41), 1.1e-10 at 1e-15 (49):
#: the floor of every model's error). Below 1e-15 the eigenvalues are rounding noise and the Nyström extension off
#: the grid amplifies it (predictions at θ + 1e-7 moved by 1e-10 at 1e-15, 7e-9 keeping every positive one).
DEFAULT_OUTPUT_RANK_TOL = 1e-15

#: rows transformed at once by :meth:`RandomFourierFeatures.transform` when ``block_rows`` is not given
_DEFAULT_BLOCK_ROWS = 8192

#: feature-map classes by the ``kind`` of their state (see :func:`feature_map_from_state`)
_KINDS: dict[str, type] = {}


def _register(cls: type) -> type:
    _KINDS[cls.kind] = cls
    return cls


#: a feature map defined elsewhere (an output space's) registers its ``kind`` for :func:`feature_map_from_state`
register_feature_map = _register


def feature_map_from_state(spec: dict, arrays: dict[str, np.ndarray]):
    """Rebuild a feature map from ``get_state()`` (any kind of this module).

    Parameters
    ----------
    spec : dict
        The JSON part, with ``spec["kind"]``.
    arrays : dict of str to ndarray
        The arrays part.

    Raises
    ------
    ValueError
        Unknown kind, or arrays of the wrong shape or dtype.
    """
    kind = spec.get("kind") if isinstance(spec, dict) else None
    if kind not in _KINDS:
        raise ValueError(f"unknown feature map kind {kind!r}; expected one of {sorted(_KINDS)}")
    return _KINDS[kind].from_state(spec, arrays)


def _state_array(arrays: dict, name: str, shape: tuple, dtype=None) -> np.ndarray:
    """``arrays[name]`` checked for presence, shape and (optionally) dtype."""
    a = arrays.get(name) if isinstance(arrays, dict) else None
    if not isinstance(a, np.ndarray):
        raise ValueError(f"feature map array {name!r} is missing")
    if a.shape != tuple(shape):
        raise ValueError(f"feature map array {name!r} has shape {a.shape}, expected {tuple(shape)}")
    if dtype is not None and a.dtype != np.dtype(dtype):
        raise ValueError(f"feature map array {name!r} has dtype {a.dtype}, expected {np.dtype(dtype)}")
    return a


def seed_sequence(seed: Seed | np.random.SeedSequence) -> np.random.SeedSequence:
    """The :class:`numpy.random.SeedSequence` of a seed.

    Parameters
    ----------
    seed : int, tuple of ints ``(entropy, *key)`` or SeedSequence
        An int is ``SeedSequence(seed)``; a tuple is ``SeedSequence(entropy, spawn_key=key)``, so that
        ``(s, 0)``, ``(s, 1)`` and ``(s, 2, r, p)`` are independent streams of one random state ``s``.

    Returns
    -------
    numpy.random.SeedSequence
    """
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        if seed < 0:
            raise ValueError(f"seed must be a non-negative int or a tuple of them, got {seed!r}")
        return np.random.SeedSequence(int(seed))
    if isinstance(seed, (tuple, list)) and len(seed) >= 1:
        ints = []
        for s in seed:
            if isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 0:
                raise ValueError(f"seed must be a non-negative int or a tuple of them, got {seed!r}")
            ints.append(int(s))
        return np.random.SeedSequence(ints[0], spawn_key=tuple(ints[1:]))
    raise ValueError(f"seed must be a non-negative int or a tuple of them, got {seed!r}")


def _seed_tuple(seed) -> int | tuple[int, ...]:
    seed_sequence(seed)  # validates
    return int(seed) if isinstance(seed, numbers.Integral) else tuple(int(s) for s in seed)


def _check_kernel(kernel, name: str) -> Kernel:
    if not isinstance(kernel, Kernel):
        raise TypeError(f"{name} must be an rffor.kernels.Kernel (Gaussian, Laplacian), got {kernel!r}")
    return kernel


@_register
class RandomFourierFeatures:
    """Random Fourier features of a translation-invariant kernel (Rahimi & Recht 2007; MATH.md §4).

    ``φ(x) = sqrt(2/D) [cos(Wᵀx), sin(Wᵀx)] ∈ R^D`` with the D/2 columns of W drawn from the kernel's spectral law,
    so that ``φ(x)·φ(z) → k(x, z)`` as D grows and ``‖φ(x)‖ = 1`` exactly.

    Parameters
    ----------
    kernel : Kernel
        ``Gaussian`` or ``Laplacian`` (anything with ``sample_frequencies``).
    n_features : int
        D, even and >= 2.
    dim : int
        Dimension d of the inputs.
    seed : int or tuple of ints
        Seed of the frequencies (see :func:`seed_sequence`); the same seed gives the same map.
    dtype : {np.float32, np.float64}, default np.float32
        Type of the features and of the computation (float32 cos/sin is about 7x faster than float64).
    orthogonal : bool, default False
        Orthogonal random features (Yu et al. 2016; Gaussian kernel only): the frequencies come in blocks of
        ``dim`` orthogonal directions (the Q of a QR factorisation of a Gaussian matrix) with lengths drawn from the
        chi distribution of a Gaussian vector's norm, so each frequency still has the spectral law N(0, 2γ I) but
        the directions within a block are orthogonal: a lower-variance kernel estimate at the same D.

    Attributes
    ----------
    W : ndarray of shape (dim, n_features // 2)
        Frequencies, in ``dtype``; regenerated from the seed on first use (not pickled).
    """

    kind = "rff"

    def __init__(self, kernel: Kernel, n_features: int, dim: int, seed: Seed, dtype=np.float32, orthogonal=False):
        self.kernel = _check_kernel(kernel, "kernel")
        self.orthogonal = bool(orthogonal)
        if self.orthogonal and not self.kernel.has_orthogonal_features:
            raise ValueError(f"orthogonal random features are for the Gaussian kernel, got {self.kernel!r}")
        self.n_features = check_int(n_features, "n_features", 2)
        if self.n_features % 2:
            raise ValueError(f"n_features must be even (cos and sin of each frequency), got {n_features}")
        self.dim = check_int(dim, "dim", 1)
        self.seed = _seed_tuple(seed)
        self.dtype = check_dtype(dtype)
        self._W: np.ndarray | None = None

    # ------------------------------------------------------------------ state
    @property
    def W(self) -> np.ndarray:
        """Frequencies, ndarray of shape (dim, n_features // 2), in ``dtype``."""
        if self._W is None:
            rng = np.random.default_rng(seed_sequence(self.seed))
            h = self.n_features // 2
            if self.orthogonal:
                W = self.kernel.orthogonal_frequencies(h, self.dim, rng)
            else:
                W = self.kernel.sample_frequencies(h, self.dim, rng)
            self._W = np.ascontiguousarray(W, dtype=self.dtype)
        return self._W

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_W"] = None  # regenerated from the seed where it is used
        return state

    def __repr__(self) -> str:
        return (
            f"RandomFourierFeatures({self.kernel!r}, n_features={self.n_features}, dim={self.dim}, "
            f"seed={self.seed!r}, dtype={self.dtype.name}" + (", orthogonal=True)" if self.orthogonal else ")")
        )

    def to_spec(self) -> dict:
        """A JSON-serialisable description: kernel, size, seed and dtype (the frequencies are redrawn from it)."""
        return {
            "kind": self.kind,
            "kernel": self.kernel.to_spec(),
            "n_features": self.n_features,
            "dim": self.dim,
            "seed": self.seed if isinstance(self.seed, int) else list(self.seed),
            "dtype": self.dtype.name,
            "orthogonal": self.orthogonal,
        }

    def get_state(self) -> tuple[dict, dict[str, np.ndarray]]:
        """``(spec, {"frequencies": W})``: everything :meth:`from_state` needs to rebuild this exact map."""
        return self.to_spec(), {"frequencies": self.W}

    @classmethod
    def from_state(cls, spec: dict, arrays: dict[str, np.ndarray]) -> RandomFourierFeatures:
        """Inverse of :meth:`get_state`; the stored frequencies are used, not redrawn."""
        from .kernels import kernel_from_spec

        seed = spec["seed"]
        out = cls.__new__(cls)
        RandomFourierFeatures.__init__(
            out,
            kernel_from_spec(spec["kernel"]),
            spec["n_features"],
            spec["dim"],
            seed if isinstance(seed, int) else tuple(seed),
            dtype=spec["dtype"],
            orthogonal=bool(spec.get("orthogonal", False)),
        )
        W = _state_array(arrays, "frequencies", (out.dim, out.n_features // 2), out.dtype)
        out._W = np.ascontiguousarray(W)
        return out

    # -------------------------------------------------------------- transform
    def transform(self, X: np.ndarray, *, out: np.ndarray | None = None, work: np.ndarray | None = None) -> np.ndarray:
        """Features of the rows of X (MATH.md §4).

        Parameters
        ----------
        X : array-like of shape (n, dim)
            Converted to ``dtype`` first (a 1-D array is n points of dimension 1).
        out : ndarray of shape (n, n_features), optional
            C-contiguous array of type ``dtype`` to write into.
        work : ndarray of shape (rows, n_features // 2), optional
            C-contiguous scratch of type ``dtype`` for the projection ``X W``, any number of rows >= 1 (rows are
            processed that many at a time). Reusing ``out`` and ``work`` across calls avoids the page faults of
            fresh allocations, which cost as much as the cos and sin here.

        Returns
        -------
        Phi : ndarray of shape (n, n_features), in ``dtype``
            ``sqrt(2/D) [cos(X W), sin(X W)]``.
        """
        X = as_2d_points(X, "X")
        if X.shape[1] != self.dim:
            raise ValueError(f"X has {X.shape[1]} columns, but the feature map was built for dim={self.dim}")
        X = np.ascontiguousarray(X, dtype=self.dtype)
        n, h = X.shape[0], self.n_features // 2
        if out is None:
            out = np.empty((n, self.n_features), dtype=self.dtype)
        elif out.shape != (n, self.n_features) or out.dtype != self.dtype or not out.flags.c_contiguous:
            raise ValueError(f"out must be a C-contiguous {self.dtype.name} array of shape {(n, self.n_features)}")
        if work is None:
            work = np.empty((min(n, _DEFAULT_BLOCK_ROWS), h), dtype=self.dtype)
        elif work.ndim != 2 or work.shape[1] != h or work.dtype != self.dtype or not work.flags.c_contiguous:
            raise ValueError(f"work must be a C-contiguous {self.dtype.name} array with {h} columns")
        block = max(1, work.shape[0])
        scale = self.dtype.type(np.sqrt(2.0 / self.n_features))
        W = self.W
        for s in range(0, n, block):  # a block at a time: the projection stays in one reused buffer
            e = min(s + block, n)
            Z = np.matmul(X[s:e], W, out=work[: e - s])
            np.sin(Z, out=out[s:e, h:])
            np.cos(Z, out=out[s:e, :h])
            out[s:e] *= scale
        return out

    def __call__(self, X: np.ndarray) -> np.ndarray:
        return self.transform(X)

    @property
    def work_columns(self) -> int:
        """Columns of the ``work`` scratch :meth:`transform` takes: the projection ``X W``, D/2."""
        return self.n_features // 2

    def astype(self, dtype) -> RandomFourierFeatures:
        """The same map (the same frequencies, cast exactly) computing in ``dtype``: float64 predictions of a
        float32 fit are independent of how the rows are batched, as scikit-learn expects of ``predict``."""
        out = RandomFourierFeatures(self.kernel, self.n_features, self.dim, self.seed, dtype, self.orthogonal)
        out._W = np.ascontiguousarray(self.W, dtype=out.dtype)
        return out


@_register
class ExactOutputFactor:
    """Exact factor of the output Gram matrix on the training grid (MATH.md §5, default φ_Θ).

    With ``K_Θ = V diag(t) Vᵀ`` on the grid and the eigenpairs with ``t_j > tol · t_max`` kept,
    ``φ_Θ(θ) = diag(t)^{-1/2} Vᵀ k_Θ(grid, θ)`` (Nyström). On the grid this is ``Φ_Θ = V diag(t)^{1/2}``, so
    ``Φ_Θ Φ_Θᵀ = K_Θ`` up to the discarded eigenvalues, and ``Φ_Θᵀ Φ_Θ / m = diag(t) / m`` is diagonal: the
    operator random Fourier features of Brault et al. (2016) for a decomposable kernel (thesis 003 eq. 2.26).

    Parameters
    ----------
    kernel_theta : Kernel
        Output kernel k_Θ.
    theta_grid : array-like of shape (m,) or (m, p)
        Training grid (or landmark locations for irregular grids).
    tol : float, default :data:`DEFAULT_OUTPUT_RANK_TOL` (1e-15)
        Relative eigenvalue threshold in [0, 1) (see :data:`DEFAULT_OUTPUT_RANK_TOL` for the choice).
    dtype : {np.float32, np.float64}, default np.float32
        Type of the features returned by :meth:`transform` (computed in float64).

    Attributes
    ----------
    n_features : int
        D_θ, the kept rank r.
    eigenvalues : ndarray of shape (r,)
        Kept eigenvalues t of K_Θ, decreasing (float64).
    C_theta : ndarray of shape (r,)
        ``t / m``, the diagonal of ``Φ_Θᵀ Φ_Θ / m`` on the grid (float64).
    grid_features : ndarray of shape (m, r)
        ``Φ_Θ = V diag(t)^{1/2}`` on the training grid, in ``dtype``.
    """

    kind = "exact"

    def __init__(
        self, kernel_theta: Kernel, theta_grid: np.ndarray, tol: float = DEFAULT_OUTPUT_RANK_TOL, dtype=np.float32
    ):
        self.kernel = _check_kernel(kernel_theta, "kernel_theta")
        grid = as_2d_points(np.asarray(theta_grid, dtype=np.float64), "theta_grid")
        if grid.shape[0] == 0 or not np.all(np.isfinite(grid)):
            raise ValueError(f"theta_grid must be a non-empty finite array of locations, got shape {grid.shape}")
        if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not 0 <= tol < 1:
            raise ValueError(f"tol must be a real number in [0, 1), got {tol!r}")
        self.tol = float(tol)
        self.dtype = check_dtype(dtype)
        self.theta_grid = grid
        t, V = eigh_psd(np.asarray(self.kernel.gram(grid), dtype=np.float64))
        t_max = t[0]
        if not t_max > 0:
            raise ValueError("the output Gram matrix K_Θ has no positive eigenvalue")
        keep = t > self.tol * t_max
        self.eigenvalues = t[keep].copy()
        self._V = np.ascontiguousarray(V[:, keep])
        # Nyström map θ ↦ diag(t)^{-1/2} Vᵀ k_Θ(grid, θ): rows of k_Θ(θ, grid) @ _proj
        self._proj = self._V / np.sqrt(self.eigenvalues)
        self.grid_features = np.ascontiguousarray(self._V * np.sqrt(self.eigenvalues), dtype=self.dtype)

    @property
    def n_features(self) -> int:
        return int(self.eigenvalues.shape[0])

    @property
    def m(self) -> int:
        """Number of grid locations."""
        return int(self.theta_grid.shape[0])

    @property
    def C_theta(self) -> np.ndarray:
        """Diagonal of ``Φ_Θᵀ Φ_Θ / m`` on the grid, ndarray of shape (r,)."""
        return self.eigenvalues / self.m

    def transform(self, theta: np.ndarray) -> np.ndarray:
        """Output features at arbitrary locations (Nyström extension).

        Parameters
        ----------
        theta : array-like of shape (q,) or (q, p)

        Returns
        -------
        Phi_theta : ndarray of shape (q, r), in ``dtype``
            Equal to :attr:`grid_features` (to rounding) on the training grid.
        """
        theta = as_2d_points(np.asarray(theta, dtype=np.float64), "theta")
        if theta.shape[1] != self.theta_grid.shape[1]:
            raise ValueError(f"theta has dimension {theta.shape[1]}, the grid has {self.theta_grid.shape[1]}")
        if theta.shape == self.theta_grid.shape and np.array_equal(theta, self.theta_grid):
            return self.grid_features.copy()
        K = np.asarray(self.kernel.gram(theta, self.theta_grid), dtype=np.float64)
        return np.ascontiguousarray(K @ self._proj, dtype=self.dtype)

    def derivative(self, theta: np.ndarray) -> np.ndarray:
        """``∂φ_Θ(θ)/∂θ = diag(t)^{-1/2} Vᵀ ∂_θ k_Θ(grid, θ)`` at levels θ of shape (q,) (one-dimensional Θ; the
        non-crossing penalty of the random-feature path), shape (q, r), in ``dtype``."""
        theta = np.asarray(theta, dtype=np.float64).ravel()
        if self.theta_grid.shape[1] != 1:
            raise ValueError("derivatives of the output features need a one-dimensional Θ")
        d2, _ = self.kernel.gram_derivatives(self.theta_grid[:, 0], theta)  # (m, q): ∂k(grid_l, θ)/∂θ
        return np.ascontiguousarray(d2.T @ self._proj, dtype=self.dtype)

    def __repr__(self) -> str:
        return (
            f"ExactOutputFactor({self.kernel!r}, m={self.m}, tol={self.tol}, rank={self.n_features}, "
            f"dtype={self.dtype.name})"
        )

    def get_state(self) -> tuple[dict, dict[str, np.ndarray]]:
        """``(spec, arrays)``: the kernel, tol and dtype, and the factor's values (``grid``, ``eigenvalues``,
        ``proj`` and ``grid_features``) so that a reloaded map is this one to the bit."""
        spec = {"kind": self.kind, "kernel": self.kernel.to_spec(), "tol": self.tol, "dtype": self.dtype.name}
        arrays = {
            "grid": self.theta_grid,
            "eigenvalues": self.eigenvalues,
            "proj": self._proj,
            "grid_features": self.grid_features,
        }
        return spec, arrays

    @classmethod
    def from_state(cls, spec: dict, arrays: dict[str, np.ndarray]) -> ExactOutputFactor:
        """Inverse of :meth:`get_state` (no eigendecomposition: the stored factor is used)."""
        from .kernels import kernel_from_spec

        out = cls.__new__(cls)
        out.kernel = _check_kernel(kernel_from_spec(spec["kernel"]), "kernel_theta")
        out.tol = float(spec["tol"])
        out.dtype = check_dtype(spec["dtype"])
        t = arrays.get("eigenvalues")
        if not (isinstance(t, np.ndarray) and t.ndim == 1 and t.size >= 1 and np.all(t > 0)):
            raise ValueError("feature map array 'eigenvalues' must be a non-empty 1-D array of positive values")
        grid = arrays.get("grid")
        if not (isinstance(grid, np.ndarray) and grid.ndim == 2 and np.all(np.isfinite(grid))):
            raise ValueError("feature map array 'grid' must be a finite 2-D array of locations")
        r, m = t.shape[0], grid.shape[0]
        out.theta_grid = grid
        out.eigenvalues = t
        out._proj = _state_array(arrays, "proj", (m, r))
        out._V = out._proj * np.sqrt(t)
        feats = _state_array(arrays, "grid_features", (m, r))
        out.grid_features = np.ascontiguousarray(feats, dtype=out.dtype)
        return out


#: rows of a block of :meth:`NystromFeatures.transform` when it is given no ``work`` (the fits pass blocks of
#: 4096 rows: rffor.solvers.rff._BLOCK_ROWS)
_NYSTROM_BLOCK_ROWS = 4096

#: the whitenings of :class:`NystromFeatures`
_WHITENINGS = ("triangular", "eigen")


@_register
class NystromFeatures:
    """Nyström features of a scalar kernel on M centres (Williams & Seeger 2001; FALKON, Rudi et al. 2017).

    With ``K_MM = U diag(s) Uᵀ`` the Gram matrix of the centres c_1 … c_M and every eigenvalue floored at
    ``tol · s_max``, ``s̃_i = max(s_i, tol · s_max)``, the floored Gram matrix is ``K̃ = U diag(s̃) Uᵀ`` and the
    features are ``φ(x) = W k(C, x) ∈ R^M`` for a whitening W with ``Wᵀ W = K̃⁻¹``, so that ``φ(x)·φ(z) =
    k(x, C) K̃⁻¹ k(C, z)``: the Nyström approximation of ``k(x, z)`` along the eigenvectors above the floor (exact
    when x or z is a centre, up to them), and a damped one along the others. Two whitenings give that kernel:

    - ``"eigen"``: ``W = diag(s̃)^{-1/2} Uᵀ``, the map of MATH.md §5.1;
    - ``"triangular"`` (the default): ``W = R⁻ᵀ`` with R the upper-triangular factor of ``K̃ = Rᵀ R`` with a
      positive diagonal (K̃'s Cholesky factor, computed as the R factor of a QR factorisation of
      ``diag(s̃)^{1/2} Uᵀ``, so K̃ is never formed). ``R⁻ᵀ = Qᵀ diag(s̃)^{-1/2} Uᵀ`` for that orthogonal Q: the
      features are the eigen ones rotated, and the model (P_rf) is unchanged (``h_B`` with B rotated likewise,
      ``‖h_B‖ = ‖B‖_F``; every solver of the random-feature path is equivariant under such a rotation). It costs
      half: a triangular solve per block of rows, M² flops a row against 2M² for the product by the dense
      ``diag(s̃)^{-1/2} Uᵀ``, and it is backward stable (the features of a K̃ perturbed at its rounding, like the
      eigendecomposition's own error). Measured by benchmarks/nystrom_features.py.

    All M directions are kept: the model spans every kernel function k(c_j, ·) of the centres. Dropping the
    eigenpairs below the floor instead (as a truncated pseudo-inverse does) removes functions the data can
    determine: on the curves of benchmarks/learning_curve.py (M = 1000, clean, square loss) the truncation at
    1e-13 kept 745 directions and gave 7.6e-9 test NMSE against 3.3e-10 with all 1000 (scikit-learn's
    ``Nystroem`` keeps them too, with an absolute floor of 1e-12). The model of MATH.md (P_rf) is unchanged: φ_X
    is a data-adapted finite-dimensional feature map, and every solver of the random-feature path uses it as it
    uses random Fourier features.

    The kernel block ``k(X, C)`` of a block of rows comes from one GEMM and the kernel's profile applied in place
    (:meth:`rffor.kernels.Kernel.gram_block`), on the rows and centres translated by the centres' mean (distances
    do not change; the GEMM form's cancellation does: it is proportional to the points' squared norms).

    Parameters
    ----------
    kernel : Kernel
        k_X (any kernel with ``gram``; ``gram_block`` is its fast path).
    centres : array-like of shape (M, dim)
        Rows of the training inputs (:func:`rffor.solvers.maps.sample_centres` draws them uniformly).
    dtype : {np.float32, np.float64}, default np.float64
        Type of the features and of their computation. float64 is the default: the whitening amplifies rounding
        by up to ``tol^{-1/2}`` (the condition number of R), so float32 needs a floor of about 1e-6.
    tol : float or None
        Relative eigenvalue floor in (0, 1); None: 1e-14 in float64 (eigenvalues below it are rounding noise of
        the eigendecomposition), 1e-6 in float32.
    whitening : {"triangular", "eigen"}, default "triangular"
        W above. A map saved without one (before it existed) is ``"eigen"``.

    Attributes
    ----------
    n_features : int
        M (D_x of the model).
    centres : ndarray of shape (M, dim), in ``dtype``
    eigenvalues : ndarray of shape (M,)
        The floored eigenvalues s̃, decreasing (float64).
    factor : ndarray of shape (M, M), in ``dtype``
        ``"triangular"`` only: R, upper triangular: ``φ(X) = k(X, C) R⁻¹``.
    projection : ndarray of shape (M, M), in ``dtype``
        ``"eigen"`` only: ``U diag(s̃)^{-1/2}``: ``φ(X) = k(X, C) @ projection``.
    """

    kind = "nystrom"

    def __init__(
        self,
        kernel: Kernel,
        centres: np.ndarray,
        *,
        dtype=np.float64,
        tol: float | None = None,
        whitening: str = "triangular",
    ):
        self.kernel = _check_kernel(kernel, "kernel")
        C = as_2d_points(np.asarray(centres, dtype=np.float64), "centres")
        if C.shape[0] < 1 or not np.all(np.isfinite(C)):
            raise ValueError(f"centres must be a non-empty finite array of shape (M, dim), got shape {C.shape}")
        self.dtype = check_dtype(dtype)
        if tol is None:
            tol = 1e-14 if self.dtype == np.float64 else 1e-6
        if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not 0 < tol < 1:
            raise ValueError(f"tol must be a real number in (0, 1), got {tol!r}")
        if whitening not in _WHITENINGS:
            raise ValueError(f"whitening must be one of {_WHITENINGS}, got {whitening!r}")
        self.tol = float(tol)
        self.whitening = whitening
        s, U = eigh_psd(np.asarray(self.kernel.gram(C), dtype=np.float64))
        if not s[0] > 0:
            raise ValueError("the centres' Gram matrix has no positive eigenvalue")
        self.eigenvalues = np.maximum(s, self.tol * s[0])
        self.centres = np.ascontiguousarray(C, dtype=self.dtype)
        if whitening == "eigen":
            self.projection = np.ascontiguousarray(U / np.sqrt(self.eigenvalues), dtype=self.dtype)
        else:
            # K̃ = U diag(s̃) Uᵀ = AᵀA = RᵀR for A = diag(s̃)^{1/2} Uᵀ = QR; rows of R signed for a positive diagonal
            R = np.linalg.qr(np.sqrt(self.eigenvalues)[:, None] * U.T, mode="r")
            R *= np.where(np.diag(R) < 0, -1.0, 1.0)[:, None]
            self.factor = np.ascontiguousarray(R, dtype=self.dtype)
        self._derive()

    def _derive(self) -> None:
        """Arrays derived from the centres (not saved, not pickled): their mean, the centres translated by it and
        their squared norms, in ``dtype``."""
        C = self.centres.astype(np.float64)
        self._shift = C.mean(axis=0)
        self._shifted_centres = np.ascontiguousarray(C - self._shift, dtype=self.dtype)
        self._norms = np.einsum("ij,ij->i", self._shifted_centres, self._shifted_centres)

    n_features = property(lambda self: int(self.centres.shape[0]), doc="M, the number of features.")
    dim = property(lambda self: int(self.centres.shape[1]), doc="Input dimension.")
    n_centres = property(lambda self: int(self.centres.shape[0]), doc="M.")
    work_columns = property(lambda self: self.n_centres, doc="Columns of :meth:`transform`'s ``work``: M.")

    def __repr__(self) -> str:
        return (
            f"NystromFeatures({self.kernel!r}, n_centres={self.n_centres}, tol={self.tol}, dtype={self.dtype.name}, "
            f"whitening={self.whitening!r})"
        )

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("_shift", "_shifted_centres", "_norms")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("whitening", "eigen")  # pickled before the triangular whitening existed
        self._derive()

    def get_state(self) -> tuple[dict, dict[str, np.ndarray]]:
        """``(spec, {"centres", "eigenvalues", "factor" or "projection"})``: the map to the bit (no
        eigendecomposition)."""
        spec = {
            "kind": self.kind,
            "kernel": self.kernel.to_spec(),
            "tol": self.tol,
            "dtype": self.dtype.name,
            "whitening": self.whitening,
        }
        W = {"factor": self.factor} if self.whitening == "triangular" else {"projection": self.projection}
        return spec, {"centres": self.centres, "eigenvalues": self.eigenvalues, **W}

    @classmethod
    def from_state(cls, spec: dict, arrays: dict[str, np.ndarray]) -> NystromFeatures:
        """Inverse of :meth:`get_state`, validating shapes and types (a spec without ``whitening``: ``"eigen"``)."""
        from .kernels import kernel_from_spec

        out = cls.__new__(cls)
        out.kernel = _check_kernel(kernel_from_spec(spec["kernel"]), "kernel")
        out.dtype = check_dtype(spec["dtype"])
        out.tol = float(spec["tol"])
        out.whitening = spec.get("whitening", "eigen")
        if out.whitening not in _WHITENINGS:
            raise ValueError(f"whitening must be one of {_WHITENINGS}, got {out.whitening!r}")
        t = arrays.get("eigenvalues")
        C = arrays.get("centres")
        if not (isinstance(t, np.ndarray) and t.ndim == 1 and t.size >= 1 and np.all(t > 0)):
            raise ValueError("feature map array 'eigenvalues' must be a non-empty 1-D array of positive values")
        if not (isinstance(C, np.ndarray) and C.ndim == 2 and np.all(np.isfinite(C))):
            raise ValueError("feature map array 'centres' must be a finite 2-D array")
        M = C.shape[0]
        out.eigenvalues = t
        out.centres = np.ascontiguousarray(_state_array(arrays, "centres", C.shape, out.dtype))
        if out.whitening == "eigen":
            out.projection = np.ascontiguousarray(_state_array(arrays, "projection", (M, t.shape[0]), out.dtype))
        else:
            R = np.ascontiguousarray(_state_array(arrays, "factor", (M, M), out.dtype))
            if t.shape[0] != M or not np.all(np.diag(R) > 0):
                raise ValueError("feature map array 'factor' must be upper triangular with a positive diagonal")
            out.factor = R
        out._derive()
        return out

    def transform(self, X: np.ndarray, *, out: np.ndarray | None = None, work: np.ndarray | None = None) -> np.ndarray:
        """Features of the rows of X, a block of rows at a time: the kernel block ``k(X_b, C)`` (one GEMM and the
        kernel's profile in place, :meth:`rffor.kernels.Kernel.gram_block`), then the whitening (a triangular
        solve in place, or the product by the eigen projection).

        Memory beyond ``out``: the block's rows translated, (rows, dim), and with the ``"eigen"`` whitening the
        kernel block (``work``). Cost linear in the rows: ``2 M d + M²`` flops a row (``2 M d + 2 M²`` with
        ``"eigen"``) and M exponentials.

        Parameters
        ----------
        X : array-like of shape (n, dim)
        out : ndarray of shape (n, n_features), optional
            C-contiguous array of type ``dtype`` to write into.
        work : ndarray of shape (rows, M), optional
            C-contiguous scratch of type ``dtype``, any number of rows >= 1: rows are processed that many at a
            time (default 4096). The ``"triangular"`` whitening computes in ``out`` and only reads its number of
            rows; the ``"eigen"`` one holds the kernel block in it.

        Returns
        -------
        Phi : ndarray of shape (n, n_features), in ``dtype``
        """
        X = self._check_rows(X)
        n, M = X.shape[0], self.n_centres
        out = self._check_out(out, n)
        eigen = self.whitening == "eigen"
        if work is None:
            block = min(max(n, 1), _NYSTROM_BLOCK_ROWS)
            work = np.empty((block, M), dtype=self.dtype) if eigen else None
        elif work.ndim != 2 or work.shape[1] != M or work.dtype != self.dtype or not work.flags.c_contiguous:
            raise ValueError(f"work must be a C-contiguous {self.dtype.name} array with {M} columns")
        else:
            block = max(1, work.shape[0])
        shifted = np.empty((min(block, n), self.dim), dtype=self.dtype)
        for s in range(0, n, block):
            e = min(s + block, n)
            K = work[: e - s] if eigen else out[s:e]
            self._gram_block(X[s:e], shifted[: e - s], K)
            if eigen:
                np.matmul(K, self.projection, out=out[s:e])
            else:
                solve_upper_right(K, self.factor)
        return out

    # -- the kernel basis: φ(x) = W k(C, x), so a pass that needs only φ(X) B and φ(X)ᵀ V can skip the whitening --
    def kernel_block(self, X: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
        """The features before their whitening: ``k(X, C)``, so that ``φ(X) = k(X, C) Wᵀ`` (``Wᵀ = R⁻¹`` or the eigen
        projection ``U diag(s̃)^{-1/2}``; :meth:`whiten`).

        FALKON's parametrisation (MATH.md §5.1, ``C = P diag(s)^{-1/2} B``): a pass that only needs the
        predictions ``φ(X) B`` and the sums ``φ(X)ᵀ V`` computes them as ``k(X, C) (Wᵀ B)`` and ``W (k(X, C)ᵀ V)``
        (:meth:`to_kernel_basis`, :meth:`from_kernel_basis`): ``2 M d`` flops a row and M exponentials instead of
        ``2 M d + M²``, the model and its parameter B unchanged. To first order it rounds like the whitened features
        (the rounding of ``k(X, C)`` is amplified by ``Wᵀ`` in both: at most ``tol^{-1/2}``).

        Parameters
        ----------
        X : array-like of shape (n, dim)
        out : ndarray of shape (n, M), optional
            C-contiguous array of type ``dtype`` to write into.

        Returns
        -------
        K : ndarray of shape (n, M), in ``dtype``
        """
        X = self._check_rows(X)
        n = X.shape[0]
        out = self._check_out(out, n)
        block = min(max(n, 1), _NYSTROM_BLOCK_ROWS)
        shifted = np.empty((min(block, n), self.dim), dtype=self.dtype)
        for s in range(0, n, block):
            e = min(s + block, n)
            self._gram_block(X[s:e], shifted[: e - s], out[s:e])
        return out

    def whiten(self, K: np.ndarray) -> np.ndarray:
        """``φ = k(X, C) Wᵀ`` from a :meth:`kernel_block` (in place for the triangular whitening when ``K`` is
        writable; a new array otherwise).

        Parameters
        ----------
        K : ndarray of shape (n, M), in ``dtype``

        Returns
        -------
        Phi : ndarray of shape (n, M), in ``dtype``
        """
        if K.shape[-1] != self.n_centres or K.dtype != self.dtype:
            raise ValueError(f"K must be a {self.dtype.name} array with {self.n_centres} columns")
        if self.whitening == "eigen":
            return K @ self.projection
        if not (K.flags.writeable and K.flags.c_contiguous):
            K = np.array(K, order="C")
        return solve_upper_right(K, self.factor)

    def to_kernel_basis(self, B: np.ndarray) -> np.ndarray:
        """``Wᵀ B`` for B of shape (M, D) or (K, M, D), float64: coefficients on the features as coefficients on
        ``k(·, C)``, ``φ(X) B = k(X, C) Wᵀ B``."""
        return self._by_whitening(B, adjoint=False)

    def from_kernel_basis(self, H: np.ndarray) -> np.ndarray:
        """``W H`` for H of shape (M, D) or (K, M, D), float64: sums against ``k(X, C)`` as sums against the
        features, ``φ(X)ᵀ V = W k(X, C)ᵀ V``."""
        return self._by_whitening(H, adjoint=True)

    def _by_whitening(self, A: np.ndarray, adjoint: bool) -> np.ndarray:
        """``Wᵀ A`` (or ``W A`` when ``adjoint``) in float64: ``R⁻¹ A`` / ``R⁻ᵀ A`` (triangular), ``P A`` / ``Pᵀ A``
        with P the eigen projection."""
        A = np.asarray(A, dtype=np.float64)
        if self.whitening == "triangular":
            return solve_upper(self.factor, A, transpose=adjoint)
        P = self.projection.astype(np.float64)
        return np.matmul(P.T if adjoint else P, A)

    def _check_rows(self, X) -> np.ndarray:
        X = as_2d_points(X, "X")
        if X.shape[1] != self.dim:
            raise ValueError(f"X has {X.shape[1]} columns, but the feature map was built for dim={self.dim}")
        return X

    def _check_out(self, out, n: int) -> np.ndarray:
        if out is None:
            return np.empty((n, self.n_features), dtype=self.dtype)
        if out.shape != (n, self.n_features) or out.dtype != self.dtype or not out.flags.c_contiguous:
            raise ValueError(f"out must be a C-contiguous {self.dtype.name} array of shape {(n, self.n_features)}")
        return out

    def _gram_block(self, X_b: np.ndarray, shifted: np.ndarray, K: np.ndarray) -> None:
        """``k(X_b, C)`` into K, on the rows and centres translated by the centres' mean."""
        A = np.subtract(X_b, self._shift, out=shifted)
        self.kernel.gram_block(A, self._shifted_centres, K, b_sqnorms=self._norms)

    def __call__(self, X: np.ndarray) -> np.ndarray:
        return self.transform(X)


@_register
class RandomOutputFeatures(RandomFourierFeatures):
    """Random Fourier features of the output kernel k_Θ ("double ORFF", thesis 003 §3.3.2; MATH.md §5).

    For Θ of several dimensions, curves on unrelated grids or very large m. MATH.md §5 records that they need
    D_θ in the hundreds to match the exact factor, with a seed-to-seed spread.

    Parameters
    ----------
    kernel_theta : Kernel
    n_features : int
        D_θ, even.
    seed : int or tuple of ints
    dtype : {np.float32, np.float64}, default np.float32
    dim : int, default 1
        Dimension p of Θ.
    """

    kind = "rff_theta"

    def __init__(self, kernel_theta: Kernel, n_features: int, seed: Seed, dtype=np.float32, dim: int = 1):
        super().__init__(kernel_theta, n_features, dim, seed, dtype=dtype)

    def __repr__(self) -> str:
        return (
            f"RandomOutputFeatures({self.kernel!r}, n_features={self.n_features}, dim={self.dim}, "
            f"seed={self.seed!r}, dtype={self.dtype.name})"
        )

    def transform(self, theta: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
        """Features at locations ``theta`` of shape (q,) or (q, p); returns (q, D_θ) in ``dtype``."""
        return super().transform(np.asarray(theta, dtype=np.float64), out=out)

    def derivative(self, theta: np.ndarray) -> np.ndarray:
        """``∂φ_Θ(θ)/∂θ = sqrt(2/D) [−ω sin(ωθ), ω cos(ωθ)]`` at levels θ of shape (q,) (one-dimensional Θ),
        shape (q, D_θ), in ``dtype``."""
        if self.dim != 1:
            raise ValueError("derivatives of the output features need a one-dimensional Θ")
        w = self.W[0].astype(np.float64)
        Z = np.asarray(theta, dtype=np.float64).reshape(-1, 1) * w
        scale = np.sqrt(2.0 / self.n_features)
        return np.ascontiguousarray(scale * np.hstack([-w * np.sin(Z), w * np.cos(Z)]), dtype=self.dtype)


def make_output_features(
    kind: str,
    kernel_theta: Kernel,
    theta_grid: np.ndarray,
    *,
    n_features: int | None = None,
    tol: float = DEFAULT_OUTPUT_RANK_TOL,
    seed: Seed = 0,
    dtype=np.float32,
) -> ExactOutputFactor | RandomOutputFeatures:
    """Build φ_Θ (MATH.md §5).

    Parameters
    ----------
    kind : {"exact", "rff"}
        Exact factor of K_Θ on the grid (default of the library) or random output features.
    kernel_theta : Kernel
    theta_grid : array-like of shape (m,) or (m, p)
        Training grid (its dimension p sets the dimension of random output features).
    n_features : int, optional
        "rff" only: D_θ (even); required.
    tol : float, default :data:`DEFAULT_OUTPUT_RANK_TOL`
        "exact" only: relative eigenvalue threshold.
    seed : int or tuple of ints, default 0
        "rff" only.
    dtype : {np.float32, np.float64}, default np.float32

    Returns
    -------
    ExactOutputFactor or RandomOutputFeatures
    """
    if kind == "exact":
        return ExactOutputFactor(kernel_theta, theta_grid, tol=tol, dtype=dtype)
    if kind == "rff":
        grid = as_2d_points(np.asarray(theta_grid, dtype=np.float64), "theta_grid")
        if n_features is None:
            raise ValueError("random output features need n_features (D_θ)")
        return RandomOutputFeatures(kernel_theta, n_features, seed, dtype=dtype, dim=grid.shape[1])
    raise ValueError(f"output_features must be 'exact' or 'rff', got {kind!r}")
