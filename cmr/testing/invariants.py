"""The invariant suite: properties any CMR-like model of free recall must have.

:func:`check_recall_model` runs the checks that apply to a :class:`~cmr.testing.RecallModel`
and raises one ``AssertionError`` that reports every failure; :func:`applicable_checks`
lists them for ``pytest.mark.parametrize``. The checks:

``distribution``
    At every step, the probabilities of stopping and of recalling each item are finite, in
    [0, 1] and sum to 1; an item already recalled has probability 0. A model with only a
    likelihood: over every complete recall sequence of a short list, the probabilities of
    the sequences sum to 1 (more only by what the event floor adds).
``likelihood``
    The log-likelihood of a trial equals the sum of the logs of its event probabilities
    (each floored at ``event_floor``) and is the same whatever the other trials of the call,
    their order and the padding.
``relabelling``
    Studying the items under other labels (a permutation of 1..n) and naming the recalls by
    those labels changes no probability (models with ``takes_presentation``).
``reference``
    A model declared textbook CMR agrees with ``cmr.log_likelihood`` (exact against cymr)
    event by event and trial by trial, within the model's ``rtol``/``atol``.
``simulation``
    The simulator draws what the likelihood predicts: for each example parameter set, the
    first event of ``n_trials`` simulated lists (chi-square against the model's first-step
    distribution) and every later event, counted by lag and stop (sequential chi-square given
    each list's history), each test at level ``alpha`` with a fixed seed. A model with only a
    likelihood: the frequencies of whole recall sequences of a 3-item list.

The property checks are driven by hypothesis with ``derandomize=True``: the same cases every
run, ``max_examples`` of them per check (default 20) plus the model's fixed examples.
"""
from __future__ import annotations

import itertools
import traceback

import numpy as np

from ..checks import seed_of
from ..deprecation import keyword_only, renamed_keywords
from ..errors import ParameterError
from ..events import from_recall_matrix
from ..textbook.likelihood import log_likelihood as textbook_log_likelihood
from .model import RecallModel, textbook_event_probabilities
from .statistics import multinomial_chi_square, sequential_chi_square
from .strategies import hypothesis_strategies, recall_sequences

__all__ = ["CHECKS", "applicable_checks", "check_recall_model", "run_check", "DEFAULT_MAX_EXAMPLES",
           "DEFAULT_N_TRIALS", "DEFAULT_ALPHA", "DEFAULT_SEED"]

CHECKS = ("distribution", "likelihood", "relabelling", "reference", "simulation")
#: hypothesis cases per property check (on top of the model's fixed examples)
DEFAULT_MAX_EXAMPLES = 20
#: simulated lists per example parameter set in the simulation check
DEFAULT_N_TRIALS = 2000
#: level of each chi-square test of the simulation check
DEFAULT_ALPHA = 1e-3
#: seed of the simulation check (the outcome is fixed for a given model)
DEFAULT_SEED = 20240607
#: list length of the simulation check, and of whole-sequence checks of likelihood-only models
SIMULATION_LIST_LENGTH = 6
SEQUENCE_LIST_LENGTH = 3


def applicable_checks(model: RecallModel) -> tuple[str, ...]:
    """The checks that apply to ``model``, in suite order."""
    has = {
        "distribution": True,
        "likelihood": model.log_likelihood is not None,
        "relabelling": model.takes_presentation,
        "reference": model.textbook,
        "simulation": model.simulate is not None,
    }
    return tuple(name for name in CHECKS if has[name])


# --- helpers ---------------------------------------------------------------------------------


def _close(got, expected, model: RecallModel) -> np.ndarray:
    """Elementwise |got - expected| <= atol + rtol |expected|; equal infinities agree, NaN never."""
    got, expected = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return (got == expected) | (np.abs(got - expected) <= model.atol + model.rtol * np.abs(expected))


