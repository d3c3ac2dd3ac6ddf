"""cmr.markdown: the one markdown table writer."""
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cmr.errors import ParameterError
from cmr.markdown import markdown_table


def test_a_table_has_a_header_a_rule_and_a_line_per_row():
    table = markdown_table(["name", "d", "n"], [("a", 0.12345, 3), ("b", np.nan, np.int64(4))])
    assert table == "| name | d | n |\n|---|---|---|\n| a | 0.123 | 3 |\n| b | - | 4 |"


def test_alignment_float_format_and_missing_cells():
    table = markdown_table(["x", "y", "z"], [(np.float64(2.0), float("inf"), "t")], align="lrc",
                           float_format="{:.1f}", missing="n/a")
    assert table.splitlines()[1:] == ["|---|---:|:---:|", "| 2.0 | n/a | t |"]


def test_a_pipe_or_a_line_break_in_a_cell_keeps_the_table_whole():
    table = markdown_table(["a|b"], [("x|y\nz",)])
    assert table.splitlines() == ["| a\\|b |", "|---|", "| x\\|y z |"]


@pytest.mark.parametrize("align", ["l", "lrx", 3])
def test_a_bad_alignment_is_one_clear_error(align):
    with pytest.raises(ParameterError, match=r"align must be one of l, r, c per column \(2 letters\)"):
        markdown_table(["a", "b"], [], align=align)


def test_a_row_of_the_wrong_length_is_one_clear_error():
    with pytest.raises(ParameterError, match=r"row 1 of the table has 1 cells; expected one per column \(2: a, b\)"):
        markdown_table(["a", "b"], [(1, 2), (3,)])


cells = st.one_of(st.text(max_size=8), st.integers(), st.floats(allow_nan=True, allow_infinity=True))


@given(st.integers(1, 5).flatmap(lambda n: st.tuples(st.lists(st.text(max_size=6), min_size=n, max_size=n),
                                                     st.lists(st.lists(cells, min_size=n, max_size=n), max_size=4))))
def test_every_line_has_one_cell_per_column(data):
    columns, rows = data
    lines = markdown_table(columns, rows).split("\n")
    assert len(lines) == len(rows) + 2
    # unescaped pipes: the borders and one between each pair of cells
    assert all(len(re.findall(r"(?<!\\)\|", line)) == len(columns) + 1 for line in lines)


def test_every_markdown_table_goes_through_markdown_table():
    """One writer: a table rule (``|---|``) written by hand anywhere else in the packages would be a second one."""
    from tests.conftest import REPO_ROOT

    found = [f"{path.relative_to(REPO_ROOT)}:{n}" for folder in ("cmr", "adapters", "analyses")
             for path in sorted((REPO_ROOT / folder).rglob("*.py")) if path.name != "markdown.py"
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\|-{3}|-{3}:?\||\"\|\"\.join|\" \| \"\.join", line)]
    assert found == []
