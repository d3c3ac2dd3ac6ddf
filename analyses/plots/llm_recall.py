"""The language model's own free recall next to human recall: lag-CRP, SPC and PFR."""
from __future__ import annotations

import numpy as np

from cmr.errors import SchemaError

__all__ = ["recall_vs_humans", "lists_as_subjects"]


def lists_as_subjects(events):
    """``events`` with every list relabelled as its own subject (for a mean +- SEM across lists)."""
    if events.attrs.get("icl_cmr_kind") != "events":
        raise SchemaError(f"expected an events dataset; got kind {events.attrs.get('icl_cmr_kind')!r}")
    labels = np.array([f"{s}#{l}" for s, l in zip(events["subject"].values, events["list"].values)], dtype=object)
    return events.assign_coords(subject=("trial", labels))


def recall_vs_humans(model_events, human_events, *, labels=("model", "humans"), lags=5):
    """Three panels (lag-CRP, SPC, PFR) of a model's recall over a human data set's.

    Parameters
    ----------
    model_events, human_events : xarray.Dataset
        Events datasets (the model's from :func:`icl_cmr.analyses.llm_recall.model_recall`).
        The model's curves are the mean +- SEM across its lists (each list a unit), the
        humans' across subjects.
    labels : (str, str)
        Legend labels.
    lags : int
        Lag window of the lag-CRP panel.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import cmr

    from .recall import lag_crp, pfr, spc
    from .style import new_figure

    model = lists_as_subjects(model_events)
    human = cmr.events.as_events(human_events)
    fig, axes = new_figure(3, 1, width=3.0, height=2.4)
    pairs = {labels[0]: model, labels[1]: human}
    lag_crp({k: cmr.lag_crp(v, lags=lags) for k, v in pairs.items()}, lags=lags, ax=axes[0])
    spc({k: cmr.spc(v) for k, v in pairs.items()}, ax=axes[1])
    pfr({k: cmr.pfr(v) for k, v in pairs.items()}, ax=axes[2])
    return fig
