"""The package's version, in a module of its own so that lower layers (model files record it) need not import the
package's face, which imports the estimators."""

__version__ = "0.1.0"
