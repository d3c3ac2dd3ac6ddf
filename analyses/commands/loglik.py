"""``icl-cmr loglik``: log-likelihood of free-recall data under CMR (cymr-exact)."""
from __future__ import annotations

HELP = "log-likelihood of free-recall sequences under textbook CMR (equal to cymr's)"

DESCRIPTION = """\
Score every recall sequence of a free-recall data set under textbook CMR (Polyn, Norman &
Kahana 2009; Morton & Polyn 2016), exactly as cymr's CMR().likelihood with config_loc_cmr
does: intrusions and repeated recalls are removed, each remaining correct recall and the
final stop are scored, and every event probability is floored at 1e-5 before the log.

SOURCE is a bundled data set (psifr:Morton2013, psifr:peers_notask, cymr:Morton2013_mixed)
or a CSV file in psifr's long format (subject, list, trial_type = study|recall, position, item).

PARAMS is a JSON file with one object of all 14 parameters in cymr's names:
  {"Lfc": 0.15, "Lcf": 0.15, "P1": 0.2, "P2": 2, "B_enc": 0.7, "B_start": 0.3,
   "B_rec": 0.9, "T": 0.1, "X1": 0.001, "X2": 0.25, "Afc": 0, "Acf": 0, "Dfc": 0.85, "Dcf": 0.85}
(docs/parameters.md lists their meanings and bounds), or one such object per subject
({"1": {...}, "2": {...}}), or a fit written by icl-cmr fit-recall (.nc): each subject is then
scored with its own parameters. With --patterns (semantic / category CMR, see icl-cmr
fit-recall) the pattern weights Sfc, Scf, Sff, Cfc, Ccf may be given too (default 0). Prints one JSON object:
{"total_logl": ..., "n": ..., "per_subject": {"<subject>": {"logl": ..., "n": ...}, ...}}
where n counts the scored events. A NaN total is printed as null with a warning, never
replaced by a number.

Example:
  icl-cmr loglik cymr:Morton2013_mixed --params params.json
"""


PATTERN_KINDS = {"semantic": dict(similarity=True, categories=False),
                 "category": dict(similarity=False, categories=True),
                 "semantic+category": dict(similarity=True, categories=True)}


def register(sub):
    import argparse

    p = sub.add_parser(
        "loglik", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("source", metavar="SOURCE", help="bundled data set name or a psifr-format CSV file")
    p.add_argument("--params", required=True, metavar="PARAMS.json|FITS.nc",
                   help="JSON parameters (one set or one per subject) or a recall_fit file")
    add_patterns(p)
    p.add_argument(
        "--pool-size", type=int, default=None, metavar="N",
        help="cymr pool size for a pool-sized context (default: list-sized; equal when Afc = Acf = 0)",
    )
    p.set_defaults(func=run)


def add_patterns(parser):
    """The ``--patterns`` and ``--feature-layer`` options (semantic / category CMR)."""
    parser.add_argument("--patterns", default=None, choices=sorted(PATTERN_KINDS),
                        help="item patterns of SOURCE's pool: semantic similarities and/or category units")
    parser.add_argument("--feature-layer", default="segment", choices=("segment", "sublayer"),
                        help="category units in the item layer of context or in a sublayer (default segment)")


def load_patterns(args):
    """Item patterns named by ``--patterns`` for the data set ``args.source`` (None without)."""
    if args.patterns is None:
        return None
    from icl_cmr.adapters.item_pools import load_item_patterns

    return load_item_patterns(args.source, feature_layer=args.feature_layer, **PATTERN_KINDS[args.patterns])


def read_params_json(path):
    """Parameter dict from a JSON file; typed errors for a missing or malformed file."""
    import json
    from pathlib import Path

    from cmr.errors import DataSourceError, FileFormatError, ParameterError

    path = Path(path)
    if not path.is_file():
        raise DataSourceError(f"parameter file not found: {str(path)!r}")
    try:
        params = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise FileFormatError(f"{str(path)!r} is not valid JSON: {exc}") from exc
    if not isinstance(params, dict):
        raise ParameterError(f"{str(path)!r} must hold one JSON object of name: value; got {type(params).__name__}")
    return params


def _number(value):
    import math

    return None if math.isnan(value) else float(value)


def run(args) -> int:
    import json

    from icl_cmr.adapters.recall_data import load_recall_data
    from cmr.textbook.likelihood import log_likelihood

    from cmr.io import load_dataset
    if str(args.params).endswith(".nc"):
        params = load_dataset(args.params, kind="recall_fit")
    else:
        params = read_params_json(args.params)
    events = load_recall_data(args.source)
    result = log_likelihood(events, params, by="subject", pool_size=args.pool_size, patterns=load_patterns(args))
    per_subject = {
        str(subject): {"logl": _number(logl), "n": int(n)}
        for subject, logl, n in zip(result["subject"].values, result["logl"].values, result["n"].values)
    }
    print(json.dumps({"total_logl": _number(result.attrs["total_logl"]), "n": result.attrs["n"],
                      "per_subject": per_subject}))
    return 0
