"""CMR2 (cmr.cmr2): sessions of lists with prior-list intrusions, against plain numpy oracles.

* ``PortedCMR2`` is the simulation loop of pyCMR3's CMR2 (github.com/rivertam2016/pyCMR3,
  Core_Model/CMR3.pyx: class CMR2 with ``beta_source = 0`` and no source cells; methods
  ``present_list``, ``present_item``, ``update_context_temp``, ``recall_session``) ported to
  plain numpy, with its network layout (item cells sorted by item number, then 2 * lists + 1
  distractor cells; M_FC columns are item inputs; learning matrices L_FC, L_CF; primacy
  ``phi_s exp(-phi_d i) + 1``). Two changes, both the model this package states (docs/cmr2.md):
  the leaky accumulator is replaced by textbook CMR's stop rule and Luce choice over the items
  presented so far that are not yet reported, and a retrieved item that fails the c_thresh
  check leaves context unchanged (retrieval runs again) instead of moving it. It also scores a
  recorded session event by event (the brute-force likelihood).
* Statistical checks compare the package's simulator with the port: PLIs by list lag, lag-CRP
  and SPC, each cell by a two-sample z-test at |z| <= 4.5 (seeded, so each outcome is fixed).
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import cmr
from cmr.errors import ParameterError, RecallDataError
from cmr.intrusions import intrusion_list_lags
from cmr.testing.statistics import multinomial_chi_square

FLOOR = 1e-5  # textbook CMR's (cymr's) event floor, shared by CMR2
Z_LIMIT = 4.5  # per-cell two-sample z limit of the statistical comparisons


def _params(**changes):
    base = dict(cmr.default_cmr2_parameters(), Lfc=0.6, Lcf=0.5, P1=1.5, P2=0.8, B_enc=0.6, B_start=0.2,
                B_rec=0.6, T=0.25, X1=0.08, X2=0.45, Dfc=0.4, Dcf=0.3, B_distract=0.7, C_thresh=0.0)
    base.update(changes)
    return base


# --- the oracle: pyCMR3's CMR2 loop in plain numpy -------------------------------------------


class PortedCMR2:
    """One session of pyCMR3's CMR2 network (see the module docstring), float64."""

    def __init__(self, params, presented):
        self.p = params
        self.pres = np.asarray(presented)
        n_lists = self.pres.shape[0]
        self.items = np.unique(self.pres)  # pyCMR3: all_session_items_sorted
        self.n_items = self.items.size
        size = self.n_items + 2 * n_lists + 1
        p = params
        self.M_FC = np.eye(size) * p["Dfc"]  # scale_fc
        self.M_CF = np.eye(size) * p["Dcf"]  # scale_cf
        self.M_FC[: self.n_items, : self.n_items] += p["Afc"]
        self.M_CF[: self.n_items, : self.n_items] += p["Acf"]
        self.c = np.zeros(size)
        self.distractor = self.n_items
        self.list_idx = 0
        self.presented = set()

    def _advance(self, index, beta):
        """update_context_temp: c_in = M_FC f normalised, then advance_context."""
        c_in = self.M_FC[:, index].copy()
        norm = np.sqrt(np.sum(c_in ** 2))
        c_in = c_in / norm if norm > 0 else c_in
        dot = self.c @ c_in
        rho = np.sqrt(1 + beta ** 2 * (dot ** 2 - 1)) - beta * dot
        self.c = rho * self.c + beta * c_in

    def similarity(self, index):
        c_in = self.M_FC[:, index]
        return (self.c @ c_in) / np.sqrt(c_in @ c_in)

    def present_list(self):
        p = self.p
        start = self.distractor
        self._advance(start, 1.0 if self.list_idx == 0 else p["B_distract"])  # beta_rec_post
        self.distractor += 1
        phi_s, phi_d = p["P1"] / p["Lcf"], p["P2"]  # Lcf + P1 e^{-P2 i} = Lcf (phi_s e^{-phi_d i} + 1)
        for i, item in enumerate(self.pres[self.list_idx]):
            index = int(np.searchsorted(self.items, item))
            self._advance(index, p["B_enc"])
            self.M_FC[:, index] += p["Lfc"] * self.c
            self.M_CF[index, :] += p["Lcf"] * (phi_s * np.exp(-phi_d * i) + 1) * self.c
            self.presented.add(index)
        self._advance(start, p["B_start"])  # textbook start-of-list reinstatement (0: none)
        self._advance(self.distractor, 0.0)  # pyCMR3's end-of-list distractor, beta_distract = 0
        self.distractor += 1
        self.list_idx += 1

    def _stop(self, k):
        return float(np.clip(self.p["X1"] * np.exp(self.p["X2"] * k), 1e-6, 1 - 1e-6))

    def _passing(self, reported):
        pool = sorted(self.presented - reported)
        return pool, [i for i in pool if self.similarity(i) >= self.p["C_thresh"]]

    def _luce(self, choices):
        act = np.maximum(self.M_CF[choices] @ self.c, 1e-6)
        w = np.exp(2 * (act - act.max()) / self.p["T"])
        return w / w.sum()

    def recall_session(self, rng):
        """Item numbers in output order (pyCMR3's loop with the stop rule and Luce choice)."""
        reported, out = set(), []
        while True:
            pool, passing = self._passing(reported)
            if not passing or rng.random() < self._stop(len(out)):
                return out
            while True:  # the post-retrieval check: a rejected item is not reported, context stays
                index = pool[rng.choice(len(pool), p=self._luce(pool))]
                if self.similarity(index) >= self.p["C_thresh"]:
                    break
            self._advance(index, self.p["B_rec"])
            reported.add(index)
            out.append(int(self.items[index]))

    def score_session(self, recalled):
        """Event probabilities of a recorded recall period (scored recalls, then the stop)."""
        reported, probs = set(), []
        for item in list(recalled) + [None]:
            if item is not None:
                index = int(np.searchsorted(self.items, item))
                if index >= self.n_items or self.items[index] != item or index not in self.presented:
                    continue  # extra-list intrusion or an item of a later list: not scored
                if index in reported:
                    continue  # repeat
            pool, passing = self._passing(reported)
            p_stop = self._stop(len(probs)) if passing else 1.0
            if item is None:
                probs.append(p_stop)
                break
            p = 0.0
            if index in passing:
                p = (1 - p_stop) * self._luce(passing)[passing.index(index)]
            probs.append(p)
            self._advance(index, self.p["B_rec"])
            reported.add(index)
        return probs


