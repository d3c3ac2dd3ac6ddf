"""The main job (``icl-cmr run``): the study end to end on any model and recall data sets.

Stages (each resumable, outputs written atomically; see analyses/study/pipeline.py):

1. ``human_crp``   lag-CRP of every subject of every recall data set
2. ``grid``        the CMR lag-profile grid heads and humans are fitted against: the study's
                   Monte Carlo grid of the paper's variant, simulated here (or read with --grid)
3. ``heads``       lag profiles and scores of every attention head of the model, and the
                   attention pattern of its top induction head over one prompt
4. ``fit_heads``   CMR fits of every head (objectives ``paper`` and ``lsq``) + fair Gaussian
5. ``fit_humans``  the same call on every human subject's lag-CRP
6. ``composition`` composition scores of every head pair and the causal Q/K composition test
                   of the top induction and CMR-like heads
7. ``ablation``    ICL score with the top 10% CMR-like heads ablated vs random head sets
   ``llm_recall``  the model's own free recall of word lists, intact and with head sets ablated
                   (skipped, with a note naming ``--recall-lists 0``, for a model that recalls nothing)
8. ``figures``     publication figures
9. ``report``      report.md (+ report.html) whose numbers come from this run's outputs

A resumed run (``--resume``) reuses every finished stage whose own settings and inputs
(:data:`STAGE_INPUTS`) did not change: a run restarted with another ``--n-words`` redoes the
head scan and what reads it, and keeps the human lag-CRPs, the grid and the human fits.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from cmr.deprecation import keyword_only
from cmr.checks import integer
from cmr.crp import lag_crp
from cmr.errors import DataSourceError, ParameterError
from cmr.files import check_input_file
from cmr.grids import paper_mc_grid
from cmr.io import load_dataset, save_dataset
from cmr.null_models import cmr_like_null
from cmr.profile_fit import fit_profiles

from .pipeline import RunContext, Stage, StageSkipped, check_out_dir, read_manifest, run_stages
from .layout import (
    ABLATION_FILE,
    ATTENTION_FILE,
    CAUSAL_COMPOSITION_FILE,
    CMR_LIKE_DISTANCE,
    COMPOSITION_FILE,
    DEFAULT_MODEL,
    DEFAULT_RECALL,
    DEMO_SETTINGS,
    GRID_FILE,
    HEAD_LAGS,
    HEADS_FILE,
    HUMAN_LAGS,
    LLM_RECALL_ABLATION_FILE,
    LLM_RECALL_FILE,
    OBJECTIVES,
    REPORT_FILE,
    head_fit_file,
    human_files,
    human_fit_files,
)
from . import figures as study_figures
from ...adapters.errors import ModelOutputError
from ...adapters.head_profiles import select_profile
from ...adapters.head_ranking import composing_heads, rank_heads, top_heads
from ...adapters.lm import causal_composition, composition
from ...adapters.lm.extraction import attention_pattern, extract_heads
from ...adapters.lm.loading import (
    describe_peak_memory,
    load_model,
    measure_peak_memory,
    refuse_missing_hub_model,
    resolve_device,
    resolve_dtype,
    tiny_model,
    with_run_record,
)
from ...adapters.recall_data import BUNDLED, load_recall_data
from ...adapters.text_corpus import load_passages
from ..causal import recall
from ..causal.ablation import run_ablation
from ..causal.design import AblationDesign
from ..memory import llm_recall
from .report import ablation_summary, composition_stage_summary, write_report

__all__ = ["run_study", "build_stages", "load_study_model", "check_settings", "ablation_design", "STAGE_INPUTS",
           "recall_skip_note"]

#: null profiles per unit and null behind the report's "beyond chance" share (about 15 s for 270 heads)
NULL_PROFILES = 200


# --- stages --------------------------------------------------------------------------


def _human_crp(ctx: RunContext) -> dict:
    summary = {}
    for source, name in human_files(ctx.settings).items():
        events = load_recall_data(source, **ctx.settings.get("recall_options", {}))
        crp = lag_crp(events, by="subject")
        save_dataset(crp, ctx.path(name))
        mean = crp["profile"].mean("subject")
        summary[source] = {
            "subjects": int(crp.sizes["subject"]),
            "trials": int(events.sizes["trial"]),
            "crp_lag_+1": float(mean.sel(lag=1)),
            "crp_lag_-1": float(mean.sel(lag=-1)),
        }
    return summary


def _grid(ctx: RunContext) -> dict:
    if ctx.settings.get("grid"):
        grid = load_dataset(ctx.settings["grid"], kind="lag_profile")
        source = ctx.settings["grid"]
    else:
        grid = paper_mc_grid(n_trials=int(ctx.settings["grid_trials"]), rng=int(ctx.settings["seed"]), progress=True)
        source = f"paper_mc_grid(n_trials={ctx.settings['grid_trials']})"
    save_dataset(grid, ctx.path(GRID_FILE))
    points = int(np.prod([grid.sizes[d] for d in grid["profile"].dims if d != "lag"]))
    return {"source": source, "points": points, "profile_kind": grid.attrs.get("profile_kind", "")}


def _heads(ctx: RunContext) -> dict:
    s = ctx.settings
    model = load_study_model(s["model"], device=s["device"], dtype=s["dtype"])
    with tqdm(total=int(s["n_prompts"]), desc=f"heads of {s['model']}", unit="prompt") as bar:
        heads = extract_heads(model, n_words=int(s["n_words"]), n_prompts=int(s["n_prompts"]), rng=int(s["seed"]),
                              progress=bar.update)
    save_dataset(heads, ctx.path(HEADS_FILE))

    induction = heads["induction_score"].squeeze(drop=True)
    top = [
        {"layer": layer, "head": head, "induction_score": float(induction.sel(layer=layer, head=head))}
        for layer, head in top_heads(heads, variable="induction_score", n_heads=5, largest=True)
    ]
    loss = heads["position_loss"].squeeze(drop=True).values if "position_loss" in heads else None
    best = top[0]  # one more forward pass: the top induction head's attention over prompt 0 (Fig. 3b)
    pattern = attention_pattern(model, best["layer"], best["head"], n_words=int(s["n_words"]), rng=int(s["seed"]))
    save_dataset(pattern, ctx.path(ATTENTION_FILE))
    out = {"n_layers": int(heads.sizes["layer"]), "n_heads": int(heads.sizes["head"]), "top_induction": top,
           "attention_pattern": {"layer": best["layer"], "head": best["head"], "prompt": 0}}
    out.update(_run_record(ctx, heads.attrs))
    if loss is not None:
        n = int(s["n_words"])
        out["loss_first_copy"] = float(np.nanmean(loss[1 : n]))
        out["loss_second_copy"] = float(np.nanmean(loss[n + 1 :]))
    return out


#: the study's name of the random tiny model for smoke tests (no weights on disk)
TINY_MODEL = "tiny-llama"


@keyword_only
def load_study_model(name: str, *, device="cpu", dtype="float32"):
    """The study's model: ``tiny-llama`` is the random tiny model for smoke tests."""
    if name == TINY_MODEL:
        return tiny_model(device=device, dtype=dtype)
    return load_model(name, device=device, dtype=dtype)


