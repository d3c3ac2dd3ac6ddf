"""Training dynamics: induction score, CMR distance, fitted CMR parameters against training step.

Two sources of checkpoint series:

* a toy run of :mod:`icl_cmr.adapters.lm.toy_model`: :func:`scan_checkpoints` extracts head lag profiles
  (:func:`icl_cmr.adapters.lm.extraction.extract_heads`, the same word list at every checkpoint)
  into one ``lag_profile`` dataset with dims ``(model, checkpoint, layer, head, lag)``, where the
  ``checkpoint`` coordinate is the training step, and fits CMR to all of them in one call of
  :func:`cmr.profile_fit.fit_profiles`;
* the study's published Pythia profiles (:func:`fit_published_series`: 16 checkpoints each of
  Pythia 70m/410m/2.8b/12b; checkpoint c is step 1000 (c + 1), c = 142 the final 143000).

:func:`layer_summary` reduces either to per-(checkpoint, layer) curves: best induction score,
best CMR distance, share of CMR-like heads, and the fitted parameters and inverse temperature of
the layer's most CMR-like head. See docs/training-dynamics.md.
"""
from __future__ import annotations

from typing import TYPE_CHECKING
import warnings

import numpy as np
from tqdm.auto import tqdm
import pandas as pd
import xarray as xr

if TYPE_CHECKING:
    import pandas

from cmr.checks import seed_of
from cmr.constants import CMR_LIKE_DISTANCE
from cmr.deprecation import keyword_only, renamed_keywords
from cmr.errors import ParameterError
from cmr.files import check_input_file
from cmr.profile_fit import ProfileWarning, fit_profiles
from cmr.schema import provenance_attrs, validate

from ...adapters.lm.extraction import extract_heads
from ...adapters.lm.loading import load_model
from ...adapters.published import read_published_profiles

__all__ = ["scan_checkpoints", "fit_series", "fit_published_series", "published_dynamics", "pythia_step",
           "layer_summary", "CMR_LIKE_DISTANCE"]



@renamed_keywords(seed="rng")
def scan_checkpoints(checkpoints, *, words, n_prompts: int = 4, rng=0, lags=8,
                     model_name: str = "toy", progress: bool = True) -> xr.Dataset:
    """Head lag profiles of every checkpoint in one ``lag_profile`` dataset.

    Parameters
    ----------
    checkpoints : sequence of (step, directory)
        E.g. :func:`icl_cmr.adapters.lm.toy_model.list_checkpoints`.
    words : list of str
        Prompt words (leading space, one token each), the same at every checkpoint.
    n_prompts : int
        Prompts per checkpoint.
    rng : int, numpy.random.Generator or None
        Seed of the prompts, the same at every checkpoint (default 0; a Generator draws one,
        ``int(rng.integers(2**63))``; None draws one from fresh entropy). Kept as ``seed``.
    lags : int or sequence of int
        Lag window (:func:`cmr.lag_window`), within the number of words.
    model_name : str
        The ``model`` coordinate.

    Returns
    -------
    xarray.Dataset, dims (model, checkpoint, layer, head, lag); ``checkpoint`` = training step
    """
    seed = seed_of(rng)
    parts = []
    for step, directory in tqdm(list(checkpoints), desc="scanning checkpoints", unit="checkpoint",
                                disable=not progress):
        model = load_model(str(directory))
        heads = extract_heads(model, n_prompts=n_prompts, rng=seed, words=list(words), checkpoint=int(step),
                              lags=lags)
        parts.append(heads.assign_coords(model=[model_name]))
    combined = xr.concat(parts, dim="checkpoint", data_vars="minimal", coords="minimal", compat="override",
                         combine_attrs="override")
    combined.attrs.update(provenance_attrs(
        "lag_profile", "icl_cmr.analyses.heads.dynamics.scan_checkpoints", steps=[int(s) for s, _ in checkpoints],
        checkpoint_dirs=[str(d) for _, d in checkpoints], n_prompts=int(n_prompts), seed=int(seed),
        words=list(words), first_checkpoint_provenance=parts[0].attrs.get("provenance", "")))
    return validate(combined, "lag_profile")


