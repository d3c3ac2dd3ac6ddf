"""A free-recall model as plain callables, the form the invariant suite checks.

A model is up to three functions; give whichever your model has. Items are 1-based labels;
``recalls`` is always a recall matrix ``(n_trials, n_outputs)`` in the EMBAM / jaxcmr
convention whose rows are correct first recalls followed by 0 padding; ``params`` is whatever
mapping your model takes (cymr's names when the model declares itself textbook CMR).

``event_probabilities(params, recalls, list_length) -> (n_trials, n_outputs + 1, list_length + 1)``
    ``[t, k]`` holds the probability of every possible next event after the first ``k``
    recalls of trial ``t``: column 0 stop, column ``i`` the recall of item ``i`` (jaxcmr's
    ``outcome_probabilities``). Entries past a trial's last recall are ignored. A model of
    one sequence at a time becomes this with :func:`per_trial`.
``log_likelihood(params, recalls, list_length) -> (n_trials,)``
    The log-probability of each trial's recalls and its final stop.
``simulate(params, list_length, n_trials, rng) -> (n_trials, n_outputs)``
    A recall matrix of simulated trials; ``rng`` is a ``numpy.random.Generator``.

A model that identifies items by label (as cymr and jaxcmr do: items are studied one at a
time, in any order) sets ``takes_presentation=True`` and accepts a keyword
``presentation``, the item label studied at each serial position (a permutation of 1..n,
shared by the trials of a call); ``recalls`` and the columns then name item labels. The
relabelling check uses it.

Arrays may come back as any array type numpy can read (JAX, PyTorch on CPU): the suite
calls ``numpy.asarray`` on every result.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..deprecation import keyword_only
from ..errors import ParameterError
from ..events import from_recall_matrix
from ..textbook import _kernels
from ..textbook.likelihood import log_likelihood as textbook_log_likelihood
from ..textbook.parameters import default_parameters
from ..textbook.simulate import simulate_recalls

__all__ = ["RecallModel", "per_trial", "scored_event_probabilities", "textbook_model", "textbook_event_probabilities",
           "TEXTBOOK_EXAMPLES"]

#: Parameter sets the textbook checks always include: cymr's Morton2013_mixed defaults, a
#: strong primacy gradient with pre-experimental weights and early stopping, and a sharp choice
#: rule whose rare events fall below the likelihood's 1e-5 floor.
TEXTBOOK_EXAMPLES = (
    default_parameters(),
    dict(default_parameters(), T=0.3, Lfc=0.9, Lcf=0.6, Acf=0.2, Dfc=0.1, Dcf=0.3, P1=3.0, P2=0.5,
         B_start=0.9, B_rec=0.2, X1=0.05, X2=0.3, B_enc=0.2),
    dict(default_parameters(), T=0.05, Lfc=0.3, Lcf=1.0, Dfc=0.7, Dcf=0.0, P1=5.0, P2=0.2,
         B_start=0.0, B_rec=0.95, X1=1e-8, X2=0.5, B_enc=0.99),
)


@dataclass(frozen=True)
class RecallModel:
    """A free-recall model to check, as plain callables (see the module docstring).

    Parameters
    ----------
    name : str
        Shown in reports.
    event_probabilities, log_likelihood, simulate : callable, optional
        The model; at least one of the first two.
    parameters : hypothesis strategy of parameter mappings, optional
        What the property checks draw; default ``textbook_parameters()`` for a textbook model.
    examples : sequence of mappings
        Parameter sets always checked; the simulation check runs on these (default: the
        textbook examples for a textbook model, else three drawn from ``parameters``).
    textbook : bool
        The model claims to be textbook CMR (Polyn et al. 2009, parameterised as cymr): the
        reference check compares it with ``cmr.log_likelihood``, exact against cymr.
    pool_size : int, optional
        cymr's pool size for that comparison (default: a list-sized context).
    takes_presentation : bool
        The callables accept ``presentation=`` (see the module docstring).
    event_floor : float, optional
        The floor your ``log_likelihood`` puts under each event probability before the log
        (cymr: 1e-5); default 1e-5 for a textbook model, else 0.
    rtol, atol : float
        Tolerance of every numerical comparison: ``|x - expected| <= atol + rtol |expected|``
        (sums of probabilities against 1 too). A float32 port needs about ``rtol=1e-5,
        atol=1e-6``.
    list_lengths : (int, int)
        Range of list lengths the property checks draw.
    """

    name: str = "model"
    event_probabilities: Callable | None = None
    log_likelihood: Callable | None = None
    simulate: Callable | None = None
    parameters: Any = None
    examples: Sequence[Mapping[str, float]] = field(default=())
    textbook: bool = False
    pool_size: int | None = None
    takes_presentation: bool = False
    event_floor: float | None = None
    rtol: float = 1e-9
    atol: float = 1e-12
    list_lengths: tuple[int, int] = (1, 8)

    def __post_init__(self):
        if self.event_probabilities is None and self.log_likelihood is None:
            raise ParameterError(f"model {self.name!r} needs event_probabilities or log_likelihood (or both)")
        for name in ("event_probabilities", "log_likelihood", "simulate"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise ParameterError(f"{name} of model {self.name!r} must be callable; got {type(value).__name__}")
        if not (self.rtol >= 0 and self.atol >= 0):
            raise ParameterError(f"rtol and atol must be >= 0; got {self.rtol!r}, {self.atol!r}")
        low, high = self.list_lengths
        if not (1 <= low <= high):
            raise ParameterError(f"list_lengths must be (low, high) with 1 <= low <= high; got {self.list_lengths!r}")
        if self.parameters is None and not self.textbook and not self.examples:
            raise ParameterError(f"model {self.name!r} needs parameters (a hypothesis strategy) or examples")

    @property
    def floor(self) -> float:
        """The event floor in force (the declared one, or the textbook's / none by default)."""
        if self.event_floor is not None:
            return float(self.event_floor)
        return _kernels.EVENT_FLOOR if self.textbook else 0.0

    def parameter_examples(self) -> list[dict]:
        """The fixed parameter sets (the textbook ones for a textbook model without its own)."""
        if self.examples:
            return [dict(p) for p in self.examples]
        return [dict(p) for p in TEXTBOOK_EXAMPLES] if self.textbook else []

    def parameter_strategy(self):
        """The hypothesis strategy of parameter sets (textbook CMR's by default)."""
        if self.parameters is not None:
            return self.parameters
        from .strategies import textbook_parameters

        if self.textbook:
            return textbook_parameters()
        from .strategies import hypothesis_strategies

        return hypothesis_strategies().sampled_from(self.parameter_examples())


def per_trial(sequence_probabilities: Callable) -> Callable:
    """The batched ``event_probabilities`` of a function of one recall sequence.

    ``sequence_probabilities(params, sequence, list_length, **keywords)`` returns the
    ``(len(sequence) + 1, list_length + 1)`` event probabilities of one sequence (a 1-D int
    array of item labels); the result takes a recall matrix and stacks them, NaN-padded.
    """

    def event_probabilities(params, recalls, list_length, **keywords):
        matrix = np.asarray(recalls)
        out = np.full((matrix.shape[0], matrix.shape[1] + 1, int(list_length) + 1), np.nan)
        for t, row in enumerate(matrix):
            sequence = row[row > 0]
            out[t, : sequence.size + 1] = np.asarray(sequence_probabilities(params, sequence, list_length, **keywords))
        return out

    return event_probabilities


def scored_event_probabilities(score: Callable, recalls, list_length) -> np.ndarray:
    """Every event probability along each row of a recall matrix, from a scorer of whole sequences.

    Each possible next event after each prefix of each row (stopping, or recalling an item not
    yet recalled) becomes the last event of a sequence; all of them are scored in one call.

    Parameters
    ----------
    score : callable
        ``score(matrix, list_length)`` of a 0-padded int64 recall matrix, one sequence a row:
        the probability of each of its events, shape ``(n_rows, n_outputs + 1)`` (the
        ``event_probability`` of ``cmr.log_likelihood(..., by="trial", event_probabilities=True)``).
    recalls : array_like of int, shape (n_trials, n_outputs)
        Correct first recalls (serial positions 1..list_length), 0 padding.
    list_length : int

    Returns
    -------
    numpy.ndarray, shape (n_trials, n_outputs + 1, list_length + 1)
        ``[t, k, 0]`` P(stop) and ``[t, k, i]`` P(recall item i) after the first k recalls of
        trial t; 0 for items already recalled; NaN beyond a trial's last recall.
    """
    matrix = np.asarray(recalls, dtype=np.int64)
    n = int(list_length)
    rows, where = [], []
    for t, row in enumerate(matrix):
        sequence = [int(r) for r in row if r > 0]
        for step in range(len(sequence) + 1):
            prefix = sequence[:step]
            left = [i for i in range(1, n + 1) if i not in prefix]
            rows += [prefix] + [prefix + [i] for i in left]
            where += [(t, step, event) for event in [0, *left]]
    width = max(len(row) for row in rows) or 1
    padded = np.zeros((len(rows), width), dtype=np.int64)
    for r, row in enumerate(rows):
        padded[r, : len(row)] = row
    scored = score(padded, n)
    trial, step, event = (np.array(column, dtype=np.int64) for column in zip(*where))
    out = np.full((matrix.shape[0], matrix.shape[1] + 1, n + 1), np.nan)
    filled = np.zeros(out.shape[:2], dtype=bool)
    filled[trial, step] = True
    out[filled] = 0.0  # recalled items: probability 0
    out[trial, step, event] = scored[np.arange(len(rows)), step]
    return out


@keyword_only
def textbook_event_probabilities(params, recalls, list_length, *, pool_size=None) -> np.ndarray:
    """Every event probability of exact textbook CMR along each row of a recall matrix.

    Computed through ``cmr.log_likelihood`` (exact against cymr): each possible next event
    is scored as the last event of a sequence, all in one call.

    Parameters
    ----------
    params : mapping
        The 14 parameters in cymr's names.
    recalls : array_like of int, shape (n_trials, n_outputs)
        Correct first recalls (serial positions 1..list_length), 0 padding.
    list_length : int
    pool_size : int, optional
        cymr's pool size (default: a list-sized context).

    Returns
    -------
    numpy.ndarray, shape (n_trials, n_outputs + 1, list_length + 1)
        ``[t, k, 0]`` P(stop) and ``[t, k, i]`` P(recall item i) after the first k recalls of
        trial t; NaN beyond a trial's last recall.
    """

    def score(padded, n):
        return textbook_log_likelihood(
            from_recall_matrix(padded, n), params, by="trial", event_probabilities=True, pool_size=pool_size
        )["event_probability"].values

    return scored_event_probabilities(score, recalls, list_length)


def textbook_model(pool_size: int | None = None) -> RecallModel:
    """This toolkit's textbook CMR (``cmr.log_likelihood``, ``cmr.simulate_recalls``) as a model."""

    def event_probabilities(params, recalls, list_length):
        return textbook_event_probabilities(params, recalls, list_length, pool_size=pool_size)

    def log_likelihood(params, recalls, list_length):
        events = from_recall_matrix(np.asarray(recalls), list_length)
        return textbook_log_likelihood(events, params, by="trial", pool_size=pool_size)["logl"].values

    def simulate(params, list_length, n_trials, rng):
        return simulate_recalls(params, list_length, n_trials, rng=rng, pool_size=pool_size)

    return RecallModel(
        name="cmr textbook CMR",
        event_probabilities=event_probabilities,
        log_likelihood=log_likelihood,
        simulate=simulate,
        textbook=True,
        pool_size=pool_size,
    )
