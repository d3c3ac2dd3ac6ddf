"""Array layer of the CMR2 kernels: an events dataset as sessions of lists in item units.

A session is the run of lists one network studies without a reset: the lists of one subject
that share the session label (a list key such as ``session``, or a named variable), in the
dataset's trial order. Items are numbered within each session by first study ("units"); each
recall becomes the unit it names: a correct recall its studied item, an intrusion the item of
an earlier list of the session (a prior-list intrusion). Extra-list intrusions (items the
session has not studied yet) and repeats within a recall period are not scored.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from ..errors import RecallDataError
from ..lab_tables import item_keys

__all__ = ["SessionArrays", "session_arrays", "session_labels"]


@dataclass(frozen=True)
class SessionArrays:
    """Kernel-ready arrays of the sessions of an events dataset (C-contiguous int64)."""

    order: np.ndarray  # (T,) dataset trial of each kernel trial (sessions consecutive)
    session_first: np.ndarray  # (S + 1,)
    session_units: np.ndarray  # (S,)
    study: np.ndarray  # (T, Lmax) unit of each serial position, -1 padding
    list_length: np.ndarray  # (T,)
    scored: np.ndarray  # (T, E) unit of each scored recall, -1 padding
    n_scored: np.ndarray  # (T,)
    list_lag: np.ndarray  # (T, E) 0 for a correct recall, k for an intrusion from k lists back

    def kernel_study(self):
        """The session and study arguments of the kernels, in their order."""
        return self.session_first, self.session_units, self.study, self.list_length


def session_labels(events: xr.Dataset, session) -> np.ndarray:
    """Session code (0..S-1, by first appearance) of each trial: subject plus the session label."""
    if session is None:
        keys = json.loads(events.attrs.get("list_keys", "[]"))
        columns = [events["subject"].values] + [events[k].values for k in keys]
    else:
        if not isinstance(session, str):
            raise RecallDataError(f"session must be the name of a variable of the events; got {type(session).__name__}")
        if session in events.variables and events[session].dims == ("trial",):
            values = events[session].values
        elif f"study_{session}" in events.variables:
            values = events[f"study_{session}"].transpose("trial", "study_position").values[:, 0]
        else:
            trial_level = sorted(str(n) for n in events.variables if events[n].dims == ("trial",))
            raise RecallDataError(f"session {session!r} names no variable of the events (one per trial or a "
                                  f"study column); got variables {', '.join(trial_level)}")
        columns = [events["subject"].values, values]
    frame = pd.DataFrame({f"k{i}": pd.Series(column).astype(str) for i, column in enumerate(columns)})
    codes, _ = pd.factorize(pd.MultiIndex.from_frame(frame), sort=False)
    return codes.astype(np.int64)


def session_arrays(events: xr.Dataset, session=None) -> SessionArrays:
    """The sessions of ``events`` as the kernels read them (see the module docstring)."""
    code = session_labels(events, session)
    order = np.argsort(code, kind="stable").astype(np.int64)
    code = code[order]
    n_sessions = int(code.max()) + 1
    session_first = np.searchsorted(code, np.arange(n_sessions + 1)).astype(np.int64)
    rank = np.arange(order.size) - session_first[code]  # list index within the session

    normalize = bool(events.attrs.get("normalize_items", 0))
    lengths = np.ascontiguousarray(events["list_length"].values[order], dtype=np.int64)
    study_items = events["study_item"].transpose("trial", "study_position").values[order]
    n_trials, width = study_items.shape
    filled = np.arange(width)[None, :] < lengths[:, None]
    s_trial, s_pos = np.nonzero(filled)
    keys = pd.Series(item_keys(study_items[s_trial, s_pos], normalize), dtype=object).astype(str).to_numpy()
    pairs = pd.MultiIndex.from_arrays([code[s_trial], keys])
    global_unit, uniques = pd.factorize(pairs, sort=False)  # first study order, sessions consecutive
    unit_session = uniques.get_level_values(0).to_numpy(dtype=np.int64)
    unit_first = np.searchsorted(unit_session, np.arange(n_sessions + 1))
    session_units = np.diff(unit_first).astype(np.int64)
    study = np.full((n_trials, width), -1, dtype=np.int64)
    study[s_trial, s_pos] = global_unit - unit_first[code[s_trial]]
    first_list = np.full(len(uniques), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first_list, global_unit, rank[s_trial])

    recalls = events["recalls"].transpose("trial", "output_position").values[order]
    recall_items = events["recall_item"].transpose("trial", "output_position").values[order]
    unit = np.full(recalls.shape, -1, dtype=np.int64)
    lag = np.full(recalls.shape, -1, dtype=np.int64)
    r_trial, r_out = np.nonzero(recalls > 0)
    unit[r_trial, r_out] = study[r_trial, recalls[r_trial, r_out] - 1]
    lag[r_trial, r_out] = 0
    i_trial, i_out = np.nonzero(recalls == -1)
    if i_trial.size:
        intruded = pd.Series(item_keys(recall_items[i_trial, i_out], normalize), dtype=object).astype(str).to_numpy()
        found = uniques.get_indexer(pd.MultiIndex.from_arrays([code[i_trial], intruded]))
        earlier = found >= 0
        earlier[earlier] = first_list[found[earlier]] < rank[i_trial[earlier]]
        unit[i_trial[earlier], i_out[earlier]] = found[earlier] - unit_first[code[i_trial[earlier]]]
        # list lag to the most recent earlier list that studied the item
        lag[i_trial[earlier], i_out[earlier]] = _most_recent_lag(study, rank, i_trial[earlier],
                                                                  unit[i_trial[earlier], i_out[earlier]])
    # repeats within a recall period are not scored: keep each (trial, unit) once, in output order
    valid = unit >= 0
    t_idx, o_idx = np.nonzero(valid)
    first_time = ~pd.DataFrame({"t": t_idx, "u": unit[t_idx, o_idx]}).duplicated().to_numpy()
    valid[t_idx[~first_time], o_idx[~first_time]] = False
    n_scored = valid.sum(axis=1).astype(np.int64)
    column = np.cumsum(valid, axis=1) - 1
    scored = np.full((n_trials, max(int(n_scored.max(initial=0)), 1)), -1, dtype=np.int64)
    scored_lag = np.zeros_like(scored)
    t_idx, o_idx = np.nonzero(valid)
    scored[t_idx, column[t_idx, o_idx]] = unit[t_idx, o_idx]
    scored_lag[t_idx, column[t_idx, o_idx]] = lag[t_idx, o_idx]
    return SessionArrays(order, session_first, session_units, np.ascontiguousarray(study), lengths,
                         np.ascontiguousarray(scored), n_scored, scored_lag)


def _most_recent_lag(study, rank, trials, units) -> np.ndarray:
    """List lag from each trial back to the latest earlier list of its session that studied the unit."""
    out = np.zeros(trials.size, dtype=np.int64)
    for lag in range(1, int(rank.max(initial=0)) + 1):  # loop over list lags, not over events
        back = trials - lag
        open_ = (out == 0) & (rank[trials] >= lag)
        hit = np.zeros(trials.size, dtype=bool)
        hit[open_] = (study[back[open_]] == units[open_, None]).any(axis=1)
        out[hit] = lag
    return out