@keyword_only
def fit_series(profiles: xr.Dataset, grid: xr.Dataset, *, objective: str = "paper") -> xr.Dataset:
    """CMR fits of every head at every checkpoint (NaN for unfittable, e.g. flat, profiles)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProfileWarning)  # flat heads at initialisation are expected
        return fit_profiles(profiles, grid, objective=objective, invalid="nan")


def pythia_step(checkpoint) -> np.ndarray:
    """Training step of the published Pythia checkpoint indices (c -> 1000 (c+1); 142 -> 143000)."""
    checkpoint = np.asarray(checkpoint, dtype=np.int64)
    return np.where(checkpoint >= 142, 143000, 1000 * (checkpoint + 1))


@keyword_only
def fit_published_series(profiles_path, grid: xr.Dataset, *, models=None, objective: str = "paper") -> dict:
    """CMR fits of every checkpoint of the published Pythia profiles, one dataset per model.

    Parameters
    ----------
    profiles_path : path of ``head_profiles.csv.gz`` (the study's export)
    grid : CMR grid (``lag_profile``, ``unit_kind="cmr_parameters"``)
    models : list of str, optional
        Default: every ``pythia*`` model in the file.

    Returns
    -------
    dict model name -> ``profile_fit`` dataset with dims (model, checkpoint, layer, head)
    """
    names = list(models) if models is not None else None
    if names is None:
        table = pd.read_csv(check_input_file(profiles_path, "published profiles", kind="text"), usecols=["model"])
        names = sorted(m for m in table["model"].unique() if str(m).startswith("pythia"))
    if not names:
        raise ParameterError(f"no Pythia models in {profiles_path}")
    return {name: fit_series(read_published_profiles(profiles_path, model=name), grid, objective=objective)
            for name in names}


@keyword_only
def published_dynamics(profiles_path, grid: xr.Dataset, *, models=None, objective: str = "paper"):
    """Fitted CMR parameters and inverse temperature against training step, per layer, for Pythia.

    Returns the :func:`layer_summary` table of every published Pythia checkpoint with a ``step``
    column (:func:`pythia_step`).
    """
    fits = fit_published_series(profiles_path, grid, models=models, objective=objective)
    table = pd.concat([layer_summary(f) for f in fits.values()], ignore_index=True)
    table.insert(2, "step", pythia_step(table["checkpoint"].to_numpy()))
    return table


@keyword_only
def layer_summary(fits: xr.Dataset, *, profiles: xr.Dataset | None = None) -> "pandas.DataFrame":
    """Per (model, checkpoint, layer): the curves of the training-dynamics figures.

    Columns: ``model, checkpoint, layer, relative_depth, best_distance, share_cmr_like``
    (distance < 0.5), the layer's most CMR-like head with its ``beta_enc``/``beta_rec``/``gamma``
    (whatever parameters the grid has) and ``inverse_temperature``, and with ``profiles`` the
    layer's ``max_induction_score`` (and ``max_previous_token_score`` /
    ``max_duplicate_token_score`` when the profiles have them).
    """
    rows = []
    distance = fits["distance"]
    n_layers = fits.sizes["layer"]
    for model in fits["model"].values:
        for checkpoint in fits["checkpoint"].values:
            for layer in fits["layer"].values:
                unit = dict(model=model, checkpoint=checkpoint, layer=layer)
                d = distance.sel(unit).values
                row = dict(model=str(model), checkpoint=int(checkpoint), layer=int(layer),
                           relative_depth=(int(layer) + 0.5) / n_layers,
                           best_distance=float(np.nanmin(d)) if np.isfinite(d).any() else np.nan,
                           share_cmr_like=float(np.mean(d < CMR_LIKE_DISTANCE)))
                if np.isfinite(d).any():
                    head = fits["head"].values[int(np.nanargmin(d))]
                    best = fits.sel({**unit, "head": head})
                    row["best_head"] = int(head)
                    row["inverse_temperature"] = float(best["inverse_temperature"])
                    for name in best["parameter"].values:
                        row[str(name)] = float(best["parameters"].sel(parameter=name))
                for score in ("induction_score", "previous_token_score", "duplicate_token_score"):
                    if profiles is not None and score in profiles:
                        row[f"max_{score}"] = float(profiles[score].sel(unit).max())
                rows.append(row)
    return pd.DataFrame(rows)
