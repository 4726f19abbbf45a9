"""Real data shipped in a PyPI package (rffor.realdata) and the example that uses it."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fdatools")

from rffor.realdata import load_gait  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "gait_outliers.py"


def test_load_gait():
    gait = load_gait()
    assert gait.X.shape == (39, 20) and gait.Y.shape == (39, 20) and gait.theta.shape == (20,)
    np.testing.assert_allclose(gait.theta, np.linspace(0.025, 0.975, 20))
    # R's fda::gait, boy 1: hip angle 37°, knee angle 10° at the first time
    assert gait.X[0, 0] == 37.0 and gait.Y[0, 0] == 10.0
    assert gait.subjects[0] == "boy1" and len(gait.subjects) == 39


@pytest.mark.skipif(not EXAMPLE.exists(), reason="examples/ is not next to the tests")
def test_gait_example_runs(capsys):
    module = runpy.run_path(str(EXAMPLE))
    module["main"](["--splits", "1"])
    out = capsys.readouterr().out
    assert "huber2" in out and "type 2" in out