def _table(sessions):
    """psifr table of sessions [(subject, session, presented (L, n), recalls [list per list])]."""
    rows = []
    for subject, session, presented, recalls in sessions:
        for l, (study, recall) in enumerate(zip(presented, recalls)):
            label = (session - 1) * len(presented) + l + 1
            rows += [(subject, session, label, "study", i + 1, str(x)) for i, x in enumerate(study)]
            rows += [(subject, session, label, "recall", i + 1, str(x)) for i, x in enumerate(recall)]
    return pd.DataFrame(rows, columns=["subject", "session", "list", "trial_type", "position", "item"])


def _random_sessions(rng, n_subjects, n_sessions, n_lists, n):
    """Sessions with correct recalls, prior-list intrusions, later-list items, extra-list items and repeats."""
    out = []
    for subject in range(1, n_subjects + 1):
        for session in range(1, n_sessions + 1):
            pool = rng.choice(np.arange(1, 500), size=n_lists * n, replace=False)
            presented = pool.reshape(n_lists, n)
            if n_lists > 2:
                presented[2, 0] = presented[0, 1]  # one item studied again two lists later
            recalls = []
            for l in range(n_lists):
                choices = list(presented[: l + 1].ravel()) + list(presented[l + 1:, :1].ravel()) + [999]
                k = rng.integers(0, n + 3)
                seq = [int(x) for x in rng.choice(choices, size=k)]
                recalls.append(seq)
            out.append((subject, session, presented, recalls))
    return out


