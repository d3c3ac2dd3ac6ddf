"""Array layer of the network kernels: parameters and pre-experimental weights of every list.

Every expression is evaluated once on all lists at once (first axis: list), in cymr's order:
dependent parameters, dynamic parameters, dependent parameters again, sublayer parameters; then
per-item arrays, the primacy gradient of Lcf, P(stop) by output position, and the weights.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ..checks import shown
from ..errors import ParameterError
from .config import ITEM_PARAMETERS, REQUIRED_PARAMETERS, NetworkConfig
from ._lists import Lists

__all__ = ["ListParameters", "list_parameters", "Network", "network_weights", "check_patterns"]

PMIN = 0.000001  # cymr's pmin: P(stop) clipped to [pmin, 1 - pmin]


def check_patterns(patterns) -> dict:
    """cymr's pattern dict ``{"items", "vector": {name: (items, units)}, "similarity": {...}}``, checked."""
    if not isinstance(patterns, Mapping) or "items" not in patterns:
        raise ParameterError("patterns must be a mapping with 'items' and 'vector' (and optionally 'similarity'), "
                             f"as cmr.load_patterns returns; got {type(patterns).__name__}")
    n_items = len(patterns["items"])
    out = {"items": np.asarray(patterns["items"]), "vector": {}, "similarity": {}}
    for kind, ndim in (("vector", 2), ("similarity", 2)):
        for name, mat in dict(patterns.get(kind, {}) or {}).items():
            arr = np.asarray(mat, dtype=np.float64)
            if arr.ndim != ndim or arr.shape[0] != n_items or (kind == "similarity" and arr.shape[1] != n_items):
                want = "(items, units)" if kind == "vector" else "(items, items)"
                raise ParameterError(f"patterns[{kind!r}][{name!r}] must have shape {want} with {n_items} items; "
                                     f"got {arr.shape}")
            if not np.all(np.isfinite(arr)):
                raise ParameterError(f"patterns[{kind!r}][{name!r}] must hold finite numbers; got NaN or inf")
            out[kind][str(name)] = arr
    return out


def _subject_values(params, subject_params, subjects) -> dict:
    """name -> (L, 1) float64 array of each list's subject's values."""
    if not isinstance(params, Mapping):
        raise ParameterError(f"params must be a mapping of parameter name to value; got {type(params).__name__}")
    subject_params = {} if subject_params is None else subject_params
    if not isinstance(subject_params, Mapping):
        raise ParameterError(f"subject_params must be a mapping of subject to parameters; got "
                             f"{type(subject_params).__name__}")
    names = set(params)
    for values in subject_params.values():
        if not isinstance(values, Mapping):
            raise ParameterError(f"subject_params values must be mappings of name to value; got {type(values).__name__}")
        names |= set(values)
    out = {}
    for name in sorted(names):
        column = np.empty((len(subjects), 1))
        for k, subject in enumerate(subjects):
            raw = subject_params.get(subject, {}).get(name, params.get(name))
            if raw is None:
                raise ParameterError(f"parameter {name} has no value for subject {shown(subject)}; give it in params")
            try:
                value = float(raw)
            except (TypeError, ValueError):
                raise ParameterError(f"parameter {name} must be a real number; got {shown(raw)}") from None
            if isinstance(raw, (bool, np.bool_)) or not math.isfinite(value):
                raise ParameterError(f"parameter {name} must be a finite real number; got {shown(raw)}")
            column[k, 0] = value
        out[name] = column
    return out


def _unique_per_list(value, name, expression):
    """cymr's 'list' scope: the one value an expression has on each list, (L, 1) (NaN where a
    list has no value, e.g. no scored recall)."""
    value = np.atleast_2d(value)
    high = np.max(np.where(np.isnan(value), -np.inf, value), axis=1, keepdims=True)
    low = np.min(np.where(np.isnan(value), np.inf, value), axis=1, keepdims=True)
    several = np.isfinite(high) & (high != low)
    if np.any(several):
        k = int(np.flatnonzero(several)[0])
        raise ParameterError(f"dynamic parameter {name} = {expression.text!r} with scope 'list' must have one value "
                             f"per list; got several on list {k}")
    return np.where(np.isfinite(high), high, np.nan)


