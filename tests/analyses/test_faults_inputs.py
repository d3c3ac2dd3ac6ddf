"""Option values and expressions that used to end in a traceback or run regardless: each is one
typed line ``icl-cmr CMD: error: ...`` (exit 1) or one ``ParameterError`` line.

* ``--columns`` that maps two psifr names to one column, or renames a column to a psifr name the
  table already has, on every command that reads recall tables;
* every count option of every ``icl-cmr reproduce NAME`` below its minimum (found from the
  parsers, so a new option without a minimum fails here);
* network weight expressions nested deeper than the stack (the 1,000-character cap of ``-``).
"""
from __future__ import annotations

import argparse

import pytest

from cmr.errors import ParameterError
from icl_cmr.analyses.cli import main
from tests.conftest import two_subject_table


def _one_error_line(capsys, argv, *needles):
    assert main([str(a) for a in argv]) == 1
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and ": error: " in lines[0] and "Traceback" not in err, err
    assert all(n in lines[0] for n in needles), lines[0]


# --- --columns that cannot be one table ---------------------------------------------------------

COMMANDS = {
    "lag-crp": lambda t: ["lag-crp", t / "r.csv", "-o", t / "o.csv"],
    "spc": lambda t: ["spc", t / "r.csv", "-o", t / "o.csv"],
    "recall-analyses": lambda t: ["recall-analyses", t / "r.csv", "-o", t / "o.nc"],
    "fit-recall": lambda t: ["fit-recall", t / "r.csv", "--free", "B_enc", "-o", t / "o.nc"],
}
MAPPINGS = {"two_names_one_column": "subject=list,list=list", "subject_is_list": "subject=list",
            "item_is_subject": "item=subject,subject=subject"}


@pytest.mark.parametrize("mapping", list(MAPPINGS), ids=list(MAPPINGS))
@pytest.mark.parametrize("command", list(COMMANDS), ids=list(COMMANDS))
def test_columns_that_clash_are_one_line(tmp_path, capsys, command, mapping):
    two_subject_table().to_csv(tmp_path / "r.csv", index=False)
    _one_error_line(capsys, COMMANDS[command](tmp_path) + ["--columns", MAPPINGS[mapping]],
                    "columns must map each psifr column to its own table column")
    assert not (tmp_path / "o.csv").exists() and not (tmp_path / "o.nc").exists()


# --- counts of icl-cmr reproduce NAME -----------------------------------------------------------

def _count_options():
    from icl_cmr.analyses.commands.reproduce import ANALYSES, COUNT_MINIMUMS, register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    sub = next(a for a in parser._subparsers._group_actions).choices["reproduce"]
    names = next(a for a in sub._subparsers._group_actions).choices
    cases = []
    for name in ANALYSES:
        for action in names[name]._actions:
            if action.type is int:  # counts (a share such as --max-intrusion-share is checked as a share)
                cases.append((name, action.option_strings[-1], COUNT_MINIMUMS.get(action.dest)))
    return cases


COUNT_CASES = _count_options()


@pytest.mark.parametrize("name, option, minimum", COUNT_CASES, ids=[f"{n} {o}" for n, o, _ in COUNT_CASES])
def test_reproduce_counts_below_their_minimum_are_one_line(tmp_path, capsys, name, option, minimum):
    assert minimum is not None, f"{option} of reproduce {name} has no minimum in COUNT_MINIMUMS"
    _one_error_line(capsys, ["reproduce", name, option, minimum - 1, "-o", tmp_path / "out"],
                    f"{option} must be an integer >= {minimum}; got {minimum - 1}")
    assert not (tmp_path / "out").is_file() and not list((tmp_path / "out").glob("*"))  # nothing written


def test_the_issue_cases_are_among_them():
    assert ("model-comparison", "--maxiter", 1) in COUNT_CASES and ("model-comparison", "--subjects", 0) in COUNT_CASES


# --- network weight expressions -----------------------------------------------------------------

EXPRESSIONS = {
    "unary_minus_at_the_length_cap": ("-" * 997 + "loc", r"nested at most 50 levels deep; got 998 levels"),
    "nested_calls": ("sqrt(" * 60 + "loc" + ")" * 60, r"nested at most 50 levels deep; got 61 levels"),
    "nested_parentheses": ("(" * 400 + "loc" + ")" * 400, r"(nested|cannot parse)"),
    "long_sum": ("+".join(["loc"] * 250), r"nested at most 50 levels deep; got 250 levels"),
}


@pytest.mark.parametrize("case", list(EXPRESSIONS), ids=list(EXPRESSIONS))
def test_deep_weight_expressions_are_one_line(case):
    from cmr.network import NetworkConfig

    text, message = EXPRESSIONS[case]
    assert len(text) <= 1000
    with pytest.raises(ParameterError, match=message) as info:
        NetworkConfig(weights={"fc": {(("task", "item"), ("task", "item")): text},
                               "cf": {(("task", "item"), ("task", "item")): "loc"}})
    assert "\n" not in str(info.value)
