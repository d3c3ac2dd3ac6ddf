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
    code = main(["reproduce", "published-fits", "--models", "gpt2-small", "--humans", "-o", str(table)])
    out, _ = capsys.readouterr()
    assert code == 0
    rows = [line for line in table.read_text().splitlines() if line.startswith("| gpt2-small")]
    assert len(rows) == 1 and rows[0] in out
    assert rows[0].split("|")[2].strip() == "144"  # every head of GPT-2 small


def test_a_bad_option_value_is_one_error_line(capsys, tmp_path):
    code = main(["reproduce", "recovery", "--figure", str(tmp_path / "figure.pdf"), "-o", str(tmp_path / "r.nc")])
    err = capsys.readouterr().err
    assert code == 1 and err.strip().splitlines() == [
        f"icl-cmr reproduce: error: --figure must be a .png file; got {str(tmp_path / 'figure.pdf')!r}"]


def test_the_old_script_entry_point_warns_and_runs_the_command(capsys):
    from icl_cmr.analyses.reproduce import published_fits

    with pytest.warns(DeprecationWarning, match="icl-cmr reproduce published-fits"):
        code = published_fits.main(["--models", "--humans"])
    assert code == 0 and "| model (checkpoint) or data set |" in capsys.readouterr().out


def test_the_command_line_loads_no_analysis_until_one_runs():
    code = (
        "import json, sys\n"
        "from icl_cmr.analyses.cli import build_parser\n"
        "parser = build_parser()\n"
        "parser.parse_args(['reproduce', 'human-comparison'])\n"
        f"print(json.dumps([m for m in {[f'icl_cmr.analyses.{m}' for m, _, _ in ANALYSES.values()]!r} "
        "if m in sys.modules] + [m for m in ('matplotlib', 'torch') if m in sys.modules]))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                       text=True).stdout)
    assert loaded == ["icl_cmr.analyses.reproduce.human_comparison"]


def test_model_comparison_reads_a_labs_table_with_the_recall_data_options(capsys, tmp_path):
    import warnings

    import numpy as np

    import cmr

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
