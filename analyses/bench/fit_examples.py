"""The documented fitting examples of semantic CMR, CMR2 and the network fitter, in one place.

Each builder returns a :class:`FitExample`: the data, the spec and how the documented call
fits it (its ``fit(**options)`` runs the family's own fitter with the documented arguments and
the fitter's defaults otherwise, ``score(values)`` gives each unit's log-likelihood at a
parameter set). The docs, ``icl-cmr bench fit-quality-examples`` and the tests fit the same
thing from here; ``icl_cmr.data``'s ``fit_reference_examples.csv`` holds the best known maximum
of each unit (data/README.md says how it was made).

- ``semantic``: docs/semantic-cmr.md's simulated lab export with word vectors (2 subjects x 4
  lists of 6 items, pooled), ``FitSpec(["B_enc", "T", "Sff"], patterns=...)``, ``by=None``.
- ``cmr2``: docs/cmr2.md's two simulated subjects (8 sessions x 8 lists of 10 items each),
  free ``B_enc``, ``B_distract`` and ``C_thresh``, per subject.
- ``network``: cymr's ``test_dist_cmr_fit`` (its ``sample_data("sample1")``: two subjects, one
  3-item list each; docs/cmr-features.md), free ``B_enc``, per subject.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from importlib import resources
from io import StringIO
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

import cmr
from cmr.errors import ParameterError
from cmr.io import write_table

from ...adapters.item_pools import patterns_from_file
from ...adapters.recall_data import load_recall_data

__all__ = ["FitExample", "EXAMPLES", "example", "semantic_example", "cmr2_example", "network_example",
           "load_reference", "REFERENCE_FILE"]

REFERENCE_FILE = "fit_reference_examples.csv"


@dataclass(frozen=True)
class FitExample:
    """One documented fitting example: what is fitted and how the documented call fits it.

    ``fit(**options)`` is the family's fitter called as documented (``options`` override or add
    keyword arguments, e.g. ``n_restarts=64, rng=5``); ``score(values)`` the log-likelihood of
    each unit at ``values`` (a mapping of unit label to a full parameter set); ``units`` the
    unit labels as text; ``free`` the free parameters and ``bounds`` their search bounds.
    """

    family: str
    name: str
    data: object
    spec: object
    units: tuple
    free: tuple
    bounds: tuple
    fit: Callable = field(repr=False)
    score: Callable = field(repr=False)
    #: a full parameter set of a unit from free values, ``values(unit, x) -> dict``
    values: Callable = field(repr=False)


# --- semantic CMR: docs/semantic-cmr.md ---------------------------------------------------------


def _semantic_events():
    """The lab export and word vectors of docs/semantic-cmr.md's example, read as that page reads them."""
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        table = cmr.simulate_free_recall(cmr.default_parameters(), 6, 4, subjects=2, rng=0)
        words = np.array(["apple", "bird", "cat", "dog", "egg", "fish"])
        write_table(pd.DataFrame({"subject_id": table["subject"], "list_num": table["list"],
                                  "phase": table["trial_type"].map({"study": "encoding", "recall": "retrieval"}),
                                  "serial_pos": table["position"],
                                  "word": words[table["item"].astype(int).to_numpy() - 1]}), folder / "lab.csv")
        np.savez(folder / "pool.npz", items=words, vectors=np.random.default_rng(0).normal(size=(6, 50)))
        events = load_recall_data(str(folder / "lab.csv"), normalize_items=True,
                                  columns={"subject": "subject_id", "list": "list_num", "position": "serial_pos",
                                           "item": "word", "trial_type": "phase"},
                                  trial_types={"study": "encoding", "recall": "retrieval"})
        patterns = patterns_from_file(vectors=folder / "pool.npz", events=events)
    return events, patterns


def semantic_example() -> FitExample:
    """docs/semantic-cmr.md: ``cmr.fit_recall(events, FitSpec(["B_enc", "T", "Sff"], patterns=...), by=None)``."""
    events, patterns = _semantic_events()
    spec = cmr.FitSpec(["B_enc", "T", "Sff"], patterns=patterns)
    model = spec._model

    def fit(**options):
        return cmr.fit_recall(events, spec, **{"by": None, "progress": False, **options})

    def score(values):
        (params,) = values.values()
        return {"pooled": float(cmr.log_likelihood(events, params, patterns=patterns).attrs["total_logl"])}

    return FitExample("semantic", "semantic-cmr.md lab export", events, spec, ("pooled",), model.free, model.bounds,
                      fit, score, lambda unit, x: model.as_dict(x))


# --- CMR2: docs/cmr2.md --------------------------------------------------------------------------


