"""``icl-cmr compare`` and cmr.compare_recall_models: CMR variants fitted to the same subjects and compared."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import cmr
from cmr import errors
from cmr.textbook.compare import paired_matrix, win_share_matrix, winner_ratio
from icl_cmr.analyses.cli import main

WORDS = np.array(["Apple", "bird", "Cat", "dog", "eel", "fox"])
FAST = {"maxiter": 2, "popsize": 4}  # two generations: seconds, not a converged fit
FAST_OPTIONS = ["--maxiter", "2", "--popsize", "4", "--restarts", "1", "--no-progress"]


def _table() -> pd.DataFrame:
    """Four subjects x four lists of six words simulated by textbook CMR; two words capitalised."""
    table = cmr.simulate_free_recall(cmr.default_parameters(), 6, 4, subjects=["01", "02", "03", "04"], rng=3)
    table["item"] = WORDS[table["item"].astype(int).to_numpy() - 1]
    return table


def _pool(items=WORDS) -> cmr.ItemPatterns:
    vectors = np.random.default_rng(0).normal(size=(len(items), 4))
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return cmr.item_patterns(np.asarray(items), unit @ unit.T)


@pytest.fixture(scope="module")
def compared():
    events = cmr.from_table(_table())
    return cmr.compare_recall_models(events, models=["textbook", "semantic", "cmr2"], patterns=_pool(), n_restarts=1,
                                     de_options=FAST)


@pytest.fixture
def files(tmp_path):
    data, vectors = tmp_path / "data.csv", tmp_path / "vectors.txt"
    _table().to_csv(data, index=False)
    rows = np.random.default_rng(0).normal(size=(len(WORDS), 4))
    vectors.write_text("".join(f"{w.lower()} {' '.join(map(repr, r.tolist()))}\n" for w, r in zip(WORDS, rows)))
    return data, vectors


def test_the_comparison_has_every_table(compared):
    comparison, fits, cvs = compared
    assert cvs is None and list(fits) == ["textbook", "semantic", "cmr2"]
    cmr.validate(comparison, "model_comparison")
    models = ["textbook", "semantic", "cmr2"]
    assert comparison["model"].values.tolist() == models == comparison["comparison"].values.tolist()
    assert comparison["subject"].values.tolist() == ["01", "02", "03", "04"]
    for name in ("logl", "aic", "bic", "subject_akaike_weight", "nested_gain", "fits_worse_than_nested"):
        assert comparison[name].dims == ("model", "subject"), name
    for name in ("p_versus", "difference_versus", "win_share_versus"):
        assert comparison[name].dims == ("model", "comparison"), name
    assert comparison["k"].values.tolist() == [10, 12, 12]
    np.testing.assert_array_equal(comparison["logl"].sel(model="cmr2").values, fits["cmr2"]["logl"].values)
    # the free parameters of each model, NaN where a model has no such parameter
    values = comparison["parameter_value"]
    assert np.isnan(values.sel(model="textbook", parameter="Scf")).all()
    assert np.isfinite(values.sel(model="semantic", parameter="Scf")).all()
    assert np.isfinite(values.sel(model="cmr2", parameter="C_thresh")).all()
    assert comparison["nested_model"].values.tolist() == ["", "textbook", ""]


def test_weights_and_winner_ratios_sum_to_one(compared):
    comparison, _, _ = compared
    assert float(comparison["akaike_weight"].sum()) == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(comparison["subject_akaike_weight"].sum("model").values, 1.0, atol=1e-12)
    for criterion in ("logl", "aic", "bic"):
        assert float(comparison[f"winner_ratio_{criterion}"].sum()) == pytest.approx(1.0, abs=1e-12), criterion
    # the AIC winner ratio is the share of subjects whose smallest AIC is the model's
    best = comparison["aic"].argmin("model").values
    np.testing.assert_allclose(comparison["winner_ratio_aic"].values, np.bincount(best, minlength=3) / 4)


def test_the_p_matrix_is_symmetric_and_is_scipys_test(compared):
    comparison, _, _ = compared
    p = comparison["p_versus"].values
    assert np.isnan(np.diag(p)).all()
    np.testing.assert_array_equal(p, p.T)
    score = -comparison["aic"].values / 2  # the criterion without --cv
    assert comparison.attrs["criterion"] == "aic"
    diff = score[0] - score[2]
    assert p[0, 2] == pytest.approx(stats.wilcoxon(diff[diff != 0]).pvalue)
    _, p_t = paired_matrix(score, "t")
    assert p_t[1, 2] == pytest.approx(stats.ttest_rel(score[1], score[2]).pvalue)
    share = comparison["win_share_versus"].values
    np.testing.assert_allclose(share + share.T, np.where(np.eye(3, dtype=bool), np.nan, 1.0))


def test_winner_shares_split_ties():
    score = np.array([[1.0, 2.0, np.nan], [1.0, 0.0, 3.0]])
    np.testing.assert_allclose(winner_ratio(score), [0.5, 0.5])  # subject 1 shared, NaN loses
    np.testing.assert_allclose(win_share_matrix(score)[0, 1], (0.5 + 1 + 0) / 3)


def test_a_nesting_model_that_fits_worse_is_flagged(compared):
    _, fits, _ = compared
    textbook = fits["textbook"]
    shortfall = np.array([1.0, 0.0, 0.005, -2.0])  # 0.005 is within the tolerance, -2 is a gain
    semantic = fits["semantic"].assign(logl=textbook["logl"] - shortfall)
    comparison = cmr.compare_models({"textbook": textbook, "semantic": semantic}, nested={"semantic": "textbook"})
    assert comparison["fits_worse_than_nested"].sel(model="semantic").values.tolist() == [True, False, False, False]
    np.testing.assert_allclose(comparison["nested_gain"].sel(model="semantic").values, -shortfall)
    assert not comparison["fits_worse_than_nested"].sel(model="textbook").any()
    with pytest.raises(errors.ParameterError, match="nested must map a compared model"):
        cmr.compare_models({"textbook": textbook, "semantic": semantic}, nested={"semantic": "cmr2"})


def test_converged_is_carried_only_when_every_fit_has_it(compared):
    _, fits, _ = compared
    bare = {m: fits[m].drop_vars("converged", errors="ignore") for m in ("textbook", "semantic")}
    assert "converged" not in cmr.compare_models(bare)
    flags = {"textbook": [True, True, False, True], "semantic": [True, False, True, True]}
    marked = {m: bare[m].assign(converged=("subject", np.array(f))) for m, f in flags.items()}
    comparison = cmr.compare_models(marked)
    assert comparison["converged"].dims == ("model", "subject")
    assert comparison["converged"].values.tolist() == list(flags.values())
    assert "converged" not in cmr.compare_models({"textbook": marked["textbook"], "semantic": bare["semantic"]})


def test_cross_validated_comparison(tmp_path):
    events = cmr.from_table(_table())
    comparison, _, cvs = cmr.compare_recall_models(events, models="textbook,semantic", patterns=_pool(), n_folds=2,
                                                   test="t", n_restarts=1, de_options=FAST)
    assert set(cvs) == {"textbook", "semantic"} and comparison.attrs["criterion"] == "cv_logl"
    assert float(comparison["winner_ratio_cv_logl"].sum()) == pytest.approx(1.0)
    cv = comparison["cv_logl"].values
    assert comparison["p_versus"].values[0, 1] == pytest.approx(stats.ttest_rel(cv[0], cv[1]).pvalue)
    back = cmr.load_dataset(cmr.save_dataset(comparison, tmp_path / "c.nc"), kind="model_comparison")
    assert back.identical(comparison)


def test_the_command_writes_a_table_and_prints_a_summary(files, tmp_path, capsys):
    data, vectors = files
    out = tmp_path / "comparison.csv"
    assert main(["compare", str(data), "--models", "textbook,semantic", "--vectors", str(vectors),
                 "--normalize-items", "--subjects", "01,02,03", *FAST_OPTIONS, "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "paired p over subjects (two-sided Wilcoxon signed-rank test" in printed
    assert "free parameters, mean [95% interval" in printed and "nest" in printed
    table = pd.read_csv(out, dtype={"subject": str})
    assert len(table) == 6 and set(table["subject"]) == {"01", "02", "03"}
    for column in ("logl", "aic", "bic", "akaike_weight", "winner_ratio_aic", "p_versus_semantic",
                   "win_share_versus_textbook", "fits_worse_than_nested", "parameter_Sff"):
        assert column in table.columns, column


def test_unknown_models_are_one_typed_line(files, tmp_path, capsys):
    data, _ = files
    out = tmp_path / "c.nc"
    assert main(["compare", str(data), "--models", "textbook,hopfield", "-o", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("icl-cmr compare: error: --models takes two or more of textbook, ")
    assert "'hopfield'" in err[0] and not out.exists()
    with pytest.raises(errors.ParameterError, match="unknown model 'hopfield'; known models: textbook"):
        cmr.comparison_spec("hopfield")
    assert main(["compare", str(data), "--models", "textbook,cmr2", "--cv", "2", "-o", str(out)]) == 1
    assert "--cv cross-validates the textbook variants only" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--vectors", "--similarity"])
def test_a_case_mismatch_of_the_item_file_names_the_items(files, tmp_path, capsys, option):
    data, vectors = files
    pool = tmp_path / "similarity.npz"
    np.savez(pool, items=np.char.lower(WORDS), similarity=_pool().similarity)
    given = vectors if option == "--vectors" else pool
    assert main(["compare", str(data), "--models", "textbook,semantic", option, str(given),
                 *FAST_OPTIONS, "-o", str(tmp_path / "c.nc")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"differ from the items of {option}" in err[0] and "only in case" in err[0]
    assert "'Apple' (pool: 'apple')" in err[0] and "'Cat' (pool: 'cat')" in err[0] and "--normalize-items" in err[0]
    assert not (tmp_path / "c.nc").exists()
    # under --normalize-items the same file gives the pool, renamed to the studied spelling
    assert main(["compare", str(data), "--models", "textbook,semantic", option, str(given), "--normalize-items",
                 "--subjects", "01,02", *FAST_OPTIONS, "-o", str(tmp_path / "c.nc")]) == 0


def test_the_help_explains_models_outputs_and_an_example(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = capsys.readouterr().out
    for phrase in ("textbook", "semantic", "cmr2", "nests", "winner ratios", "Wilcoxon", "--normalize-items",
                   "--vectors", "--columns", "--subjects", "Examples:", "icl-cmr compare psifr:Morton2013"):
        assert phrase in text, phrase


def test_cmr2_and_textbook_on_data_with_prior_list_intrusions_are_refused_before_fitting():
    rows = []
    for subject in ("01", "02"):
        for lst, words in ((1, ["a1", "a2", "a3", "a4"]), (2, ["b1", "b2", "b3", "b4"])):
            rows += [(subject, lst, "study", p, w) for p, w in enumerate(words, 1)]
            recalled = [words[3], words[2]] + (["a1"] if lst == 2 and subject == "02" else [])
            rows += [(subject, lst, "recall", p, w) for p, w in enumerate(recalled, 1)]
    events = cmr.from_table(pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item"]))
    with pytest.raises(errors.RecallDataError, match=r"^CMR2 scores 1 more events than textbook CMR .*1 subject"):
        cmr.fit_models(events, ["textbook", "cmr2"], n_restarts=1, de_options=FAST)


def test_semantic_cmr_at_zero_weights_is_textbook_cmr():
    """The nesting the check relies on: Scf = Sff = 0 gives textbook CMR's likelihood exactly."""
    events = cmr.from_table(_table())
    params = cmr.default_parameters()
    textbook = cmr.log_likelihood(events, params)
    semantic = cmr.log_likelihood(events, dict(params, Scf=0.0, Sff=0.0), patterns=_pool())
    np.testing.assert_array_equal(semantic["logl"].values, textbook["logl"].values)
    assert cmr.NESTED_MODELS == {"semantic": "textbook", "category": "textbook"}