def _matrix(sequences, extra_padding: int = 0) -> np.ndarray:
    width = max([len(s) for s in sequences] + [1]) + extra_padding
    out = np.zeros((len(sequences), width), dtype=np.int64)
    for t, seq in enumerate(sequences):
        out[t, : len(seq)] = seq
    return out


def _sequences(matrix) -> list[list[int]]:
    return [[int(v) for v in row if v > 0] for row in np.asarray(matrix)]


def _event_probabilities(model, params, matrix, n, **keywords) -> np.ndarray:
    probs = np.asarray(model.event_probabilities(params, matrix, n, **keywords), dtype=np.float64)
    expected = (matrix.shape[0], matrix.shape[1] + 1, n + 1)
    if probs.shape != expected:
        raise AssertionError(
            f"event_probabilities must return shape (n_trials, n_outputs + 1, list_length + 1) = {expected}; "
            f"got {probs.shape}"
        )
    return probs


def _log_likelihood(model, params, matrix, n, **keywords) -> np.ndarray:
    logl = np.asarray(model.log_likelihood(params, matrix, n, **keywords), dtype=np.float64).reshape(-1)
    if logl.shape != (matrix.shape[0],):
        raise AssertionError(
            f"log_likelihood must return one value per trial, shape ({matrix.shape[0]},); got {logl.shape}"
        )
    return logl


def _case_text(params, n, sequences) -> str:
    values = ", ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v!r}" for k, v in dict(params).items())
    return f"list_length={n}, recalls={sequences}, params={{{values}}}"


def _fixed_sequences(n: int) -> list[list[int]]:
    """Forward, backward, middle-out and empty recall sequences of an n-item list."""
    middle = n // 2 + 1
    return [list(range(1, n + 1)), list(range(n, 0, -1)), [middle] + [i for i in range(1, n + 1) if i != middle][:2], []]


# --- the checks, one case at a time ---------------------------------------------------------


def _distribution(model: RecallModel, params, n, sequences, permutation) -> None:
    if model.event_probabilities is None:
        return _sequence_distribution(model, params, min(n, 4))
    probs = _event_probabilities(model, params, _matrix(sequences), n)
    tolerance = model.atol + model.rtol
    for t, seq in enumerate(sequences):
        rows = probs[t, : len(seq) + 1]
        recalled = np.zeros(rows.shape, dtype=bool)  # [k, item]: item among the first k recalls
        for k, item in enumerate(seq):
            recalled[k + 1 :, item] = True
        problems = {
            "not finite": ~np.isfinite(rows).all(axis=1),
            "outside [0, 1]": ((rows < -tolerance) | (rows > 1 + tolerance)).any(axis=1),
            f"not summing to 1 (tolerance {tolerance:g})": ~(np.abs(rows.sum(axis=1) - 1.0) <= tolerance),
            "giving an already recalled item probability > 0": (recalled & (rows > tolerance)).any(axis=1),
        }
        for problem, bad in problems.items():
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                raise AssertionError(
                    f"event probabilities {problem} after {k} recall(s): {rows[k].tolist()} "
                    f"(sum {float(rows[k].sum())!r}) at {_case_text(params, n, seq)}"
                )


def _all_sequences(n: int) -> list[list[int]]:
    return [list(p) for k in range(n + 1) for p in itertools.permutations(range(1, n + 1), k)]


def _sequence_distribution(model: RecallModel, params, n: int) -> None:
    sequences = _all_sequences(n)
    logl = _log_likelihood(model, params, _matrix(sequences), n)
    if not np.isfinite(logl).all():
        bad = [sequences[i] for i in np.flatnonzero(~np.isfinite(logl))[:3]]
        raise AssertionError(f"log-likelihood not finite for recalls {bad} at {_case_text(params, n, '[all]')}")
    total = float(np.exp(logl).sum())
    slack = model.floor * sum(len(s) + 1 for s in sequences)
    tolerance = model.atol + model.rtol
    if not (1 - tolerance <= total <= 1 + tolerance + slack):
        raise AssertionError(
            f"the probabilities of every complete recall sequence of a {n}-item list sum to {total!r}, not 1 "
            f"(tolerance {tolerance:g}, event-floor slack {slack:g}); {_case_text(params, n, '[all]')}"
        )


