"""``icl-cmr bench``: timings of ours against reference implementations, side by side."""
from __future__ import annotations

import json
import sys

from cmr.errors import DataSourceError

HELP = "time our implementations against the reference ones (psifr, cymr, the study's code)"


def register(sub):
    from ..bench import BENCHMARKS

    p = sub.add_parser(
        "bench",
        help=HELP,
        description=(
            "Time our implementations against reference implementations in the same process: "
            "medians of several runs after warm-up (numba compilation is excluded and reported "
            "separately as first_call_s where it applies). ratio = reference_s / ours_s (- where a "
            "benchmark has no reference). Numbers are reported, never checked against a limit.\n\n"
            f"Benchmarks: {', '.join(BENCHMARKS)}."
        ),
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run (default: all)")
    p.add_argument("--json", action="store_true", help="print one JSON object per line")
    p.add_argument("--repeats", type=int, default=7, help="timed runs per side (default 7)")
    p.set_defaults(func=run)


def run(args) -> int:
    from .. import bench

    names = args.names or list(bench.BENCHMARKS)
    unknown = [n for n in names if n not in bench.BENCHMARKS]
    if unknown:
        raise DataSourceError(
            f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(bench.BENCHMARKS)}"
        )
    for name in names:
        result = bench.get(name)(repeats=args.repeats)
        if args.json:
            print(json.dumps(result, sort_keys=False), flush=True)
        else:
            extra = {k: v for k, v in result.items() if k not in ("name", "ours_s", "reference", "reference_s", "ratio")}
            print(
                f"{result['name']:<22} ours {result['ours_s']*1e3:10.3f} ms   "
                f"{result['reference']:<28} {_ms(result['reference_s'])}   "
                f"ratio {_ratio(result['ratio'])}   {extra}",
                file=sys.stdout,
                flush=True,
            )
    return 0


def _ms(seconds) -> str:
    """Seconds as milliseconds in a fixed width; ``-`` where there is no reference (None)."""
    return f"{'-':>13}" if seconds is None else f"{seconds*1e3:10.3f} ms"


def _ratio(value) -> str:
    return f"{'-':>9}" if value is None else f"{value:8.1f}x"
