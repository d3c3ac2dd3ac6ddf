"""Order is order: lists run in study order whatever their labels look like (cmr.ordering).

Every model and analysis that uses list order gives, on lists labelled ``1..12``, ``0..11``,
``"1".."12"``, ``"L1".."L12"`` or plain text in the order of the file, exactly what it gives on
the same lists labelled 1..12; the same lists in another order give another result, so each
case can fail.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import cmr
from cmr.ordering import order_rule, replica_labels, study_order

N_LISTS, LENGTH = 12, 4
WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]


def _table(label=lambda i: i) -> pd.DataFrame:
    """2 subjects x 12 lists x 4 items, recalls with prior-list intrusions from 1-3 lists back."""
    rng = np.random.default_rng(4)
    rows = []
    for subject in (1, 2):
        for k in range(1, N_LISTS + 1):
            items = [f"s{subject}w{k}_{p}" for p in range(1, LENGTH + 1)]
            rows += [(subject, label(k), "study", p, w) for p, w in enumerate(items, 1)]
            recalled = list(rng.permutation(items)[: rng.integers(1, LENGTH + 1)])
            back = k - int(rng.integers(1, 4))
            if back >= 1:
                recalled.insert(1, f"s{subject}w{back}_{int(rng.integers(1, LENGTH + 1))}")
            rows += [(subject, label(k), "recall", p, w) for p, w in enumerate(recalled, 1)]
    return pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item"])


LABELS = {
    "ints_from_1": lambda k: k,
    "ints_from_0": lambda k: k - 1,
    "numeric_text": lambda k: str(k),
    "prefixed_text": lambda k: f"L{k}",
    "zero_padded_text": lambda k: f"list_{k:02d}",
    "plain_text_in_file_order": lambda k: WORDS[k - 1],
}


def _cmr2(table):
    ll = cmr.cmr2_log_likelihood(cmr.from_table(table, max_intrusion_share=1.0), cmr.default_cmr2_parameters())
    return round(float(ll.attrs["total_logl"]), 9)


def _pli(table):
    return cmr.pli_list_lag(cmr.from_table(table, max_intrusion_share=1.0), 3)["count"].values.tolist()


def _rates(table):
    ds = cmr.intrusion_rates(cmr.from_table(table, max_intrusion_share=1.0))
    return [ds[name].values.tolist() for name in ("n_prior_list", "n_extra_list")]


def _cmr2_replay(table):
    replay = cmr.simulate_cmr2_experiment(cmr.from_table(table, max_intrusion_share=1.0),
                                          cmr.default_cmr2_parameters(), rng=3)
    return replay.loc[replay["trial_type"] == "recall", "item"].tolist()


def _trial_order(table):
    events = cmr.from_table(table, max_intrusion_share=1.0)
    return events["study_item"].values[:, 0].tolist()


def _network_lists(table):
    """Each list's log-likelihood under a localist CMR network, in the network's list order."""
    table, patterns, config, params = _network_inputs(table)
    stats = cmr.network_log_likelihood(table, params, config=config, patterns=patterns)
    return np.round(stats["list_logl"].values, 9).tolist()


ANALYSES = {"events_trial_order": _trial_order, "cmr2_log_likelihood": _cmr2, "pli_list_lag": _pli,
            "intrusion_rates": _rates, "cmr2_replay": _cmr2_replay, "network_list_order": _network_lists}


@pytest.mark.parametrize("labels", list(LABELS), ids=list(LABELS))
@pytest.mark.parametrize("analysis", list(ANALYSES), ids=list(ANALYSES))
def test_list_order_does_not_depend_on_the_labels(analysis, labels):
    run = ANALYSES[analysis]
    reference = run(_table())
    assert run(_table(LABELS[labels])) == reference
    swapped = {2: 10, 10: 2}  # lists 2 and 10 studied in each other's place: another result
    assert run(_table(lambda k: swapped.get(k, k))) != reference


def test_text_lists_run_in_each_subjects_own_file_order():
    """Two subjects study lists of the same names in opposite orders: each keeps its own order."""
    rows = [(s, name, "study", 1, f"{s}{name}") for s, names in ((1, ("a", "b")), (2, ("b", "a"))) for name in names]
    events = cmr.from_table(pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item"]))
    assert events["list"].values.tolist() == ["a", "b", "b", "a"]


@pytest.mark.parametrize("labels, rule, ranks", [
    ([3, 1, 2], "numeric", [2, 0, 1]),
    (["10", "2", "1", "-1.5"], "numeric_text", [3, 2, 1, 0]),
    (["L10", "L2", "L1", "L01"], "prefix_number", [3, 2, 1, 0]),
    (["b", "a", "L1"], "file", [0, 1, 2]),
    (["A2", "B1", "A1"], "file", [0, 1, 2]),
    (["1", "x"], "file", [0, 1]),
], ids=["numbers", "numeric_text", "prefix_number", "plain_text", "mixed_prefixes", "number_and_text"])
def test_the_ordering_rule(labels, rule, ranks):
    assert order_rule(np.array(labels, dtype=object if isinstance(labels[0], str) else None)) == rule
    assert study_order(np.array(labels, dtype=object if isinstance(labels[0], str) else None)).tolist() == ranks


@pytest.mark.parametrize("labels", [np.arange(0, 5), np.arange(1, 6), np.array([-2, 0, 7]),
                                    np.array(["L1", "L2"], dtype=object), np.array(["a", "b"], dtype=object)],
                         ids=["from_0", "from_1", "gaps_and_negative", "prefixed", "text"])
def test_replicas_never_share_a_label(labels):
    replicas = np.concatenate([replica_labels(labels, r) for r in range(3)])
    assert len(set(replicas.tolist())) == replicas.size
    assert replica_labels(labels, 0).tolist() == (labels.tolist() if labels.dtype.kind in "iu"
                                                  else [f"0:{x}" for x in labels])
    assert study_order(replicas).tolist() == list(range(replicas.size))  # replicas run one after another


def _textbook_check(table):
    return cmr.posterior_predictive(table, cmr.default_parameters(), n_rep=2, rng=5)["crp"].sel(source="model")


def _textbook_replicas(table):
    return cmr.simulate_experiment(table, cmr.default_parameters(), n_rep=3, rng=5)


def _network_inputs(table):
    from cmr.network import NetworkConfig

    items = sorted(set(table["item"]))
    table = table.assign(item_index=table["item"].map({w: i for i, w in enumerate(items)}).astype(np.int64))
    patterns = {"items": items, "vector": {"loc": np.eye(len(items))}}
    config = NetworkConfig(weights={"fc": {(("task", "item"), ("task", "item")): "loc"},
                                    "cf": {(("task", "item"), ("task", "item")): "loc"}})
    params = {"B_enc": 0.5, "B_start": 0, "B_rec": 0.8, "Lfc": 1, "Lcf": 1, "P1": 0, "P2": 1, "T": 10, "X1": 0.05,
              "X2": 1}
    return table, patterns, config, params


def _network_replicas(table):
    from cmr.network import simulate_network

    table, patterns, config, params = _network_inputs(table)
    return simulate_network(table, params, config=config, patterns=patterns, n_rep=3, rng=5)


REPLICA_USERS = {"posterior_predictive": _textbook_check, "simulate_experiment": _textbook_replicas,
                 "simulate_network": _network_replicas}


@pytest.mark.parametrize("labels", ["ints_from_0", "ints_from_1", "prefixed_text", "plain_text_in_file_order"])
@pytest.mark.parametrize("user", list(REPLICA_USERS), ids=list(REPLICA_USERS))
def test_replicated_lists_keep_their_own_labels(user, labels):
    """Replicas of lists labelled from 0 (or by text) read back as many lists as were simulated."""
    table = _table(LABELS[labels])
    table = table[table["subject"] == 1]
    out = REPLICA_USERS[user](table)
    if isinstance(out, pd.DataFrame):
        events = cmr.from_table(out, max_intrusion_share=1.0)
        assert events.sizes["trial"] == 3 * N_LISTS
    else:
        assert np.isfinite(out.values).any()
