"""The ``rffor`` command: every subcommand end to end in a subprocess, usage errors, one-line failures."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rffor import data as rdata
from rffor import load
from rffor.cli import main, parse_outliers
from rffor.metrics import mse

COMMANDS = ["demo", "make-data", "fit", "predict", "evaluate", "info"]


def run(*args, cwd=None, timeout=240, env=None):
    """Run ``python -m rffor ARGS`` in a subprocess (the console script is the same ``main``)."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", MPLBACKEND="Agg", **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "rffor", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )


def assert_one_line_error(proc, code, *fragments):
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    err = proc.stderr.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err, err


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """Small train/test stores and two fitted models, made through the command line."""
    d = tmp_path_factory.mktemp("cli")
    proc = run(
        "make-data", d / "train.zarr", "--n", 60, "--m", 12, "--d", 8, "--noise", 0.05, "--outliers", "2:0.1",
        "--chunks", 16, "--seed", 1, "--test-out", d / "test.zarr", "--n-test", 25,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for loss, extra in [("square", []), ("huber2", ["--kappa", "0.2"])]:
        proc = run("fit", d / "train.zarr", "--loss", loss, *extra, "--lam", "1e-3", "--kernel-x", "gaussian:0.1",
                   "--out", d / f"{loss}.rffor")  # fmt: skip
        assert proc.returncode == 0, proc.stderr
    return d


# ---------------------------------------------------------------------------------------------------------------
# help and usage errors
# ---------------------------------------------------------------------------------------------------------------


def test_help_for_every_command(capsys):
    proc = run("--help")  # one real process; the rest in process, where they are much faster
    assert proc.returncode == 0
    for command in COMMANDS:
        assert command in proc.stdout
    for command in COMMANDS:
        with pytest.raises(SystemExit) as exc:
            main([command, "--help"])
        assert exc.value.code == 0
        assert f"usage: rffor {command}" in capsys.readouterr().out


def test_version_and_console_script():
    proc = run("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("rffor ")
    script = Path(sys.executable).with_name("rffor")
    if not script.exists():
        pytest.skip("the rffor console script is not installed next to this interpreter")
    proc = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("rffor ")


def test_no_command_is_a_usage_error():
    proc = run()
    assert proc.returncode == 2
    assert "usage: rffor" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "argv,fragment",
    [
        (["fit", "d.zarr", "--loss", "huber2"], "needs --kappa"),
        (["fit", "d.zarr", "--loss", "eps2"], "needs --epsilon"),
        (["fit", "d.zarr", "--loss", "square", "--kappa", "0.1"], "--kappa is for huber1, huber2, pinball, welsch"),
        (["fit", "d.zarr", "--loss", "welsch"], "needs --kappa"),
        (["fit", "d.zarr", "--loss", "welsch", "--kappa", "0.1", "--solver", "admm"], "not convex (no dual)"),
        (["fit", "d.zarr", "--loss", "huber1", "--kappa", "0.1", "--epsilon", "0.1"], "--epsilon is for"),
        (["fit", "d.zarr", "--solver", "admm", "--scheduler", "tcp://127.0.0.1:1"], "only apply to --solver rff"),
        (["fit", "d.zarr", "--solver", "apgd", "--precondition", "10"], "only apply to --solver rff"),
        (["fit", "d.zarr", "--solver", "apgd", "--reweight", "2"], "only apply to --solver rff"),
        (["fit", "d.zarr", "--features-x", "7", "--input-features", "rff"], "n_features_x must be even"),
        (["fit", "d.zarr", "--method", "closed_form", "--loss", "huber2", "--kappa", "0.1"], "square loss only"),
    ],
)
def test_usage_errors_after_parsing(tmp_path, capsys, monkeypatch, argv, fragment):
    rdata.write(tmp_path / "d.zarr", np.zeros((4, 2)), np.zeros((4, 3)))
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and fragment in err and err.startswith("rffor fit: usage error")


@pytest.mark.parametrize(
    "argv",
    [
        ["fit", "d.zarr", "--loss", "cubic"],
        ["fit", "d.zarr", "--lam", "-1"],
        ["fit", "d.zarr", "--lam", "nan"],
        ["fit", "d.zarr", "--kernel-x", "gaussian"],
        ["fit", "d.zarr", "--kernel-x", "spline:3"],
        ["fit", "d.zarr", "--features-x", "1"],
        ["fit", "d.zarr", "--method", "newton"],
        ["fit", "d.zarr", "--batch-size", "0"],
        ["make-data", "o.zarr", "--outliers", "4:0.1"],
        ["make-data", "o.zarr", "--outliers", "2:1.5"],
        ["make-data", "o.zarr", "--outliers", "1:0.1:3"],
        ["make-data", "o.zarr", "--n", "0"],
        ["demo", "--n", "abc"],
        ["predict", "model.rffor", "d.zarr"],  # --out is required
        ["evaluate", "model.rffor"],
        ["info"],
        ["frobnicate"],
    ],
)
def test_argparse_usage_errors(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "usage:" in err and "error:" in err


def test_parse_outliers():
    assert parse_outliers("none") is None
    assert parse_outliers("1:0.2") == {"kind": 1, "tau": 0.2}
    assert parse_outliers("2:0.1:3") == {"kind": 2, "tau": 0.1, "zeta": 3.0}
    assert parse_outliers("type3:0.2:0.4") == {"kind": 3, "tau": 0.2, "xi": 0.4}


# ---------------------------------------------------------------------------------------------------------------
# the pipeline: make-data -> fit -> predict -> evaluate -> info
# ---------------------------------------------------------------------------------------------------------------


def test_make_data_writes_train_and_clean_test(workdir):
    train, test = rdata.open(workdir / "train.zarr"), rdata.open(workdir / "test.zarr")
    assert (train.n, train.d, train.m, train.chunk_rows) == (60, 8, 12, 16)
    assert (test.n, test.d, test.m) == (25, 8, 12)
    np.testing.assert_array_equal(train.theta, np.linspace(0, 1, 12))


def test_make_data_refuses_to_overwrite(workdir):
    proc = run("make-data", workdir / "train.zarr", "--n", 10)
    assert_one_line_error(proc, 1, "already exists", "overwrite")


def test_fit_saves_a_model_matching_the_library(workdir):
    from rffor import FunctionalRegressor
    from rffor.kernels import Gaussian
    from rffor.losses import Huber

    model = load(workdir / "huber2.rffor")
    assert model.solver_ == "admm" and model.loss_ == Huber(kappa=0.2, p=2) and model.lam == 1e-3
    X, Y = rdata.open(workdir / "train.zarr").read()
    ref = FunctionalRegressor(Huber(0.2, p=2), lam=1e-3, kernel_x=Gaussian(0.1), random_state=0)
    ref.fit(np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64))
    X_test, _ = rdata.open(workdir / "test.zarr").read()
    np.testing.assert_allclose(model.predict(X_test), ref.predict(X_test), rtol=1e-10, atol=1e-12)


def test_fit_other_losses_and_solvers(workdir):
    proc = run("fit", workdir / "train.zarr", "--loss", "epsinf", "--epsilon", "0.05", "--solver", "apgd",
               "--kernel-theta", "laplacian:3", "--tol", "1e-4", "--out", workdir / "eps.rffor", "-v")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "saved the model to" in proc.stdout
    model = load(workdir / "eps.rffor")
    assert model.solver_ == "apgd" and model.kernel_theta_.name == "laplacian"


def test_fit_random_features_out_of_core(workdir):
    args = ["fit", workdir / "train.zarr", "--solver", "rff", "--loss", "huber2", "--kappa", "0.2",
            "--features-x", "40", "--method", "sgd", "--epochs", "2", "--batch-size", "8", "--seed", "3",
            "--precondition", "8", "--reweight", "3"]  # fmt: skip
    proc = run(*args, "--checkpoint", workdir / "fit.ckpt", "--out", workdir / "rff.rffor")
    assert proc.returncode == 0, proc.stderr
    model = load(workdir / "rff.rffor")
    assert model.solver_ == "rff" and model.coef_.shape[0] == 40 and model.random_state_ == 3
    assert model.precondition_rank == 8 and model.init_reweight == 3
    assert (workdir / "fit.ckpt").exists()
    # resuming a finished fit from its checkpoint gives the same model
    proc = run(*args, "--checkpoint", workdir / "fit.ckpt", "--resume", "--out", workdir / "rff2.rffor")
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(load(workdir / "rff2.rffor").coef_, model.coef_)
    proc = run("evaluate", workdir / "rff.rffor", workdir / "test.zarr", "--json")
    # measured 0.38; a model predicting zeros scores R² = −0.02 on these test curves
    assert proc.returncode == 0 and json.loads(proc.stdout)["r2"] > 0.25
    proc = run("info", workdir / "rff.rffor")
    assert proc.returncode == 0 and "solver rff" in proc.stdout


#: ``rffor fit`` in a process that kills itself (SIGKILL: no clean-up, as a crash or an OOM kill) right after writing
#: the checkpoint of pass/round number RFFOR_TEST_DIE_AFTER (0-based)
_KILLED_AFTER_CHECKPOINT = """
import os, signal, sys
import rffor.checkpoint as ckpt
from rffor.cli import main

save = ckpt.save

def save_then_die(path, state, r, history, info):
    save(path, state, r, history, info)
    if r == int(os.environ["RFFOR_TEST_DIE_AFTER"]):
        os.kill(os.getpid(), signal.SIGKILL)

ckpt.save = save_then_die
sys.exit(main(sys.argv[1:]))
"""


def test_fit_resumes_a_killed_fit_to_the_uninterrupted_model(tmp_path):
    """A fit killed after 3 of its 8 MM passes resumes with --resume from its checkpoint to the model of an
    uninterrupted fit, bit for bit (coefficients, passes, objective history)."""
    import signal

    from rffor import checkpoint

    # one chunk: the fit runs in the command's own process (no Dask cluster left behind by the kill)
    data = tmp_path / "one_chunk.zarr"
    proc = run("make-data", data, "--n", 60, "--m", 12, "--d", 8, "--noise", 0.05, "--outliers", "2:0.1",
               "--chunks", 60, "--seed", 2)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    args = ["fit", data, "--solver", "rff", "--loss", "huber2", "--kappa", "0.2", "--features-x", "40",
            "--seed", "3", "--tol", "0", "--max-iter", "8"]  # fmt: skip
    proc = run(*args, "--out", tmp_path / "full.rffor")
    assert proc.returncode == 0, proc.stderr
    full = load(tmp_path / "full.rffor")
    assert full.rff_method_ == "mm" and full.n_iter_ == 8

    ckpt = tmp_path / "fit.ckpt"
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", RFFOR_TEST_DIE_AFTER="2")
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_AFTER_CHECKPOINT, *map(str, args), "--checkpoint", str(ckpt),
         "--out", str(tmp_path / "never.rffor")],
        capture_output=True, text=True, env=env, timeout=240,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr)
    assert not (tmp_path / "never.rffor").exists()
    assert checkpoint.load(ckpt).round == 2  # an unfinished fit: 3 of 8 passes

    proc = run(*args, "--checkpoint", ckpt, "--resume", "--out", tmp_path / "resumed.rffor", "-v")
    assert proc.returncode == 0, proc.stderr
    assert "after pass 3" in proc.stdout + proc.stderr
    resumed = load(tmp_path / "resumed.rffor")
    np.testing.assert_array_equal(resumed.coef_, full.coef_)
    assert resumed.n_iter_ == full.n_iter_
    np.testing.assert_array_equal(resumed.objective_history_, full.objective_history_)