def _likelihood(model: RecallModel, params, n, sequences, permutation) -> None:
    matrix = _matrix(sequences)
    logl = _log_likelihood(model, params, matrix, n)
    text = _case_text(params, n, sequences)
    if not np.isfinite(logl).all():
        raise AssertionError(f"log-likelihood not finite: {logl} at {text}")
    if not (logl <= model.atol).all():
        raise AssertionError(f"log-likelihood above 0: {logl} at {text}")
    if model.event_probabilities is not None:
        probs = _event_probabilities(model, params, matrix, n)
        expected = []
        for t, seq in enumerate(sequences):
            events = np.append(probs[t, np.arange(len(seq)), seq], probs[t, len(seq), 0])
            with np.errstate(divide="ignore"):  # an event of probability 0 gives -inf, reported below
                expected.append(np.log(np.clip(events, model.floor, 1.0)).sum())
        ok = _close(logl, expected, model)
        if not ok.all():
            raise AssertionError(
                f"log_likelihood {logl[~ok]} differs from the sum of log event probabilities {np.asarray(expected)[~ok]} "
                f"(event floor {model.floor:g}) for trials {np.flatnonzero(~ok).tolist()} at {text}"
            )
    order = np.random.default_rng(len(sequences) * 7919 + n).permutation(len(sequences))
    shuffled = _log_likelihood(model, params, _matrix([sequences[i] for i in order], extra_padding=1), n)
    ok = _close(shuffled, logl[order], model)
    if not ok.all():
        raise AssertionError(
            f"log_likelihood depends on the order of the trials or on padding: {shuffled} after reordering "
            f"{order.tolist()} and one more 0 column, {logl[order]} before, at {text}"
        )
    alone = np.concatenate([_log_likelihood(model, params, _matrix([seq]), n) for seq in sequences])
    ok = _close(alone, logl, model)
    if not ok.all():
        raise AssertionError(f"log_likelihood of a trial alone {alone} differs from within the batch {logl} at {text}")


def _relabelling(model: RecallModel, params, n, sequences, permutation) -> None:
    presentation = np.asarray(permutation, dtype=np.int64)  # item label studied at each position
    relabelled = [[int(presentation[pos - 1]) for pos in seq] for seq in sequences]
    text = f"{_case_text(params, n, sequences)}, presentation={presentation.tolist()}"
    if model.event_probabilities is not None:
        base = _event_probabilities(model, params, _matrix(sequences), n, presentation=np.arange(1, n + 1))
        moved = _event_probabilities(model, params, _matrix(relabelled), n, presentation=presentation)
        columns = np.concatenate([[0], presentation])  # serial position s is now item presentation[s-1]
        for t, seq in enumerate(sequences):
            steps = len(seq) + 1
            ok = _close(moved[t, :steps][:, columns], base[t, :steps], model)
            if not ok.all():
                raise AssertionError(
                    f"event probabilities change when the items are relabelled: {moved[t, :steps][:, columns][~ok]} "
                    f"instead of {base[t, :steps][~ok]} at {text}"
                )
    if model.log_likelihood is not None:
        base = _log_likelihood(model, params, _matrix(sequences), n, presentation=np.arange(1, n + 1))
        moved = _log_likelihood(model, params, _matrix(relabelled), n, presentation=presentation)
        ok = _close(moved, base, model)
        if not ok.all():
            raise AssertionError(
                f"log-likelihood changes when the items are relabelled: {moved} instead of {base} at {text}"
            )