@dataclass(frozen=True)
class ListParameters:
    """Per-list parameter arrays in the kernels' layout (last axis: context sublayer)."""

    values: dict  # every named value after dependent, dynamic and sublayer parameters
    b_enc: np.ndarray  # (L, n, S)
    lfc: np.ndarray  # (L, n, S)
    lcf: np.ndarray  # (L, n, S), primacy applied
    b_distract: np.ndarray  # (L, n + 1, S)
    b_start: np.ndarray  # (L, S)
    b_rec: np.ndarray  # (L, R, S)
    temperature: np.ndarray  # (L,)
    p_stop: np.ndarray  # (L, n + 1)


def _as3(value, n_lists):
    """(L, 1) -> (L, 1, 1); (L, k) -> (L, k, 1); (L, k, S) unchanged."""
    value = np.asarray(value, dtype=np.float64)
    if value.ndim == 0:
        value = np.full((n_lists, 1), float(value))
    if value.ndim == 1:
        value = value[:, None]
    return value if value.ndim == 3 else value[:, :, None]


def _sized(value, n_lists, rows, n_sub, name):
    value = _as3(value, n_lists)
    try:
        return np.ascontiguousarray(np.broadcast_to(value, (n_lists, rows, n_sub)), dtype=np.float64)
    except ValueError:
        raise ParameterError(f"parameter {name} must have one value per list, per item ({rows}) or per sublayer "
                             f"({n_sub}); got shape {value.shape[1:]} per list set") from None


