"""The invariant suite catches broken textbook CMRs and passes the correct one.

Each mutant is the readable :class:`cmr.testing.PlainCMR` with one method broken, written the
same way as the correct model, so a failure shows that the suite sees the mutation, not the
rewrite. Every mutant is declared textbook CMR, as its author would declare it.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from cmr.testing import TEXTBOOK_EXAMPLES, PlainCMR, RecallModel, check_recall_model, per_trial, run_check
from cmr.textbook.simulate import simulate_recalls


class WrongRho(PlainCMR):
    """rho = sqrt(1 - beta^2): right only when the input is orthogonal to context."""

    def rho(self, c_in, beta):
        return math.sqrt(1.0 - beta * beta)


class NoPrimacy(PlainCMR):
    """Context-to-item learning without the primacy gradient P1 exp(-P2 i)."""

    def primacy(self, item):
        return self.p["Lcf"]


class OffByOnePosition(PlainCMR):
    """The primacy gradient counted from serial position 1 instead of 0."""

    def primacy(self, item):
        return self.p["Lcf"] + self.p["P1"] * math.exp(-self.p["P2"] * (self.position[item] + 1))


class PrimacyByLabel(PlainCMR):
    """The primacy gradient indexed by the item's label instead of its study position."""

    def primacy(self, item):
        return self.p["Lcf"] + self.p["P1"] * math.exp(-self.p["P2"] * (item - 1))


class UnnormalisedContext(PlainCMR):
    """The item input to context left unnormalised."""

    def normalise(self, vector):
        return vector


class NoStartReinstatement(PlainCMR):
    """Recall starts from the end-of-list context (B_start ignored)."""

    def start_recall(self):
        pass


class WrongTemperature(PlainCMR):
    """Choice rule exp(a / T) instead of exp(2 a / T)."""

    def choice_probabilities(self):
        left = [item for item in range(1, self.n + 1) if item not in self.recalled]
        support = np.array([self.support(item) for item in left])
        weights = np.exp((support - support.max()) / self.p["T"]) if left else support
        return dict(zip(left, weights / weights.sum()))


class StopLeftOut(PlainCMR):
    """Item probabilities not scaled by 1 - P(stop): the events no longer sum to 1."""

    def outcome_probabilities(self):
        out = np.zeros(self.n + 1)
        out[0] = self.stop_probability()
        for item, p in self.choice_probabilities().items():
            out[item] = p
        return out


class RepeatsCompete(PlainCMR):
    """Recalled items keep competing in the choice rule."""

    def choice_probabilities(self):
        support = np.array([self.support(item) for item in range(1, self.n + 1)])
        weights = np.exp(2.0 * (support - support.max()) / self.p["T"])
        return dict(zip(range(1, self.n + 1), weights / weights.sum()))

    def support(self, item):
        weights = np.full(self.n + 1, self.p["Acf"])
        weights[0] = 0.0
        weights[item] += self.p["Dcf"]
        weights = weights + self.primacy(item) * self.studied[item]
        return max(float(weights @ self.context), 1e-6)


class NoFloor(PlainCMR):
    """The likelihood without cymr's 1e-5 floor under each event probability."""

    @staticmethod
    def log_probability(events):
        with np.errstate(divide="ignore"):
            return np.log(events)


# mutant -> the property checks that catch it (docs/testing-cmr.md lists them)
MUTANTS = {
    WrongRho: {"reference"},
    NoPrimacy: {"reference"},
    OffByOnePosition: {"reference"},
    PrimacyByLabel: {"relabelling"},
    UnnormalisedContext: {"reference"},
    NoStartReinstatement: {"reference"},
    WrongTemperature: {"reference"},
    StopLeftOut: {"distribution", "reference"},
    RepeatsCompete: {"distribution", "reference"},
    NoFloor: {"likelihood", "reference"},
}
PROPERTY_CHECKS = ["distribution", "likelihood", "relabelling", "reference"]
BUDGET = dict(max_examples=10, shrink=False)


