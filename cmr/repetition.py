"""Lists that study an item more than once: the presentation map and the repetition analyses.

An events dataset may hold lists in which an item is studied more than once (docs/repetition.md).
Its variable ``presentation_item`` (trial, study_position) gives, for each presentation, the serial
position (1-based) of that item's first presentation in its list, ``0`` for padding beyond
``list_length``; ``recalls`` score a recall of a repeated item to that first position. Files without
the variable are repeat-free, and their map is ``1..list_length``. Everything reads the map through
:func:`presentation_items`.

Analyses, after jaxcmr's definitions (Lohnas & Kahana, 2014; Siegel & Kahana, 2014):

* :func:`rep_crp` - lag-CRP centred on each presentation of the previous recall's item (``repcrp``);
* :func:`neighbor_crp` - transitions from one presentation's neighbour to the other's
  neighbourhood (``repneighborcrp``), with :func:`shuffled_control` as its control;
* :func:`spacing_recall` - recall probability by the spacing of the two presentations, in the
  massed, 1-2, 3-5 and 6-8 bins (``rpl``);
* :func:`first_presentation_bias` - the +1 transition rate from the first minus the second
  presentation, per subject, against the shuffled control (``test_first_second_bias``).

Intrusions and recalls of an item recalled before are skipped: the next transition is from the
last recall that was neither.
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from ._numeric import ratio
from ._presentations import repeat_mask, has_repeats, presentation_items, refuse_repeats
from .checks import seed_of
from .deprecation import renamed_keywords
from .errors import RecallDataError

__all__ = ["presentation_items", "has_repeats", "refuse_repeats", "from_presentations", "rep_crp", "neighbor_crp", "shuffled_control",
           "spacing_recall", "first_presentation_bias", "SPACING_BINS"]

#: Lohnas & Kahana (2014)'s bins of the items between two presentations: once-presented, massed (0), 1-2, 3-5, 6-8
SPACING_BINS = ("once", "massed", "1-2", "3-5", "6-8")


# --- what every analysis reads -------------------------------------------------------------------


def _arrays(events, by):
    from .events import as_events, group_index, to_recall_matrix

    events = as_events(events)
    recalls, lengths = to_recall_matrix(events)
    group, labels = group_index(events, by)
    return events, recalls, presentation_items(events), lengths, group, labels


def _checked_int(value, name: str, minimum: int) -> int:
    from .checks import is_integer

    if not is_integer(value) or int(value) < minimum:
        raise RecallDataError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def _stat(events, by, labels, stat_kind, created_by, dims, coords, data, **attrs):
    """A ``recall_stat`` dataset of per-unit variables (unit dims first; pooled: the one group's values)."""
    from .events import unit_coordinates
    from .schema import provenance_attrs, validate

    unit_dims, unit_coords = unit_coordinates(events, by, labels)
    variables = {name: (unit_dims + dims, value[0] if by is None else value, var_attrs)
                 for name, (value, var_attrs) in data.items()}
    ds = xr.Dataset(variables, coords={**unit_coords, **coords}, attrs={
        **provenance_attrs("recall_stat", created_by, by="pooled" if by is None else by),
        "stat_kind": stat_kind, "unit_kind": "pooled" if by is None else by, **attrs})
    return validate(ds, "recall_stat")


def _lag_window(actual, possible, n_pos, max_lag):
    """The counts' lags -max_lag..max_lag (the last axis holds lags -(n_pos-1)..n_pos-1)."""
    max_lag = n_pos - 1 if max_lag is None else min(_checked_int(max_lag, "max_lag", 1), n_pos - 1)
    cut = slice(n_pos - 1 - max_lag, n_pos + max_lag)
    return actual[..., cut], possible[..., cut], np.arange(-max_lag, max_lag + 1, dtype=np.int64)


# --- the analyses ----------------------------------------------------------------------------------


def rep_crp(events, *, by="subject", min_lag: int = 4, size: int = 2, max_lag: int | None = 5) -> xr.Dataset:
    """Lag-CRP centred on each presentation of a repeated item (jaxcmr ``repcrp``).

    A transition counts when its origin is an item whose first two presentations lie more than
    ``min_lag`` positions apart; its lag is scored from each of the item's first ``size``
    presentations (lag +1 from presentation k is the position after it). Available lags are
    those of every position still in the pool, as in the lag-CRP.

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
    by : {"subject", "trial", None}
    min_lag : int
        Positions the two presentations must be more than apart (default 4, jaxcmr's).
    size : int
        Presentations to centre on (default 2).
    max_lag : int or None
        Lags kept: -max_lag..max_lag (default 5); None keeps every lag.

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="rep_crp"``; dims ``(unit, presentation, lag)``;
        ``prob``, ``actual``, ``possible``.
    """
    from ._repetition import rep_crp_counts

    events, recalls, pres, lengths, group, labels = _arrays(events, by)
    min_lag, size = _checked_int(min_lag, "min_lag", 0), _checked_int(size, "size", 2)
    actual, possible = rep_crp_counts(recalls, pres, lengths, group, int(group.max()) + 1, min_lag, size)
    actual, possible, lags = _lag_window(actual, possible, pres.shape[1], max_lag)
    return _stat(events, by, labels, "rep_crp", "cmr.rep_crp", ("presentation", "lag"),
                 {"presentation": np.arange(1, size + 1, dtype=np.int64), "lag": lags},
                 _crp_variables(actual, possible), min_lag=min_lag)


def _crp_variables(actual, possible, by=None):
    return {
        "prob": (ratio(actual, possible), {"long_name": "conditional response probability"}),
        "actual": (actual, {"long_name": "transitions made at the lag"}),
        "possible": (possible, {"long_name": "transitions available at the lag"}),
    }


_DIRECTIONS = {"both": (True, True), "i2j": (True, False), "j2i": (False, True)}


@renamed_keywords(seed="rng")
def neighbor_crp(events, *, by="subject", min_lag: int = 4, direction: str = "both", use_lag2: bool = True,
                 max_lag: int | None = 3, control=None, n_shuffles: int = 10, rng=0) -> xr.Dataset:
    """Repetition-neighbour CRP (jaxcmr ``repneighborcrp``): does recalling the neighbour of one
    presentation lead to the neighbourhood of the other?

    For an item studied at i and j (j - i > ``min_lag``), a transition from j+1 (and j+2 with
    ``use_lag2``) is scored by its lag from i (``direction="j2i"``), one from i+1 (i+2) by its lag
    from j (``"i2j"``), or both (default). Lag +1 is the transition from j+1 to i+1 (or i+1 to j+1).

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
    by : {"subject", "trial", None}
    min_lag, direction, use_lag2
        As jaxcmr's (defaults 4, "both", True).
    max_lag : int or None
        Lags kept (default 3).
    control : xarray.Dataset, bool or None
        The control events (:func:`shuffled_control`); None or True builds it from ``events``
        when they hold repeat-free lists; False computes no control.
    n_shuffles, rng
        For the control built here (:func:`shuffled_control`).

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="rep_neighbor_crp"``; dims ``(unit, lag)``; ``prob``,
        ``actual``, ``possible`` and, with a control, ``control_prob`` (unit, lag) and per lag
        ``t_stat``, ``p_value`` (paired t-test of the units' observed against control profile)
        and ``mean_difference``.
    """
    from ._repetition import neighbor_crp_counts

    if direction not in _DIRECTIONS:
        raise RecallDataError(f"direction must be one of {', '.join(_DIRECTIONS)}; got {direction!r}")
    use_i2j, use_j2i = _DIRECTIONS[direction]
    min_lag = _checked_int(min_lag, "min_lag", 0)

    def counts(ev, unit_by):
        ev, recalls, pres, lengths, group, labels = _arrays(ev, unit_by)
        actual, possible = neighbor_crp_counts(recalls, pres, lengths, group, int(group.max()) + 1, min_lag,
                                               use_i2j, use_j2i, bool(use_lag2))
        return ev, labels, _lag_window(actual, possible, pres.shape[1], max_lag)

    events, labels, (actual, possible, lags) = counts(events, by)
    ds = _stat(events, by, labels, "rep_neighbor_crp", "cmr.neighbor_crp", ("lag",), {"lag": lags},
               _crp_variables(actual, possible), min_lag=min_lag, direction=direction, use_lag2=int(bool(use_lag2)))
    control = _control(events, control, n_shuffles, rng)
    if control is not None:
        _, control_labels, (c_actual, c_possible, c_lags) = counts(control, by)
        _add_control(ds, by, labels, control_labels, ratio(c_actual, c_possible)[..., _common(c_lags, lags)], "lag")
    return ds


def _common(have, want):
    """Indices of ``want``'s lags in ``have`` (the control's lists may be shorter)."""
    index = np.searchsorted(have, want)
    if (index >= have.size).any() or (have[np.minimum(index, have.size - 1)] != want).any():
        raise RecallDataError("the control lists are shorter than the lags asked for; give a smaller max_lag")
    return index


def _control(events, control, n_shuffles, rng):
    if control is False:
        return None
    if control is None or control is True:
        return shuffled_control(events, n_shuffles=n_shuffles, rng=rng, required=control is True)
    from .events import as_events

    return as_events(control)


def _add_control(ds, by, labels, control_labels, control_prob, dim):
    """``control_prob`` and the paired t-test of the units' observed against control values, per ``dim``."""
    observed = ds["prob"].values
    if by == "subject":  # the control holds the subjects that have both kinds of lists
        keep = np.isin(labels, control_labels)
        full = np.full(observed.shape, np.nan)
        full[keep] = control_prob
        control_prob = full
    elif by == "trial":
        raise RecallDataError("a control is compared per subject or pooled; got by='trial' (pass control=False)")
    else:
        control_prob = control_prob[0]  # pooled: one profile, no test across units
    ds["control_prob"] = (ds["prob"].dims, control_prob, {"long_name": "the shuffled control's probability"})
    if by == "subject":
        difference = observed - control_prob
        valid = ~np.isnan(difference)
        n = valid.sum(axis=0)
        t, p = np.array([_paired(observed[:, k], control_prob[:, k]) for k in range(observed.shape[1])]).T
        ds["t_stat"] = ((dim,), t, {"long_name": "paired t, observed against control, across subjects"})
        ds["p_value"] = ((dim,), p, {"long_name": "two-sided p of the paired t-test"})
        ds["mean_difference"] = ((dim,), ratio(np.where(valid, difference, 0.0).sum(axis=0), n) if n.size else n,
                                 {"long_name": "mean over subjects of observed minus control"})


def _paired(a, b) -> tuple[float, float]:
    """Paired t-test (t, two-sided p) over the pairs where both values are finite; NaN below 2 pairs
    or when every difference is the same (no spread to test against)."""
    from scipy import stats

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    valid = np.isfinite(a) & np.isfinite(b)
    difference = a[valid] - b[valid]
    if difference.size < 2 or np.ptp(difference) == 0:
        return float("nan"), float("nan")
    result = stats.ttest_rel(a[valid], b[valid])
    return float(result.statistic), float(result.pvalue)


@renamed_keywords(seed="rng")
def shuffled_control(events, *, n_shuffles: int = 10, rng=0, required: bool = True) -> xr.Dataset | None:
    """Control events: each subject's repeat-free recall sequences laid on its lists with repeats.

    As jaxcmr's ``make_control_dataset``: for every subject with both kinds of lists, each list
    with repeats is paired ``n_shuffles`` times with a repeat-free list of the same length (drawn
    without replacement within a shuffle, again when there are fewer) whose recalls are read as
    serial positions of the list with repeats: a recall of position p is a recall of the item
    presented at p. Any analysis of :mod:`cmr.repetition` then gives the value that chance
    ordering of the same recalls would have: a repeated item has no special contiguity.

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
    n_shuffles : int
        Pairings of each list with repeats (default 10).
    rng : int, numpy.random.Generator or None
        Source of the draws (default 0): an int is the seed; a Generator draws one integer seed
        (``int(rng.integers(2**63))``); None draws one from fresh entropy. The seed used is kept
        in attrs ``seed``.
    required : bool
        Raise when no subject has both kinds of lists (default); else return None.

    Returns
    -------
    xarray.Dataset or None
        Kind ``"events"``, one trial per list with repeats and shuffle, with variable
        ``control_shuffle`` (trial) and the source list's labels in ``control_source_list``.
    """
    from .events import as_events
    from .schema import provenance_attrs, validate

    events = as_events(events)
    n_shuffles = _checked_int(n_shuffles, "n_shuffles", 1)
    seed = seed_of(rng)
    rng = np.random.default_rng(seed)
    _, recalls, pres, lengths, group, labels = _arrays(events, "subject")
    repeated = repeat_mask(events)
    mixed = repeated.any(axis=1) if repeated is not None else np.zeros(lengths.size, dtype=bool)
    picks, shuffles, sources = [], [], []
    for g in range(labels.size):  # a few subjects: the trials themselves are handled as arrays
        for length in np.unique(lengths[(group == g) & mixed]):
            targets = np.nonzero((group == g) & mixed & (lengths == length))[0]
            pool = np.nonzero((group == g) & ~mixed & (lengths == length))[0]
            if pool.size == 0:
                continue
            for s in range(n_shuffles):
                order = np.concatenate([rng.permutation(pool) for _ in range(-(-targets.size // pool.size))])
                picks.append(targets)
                sources.append(order[:targets.size])
                shuffles.append(np.full(targets.size, s, dtype=np.int64))
    if not picks:
        if required:
            raise RecallDataError("a shuffled control needs subjects with both lists with repeated items and "
                                  "repeat-free lists of the same length; these events have none (pass control=False)")
        return None
    target, source, shuffle = (np.concatenate(x) for x in (picks, sources, shuffles))
    rows = np.arange(target.size)[:, None]
    taken = recalls[source]
    mapped = np.where(taken > 0, pres[target][rows, np.maximum(taken, 1) - 1], taken)
    items = events["study_item"].transpose("trial", "study_position").values[target]
    recall_item = np.where(mapped > 0, items[rows, np.maximum(mapped, 1) - 1], np.where(mapped < 0, "<intrusion>", ""))
    control = xr.Dataset(
        {
            "list_length": ("trial", lengths[target]),
            "study_item": (("trial", "study_position"), items),
            "recall_item": (("trial", "output_position"), recall_item.astype(object)),
            "recalls": (("trial", "output_position"), mapped),
            "presentation_item": (("trial", "study_position"), pres[target]),
            "control_shuffle": ("trial", shuffle),
            "control_source_list": ("trial", events["list"].values[source]),
        },
        coords={"trial": np.arange(target.size, dtype=np.int64), "subject": ("trial", events["subject"].values[target]),
                "list": ("trial", events["list"].values[target]),
                "study_position": events["study_position"].values, "output_position": events["output_position"].values},
        attrs={**provenance_attrs("events", "cmr.shuffled_control", n_shuffles=n_shuffles, seed=int(seed)),
               "repeated_items": 1},
    )
    return validate(control, "events")


def spacing_recall(events, *, by="subject", max_spacing: int = 8) -> xr.Dataset:
    """Recall probability by the spacing of an item's two presentations (jaxcmr ``rpl``).

    An item's distance is the second presentation's position minus the first's (1 = massed,
    d = d - 1 items between). ``prob_by_distance`` gives each distance 1..``max_spacing`` and one
    bin for longer distances, with ``distance`` 0 for once-presented items; ``prob`` the bins of
    Lohnas & Kahana (2014) (:data:`SPACING_BINS`): once-presented, massed, 1-2, 3-5 and 6-8 items
    between, each the mean of its distances' probabilities as jaxcmr's
    ``binned_recall_probability_by_lag`` forms them (the 6-8 bin takes distances 7, 8 and the
    longer-distance bin; NaN when a distance of the bin never occurs).

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
    by : {"subject", "trial", None}
    max_spacing : int
        Largest distance of its own bin (default 8, jaxcmr's).

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="spacing_recall"``; ``prob``, ``actual``, ``possible``
        (unit, spacing_bin: items recalled and presented in the bin's distances) and
        ``prob_by_distance`` (unit, distance).
    """
    from ._repetition import spacing_counts

    events, recalls, pres, lengths, group, labels = _arrays(events, by)
    max_spacing = _checked_int(max_spacing, "max_spacing", 8)
    recalled, presented = spacing_counts(recalls, pres, lengths, group, int(group.max()) + 1, max_spacing)
    by_distance = ratio(recalled, presented)
    bins = [[0], [1], [2, 3], [4, 5, 6], [7, 8, 9]]
    prob = np.stack([by_distance[:, b].mean(axis=1) for b in bins], axis=1)
    actual = np.stack([recalled[:, b].sum(axis=1) for b in bins], axis=1)
    possible = np.stack([presented[:, b].sum(axis=1) for b in bins], axis=1)
    ds = _stat(events, by, labels, "spacing_recall", "cmr.spacing_recall", ("spacing_bin",),
               {"spacing_bin": np.array(SPACING_BINS, dtype=object)},
               {"prob": (prob, {"long_name": "recall probability (mean over the bin's distances)"}),
                "actual": (actual, {"long_name": "items recalled"}),
                "possible": (possible, {"long_name": "items presented"})}, max_spacing=max_spacing)
    distance = np.arange(max_spacing + 2, dtype=np.int64)
    values = by_distance[0] if by is None else by_distance
    ds["prob_by_distance"] = (ds["prob"].dims[:-1] + ("distance",), values,
                              {"long_name": "recall probability by presentation distance (0: once presented)"})
    return ds.assign_coords(distance=distance)


@renamed_keywords(seed="rng")
def first_presentation_bias(events, *, lag: int = 1, min_lag: int = 4, control=None, n_shuffles: int = 10,
                            rng=0) -> xr.Dataset:
    """First-presentation bias per subject: the rep-CRP at ``lag`` from an item's first minus its
    second presentation, against the same difference in the shuffled control (jaxcmr
    ``test_first_second_bias``, whose default lag +1 asks whether recall moves on to the first
    presentation's neighbour rather than the second's).

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
    lag : int
        The lag compared (default +1).
    min_lag : int
        As :func:`rep_crp`.
    control, n_shuffles, rng
        As :func:`neighbor_crp`; without a control the bias is tested against 0.

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="first_presentation_bias"``; dims ``(subject,)``:
        ``first``, ``second``, ``bias`` (first - second) and, with a control,
        ``control_first``, ``control_second``, ``control_bias`` and ``effect`` (bias - control
        bias); attrs ``t_stat``, ``p_value`` (paired t-test of bias against control bias across
        subjects, or one-sample against 0), ``n_subjects`` and ``test``.
    """
    from .checks import is_integer

    if not is_integer(lag):
        raise RecallDataError(f"lag must be an integer; got {lag!r}")
    lag = int(lag)
    window = max(abs(lag), 1)

    def rates(ev):
        crp = rep_crp(ev, by="subject", min_lag=min_lag, size=2, max_lag=window)
        at = crp["prob"].sel(lag=lag)
        return crp, at.sel(presentation=1, drop=True).values, at.sel(presentation=2, drop=True).values

    crp, first, second = rates(events)
    from .events import as_events

    events = as_events(events)
    labels = crp["subject"].values
    ds = xr.Dataset({"first": ("subject", first), "second": ("subject", second), "bias": ("subject", first - second)},
                    coords={"subject": labels}, attrs={**crp.attrs})
    ds.attrs.update(stat_kind="first_presentation_bias", lag=lag)
    bias = first - second
    control = _control(events, control, n_shuffles, rng)
    if control is not None:
        c_crp, c_first, c_second = rates(control)
        index = {label: i for i, label in enumerate(c_crp["subject"].values.tolist())}
        pick = np.array([index.get(label, -1) for label in labels.tolist()])
        c_first, c_second = (np.where(pick >= 0, x[np.maximum(pick, 0)], np.nan) for x in (c_first, c_second))
        ds["control_first"], ds["control_second"] = ("subject", c_first), ("subject", c_second)
        ds["control_bias"] = ("subject", c_first - c_second)
        ds["effect"] = ("subject", bias - (c_first - c_second))
        valid = ~np.isnan(ds["effect"].values)
        reference, test = c_first[valid] - c_second[valid], "paired t-test of bias against the control's bias"
    else:
        valid = ~np.isnan(bias)
        reference, test = np.zeros(int(valid.sum())), "one-sample t-test of bias against 0"
    n = int(valid.sum())
    t, p = _paired(bias[valid], reference)
    ds.attrs.update(t_stat=t, p_value=p, n_subjects=n, test=test,
                    mean_bias=float(bias[valid].mean()) if n else float("nan"))
    from .schema import validate

    return validate(ds, "recall_stat")


def from_presentations(recalls, presentations, *, subject=None, list=None,  # noqa: A002 - the psifr name
                       source: str = "presentation matrix") -> xr.Dataset:
    """Events dataset from jaxcmr's arrays: a recall matrix and the item number of each presentation.

    Parameters
    ----------
    recalls : array_like of int, shape (n_trials, n_outputs)
        Serial positions 1..list_length (any presentation of a repeated item), ``-1``
        intrusions, ``0`` padding.
    presentations : array_like of int, shape (n_trials, n_positions)
        jaxcmr's ``pres_itemnos``: an item number per presentation, equal numbers for one item
        studied again, ``0`` padding after the list (each list's length is its count of
        non-zero numbers).
    subject, list : array_like, shape (n_trials,), optional
        As :func:`cmr.from_recall_matrix`.
    """
    from .events import from_recall_matrix

    pres = np.asarray(presentations)
    if pres.ndim != 2 or pres.dtype.kind not in "iuf" or (pres.dtype.kind == "f" and (pres != np.round(pres)).any()):
        raise RecallDataError(f"presentations must be a 2-d integer array (trials x positions); got shape "
                              f"{pres.shape} of {pres.dtype}")
    pres = pres.astype(np.int64)
    filled = pres != 0
    if (pres < 0).any() or (~filled[:, :-1] & filled[:, 1:]).any():
        raise RecallDataError("presentations must be item numbers >= 1 with 0 only as padding after each list")
    lengths = filled.sum(axis=1)
    if (lengths == 0).any():
        raise RecallDataError(f"presentations: trial {int(np.argmax(lengths == 0))} has no presentation")
    names = np.where(filled, np.char.mod("%d", pres).astype(object), "")
    return from_recall_matrix(recalls, lengths, subject=subject, list=list, study_items=names, source=source)