def list_parameters(config: NetworkConfig, lists: Lists, params, subject_params=None, *,
                    recall_rows: int | None = None) -> ListParameters:
    """Every list's parameters; ``recall_rows`` sizes B_rec (default: the scored recalls)."""
    n_lists, n, n_sub = lists.n_lists, lists.length, len(config.sublayers)
    values = _subject_values(params, subject_params, lists.subject)
    for name, expr in config.dependent.items():
        values[name] = expr(values)
    for phase, columns in (("study", lists.study_columns), ("recall", lists.recall_columns)):
        for name, expr in config.dynamic.get(phase, {}).items():
            value = expr({**columns, **values})
            value = np.broadcast_to(value, (n_lists, value.shape[1] if value.ndim == 2 else 1)) \
                if value.ndim <= 2 else value
            if config.dynamic_scope.get(name, "item") == "list":
                value = _unique_per_list(value, name, expr)
            elif phase == "recall" and expr.names & set(columns):
                if recall_rows is not None:
                    raise ParameterError(f"dynamic recall parameter {name} = {expr.text!r} depends on the recorded "
                                         "recalls; a simulation needs one value per list")
                scored = np.arange(value.shape[1])[None, :] < lists.n_recall[:, None]
                value = np.where(scored, value, 0.0)  # the padding after the last scored recall is never used
            values[name] = np.asarray(value, dtype=np.float64)
    for name, expr in config.dependent.items():
        values[name] = expr(values)
    if config.sublayer_params:
        names = [set(p) for p in config.sublayer_params.values()]
        if len(config.sublayer_params) != n_sub or any(s != names[0] for s in names):
            raise ParameterError(f"sublayer_params must set the same parameters for every context sublayer "
                                 f"({', '.join(config.sublayers)}); got "
                                 + "; ".join(f"{k}: {', '.join(sorted(v)) or 'none'}"
                                             for k, v in config.sublayer_params.items()))
        for par in config.sublayer_params[config.sublayers[0]]:
            per_sub = [_as3(config.sublayer_params[s][par](values), n_lists)[:, :, 0] for s in config.sublayers]
            rows = max(v.shape[1] for v in per_sub)
            values[par] = np.stack([np.broadcast_to(v, (n_lists, rows)) for v in per_sub], axis=2)
    needed = REQUIRED_PARAMETERS + (("B_distract", "B_retention") if config.distraction else ())
    missing = [name for name in needed if name not in values]
    if missing:
        raise ParameterError(f"network parameters missing: {', '.join(missing)}; give them in params, dependent, "
                             "dynamic or sublayer parameters")
    for name in needed:
        if not np.all(np.isfinite(values[name])):
            raise ParameterError(f"parameter {name} must be finite on every list; got NaN or inf")
    for name in values:
        if name not in ITEM_PARAMETERS + ("B_rec",) and name in needed:
            shape = np.shape(values[name])
            if len(shape) >= 2 and shape[1] > 1:
                raise ParameterError(f"parameter {name} must have one value per list (or per sublayer); got "
                                     f"{shape[1]} values per list")
    b_enc = _sized(values["B_enc"], n_lists, n, n_sub, "B_enc")
    lfc = _sized(values["Lfc"], n_lists, n, n_sub, "Lfc")
    lcf = _sized(values["Lcf"], n_lists, n, n_sub, "Lcf")
    position = np.arange(n)[None, :, None]
    lcf = np.ascontiguousarray(lcf + (_as3(values["P1"], n_lists) * np.exp(-_as3(values["P2"], n_lists) * position)))
    lcf = np.ascontiguousarray(np.broadcast_to(lcf, (n_lists, n, n_sub)))
    if config.distraction:
        distract = _sized(values["B_distract"], n_lists, n, n_sub, "B_distract")
        retention = _as3(values["B_retention"], n_lists)[:, -1:, :]
        retention = np.broadcast_to(retention, (n_lists, 1, n_sub))
        b_distract = np.ascontiguousarray(np.concatenate([distract, retention], axis=1))
    else:
        b_distract = np.zeros((n_lists, n + 1, n_sub))
    b_start = np.ascontiguousarray(_sized(values["B_start"], n_lists, 1, n_sub, "B_start")[:, 0, :])
    rows = lists.recall_input.shape[1] if recall_rows is None else recall_rows
    b_rec = _sized(values["B_rec"], n_lists, max(rows, 1), n_sub, "B_rec")
    temperature = np.where(_as3(values["T"], n_lists)[:, 0, 0] < PMIN, PMIN, _as3(values["T"], n_lists)[:, 0, 0])
    x1 = _as3(values["X1"], n_lists)[:, 0, :1]
    x2 = _as3(values["X2"], n_lists)[:, 0, :1]
    p_stop = x1 * np.exp(x2 * np.arange(n + 1))
    p_stop[p_stop < PMIN] = PMIN
    p_stop[p_stop > (1 - PMIN)] = 1 - PMIN
    p_stop[:, -1] = 1
    return ListParameters(values, b_enc, lfc, lcf, b_distract, b_start, b_rec,
                          np.ascontiguousarray(temperature, dtype=np.float64), np.ascontiguousarray(p_stop))


@dataclass(frozen=True)
class Network:
    """Pre-experimental weights of every weight group and the unit layout."""

    w_fc: np.ndarray  # (G, n_f, n_c)
    w_cf: np.ndarray  # (G, n_f, n_c)
    w_ff: np.ndarray  # (G, n_seg, n_seg)
    group: np.ndarray  # (L,) int64
    c_ind: np.ndarray  # (S, 2) int64
    n_seg: int
    c_units: tuple  # (sublayer, segment, index) of each context unit


