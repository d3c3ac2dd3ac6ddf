"""``icl-cmr loglik``: log-likelihood of free-recall data under CMR (cymr-exact)."""
from __future__ import annotations

HELP = "log-likelihood of free-recall sequences under textbook CMR (equal to cymr's)"

DESCRIPTION = """\
Score every recall sequence of a free-recall data set under textbook CMR (Polyn, Norman &
Kahana 2009; Morton & Polyn 2016), exactly as cymr's CMR().likelihood with config_loc_cmr
does: intrusions and repeated recalls are removed, each remaining correct recall and the
final stop are scored, and every event probability is floored at 1e-5 before the log.

SOURCE is a bundled data set (psifr:Morton2013, psifr:peers_notask, cymr:Morton2013_mixed)
or a CSV file in psifr's long format (subject, list, trial_type = study|recall, position, item);
a lab's own export reads with --columns, --trial-types, --list-keys and --normalize-items.
--vectors FILE / --similarity FILE: semantic CMR with your own word vectors or similarities.

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

--model cmr2 scores CMR2 (docs/cmr2.md: one network per session, lists in order, prior-list
intrusions scored): PARAMS then holds the 16 CMR2 parameters (the 14 above plus B_distract and
C_thresh), per subject or from icl-cmr fit-recall --model cmr2. --session KEY names the variable
that labels sessions (session for psifr:Morton2013; default: --list-keys, else one session per
subject). --patterns, --vectors, --similarity and --pool-size are refused with it.

Examples:
  icl-cmr loglik cymr:Morton2013_mixed --params params.json
  icl-cmr loglik psifr:Morton2013 --model cmr2 --session session --params cmr2.nc
"""


def register(sub):
    import argparse

    from .options import add_patterns, add_recall_data_options

    p = sub.add_parser(
        "loglik", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("source", metavar="SOURCE", help="bundled data set name or a psifr-format CSV file")
    add_recall_data_options(p)
    p.add_argument("--params", required=True, metavar="PARAMS.json|FITS.nc",
                   help="JSON parameters (one set or one per subject) or a recall_fit file")
    add_patterns(p)
    p.add_argument(
        "--pool-size", type=int, default=None, metavar="N",
        help="cymr pool size for a pool-sized context (default: list-sized; equal when Afc = Acf = 0)",
    )
    p.add_argument("--model", choices=("cmr", "cmr2"), default="cmr",
                   help="textbook CMR (default) or CMR2: sessions of lists with prior-list intrusions")
    p.add_argument("--session", default=None, metavar="KEY",
                   help="--model cmr2: the variable that labels sessions (e.g. session)")
    p.set_defaults(func=run)


def _number(value):
    import math

    return None if math.isnan(value) else float(value)


def run(args) -> int:
    import json

    from ...adapters.recall_data import load_recall_data
    from .options import item_patterns_of, recall_data_options, refuse_textbook_options
    from cmr.textbook.likelihood import log_likelihood
    from cmr.textbook.parameters import read_parameters

    from cmr.io import load_dataset
    from cmr.errors import ParameterError

    refuse_textbook_options(args, "loglik")
    if str(args.params).endswith(".nc"):
        params = load_dataset(args.params, kind="recall_fit")
        fitted = params.attrs.get("model", "cmr")
        if fitted != args.model:
            raise ParameterError(f"--params {args.params!r} is a fit of --model {fitted}; got --model {args.model}")
    else:
        params = read_parameters(args.params)
    events = load_recall_data(args.source, **recall_data_options(args))
    if args.model == "cmr2":
        from cmr.cmr2 import log_likelihood as cmr2_log_likelihood

        result = cmr2_log_likelihood(events, params, session=args.session, by="subject")
    else:
        patterns = item_patterns_of(args, events)
        result = log_likelihood(events, params, by="subject", pool_size=args.pool_size, patterns=patterns)
    per_subject = {
        str(subject): {"logl": _number(logl), "n": int(n)}
        for subject, logl, n in zip(result["subject"].values, result["logl"].values, result["n"].values)
    }
    print(json.dumps({"total_logl": _number(result.attrs["total_logl"]), "n": result.attrs["n"],
                      "per_subject": per_subject}))
    return 0
