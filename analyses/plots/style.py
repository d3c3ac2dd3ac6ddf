"""The house style of icl-cmr figures: palette, rc parameters, new figures and atomic saving.

Figures are :class:`matplotlib.figure.Figure` objects made without pyplot, so no GUI backend is
loaded, no global figure registry keeps them alive and the caller's rc parameters are untouched:
the style applies inside :func:`house_style` only (figures are drawn in it, and saved in it).
"""
from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np

from cmr.checks import integer
from cmr.deprecation import keyword_only
from cmr.errors import ParameterError
from cmr.io import atomic_write

__all__ = [
    "PALETTE",
    "MARKERS",
    "LINESTYLES",
    "STYLE",
    "REFERENCE_GREY",
    "house_style",
    "series_style",
    "new_figure",
    "save_figure",
    "plain_text",
    "literal_unparsable_text",
]

#: line colours, Okabe & Ito's colour-blind-safe set led by a dark blue; the first three differ
#: in lightness (CIE L* 32, 54, 70), so they stay apart in greyscale
PALETTE = ("#1f4e79", "#d55e00", "#56b4e9", "#009e73", "#cc79a7", "#e69f00", "#7f7f7f")
#: markers and line styles paired with the colours, for greyscale prints
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINESTYLES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1)), (0, (1, 1)), (0, (3, 1, 1, 1, 1, 1)))
#: thresholds, zero lines and chance levels
REFERENCE_GREY = "0.55"

#: rc parameters (the colour cycle is :data:`PALETTE`): 7-8 pt text, readable when a 3.3-inch panel is printed at its size
STYLE = {
    "figure.dpi": 110,
    "savefig.dpi": 300,
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "legend.title_fontsize": 7,
    "legend.frameon": False,
    "legend.handlelength": 1.8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "axes.linewidth": 0.7,
    "xtick.major.width": 0.7,
    "ytick.major.width": 0.7,
    "xtick.major.size": 2.5,
    "ytick.major.size": 2.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "lines.linewidth": 1.2,
    "lines.markersize": 3.5,
    "errorbar.capsize": 0,
    "image.cmap": "viridis",
    "pdf.fonttype": 42,  # TrueType in PDFs: editable text, accepted by journals
    "figure.constrained_layout.use": True,
    "savefig.bbox": "tight",  # nothing drawn outside the layout (a wide legend) is cut off
    "savefig.pad_inches": 0.02,
}


def _style() -> dict:
    from cycler import cycler

    return {**STYLE, "axes.prop_cycle": cycler(color=PALETTE)}


@contextlib.contextmanager
def house_style():
    """Context manager applying :data:`STYLE` to everything made or saved inside it.

    Wraps :func:`matplotlib.rc_context`, so the caller's rc parameters come back on exit.
    """
    import matplotlib

    with matplotlib.rc_context(_style()):
        yield


def series_style(index: int) -> dict:
    """Colour, marker and line style of the ``index``-th series (cycling), as plot keywords."""
    return {
        "color": PALETTE[index % len(PALETTE)],
        "marker": MARKERS[index % len(MARKERS)],
        "linestyle": LINESTYLES[index % len(LINESTYLES)],
    }


@keyword_only
def new_figure(*, ncols: int = 1, nrows: int = 1, width: float = 3.0, height: float = 2.4, squeeze: bool = True,
               **subplot_kw):
    """A figure in the house style, made without pyplot (no GUI backend, nothing to close).

    Parameters
    ----------
    ncols, nrows : int
        Panels across and down.
    width, height : float
        Size of one panel in inches (the figure is ``ncols * width`` by ``nrows * height``);
        the default panel fits a one-column figure of a two-column paper.
    squeeze : bool
        As :func:`matplotlib.pyplot.subplots`: a single Axes for one panel, a 1-d array for a
        single row or column; ``False`` always gives a 2-d array.
    **subplot_kw
        Passed to :meth:`matplotlib.figure.Figure.subplots` (``sharex``, ``sharey``,
        ``subplot_kw``, ``gridspec_kw``).

    Returns
    -------
    fig : matplotlib.figure.Figure
        With constrained layout.
    axes : matplotlib.axes.Axes or numpy.ndarray of them
    """
    from matplotlib.figure import Figure

    ncols, nrows = integer(ncols, "ncols"), integer(nrows, "nrows")
    for value, what in ((width, "width"), (height, "height")):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not 0 < value < 100:
            raise ParameterError(f"{what} must be a panel size in inches, between 0 and 100; got {value!r}")
    with house_style():
        fig = Figure(figsize=(float(width) * ncols, float(height) * nrows))
        axes = fig.subplots(nrows, ncols, squeeze=squeeze, **subplot_kw)
        for ax in np.atleast_1d(axes).flat:
            # tick labels are made lazily at draw time, maybe outside the style: fix their size now
            ax.tick_params(labelsize=STYLE["xtick.labelsize"])
    return fig, axes


def plain_text(text) -> str:
    """``text`` as matplotlib shows it literally: every ``$`` escaped, so a user's title or label
    (``'$\\frac{1}{$'``, ``'cost $5 or $6'``) is never parsed as mathtext."""
    return str(text).replace("\\$", "$").replace("$", "\\$")


def literal_unparsable_text(fig) -> list[str]:
    """Show literally every text of ``fig`` that matplotlib could not parse as mathtext; return those texts.

    A text with an even number of unescaped ``$`` is mathtext to matplotlib, and one that does
    not parse (a model name or unit label written in a file: ``$\\frac{1}{$``) would stop the
    figure from being drawn at all. Each such text is escaped with :func:`plain_text` instead;
    mathtext that parses (the house labels, ``$\\beta_{enc}$``) is kept.
    """
    from matplotlib.mathtext import MathTextParser
    from matplotlib.text import Text

    parser, changed = MathTextParser("path"), []
    for artist in fig.findobj(Text):
        text = artist.get_text()
        dollars = text.count("$") - text.count("\\$")
        if dollars < 2 or dollars % 2 or not artist.get_parse_math():
            continue
        try:
            parser.parse(text, dpi=72, prop=artist.get_fontproperties())
        except ValueError:  # pyparsing's ParseException is a ValueError in matplotlib's mathtext
            artist.set_text(plain_text(text))
            changed.append(text)
    return changed


@keyword_only
def save_figure(fig, path, *, pdf: bool = False) -> Path:
    """Write ``fig`` as PNG to ``path`` (and as PDF beside it), atomically, in the house style.

    Both files are rendered to temporary files next to their targets and renamed into place
    only when both are complete: on any error neither target changes and nothing is left behind.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    path : str or Path
        The PNG file; its suffix must be ``.png``.
    pdf : bool
        Also write ``path`` with suffix ``.pdf`` (vector graphics for a paper).

    Returns
    -------
    pathlib.Path
        The PNG file.
    """
    from matplotlib.figure import Figure

    if not isinstance(fig, Figure):
        raise ParameterError(f"save_figure needs a matplotlib Figure; got {type(fig).__name__}")
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise ParameterError(f"save_figure writes PNG (and a PDF beside it with pdf=True): the path must end in "
                             f".png; got {str(path)!r}")
    literal_unparsable_text(fig)
    with house_style(), atomic_write(path, suffix=".png") as png:
        fig.savefig(png, format="png")
        if pdf:  # nested: a failed PDF also discards the PNG
            with atomic_write(path.with_suffix(".pdf"), suffix=".pdf") as vector:
                fig.savefig(vector, format="pdf")
    return path
