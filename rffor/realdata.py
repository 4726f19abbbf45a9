"""Real function-to-function data shipped inside PyPI packages (no download at run time).

- :func:`load_gait` — hip-angle curves → knee-angle curves of 39 boys over a gait cycle, 20 points each (Olshen,
  Biden, Wyatt & Sutherland 1989; R's ``fda::gait``, Ramsay & Silverman, *Functional Data Analysis*, ch. 16
  "functional responses"). The data ship in the wheel of ``fdatools`` (``fdatools/_data/gait.npz``, BSD-3-Clause);
  install them with ``pip install "rffor[realdata]"``.

``scikit-fda``'s ``fetch_gait`` downloads the same data from CRAN at run time, which this project avoids.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import Bunch

__all__ = ["load_gait"]


def load_gait() -> Bunch:
    """Hip and knee angles (degrees) of 39 boys through one gait cycle: predict the knee curve from the hip curve.

    Returns
    -------
    data : sklearn.utils.Bunch
        With fields

        - ``X`` : ndarray of shape (39, 20), hip angle curves (the inputs);
        - ``Y`` : ndarray of shape (39, 20), knee angle curves (the outputs);
        - ``theta`` : ndarray of shape (20,), time as a proportion of the gait cycle, 0.025 to 0.975 (the grid of
          both curves);
        - ``subjects`` : list of 39 str, "boy1" … "boy39";
        - ``source`` : str.

    Raises
    ------
    ImportError
        ``fdatools`` is not installed (``pip install "rffor[realdata]"``).

    Examples
    --------
    >>> from rffor.realdata import load_gait  # doctest: +SKIP
    >>> gait = load_gait()                     # doctest: +SKIP
    >>> gait.X.shape, gait.Y.shape             # doctest: +SKIP
    ((39, 20), (39, 20))
    """
    try:
        from fdatools.datasets import load_gait as _load_gait
    except ImportError:
        raise ImportError(
            "the gait data ship in the optional package fdatools: pip install 'rffor[realdata]' "
            "(or pip install fdatools)"
        ) from None
    gait = _load_gait()
    value = np.asarray(gait.value, dtype=np.float64)  # (20 times, 39 boys, [hip, knee])
    if value.shape != (20, 39, 2):  # pragma: no cover - guards against a changed package
        raise ValueError(f"unexpected shape {value.shape} of fdatools' gait data; expected (20, 39, 2)")
    return Bunch(
        X=np.ascontiguousarray(value[:, :, 0].T),
        Y=np.ascontiguousarray(value[:, :, 1].T),
        theta=np.asarray(gait.t, dtype=np.float64),
        subjects=list(gait.subjects),
        source="Olshen et al. (1989), R fda::gait, as shipped in the fdatools wheel",
    )