# --- the likelihood equals the brute-force numpy reference -------------------------------------


@pytest.mark.parametrize("changes", [
    {},
    dict(C_thresh=0.15, B_distract=0.5),
    dict(Afc=0.05, Acf=0.1, B_start=0.0, C_thresh=0.05, T=0.6),
    dict(B_distract=1.0, C_thresh=0.3, X1=0.01, X2=0.2, B_enc=0.9, B_rec=0.3),
])
def test_likelihood_equals_the_numpy_reference(changes):
    params = _params(**changes)
    rng = np.random.default_rng(7)
    sessions = _random_sessions(rng, 3, 2, 4, 5)
    events = cmr.from_table(_table(sessions), max_intrusion_share=1.0)
    got = cmr.cmr2_log_likelihood(events, params, session="session", by="trial", event_probabilities=True)
    trial = 0
    for _, _, presented, recalls in sessions:
        oracle = PortedCMR2(params, presented)
        for recall in recalls:
            oracle.present_list()
            expected = np.array(oracle.score_session(recall))
            probs = got["event_probability"].values[trial]
            np.testing.assert_allclose(probs[: expected.size], expected, rtol=1e-10, atol=1e-15)
            assert np.isnan(probs[expected.size:]).all()
            logl = np.log(np.clip(expected, FLOOR, 1.0)).sum()
            np.testing.assert_allclose(got["trial_logl"].values[trial], logl, rtol=1e-10)
            assert got["trial_n"].values[trial] == expected.size
            trial += 1
    assert trial == events.sizes["trial"]


def test_prior_list_intrusions_are_scored_with_their_list_lag():
    params = _params(C_thresh=0.0, T=0.6, B_distract=0.4)
    presented = np.array([[11, 12, 13], [21, 22, 23], [31, 32, 33]])
    recalls = [[13], [23, 12, 999, 23], [11, 33, 21]]
    events = cmr.from_table(_table([(1, 1, presented, recalls)]), max_intrusion_share=1.0)
    got = cmr.cmr2_log_likelihood(events, params, by="trial", event_probabilities=True)
    lags = got["event_list_lag"].values
    assert lags[1, :3].tolist() == [0, 1, -1]  # 23 correct, 12 from one list back, then the stop
    assert lags[2, :4].tolist() == [2, 0, 1, -1]
    probs = got["event_probability"].values
    assert probs[2, 0] > FLOOR  # the model itself gives a prior-list intrusion its probability
    # each recall's probability competes with the prior-list items: over every possible first event
    # of list 3 (its own items, the six earlier ones, the stop) the probabilities sum to 1
    first = []
    for x in [None, *presented.ravel()]:
        table = _table([(1, 1, presented, [[13], [23], [] if x is None else [int(x)]])])
        first.append(cmr.cmr2_log_likelihood(table, params, by="trial", event_probabilities=True)
                     ["event_probability"].values[2, 0])
    first = np.array(first)
    np.testing.assert_allclose(first.sum(), 1.0, rtol=1e-12)
    assert first[1:7].min() > 0 and first[1:7].sum() > 0.01  # the items of lists 1 and 2
    with_prior = cmr.cmr2_log_likelihood(events, params, by="trial")
    assert with_prior.attrs["n_sessions"] == 1


