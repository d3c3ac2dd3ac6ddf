"""Text cells a spreadsheet would run as formulas, neutralised in every CSV written and restored on read.

A spreadsheet opening a CSV file runs a cell that starts with ``=``, ``+``, ``-`` or ``@`` (and,
in some, a tab or carriage return) as a formula: a subject named ``=HYPERLINK("http://...")`` or
``+cmd|' /C calc'!A0`` would open a link or start a program (OWASP, "CSV Injection"). Every
CSV table the toolkit writes (:func:`cmr.io.write_table`) therefore passes through
:func:`neutralise_formulas`, and every CSV table it reads back through :func:`restore_formulas`:

* write: a **text** cell (a string; numbers are never touched, so ``-0.5`` stays a number) that
  starts with one of :data:`FORMULA_START`, possibly after apostrophes, gets one leading
  apostrophe (``'=HYPERLINK(...)``), which spreadsheets show as text; text that is a plain
  number (``-5``, ``+1.5e3``) is left as written, since a spreadsheet reads it as that number.
  Column names follow the same rule.
* read: a text cell that starts with one or more apostrophes followed by one of
  :data:`FORMULA_START` loses one apostrophe.

The two are exact inverses on every string, so exports stay lossless: ``restore(neutralise(s))
== s`` (text that already starts with ``'=`` is written ``''=`` and read back as ``'=``).
Another program reading the file sees the apostrophes; strip one as above.
"""
from __future__ import annotations

import re

import pandas as pd

__all__ = ["FORMULA_START", "neutralise_formulas", "restore_formulas", "neutralised", "restored", "csv_quoting"]

#: first characters of a cell that spreadsheets run as a formula
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")

_TRIGGER = "[" + re.escape("".join(FORMULA_START)) + "]"
_NEUTRALISE = re.compile("'*" + _TRIGGER)
_RESTORE = re.compile("'+" + _TRIGGER)
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def neutralised(text: str) -> str:
    """One text cell as written to CSV: an apostrophe before a formula start (see the module docstring)."""
    if isinstance(text, str) and _NEUTRALISE.match(text) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def restored(text: str) -> str:
    """One text cell as read from CSV: the apostrophe :func:`neutralised` added, removed."""
    if isinstance(text, str) and _RESTORE.match(text):
        return text[1:]
    return text


def _text_columns(table: pd.DataFrame) -> list:
    return [name for name in table.columns
            if table[name].dtype == object or pd.api.types.is_string_dtype(table[name].dtype)
            or isinstance(table[name].dtype, pd.CategoricalDtype)]


def _mapped(table: pd.DataFrame, cell) -> pd.DataFrame:
    out = table.copy(deep=False)  # the caller's table is never changed
    for name in _text_columns(table):
        column = table[name]
        if isinstance(column.dtype, pd.CategoricalDtype):
            out[name] = column.cat.rename_categories([cell(c) for c in column.cat.categories])
        else:
            out[name] = column.map(cell, na_action="ignore")
    out.columns = [cell(name) for name in table.columns]
    return out


def csv_quoting(table: pd.DataFrame) -> int:
    """The ``csv`` quoting that keeps every text cell whole: every text cell quoted when one holds a
    carriage return (Python's csv quotes only the line terminator's characters, here ``\n``), else minimal."""
    import csv

    for name in _text_columns(table):
        if table[name].map(lambda cell: isinstance(cell, str) and "\r" in cell, na_action="ignore").fillna(False).any():
            return csv.QUOTE_NONNUMERIC
    return csv.QUOTE_MINIMAL


def neutralise_formulas(table: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``table`` whose text cells and column names are safe to open in a spreadsheet (:func:`neutralised`)."""
    return _mapped(table, neutralised)


def restore_formulas(table: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``table`` read from CSV with the apostrophes of :func:`neutralise_formulas` removed."""
    return _mapped(table, restored)
