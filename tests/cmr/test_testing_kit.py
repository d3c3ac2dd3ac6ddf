"""cmr.testing: strategies draw valid data, the suite's statistics hold their level, and the
suite passes our own textbook CMR and a float32 port at its tolerance."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings

import cmr
from cmr.errors import ParameterError
from cmr.paper import check_parameters
from cmr.schema import validate
from cmr.testing import (
    CHECKS,
    PlainCMR,
    RecallModel,
    applicable_checks,
    check_recall_model,
    chi_square_power,
    events_datasets,
    lag_profiles,
    paper_parameters,
    per_trial,
    recall_matrices,
    recall_tables,
    run_check,
    textbook_model,
    textbook_parameters,
)
from cmr.testing.statistics import multinomial_chi_square, sequential_chi_square
from cmr.textbook.parameters import PARAMETER_SPECS
from tests.conftest import REPO_ROOT

FAST = dict(max_examples=10, shrink=False)


# --- import without hypothesis -----------------------------------------------------------------

BLOCK_HYPOTHESIS = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "hypothesis" or name.startswith("hypothesis."):
            raise ImportError("hypothesis is hidden")
sys.meta_path.insert(0, Block())
"""


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def test_the_kit_imports_without_hypothesis_until_a_strategy_is_used():
    code = BLOCK_HYPOTHESIS + (
        "import json, cmr\n"
        "plain = [m in sys.modules for m in ('cmr.testing', 'hypothesis')]\n"
        "import cmr.testing\n"
        "model = cmr.testing.RecallModel(log_likelihood=cmr.testing.PlainCMR.log_likelihood, textbook=True)\n"
        "try:\n"
        "    cmr.testing.recall_matrices()\n"
        "    error = None\n"
        "except ImportError as exc:\n"
        "    error = [type(exc).__name__, str(exc)]\n"
        "print(json.dumps([plain, error, 'hypothesis' in sys.modules, cmr.testing.applicable_checks(model)]))"
    )
    plain, error, loaded, checks = json.loads(_run(code))
    assert plain == [False, False]  # import cmr loads neither the kit nor hypothesis
    assert error[0] == "OptionalDependencyError" and "pip install hypothesis" in error[1]
    assert not loaded
    assert checks == ["distribution", "likelihood", "reference"]


# --- strategies --------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(recall_matrices(list_length=(2, 6), ragged=True), recall_matrices(intrusions=False, repeats=False))
def test_recall_matrices_are_valid_events(ragged, clean):
    recalls, lengths = ragged
    assert lengths.shape == (recalls.shape[0],)
    events = cmr.from_recall_matrix(recalls, lengths)
    back = cmr.to_recall_matrix(events)[0]
    assert [row[row != 0].tolist() for row in back] == [row[row != 0].tolist() for row in recalls]
    recalls, length = clean
    assert (recalls >= 0).all() and (recalls <= length).all()
    for row in recalls:
        made = row[row > 0]
        assert np.unique(made).size == made.size and (row[made.size:] == 0).all()


@settings(max_examples=15, deadline=None)
@given(recall_tables(list_gaps=True), events_datasets(subjects=2, ragged=False, repeats=False, intrusions=False,
                                                       prior_list_intrusions=False))
def test_recall_tables_and_events_are_valid(table, events):
    converted = cmr.from_table(table)
    validate(converted, "events")
    assert converted.sizes["trial"] == table.groupby(["subject", "list"]).ngroups
    validate(events, "events")
    recalls = events["recalls"].values
    assert (recalls >= 0).all()  # no intrusions
    assert np.unique(events["list_length"].values).size == 1  # one list length per table


def _kinds(table) -> set[str]:
    """What a table contains: label types, intrusions, repeats, prior-list intrusions, ragged lists."""
    kinds = {"int subjects" if table["subject"].dtype.kind == "i" else "str subjects"}
    recalls = cmr.from_table(table)["recalls"].values
    kinds |= {"intrusion"} if (recalls == -1).any() else set()
    kinds |= {"repeat"} if any(np.unique(r[r > 0]).size < (r > 0).sum() for r in recalls) else set()
    study = table[table["trial_type"] == "study"]
    studied = {key: set(group["item"]) for key, group in study.groupby(["subject", "list"])}
    recalled = table[table["trial_type"] == "recall"]
    if any(item in studied.get((subject, number - 1), set()) and item not in studied[(subject, number)]
           for subject, number, item in recalled[["subject", "list", "item"]].itertuples(index=False)):
        kinds.add("prior-list intrusion")
    kinds |= {"ragged"} if study.groupby(["subject", "list"]).size().nunique() > 1 else set()
    return kinds


