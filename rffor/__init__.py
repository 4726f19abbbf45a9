"""rffor: robust function-valued regression in vector-valued RKHSs, exact and at scale."""

from ._version import __version__
from .estimator import FunctionalRegressor, load  # noqa: E402
from .model_selection import FunctionalRegressorCV, OutputKernelRegressorCV  # noqa: E402
from .quantile import QuantileFunctionRegressor  # noqa: E402
from .structured import OutputKernelRegressor  # noqa: E402
from .welsch import Welsch  # noqa: E402  (registers the "welsch" loss spec)

__all__ = [
    "FunctionalRegressor",
    "FunctionalRegressorCV",
    "OutputKernelRegressor",
    "OutputKernelRegressorCV",
    "QuantileFunctionRegressor",
    "Welsch",
    "load",
    "__version__",
]
