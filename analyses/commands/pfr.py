"""``icl-cmr pfr``: the probability of first recall of free-recall data, per subject, pooled or per list."""
from __future__ import annotations

from .options import RECALL_SOURCES

HELP = "probability of first recall by study position of free-recall data"

DESCRIPTION = f"""\
Compute the probability of first recall (PFR) of free-recall data: for each serial position
(1 = the first item studied), the share of lists whose first correct recall was the item
studied there. Intrusions before the first correct recall are skipped, and lists with no
correct recall are left out (the rule of psifr's pnr at output 1, whose results this
reproduces exactly). Free recall usually starts at the end of the list (recency) or at its
start (primacy).

{RECALL_SOURCES}
The output holds, per subject (or pooled, or per list) and serial position: prob, actual
(lists whose first recall was this position) and possible (lists in which it was available
for the first recall). Its extension picks the format: .nc (netCDF with provenance), .csv
or .parquet (one row per subject and serial position: subject, serial_position, prob,
actual, possible). cmr.pnr gives the same for every output position.

Examples:
  icl-cmr pfr psifr:Morton2013 -o pfr.csv
  icl-cmr pfr my_experiment.csv --pooled -o pfr.nc
"""


def register(sub):
    from .options import add_recall_command

    add_recall_command(sub, "pfr", HELP, DESCRIPTION, "curve", run)


def run(args) -> int:
    import numpy as np

    from cmr import pfr
    from .options import describe_units, write_recall_analysis

    first, events, path = write_recall_analysis(args, pfr)
    mean = first["prob"].mean([d for d in first["prob"].dims if d != "serial_position"])
    peak = int(np.argmax(mean.fillna(-1).values))
    print(f"wrote {path}: probability of first recall of {args.source} ({describe_units(first, events)}); "
          f"most often first: position {int(mean['serial_position'][peak])} (mean probability {float(mean[peak]):.2f})")
    return 0
