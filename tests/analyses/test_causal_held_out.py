"""ablate says when its top set was not ranked on held-out prompts."""
from __future__ import annotations

import json

import xarray as xr

from icl_cmr.analyses.commands import ablate


def _heads(seed):
    return xr.Dataset(attrs={"provenance": json.dumps({"prompt": {"seed": seed, "n_words": 100}})})


def _fits(seed):
    profiles = json.loads(_heads(seed).attrs["provenance"])
    return xr.Dataset(attrs={"provenance": json.dumps({"objective": "lsq", "profiles_provenance": json.dumps(profiles)})})


def test_the_prompt_seed_is_read_through_a_fit():
    assert ablate._prompt_seed(_fits(3)) == 3 and ablate._prompt_seed(_heads(3)) == 3
    assert ablate._prompt_seed(xr.Dataset()) is None
    assert ablate._prompt_seed(xr.Dataset(attrs={"provenance": "not json"})) is None


def test_a_top_set_ranked_on_the_reported_seed_is_flagged():
    assert ablate._shared_prompt_seed(_fits(0), None) == 0  # the default seed of icl-cmr heads
    assert ablate._shared_prompt_seed(_fits(2), _heads(2)) == 2  # the control's own prompts


def test_a_held_out_seed_is_not_flagged():
    assert ablate._shared_prompt_seed(_fits(1), None) is None
    assert ablate._shared_prompt_seed(_fits(1), _heads(0)) is None
    assert ablate._shared_prompt_seed(xr.Dataset(), None) is None  # nothing recorded: nothing said