def test_fit_unreachable_scheduler(workdir):
    env_timeout = {"DASK_RFFOR__CONNECT_TIMEOUT": "1s"}
    proc = run("fit", workdir / "train.zarr", "--scheduler", "tcp://127.0.0.1:9", "--out", workdir / "x.rffor",
               env=env_timeout)  # fmt: skip
    assert_one_line_error(proc, 1, "could not connect to the Dask scheduler")
    assert not (workdir / "x.rffor").exists()


def test_predict_chunk_by_chunk(workdir):
    out = workdir / "pred.zarr"
    proc = run("predict", workdir / "huber2.rffor", workdir / "test.zarr", "--out", out)
    assert proc.returncode == 0, proc.stderr
    pred = rdata.open(out)
    test = rdata.open(workdir / "test.zarr")
    assert (pred.n, pred.m, pred.chunk_rows) == (test.n, test.m, test.chunk_rows)
    X_pred, Y_pred = pred.read()
    X_test, _ = test.read()
    np.testing.assert_array_equal(X_pred, X_test)
    expected = load(workdir / "huber2.rffor").predict(X_test).astype(np.float32)
    np.testing.assert_allclose(Y_pred, expected, rtol=1e-6, atol=1e-6)
    # an existing store is kept unless --overwrite
    proc = run("predict", workdir / "huber2.rffor", workdir / "test.zarr", "--out", out)
    assert_one_line_error(proc, 1, "already exists")
    proc = run("predict", workdir / "huber2.rffor", workdir / "test.zarr", "--out", out, "--overwrite", "-q")
    assert proc.returncode == 0 and proc.stdout == ""


