"""RFSettings: the one home of the random-feature options (defaults, choices, validation, documentation)."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

import rffor.solvers.routes as routes
from rffor import FunctionalRegressor, QuantileFunctionRegressor
from rffor.estimator import RF_OPTIONS
from rffor.kernels import Gaussian
from rffor.losses import Huber, Square
from rffor.settings import DEFAULTS, Real, RFSettings, _opt, cli_options, option_names, sklearn_constraints
from rffor.solvers.rff import fit_rff


@pytest.mark.parametrize(
    "kwargs, match, exc",
    [
        ({"lam": 0.0}, "lam must be a finite number > 0", ValueError),
        ({"lam": "best"}, r"lam must be one of \['auto'\]", ValueError),
        ({"batch_size": 0}, "batch_size must be an integer >= 1", ValueError),
        ({"n_features_x": 1.5}, "n_features_x must be an integer", ValueError),
        ({"input_features": "fourier"}, "input_features must be one of", ValueError),
        ({"lams": [1e-3]}, "lams must hold at least 2", ValueError),
        ({"loss_params": "auto"}, "needs lam='auto'", ValueError),
        ({"lam": "auto", "rff_method": "sgd"}, "needs rff_method", ValueError),
        ({"lam_nc": 1.0}, "non-crossing penalty", ValueError),
        ({"split_every": 1}, "split_every must be an integer >= 2", ValueError),
        ({"step_decay": 2.0}, "step_decay", ValueError),
    ],
)
def test_bad_options_are_refused_naming_them(kwargs, match, exc):
    with pytest.raises(exc, match=match):
        RFSettings(**kwargs)


def test_every_estimator_parameter_of_an_option_has_its_default_and_constraint():
    for cls in (FunctionalRegressor, QuantileFunctionRegressor):
        params = cls().get_params()
        # the quantile estimator's level_sampling is its own (levels drawn from μ: its fit sets the option)
        for name in set(params) & set(option_names()) - {"lam", "tol", "level_sampling"}:
            assert params[name] == getattr(DEFAULTS, name), (cls.__name__, name)
    assert FunctionalRegressor().get_params()["lam"] == DEFAULTS.lam
    assert set(RF_OPTIONS) <= set(option_names())
    constraints = sklearn_constraints(RF_OPTIONS)
    for k, v in constraints.items():
        assert list(map(str, FunctionalRegressor._parameter_constraints[k])) == list(map(str, v)), k
    for name in RF_OPTIONS:  # the estimator's documentation of an option is the settings'
        assert f"    {name} : " in FunctionalRegressor.__doc__


def test_from_params_maps_the_estimators_parameters():
    est = FunctionalRegressor(n_features_x=64, batch_size=32, max_iter=7, lam="auto", loss_params="auto")
    s = RFSettings.from_params(est.get_params(), max_passes="max_iter")
    assert (s.n_features_x, s.batch_size, s.max_passes, s.lam, s.loss_params) == (64, 32, 7, "auto", "auto")
    assert RFSettings.from_params(FunctionalRegressor().get_params(), max_passes="max_iter") == RFSettings()


def test_command_line_options_parse_and_validate_by_the_settings():
    opts = {o["name"]: o for o in cli_options()}
    assert opts["n_features_x"]["flag"] == "--features-x" and opts["n_features_x"]["type"]("64") == 64
    assert opts["loss_params"]["type"]("auto") == "auto" and opts["loss_params"]["type"]("0.1,0.3") == (0.1, 0.3)
    with pytest.raises(ValueError, match="batch_size"):
        opts["batch_size"]["type"]("0")


def test_resolution_and_routes():
    assert RFSettings().resolved(Huber(0.1)).input_features == "nystrom"
    assert RFSettings().resolved(Huber(0.1)).dtype == "float64"
    assert RFSettings(rff_method="sgd").resolved(Square()).input_features == "rff"
    assert routes.route_for(RFSettings(), Huber(0.1)) == "mm"
    assert routes.route_for(RFSettings(rff_method="mm"), Square()) == "closed_form"
    assert routes.route_for(RFSettings(), Square(), resumed=True) == "mm"
    with pytest.raises(ValueError, match="even"):
        RFSettings(n_features_x=7, input_features="rff").resolved(Square())


def test_a_new_option_is_one_field_and_the_module_that_reads_it(monkeypatch):
    """The shape the redesign promises: an option is a field of the settings (default, allowed values, doc) plus the
    module that uses it. Here a test-only option `shrink` and the closed-form route reading it: validated by the
    settings' own rule, fingerprinted for checkpoints, read where it is used; nothing else changes."""

    @dataclasses.dataclass(frozen=True)
    class Settings(RFSettings):
        shrink: float = _opt(1.0, Real(0, 1), type_doc="float", doc="Multiply the closed form by this factor.")

    fit = routes.ROUTES["closed_form"]

    def shrunk(run, problem, start, log):  # the one module that reads it
        result = fit(run, problem, start, log)
        result.coef = (result.coef * problem.settings.shrink).astype(result.coef.dtype)
        return result

    monkeypatch.setitem(routes.ROUTES, "closed_form", shrunk)
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((200, 3)), rng.standard_normal((200, 5))
    kw = dict(kernel_x=Gaussian(0.5), kernel_theta=Gaussian(10.0), n_features_x=20, random_state=0)
    full = fit_rff((X, Y), settings=Settings(), **kw).coef
    half = fit_rff((X, Y), settings=Settings(shrink=0.5), **kw).coef
    np.testing.assert_array_equal(half, (full * 0.5).astype(full.dtype))
    with pytest.raises(ValueError, match="shrink must be a finite number >= 0 and <= 1"):
        Settings(shrink=2.0)
    assert Settings(shrink=0.5).fingerprint()["shrink"] == 0.5
    assert "shrink" in inspect.signature(Settings).parameters