def test_the_pool_takes_the_studied_spelling_or_names_what_it_lacks():
    from icl_cmr.analyses.commands.options import pool_matched_to_study

    events = cmr.from_table(_table())
    lower = _pool(np.char.lower(WORDS))
    matched = pool_matched_to_study(lower, events, True, "--vectors v.txt")
    assert matched.items.tolist() == WORDS.tolist()
    np.testing.assert_array_equal(matched.similarity, lower.similarity)
    assert pool_matched_to_study(_pool(), events, False, "--vectors v.txt") is not None
    short = _pool(np.char.lower(WORDS)[1:])
    with pytest.raises(errors.RecallDataError, match=r"^1 studied item\(s\) have no row in --vectors v.txt \(5 items\), "
                       r"e.g. 'Apple'; 1 more differ only in case or spaces, e.g. 'Cat' \(pool: 'cat'\)"):
        pool_matched_to_study(short, events, True, "--vectors v.txt")
    both = _pool(np.array(["apple", "APPLE", "bird", "Cat", "dog", "eel", "fox"]))
    with pytest.raises(errors.RecallDataError, match=r"studied item 'Apple' matches 2 items of --vectors v.txt"):
        pool_matched_to_study(both, events, True, "--vectors v.txt")


def test_a_nesting_model_starts_from_its_nested_fit_and_never_fits_worse():
    events = cmr.from_table(_table())
    options = dict(patterns=_pool(), n_restarts=1, de_options=FAST)
    warm, fits, _ = cmr.compare_recall_models(events, models=["textbook", "semantic"], **options)
    assert list(fits) == ["textbook", "semantic"]
    assert (warm["nested_gain"].sel(model="semantic").values >= -1e-9).all()
    assert not warm["fits_worse_than_nested"].any()
    # without the start (a mapping of specs has no nesting unless given), two generations leave
    # semantic CMR below textbook CMR for some subject: the check the comparison makes
    specs = {"textbook": cmr.comparison_spec("textbook"), "semantic": cmr.comparison_spec("semantic", _pool())}
    cold_fits, _ = cmr.fit_models(events, specs, n_restarts=1, de_options=FAST)
    cold = cmr.compare_models(cold_fits, nested={"semantic": "textbook"})
    assert cold["fits_worse_than_nested"].sel(model="semantic").any()
