"""Which heads prefer the first presentation of a repeated word, and how they compare with people.

Reads a ``repetition_heads`` dataset (:mod:`icl_cmr.adapters.repetition_heads`) and, optionally,
people's recall of lists with repeated items (:func:`cmr.repetition.first_presentation_bias`).
See docs/repetition.md, "Heads".
"""
from __future__ import annotations

import json

import numpy as np
import xarray as xr

from cmr.checks import probability
from cmr.multiple_comparisons import holm
from cmr.repetition import first_presentation_bias
from cmr.schema import validate


__all__ = ["PREFERENCES", "head_preferences", "compare_with_people", "with_people"]

#: a head's verdict: its first-presentation bias is Holm-significant and positive, negative, or neither
PREFERENCES = ("first", "later", "neither")


def head_preferences(heads: xr.Dataset, *, alpha: float = 0.05) -> xr.Dataset:
    """A copy of ``heads`` with Holm-adjusted sign tests and each head's preference.

    Parameters
    ----------
    heads : xarray.Dataset of kind ``repetition_heads``
    alpha : float
        Family-wise error rate over all heads of a model (default 0.05).

    Returns
    -------
    xarray.Dataset
        ``first_holm`` and ``control_holm`` (Holm over the heads of each model and checkpoint),
        ``preference`` (``PREFERENCES``: the bias against 0) and ``preference_beyond_control``
        (the bias against its positional control), and attrs counting the heads of each kind.
    """
    validate(heads, "repetition_heads")
    alpha = probability(alpha, "alpha", open_low=True)
    out = heads.copy()
    for p_name, holm_name, verdict, diff in (
            ("first_p", "first_holm", "preference", out["first_bias"]),
            ("control_p", "control_holm", "preference_beyond_control", out["first_bias"] - out["control_bias"])):
        adjusted = xr.apply_ufunc(holm, out[p_name], input_core_dims=[["layer", "head"]],
                                  output_core_dims=[["layer", "head"]], vectorize=True)
        out[holm_name] = adjusted.transpose(*out[p_name].dims)
        out[holm_name].attrs["description"] = f"{p_name} adjusted by Holm's method over the heads of the model"
        significant = (out[holm_name] < alpha).values
        label = np.where(significant & (diff.values > 0), "first",
                         np.where(significant & (diff.values < 0), "later", "neither")).astype(object)
        out[verdict] = (diff.dims, label, {"description": f"{holm_name} < {alpha} with the sign of the bias"})
        for kind in PREFERENCES:
            out.attrs[f"n_{verdict}_{kind}"] = int((label == kind).sum())
    out.attrs["alpha"] = float(alpha)
    return out


def compare_with_people(heads: xr.Dataset, events, *, min_lag: int | None = None, source: str = "") -> dict:
    """People's first-presentation bias beside the heads'.

    Parameters
    ----------
    heads : xarray.Dataset of kind ``repetition_heads``
    events : events dataset (or psifr table) with lists that repeat items
    min_lag : int, optional
        As :func:`cmr.rep_crp`; default the heads' own ``min_lag``.
    source : str
        Where the events came from (recorded).

    Returns
    -------
    dict (JSON-serialisable)
        ``people_mean_bias`` (mean over subjects of the rep-CRP at +1 from the first minus the
        second presentation), ``people_n_subjects``, ``people_t``/``people_p`` and ``people_test``
        (:func:`cmr.first_presentation_bias`: against the shuffled control when the subjects also
        studied repeat-free lists, whose mean bias is ``people_mean_control_bias``, else against
        0), ``heads_median_bias``, ``heads_share_same_sign`` (share of heads whose bias has the
        sign of the people's mean) and ``source``.
    """
    validate(heads, "repetition_heads")
    min_lag = int(heads.attrs["min_lag"]) if min_lag is None else min_lag
    people = first_presentation_bias(events, min_lag=min_lag)
    mean = float(people.attrs["mean_bias"])
    control = float(np.nanmean(people["control_bias"].values)) if "control_bias" in people else float("nan")
    bias = heads["first_bias"].values
    finite = bias[np.isfinite(bias)]
    return {
        "people_mean_bias": mean,
        "people_mean_control_bias": control,
        "people_n_subjects": int(people.attrs["n_subjects"]),
        "people_t": float(people.attrs["t_stat"]),
        "people_p": float(people.attrs["p_value"]),
        "people_test": str(people.attrs["test"]),
        "heads_median_bias": float(np.median(finite)) if finite.size else float("nan"),
        "heads_share_same_sign": float(np.mean(np.sign(finite) == np.sign(mean))) if finite.size else float("nan"),
        "source": str(source),
    }


def with_people(heads: xr.Dataset, comparison: dict) -> xr.Dataset:
    """``heads`` with the comparison of :func:`compare_with_people` in its attrs and provenance."""
    record = json.loads(heads.attrs.get("provenance", "{}"))
    record["people"] = comparison
    return heads.assign_attrs(provenance=json.dumps(record, sort_keys=True),
                              **{k: v for k, v in comparison.items() if k != "source"},
                              people_source=comparison["source"])
