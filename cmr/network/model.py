"""Likelihood, simulation and recorded states of a general CMR network, equal to cymr's ``CMR``.

``network_log_likelihood(data, params, config=..., patterns=...)`` gives what
``cymr.cmr.CMR().likelihood(data, params, subj_params, param_def, patterns)`` gives for the same
network (see :class:`~cmr.network.config.NetworkConfig`), list by list. See docs/cmr-features.md.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import xarray as xr

from ..checks import as_generator, integer
from ..errors import ParameterError
from ..ordering import replica_labels
from . import _kernels
from ._arrays import check_patterns, list_parameters, network_weights
from ._lists import recall_lists
from .config import NetworkConfig

__all__ = ["network_log_likelihood", "simulate_network", "record_network", "lists_log_likelihood", "prepared_lists"]

RECORD_FIELDS = ("c", "c_in", "f", "f_in")


def prepared_lists(data, config, patterns):
    """Checked patterns and the lists of ``data`` with the data columns the dynamic parameters use."""
    if not isinstance(config, NetworkConfig):
        raise ParameterError(f"config must be a cmr.NetworkConfig; got {type(config).__name__}")
    patterns = check_patterns(patterns)
    columns = sorted({name for phase in config.dynamic.values() for expr in phase.values() for name in expr.names})
    lists = recall_lists(data, [c for c in columns if _is_column(data, c)], pool_size=len(patterns["items"]))
    return patterns, lists


def _setup(data, params, config, patterns, subject_params, recall_rows=None, compress=True):
    patterns, lists = prepared_lists(data, config, patterns)
    par = list_parameters(config, lists, params, subject_params, recall_rows=recall_rows)
    net = network_weights(config, patterns, lists, par.values, compress=compress)
    return patterns, lists, par, net


def _is_column(data, name) -> bool:
    if isinstance(data, pd.DataFrame):
        return name in data.columns
    return f"study_{name}" in getattr(data, "data_vars", {})


def _segments(config, lists):
    """Study and recall indices into the item segment (serial positions, or pool rows)."""
    if config.scope == "pool":
        return lists.study_index, lists.recall_index
    study = np.ascontiguousarray(np.broadcast_to(np.arange(lists.length), lists.study_index.shape))
    return study, lists.recall_input


def lists_log_likelihood(config, lists, par, net):
    """Log-likelihood (L,) and raw event probabilities (L, R + 1) of prepared lists."""
    study, recalls = _segments(config, lists)
    event_p = np.zeros((lists.n_lists, recalls.shape[1] + 1))
    list_logl = np.zeros(lists.n_lists)
    _kernels.lists_log_likelihood(
        net.w_fc, net.w_cf, net.w_ff, net.group, net.c_ind, net.n_seg, np.ascontiguousarray(study, dtype=np.int64),
        par.b_enc, par.lfc, par.lcf, par.b_distract, par.b_start, par.b_rec, par.temperature, par.p_stop,
        np.ascontiguousarray(recalls, dtype=np.int64), lists.n_recall, config.distraction, event_p, list_logl,
    )
    return list_logl, event_p


def network_log_likelihood(data, params, *, config: NetworkConfig, patterns, subject_params=None,
                           by: str | None = "subject") -> xr.Dataset:
    """Log-likelihood of each list's recall sequence under a CMR network (cymr's ``CMR.likelihood``).

    Parameters
    ----------
    data : pandas.DataFrame or xarray.Dataset
        psifr recall table with ``subject, list, trial_type, position, item, item_index`` and any
        data columns that dynamic parameters use (or an events dataset with those variables).
        Lists must all have one length.
    params : mapping
        Parameter values for everyone (cymr's group parameters).
    config : NetworkConfig
        The network: sublayers, weights, dependent, dynamic and sublayer parameters, distraction,
        recall scope.
    patterns : mapping
        cymr's pattern dict: ``items``, ``vector`` (items x units) and ``similarity`` (items x
        items) features; ``item_index`` of the data indexes its rows.
    subject_params : mapping, optional
        ``subject -> {name: value}``, overriding ``params`` per subject.
    by : {"subject", "list", None}
        Grouping of ``logl`` and ``n``.

    Returns
    -------
    xarray.Dataset
        ``list_logl``, ``list_n`` and ``event_probability`` (list, event) with ``logl`` and ``n``
        along ``by``; attrs ``total_logl`` and ``n``. A NaN likelihood is kept (with a
        RuntimeWarning), never replaced.
    """
    if by not in ("subject", "list", None):
        raise ParameterError(f"by must be 'subject', 'list' or None; got {by!r}")
    patterns, lists, par, net = _setup(data, params, config, patterns, subject_params)
    n_lists = lists.n_lists
    list_logl, event_p = lists_log_likelihood(config, lists, par, net)
    list_n = lists.n_recall + 1
    bad = np.flatnonzero(np.isnan(list_logl))
    if bad.size:
        warnings.warn(f"network log-likelihood is NaN for {bad.size} list(s) (first: list {bad[0]}); the total is "
                      "NaN and was not replaced", RuntimeWarning, stacklevel=2)
    coords = {"list": np.arange(n_lists), "subject_of_list": ("list", lists.subject.astype(str)),
              "list_number": ("list", lists.list_number), "event": np.arange(1, event_p.shape[1] + 1)}
    data_vars = {"list_logl": ("list", list_logl), "list_n": ("list", list_n),
                 "event_probability": (("list", "event"), event_p)}
    if by == "subject":
        labels, index = pd.factorize(lists.subject, sort=False)
        logl = np.zeros(len(index))
        count = np.zeros(len(index), dtype=np.int64)
        np.add.at(logl, labels, list_logl)
        np.add.at(count, labels, list_n)
        data_vars["logl"] = ("subject", logl)
        data_vars["n"] = ("subject", count)
        coords["subject"] = np.asarray(index).astype(str)
    elif by == "list":
        data_vars["logl"] = ("list", list_logl.copy())
        data_vars["n"] = ("list", list_n.copy())
    return xr.Dataset(data_vars, coords=coords, attrs={
        "total_logl": float(list_logl.sum()), "n": int(list_n.sum()), "scope": config.scope,
        "n_sublayers": len(config.sublayers), "distraction": int(config.distraction)})


def simulate_network(data, params, *, config: NetworkConfig, patterns, subject_params=None, n_rep: int = 1,
                     rng=None) -> pd.DataFrame:
    """Free recall of the data's study lists under a CMR network (cymr's ``CMR.generate``).

    Returns a psifr table: the study rows of ``data`` (repeated ``n_rep`` times; repetition ``r``
    numbers lists ``list + r * (max_list - min_list + 1)`` per subject, cymr's ``r * max_list + list``
    for lists 1..N and never another replica's label: :func:`cmr.ordering.replica_labels`) and one
    recall row per simulated recall
    (``item`` and ``item_index`` of the pool; with scope "pool" these may be intrusions).
    Randomness comes only from ``rng`` (a Generator, a seed or None).
    """
    n_rep = integer(n_rep, "n_rep", minimum=1)
    generator = as_generator(rng)
    patterns, lists, _, net = _setup(data, params, config, patterns, subject_params, recall_rows=1)
    n_seg = net.n_seg
    par = list_parameters(config, lists, params, subject_params, recall_rows=n_seg)
    study, _ = _segments(config, lists)
    study = np.ascontiguousarray(study, dtype=np.int64)
    a1, a2 = (_list_values(par.values, name, lists.n_lists, config.filter_recalls) for name in ("A1", "A2"))
    items = patterns["items"]
    pool_rows = np.arange(len(items))[None, :] if config.scope == "pool" else lists.study_index
    frames = []
    table = lists.study_table
    for rep in range(n_rep):
        out = np.zeros((lists.n_lists, n_seg), dtype=np.int64)
        _kernels.simulate_lists(net.w_fc, net.w_cf, net.w_ff, net.group, net.c_ind, n_seg, study, par.b_enc, par.lfc,
                                par.lcf, par.b_distract, par.b_start, par.b_rec, par.temperature, par.p_stop,
                                config.distraction, config.filter_recalls, a1, a2, generator, out)
        rows_l, rows_o = np.nonzero(out >= 0)
        pool = np.broadcast_to(pool_rows, (lists.n_lists, pool_rows.shape[1]))[rows_l, out[rows_l, rows_o]]
        rep_study = table.copy()
        rep_study["list"] = replica_labels(table["list"], rep, within=table["subject"])
        list_of = replica_labels(lists.list_number, rep, within=lists.subject)
        recall = pd.DataFrame({"subject": lists.subject[rows_l], "list": list_of[rows_l], "trial_type": "recall",
                               "position": rows_o + 1, "item": items[pool], "item_index": pool})
        frames += [rep_study, recall]
    sim = pd.concat(frames, ignore_index=True)
    rank = {s: i for i, s in enumerate(pd.unique(sim["subject"]))}
    sim["_rank"] = sim["subject"].map(rank)
    sim["_phase"] = (sim["trial_type"] != "study").astype(int)
    sim = sim.sort_values(["_rank", "list", "_phase", "position"], kind="stable").drop(columns=["_rank", "_phase"])
    return sim.reset_index(drop=True)


def _list_values(values, name, n_lists, needed):
    """(L,) values of a list-level parameter (zeros where the network does not use it)."""
    if not needed:
        return np.zeros(n_lists)
    if name not in values:
        raise ParameterError(f"filter_recalls needs parameter {name}; give it in params")
    value = np.asarray(values[name], dtype=np.float64)
    if value.ndim > 2 or (value.ndim == 2 and value.shape[1] != 1):
        raise ParameterError(f"parameter {name} must have one value per list; got shape {value.shape[1:]} per list set")
    return np.ascontiguousarray(np.broadcast_to(value.reshape(-1), (n_lists,)))


def record_network(data, params, *, config: NetworkConfig, patterns, subject_params=None, include=None,
                   exclude=None) -> xr.Dataset:
    """Network states after each studied item and at each scored recall (cymr's ``CMR.record``).

    Study states follow each item's presentation; recall states hold the cue (``c``), the
    supports ``f_in`` (exp(2 a / T), 0 for items already recalled) and the recalled item ``f``,
    before context is updated. ``include``/``exclude`` choose among ``c, c_in, f, f_in``
    (default all). Variables have dims (state, c_unit) or (state, f_unit); coordinates name each
    state's list, phase ("study"/"recall") and position, and each unit's sublayer and segment.
    """
    fields = list(RECORD_FIELDS) if include is None else list(include)
    unknown = [f for f in fields + list(exclude or []) if f not in RECORD_FIELDS]
    if unknown:
        raise ParameterError(f"include and exclude take {', '.join(RECORD_FIELDS)}; got {', '.join(map(repr, unknown))}")
    fields = [f for f in fields if f not in set(exclude or [])]
    list_config = config if config.scope == "list" else NetworkConfig(
        weights={k: {r: e.text for r, e in v.items()} for k, v in config.weights.items()},
        sublayers=config.sublayers,
        sublayer_params={s: {p: e.text for p, e in v.items()} for s, v in config.sublayer_params.items()},
        dependent={k: e.text for k, e in config.dependent.items()},
        dynamic={ph: {k: e.text for k, e in v.items()} for ph, v in config.dynamic.items()},
        dynamic_scope=config.dynamic_scope, distraction=config.distraction, scope="list",
        filter_recalls=config.filter_recalls)
    patterns, lists, par, net = _setup(data, params, list_config, patterns, subject_params, compress=False)
    n, n_lists = lists.length, lists.n_lists
    width = lists.recall_input.shape[1]
    n_states = n + width
    n_f, n_c = net.w_fc.shape[1], net.w_fc.shape[2]
    arrays = {"c": np.full((n_lists, n_states, n_c), np.nan), "c_in": np.full((n_lists, n_states, n_c), np.nan),
              "f": np.full((n_lists, n_states, n_f), np.nan), "f_in": np.full((n_lists, n_states, n_f), np.nan)}
    study = np.ascontiguousarray(np.broadcast_to(np.arange(n), lists.study_index.shape), dtype=np.int64)
    _kernels.record_lists(net.w_fc, net.w_cf, net.w_ff, net.group, net.c_ind, net.n_seg, study, par.b_enc, par.lfc,
                          par.lcf, par.b_distract, par.b_start, par.b_rec, par.temperature,
                          np.ascontiguousarray(lists.recall_input), lists.n_recall, config.distraction,
                          arrays["c"], arrays["c_in"], arrays["f"], arrays["f_in"])
    keep = np.zeros((n_lists, n_states), dtype=bool)
    keep[:, :n] = True
    keep[:, n:] = np.arange(width)[None, :] < lists.n_recall[:, None]
    list_of, slot = np.nonzero(keep)
    phase = np.where(slot < n, "study", "recall")
    position = np.where(slot < n, slot + 1, slot - n + 1)
    f_units = [("task", "item", k) for k in range(net.n_seg)] + [("task", "start", 0)] + [
        ("task", "distract", k) for k in range(n_f - net.n_seg - 1)]
    data_vars = {}
    for name in fields:
        dim = "c_unit" if name.startswith("c") else "f_unit"
        data_vars[name] = (("state", dim), arrays[name][list_of, slot])
    coords = {
        "state": np.arange(list_of.size), "list": ("state", list_of), "phase": ("state", phase),
        "position": ("state", position), "subject_of_state": ("state", lists.subject[list_of].astype(str)),
        "c_unit": np.arange(n_c), "c_sublayer": ("c_unit", [u[0] for u in net.c_units]),
        "c_segment": ("c_unit", [u[1] for u in net.c_units]),
        "f_unit": np.arange(n_f), "f_segment": ("f_unit", [u[1] for u in f_units]),
    }
    return xr.Dataset(data_vars, coords=coords, attrs={"fields": ",".join(fields)})