def _run_record(ctx: RunContext, attrs) -> dict:
    """Device, dtype and peak memory of a stage's dataset, logged and kept in its summary."""
    ctx.log(f"on {attrs['device']} in {attrs['dtype']}; {describe_peak_memory(attrs)}")
    return {key: attrs[key] for key in ("device", "dtype", "peak_memory_bytes")}


def _fit_summary(fits, threshold=CMR_LIKE_DISTANCE, null=None) -> dict:
    distance = fits["distance"].values.ravel()
    finite = distance[np.isfinite(distance)]
    out = {
        "units": int(finite.size),
        "median_distance": float(np.median(finite)) if finite.size else float("nan"),
        "share_cmr_like": float(np.mean(finite < threshold)) if finite.size else float("nan"),
    }
    if null is not None:  # the share that beats both structureless nulls (docs/null-models.md)
        out["share_beyond_chance"] = float(null.attrs["share_beyond_chance"])
        out["null_share_cmr_like"] = float(null.attrs["null_share_cmr_like_smooth"])
    if "gaussian_distance" in fits:
        g = fits["gaussian_distance"].values.ravel()
        both = np.isfinite(g) & np.isfinite(distance)
        out["gaussian_median_distance"] = float(np.median(g[both])) if both.any() else float("nan")
        out["gaussian_beats_cmr_distance"] = float(np.mean(g[both] < distance[both])) if both.any() else float("nan")
    if "aic" in fits and "gaussian_aic" in fits:
        a, ga = fits["aic"].values.ravel(), fits["gaussian_aic"].values.ravel()
        both = np.isfinite(a) & np.isfinite(ga)
        out["gaussian_beats_cmr_aic"] = float(np.mean(ga[both] < a[both])) if both.any() else float("nan")
    return out


