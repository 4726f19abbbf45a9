"""The published documents hold no placeholder: a number still to be measured is written ⟨NAME⟩ while its run goes,
and a document with one left is not finished (the midmean branch merges when none is)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("doc", ["README.md", "benchmarks/README.md"])
def test_no_placeholder_is_left(doc):
    lines = [(i + 1, line) for i, line in enumerate((ROOT / doc).read_text(encoding="utf-8").splitlines())]
    left = [(i, line[line.index("⟨") : line.index("⟨") + 40]) for i, line in lines if "⟨" in line]
    assert not left, f"{doc} still has placeholders: {left}"