def test_recall_tables_reach_every_kind_of_event():
    seen: set[str] = set()

    @settings(max_examples=25, derandomize=True, database=None, deadline=None)
    @given(recall_tables(subjects=(2, 3), lists=(2, 3)))
    def collect(table):
        seen.update(_kinds(table))

    collect()
    assert seen == {"int subjects", "str subjects", "intrusion", "repeat", "prior-list intrusion", "ragged"}


@settings(max_examples=30, deadline=None)
@given(textbook_parameters(), textbook_parameters(within="fit", fixed={"T": 0.5}), paper_parameters())
def test_parameter_sets_are_inside_their_bounds(admissible, typical, paper):
    assert cmr.validate_parameters(admissible) == admissible
    assert list(admissible) == [spec.name for spec in PARAMETER_SPECS]
    for spec in PARAMETER_SPECS:
        assert spec.fit_lower <= typical[spec.name] <= spec.fit_upper or spec.name == "T"
    assert typical["T"] == 0.5
    check_parameters(paper["beta_enc"], paper["beta_rec"], paper["gamma"])
    assert paper["beta_enc"] > 0


def test_parameter_strategies_refuse_ranges_outside_the_bounds():
    with pytest.raises(ParameterError, match=r"range of B_enc must lie within its bounds \[0, 1\]"):
        textbook_parameters(bounds={"B_enc": (0.5, 2.0)})
    with pytest.raises(ParameterError, match="unknown CMR parameter"):
        textbook_parameters(fixed={"beta": 0.5})
    with pytest.raises(ParameterError, match="within must be"):
        textbook_parameters(within="typical")
    with pytest.raises(ParameterError, match=r"beta_enc must lie in \(0, 1\]"):
        paper_parameters(bounds={"beta_enc": (0.0, 0.0)})
    with pytest.raises(ParameterError, match="unknown parameter"):
        paper_parameters(bounds={"B_enc": (0.1, 0.2)})


@settings(max_examples=20, deadline=None)
@given(lag_profiles(unit_dims=("layer", "head"), lags=[-2, -1, 1, 2], min_variance=1e-3),
       lag_profiles(counts=True, lags=3))
def test_lag_profiles_are_valid_datasets(values, counts):
    validate(values, "lag_profile")
    assert values["profile"].dims == ("layer", "head", "lag")
    assert (values["profile"].var("lag") > 1e-3).all()
    validate(counts, "lag_profile")
    actual, possible = counts["actual"].values, counts["possible"].values
    assert (0 <= actual).all() and (actual <= possible).all()
    with np.errstate(invalid="ignore", divide="ignore"):
        np.testing.assert_array_equal(counts["profile"].values, np.where(possible > 0, actual / possible, np.nan))


# --- the suite's statistics ----------------------------------------------------------------------


def test_chi_square_power_matches_monte_carlo():
    """The documented power formula against 400 simulated tests (seeded)."""
    rng = np.random.default_rng(5)
    null = np.array([0.4, 0.3, 0.2, 0.1])
    w = 0.15
    root = np.sqrt(null)
    direction = np.array([1.0, -1.0, 1.0, -1.0])
    direction -= (direction @ root) * root  # orthogonal to sqrt(null): the departure sums to 0
    truth = null + root * w * direction / np.linalg.norm(direction)
    assert truth.sum() == pytest.approx(1.0) and np.sqrt(((truth - null) ** 2 / null).sum()) == pytest.approx(w)
    pvalues = [multinomial_chi_square(rng.multinomial(400, truth), null).pvalue for _ in range(400)]
    expected = chi_square_power(400, 3, w, 0.05)
    assert abs(np.mean(np.array(pvalues) < 0.05) - expected) < 3 * np.sqrt(expected * (1 - expected) / 400)


def _draw(rng, probs):
    """One category per row of ``probs`` (inverse CDF)."""
    return (rng.random((probs.shape[0], 1)) > probs.cumsum(axis=1)).sum(axis=1).clip(max=probs.shape[1] - 1)


def test_sequential_chi_square_holds_its_level_and_sees_a_departure():
    """Events drawn step by step from changing distributions: false alarms at about the level."""
    rng = np.random.default_rng(11)
    rejections, departures = 0, 0
    for _ in range(300):
        probs = rng.dirichlet(np.ones(5), size=150)
        rejections += sequential_chi_square(_draw(rng, probs), probs).pvalue < 0.05
        tilted = probs * np.array([3.0, 1, 1, 1, 1])
        tilted /= tilted.sum(axis=1, keepdims=True)
        departures += sequential_chi_square(_draw(rng, tilted), probs).pvalue < 0.05
    assert abs(rejections / 300 - 0.05) < 3 * np.sqrt(0.05 * 0.95 / 300)
    assert departures / 300 > 0.9