def as_model(cls, simulate=None, **options) -> RecallModel:
    """A PlainCMR class as the suite's callables, declared textbook CMR unless told otherwise."""
    return RecallModel(
        name=cls.__name__,
        event_probabilities=per_trial(cls.sequence_probabilities),
        log_likelihood=cls.log_likelihood,
        simulate=simulate,
        takes_presentation=True,
        **{"textbook": True, **options},
    )


def test_the_correct_model_passes_every_check():
    report = check_recall_model(as_model(PlainCMR, simulate=_textbook_simulator), **BUDGET)
    assert set(report) == {*PROPERTY_CHECKS, "simulation"}


@pytest.mark.parametrize("mutant", list(MUTANTS), ids=lambda cls: cls.__name__)
def test_each_mutant_is_caught(mutant):
    with pytest.raises(AssertionError) as info:
        check_recall_model(as_model(mutant), checks=PROPERTY_CHECKS, **BUDGET)
    failed = {name for name in PROPERTY_CHECKS if f"[{name}]" in str(info.value)}
    # exactly these: e.g. only relabelling sees PrimacyByLabel, as label = position in serial order
    assert failed == MUTANTS[mutant], str(info.value)


def _textbook_simulator(params, list_length, n_trials, rng):
    return simulate_recalls(params, list_length, n_trials, rng=rng)


# mutants whose predictions differ from textbook CMR's enough for 2,000 simulated lists; the
# others are not visible to this check by construction (PrimacyByLabel is exact in serial
# order, StopLeftOut only rescales and NoFloor only floors probabilities) or need more lists
# (NoStartReinstatement, below)
VISIBLE_TO_SIMULATION = [WrongRho, NoPrimacy, OffByOnePosition, UnnormalisedContext, WrongTemperature, RepeatsCompete]


@pytest.mark.parametrize("mutant", VISIBLE_TO_SIMULATION, ids=lambda cls: cls.__name__)
def test_the_simulation_check_alone_catches_a_likelihood_that_departs_from_the_simulator(mutant):
    """Declared a new model (no textbook reference): its likelihood beside our exact simulator."""
    model = as_model(mutant, simulate=_textbook_simulator, textbook=False, examples=TEXTBOOK_EXAMPLES)
    with pytest.raises(AssertionError, match="simulated recalls disagree with the model's own probabilities"):
        run_check(model, "simulation")


@pytest.mark.parametrize("cls", [PlainCMR, PrimacyByLabel, StopLeftOut, NoFloor], ids=lambda cls: cls.__name__)
def test_the_simulation_check_passes_models_that_simulate_like_textbook_cmr(cls):
    """The correct model, and mutants whose departures simulation cannot show (see above)."""
    run_check(as_model(cls, simulate=_textbook_simulator, textbook=False, examples=TEXTBOOK_EXAMPLES), "simulation")


@pytest.mark.slow
def test_more_simulated_lists_reveal_a_small_departure():
    """Ignoring start-of-recall reinstatement shifts few first recalls: visible with 8,000 lists."""
    model = as_model(NoStartReinstatement, simulate=_textbook_simulator, textbook=False, examples=TEXTBOOK_EXAMPLES)
    run_check(model, "simulation")  # 2,000 lists: not detected
    with pytest.raises(AssertionError, match="first recall"):
        run_check(model, "simulation", n_trials=8_000)


@pytest.mark.slow
def test_the_simulation_check_false_alarm_rate_is_at_most_its_level():
    """40 seeds x 3 parameter sets x 2 tests at alpha = 0.05 on the correct model."""
    model = as_model(PlainCMR, simulate=_textbook_simulator, textbook=False, examples=TEXTBOOK_EXAMPLES)
    failures = 0
    for seed in range(40):
        try:
            run_check(model, "simulation", alpha=0.05, rng=seed)
        except AssertionError as error:
            failures += str(error).count("trials):")
    tests = 40 * 3 * 2
    assert failures / tests < 0.05 + 3 * np.sqrt(0.05 * 0.95 / tests), failures
