"""CMR built as attention (cmr.attention_circuit) equals CMR, step by step, for any parameters.

Oracles: cmr.record_states (textbook CMR's supports and choice probabilities after every
recall, exact against cymr), the teacher-forced grids of both variants (independent numba
kernels) and a literal matrix implementation of the study's variant written here.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import cmr
from cmr.errors import ParameterError, RecallDataError

unit = st.floats(0.0, 1.0)
positive_unit = st.floats(0.05, 1.0)


@st.composite
def textbook_cases(draw):
    n = draw(st.integers(2, 9))
    order = draw(st.permutations(range(1, n + 1)))
    recalls = list(order[: draw(st.integers(1, n))])
    params = {
        "Lfc": draw(unit), "Lcf": draw(unit), "P1": draw(st.floats(0.0, 5.0)), "P2": draw(st.floats(0.0, 5.0)),
        "B_enc": draw(positive_unit), "B_start": draw(unit), "B_rec": draw(unit), "T": draw(st.floats(0.05, 2.0)),
        "Afc": draw(st.floats(0.0, 1.0)), "Acf": draw(st.floats(0.0, 1.0)),
        "Dfc": draw(st.floats(0.05, 1.0)), "Dcf": draw(st.floats(0.0, 1.0)),
    }
    return n, recalls, params


def _events(n, recalls):
    rows = [dict(subject=1, list=1, trial_type="study", position=p, item=f"w{p}") for p in range(1, n + 1)]
    rows += [dict(subject=1, list=1, trial_type="recall", position=o, item=f"w{p}") for o, p in enumerate(recalls, 1)]
    return cmr.from_table(pd.DataFrame(rows))


@settings(max_examples=40, deadline=None)
@given(textbook_cases())
def test_textbook_circuit_scores_are_cmr_supports_at_every_step(case):
    n, recalls, params = case
    full = {**cmr.default_parameters(), **params}
    states = cmr.record_states(_events(n, recalls), full)
    trace = cmr.attention_circuit(full, list_length=n, recalls=recalls, exclude_recalled=True)
    steps = len(recalls) + 1  # the start cue, then one cue per recall
    expected = states["support"].values[0, :steps, :n]  # NaN where an item was already recalled
    got = trace["support"].values
    assert got.shape == (steps, n)
    remaining = np.isfinite(expected)
    assert remaining.sum() == sum(n - k for k in range(steps) if k < n)
    np.testing.assert_allclose(got[remaining], expected[remaining], rtol=1e-10, atol=0)
    # CMR's recall rule: softmax(2a/T) over the items not yet recalled (record_states scales it by 1 - P(stop))
    prob = states["probability"].values[0, :steps, :n]
    rows = np.nansum(prob, axis=1) > 0
    np.testing.assert_allclose(trace["probability"].values[rows], (prob / np.nansum(prob, axis=1, keepdims=True))[rows],
                               rtol=1e-10, atol=1e-14)


def _profile(probability, cues, lags):
    """Mean over cues of P(cue + lag), where that item exists (the teacher-forced profile)."""
    n = probability.shape[1]
    return np.array([np.mean([probability[s, c + lag] for s, c in enumerate(cues) if 0 <= c + lag < n]) for lag in lags])


@settings(max_examples=30, deadline=None)
@given(textbook_cases())
def test_textbook_circuit_in_study_order_is_the_teacher_forced_profile(case):
    n, _, params = case
    lags = np.arange(1 - n, n)
    trace = cmr.attention_circuit(params, list_length=n)
    grid = cmr.textbook_teacher_forced_grid({"B_enc": [params["B_enc"]]}, fixed=params, list_length=n, lags=lags)
    np.testing.assert_allclose(_profile(trace["probability"].values[1:], range(n), lags), grid["profile"].values.ravel(),
                               rtol=1e-10, atol=1e-300)
    log_grid = cmr.textbook_teacher_forced_grid({"B_enc": [params["B_enc"]]}, fixed=params, list_length=n, lags=lags,
                                                kind="logsupport")
    np.testing.assert_allclose(_profile(np.log(trace["probability"].values[1:]), range(n), lags),
                               log_grid["profile"].values.ravel(), rtol=1e-10, atol=1e-10)


def _paper_reference(beta_enc, beta_rec, gamma, n, recalls):
    """The study's variant literally: M[i, j] = (1-beta_enc)^(j-i-1), support M^T t, after each forced recall."""
    a = 1.0 - beta_enc
    i, j = np.indices((n, n))
    m = np.where(j > i, a ** np.maximum(j - i - 1, 0), 0.0)
    out = []
    t = np.zeros(n)
    for step, r in enumerate(recalls):
        f = np.eye(n)[r - 1]
        if step == 0:
            t = f
        else:
            t_in = (1 - gamma) * f + gamma * (m @ f)
            t_in = t_in / np.linalg.norm(t_in) if np.linalg.norm(t_in) > 0 else t_in
            t = (1 - beta_rec) * t + beta_rec * t_in
            t = t / np.linalg.norm(t) if np.linalg.norm(t) > 0 else t  # beta_rec = 1 with no input: empty context
        out.append(m.T @ t)
    return np.array(out)