def _fit_heads(ctx: RunContext) -> dict:
    heads = select_profile(load_dataset(ctx.path(HEADS_FILE), kind="lag_profile"), which="score")
    grid = load_dataset(ctx.path(GRID_FILE), kind="lag_profile")
    summary = {}
    for objective in OBJECTIVES:
        fits = fit_profiles(heads, grid, objective=objective, lags=HEAD_LAGS, invalid="nan")
        save_dataset(fits, ctx.path(head_fit_file(objective)))
        null = cmr_like_null(heads, grid, objective=objective, lags=HEAD_LAGS, n_null=NULL_PROFILES)
        summary[objective] = _fit_summary(fits, null=null)
    return summary


def _fit_humans(ctx: RunContext) -> dict:
    grid = load_dataset(ctx.path(GRID_FILE), kind="lag_profile")
    summary = {}
    for (source, objective), name in human_fit_files(ctx.settings).items():
        crp = load_dataset(ctx.path(human_files(ctx.settings)[source]), kind="lag_profile")
        fits = fit_profiles(crp, grid, objective=objective, lags=HUMAN_LAGS, invalid="nan")
        save_dataset(fits, ctx.path(name))
        null = cmr_like_null(crp, grid, objective=objective, lags=HUMAN_LAGS, n_null=NULL_PROFILES)
        summary.setdefault(source, {})[objective] = _fit_summary(fits, null=null)
    return summary


#: heads of each kind (top induction, most CMR-like) in the study's causal composition test
COMPOSITION_TOP = 3


def _composition(ctx: RunContext) -> dict:
    s = ctx.settings
    model = load_study_model(s["model"], device=s["device"], dtype=s["dtype"])
    scores = composition.composition_scores(model, n_baseline=50, rng=int(s["seed"]))
    save_dataset(scores, ctx.path(COMPOSITION_FILE))
    induction = causal_composition.induction_scores(model, rng=int(s["seed"]))
    distance = load_dataset(ctx.path(head_fit_file("lsq")), kind="profile_fit")["distance"]
    distance = distance.squeeze([d for d in ("model", "checkpoint") if d in distance.dims], drop=True)
    distance = distance.transpose("layer", "head").values
    induction, distance = composing_heads(induction), composing_heads(distance)
    picks = {"induction": rank_heads(induction, n=COMPOSITION_TOP),
             "cmr_like": rank_heads(distance, n=COMPOSITION_TOP, largest=False)}
    roles = {}
    for role, flat in picks.items():
        for index in flat:
            roles.setdefault(tuple(int(i) for i in np.unravel_index(index, induction.shape)), []).append(role)
    heads = list(roles)
    causal = causal_composition.path_ablation(model, heads, rng=int(s["seed"]), composition=scores)
    save_dataset(causal, ctx.path(CAUSAL_COMPOSITION_FILE))
    return composition_stage_summary(scores, causal, roles, distance)


def ablation_design(settings: dict):
    """The design of the ablation stage: the ``demo`` preset of
    :class:`~icl_cmr.analyses.causal.design.AblationDesign`, with the run's ``ablation_*``
    settings (``--ablation-passages`` and the others) replacing its sizes."""
    measures = settings.get("ablation_measures")
    return AblationDesign.preset(
        "demo", n_passages=settings.get("ablation_passages"), n_random=settings.get("ablation_random"),
        n_matched=settings.get("ablation_matched"), top_fraction=settings.get("ablation_fraction"),
        modes=None if settings.get("ablation_modes") is None else tuple(settings["ablation_modes"]),
        measures=None if measures is None else tuple(measures))


def _ablation(ctx: RunContext) -> dict:
    s = ctx.settings
    design = ablation_design(s)
    model = load_study_model(s["model"], device=s["device"], dtype=s["dtype"])
    fits = load_dataset(ctx.path(head_fit_file("lsq")), kind="profile_fit")
    top = top_heads(fits, fraction=design.top_fraction)
    control = top_heads(load_dataset(ctx.path(HEADS_FILE)), variable="induction_score", n_heads=len(top), largest=True)
    passages, articles = load_passages("wikipedia", model.tokenizer, n_passages=design.n_passages,
                                       n_tokens=design.n_tokens, rng=int(s["seed"]), return_articles=True)
    with measure_peak_memory(model.device) as memory:
        result = run_ablation(
            model.bridge, passages, top, design=design, control_heads=control, rng=int(s["seed"]), articles=articles,
            info={"model": s["model"], "text": "wikipedia (gensim test data)", "top_heads_from": "fits_heads_lsq.nc distance",
                  "control_heads_from": "heads.nc induction_score"},
        )
    result = with_run_record(result, device=model.device, dtype=model.dtype, **memory)
    save_dataset(result, ctx.path(ABLATION_FILE))

    return {**ablation_summary(result, top), **_run_record(ctx, result.attrs)}