def test_sessions_come_from_list_keys_or_a_named_variable():
    """Lists numbered again in each session (read with list_keys) are the same sessions as a
    ``session`` column named explicitly; without either, all of a subject's lists form one session."""
    params = _params(C_thresh=0.1)
    table = _table(_random_sessions(np.random.default_rng(3), 2, 2, 3, 4))
    named = cmr.cmr2_log_likelihood(table.copy(), params, session="session", by="trial")
    restarted = table.assign(list=(table["list"] - 1) % 3 + 1)
    keyed = cmr.cmr2_log_likelihood(cmr.from_table(restarted, list_keys=["session"], max_intrusion_share=1.0),
                                    params, by="trial")
    np.testing.assert_array_equal(keyed["trial_logl"].values, named["trial_logl"].values)
    assert keyed.attrs["n_sessions"] == named.attrs["n_sessions"] == 4
    whole = cmr.cmr2_log_likelihood(table, params, by="trial")
    assert whole.attrs["n_sessions"] == 2
    np.testing.assert_array_equal(whole["trial_logl"].values[[0, 1, 2, 6, 7, 8]],
                                  named["trial_logl"].values[[0, 1, 2, 6, 7, 8]])  # first sessions agree
    assert not np.allclose(whole["trial_logl"].values[3:6], named["trial_logl"].values[3:6])


def test_each_subject_can_have_its_own_parameters():
    sessions = _random_sessions(np.random.default_rng(5), 3, 1, 3, 4)
    events = cmr.from_table(_table(sessions), max_intrusion_share=1.0)
    own = {1: _params(), 2: _params(C_thresh=0.1, T=0.5), "3": _params(B_distract=1.0)}
    got = cmr.cmr2_log_likelihood(events, own, by="trial")["trial_logl"].values
    for subject, params in ((1, own[1]), (2, own[2]), (3, own["3"])):
        alone = cmr.cmr2_log_likelihood(_table([s for s in sessions if s[0] == subject]), params, by="trial")
        np.testing.assert_array_equal(got[3 * (subject - 1): 3 * subject], alone["trial_logl"].values)
    with pytest.raises(ParameterError) as info:
        cmr.cmr2_log_likelihood(events, {1: _params(), 2: _params()})
    _one_line(info, ParameterError, r"no CMR2 parameters for subject\(s\) 3; got parameters for 1, 2")


# --- reduction to textbook CMR -----------------------------------------------------------------


@pytest.mark.parametrize("example", range(3))
def test_a_one_list_session_is_textbook_cmr(example):
    from cmr.testing import TEXTBOOK_EXAMPLES

    params = dict(TEXTBOOK_EXAMPLES[example], B_distract=0.4, C_thresh=0.0)
    recalls = cmr.simulate_recalls(TEXTBOOK_EXAMPLES[example], 7, 60, rng=example)
    events = cmr.from_recall_matrix(recalls, 7)  # one list per subject: one session per list
    events = events.assign_coords(subject=("trial", np.arange(events.sizes["trial"])))
    got = cmr.cmr2_log_likelihood(events, params, by="trial")["trial_logl"].values
    expected = cmr.log_likelihood(events, TEXTBOOK_EXAMPLES[example], by="trial")["trial_logl"].values
    np.testing.assert_allclose(got, expected, rtol=1e-10)


@pytest.mark.parametrize("seed", [0, 1])
def test_with_full_distraction_each_list_is_textbook_cmr(seed):
    """B_distract = 1 starts every list from an orthogonal context and any C_thresh > 0 rejects the
    items of earlier lists (their similarity to context is then exactly 0): with Afc = 0 every list
    is textbook CMR, whatever came before it."""
    textbook = dict(cmr.default_parameters(), Lfc=0.4, Lcf=0.3, P1=2.0, P2=1.0, B_enc=0.5, B_start=0.3,
                    B_rec=0.7, T=0.2, X1=0.05, X2=0.3, Acf=0.1, Dfc=0.6, Dcf=0.4)
    table = cmr.simulate_free_recall(textbook, 8, 6, subjects=3, rng=seed)
    table["item"] = table["list"].astype(str) + "-" + table["item"]  # the simulator names items by position
    got = cmr.cmr2_log_likelihood(table, dict(textbook, B_distract=1.0, C_thresh=1e-9), by="trial")
    expected = cmr.log_likelihood(table, textbook, by="trial")
    np.testing.assert_allclose(got["trial_logl"].values, expected["trial_logl"].values, rtol=1e-10)
    assert got.attrs["n_sessions"] == 3


