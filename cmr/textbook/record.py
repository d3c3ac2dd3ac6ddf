"""The model's states, step by step: context during study and recall, supports, probabilities.

What cymr's ``CMR().record`` gives (a copy of the network after every study and recall event),
as one labelled dataset for inspection and figures. Context is reported on the units that
matter for a list: the item units of its studied items (by serial position), the start unit,
the feature units; ``other_norm`` is the length of the rest of the context vector (the units
of unstudied pool items, which pre-experimental weights ``Afc`` or ``Sfc`` fill).
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from ..errors import RecallDataError
from ..events import as_events
from ..repetition import refuse_repeats
from ..schema import provenance_attrs
from . import _network
from ._trials import trial_arrays
from .parameter_sets import parameter_table
from .parameters import MODEL_PARAMETER_NAMES
from .patterns import ItemPatterns

__all__ = ["record_states"]

_AFC, _DFC, _SFC, _CFC = (MODEL_PARAMETER_NAMES.index(n) for n in ("Afc", "Dfc", "Sfc", "Cfc"))


def _basis(params, n, pool, sim, sim_gram, row_sum, features, n_blocks):
    """Per block: basis rows (m, shown units) and Gram matrix (m, m) of one list."""
    afc, dfc, sfc, cfc = params[_AFC], params[_DFC], params[_SFC], params[_CFC]
    eye = np.eye(n)
    item_rows = afc + dfc * eye + sfc * sim  # b_k on the studied items' units
    g_item = (afc * afc * pool + 2 * afc * dfc + afc * sfc * (row_sum[:, None] + row_sum[None, :])
              + dfc * dfc * eye + dfc * sfc * (sim + sim.T) + sfc * sfc * sim_gram)
    feat_rows = cfc * features if features is not None else np.zeros((n, 0))
    g_feat = feat_rows @ feat_rows.T

    def block(rows, gram):
        m = n + 1
        basis = np.zeros((m, 1 + rows.shape[1]))
        basis[0, 0] = 1.0
        basis[1:, 1:] = rows
        full = np.zeros((m, m))
        full[0, 0] = 1.0
        full[1:, 1:] = gram
        return basis, full

    if n_blocks == 1:
        b0, g0 = block(np.hstack([item_rows, feat_rows]), g_item + g_feat)
        return [(b0, g0)]
    return [block(item_rows, g_item), block(feat_rows, g_feat)]


def _expand(x, blocks):
    """Context on the shown units and the norm of the rest, for coefficients x (nb, ..., m)."""
    shown, other = [], 0.0
    for b, (basis, gram) in enumerate(blocks):
        coef = x[b]
        values = coef @ basis
        total = np.einsum("...i,ij,...j->...", coef, gram, coef)
        other = other + np.maximum(total - np.sum(values * values, axis=-1), 0.0)
        shown.append(values)
    return np.concatenate(shown, axis=-1), np.sqrt(other)


def record_states(
    events,
    params,
    *,
    patterns: ItemPatterns | None = None,
    pool_size: int | None = None,
    trials=None,
) -> xr.Dataset:
    """Record CMR's states while it studies and recalls each list of the data (teacher forced).

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
        Events dataset or psifr table; recalls are replayed as the data made them
        (intrusions and repeats skipped, as in the likelihood).
    params : mapping, mapping by subject, recall_fit dataset or DataFrame
        Parameters (one set, per subject or a fit).
    patterns : ItemPatterns, optional
        Item patterns of semantic / category CMR.
    pool_size : int, optional
        Localist CMR: cymr pool size (default list-sized).
    trials : sequence of int, optional
        Positions of the trials to record (default all; a few keep the dataset small).

    Returns
    -------
    xarray.Dataset
        Kind ``cmr_states`` (docs/schema.md): ``study_context`` (trial, study_position, unit),
        ``start_context`` (trial, unit), ``cue_context`` (trial, event, unit) with their
        ``*_other_norm``; ``support``, ``probability`` (trial, event, study_position) and
        ``stop_probability``, ``event_position`` (trial, event).
    """
    events = as_events(events)
    refuse_repeats(events, "record_states")  # its state layout has one unit per study position
    if trials is not None:
        events = events.isel(trial=np.asarray(trials, dtype=np.int64))
    if patterns is not None and not isinstance(patterns, ItemPatterns):
        raise RecallDataError(f"patterns must come from cmr.item_patterns(...); got {type(patterns).__name__}")
    table, trial_param = parameter_table(params, events["subject"].values, patterns=patterns is not None)
    arrays = trial_arrays(events, patterns, pool_size)
    n_trials, longest = arrays.n_trials, int(arrays.list_length.max())
    nb = arrays.n_blocks
    feature_names = list(patterns.feature_names) if patterns is not None else []
    units = ["start"] + [f"item_{i}" for i in range(1, longest + 1)]
    if nb == 1:
        units += [f"feature_{name}" for name in feature_names]
    else:
        units += ["start_features"] + [f"feature_{name}" for name in feature_names]
    n_events = arrays.recalls.shape[1] + 1
    shape_units = len(units)
    study = np.full((n_trials, longest, shape_units), np.nan)
    start_ctx = np.full((n_trials, shape_units), np.nan)
    cue = np.full((n_trials, n_events, shape_units), np.nan)
    study_other = np.full((n_trials, longest), np.nan)
    start_other = np.full(n_trials, np.nan)
    cue_other = np.full((n_trials, n_events), np.nan)
    support = np.full((n_trials, n_events, longest), np.nan)
    probability = np.full((n_trials, n_events, longest), np.nan)
    stop = np.full((n_trials, n_events), np.nan)
    position = np.zeros((n_trials, n_events), dtype=np.int64)
    for t in range(n_trials):
        g = arrays.trial_group[t]
        n = int(arrays.group_length[g])
        m = n + 1
        params = table[trial_param[t]]
        sim = arrays.group_sim[g, :n, :n].copy()
        gram = arrays.group_sim_gram[g, :n, :n].copy()
        row_sum = arrays.group_row_sum[g, :n].copy()
        fgram = arrays.group_feature_gram[g, :n, :n].copy()
        sx, stx = np.full((nb, n, m), np.nan), np.full((nb, m), np.nan)
        cx = np.full((nb, n_events, m), np.nan)
        sup, prob = np.full((n_events, n), np.nan), np.full((n_events, n), np.nan)
        stp = np.full(n_events, np.nan)
        count = _network.record_trial(params, n, arrays.group_pool[g], sim, gram, row_sum, fgram, nb,
                                      arrays.recalls[t], sx, stx, cx, sup, prob, stp)
        rows = arrays.pool_rows[t, :n]
        features = patterns.features[rows] if patterns is not None and patterns.features is not None else None
        blocks = _basis(params, n, arrays.group_pool[g], sim, gram, row_sum, features, nb)
        cols = _unit_columns(n, longest, nb, len(feature_names))
        values, other = _expand(sx, blocks)
        study[t, :n][:, cols] = values
        study_other[t, :n] = other
        values, other = _expand(stx, blocks)
        start_ctx[t, cols] = values
        start_other[t] = other
        values, other = _expand(cx[:, :count], blocks)
        cue[t, :count][:, cols] = values
        cue_other[t, :count] = other
        support[t, :count, :n] = sup[:count]
        probability[t, :count, :n] = prob[:count]
        stop[t, :count] = stp[:count]
        position[t, :count] = _event_positions(arrays.recalls[t], count)
    ds = xr.Dataset(
        {
            "study_context": (("trial", "study_position", "unit"), study),
            "study_other_norm": (("trial", "study_position"), study_other),
            "start_context": (("trial", "unit"), start_ctx),
            "start_other_norm": ("trial", start_other),
            "cue_context": (("trial", "event", "unit"), cue),
            "cue_other_norm": (("trial", "event"), cue_other),
            "support": (("trial", "event", "study_position"), support),
            "probability": (("trial", "event", "study_position"), probability),
            "stop_probability": (("trial", "event"), stop),
            "event_position": (("trial", "event"), position),
        },
        coords={
            "trial": events["trial"].values, "subject": ("trial", events["subject"].values),
            "list": ("trial", events["list"].values),
            "study_position": np.arange(1, longest + 1), "event": np.arange(1, n_events + 1),
            "unit": np.array(units),
        },
        attrs=provenance_attrs("cmr_states", "cmr.record_states", pool_size=pool_size,
                               patterns=patterns is not None),
    )
    return ds


def _unit_columns(n, longest, n_blocks, n_features):
    """Columns of the shown units (start, items 1..n, [start_features], features) in ``units``."""
    items = list(range(1, n + 1))
    if n_blocks == 1:
        return [0] + items + list(range(1 + longest, 1 + longest + n_features))
    return [0] + items + list(range(1 + longest, 2 + longest + n_features))


def _event_positions(recalls, count):
    """Serial position recalled at each scored event (0: the stop)."""
    out = np.zeros(count, dtype=np.int64)
    seen = set()
    k = 0
    for pos in recalls:
        if pos == 0:
            break
        if pos < 0 or pos in seen:
            continue
        seen.add(int(pos))
        out[k] = pos
        k += 1
    return out