def cmr2_example() -> FitExample:
    """docs/cmr2.md "Fitting": two simulated subjects, free ``B_enc``, ``B_distract``, ``C_thresh``."""
    base = dict(cmr.default_cmr2_parameters(), X1=0.01, X2=0.3, Lcf=0.3, P1=0.5, T=0.25)
    truth = {1: dict(base, B_enc=0.5, B_distract=0.4, C_thresh=0.05),
             2: dict(base, B_enc=0.7, B_distract=0.6, C_thresh=0.065)}
    table = cmr.simulate_cmr2(truth, list_length=10, n_lists=8, sessions=8, rng=11)
    free = ["B_enc", "B_distract", "C_thresh"]
    spec = cmr.CMR2FitSpec(free, fixed={k: v for k, v in base.items() if k not in free})
    model = spec._model

    def fit(**options):
        return cmr.fit_cmr2(table, spec, **{"session": "session", "progress": False, **options})

    def score(values):
        out = {}
        for unit, params in values.items():
            rows = table[table["subject"].astype(str) == str(unit)]
            out[str(unit)] = float(cmr.cmr2_log_likelihood(rows, params, session="session").attrs["total_logl"])
        return out

    units = tuple(str(s) for s in pd.unique(table["subject"]))
    return FitExample("cmr2", "cmr2.md two simulated subjects", table, spec, units, model.free, model.bounds,
                      fit, score, lambda unit, x: model.as_dict(x))


# --- network: cymr's test_dist_cmr_fit ----------------------------------------------------------

#: cymr 0.14's ``sample_data("sample1")`` (the columns its fit tests use), with ``list`` = ``subject``
#: as its tests set it
SAMPLE1 = """subject,list,trial_type,position,item,item_index
1,1,study,1,absence,0
1,1,study,2,hollow,1
1,1,study,3,pupil,2
1,1,recall,1,hollow,1
1,1,recall,2,pupil,2
1,1,recall,3,empty,
2,2,study,1,fountain,3
2,2,study,2,piano,4
2,2,study,3,pillow,5
2,2,recall,1,pillow,5
2,2,recall,2,fountain,3
2,2,recall,3,pillow,5
"""

#: the items and category vectors of cymr's CMR-D tests
SAMPLE1_ITEMS = np.array(["absence", "hollow", "pupil", "fountain", "piano", "pillow"])
SAMPLE1_CATEGORY = np.array([[1, 0, 1, 1, 0, 1], [0, 1, 0, 0, 1, 0]]).T


def sample1() -> pd.DataFrame:
    """cymr's sample1 data as its fit tests use them (two subjects, one three-item list each)."""
    table = pd.read_csv(StringIO(SAMPLE1))
    table["item_index"] = table["item_index"].astype("Int64").astype(float)
    return table


def network_example() -> FitExample:
    """cymr's ``test_dist_cmr_fit`` (docs/cmr-features.md): ``B_enc`` of a localist network, per subject."""
    data = sample1()
    patterns = {"items": SAMPLE1_ITEMS, "vector": {"loc": np.eye(6), "cat": SAMPLE1_CATEGORY},
                "similarity": {"loc": np.eye(6), "cat": SAMPLE1_CATEGORY @ SAMPLE1_CATEGORY.T}}
    region = {(("task", "item"), ("task", "item")): "Afc + Dfc * loc"}
    config = cmr.NetworkConfig(weights={"fc": region, "cf": region})
    fixed = {"B_rec": 0.8, "B_start": 0, "Afc": 0, "Dfc": 1, "Lfc": 1, "Lcf": 1, "P1": 0, "P2": 1, "T": 10,
             "X1": 0.05, "X2": 1}
    spec = cmr.NetworkFitSpec(["B_enc"], fixed, bounds={"B_enc": (0, 1)}, config=config, patterns=patterns)
    model = spec._model

    def fit(**options):
        return cmr.fit_network(data, spec, **{"rng": 1, **options})

    def score(values):
        out = {}
        for unit, params in values.items():
            rows = data[data["subject"].astype(str) == str(unit)]
            out[str(unit)] = float(cmr.network_log_likelihood(rows, params, config=config,
                                                              patterns=patterns).attrs["total_logl"])
        return out

    return FitExample("network", "cymr test_dist_cmr_fit", data, spec, ("1", "2"), model.free, model.bounds,
                      fit, score, lambda unit, x: {**fixed, **dict(zip(model.free, map(float, x)))})


EXAMPLES = {"semantic": semantic_example, "cmr2": cmr2_example, "network": network_example}


def example(family: str) -> FitExample:
    """The documented example of ``family`` (a key of :data:`EXAMPLES`)."""
    if family not in EXAMPLES:
        raise ParameterError(f"no documented fitting example of family {family!r}; known: "
                             f"{', '.join(EXAMPLES)}")
    return EXAMPLES[family]()


def load_reference() -> pd.DataFrame:
    """The best known maximum per family and unit: ``family``, ``example``, ``unit``, ``logl``,
    ``found_by`` and one column per free parameter (empty where a family does not free it)."""
    text = resources.files("icl_cmr.data").joinpath(REFERENCE_FILE).read_text()
    table = pd.read_csv(StringIO(text), comment="#", dtype={"unit": str})
    return table
