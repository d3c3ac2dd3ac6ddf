"""Seeded free-recall simulation of CMR2 sessions, returned as a psifr-format table.

Every session studies ``n_lists`` new lists in order with one network (no reset between
lists), so recalls include prior-list intrusions. The table reads back with
:func:`cmr.from_table`; its intrusions are prior-list intrusions of the same session, with
their list lag (:func:`cmr.pli_list_lag`, :func:`cmr.intrusions.intrusion_list_lags`).
"""
from __future__ import annotations

import json
from typing import Mapping

import numpy as np
import pandas as pd

from ..checks import as_generator, integer, shown
from ..errors import ParameterError
from ..events import as_events
from . import _kernels
from ._sessions import session_arrays
from .parameters import cmr2_parameter_table, cmr2_parameter_vector, parameters_of_fit

__all__ = ["simulate_sessions", "simulate_experiment"]


def simulate_sessions(params, list_length: int, n_lists: int, *, subjects: int | None = None, sessions: int = 1,
                      rng=None) -> pd.DataFrame:
    """Simulate CMR2 free recall of ``n_lists`` lists in each of ``sessions`` sessions per subject.

    Parameters
    ----------
    params : mapping or recall_fit dataset
        The 16 CMR2 parameters (:func:`cmr.default_cmr2_parameters`), or each subject's own: a
        mapping of subject label to such a set, or a fit (:func:`cmr.fit_cmr2`).
    list_length, n_lists : int
        Items per list; lists per session.
    subjects, sessions : int
        Subjects (labelled 1..k; default 1) and sessions per subject (1..m). With each
        subject's own parameters the subjects are those of ``params``, labelled as there, in
        its order (``subjects`` may only repeat their number).
    rng : numpy.random.Generator or int or None
        Source of randomness (an int is a seed); the same seed gives the same table.

    Returns
    -------
    pandas.DataFrame
        Columns ``subject, session, list, trial_type, position, item``. Lists are numbered
        1..sessions*n_lists within each subject; every item is new to its subject and named
        ``"w<session>_<list in session>_<serial position>"``. Read several sessions per subject
        back with ``session="session"`` in :func:`cmr.cmr2_log_likelihood`.
    """
    params = parameters_of_fit(params)
    if isinstance(params, Mapping) and params and all(isinstance(v, Mapping) for v in params.values()):
        labels = list(params)
        if len({str(label) for label in labels}) < len(labels):
            raise ParameterError(f"subject labels of the CMR2 parameters must differ as text; got "
                                 f"{', '.join(map(shown, labels[:5]))}{' ...' if len(labels) > 5 else ''}")
        vectors, _ = cmr2_parameter_table(params, np.array([str(label) for label in labels], dtype=object))
    else:
        labels = None
        vectors = cmr2_parameter_vector(params)[None, :]
    n = integer(list_length, "list_length")
    lists = integer(n_lists, "n_lists")
    n_subjects = integer(1 if subjects is None else subjects, "subjects")
    if labels is not None and subjects is not None and n_subjects != len(labels):
        raise ParameterError(f"subjects must be left out or equal the {len(labels)} subject(s) of the CMR2 "
                             f"parameters; got {n_subjects}")
    n_subjects = n_subjects if labels is None else len(labels)
    per_subject = integer(sessions, "sessions")
    rng = as_generator(rng)
    n_sessions = n_subjects * per_subject
    n_trials = n_sessions * lists
    session_first = (np.arange(n_sessions + 1) * lists).astype(np.int64)
    session_units = np.full(n_sessions, lists * n, dtype=np.int64)
    rank = np.tile(np.arange(lists), n_sessions)
    study = (rank[:, None] * n + np.arange(n)[None, :]).astype(np.int64)
    out = np.full((n_trials, lists * n), -1, dtype=np.int64)
    session_param = np.zeros(n_sessions, dtype=np.int64) if labels is None else \
        np.repeat(np.arange(n_subjects, dtype=np.int64), per_subject)
    _kernels.simulate_sessions(vectors, session_param, session_first, session_units,
                               study, np.full(n_trials, n, dtype=np.int64), rng, out)

    trial = np.arange(n_trials)
    subject_code = trial // (lists * per_subject)
    subject = subject_code + 1 if labels is None else pd.Index(labels).to_numpy()[subject_code]
    session = (trial // lists) % per_subject + 1
    list_label = trial % (lists * per_subject) + 1
    s_trial, s_pos = np.divmod(np.arange(n_trials * n), n)
    r_trial, r_out = np.nonzero(out >= 0)
    r_unit = out[r_trial, r_out]

    def names(trials, list_in_session, position):
        return np.char.add(np.char.add(np.char.add(np.char.add(
            "w", session[trials].astype(str)), "_"), (list_in_session + 1).astype(str)),
            np.char.add("_", (position + 1).astype(str)))

    table = pd.DataFrame({
        "subject": np.concatenate([subject[s_trial], subject[r_trial]]),
        "session": np.concatenate([session[s_trial], session[r_trial]]),
        "list": np.concatenate([list_label[s_trial], list_label[r_trial]]),
        "trial_type": np.repeat(["study", "recall"], [s_trial.size, r_trial.size]),
        "position": np.concatenate([s_pos, r_out]) + 1,
        "item": np.concatenate([names(s_trial, rank[s_trial], s_pos), names(r_trial, r_unit // n, r_unit % n)]),
    })
    order = np.lexsort((table["position"].to_numpy(), table["trial_type"].to_numpy() == "recall",
                        table["list"].to_numpy(), np.concatenate([subject_code[s_trial], subject_code[r_trial]])))
    return table.iloc[order].reset_index(drop=True)


def simulate_experiment(events, params, *, session: str | None = None, n_rep: int = 1, rng=None) -> pd.DataFrame:
    """Replay the data's own sessions through CMR2 ``n_rep`` times: the same study lists in the same order.

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
        The data whose subjects, sessions and studied items are replayed (recalls are ignored).
    params : mapping or recall_fit dataset
        The 16 CMR2 parameters, a mapping of subject label to such a set, or a fit
        (:func:`cmr.fit_cmr2`): each subject replayed with its own set.
    session : str, optional
        What labels sessions, as in :func:`cmr.cmr2_log_likelihood`.
    n_rep : int
        Replays of every session, each with a fresh network; the first is the table of
        ``n_rep=1`` for the same seed.
    rng : numpy.random.Generator or int or None
        Source of randomness; the same seed gives the same table.

    Returns
    -------
    pandas.DataFrame
        Columns ``subject, list, trial_type, position, item``, the data's list keys and the
        ``session`` variable when one was named; study rows are the data's, recall rows the
        model's (prior-list intrusions name the earlier list's item). With ``n_rep > 1`` the
        replays follow each other and a last column ``rep`` (0 .. n_rep-1) says which one a row
        is; read the table back with ``cmr.from_table(table, list_keys=["rep", ...])`` (plus the
        data's own list keys), so that every replay is a session of its own.
    """
    events = as_events(events)
    reps = integer(n_rep, "n_rep")
    arrays = session_arrays(events, session)
    param_table, session_param = cmr2_parameter_table(
        params, events["subject"].values[arrays.order[arrays.session_first[:-1]]])
    rng = as_generator(rng)
    tables = []
    for rep in range(reps):  # one replay after the other from the same generator: replay 0 is n_rep=1's
        out = np.full((arrays.order.size, max(int(arrays.session_units.max()), 1)), -1, dtype=np.int64)
        _kernels.simulate_sessions(param_table, session_param, *arrays.kernel_study(), rng, out)
        tables.append(_replay_table(events, arrays, out, session))
    if reps == 1:
        return tables[0]
    for rep, table in enumerate(tables):
        table["rep"] = rep
    return pd.concat(tables, ignore_index=True)


def _replay_table(events, arrays, out, session) -> pd.DataFrame:
    """The psifr table of one replay: the data's study rows and the model's recalls ``out``."""
    study_items = events["study_item"].transpose("trial", "study_position").values[arrays.order]
    session_of = np.repeat(np.arange(arrays.session_units.size), np.diff(arrays.session_first))
    unit_first = np.concatenate([[0], np.cumsum(arrays.session_units)])
    names = np.empty(int(unit_first[-1]), dtype=object)
    s_trial, s_pos = np.nonzero(arrays.study >= 0)
    names[unit_first[session_of[s_trial]] + arrays.study[s_trial, s_pos]] = study_items[s_trial, s_pos]
    r_trial, r_out = np.nonzero(out >= 0)
    trial = arrays.order  # dataset trial of each kernel row
    columns = {"subject": events["subject"].values, "list": events["list"].values}
    keys = json.loads(events.attrs.get("list_keys", "[]"))
    for key in keys:
        columns[key] = events[key].values
    if session is not None and session not in columns:
        if session in events.variables and events[session].dims == ("trial",):
            columns[session] = events[session].values
        else:
            column = events[f"study_{session}"]
            values = column.transpose("trial", "study_position").values[:, 0]
            if column.attrs.get("table_dtype") == "int64" and not np.isnan(values).any():
                values = values.astype(np.int64)  # the table's whole numbers, stored as float with the study events
            columns[session] = values
    rows = {name: np.concatenate([values[trial[s_trial]], values[trial[r_trial]]]) for name, values in columns.items()}
    table = pd.DataFrame({
        **{name: rows[name] for name in ("subject", "list")},
        "trial_type": np.repeat(["study", "recall"], [s_trial.size, r_trial.size]),
        "position": np.concatenate([s_pos, r_out]) + 1,
        "item": np.concatenate([study_items[s_trial, s_pos],
                                names[unit_first[session_of[r_trial]] + out[r_trial, r_out]]]),
        **{name: rows[name] for name in columns if name not in ("subject", "list")},
    })
    row_trial = np.concatenate([trial[s_trial], trial[r_trial]])
    order = np.lexsort((table["position"].to_numpy(), table["trial_type"].to_numpy() == "recall", row_trial))
    return table.iloc[order].reset_index(drop=True)