def network_weights(config: NetworkConfig, patterns: dict, lists: Lists, values: dict, *,
                    compress: bool = False) -> Network:
    """Pre-experimental weights (cymr's init_network), one group per list (list scope) or per
    distinct set of weight parameters (pool scope, where every list shares the whole pool).

    With ``compress`` each group keeps, per sublayer, only the context units its items feed (in
    their order; padded with zero units to one width): those units stay 0, so every sum the
    kernels take is the same. Groups are built in chunks, so a pool-sized context of many lists
    never sits in memory whole.
    """
    n_lists, n = lists.n_lists, lists.length
    used = set()
    for regions in config.weights.values():
        for expr in regions.values():
            used |= expr.names
    param_names = sorted(name for name in used if name in values)
    for name in param_names:
        if np.ndim(values[name]) >= 2 and np.shape(values[name])[1] > 1:
            raise ParameterError(f"weight expressions use parameter {name}, which has several values per list; "
                                 "weights take one value per list")
    table = np.column_stack([_as3(values[name], n_lists)[:, 0, 0] for name in param_names]) \
        if param_names else np.zeros((n_lists, 0))
    if config.scope == "pool":
        param_rows, group = np.unique(table, axis=0, return_inverse=True)
        group = np.asarray(group).reshape(-1)
        rows = np.arange(len(patterns["items"]))[None, :]
    else:
        group, param_rows, rows = np.arange(n_lists), table, lists.study_index
    n_groups = param_rows.shape[0]
    n_seg = rows.shape[1]
    n_distract = n + 1 if config.distraction else 0
    layout, c_ind, widths = None, None, None
    full_units = sum(mat.shape[1] for mat in patterns["vector"].values()) or 1
    step = max(1, int(4_000_000 // max(1, n_seg * full_units)))
    chunks = []
    for first in range(0, n_groups, step):
        part = slice(first, min(first + step, n_groups))
        scalars = {name: param_rows[part, j].reshape(-1, 1, 1) for j, name in enumerate(param_names)}
        chunk_rows = rows if config.scope == "pool" else rows[part]
        w_fc, w_cf, w_ff, layout, c_ind, widths = _chunk_weights(config, patterns, chunk_rows, scalars, n_seg,
                                                                  n_distract, part.stop - part.start)
        feeds = np.any(w_fc != 0, axis=1)  # (groups, units): units some item of the group feeds
        packed = compress and not feeds.all()
        chunks.append(_packed(w_fc, w_cf, c_ind, feeds) + (w_ff,) if packed else (w_fc, w_cf, None, w_ff))
    if any(c[2] is not None for c in chunks):
        full = np.diff(c_ind, axis=1)[:, 0]
        chunks = [c if c[2] is not None else
                  ([c[0][:, :, lo:hi] for lo, hi in c_ind], [c[1][:, :, lo:hi] for lo, hi in c_ind], full, c[3])
                  for c in chunks]
        width = np.max([c[2] for c in chunks], axis=0)
        offsets = np.concatenate([[0], np.cumsum(width)])
        n_f = n_seg + 1 + n_distract
        w_fc = np.zeros((n_groups, n_f, int(offsets[-1])))
        w_cf = np.zeros_like(w_fc)
        at = 0
        for fc, cf, counts, ff in chunks:
            size = fc[0].shape[0]
            for s in range(len(config.sublayers)):
                w_fc[at:at + size, :, offsets[s]:offsets[s] + counts[s]] = fc[s]
                w_cf[at:at + size, :, offsets[s]:offsets[s] + counts[s]] = cf[s]
            at += size
        c_ind = np.ascontiguousarray(np.column_stack([offsets[:-1], offsets[1:]]), dtype=np.int64)
        layout = tuple((sub, "packed", k) for s, sub in enumerate(config.sublayers) for k in range(int(width[s])))
    else:
        w_fc = np.concatenate([c[0] for c in chunks])
        w_cf = np.concatenate([c[1] for c in chunks])
    w_ff = np.ascontiguousarray(np.broadcast_to(np.concatenate([c[3] for c in chunks]), (n_groups, n_seg, n_seg)))
    return Network(w_fc, w_cf, w_ff, np.asarray(group, dtype=np.int64), c_ind, int(n_seg), tuple(layout))


def _packed(w_fc, w_cf, c_ind, feeds):
    """Per sublayer, the units each group's items feed, first and in order: (fc blocks, cf blocks,
    widths)."""
    fc_blocks, cf_blocks, counts = [], [], []
    for lo, hi in c_ind:
        keep = feeds[:, lo:hi]
        count = int(keep.sum(axis=1).max()) if keep.size else 0
        order = np.argsort(~keep, axis=1, kind="stable")[:, :count]
        index = np.broadcast_to(order[:, None, :], (w_fc.shape[0], w_fc.shape[1], count))
        fc = np.take_along_axis(w_fc[:, :, lo:hi], index, axis=2)
        cf = np.take_along_axis(w_cf[:, :, lo:hi], index, axis=2)
        kept = np.take_along_axis(keep, order, axis=1)[:, None, :]
        fc_blocks.append(np.where(kept, fc, 0.0))
        cf_blocks.append(np.where(kept, cf, 0.0))
        counts.append(count)
    return fc_blocks, cf_blocks, np.array(counts)


def _chunk_weights(config, patterns, rows, scalars, n_seg, n_distract, n_groups):
    """Full weights of ``n_groups`` groups: item rows ``rows`` ((groups or 1) x n_seg pool rows)."""

    def evaluate(expr, kind):
        names = {}
        for feature, mat in patterns[kind].items():
            if feature in expr.names:
                names[feature] = mat[rows] if kind == "vector" else mat[rows[:, :, None], rows[:, None, :]]
        names.update(scalars)
        value = expr(names)
        if value.ndim < 3:
            raise ParameterError(f"{expr.what} = {expr.text!r} must use a pattern (items x units); got a value "
                                 "without item and unit axes")
        return value

    blocks = {}  # (sublayer, segment) -> [fc value, cf value or None]
    for region, expr in config.weights["fc"].items():
        blocks[region[1]] = [evaluate(expr, "vector"), None]
    for region, expr in config.weights.get("cf", {}).items():
        blocks[region[1]][1] = evaluate(expr, "vector")
    widths = {}
    for seg, (fc, cf) in blocks.items():
        widths[seg] = fc.shape[2]
        if fc.shape[1] != n_seg:
            raise ParameterError(f"fc weights of {'-'.join(seg)} must have one row per item ({n_seg}), e.g. by using a "
                                 f"pattern; got {fc.shape[1]} row(s)")
        if cf is not None and cf.shape[1:] != fc.shape[1:]:
            raise ParameterError(f"cf weights of {'-'.join(seg)} must have the shape of its fc weights "
                                 f"{fc.shape[1:]}; got {cf.shape[1:]}")
    layout = []  # context units, cymr's order: each sublayer's segments, its start unit, its distraction units
    c_ind = []
    for sub in config.sublayers:
        first = len(layout)
        for seg in blocks:
            if seg[0] == sub:
                layout += [(sub, seg[1], k) for k in range(widths[seg])]
        layout.append((sub, "start", 0))
        layout += [(sub, "distract", k) for k in range(n_distract)]
        c_ind.append((first, len(layout)))
    n_c = len(layout)
    n_f = n_seg + 1 + n_distract
    column = {unit: j for j, unit in enumerate(layout)}
    w_fc = np.zeros((n_groups, n_f, n_c))
    w_cf = np.zeros((n_groups, n_f, n_c))
    for seg, (fc, cf) in blocks.items():
        cols = slice(column[(seg[0], seg[1], 0)], column[(seg[0], seg[1], 0)] + widths[seg])
        w_fc[:, :n_seg, cols] = fc
        if cf is not None:
            w_cf[:, :n_seg, cols] = cf
    for sub in config.sublayers:
        for w in (w_fc, w_cf):
            w[:, n_seg, column[(sub, "start", 0)]] = 1.0
            for k in range(n_distract):
                w[:, n_seg + 1 + k, column[(sub, "distract", k)]] = 1.0
    w_ff = np.zeros((1, n_seg, n_seg))
    for expr in config.weights.get("ff", {}).values():
        w_ff = evaluate(expr, "similarity")
    c_ind = np.array(c_ind, dtype=np.int64).reshape(-1, 2)
    for s, sub in enumerate(config.sublayers):
        norms = np.sum(w_fc[:, :n_seg, c_ind[s, 0]:c_ind[s, 1]] ** 2, axis=2)
        if np.any(norms == 0):
            g, i = (int(v[0]) for v in np.nonzero(norms == 0))
            raise ParameterError(f"item {i} has all-zero fc weights in context sublayer {sub!r}; every item needs "
                                 "some input to every sublayer")
    return w_fc, w_cf, np.broadcast_to(w_ff, (n_groups, n_seg, n_seg)), tuple(layout), c_ind, widths