def test_with_full_distraction_morton2013_lists_are_textbook_cmr():
    """Real sessions (psifr's Morton2013, two subjects, intrusions removed: textbook CMR does not
    score them, CMR2 scores prior-list ones)."""
    fr = pytest.importorskip("psifr.fr")
    data = fr.sample_data("Morton2013").query("subject <= 2")
    study = data[data.trial_type == "study"]
    studied = set(zip(study.subject, study.list, study.item))
    keep = (data.trial_type == "study").to_numpy() | np.array([key in studied for key in zip(data.subject, data.list,
                                                                                                data.item)])
    table = data[keep][["subject", "list", "trial_type", "position", "item", "session"]]
    textbook = dict(cmr.default_parameters(), X1=0.02, X2=0.2, T=0.3)
    got = cmr.cmr2_log_likelihood(table, dict(textbook, B_distract=1.0, C_thresh=1e-9), session="session",
                                  by="trial")
    expected = cmr.log_likelihood(table, textbook, by="trial")
    np.testing.assert_allclose(got["trial_logl"].values, expected["trial_logl"].values, rtol=1e-10)
    assert got.attrs["n_sessions"] == len(table[["subject", "session"]].drop_duplicates())


# --- the likelihood predicts the simulator ------------------------------------------------------


def test_session_probabilities_match_simulated_frequencies():
    """Two 2-item lists: the probability of each whole session record (both lists' recalls) under
    the likelihood against its frequency in 20,000 simulated sessions (chi-square, alpha 1e-3)."""
    params = _params(B_distract=0.3, C_thresh=0.2, X1=0.1, X2=0.3, T=0.5)
    n_sessions = 20_000
    table = cmr.simulate_cmr2(params, 2, 2, subjects=n_sessions, rng=11)
    events = cmr.from_table(table, max_intrusion_share=1.0)
    scored = cmr.cmr2_log_likelihood(events, params, by="trial", event_probabilities=True)
    assert (scored["event_probability"].values[np.isfinite(scored["event_probability"].values)] > 0).all()
    raw = np.nansum(np.log(scored["event_probability"].values), axis=1).reshape(n_sessions, 2).sum(axis=1)
    recall = table[table.trial_type == "recall"]
    record = recall.groupby("subject")["item"].agg(lambda s: " ".join(s) + "|" + str(len(s)))
    per_list = recall.groupby(["subject", "list"]).size().unstack(fill_value=0)
    keys = pd.Series("", index=np.arange(1, n_sessions + 1))
    keys.loc[record.index] = record.to_numpy()
    keys = keys + ";" + per_list.reindex(keys.index, fill_value=0).astype(str).agg(",".join, axis=1)
    codes, labels = pd.factorize(keys)
    observed = np.bincount(codes)
    prob = np.zeros(len(labels))
    prob[codes] = np.exp(raw)
    assert prob.sum() <= 1 + 1e-9
    pli = (scored["event_list_lag"].values == 1).any()
    assert pli  # the simulated sessions hold prior-list intrusions
    result = multinomial_chi_square(np.append(observed, 0), np.append(prob, max(1 - prob.sum(), 0.0)),
                                    labels=list(labels) + ["unseen"])
    assert result.pvalue > 1e-3, result.describe()


# --- the simulator against the ported reference loop -------------------------------------------