def _reference(model: RecallModel, params, n, sequences, permutation) -> None:
    matrix = _matrix(sequences)
    text = _case_text(params, n, sequences)
    if model.event_probabilities is not None:
        probs = _event_probabilities(model, params, matrix, n)
        exact = textbook_event_probabilities(params, matrix, n, pool_size=model.pool_size)
        for t, seq in enumerate(sequences):
            steps = len(seq) + 1
            ok = _close(probs[t, :steps], exact[t, :steps], model)
            if not ok.all():
                step, event = (int(v[0]) for v in np.nonzero(~ok))
                raise AssertionError(
                    f"event probabilities differ from textbook CMR (rtol {model.rtol:g}, atol {model.atol:g}): after "
                    f"{step} recall(s) of trial {t}, P({'stop' if event == 0 else f'item {event}'}) = "
                    f"{float(probs[t, step, event]):.12g}, textbook {float(exact[t, step, event]):.12g}, at {text}"
                )
    if model.log_likelihood is not None:
        logl = _log_likelihood(model, params, matrix, n)
        events = from_recall_matrix(matrix, n)
        exact = textbook_log_likelihood(events, params, by="trial", pool_size=model.pool_size)["logl"].values
        ok = _close(logl, exact, model)
        if not ok.all():
            raise AssertionError(
                f"log-likelihood differs from textbook CMR (rtol {model.rtol:g}, atol {model.atol:g}): {logl[~ok]} "
                f"instead of {exact[~ok]} for trials {np.flatnonzero(~ok).tolist()} at {text}"
            )


PROPERTY_CHECKS = {
    "distribution": _distribution,
    "likelihood": _likelihood,
    "relabelling": _relabelling,
    "reference": _reference,
}


def _cases(model: RecallModel):
    """Hypothesis strategy of (params, list_length, recall sequences, permutation of 1..n)."""
    st = hypothesis_strategies()
    low, high = model.list_lengths

    @st.composite
    def cases(draw):
        params = draw(model.parameter_strategy())
        n = draw(st.integers(low, high))
        sequences = [draw(recall_sequences(n)) for _ in range(draw(st.integers(1, 3)))]
        return params, n, sequences, draw(st.permutations(range(1, n + 1)))

    return cases()


def _run_property(model: RecallModel, name: str, max_examples: int, shrink: bool) -> str:
    from hypothesis import HealthCheck, Phase, given, settings

    body = PROPERTY_CHECKS[name]
    n = model.list_lengths[1]
    for params in model.parameter_examples():
        permutation = list(np.random.default_rng(n).permutation(np.arange(1, n + 1)))
        body(model, params, n, _fixed_sequences(n), permutation)
    if max_examples > 0:
        phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else [])

        @settings(max_examples=max_examples, derandomize=True, database=None, deadline=None, phases=phases,
                  suppress_health_check=list(HealthCheck), report_multiple_bugs=False)
        @given(case=_cases(model))
        def run(case):
            body(model, *case)

        run()
    return f"passed on {len(model.parameter_examples())} fixed and {max_examples} drawn parameter sets"


# --- simulation against the likelihood ------------------------------------------------------


def _check_simulated(matrix, n: int, n_trials: int) -> np.ndarray:
    matrix = np.asarray(matrix)
    if not (matrix.ndim == 2 and matrix.shape[0] == n_trials):
        raise AssertionError(f"simulate must return a recall matrix with {n_trials} rows; got shape {matrix.shape}")
    if not (np.issubdtype(matrix.dtype, np.integer) or (matrix == np.round(matrix)).all()):
        raise AssertionError("simulate must return integers")
    matrix = matrix.astype(np.int64)
    if not ((matrix >= 0) & (matrix <= n)).all():
        raise AssertionError(f"simulated recalls must be serial positions 1..{n} or 0 padding")
    for row in matrix:
        made = row[row > 0]
        if not (row[made.size:] == 0).all():
            raise AssertionError(f"padding must follow the last recall; got {row.tolist()}")
        if not (np.unique(made).size == made.size):
            raise AssertionError(f"a simulated trial repeats an item: {row.tolist()}")
    return matrix


