"""``icl-cmr pfr``: the probability of first recall of free-recall data, per subject, pooled or per list."""
from __future__ import annotations

from icl_cmr.analyses.commands.options import RECALL_SOURCES

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
    import argparse

    from icl_cmr.analyses.commands.options import add_grouping, add_output, add_recall_source

    p = sub.add_parser("pfr", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_recall_source(p)
    add_output(p, "OUT.nc")
    add_grouping(p, "curve")
    p.set_defaults(func=run)


def run(args) -> int:
    import numpy as np

    from cmr import pfr, write_result
    from cmr.io import result_format
    from icl_cmr.adapters.recall_data import load_recall_data
    from icl_cmr.analyses.commands.options import describe_units, grouping

    result_format(args.output)
    events = load_recall_data(args.source)
    first = pfr(events, by=grouping(args))
    path = write_result(first, args.output)
    mean = first["prob"].mean([d for d in first["prob"].dims if d != "serial_position"])
    peak = int(np.argmax(mean.fillna(-1).values))
    print(f"wrote {path}: probability of first recall of {args.source} ({describe_units(first, events)}); "
          f"most often first: position {int(mean['serial_position'][peak])} "
          f"(mean probability {float(mean[peak]):.2f})")
    return 0