def _oracle_table(params, n, n_lists, n_sessions, seed):
    rng = np.random.default_rng(seed)
    sessions = []
    for s in range(n_sessions):
        presented = np.arange(1, n_lists * n + 1).reshape(n_lists, n) + 1000 * s
        model = PortedCMR2(params, presented)
        recalls = []
        for _ in range(n_lists):
            model.present_list()
            recalls.append(model.recall_session(rng))
        sessions.append((s + 1, 1, presented, recalls))
    return _table(sessions)


def _z(a_count, a_total, b_count, b_total):
    """Two-sample z of proportions (0 where both are 0 or 1)."""
    a_count, a_total, b_count, b_total = (np.asarray(x, dtype=float) for x in (a_count, a_total, b_count, b_total))
    pooled = (a_count + b_count) / np.maximum(a_total + b_total, 1)
    se = np.sqrt(pooled * (1 - pooled) * (1 / np.maximum(a_total, 1) + 1 / np.maximum(b_total, 1)))
    diff = a_count / np.maximum(a_total, 1) - b_count / np.maximum(b_total, 1)
    return np.where(se > 0, diff / np.where(se > 0, se, 1), 0.0)


@pytest.mark.parametrize("changes", [dict(C_thresh=0.0), dict(C_thresh=0.25, B_distract=0.4)])
def test_simulation_matches_the_ported_reference_statistically(changes):
    params = _params(**changes)
    n, n_lists, n_sessions = 6, 5, 600
    ours = cmr.from_table(cmr.simulate_cmr2(params, n, n_lists, subjects=n_sessions, rng=3), max_intrusion_share=1.0)
    theirs = cmr.from_table(_oracle_table(params, n, n_lists, n_sessions, seed=4), max_intrusion_share=1.0)
    # prior-list intrusions per list by list lag (Poisson counts: z of the two rates)
    a, b = cmr.pli_list_lag(ours, 3, by=None), cmr.pli_list_lag(theirs, 3, by=None)
    assert a["count"].values.sum() > 100  # the comparison has intrusions to compare
    rate_z = (a["count"].values - b["count"].values) / np.sqrt(np.maximum(a["count"].values + b["count"].values, 1))
    assert np.abs(rate_z).max() <= Z_LIMIT, (a["count"].values, b["count"].values)
    # lag-CRP over lags -4..4 (counts of actual transitions among possible ones)
    a, b = cmr.lag_crp(ours, by=None), cmr.lag_crp(theirs, by=None)
    z = _z(a["actual"].values, a["possible"].values, b["actual"].values, b["possible"].values)
    assert np.abs(z).max() <= Z_LIMIT, (a["profile"].values, b["profile"].values)
    # serial position curve
    a, b = cmr.spc(ours, by=None), cmr.spc(theirs, by=None)
    z = _z(a["actual"].values, a["possible"].values, b["actual"].values, b["possible"].values)
    assert np.abs(z).max() <= Z_LIMIT, (a["prob"].values, b["prob"].values)


def test_the_statistical_comparison_detects_a_changed_model():
    """The same comparison fails when the reference runs with another B_distract: its tolerance
    leaves room for Monte Carlo error only."""
    params = _params()
    ours = cmr.from_table(cmr.simulate_cmr2(params, 6, 5, subjects=600, rng=3), max_intrusion_share=1.0)
    theirs = cmr.from_table(_oracle_table(dict(params, B_distract=0.95), 6, 5, 600, seed=4),
                            max_intrusion_share=1.0)
    a, b = cmr.pli_list_lag(ours, 3, by=None), cmr.pli_list_lag(theirs, 3, by=None)
    rate_z = (a["count"].values - b["count"].values) / np.sqrt(np.maximum(a["count"].values + b["count"].values, 1))
    assert np.abs(rate_z).max() > Z_LIMIT


