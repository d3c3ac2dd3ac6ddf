"""``icl-cmr plot``: the standard figure of a result (.nc), written as PNG, PDF or SVG."""
from __future__ import annotations

HELP = "the standard figure of a result (.nc) as PNG, PDF or SVG"

#: output extensions and what each writes
FIGURE_FORMATS = {".png": "PNG at 300 dpi", ".pdf": "PDF (vector, editable text)", ".svg": "SVG (vector)"}

DESCRIPTION = """\
Draw the standard figure of a result of another icl-cmr command (a netCDF file) in the
house style of the figures (docs/figures.md): 7-8 pt text for a 3.3-inch column, a
colour-blind-safe palette whose series also differ by marker and line style, legends
outside the data. The output's extension picks the format:
{formats}

Results and the figure function of icl_cmr.analyses.plots that draws them:
{table}

Every kind of result of cmr is drawn{refused}; a kind registered by another package, or a
variant without a figure (a recall_stat of stat_kind pnr), is refused in one line.

Examples:
  icl-cmr lag-crp psifr:Morton2013 -o crp.nc && icl-cmr plot crp.nc -o crp.pdf
  icl-cmr plot crp.nc --units 1,2,3 --title "Morton 2013, subjects 1-3" -o crp_1-3.png
  icl-cmr plot heads.nc --units L18.H6,L17.H3 -o heads.svg
  icl-cmr plot irt.nc --time-unit s -o irt.png
  icl-cmr plot events.nc --units 1,2 -o recall.png      # events: lag-CRP, SPC and PFR
  icl-cmr plot grid.nc -o grid.pdf                      # a CMR grid: profiles along each parameter
  icl-cmr plot comparison.nc -o comparison.pdf          # per-subject differences to the best model
  icl-cmr plot states.nc --units 1 -o states.png        # CMR's states on subject 1's first list
"""


def _description() -> str:
    from ..plots.standard import NO_STANDARD_FIGURE, STANDARD_FIGURES

    width = max(len(kind) + len(which) + 3 for kind, which, _, _ in STANDARD_FIGURES)
    rows = [f"  {(kind + (f' ({which})' if which else '')).ljust(width)} {function}: {what}"
            for kind, which, function, what in STANDARD_FIGURES]
    formats = "\n".join(f"  {ext}  {what}" for ext, what in FIGURE_FORMATS.items())
    refused = f" (kept as tables: {', '.join(NO_STANDARD_FIGURE)})" if NO_STANDARD_FIGURE else ""
    return DESCRIPTION.format(formats=formats, table="\n".join(rows), refused=refused)


def register(sub):
    import argparse

    p = sub.add_parser("plot", help=HELP, description=_description(),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("result", metavar="RESULT.nc", help="a result of icl-cmr (netCDF)")
    p.add_argument("-o", "--output", required=True, metavar="FIGURE.png",
                   help="the figure; its extension picks the format: " + ", ".join(FIGURE_FORMATS))
    p.add_argument("--units", default=None, metavar="UNITS",
                   help="which units to draw: heads as N (the N top induction heads) or L18.H6,L17.H3; subjects as "
                        "a comma list of their labels (default: the figure's own choice, every subject)")
    p.add_argument("--title", default=None, help="figure title")
    p.add_argument("--time-unit", default=None, metavar="UNIT",
                   help="unit of the recall times of an irt or lag_crl result, e.g. s or ms (default: the unit "
                        "stored in the result, else the name of the recall-time column)")
    p.add_argument("--chance", type=float, default=None, metavar="P",
                   help="chance level of a category_crp result, drawn as a dashed line (default: the level the "
                        "result stores, the same-category share of the items available at each transition)")
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from cmr import load_dataset
    from cmr.errors import FileFormatError
    from cmr.io import atomic_write, check_output

    output = Path(args.output)
    suffix = output.suffix.lower()
    if suffix not in FIGURE_FORMATS:
        raise FileFormatError(f"cannot tell what to draw from the output name {str(output)!r}: its extension must be "
                              f"one of {', '.join(FIGURE_FORMATS)}; got {suffix or 'none'!r}")
    check_output(output)
    result = load_dataset(args.result)

    from ..plots import house_style, literal_unparsable_text, standard_figure
    from ..plots.standard import figure_function

    units = args.units
    if units is not None and units.strip().isdigit() and "layer" in result.dims:
        units = int(units)  # a number of heads
    fig = standard_figure(result, units=units, title=args.title, time_unit=args.time_unit, chance=args.chance)
    literal_unparsable_text(fig)  # a unit or model label of the file that is broken mathtext is shown as written
    with house_style(), atomic_write(output, suffix=suffix) as tmp:
        fig.savefig(tmp, format=suffix[1:])
    print(f"wrote {output}: {figure_function(result)} of the {result.attrs['icl_cmr_kind']} dataset {args.result}")
    return 0
