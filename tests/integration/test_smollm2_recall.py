"""SmolLM2-135M-Instruct as a free-recall subject: a real run's events against psifr."""
from __future__ import annotations

import numpy as np
import pytest

import cmr
from tests.conftest import require, require_smollm2

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def smollm2_recall():
    require_smollm2()
    from icl_cmr.adapters.lm.loading import load_model, set_threads
    from icl_cmr.analyses.memory.llm_recall import model_recall

    model = load_model("smollm2-135m", device="cpu")
    threads = set_threads(None)
    set_threads(1)  # one thread: two spin-waiting threads on a busy 2-core machine are many times slower
    try:
        return model_recall(model, n_lists=3, list_length=8, rng=3, max_new_tokens=40, batch_size=3)
    finally:
        set_threads(threads)


def test_real_events_validate_and_equal_psifr_when_exported(smollm2_recall):
    fr = require("psifr.fr")
    events, table = smollm2_recall
    cmr.validate(events)
    assert events["n_correct"].sum() > 0  # the model does recall studied words
    exported = cmr.to_table(events)
    merged = fr.merge_free_recall(exported)
    theirs = fr.lag_crp(merged).reset_index()
    ours = cmr.lag_crp(events, by="subject").isel(subject=0)
    for lag, actual, possible in theirs[["lag", "actual", "possible"]].itertuples(index=False):
        if lag == 0:
            continue
        assert int(ours["actual"].sel(lag=lag)) == actual and int(ours["possible"].sel(lag=lag)) == possible
    spc = fr.spc(merged).reset_index()
    np.testing.assert_allclose(cmr.spc(events, by="subject")["prob"].isel(subject=0).values, spc["recall"].values,
                               rtol=0, atol=1e-12)


def test_real_answers_are_kept_with_their_prompts_and_segments(smollm2_recall):
    events, table = smollm2_recall
    for t in range(events.sizes["trial"]):
        words = [str(w) for w in events["study_item"].values[t, :int(events["list_length"].values[t])]]
        assert all(w in str(events["prompt"].values[t]) for w in words)  # the exact text the model was given
        lines = str(events["answer_segments"].values[t]).splitlines()
        recalled = [line.split(": ", 1)[0] for line in lines if not line.startswith(("filler", "loop"))]
        n = int((events["recalls"].values[t] != 0).sum())
        assert recalled == [str(c) for c in events["recall_category"].values[t, :n]]
    per_list = table.drop_duplicates(["subject", "list"])
    assert per_list["answer"].tolist() == events["answer"].values.tolist()