def test_simulation_is_seeded():
    params = _params()
    first = cmr.simulate_cmr2(params, 5, 3, subjects=2, sessions=2, rng=5)
    assert first.equals(cmr.simulate_cmr2(params, 5, 3, subjects=2, sessions=2, rng=5))
    assert not first.equals(cmr.simulate_cmr2(params, 5, 3, subjects=2, sessions=2, rng=6))
    assert sorted(first.columns) == sorted(["subject", "session", "list", "trial_type", "position", "item"])
    # several sessions per subject: the likelihood reads them back with session="session"
    got = cmr.cmr2_log_likelihood(cmr.from_table(first, max_intrusion_share=1.0), params, session="session")
    assert got.attrs["n_sessions"] == 4 and np.isfinite(got.attrs["total_logl"])


def test_replaying_a_simulated_experiment_gives_the_same_recalls():
    """The data's own sessions replayed with the seed that made them give the same table back."""
    params = _params(C_thresh=0.05, B_distract=0.5)
    table = cmr.simulate_cmr2(params, 5, 4, subjects=6, rng=8)
    replay = cmr.simulate_cmr2_experiment(cmr.from_table(table, max_intrusion_share=1.0), params, rng=8)
    expected = table.drop(columns="session")
    pd.testing.assert_frame_equal(replay[expected.columns].astype({"item": str}), expected.astype({"item": str}),
                                  check_dtype=False)
    other = cmr.simulate_cmr2_experiment(cmr.from_table(table, max_intrusion_share=1.0), params, rng=9)
    assert not other.equals(replay)


def test_replaying_morton2013_keeps_its_lists_and_sessions():
    fr = pytest.importorskip("psifr.fr")
    data = fr.sample_data("Morton2013").query("subject == 1")
    params = _params(C_thresh=0.0, B_distract=0.5)
    replay = cmr.simulate_cmr2_experiment(data, params, session="session", rng=2)
    study = replay[replay.trial_type == "study"].reset_index(drop=True)
    expected = data[data.trial_type == "study"].reset_index(drop=True)
    assert study[["subject", "list", "position", "item", "session"]].equals(
        expected[["subject", "list", "position", "item", "session"]])
    events = cmr.from_table(replay, max_intrusion_share=1.0)
    lags = intrusion_list_lags(events)
    assert (lags >= 1).sum() > 0 and (lags == -1).sum() == 0  # intrusions all come from earlier lists
    assert np.isfinite(cmr.cmr2_log_likelihood(events, params, session="session").attrs["total_logl"])


# --- the property-testing kit runs on CMR2 ---------------------------------------------------------


def _kit_model(extra, textbook, **options):
    """CMR2 as the kit's RecallModel: every trial is a one-list session (its own subject)."""
    from cmr.testing import RecallModel, scored_event_probabilities

    def scored(params, matrix, n, event_probabilities=False):
        events = cmr.from_recall_matrix(matrix, n)
        events = events.assign_coords(subject=("trial", np.arange(events.sizes["trial"])))  # a session per list
        return cmr.cmr2_log_likelihood(events, dict(params, **extra), by="trial",
                                       event_probabilities=event_probabilities)

    def log_likelihood(params, recalls, list_length):
        return scored(params, np.asarray(recalls), list_length)["logl"].values

    def event_probabilities(params, recalls, list_length):
        """Each possible next event scored as the last event of a sequence, all in one call."""
        return scored_event_probabilities(
            lambda padded, n: scored(params, padded, n, event_probabilities=True)["event_probability"].values,
            recalls, list_length)

    def simulate(params, list_length, n_trials, rng):
        table = cmr.simulate_cmr2(dict(params, **extra), list_length, 1, subjects=n_trials, rng=rng)
        recalls, _ = cmr.to_recall_matrix(cmr.from_table(table, max_intrusion_share=1.0))
        padded = np.zeros((n_trials, list_length), dtype=np.int64)
        padded[:, : recalls.shape[1]] = recalls[:, :list_length]
        return padded

    return RecallModel(name="cmr CMR2 (one-list sessions)", event_probabilities=event_probabilities,
                       log_likelihood=log_likelihood, simulate=simulate, textbook=textbook,
                       rtol=1e-9, atol=1e-12, list_lengths=(1, 6), **options)


