"""Options shared by the commands, so each idea has one name and one parser everywhere.

The item-pool options of the recall fits live in :mod:`._item_options` and are shared from here;
commands import every shared option from this module."""
from __future__ import annotations

import argparse

from cmr.io import RESULT_FORMATS

from ._item_options import add_item_files, add_patterns, item_patterns_of, model_patterns, pool_matched_to_study

__all__ = [
    "parse_lags",
    "add_lags",
    "add_output",
    "add_profile_fit_options",
    "profile_fit_lags",
    "add_patterns",
    "add_cluster_options",
    "cluster_of",
    "add_item_files",
    "item_patterns_of",
    "pool_matched_to_study",
    "model_patterns",
    "add_subjects",
    "selected_subjects",
    "add_device",
    "add_recall_source",
    "add_table_options",
    "table_options",
    "add_recall_data_options",
    "recall_data_options",
    "add_grouping",
    "grouping",
    "describe_units",
    "add_recall_command",
    "write_recall_analysis",
    "OUTPUT_HELP",
    "RECALL_SOURCES",
    "check_counts",
    "check_fraction",
]

OUTPUT_HELP = "output file; its extension picks the format: " + "; ".join(
    f"{ext} {what}" for ext, what in RESULT_FORMATS.items()
)

#: what SOURCE means for the commands that read free-recall data (for their --help)
RECALL_SOURCES = """\
SOURCE is a bundled data set or a CSV file in psifr's long format (one row per study or
recall event; columns subject, list, trial_type = study|recall, position, item; a recall
row's position is its output position; other columns are kept; rows of other trial types,
such as distractor, are ignored), psifr's merged (scored) table, or a recall matrix (.npy,
or .npz with arrays recalls and list_length: 1-based serial positions, -1 intrusions, 0
padding; give --list-length for a .npy). Lists numbered again in each session: --list-keys
session. Recalls typed in another case or with spaces: --normalize-items. A lab's own
column names and trial types: --columns subject=subject_id,list=list_num,position=serial_pos,
item=word,trial_type=phase --trial-types study=encoding,recall=retrieval.

Bundled data sets (read from the installed packages, not shipped here):
  psifr:Morton2013       40 subjects x 48 lists x 24 items
  psifr:peers_notask     126 subjects x 28 lists x 16 items (PEERS; the paper's Fig. 4a)
  cymr:Morton2013_mixed  29 subjects x 30 lists x 24 items (needs cymr)
"""

_LAGS_HELP = "K (lags -K..K), LO:HI, or a comma list of lags and LO:HI ranges like -5:-1,1:5"


def parse_lags(text: str):
    """``K`` (lags -K..K), ``LO:HI`` (inclusive) or a comma list of lags and ranges -> an int or a list of ints."""
    try:
        text = text.strip()
        if ":" not in text and "," not in text:
            value = int(text)
            if value < 0:
                raise ValueError
            return value
        lags = []
        for part in filter(None, (piece.strip() for piece in text.split(","))):
            if ":" in part:
                low, high = (int(bound) for bound in part.split(":"))
                if high < low:
                    raise ValueError
                lags.extend(range(low, high + 1))
            else:
                lags.append(int(part))
        if not lags:
            raise ValueError
        return lags
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"lags must be {_LAGS_HELP} (write --lags=-5:5 when it starts with a minus); got {text!r}"
        ) from None


def add_lags(parser, default, what: str) -> None:
    """The lag window option, ``--lags``."""
    shown = "every possible lag" if default is None else default
    parser.add_argument("--lags", type=parse_lags, default=default, metavar="K|LO:HI|A,B,...",
                        help=f"{what}: {_LAGS_HELP} (default: {shown})")


def add_output(parser, metavar: str = "OUT.nc") -> None:
    """The ``-o/--output`` option of a command that writes one result."""
    parser.add_argument("-o", "--output", required=True, metavar=metavar, help=OUTPUT_HELP)


def add_recall_source(parser) -> None:
    """The SOURCE argument of the commands that read free-recall data, and how to read lab exports."""
    parser.add_argument("source", metavar="SOURCE",
                        help="bundled data set name (e.g. psifr:Morton2013) or a psifr-format CSV file")
    add_recall_data_options(parser)


