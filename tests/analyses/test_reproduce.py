"""``icl-cmr reproduce NAME``: the documented comparisons and recoveries as subcommands."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from icl_cmr.analyses.cli import main
from icl_cmr.analyses.commands.reproduce import ANALYSES

NAMES = ("published-fits", "human-comparison", "null-shares", "recovery", "semantic-recovery", "model-comparison")


def _exit_code(capsys, *argv):
    with pytest.raises(SystemExit) as stop:
        main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return stop.value.code, out, err


def test_help_lists_every_analysis_with_what_it_writes(capsys):
    code, out, _ = _exit_code(capsys, "reproduce", "--help")
    assert code == 0 and set(ANALYSES) == set(NAMES)
    for name in NAMES:
        assert out.count(name) >= 2, name  # once with what it writes, once with what it is


@pytest.mark.parametrize("name, option", [("recovery", "--free"), ("semantic-recovery", "--sets"),
                                          ("model-comparison", "--folds"), ("human-comparison", "--objective"),
                                          ("published-fits", "--fits-dir"), ("null-shares", "--n-null")])
def test_each_analysis_keeps_its_options(capsys, name, option):
    code, out, _ = _exit_code(capsys, "reproduce", name, "--help")
    assert code == 0 and f"icl-cmr reproduce {name}" in out and option in out


def test_an_unknown_analysis_is_one_error_line(capsys):
    code, out, err = _exit_code(capsys, "reproduce", "nosuch")
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and "Traceback" not in err
    assert len(lines) == 1 and lines[0].startswith("icl-cmr reproduce: error: ") and "'nosuch'" in lines[0]
    assert all(name in lines[0] for name in NAMES)


def test_published_fits_runs_end_to_end(capsys, tmp_path):
    table = tmp_path / "table.md"
    code = main(["reproduce", "published-fits", "--models", "pythia-70m-deduped-v0", "--humans", "-o", str(table)])
    out, err = capsys.readouterr()
    assert code == 0 and out == table.read_text() + "\n" and "pythia-70m-deduped-v0: 48 heads in " in err
    rows = [line for line in table.read_text().splitlines() if line.startswith("| pythia-70m-deduped-v0")]
    assert len(rows) == 1 and rows[0].split("|")[2].strip() == "48"  # every head: 6 layers x 8


def test_a_bad_option_value_is_one_error_line(capsys, tmp_path):
    code = main(["reproduce", "recovery", "--figure", str(tmp_path / "figure.pdf"), "-o", str(tmp_path / "r.nc")])
    err = capsys.readouterr().err
    assert code == 1 and err.strip().splitlines() == [
        f"icl-cmr reproduce: error: --figure must be a .png file; got {str(tmp_path / 'figure.pdf')!r}"]


def test_the_command_line_loads_no_plotting_or_model_library_until_one_runs():
    code = (
        "import json, sys\n"
        "from icl_cmr.analyses.cli import build_parser\n"
        "parser = build_parser()\n"
        "parser.parse_args(['reproduce', 'recovery'])\n"
        "print(json.dumps([m for m in ('matplotlib', 'torch') if m in sys.modules]))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                       text=True).stdout)
    assert loaded == []


def test_no_reproduce_module_parses_arguments_or_reaches_the_command_line():
    """The comparisons are library functions: argparse and the commands live in commands/reproduce.py."""
    import ast

    from tests.conftest import REPO_ROOT

    offences = []
    for path in sorted((REPO_ROOT / "analyses" / "reproduce").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [f"{'.' * node.level}{node.module or ''}"] if isinstance(node, ast.ImportFrom) else [])
            offences += [f"{path.name}:{node.lineno} {n}" for n in names
                         if n.split(".")[0] == "argparse" or any(p in ("commands", "cli") for p in n.split("."))]
            if isinstance(node, ast.FunctionDef) and node.name in ("main", "run", "add_arguments"):
                offences.append(f"{path.name}:{node.lineno} def {node.name}")
    assert offences == []


def test_model_comparison_reads_a_labs_table_with_the_recall_data_options(capsys, tmp_path, monkeypatch):
    import functools
    import warnings

    import numpy as np

    import cmr

    # the table and its options are under test, not the search: one restart per fit and fold
    for name in ("fit_recall", "cross_validate"):
        monkeypatch.setattr(cmr, name, functools.partial(getattr(cmr, name), n_restarts=1))
    words = np.array(["Apple", "bird", "Cat", "dog", "eel", "fox"])
    table = cmr.simulate_free_recall(cmr.default_parameters(), 6, 4, subjects=["01", "02", "03"], rng=3)
    table["item"] = words[table["item"].astype(int).to_numpy() - 1]
    lab = table.rename(columns={"subject": "participant", "item": "word"})
    lab["trial_type"] = lab["trial_type"].replace({"study": "encoding", "recall": "retrieval"})
    lab.to_csv(tmp_path / "lab.csv", index=False)
    rows = np.random.default_rng(0).normal(size=(6, 4))
    (tmp_path / "v.txt").write_text("".join(f"{w.lower()} {' '.join(map(repr, r.tolist()))}\n"
                                            for w, r in zip(words, rows)))
    out = tmp_path / "comparison"
    with warnings.catch_warnings():  # two generations end at bounds: FitWarning, also kept in the fits' at_bound
        warnings.simplefilter("ignore", cmr.errors.FitWarning)
        code = main(["reproduce", "model-comparison", "--source", str(tmp_path / "lab.csv"),
                     "--columns", "subject=participant,item=word", "--trial-types", "study=encoding,recall=retrieval",
                     "--normalize-items", "--vectors", str(tmp_path / "v.txt"), "--variants", "localist,semantic",
                     "--maxiter", "2", "--rep", "1", "-o", str(out), "--figure", str(tmp_path / "f.png")])
    printed = capsys.readouterr().out
    assert code == 0
    summary = json.loads(printed.strip().splitlines()[-1])
    assert summary["subjects"] == 3 and "fits_worse_than_nested" in summary
    comparison = cmr.load_dataset(out / "comparison.nc", kind="model_comparison")
    assert comparison["model"].values.tolist() == ["localist", "semantic"]
    assert comparison["nested_model"].values.tolist() == ["", "localist"]


def test_model_comparison_refuses_an_unknown_variant(capsys, tmp_path):
    code = main(["reproduce", "model-comparison", "--variants", "localist,hopfield", "-o", str(tmp_path / "c")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and "--variants takes two or more of localist, semantic, category" in err[0]
    assert not (tmp_path / "c").exists()


# --- the library functions, called directly -----------------------------------------------------------

def test_published_fits_returns_the_table_and_writes_the_fits(tmp_path):
    from icl_cmr.analyses.reproduce.published_fits import fit_published

    logged = []
    table = fit_published(models=("pythia-70m-deduped-v0",), humans=(), fits_dir=tmp_path, log=logged.append)
    lines = table.splitlines()
    assert table.endswith("\n") and len(lines) == 3 and lines[1] == "|" + "---|" * 12
    assert lines[2].startswith("| pythia-70m-deduped-v0 (142) | 48 |")  # 6 layers x 8 heads
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pythia-70m-deduped-v0_lsq.nc",
                                                          "pythia-70m-deduped-v0_paper.nc"]
    assert len(logged) == 1 and logged[0].startswith("pythia-70m-deduped-v0: 48 heads in ")


def test_human_comparison_lists_the_published_fits_on_both_scales():
    from icl_cmr.adapters.published import published_human_fits
    from icl_cmr.analyses.reproduce.human_comparison import compare_parameters

    table = compare_parameters(models=(), humans=())
    lines = table.splitlines()
    assert lines[0].startswith("| units | n | median d | beta_enc | beta_rec | gamma |") and not table.endswith("\n")
    assert len(lines) == 2 + len(published_human_fits())
    assert all(line.startswith("| published: ") and "| - | - |" in line for line in lines[2:])


def test_human_comparison_refuses_an_unknown_objective():
    from cmr.errors import ParameterError
    from icl_cmr.analyses.reproduce.human_comparison import compare_parameters

    with pytest.raises(ParameterError, match="objective must be 'lsq' or 'paper'; got 'mse'"):
        compare_parameters(objective="mse", models=(), humans=())


def _heads_file(path):
    import numpy as np
    import xarray as xr

    from cmr.io import save_dataset
    from cmr.schema import provenance_attrs

    lags = np.arange(-5, 6)
    scores = np.random.default_rng(3).normal(size=(1, 1, 1, 4, lags.size))
    dims = ("model", "checkpoint", "layer", "head", "lag")
    ds = xr.Dataset({"profile": (dims, scores), "prob_profile": (dims, np.full(scores.shape, 0.02)),
                     "sem": (dims, np.full(scores.shape, 0.002))},
                    coords={"model": ["m"], "checkpoint": [-1], "layer": [0], "head": np.arange(4), "lag": lags})
    ds["induction_score"] = ds["prob_profile"].sel(lag=1)
    ds.attrs.update(provenance_attrs("lag_profile", "tests", n_words=100))
    ds.attrs.update(profile_kind="attention_score", unit_kind="heads")
    return save_dataset(ds, path)


def test_null_shares_of_a_heads_file_is_a_table_with_one_row_per_objective(tmp_path):
    import numpy as np

    from icl_cmr.analyses.reproduce.null_shares import shares_beyond_chance

    heads = _heads_file(tmp_path / "heads.nc")
    table = shares_beyond_chance(heads=heads, models=(), humans=(), objectives=("lsq", "paper"), n_null=19,
                        rng=np.random.default_rng(0))
    lines = table.splitlines()
    assert len(lines) == 4 and lines[0].startswith("| units | objective | n |") and not table.endswith("\n")
    assert [line.split(" | ")[1] for line in lines[2:]] == ["lsq", "paper"]
    assert all(line.split(" | ")[2] == "4" for line in lines[2:])  # the file's four heads


def test_null_shares_of_nothing_is_one_clear_error():
    from cmr.errors import ParameterError
    from icl_cmr.analyses.reproduce.null_shares import shares_beyond_chance

    with pytest.raises(ParameterError, match="at least one model, data set or the embedded model"):
        shares_beyond_chance(models=(), humans=(), include_smollm2=False)


def test_recovery_returns_the_fits_and_writes_them_with_the_figure(tmp_path):
    import warnings

    import cmr
    from icl_cmr.analyses.reproduce.recovery import correlations, recover_parameters

    with warnings.catch_warnings():  # a few short lists put estimates at bounds: FitWarning, kept in at_bound
        warnings.simplefilter("ignore", cmr.errors.FitWarning)
        fits = recover_parameters(sets=3, lists=4, list_length=6, free=("B_enc", "T"), rng=1, n_jobs=1,
                                  output=tmp_path / "r.nc", figure=tmp_path / "r.png")
    assert fits.sizes["subject"] == 3 and set(correlations(fits)) == {"B_enc", "T"}
    assert cmr.load_dataset(tmp_path / "r.nc", kind="recall_fit")["true_value"].shape == fits["true_value"].shape
    assert (tmp_path / "r.png").stat().st_size > 0


@pytest.mark.parametrize("kwargs, message", [
    (dict(free=("B_enc", "nope")), r"free takes one or more of Lfc, .*; got \['B_enc', 'nope'\]"),
    (dict(free=()), "free takes one or more of"),
    (dict(free=("T", "T")), "each once"),
    (dict(figure="r.pdf"), "figure must be a .png file; got 'r.pdf'"),
])
def test_recovery_refuses_bad_arguments_before_fitting(tmp_path, kwargs, message):
    from cmr.errors import ParameterError
    from icl_cmr.analyses.reproduce.recovery import recover_parameters

    with pytest.raises(ParameterError, match=message):
        recover_parameters(sets=2, lists=1, list_length=4, output=tmp_path / "r.nc", **kwargs)
    assert list(tmp_path.iterdir()) == []


def test_semantic_recovery_keeps_its_published_setup():
    import inspect

    from icl_cmr.analyses.reproduce import semantic_recovery

    signature = inspect.signature(semantic_recovery.recover_semantic)
    assert all(p.kind is p.KEYWORD_ONLY for p in signature.parameters.values())
    assert {name: p.default for name, p in signature.parameters.items()} == {
        "sets": 12, "rng": 0, "n_jobs": 2, "output": None}
    assert semantic_recovery.FREE == ("B_enc", "B_rec", "T", "Scf", "Sff") and set(semantic_recovery.RANGES) == set(
        semantic_recovery.FREE)


@pytest.mark.parametrize("variants", ["localist", "localist,localist", "localist,hopfield", ("semantic",)])
def test_model_comparison_refuses_too_few_or_unknown_variants(variants):
    from cmr.errors import ParameterError
    from icl_cmr.analyses.reproduce.model_comparison import compare_variants, variants_of

    with pytest.raises(ParameterError, match="variants takes two or more of localist, semantic, category, each once"):
        compare_variants(variants=variants)
    assert variants_of(" semantic, localist ") == ["semantic", "localist"]


def test_model_comparison_of_a_dataset_needs_the_pool_of_its_semantic_variant(tmp_path):
    import cmr
    from cmr.errors import ParameterError
    from icl_cmr.analyses.reproduce.model_comparison import compare_variants

    events = cmr.from_table(cmr.simulate_free_recall(cmr.default_parameters(), 6, 2, subjects=["a"], rng=0))
    with pytest.raises(ParameterError, match="patterns must give the item pool of semantic"):
        compare_variants(events, variants=("localist", "semantic"), output=tmp_path / "c")
    assert not (tmp_path / "c").exists()


def test_every_reproduce_function_takes_keywords_and_names_its_seed_rng():
    import inspect

    from icl_cmr.analyses.reproduce import (human_comparison, model_comparison, null_shares, published_fits,
                                            recovery, semantic_recovery)

    functions = [published_fits.fit_published, human_comparison.compare_parameters, null_shares.shares_beyond_chance,
                 recovery.recover_parameters, semantic_recovery.recover_semantic, model_comparison.compare_variants]
    for function in functions:
        parameters = list(inspect.signature(function).parameters.values())
        assert all(p.kind is p.KEYWORD_ONLY for p in parameters[function is model_comparison.compare_variants:])
        assert "seed" not in {p.name for p in parameters}, function.__name__
        assert function.__doc__ and "Returns\n    -------" in function.__doc__, function.__name__
