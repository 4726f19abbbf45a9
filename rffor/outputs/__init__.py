"""Kinds of output (:mod:`rffor.outputs.base`): curves on a grid, quantile levels, explicit embeddings, by name."""

from __future__ import annotations

from .base import OutputMap, OutputSpace, output_gram
from .curves import CurveGrid
from .embedding import EmbeddingSpace
from .levels import QuantileLevels

__all__ = ["OutputSpace", "OutputMap", "output_gram", "CurveGrid", "QuantileLevels", "EmbeddingSpace", "OUTPUT_SPACES"]

#: output spaces by their ``kind``
OUTPUT_SPACES: dict[str, type[OutputSpace]] = {cls.kind: cls for cls in (CurveGrid, QuantileLevels, EmbeddingSpace)}