def add_recall_data_options(parser) -> None:
    """How a lab's recall table is read, named as the keywords of cmr.from_table / load_recall_data:
    ``--list-keys``, ``--normalize-items``, ``--list-length``, ``--columns``, ``--trial-types`` and
    ``--max-intrusion-share``."""
    group = parser.add_argument_group("reading a lab's recall table (as cmr.from_table)")
    group.add_argument("--columns", default=None, metavar="NAME=COL,...",
                       help="the table's own column names, as psifr's name=the table's, e.g. subject=subject_id,"
                       "list=list_num,position=serial_pos,item=word,trial_type=phase (default: psifr's names)")
    group.add_argument("--trial-types", default=None, metavar="TYPE=VALUE,...",
                       help="the table's own trial-type values, e.g. study=encoding,recall=retrieval; rows of "
                       "other values are ignored like distractor rows (default: study, recall)")
    group.add_argument("--max-intrusion-share", type=float, default=None, metavar="P",
                       help="the share of recalls matching no studied item of their list above which the table is "
                       "refused as misread (labels or spellings that differ between study and recall rows); 1 "
                       "analyses any table as it is (default: cmr.from_table's, 0.5)")
    add_table_options(group)


def add_table_options(parser) -> None:
    """``--list-keys``, ``--list-length`` and ``--normalize-items``: reading lab exports (as cmr.from_table)."""
    parser.add_argument("--list-keys", default=None, metavar="COL[,COL]",
                        help="columns that with subject and list identify a studied list, e.g. session when "
                        "list numbers start again in each session")
    parser.add_argument("--list-length", type=int, default=None, metavar="N",
                        help="items per list, for a recall-matrix SOURCE (.npy/.npz of 1-based serial positions)")
    parser.add_argument("--normalize-items", action="store_true",
                        help="match recalled to studied words ignoring case and surrounding spaces (default: "
                        "exactly as written)")


def _pairs(text, option: str, example: str) -> dict | None:
    """``A=B,C=D`` -> ``{"A": "B", "C": "D"}``; ParameterError naming the option for anything else."""
    from cmr.errors import ParameterError

    if text is None:
        return None
    pairs = {}
    for part in (piece.strip() for piece in text.split(",")):
        name, sep, value = (s.strip() for s in part.partition("="))
        if not sep or not name or not value or name in pairs:
            raise ParameterError(f"{option} must be distinct NAME=VALUE pairs separated by commas, e.g. {example}; "
                                 f"got {text!r}")
        pairs[name] = value
    return pairs


def recall_data_options(args) -> dict:
    """The keyword arguments of load_recall_data for the recall-data options (only those given, so a
    table read without them goes the way it always went)."""
    keys = getattr(args, "list_keys", None)
    options = {"list_keys": [k.strip() for k in keys.split(",") if k.strip()] if keys else None,
               "normalize_items": bool(getattr(args, "normalize_items", False)),
               "list_length": getattr(args, "list_length", None)}
    columns = _pairs(getattr(args, "columns", None), "--columns", "subject=subject_id,item=word")
    trial_types = _pairs(getattr(args, "trial_types", None), "--trial-types", "study=encoding,recall=retrieval")
    share = getattr(args, "max_intrusion_share", None)
    if share is not None:
        from cmr.checks import probability

        options["max_intrusion_share"] = probability(share, "--max-intrusion-share")
    if columns is not None:
        options["columns"] = columns
    if trial_types is not None:
        options["trial_types"] = trial_types
    return options


#: the earlier name of :func:`recall_data_options`
table_options = recall_data_options


def add_grouping(parser, what: str) -> None:
    """``--pooled`` / ``--per-list``: one ``what`` per subject (default), for everyone, or per list."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--pooled", action="store_true",
                       help=f"one {what} of all subjects' lists together: counts summed over subjects (a lag-CRP is "
                       "sum(actual) / sum(possible)); where a sem is given (the lag-CRP) it is the standard error "
                       "across subjects of the per-subject values, i.e. of their unweighted mean, not of the "
                       "pooled ratio (docs/recall-analyses.md)")
    group.add_argument("--per-list", action="store_true",
                       help=f"one {what} per list (the table gets subject and list columns)")


def grouping(args):
    """The ``by`` argument of the analyses for ``--pooled`` / ``--per-list``."""
    return None if args.pooled else "trial" if args.per_list else "subject"


def describe_units(result, events) -> str:
    """``40 subjects, 1920 lists`` / ``pooled, 1920 lists`` / ``1920 lists``, for a command's summary line."""
    lists = f"{events.sizes['trial']} lists"
    if "subject" in result.dims:
        return f"{result.sizes['subject']} subjects, {lists}"
    return lists if "trial" in result.dims else f"pooled, {lists}"