def test_an_impossible_event_fails_the_test():
    result = sequential_chi_square([0, 1, 2], [[0.5, 0.5, 0.0]] * 3)
    assert result.pvalue == 0.0 and "probability 0" in result.describe()


# --- the suite on our own textbook CMR ----------------------------------------------------------


def test_our_textbook_cmr_passes_the_suite():
    model = textbook_model()
    assert applicable_checks(model) == ("distribution", "likelihood", "reference", "simulation")
    report = check_recall_model(model, checks=["distribution", "likelihood", "simulation"], max_examples=5)
    assert "alpha=0.001" in report["simulation"]


def test_a_pool_sized_textbook_model_passes_the_reference_check():
    params = textbook_parameters(bounds={"Afc": (0.05, 1), "Acf": (0.05, 1), "T": (0.05, 2)})
    plain = RecallModel(name="plain", event_probabilities=per_trial(PlainCMR.sequence_probabilities),
                        textbook=True, pool_size=12, parameters=params, list_lengths=(2, 6))
    with pytest.raises(AssertionError, match=r"\[reference\] event probabilities differ from textbook CMR"):
        check_recall_model(plain, checks=["reference"], **FAST)  # PlainCMR's context is list-sized
    run_check(textbook_model(pool_size=12), "distribution", **FAST)


def _float32(params, sequence, list_length, presentation=None):
    """A float32 port: PlainCMR's probabilities rounded to single precision."""
    return PlainCMR.sequence_probabilities(params, sequence, list_length, presentation).astype(np.float32)


def test_a_float32_port_passes_at_its_tolerance_only():
    strict = RecallModel(name="float32", event_probabilities=per_trial(_float32), textbook=True)
    with pytest.raises(AssertionError, match="differ from textbook CMR"):
        check_recall_model(strict, checks=["reference"], **FAST)
    loose = RecallModel(name="float32", event_probabilities=per_trial(_float32), textbook=True, rtol=1e-5, atol=1e-6)
    check_recall_model(loose, checks=["distribution", "reference"], **FAST)


def test_a_likelihood_only_model_is_checked_on_whole_sequences():
    model = RecallModel(name="likelihood only", log_likelihood=PlainCMR.log_likelihood, textbook=True,
                        simulate=lambda p, n, k, rng: cmr.simulate_recalls(p, n, k, rng=rng))
    report = check_recall_model(model, checks=["distribution", "likelihood", "simulation"], max_examples=5)
    assert "whole sequences" in report["simulation"]

    class LeavesStopOut(PlainCMR):
        def outcome_probabilities(self):
            out = super().outcome_probabilities()
            out[1:] /= max(1.0 - out[0], 1e-12)
            return out

    broken = RecallModel(name="broken", log_likelihood=LeavesStopOut.log_likelihood, textbook=True)
    with pytest.raises(AssertionError, match="complete recall sequence .* sum to"):
        run_check(broken, "distribution", **FAST)


def test_the_report_names_every_failing_check_and_a_raising_model():
    def raises(params, recalls, list_length):
        raise ZeroDivisionError("inside the user's model")

    model = RecallModel(name="mine", event_probabilities=raises, log_likelihood=PlainCMR.log_likelihood,
                        textbook=True)
    with pytest.raises(AssertionError) as info:
        check_recall_model(model, **FAST)
    message = str(info.value)
    assert message.startswith("model 'mine' fails 3 of 3 check(s)")
    assert re.search(r"\[distribution\] the model raised ZeroDivisionError: inside the user's model", message)


def test_bad_declarations_raise_typed_errors():
    with pytest.raises(ParameterError, match="needs event_probabilities or log_likelihood"):
        RecallModel(simulate=PlainCMR.simulate, textbook=True)
    with pytest.raises(ParameterError, match="needs parameters"):
        RecallModel(log_likelihood=PlainCMR.log_likelihood)
    with pytest.raises(ParameterError, match="must be callable"):
        RecallModel(log_likelihood="PlainCMR", textbook=True)
    model = RecallModel(log_likelihood=PlainCMR.log_likelihood, textbook=True)
    with pytest.raises(ParameterError, match="unknown check 'speed'"):
        run_check(model, "speed")
    with pytest.raises(ParameterError, match="check 'relabelling' does not apply"):
        run_check(model, "relabelling")
    assert set(applicable_checks(model)) < set(CHECKS)


# --- the guide ------------------------------------------------------------------------------------


def test_testing_guide_examples_run():
    guide = REPO_ROOT / "docs" / "testing-cmr.md"
    blocks = re.findall(r"```python\n(.*?)```", guide.read_text(), flags=re.S)
    assert len(blocks) >= 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(guide), "exec"), namespace)  # noqa: S102 - our own documentation
    for check in namespace["applicable_checks"](namespace["MODEL"]):
        namespace["test_my_cmr"](check)