def test_evaluate_matches_the_library(workdir):
    proc = run("evaluate", workdir / "huber2.rffor", workdir / "test.zarr", "--json")
    assert proc.returncode == 0, proc.stderr
    scores = json.loads(proc.stdout)
    model = load(workdir / "huber2.rffor")
    X, Y = rdata.open(workdir / "test.zarr").read()
    X, Y = np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64)
    assert scores["n"] == 25 and scores["m"] == 12 and scores["observed"] == 300
    assert scores["mse"] == pytest.approx(mse(Y, model.predict(X)), rel=1e-9)
    assert scores["nmse"] == pytest.approx(scores["mse"] / 12, rel=1e-12)
    assert scores["r2"] == pytest.approx(model.score(X, Y), rel=1e-9)
    proc = run("evaluate", workdir / "square.rffor", workdir / "test.zarr")
    assert proc.returncode == 0 and "MSE" in proc.stdout and "R2" in proc.stdout


def test_evaluate_with_missing_values_and_another_grid(tmp_path, workdir):
    model = load(workdir / "square.rffor")
    X, Y = rdata.open(workdir / "test.zarr").read()
    X, Y = np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64)
    Y[0, :5] = np.nan
    Y[3, 7] = np.nan
    theta = np.linspace(0.05, 0.95, 12)
    rdata.write(tmp_path / "t.zarr", X, Y, theta, chunks=7, dtype="float64")
    from rffor.cli import evaluate_model

    scores = evaluate_model(model, rdata.open(tmp_path / "t.zarr"))
    P = model.predict(X, theta=theta)
    assert scores["observed"] == 300 - 6
    assert scores["mse"] == pytest.approx(mse(Y, P), rel=1e-9)
    # R² per location over observed entries, as FunctionalRegressor.score computes it
    mask = ~np.isnan(Y)
    r2 = []
    for j in range(12):
        y, p = Y[mask[:, j], j], P[mask[:, j], j]
        r2.append(1 - np.sum((y - p) ** 2) / np.sum((y - y.mean()) ** 2))
    assert scores["r2"] == pytest.approx(np.mean(r2), rel=1e-9)