def add_recall_command(sub, name: str, help: str, description: str, what: str, run):
    """A command ``NAME SOURCE -o OUT [--pooled | --per-list]`` that writes one analysis of recall data."""
    parser = sub.add_parser(name, help=help, description=description,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_recall_source(parser)
    add_output(parser, "OUT.nc")
    add_grouping(parser, what)
    parser.set_defaults(func=run)
    return parser


def write_recall_analysis(args, analysis, **options):
    """Refuse a bad output name, read SOURCE, run ``analysis(events, by=..., **options)``, write it.

    Returns the result, the events and the path written.
    """
    from cmr.io import result_format, write_result
    from ...adapters.recall_data import load_recall_data

    result_format(args.output)
    events = load_recall_data(args.source, **recall_data_options(args))
    result = analysis(events, by=grouping(args), **options)
    return result, events, write_result(result, args.output)


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


def add_profile_fit_options(parser, output_metavar: str) -> None:
    """PROFILES.nc, ``-o``, ``--objective``, ``--grid``, ``--lags`` and ``--variable``: the commands that fit profiles."""
    parser.add_argument("profiles", metavar="PROFILES.nc", help="lag-profile netCDF (heads or subjects)")
    add_output(parser, output_metavar)
    parser.add_argument("--objective", choices=("paper", "lsq"), default="paper",
                        help="fitting objective (default paper)")
    parser.add_argument("--grid", metavar="GRID", default=None, help="CMR grid: a lag-profile .nc or the study's .npz")
    add_lags(parser, None, "lags to fit (default: -5:5; for recall lag-CRPs -5:-1,1:5)")
    parser.add_argument("--variable", default="profile", help="variable of PROFILES.nc to fit (default profile)")


def profile_fit_lags(profiles, args):
    """The lags of ``--lags`` (default: by the kind of profile, as cmr.fitting_lags), refused in the option's words
    when they include lag 0 of a recall lag-CRP."""
    from cmr.errors import ParameterError, ProfileError
    from cmr.profile_fit import fitting_lags

    try:
        return fitting_lags(profiles, lags=args.lags, variable=args.variable)
    except ProfileError:
        raise ParameterError(
            f"{args.profiles} is a recall lag-CRP, which is undefined at lag 0 (no transition has lag 0): "
            "give --lags without 0, e.g. --lags=-5:-1,1:5 (the default)"
        ) from None


def add_fit_spec_options(parser) -> None:
    """``--free``, ``--fixed``, ``--tie`` and ``--bounds``: what a recall fit estimates, holds and ties
    (read by :func:`parse_ties` and :func:`parse_bounds`)."""
    parser.add_argument("--free", required=True, metavar="NAME,NAME,...", help="comma-separated free parameters")
    parser.add_argument("--fixed", default=None, metavar="PARAMS.json", help="JSON object of fixed parameter values")
    parser.add_argument("--tie", action="append", default=[], metavar="NAME=EXPR",
                        help="tie a parameter to an expression of others (repeatable), e.g. B_rec=B_enc")
    parser.add_argument("--bounds", default=None, metavar="NAME=LOW:HIGH,...",
                        help="search bounds overriding the defaults")


def add_cluster_options(parser) -> None:
    """``--scheduler ADDRESS`` or ``--workers N``, and ``--connect-timeout``: the subjects of a fit as tasks
    on a dask cluster (read by :func:`cluster_of`)."""
    from ..cluster import CONNECT_TIMEOUT

    group = parser.add_argument_group("on a dask cluster (pip install 'icl-cmr[analyses]'; same numbers as locally)")
    where = group.add_mutually_exclusive_group()
    where.add_argument("--scheduler", default=None, metavar="ADDRESS",
                       help="run on the workers of a running dask scheduler, e.g. tcp://HOST:8786 (as "
                       "`dask scheduler` prints it)")
    where.add_argument("--workers", type=int, default=None, metavar="N",
                       help="start N dask worker processes on this machine (one thread each) for this fit")
    group.add_argument("--connect-timeout", type=float, default=CONNECT_TIMEOUT, metavar="S",
                       help=f"--scheduler: seconds to wait for it to answer and have a worker (default "
                       f"{CONNECT_TIMEOUT:g})")


def cluster_of(args):
    """The context manager of ``--scheduler`` / ``--workers`` (yields a dask Client, or None without them):
    refuses ``--jobs`` with them (dask workers run one subject per thread) and bad counts, in the options' names."""
    from cmr.errors import ParameterError
    from ..cluster import fit_executor

    check_counts(args, workers=1)
    if not args.connect_timeout > 0:
        raise ParameterError(f"--connect-timeout must be a positive number of seconds; got {args.connect_timeout:g}")
    given = "--scheduler" if args.scheduler is not None else "--workers" if args.workers is not None else None
    if given and args.jobs != 1:
        raise ParameterError(f"--jobs sets threads of this process; with {given} the dask workers run the subjects "
                             f"(one thread each): leave --jobs out; got --jobs {args.jobs}")
    return fit_executor(scheduler=args.scheduler, workers=args.workers, connect_timeout=args.connect_timeout)


def check_counts(args, error=None, **minimums) -> None:
    """Refuse a count option below its minimum, in the option's name: ``check_counts(args, n_words=2)``
    -> ``--n-words must be an integer >= 2; got 0`` (as ParameterError, or ``error``)."""
    from cmr.checks import integer
    from cmr.errors import ParameterError

    for name, minimum in minimums.items():
        value = getattr(args, name)
        if value is not None:
            integer(value, f"--{name.replace('_', '-')}", minimum=minimum, error=error or ParameterError)


def check_fraction(value, option: str) -> float:
    """A share of something, refused unless in (0, 1] (0 would choose nothing)."""
    import math

    from cmr.checks import shown
    from cmr.errors import ParameterError

    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and 0 < value <= 1):
        raise ParameterError(f"{option} must be a share in (0, 1]; got {shown(value)}")
    return float(value)


