"""``icl-cmr reproduce NAME``: rerun one of the comparisons and recoveries documented in docs/."""
from __future__ import annotations

import argparse
import importlib

HELP = "rerun a documented comparison or parameter recovery (the tables and figures of docs/)"

#: NAME -> (module of icl_cmr.analyses that computes it, one line on what it is, what it writes)
ANALYSES = {
    "published-fits": (
        "reproduce.published_fits",
        "CMR (paper, lsq) and Gaussian fits of every published head profile and of human lag-CRPs",
        "a table of docs/fitting.md (stdout; -o TABLE.md); --fits-dir DIR: the fits (.nc)",
    ),
    "human-comparison": (
        "reproduce.human_comparison",
        "fitted CMR parameters of heads, of human subjects and of the literature, side by side",
        "a table of docs/fitting.md (stdout; -o TABLE.md)",
    ),
    "null-shares": (
        "reproduce.null_shares",
        "shares of heads and subjects that are CMR-like beyond chance (permuted and smooth nulls)",
        "the table of docs/null-models.md (stdout; -o TABLE.md)",
    ),
    "recovery": (
        "reproduce.recovery",
        "parameter recovery of textbook CMR: simulate from known parameters, fit them back",
        "-o OUT.nc: the recall_fit dataset with true values; --figure PNG; a JSON line",
    ),
    "semantic-recovery": (
        "reproduce.semantic_recovery",
        "parameter recovery of semantic CMR on the Morton2013 study lists",
        "-o OUT.nc: the recall_fit dataset with true values; a JSON line",
    ),
    "model-comparison": (
        "reproduce.model_comparison",
        "localist vs semantic vs category CMR: likelihood, AIC, cross-validation, predictive check",
        "-o DIR: fits, cross-validations, comparison.md, checks (.nc); --figure PNG",
    ),
}

DESCRIPTION = """\
Rerun one of the study's documented analyses from the installed data (the study's published
head profiles and CMR grid, the bundled recall data sets) and write its table or dataset.
Each NAME has its own options: icl-cmr reproduce NAME --help.

What each NAME writes:
""" + "".join(f"  {name:<18} {writes}\n" for name, (_, _, writes) in ANALYSES.items()) + """
Run times at the defaults on 2 cores: published-fits about 70 s, human-comparison about 30 s,
semantic-recovery about 3 minutes, null-shares about 16 minutes, model-comparison about 40
minutes; recovery grows with --sets, --lists and the number of --free parameters.

Examples:
  icl-cmr reproduce published-fits -o fitting_table.md
  icl-cmr reproduce null-shares --no-smollm2 -o null_table.md
  icl-cmr reproduce recovery --sets 24 --lists 96 --free B_enc,B_rec,T -o recovery.nc
"""


class _AnalysisParser(argparse.ArgumentParser):
    """The parser of one NAME. Its options come from the analysis module, imported only when NAME
    is parsed or its help is shown, so that ``icl-cmr --help`` and the other commands never load it."""

    def __init__(self, *args, module: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.analysis_module = module
        self.options_added = False

    def load_analysis(self):
        module = importlib.import_module(f"icl_cmr.analyses.{self.analysis_module}")
        if not self.options_added:
            self.options_added = True
            module.add_arguments(self)
            self.description = module.__doc__
        return module

    def parse_known_args(self, args=None, namespace=None):
        self.load_analysis()
        namespace, extras = super().parse_known_args(args, namespace)
        derive = getattr(namespace, "derived_defaults", None)
        if derive is not None:  # defaults that depend on other options (a figure next to -o)
            derive(namespace)
        return namespace, extras

    def format_help(self):
        self.load_analysis()
        return super().format_help()

    def format_usage(self):
        self.load_analysis()
        return super().format_usage()


def register(sub):
    parser = sub.add_parser("reproduce", help=HELP, description=DESCRIPTION,
                            formatter_class=argparse.RawDescriptionHelpFormatter)

    def one_line_error(message):  # an unknown NAME: one line naming the choices, without the usage
        parser.exit(2, f"{parser.prog}: error: {message}; icl-cmr reproduce --help describes each\n")

    parser.error = one_line_error
    names = parser.add_subparsers(dest="analysis", metavar="NAME", required=True, parser_class=_AnalysisParser,
                                  title="analyses")
    for name, (module, line, _) in ANALYSES.items():
        analysis = names.add_parser(name, help=line, module=module,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
        analysis.set_defaults(func=run)


#: the smallest value of each count option of the NAMEs (``--subjects 0`` is every subject; a
#: correlation of true and recovered values needs two --sets)
COUNT_MINIMUMS = {"sets": 2, "lists": 1, "list_length": 1, "jobs": 1, "seed": 0, "n_null": 1, "subjects": 0,
                  "folds": 2, "rep": 1, "maxiter": 1}


def run(args) -> int:
    from .options import check_counts

    check_counts(args, **{name: low for name, low in COUNT_MINIMUMS.items() if hasattr(args, name)})
    module, _, _ = ANALYSES[args.analysis]
    return int(importlib.import_module(f"icl_cmr.analyses.{module}").run(args) or 0)
