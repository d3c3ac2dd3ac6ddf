"""What a study run is made of: its default settings, file names and thresholds.

The stages (:mod:`icl_cmr.analyses.study.stages`), the figures and the report all read the same
names from here, so none of them imports another to learn where a file lives.
"""
from __future__ import annotations

import re
from pathlib import Path

from cmr.constants import CMR_LIKE_DISTANCE, PAPER_LAGS, RECALL_LAGS

from ...adapters.lm.loading import DEFAULT_MODEL
from ..causal.design import PRESETS

__all__ = [
    "DEFAULT_RECALL",
    "DEFAULT_MODEL",
    "OBJECTIVES",
    "HEAD_LAGS",
    "HUMAN_LAGS",
    "CMR_LIKE_DISTANCE",
    "DEMO_SETTINGS",
    "GRID_FILE",
    "HEADS_FILE",
    "ATTENTION_FILE",
    "ABLATION_FILE",
    "LLM_RECALL_FILE",
    "LLM_RECALL_ABLATION_FILE",
    "COMPOSITION_FILE",
    "CAUSAL_COMPOSITION_FILE",
    "FIGURES_DIR",
    "REPORT_FILE",
    "slug",
    "human_files",
    "human_fit_files",
    "head_fit_file",
]

DEFAULT_RECALL = ("psifr:peers_notask", "psifr:Morton2013")
OBJECTIVES = ("paper", "lsq")
HEAD_LAGS = PAPER_LAGS  # the study's fitting window for heads
HUMAN_LAGS = RECALL_LAGS  # a recall lag-CRP is undefined at lag 0

DEMO_SETTINGS = {
    "n_prompts": 5,
    "n_words": 100,
    "seed": 0,
    "grid_trials": 50,  # Monte Carlo trials per start position (the study used 500)
    # the ablation stage: the demo design of the causal test (icl-cmr ablate --design demo), 6 passages
    # x (intact + top + induction control + 50 random sets), about 5 minutes of the demo's 10 on 2
    # cores (48 s per passage measured); the full test is `icl-cmr ablate`.
    "ablation_passages": PRESETS["demo"].n_passages,
    "ablation_random": PRESETS["demo"].n_random,
    "ablation_matched": PRESETS["demo"].n_matched,
    "ablation_modes": list(PRESETS["demo"].modes),
    "ablation_fraction": PRESETS["demo"].top_fraction,
    "ablation_measures": list(PRESETS["demo"].measures),
    # the model as a free-recall subject: lists of 16 PEERS words, intact and with head sets
    # ablated (top CMR-like, top induction, random); 0 lists skips the stage
    "recall_lists": 6,
    "recall_random": 1,
    "recall_heads": 5,  # heads per ablated set: 10% of SmolLM2 (27 heads) stops its recall whichever they are
    # where the model of the heads and ablation stages runs; cpu/float32 keeps the demo's numbers
    "device": "cpu",
    "dtype": "float32",
}

GRID_FILE = "cmr_grid.nc"
HEADS_FILE = "heads.nc"
ATTENTION_FILE = "attention_top_head.nc"  # attention pattern of the top induction head, prompt 0
ABLATION_FILE = "ablation.nc"
LLM_RECALL_FILE = "llm_recall_events.nc"  # the model's own free recall (events)
LLM_RECALL_ABLATION_FILE = "llm_recall_ablation.nc"
COMPOSITION_FILE = "composition.nc"  # composition scores of every head pair
CAUSAL_COMPOSITION_FILE = "causal_composition.nc"  # path-level ablation of the top heads
FIGURES_DIR = "figures"
REPORT_FILE = "report.md"


def slug(source: str) -> str:
    """File-name-safe label of a data source (``psifr:peers_notask`` -> ``peers_notask``)."""
    base = source.split(":", 1)[-1]
    base = Path(base).stem if ("/" in base or base.endswith(".csv")) else base
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", base)


def human_files(settings) -> dict:
    """Recall source -> its lag-CRP file."""
    return {source: f"human_lag_crp_{slug(source)}.nc" for source in settings["recall"]}


def human_fit_files(settings) -> dict:
    """(recall source, objective) -> its fit file."""
    return {
        (source, objective): f"fits_human_{slug(source)}_{objective}.nc"
        for source in settings["recall"]
        for objective in OBJECTIVES
    }


def head_fit_file(objective: str) -> str:
    """The fit file of the heads for one objective."""
    return f"fits_heads_{objective}.nc"