def parse_bounds(text):
    """``--bounds NAME=LOW:HIGH,...`` -> {name: (low, high)}."""
    from cmr.errors import ParameterError

    bounds = {}
    for part in filter(None, (text or "").split(",")):
        try:
            name, rng = part.split("=")
            low, high = rng.split(":")
            bounds[name.strip()] = (float(low), float(high))
        except ValueError:
            raise ParameterError(f"--bounds entries must look like NAME=LOW:HIGH; got {part!r}") from None
    return bounds


def parse_ties(entries):
    """``--tie NAME=EXPRESSION`` entries -> {name: expression}, or None without any."""
    from cmr.errors import ParameterError

    tied = {}
    for entry in entries:
        name, sep, expression = entry.partition("=")
        if not sep or not name.strip():
            raise ParameterError(f"--tie must look like NAME=EXPRESSION; got {entry!r}")
        tied[name.strip()] = expression.strip()
    return tied or None


def refuse_textbook_options(args, command: str) -> None:
    """ParameterError for an option that --model cmr2 cannot honour, or --session without it."""
    from cmr.errors import ParameterError

    if args.model != "cmr2":
        if args.session is not None:
            raise ParameterError(f"--session labels the sessions of --model cmr2; got --session {args.session!r} "
                                 f"with --model {args.model}")
        return
    given = [option for option, value in (("--patterns", args.patterns), ("--vectors", args.vectors),
                                          ("--similarity", args.similarity), ("--pool-size", args.pool_size),
                                          ("--cv", getattr(args, "cv", None))) if value is not None]
    if given:
        raise ParameterError(f"--model cmr2 is localist with a session-sized context; {command} got "
                             f"{', '.join(given)} (leave them out, or use --model cmr)")


def add_subjects(parser) -> None:
    """``--subjects S,S,...``: only these subjects of SOURCE."""
    parser.add_argument("--subjects", default=None, metavar="S,S,...",
                        help="only these subjects, by their labels in SOURCE (default: every subject)")


def selected_subjects(args, events):
    """``events`` restricted to ``--subjects`` (all without it); RecallDataError naming labels SOURCE lacks."""
    import numpy as np

    from cmr.errors import RecallDataError

    if not getattr(args, "subjects", None):
        return events
    wanted = [s.strip() for s in args.subjects.split(",") if s.strip()]
    labels = events["subject"].values.astype(str)
    unknown = [s for s in wanted if s not in set(labels)]
    if not wanted or unknown:
        known = ", ".join(sorted(set(labels))[:10])
        raise RecallDataError(f"--subjects {args.subjects!r}: no subject {', '.join(map(repr, unknown or wanted))} in "
                              f"{args.source} (subjects: {known}{', ...' if len(set(labels)) > 10 else ''})")
    return events.isel(trial=np.flatnonzero(np.isin(labels, wanted)))
