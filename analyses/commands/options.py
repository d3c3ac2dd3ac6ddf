"""Options shared by the commands, so each idea has one name and one parser everywhere."""
from __future__ import annotations

import argparse

from cmr.io import RESULT_FORMATS

__all__ = ["parse_lags", "add_lags", "add_output", "add_device", "OUTPUT_HELP"]

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


def add_device(parser, default_device: str = "auto", default_dtype: str = "float32") -> None:
    """Where a language model runs and in which dtype: ``--device`` and ``--dtype``.

    Both are checked when the model loads (an unavailable device or unknown dtype is one
    error line naming what is available).
    """
    parser.add_argument("--device", default=default_device, metavar="DEVICE",
                        help="where the model runs: cpu, cuda, cuda:N, mps, or auto (the first CUDA GPU if "
                        f"there is one, else cpu) (default {default_device})")
    parser.add_argument("--dtype", default=default_dtype, metavar="DTYPE",
                        help="dtype of the weights and of the forward passes: float32, bfloat16 or float16 "
                        f"(default {default_dtype}). bfloat16 halves the memory: use it for 7-8B models "
                        "(Llama-3-8B, Qwen-7B, Mistral-7B) on a 24 GB GPU, where float32 weights alone "
                        "need ~32 GB. Head profiles in bfloat16 differ slightly from float32 (attention "
                        "values keep ~3 significant digits; see docs/heads.md). float16 also runs on the "
                        "CPU, slowly")
