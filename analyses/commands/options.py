"""Options shared by the commands, so each idea has one name and one parser everywhere."""
from __future__ import annotations

import argparse

from cmr.io import RESULT_FORMATS

__all__ = ["parse_lags", "add_lags", "add_output", "OUTPUT_HELP"]

OUTPUT_HELP = "output file; its extension picks the format: " + "; ".join(
    f"{ext} {what}" for ext, what in RESULT_FORMATS.items()
)


def parse_lags(text: str):
    """``K`` (lags -K..K), ``LO:HI`` (inclusive) or ``a,b,c`` -> an int or a list of ints."""
    try:
        text = text.strip()
        if ":" in text:
            low, high = (int(part) for part in text.split(":"))
            if high < low:
                raise ValueError
            return list(range(low, high + 1))
        if "," in text:
            return [int(part) for part in text.split(",") if part.strip()]
        value = int(text)
        if value < 0:
            raise ValueError
        return value
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"lags must be K (lags -K..K), LO:HI (write --lags=-5:5) or a comma list like -2,-1,1,2; got {text!r}"
        ) from None


def add_lags(parser, default, what: str) -> None:
    """The lag window option, ``--lags``."""
    shown = "every possible lag" if default is None else default
    parser.add_argument("--lags", type=parse_lags, default=default, metavar="K|LO:HI|A,B,...",
                        help=f"{what}: K for -K..K, LO:HI, or a comma list (default: {shown})")


def add_output(parser, metavar: str = "OUT.nc") -> None:
    """The ``-o/--output`` option of a command that writes one result."""
    parser.add_argument("-o", "--output", required=True, metavar=metavar, help=OUTPUT_HELP)