@pytest.mark.parametrize("check", ["distribution", "likelihood", "reference", "simulation"])
def test_the_kit_runs_on_cmr2(check):
    from cmr.testing import run_check

    run_check(_kit_model({"B_distract": 0.5, "C_thresh": 0.0}, textbook=True), check, max_examples=6)


@pytest.mark.parametrize("check", ["distribution", "likelihood", "simulation"])
def test_the_kit_runs_on_cmr2_with_editing(check):
    """With C_thresh > 0 a one-list session is no longer textbook CMR; the kit's model-free checks hold."""
    from cmr.testing import TEXTBOOK_EXAMPLES, run_check

    model = _kit_model({"B_distract": 0.5, "C_thresh": 0.3}, textbook=False, examples=TEXTBOOK_EXAMPLES,
                       event_floor=FLOOR)
    run_check(model, check, max_examples=6)


# --- bad input: one typed error, one line --------------------------------------------------------


def _one_line(exc_info, error, pattern):
    assert exc_info.type is error
    message = str(exc_info.value)
    assert "\n" not in message and "np." not in message
    assert re.search(pattern, message), message


@pytest.mark.parametrize("change, pattern", [
    ({"B_distract": 1.5}, r"CMR2 parameter B_distract must be in \[0, 1\]; got 1.5"),
    ({"C_thresh": float("nan")}, r"CMR2 parameter C_thresh must be in \[0, 1\]; got nan"),
    ({"C_thresh": np.float64(-0.1)}, r"C_thresh must be in \[0, 1\]; got -0.1$"),
    ({"B_distract": "high"}, r"B_distract must be a real number in \[0, 1\]; got 'high'"),
    ({"beta_rec_post": 0.9}, r"unknown CMR2 parameter\(s\) 'beta_rec_post'; known: Lfc, .*C_thresh"),
    ({"T": 0.0}, r"CMR parameter T must be in"),
])
def test_bad_parameters_are_one_typed_line(change, pattern):
    table = _table([(1, 1, np.array([[1, 2, 3]]), [[3, 1]])])
    with pytest.raises(ParameterError) as info:
        cmr.cmr2_log_likelihood(table, {**_params(), **change})
    _one_line(info, ParameterError, pattern)
    with pytest.raises(ParameterError) as info:
        cmr.simulate_cmr2({**_params(), **change}, 3, 2)
    _one_line(info, ParameterError, pattern)


def test_missing_parameters_and_bad_options_are_one_typed_line():
    table = _table([(1, 1, np.array([[1, 2, 3]]), [[3, 1]])])
    params = _params()
    del params["C_thresh"]
    with pytest.raises(ParameterError) as info:
        cmr.cmr2_log_likelihood(table, params)
    _one_line(info, ParameterError, r"missing CMR2 parameter\(s\): C_thresh")
    with pytest.raises(RecallDataError) as info:
        cmr.cmr2_log_likelihood(table, _params(), session="block")
    _one_line(info, RecallDataError, r"session 'block' names no variable of the events")
    with pytest.raises(RecallDataError) as info:
        cmr.cmr2_log_likelihood(table, _params(), by="list")
    _one_line(info, RecallDataError, r"by must be 'subject', 'trial' or None; got 'list'")
    with pytest.raises(ParameterError) as info:
        cmr.simulate_cmr2(_params(), 0, 2)
    _one_line(info, ParameterError, r"list_length")


def test_inputs_are_not_modified():
    table = _table(_random_sessions(np.random.default_rng(1), 1, 1, 3, 4))
    events = cmr.from_table(table, max_intrusion_share=1.0)
    before, params = events.copy(deep=True), _params()
    kept = dict(params)
    cmr.cmr2_log_likelihood(events, params)
    assert events.identical(before) and params == kept
