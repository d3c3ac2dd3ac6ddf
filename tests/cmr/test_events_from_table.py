"""cmr.events stays readable: no public function is a wall of code, and from_table reads as its
steps. Each fault of a table meets the error of the first step that checks it."""
from __future__ import annotations

import ast
import inspect

import numpy as np
import pytest

import cmr
from cmr import events
from cmr.errors import RecallDataError

MAX_PUBLIC_LINES = 80
MAX_STEP_LINES = 40


def _functions():
    tree = ast.parse(inspect.getsource(events))
    return [node for node in tree.body if isinstance(node, ast.FunctionDef)]


def test_no_public_function_of_events_exceeds_80_lines():
    long = {f.name: f.end_lineno - f.lineno + 1 for f in _functions()
            if not f.name.startswith("_") and f.end_lineno - f.lineno + 1 > MAX_PUBLIC_LINES}
    assert long == {}


def test_from_table_reads_as_short_documented_steps():
    functions = {f.name: f for f in _functions()}
    called = {node.func.id for node in ast.walk(functions["from_table"])
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    steps = sorted(name for name in called if name.startswith("_") and name in functions)
    assert {"_checked_table", "_list_trials", "_study_events", "_recall_events", "_events_dataset"} <= set(steps)
    for name in steps:
        step = functions[name]
        assert step.end_lineno - step.lineno + 1 <= MAX_STEP_LINES, name
        assert ast.get_docstring(step), name


def _table():
    return cmr.simulate_free_recall(cmr.default_parameters(), 6, 3, subjects=2, rng=0)


def test_a_table_with_two_faults_meets_the_first_steps_error():
    table = _table()
    table.loc[table.index[0], "position"] = 0  # study positions are checked after ...
    table.loc[table.index[1], "item"] = None  # ... missing values
    with pytest.raises(RecallDataError, match="column 'item' must have no missing values"):
        events.from_table(table)
    table = _table()
    recall = table.index[table["trial_type"] == "recall"]
    table.loc[recall[0], "position"] = 0  # recall positions are checked after ...
    table.loc[table.index[2], "position"] = 1  # ... study positions
    with pytest.raises(RecallDataError, match="duplicate study position 1 in subject 1, list 1"):
        events.from_table(table)


def test_extra_columns_follow_their_events():
    table = _table()
    table["rt"] = np.arange(len(table), dtype=np.float64)
    ds = events.from_table(table.sample(frac=1.0, random_state=1))
    study = table[table["trial_type"] == "study"].set_index(["subject", "list", "position"])["rt"]
    got = ds["study_rt"].isel(trial=0).values[: int(ds["list_length"][0])]
    np.testing.assert_array_equal(got, study.loc[(1, 1)].sort_index().values)
    recall = table[table["trial_type"] == "recall"]
    first = recall[(recall["subject"] == 1) & (recall["list"] == 1)].sort_values("position")["rt"].values
    np.testing.assert_array_equal(ds["recall_rt"].isel(trial=0).values[: first.size], first)