def recall_skip_note(model: str, error) -> str:
    """The note of a run whose model does not recall the lists (the recall stage is skipped)."""
    return (f"{model} did not recall the study lists, so there is no recall to score and the study went on "
            "without it. A model that cannot do the task (untrained, tiny, or not instruction-tuned) is run with "
            f"--recall-lists 0 to leave this stage out. What the recall task found: {error}")


def _llm_recall(ctx: RunContext) -> dict:
    s = ctx.settings
    model = load_study_model(s["model"], device=s["device"], dtype=s["dtype"])
    heads = load_dataset(ctx.path(HEADS_FILE), kind="lag_profile")
    fits = load_dataset(ctx.path(head_fit_file("lsq")), kind="profile_fit")
    size = min(int(s["recall_heads"]), heads.sizes["layer"] * heads.sizes["head"] // 2)  # random sets need room
    sets = recall.head_sets(heads, fits, n_heads=size, n_random=int(s["recall_random"]), n_layer_matched=0,
                            rng=int(s["seed"]))
    try:
        events, _ = llm_recall.model_recall(model, n_lists=int(s["recall_lists"]), rng=int(s["seed"]))
    except ModelOutputError as exc:  # a model that recalls nothing has no recall to score: the study goes on
        raise StageSkipped(recall_skip_note(s["model"], exc)) from None
    result = recall.recall_ablation(model, sets, n_lists=int(s["recall_lists"]), rng=int(s["seed"]),
                                    baseline=events, progress=lambda name: ctx.log(f"recall with {name} ablated"))
    save_dataset(events, ctx.path(LLM_RECALL_FILE))
    save_dataset(result, ctx.path(LLM_RECALL_ABLATION_FILE))
    return llm_recall.recall_summary(events, ablation=result)


def _figures(ctx: RunContext) -> dict:
    return {"figures": study_figures.make_all(ctx)}


def _report(ctx: RunContext) -> dict:
    write_report(ctx, manifest=read_manifest(ctx.out_dir))
    return {}


#: the settings each model stage reads beside its own: the model, where it runs, and the seed
_MODEL = ("model", "device", "dtype", "seed")
#: what each stage reads: (settings, earlier stages); a resumed run redoes a stage when either changed
STAGE_INPUTS = {
    "human_crp": (("recall", "recall_options"), ()),
    "grid": (("grid", "grid_trials", "seed"), ()),
    "heads": ((*_MODEL, "n_prompts", "n_words"), ()),
    "fit_heads": ((), ("heads", "grid")),
    "fit_humans": ((), ("human_crp", "grid")),
    "composition": (_MODEL, ("fit_heads",)),
    "ablation": ((*_MODEL, "ablation_passages", "ablation_random", "ablation_matched", "ablation_modes",
                  "ablation_fraction", "ablation_measures"), ("heads", "fit_heads")),
    "llm_recall": ((*_MODEL, "recall_lists", "recall_random", "recall_heads"), ("heads", "fit_heads")),
    # figures and the report read every setting and every earlier stage
    "figures": (None, None),
    "report": (None, None),
}


def build_stages(settings: dict) -> list[Stage]:
    stages = [
        ("human_crp", tuple(human_files(settings).values()), _human_crp,
         "lag-CRP of every subject of the recall data sets"),
        ("grid", (GRID_FILE,), _grid, "CMR lag-profile grid (paper's variant, Monte Carlo)"),
        ("heads", (HEADS_FILE, ATTENTION_FILE), _heads, f"lag profiles of every attention head of {settings['model']}"),
        ("fit_heads", tuple(head_fit_file(o) for o in OBJECTIVES), _fit_heads,
         "CMR fits (paper, lsq) and Gaussian baseline of every head"),
        ("fit_humans", tuple(human_fit_files(settings).values()), _fit_humans, "the same fits for every human subject"),
        ("composition", (COMPOSITION_FILE, CAUSAL_COMPOSITION_FILE), _composition,
         "composition scores and the causal Q/K composition test of the top heads"),
    ]
    if int(settings.get("ablation_passages", 0)) > 0:
        stages.append(("ablation", (ABLATION_FILE,), _ablation,
                       "ICL score with the top CMR-like heads ablated vs random head sets"))
    if int(settings.get("recall_lists", 0)) > 0:
        stages.append(("llm_recall", (LLM_RECALL_FILE, LLM_RECALL_ABLATION_FILE), _llm_recall,
                       "the model's free recall of word lists, intact and with head sets ablated"))
    stages += [
        ("figures", ("figures/human_lag_crp.png",), _figures, "figures"),
        ("report", (REPORT_FILE,), _report, "report.md"),
    ]
    return [Stage(name, outputs, run, description, *STAGE_INPUTS[name]) for name, outputs, run, description in stages]


def check_settings(settings: dict) -> None:
    """Refuse settings a later stage would refuse, before the first stage runs.

    Raises
    ------
    cmr.errors.ParameterError
        A count below its minimum (``n_words`` >= 2; ``n_prompts``, ``grid_trials``,
        ``ablation_random`` >= 1; ``ablation_passages``, ``ablation_matched``, ``recall_lists``,
        ``seed`` >= 0) or not an integer.
    cmr.errors.DataSourceError
        A recall CSV or the ``grid`` file that does not exist.
    cmr.errors.ParameterError
        Two recall data sets whose results would share a file name (``a/data.csv``, ``b/data.csv``).
    """
    minimum = {"n_prompts": 1, "n_words": 2, "grid_trials": 1, "ablation_random": 1, "ablation_passages": 0,
               "ablation_matched": 0, "recall_lists": 0, "seed": 0}
    for name, low in minimum.items():
        if name in settings:
            integer(settings[name], f"{name} (--{name.replace('_', '-')})", minimum=low)
    if int(settings.get("ablation_passages", 0)) > 0:
        ablation_design(settings)  # the ablation stage's design, refused now rather than after the first stages
    for source in settings["recall"]:
        if source not in BUNDLED and not Path(source).is_file():
            if Path(source).exists() and not Path(source).is_dir():  # a pipe or a device: named as what it is
                check_input_file(source, "recall data")
            raise DataSourceError(f"recall data {source!r} is neither a bundled name ({', '.join(BUNDLED)}) "
                                  "nor an existing CSV file")
    if settings.get("grid") and not Path(settings["grid"]).is_file():
        if Path(settings["grid"]).exists():
            check_input_file(settings["grid"], "grid")
        raise DataSourceError(f"grid: no such file: {str(settings['grid'])!r}")
    named = {}
    for source, name in human_files(settings).items():  # a/data.csv and b/data.csv would share one file
        if name in named:
            raise ParameterError(f"recall data {named[name]!r} and {source!r} (--recall) would both be written to "
                                 f"{name}; expected data sets whose file names differ (rename or move one)")
        named[name] = source


@keyword_only
def run_study(out_dir, *, recall=DEFAULT_RECALL, model=DEFAULT_MODEL, resume=False, log=print, recall_options=None,
              **overrides) -> dict:
    """Run the study into ``out_dir``; return the manifest (stage timings and summaries).

    ``overrides`` replace entries of :data:`DEMO_SETTINGS` (e.g. ``ablation_passages=0``
    skips the ablation, ``grid="grid.nc"`` uses a saved grid). ``recall_options`` are keyword
    arguments of :func:`~icl_cmr.adapters.recall_data.load_recall_data` for every recall source
    (``list_keys``, ``normalize_items``, ``columns``, ``trial_types``, ``list_length``).
    """
    unknown = set(overrides) - set(DEMO_SETTINGS) - {"grid"}
    if unknown:
        raise TypeError(f"unknown settings {sorted(unknown)}; known: {sorted(DEMO_SETTINGS) + ['grid']}")
    settings = {**DEMO_SETTINGS, **overrides, "recall": list(recall), "model": model}
    given = {k: v for k, v in (recall_options or {}).items() if v not in (None, False)}
    if given:  # kept in the settings, so a resumed run with other options redoes the stages that read them
        settings["recall_options"] = given

    check_out_dir(out_dir)
    check_settings(settings)
    if model != TINY_MODEL:
        refuse_missing_hub_model(model)  # a model not on disk fails in milliseconds, not after the first stages
    # checked before the first stage, and stored by name (so "cuda" and "cuda:0" resume alike)
    settings["device"] = resolve_device(settings["device"])
    settings["dtype"] = resolve_dtype(settings["dtype"])[0]
    ctx = RunContext(out_dir=Path(out_dir), settings=settings, log=log)
    return run_stages(build_stages(settings), ctx, resume=resume)
