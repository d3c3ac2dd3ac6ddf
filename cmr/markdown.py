"""Markdown pipe tables: the one writer of every table the package prints or writes as ``.md``.

:func:`markdown_table` turns a header and rows of cells into a GitHub-flavoured pipe table:
one header line, one alignment line (``---`` left, ``---:`` right, ``:---:`` centred) and one
line per row. Text cells are written as given (a ``|`` escaped, a line break as a space);
floats with ``float_format``, a NaN or infinite one as ``missing``; other values with ``str``.
Callers that want another number format for a column format the cell themselves.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from .errors import ParameterError

__all__ = ["markdown_table"]

_RULES = {"l": "---", "r": "---:", "c": ":---:"}


def _cell(value, float_format: str, missing: str) -> str:
    if isinstance(value, float):
        return missing if not math.isfinite(value) else float_format.format(value)
    return str(value).replace("|", "\\|").replace("\r\n", " ").replace("\n", " ")


def markdown_table(columns: Sequence, rows: Iterable[Sequence], *, align: str | None = None,
                   float_format: str = "{:.3f}", missing: str = "-") -> str:
    """A markdown pipe table, without a trailing line break.

    Parameters
    ----------
    columns : sequence
        The header cells, one per column.
    rows : iterable of sequences
        The cells of each row, as many as ``columns`` (a pandas ``itertuples(index=False)`` works).
    align : str, optional
        One letter per column: ``l`` (left), ``r`` (right) or ``c`` (centred). Default: ``---``
        for every column (left, the renderer's default).
    float_format : str, default ``"{:.3f}"``
        :meth:`str.format` pattern of a finite float cell (numpy floats included).
    missing : str, default ``"-"``
        The cell of a NaN or infinite float.

    Returns
    -------
    str
        ``| a | b |`` / ``|---|---|`` / one line per row, joined by line breaks.

    Raises
    ------
    ParameterError
        ``align`` or a row that does not have one entry per column.
    """
    header = [_cell(c, float_format, missing) for c in columns]
    if align is None:
        rules = ["---"] * len(header)
    else:
        if not isinstance(align, str) or len(align) != len(header) or set(align) - set(_RULES):
            raise ParameterError(f"align must be one of l, r, c per column ({len(header)} letters); got {align!r}")
        rules = [_RULES[a] for a in align]
    lines = ["| " + " | ".join(header) + " |", "|" + "".join(f"{rule}|" for rule in rules)]
    for number, row in enumerate(rows):
        cells = [_cell(v, float_format, missing) for v in row]
        if len(cells) != len(header):
            raise ParameterError(f"row {number} of the table has {len(cells)} cells; expected one per column "
                                 f"({len(header)}: {', '.join(header)})")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
