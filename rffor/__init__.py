"""rffor: robust function-valued regression in vector-valued RKHSs, exact and at scale."""

__version__ = "0.1.0"

from .estimator import FunctionalRegressor, load  # noqa: E402
from .model_selection import FunctionalRegressorCV  # noqa: E402
from .quantile import QuantileFunctionRegressor  # noqa: E402

__all__ = ["FunctionalRegressor", "FunctionalRegressorCV", "QuantileFunctionRegressor", "load", "__version__"]