def _simulation_examples(model: RecallModel) -> list[dict]:
    examples = model.parameter_examples()
    if examples:
        return examples
    from hypothesis import HealthCheck, Phase, given, settings

    drawn: list = []

    @settings(max_examples=3, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(params=model.parameter_strategy())
    def collect(params):
        drawn.append(dict(params))

    collect()
    return drawn[:3]


def _lag_tests(model: RecallModel, params, matrix, n: int):
    """First-event and later-event chi-square tests of simulated recalls."""
    sequences = _sequences(matrix)
    unique = sorted(set(map(tuple, sequences)))
    probs = _event_probabilities(model, params, _matrix([list(s) for s in unique]), n)
    for t, seq in enumerate(unique):
        steps = probs[t, : len(seq) + 1]
        if not (np.isfinite(steps).all() and (steps >= 0).all()):
            raise AssertionError(
                f"event probabilities are not finite and non-negative along the simulated recalls {list(seq)}: {steps}"
            )
    row_of = {seq: i for i, seq in enumerate(unique)}
    first = np.bincount([seq[0] if seq else 0 for seq in sequences], minlength=n + 1)
    labels = ["stop"] + [f"item {i}" for i in range(1, n + 1)]
    first_test = multinomial_chi_square(first, probs[0, 0], labels=labels)  # row 0 is the same for every trial
    # later events by category: 0 = stop, 1..2n-1 = lag -(n-1)..(n-1) (index n is lag 0, never possible)
    lag_labels = ["stop"] + [f"lag {lag:+d}" for lag in range(-(n - 1), n)]
    events, rows = [], []
    for seq in sequences:
        p = probs[row_of[tuple(seq)]]
        for k in range(1, len(seq) + 1):
            previous = seq[k - 1]
            by_lag = np.zeros(2 * n)
            by_lag[0] = p[k, 0]
            by_lag[np.arange(1, n + 1) - previous + n] += p[k, 1:]
            rows.append(by_lag)
            events.append(0 if k == len(seq) else seq[k] - previous + n)
    if not events:
        return first_test, None
    keep = np.ones(2 * n, dtype=bool)
    keep[n] = False  # lag 0
    later = sequential_chi_square(np.searchsorted(np.flatnonzero(keep), events), np.array(rows)[:, keep],
                                  labels=np.array(lag_labels, dtype=object)[keep])
    return first_test, later


def _sequence_test(model: RecallModel, params, matrix, n: int):
    """Whole-sequence frequencies of simulated lists against exp(log-likelihood)."""
    sequences = _all_sequences(n)
    index = {tuple(s): i for i, s in enumerate(sequences)}
    counts = np.bincount([index[tuple(s)] for s in _sequences(matrix)], minlength=len(sequences))
    probabilities = np.exp(_log_likelihood(model, params, _matrix(sequences), n))
    return multinomial_chi_square(counts, probabilities, labels=[str(s) for s in sequences])


def _simulation(model: RecallModel, n_trials: int, alpha: float, seed: int) -> str:
    if model.event_probabilities is not None:
        n = min(model.list_lengths[1], SIMULATION_LIST_LENGTH)
    else:
        n = min(model.list_lengths[1], SEQUENCE_LIST_LENGTH)
    failures, summary = [], []
    for index, params in enumerate(_simulation_examples(model)):
        rng = np.random.default_rng([seed, index])
        matrix = _check_simulated(model.simulate(params, n, n_trials, rng), n, n_trials)
        if model.event_probabilities is not None:
            tests = dict(zip(("first recall", "later events by lag"), _lag_tests(model, params, matrix, n)))
        else:
            tests = {"whole sequences": _sequence_test(model, params, matrix, n)}
        for label, result in tests.items():
            if result is None:
                continue
            summary.append(f"{label} p = {result.pvalue:.2g}")
            if result.pvalue < alpha:
                failures.append(f"{label} (example {index}, list_length={n}, {n_trials} trials): {result.describe()}; "
                                f"params={params}")
    if failures:
        raise AssertionError(
            f"simulated recalls disagree with the model's own probabilities at level alpha={alpha:g}:\n  "
            + "\n  ".join(failures)
        )
    return f"passed at alpha={alpha:g} ({', '.join(summary)})"


# --- the suite --------------------------------------------------------------------------------


@renamed_keywords(seed="rng")
def run_check(
    model: RecallModel,
    name: str,
    *,
    max_examples: int = DEFAULT_MAX_EXAMPLES,
    n_trials: int = DEFAULT_N_TRIALS,
    alpha: float = DEFAULT_ALPHA,
    rng=DEFAULT_SEED,
    shrink: bool = True,
) -> str:
    """Run one check; return a one-line summary, or raise AssertionError saying what failed.

    The options are :func:`check_recall_model`'s.
    """
    if not isinstance(model, RecallModel):
        raise ParameterError(f"expected a cmr.testing.RecallModel; got {type(model).__name__}")
    if name not in CHECKS:
        raise ParameterError(f"unknown check {name!r}; the checks are {', '.join(CHECKS)}")
    if name not in applicable_checks(model):
        raise ParameterError(
            f"check {name!r} does not apply to model {model.name!r} (applicable: {', '.join(applicable_checks(model))})"
        )
    if name == "simulation":
        return _simulation(model, n_trials, alpha, seed_of(rng))
    return _run_property(model, name, max_examples, shrink)


@keyword_only
@renamed_keywords(seed="rng")
def check_recall_model(
    model: RecallModel,
    *,
    checks=None,
    max_examples: int = DEFAULT_MAX_EXAMPLES,
    n_trials: int = DEFAULT_N_TRIALS,
    alpha: float = DEFAULT_ALPHA,
    rng=DEFAULT_SEED,
    shrink: bool = True,
) -> dict[str, str]:
    """Run the invariant suite on a model; raise one AssertionError listing every failure.

    Parameters
    ----------
    model : RecallModel
    checks : sequence of str, optional
        Names from :data:`CHECKS` (default: every applicable check).
    max_examples : int
        Hypothesis cases per property check, on top of the model's fixed examples.
    n_trials : int
        Simulated lists per example parameter set in the simulation check.
    alpha : float
        Level of each chi-square test of the simulation check.
    rng : int, numpy.random.Generator or None
        Source of the simulation check's draws (default :data:`DEFAULT_SEED`): an int is the seed;
        a Generator draws one integer seed (``int(rng.integers(2**63))``); None draws one from
        fresh entropy.
    shrink : bool
        Let hypothesis shrink a failing case to a minimal one (slower on failure).

    Returns
    -------
    dict of str to str
        Each check run and its summary.

    Raises
    ------
    AssertionError
        If any check fails; the message names each failing check and its smallest case.
    """
    names = applicable_checks(model) if checks is None else tuple(checks)
    report, failures = {}, []
    for name in names:
        try:
            report[name] = run_check(model, name, max_examples=max_examples, n_trials=n_trials, alpha=alpha,
                                     rng=rng, shrink=shrink)
        except AssertionError as error:
            failures.append(f"[{name}] {error}")
        except ParameterError:
            raise
        except Exception as error:  # noqa: BLE001 - a model that raises fails the check, with its traceback
            where = "".join(traceback.format_exception_only(type(error), error)).strip()
            failures.append(f"[{name}] the model raised {where}")
    if failures:
        raise AssertionError(
            f"model {model.name!r} fails {len(failures)} of {len(names)} check(s):\n" + "\n".join(failures)
        )
    return report
