"""A property-testing kit for CMR: hypothesis strategies and an invariant suite for any model.

Strategies (:mod:`cmr.testing.strategies`; hypothesis is imported only when one is called)::

    from cmr.testing import recall_matrices, recall_tables, events_datasets
    from cmr.testing import textbook_parameters, paper_parameters, lag_profiles

The invariant suite (:mod:`cmr.testing.invariants`) checks a model given as plain callables
(:class:`RecallModel`, :mod:`cmr.testing.model`) and raises one ``AssertionError`` with a
report::

    model = cmr.testing.RecallModel(event_probabilities=..., log_likelihood=..., simulate=...,
                                    textbook=True, rtol=1e-5, atol=1e-6)
    cmr.testing.check_recall_model(model)

:class:`~cmr.testing.examples.PlainCMR` is a readable textbook CMR in plain numpy, the worked
example of docs/testing-cmr.md; :func:`~cmr.testing.reference.teacher_forced_reference` is the
plain numpy teacher-forced profile of the paper's variant that the kernels are checked against.
``import cmr`` does not import this package.
"""
from .examples import PlainCMR as PlainCMR
from .invariants import CHECKS as CHECKS
from .invariants import applicable_checks as applicable_checks
from .invariants import check_recall_model as check_recall_model
from .invariants import run_check as run_check
from .model import TEXTBOOK_EXAMPLES as TEXTBOOK_EXAMPLES
from .model import RecallModel as RecallModel
from .model import per_trial as per_trial
from .model import scored_event_probabilities as scored_event_probabilities
from .model import textbook_event_probabilities as textbook_event_probabilities
from .model import textbook_model as textbook_model
from .reference import teacher_forced_reference as teacher_forced_reference
from .statistics import chi_square_power as chi_square_power
from .strategies import events_datasets as events_datasets
from .strategies import lag_profiles as lag_profiles
from .strategies import paper_parameters as paper_parameters
from .strategies import recall_matrices as recall_matrices
from .strategies import recall_sequences as recall_sequences
from .strategies import recall_tables as recall_tables
from .strategies import textbook_parameters as textbook_parameters

__all__ = [
    # strategies
    "recall_sequences",
    "recall_matrices",
    "recall_tables",
    "events_datasets",
    "textbook_parameters",
    "paper_parameters",
    "lag_profiles",
    # the invariant suite
    "RecallModel",
    "per_trial",
    "scored_event_probabilities",
    "CHECKS",
    "applicable_checks",
    "check_recall_model",
    "run_check",
    "chi_square_power",
    # reference and example models
    "textbook_model",
    "textbook_event_probabilities",
    "TEXTBOOK_EXAMPLES",
    "PlainCMR",
    "teacher_forced_reference",
]
