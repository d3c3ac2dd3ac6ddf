"""Data read with list_keys (list numbers that restart in each session) survive simulation and the
predictive check: the same numbers as the same data with one list number per list."""
from __future__ import annotations

import numpy as np
import pytest

import cmr


def _sessions():
    plain = cmr.simulate_free_recall(cmr.default_parameters(), 6, 4, subjects=2, rng=1)
    table = plain.copy()
    table["session"] = np.where(table["list"] <= 2, 1, 2)
    table["list"] = np.where(table["list"] <= 2, table["list"], table["list"] - 2)
    return cmr.from_table(plain), cmr.from_table(table, list_keys=["session"])


def test_the_simulated_table_keeps_the_sessions_and_reads_back():
    _, events = _sessions()
    sim = cmr.simulate_experiment(events, cmr.default_parameters(), n_rep=2, rng=0)
    lists = sim.drop_duplicates(["subject", "list"])
    assert lists.groupby("subject")["list"].apply(list).tolist() == [list(range(1, 9))] * 2
    assert lists["session"].tolist() == [1, 1, 2, 2] * 4 and lists["rep"].tolist() == [0] * 4 + [1] * 4 + [0] * 4 + [1] * 4
    back = cmr.from_table(sim)
    assert back.sizes["trial"] == 16


@pytest.mark.parametrize("check", ["crp", "spc", "pfr"])
def test_the_predictive_check_equals_the_same_data_without_sessions(check):
    plain, sessions = _sessions()
    ours = cmr.posterior_predictive(sessions, cmr.default_parameters(), n_rep=3, rng=5)
    want = cmr.posterior_predictive(plain, cmr.default_parameters(), n_rep=3, rng=5)
    np.testing.assert_array_equal(ours[check].values, want[check].values)