def test_info_on_model_and_dataset(workdir):
    proc = run("info", workdir / "huber2.rffor")
    assert proc.returncode == 0, proc.stderr
    assert "rffor model" in proc.stdout and "huber2 (κ=0.2)" in proc.stdout and "60 training curves" in proc.stdout
    proc = run("info", workdir / "train.zarr", "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["kind"] == "dataset" and (info["n"], info["d"], info["m"], info["n_chunks"]) == (60, 8, 12, 4)
    proc = run("info", workdir / "square.rffor", "--json")
    info = json.loads(proc.stdout)
    assert info["kind"] == "model" and info["solver"] == "admm" and info["n_train"] == 60 and info["m"] == 12


# ---------------------------------------------------------------------------------------------------------------
# failures are one line (a traceback only with --debug)
# ---------------------------------------------------------------------------------------------------------------


def test_missing_files(tmp_path, workdir, capsys):
    assert_one_line_error(run("fit", tmp_path / "nope.zarr"), 1, "no dataset at")
    for argv, fragment in [
        (["evaluate", str(tmp_path / "nope.rffor"), str(workdir / "test.zarr")], "no model at"),
        (["info", str(tmp_path / "nope")], "nothing at"),
        (["predict", str(workdir / "square.rffor"), str(tmp_path / "nope.zarr"), "--out", str(tmp_path / "p")],
         "no dataset at"),
    ]:  # fmt: skip
        assert main(argv) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and fragment in err, err


def test_foreign_and_corrupted_model_files(tmp_path, workdir):
    bad = tmp_path / "bad.rffor"
    bad.write_bytes(b"#!/bin/sh\nrm -rf /\n")
    assert_one_line_error(run("info", bad), 1, "not an rffor model")
    assert_one_line_error(run("predict", bad, workdir / "test.zarr", "--out", tmp_path / "p.zarr"), 1, "not an rffor")
    raw = (workdir / "square.rffor").read_bytes()
    bad.write_bytes(raw[: len(raw) // 2])
    assert_one_line_error(run("evaluate", bad, workdir / "test.zarr"), 1, "bad.rffor")
    assert not (tmp_path / "p.zarr").exists()


def test_dimension_mismatch(tmp_path, workdir):
    rdata.write(tmp_path / "other.zarr", np.zeros((5, 3)), np.zeros((5, 12)))
    proc = run("evaluate", workdir / "square.rffor", tmp_path / "other.zarr")
    assert_one_line_error(proc, 1, "dimension 3", "dimension 8")


def test_malformed_dataset(tmp_path):
    (tmp_path / "broken.zarr").mkdir()
    (tmp_path / "broken.zarr" / "zarr.json").write_text("{not json")
    proc = run("fit", tmp_path / "broken.zarr")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_debug_shows_the_traceback(tmp_path):
    proc = run("--debug", "info", tmp_path / "nope")
    assert proc.returncode == 1 and "Traceback" in proc.stderr
    with pytest.raises(FileNotFoundError):
        main(["info", str(tmp_path / "nope"), "--debug"])


# ---------------------------------------------------------------------------------------------------------------
# demo
# ---------------------------------------------------------------------------------------------------------------


def test_demo_quick(tmp_path):
    out = tmp_path / "demo-out"
    proc = run("demo", "--quick", "--out", out, timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "test MSE" in text and "square" in text and "huber2" in text
    # the table's point: on clean test curves the Huber model trained with 20% outliers beats the square one by
    # far, and approaches the square loss trained without them
    rows = [re.split(r"\s{2,}", line.strip()) for line in text.splitlines() if line.startswith(("square", "huber2"))]
    nmse = {row[0]: float(row[3]) for row in rows}  # columns: model, κ, test MSE, NMSE, ...
    kappa = next(float(row[1]) for row in rows if row[0] == "huber2")  # chosen on held-out curves from 0.15
    assert load(out / "huber2.rffor").loss_.kappa == pytest.approx(kappa, rel=1e-2)
    for row in rows:  # γ of k_Θ, chosen on held-out curves from 100 (column 7)
        if row[0] in ("square", "huber2"):
            assert load(out / f"{row[0]}.rffor").kernel_theta_.gamma == pytest.approx(float(row[6]), rel=1e-2)
    huber = next(v for k, v in nmse.items() if k.startswith("huber2"))
    assert huber < 0.3 * nmse["square"], nmse
    assert huber < 10 * nmse["square, no outliers"], nmse
    for name in ("curves.png", "training.png", "data.png", "square.rffor", "huber2.rffor"):
        assert (out / name).exists(), name
        assert (out / name).stat().st_size > 1000
    assert str(out) in text
    # the temporary Zarr store is gone; the saved models load
    assert load(out / "huber2.rffor").predict(np.zeros((1, 100))).shape == (1, 20)
    assert not any(p.name.endswith(".zarr") for p in out.iterdir())


def test_demo_rejects_bad_values():
    proc = run("demo", "--outliers", "5:0.1")
    assert proc.returncode == 2 and "outlier TYPE" in proc.stderr


def test_fit_features_auto_within_the_cap(workdir, tmp_path):
    """``--features-x auto --max-features-x 30``: the saved model keeps "auto" as its parameter and has the number
    the rule gives for the store's 60 curves (the cap: the √n rule's floor of 100 exceeds it)."""
    out = tmp_path / "auto_m.rffor"
    proc = run("fit", workdir / "train.zarr", "--solver", "rff", "--input-features", "nystrom", "--features-x", "auto",
               "--max-features-x", "30", "--lam", "1e-3", "--out", out)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    model = load(out)
    assert model.get_params()["n_features_x"] == "auto" and model.max_features_x == 30 and model.n_features_x_ == 30


def test_fit_chooses_lambda_and_kappa_on_held_out_curves(workdir, tmp_path):
    """``--lam auto --loss-params auto``: the command fits what FunctionalRegressor(lam="auto",
    loss_params="auto") fits (same κ, λ and coefficients), says what it chose, and info shows the chosen λ."""
    from rffor import FunctionalRegressor
    from rffor import data as data_mod
    from rffor.losses import Huber

    out = tmp_path / "auto.rffor"
    args = [
        "fit",
        workdir / "train.zarr",
        "--solver",
        "rff",
        "--loss",
        "huber2",
        "--kappa",
        "0.1",
        "--lam",
        "auto",
        "--loss-params",
        "auto",
        "--kernel-theta-params",
        "auto",
        "--input-features",
        "nystrom",
        "--features-x",
        "40",
        "--seed",
        "3",
        "--out",
        out,
    ]
    proc = run(*args)
    assert proc.returncode == 0, proc.stderr
    model = load(out)
    ds = data_mod.open(workdir / "train.zarr")
    ref = FunctionalRegressor(Huber(0.1, 2), solver="rff", lam="auto", loss_params="auto",
                              kernel_theta_params="auto", input_features="nystrom", n_features_x=40,
                              random_state=3).fit(ds)  # fmt: skip
    assert model.lam_ == ref.lam_ and model.loss_ == ref.loss_ and model.kernel_theta_ == ref.kernel_theta_
    assert len(set(ref.lam_path_["gammas_theta"])) > 1  # γ_Θ was walked
    np.testing.assert_array_equal(model.coef_, ref.coef_)
    np.testing.assert_array_equal(model.predict(ds.read()[0]), ref.predict(ds.read()[0]))
    said = proc.stdout + proc.stderr
    assert f"λ = {ref.lam_:.3g}" in said and f"k_Θ = {ref.kernel_theta_!r}" in said
    info = run("info", out)
    assert info.returncode == 0 and f"λ = {ref.lam_:g}" in info.stdout and f"{ref.kernel_theta_!r}" in info.stdout
    bad = run("fit", workdir / "train.zarr", "--loss", "huber2", "--kappa", "0.1", "--loss-params", "auto")
    assert bad.returncode == 2 and "--lam auto" in bad.stderr
    bad = run("fit", workdir / "train.zarr", "--kernel-theta-params", "auto")
    assert bad.returncode == 2 and "--kernel-theta-params auto needs --lam auto" in bad.stderr