@settings(max_examples=40, deadline=None)
@example(case=(2, (2, 1)), beta_enc=1.0, beta_rec=1.0, gamma=1.0)  # the second recall has no input: context empties
@given(st.integers(2, 10).flatmap(lambda n: st.tuples(st.just(n), st.permutations(range(1, n + 1)))),
       positive_unit, unit, unit)
def test_paper_circuit_scores_are_the_variants_supports(case, beta_enc, beta_rec, gamma):
    n, recalls = case
    params = {"beta_enc": beta_enc, "beta_rec": beta_rec, "gamma": gamma}
    trace = cmr.attention_circuit(params, list_length=n, recalls=list(recalls), variant="paper")
    expected = _paper_reference(beta_enc, beta_rec, gamma, n, list(recalls))
    np.testing.assert_allclose(trace["score"].values, expected, rtol=1e-10, atol=1e-15)
    in_order = cmr.attention_circuit(params, list_length=n, variant="paper")
    lags = np.arange(1 - n, n)
    grid = cmr.paper_teacher_forced_grid([beta_enc], [beta_rec], [gamma], list_length=n, lags=lags)
    prob = in_order["probability"].values
    usable = np.isfinite(prob).all(axis=1)  # the grid skips steps with no support on any studied item
    got = np.array([np.mean([prob[s, s + lag] for s in range(n) if 0 <= s + lag < n and usable[s]] or [np.nan])
                    for lag in lags])
    np.testing.assert_allclose(got, grid["profile"].values.ravel(), rtol=1e-10, atol=1e-15)


def test_layer_one_is_a_duplicate_token_head_and_layer_two_peaks_forward():
    trace = cmr.attention_circuit({"beta_enc": 0.4, "beta_rec": 0.8, "gamma": 0.5}, list_length=6, variant="paper")
    # recalling item 3 (step 2): layer 1 returns the context before its studied copy, items 1-2 with decay
    np.testing.assert_allclose(trace["head1_output"].values[2], [0.6, 1.0, 0, 0, 0, 0])
    scores = trace["score"].values
    assert all(np.argmax(scores[k]) == k + 1 for k in range(5))  # lag +1: the induction target


def test_a_circuit_trace_round_trips_through_netcdf(tmp_path):
    trace = cmr.attention_circuit(None, list_length=4, recalls=[2, 3])
    cmr.save_dataset(trace, tmp_path / "trace.nc")
    back = cmr.load_dataset(tmp_path / "trace.nc")
    assert back.attrs["icl_cmr_kind"] == "circuit_trace"
    for name in ("score", "probability", "context"):
        np.testing.assert_array_equal(back[name].values, trace[name].values)


@pytest.mark.parametrize("kwargs, error", [
    (dict(list_length=1), ParameterError),
    (dict(list_length=4, recalls=[1, 1]), RecallDataError),
    (dict(list_length=4, recalls=[0, 2]), RecallDataError),
    (dict(list_length=4, recalls=[1.5]), RecallDataError),
    (dict(list_length=4, variant="gpt"), ParameterError),
    (dict(list_length=4, variant="paper"), ParameterError),
])
def test_bad_circuit_input_gets_one_typed_error(kwargs, error):
    with pytest.raises(error):
        cmr.attention_circuit(None, **kwargs)


def test_the_circuit_page_examples_run(capsys):
    import re

    from tests.conftest import REPO_ROOT

    text = (REPO_ROOT / "docs" / "circuit.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/circuit.md", "exec"), {})  # noqa: S102 - our own documentation
    assert capsys.readouterr().out.split()[-1] == "6"
