"""The main job (``icl-cmr run``): the study end to end on any model and recall data sets.

Stages (each resumable, outputs written atomically; see analyses/pipeline.py):

1. ``human_crp``   lag-CRP of every subject of every recall data set -> human_lag_crp_<name>.nc
2. ``figures``     publication figures -> figures/*.png
3. ``report``      report.md (+ report.html) whose numbers come from this run's outputs
"""
from __future__ import annotations

import re
from pathlib import Path

from analyses.pipeline import RunContext, Stage, run_stages

DEFAULT_RECALL = ("psifr:peers_notask", "psifr:Morton2013")
DEFAULT_MODEL = "smollm2-135m"


def slug(source: str) -> str:
    """File-name-safe label of a data source (``psifr:peers_notask`` -> ``peers_notask``)."""
    base = source.split(":", 1)[-1]
    base = Path(base).stem if ("/" in base or base.endswith(".csv")) else base
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", base)


def _human_crp(ctx: RunContext) -> dict:
    from adapters.recall_data import load_recall_data
    from cmr.io import save_dataset
    from cmr.lag_crp import lag_crp

    summary = {}
    for source in ctx.settings["recall"]:
        events = load_recall_data(source)
        crp = lag_crp(events, by="subject")
        save_dataset(crp, ctx.path(f"human_lag_crp_{slug(source)}.nc"))
        mean = crp["profile"].mean("subject")
        summary[source] = {
            "subjects": int(crp.sizes["subject"]),
            "trials": int(events.sizes["trial"]),
            "crp_lag_+1": float(mean.sel(lag=1)),
            "crp_lag_-1": float(mean.sel(lag=-1)),
        }
    return summary


def _figures(ctx: RunContext) -> dict:
    from analyses import figures
    from cmr.io import load_dataset

    fig_dir = ctx.path("figures")
    fig_dir.mkdir(exist_ok=True)
    human = {
        slug(source): load_dataset(ctx.path(f"human_lag_crp_{slug(source)}.nc"), kind="lag_profile")
        for source in ctx.settings["recall"]
    }
    figures.human_lag_crp(human, fig_dir / "human_lag_crp.png", pdf=True)
    return {"figures": ["figures/human_lag_crp.png"]}


def _report(ctx: RunContext) -> dict:
    from analyses.report import write_report

    write_report(ctx)
    return {}


def build_stages(settings: dict) -> list[Stage]:
    recall_outputs = tuple(f"human_lag_crp_{slug(s)}.nc" for s in settings["recall"])
    return [
        Stage("human_crp", recall_outputs, _human_crp, "lag-CRP of every subject of the recall data sets"),
        Stage("figures", ("figures/human_lag_crp.png",), _figures, "figures"),
        Stage("report", ("report.md",), _report, "report.md"),
    ]


def run_study(out_dir, recall=DEFAULT_RECALL, model=DEFAULT_MODEL, resume=False, log=print) -> dict:
    """Run the study into ``out_dir``; return the manifest (stage timings and summaries)."""
    settings = {"recall": list(recall), "model": model}
    ctx = RunContext(out_dir=Path(out_dir), settings=settings, log=log)
    return run_stages(build_stages(settings), ctx, resume=resume)
