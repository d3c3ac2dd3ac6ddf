"""``icl-cmr spc``: the serial position curve of free-recall data, per subject, pooled or per list."""
from __future__ import annotations

from .options import RECALL_SOURCES

HELP = "serial position curve (recall probability by study position) of free-recall data"

DESCRIPTION = f"""\
Compute the serial position curve (SPC) of free-recall data: for each serial position
(1 = the first item studied), the share of lists in which the item studied there was
recalled, at any output position. Intrusions do not count and a repeated recall counts
once (the rule of psifr's spc, whose results this reproduces exactly). Primacy shows as a
high start of the curve, recency as a high end.

{RECALL_SOURCES}
The output holds, per subject (or pooled, or per list) and serial position: prob (recall
probability), actual (lists in which the position was recalled) and possible (lists in
which it was studied). Its extension picks the format: .nc (netCDF with provenance), .csv
or .parquet (one row per subject and serial position: subject, serial_position, prob,
actual, possible).

Examples:
  icl-cmr spc psifr:Morton2013 -o spc.csv
  icl-cmr spc my_experiment.csv --pooled -o spc.nc
"""


def register(sub):
    from .options import add_recall_command

    add_recall_command(sub, "spc", HELP, DESCRIPTION, "curve", run)


def run(args) -> int:
    from cmr import spc
    from .options import describe_units, write_recall_analysis

    curve, events, path = write_recall_analysis(args, spc)
    mean = curve["prob"].mean([d for d in curve["prob"].dims if d != "serial_position"])
    print(f"wrote {path}: serial position curve of {args.source} ({describe_units(curve, events)}, "
          f"{curve.sizes['serial_position']} positions); mean recall probability {float(mean[0]):.2f} "
          f"at the first position, {float(mean[-1]):.2f} at the last")
    return 0
