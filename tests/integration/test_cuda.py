"""Every model command on a CUDA GPU against the CPU, on the embedded SmolLM2 (skipped without a GPU).

``heads``, ``recall-lm``, ``composition --causal`` and ``ablate`` run twice through the command
line, once with ``--device cpu`` and once with ``--device cuda``, both in float32, and their
files are compared: lag profiles and head scores to 1e-5, next-token losses and the causal
drops to 1e-4, the model's recalled words exactly. ``ICL_CMR_TEST_DEVICE`` names another device
to hold against the CPU (``mps``, ``cuda:1``; ``cpu`` checks the test itself anywhere).
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from tests.conftest import require_smollm2

pytestmark = pytest.mark.integration

#: absolute and relative tolerance of profiles and scores (attention-derived), and of losses
SCORES = 1e-5
LOSSES = 1e-4


def _device() -> str:
    import torch

    wanted = os.environ.get("ICL_CMR_TEST_DEVICE")
    if wanted:
        return wanted
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here (ICL_CMR_TEST_DEVICE names another device to compare with the CPU)")
    return "cuda"


#: each command's arguments (small, real runs of the embedded model) and its outputs
COMMANDS = {
    "heads": (["heads", "--n-words", "40", "--n-prompts", "2", "--lags", "5", "--no-progress"], ["heads.nc"]),
    "recall": (["recall-lm", "--n-lists", "4", "--list-length", "8", "--max-new-tokens", "40"], ["recall.nc"]),
    "composition": (["composition", "--top", "2", "--n-words", "20", "--n-prompts", "2", "--n-baseline", "50",
                     "--causal", "{out}/causal.nc"], ["composition.nc", "causal.nc"]),
    "ablate": (["ablate", "--heads", "L18.H6,L17.H3,L17.H4", "--n-random", "3", "--n-matched", "0", "--n-passages",
                "3", "--mode", "zero"], ["ablate.nc"]),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """``{device: {file name: dataset}}`` of every command on the CPU and on the device under test."""
    require_smollm2()
    device = _device()
    from cmr.io import load_dataset
    from icl_cmr.analyses.cli import main

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    results = {}
    for where in ("cpu", device):
        out = tmp_path_factory.mktemp(where.replace(":", "_"))
        files = {}
        for name, (argv, outputs) in COMMANDS.items():
            argv = [a.format(out=out) for a in argv]
            code = main([*argv, "--device", where, "--dtype", "float32", "-o", str(out / outputs[0])])
            assert code == 0, f"icl-cmr {name} --device {where} failed"
            files.update({o: load_dataset(out / o) for o in outputs})
        results[where] = files
    return results["cpu"], results[device]


def _close(cpu, other, names, tolerance):
    for name in names:
        a, b = cpu[name].values, other[name].values
        assert a.shape == b.shape, name
        np.testing.assert_allclose(b, a, rtol=tolerance, atol=tolerance, equal_nan=True, err_msg=name)


def test_the_runs_record_their_device(runs):
    cpu, other = runs
    assert cpu["heads.nc"].attrs["device"] == "cpu"
    assert other["heads.nc"].attrs["device"].split(":")[0] == _device().split(":")[0]


def test_head_profiles_and_scores_agree(runs):
    cpu, other = runs
    _close(cpu["heads.nc"], other["heads.nc"],
           ["profile", "sem", "prob_profile", "prob_sem", "soft_crp", "soft_actual", "induction_score",
            "duplicate_token_score", "previous_token_score", "copying_score"], SCORES)
    _close(cpu["heads.nc"], other["heads.nc"], ["position_loss", "loss_first_copy", "loss_second_copy"], LOSSES)
    for name in ("n_samples", "soft_possible"):
        np.testing.assert_array_equal(other["heads.nc"][name].values, cpu["heads.nc"][name].values)


def test_the_model_recalls_the_same_words(runs):
    cpu, other = runs
    for name in ("recall_item", "recalls", "n_correct", "n_repeats", "n_intrusions"):
        np.testing.assert_array_equal(other["recall.nc"][name].values, cpu["recall.nc"][name].values, err_msg=name)
    assert int(cpu["recall.nc"]["n_correct"].sum()) > 0


def test_composition_scores_and_the_causal_test_agree(runs):
    cpu, other = runs
    _close(cpu["composition.nc"], other["composition.nc"], ["score", "excess", "baseline_mean", "baseline_sd"], SCORES)
    causal = ["base_induction", "induction_all", "drop_all", "induction_moved", "drop_moved", "profile",
              "profile_all", "profile_moved", "source_drop", "source_drop_moved", "value_drop_all",
              "value_drop_moved", "value_source_drop", "value_source_drop_moved"]
    _close(cpu["causal.nc"], other["causal.nc"], causal, LOSSES)
    for name in ("composition_class", "whole_output_class", "upstream"):
        np.testing.assert_array_equal(other["causal.nc"][name].values, cpu["causal.nc"][name].values, err_msg=name)


def test_ablation_losses_agree(runs):
    cpu, other = runs
    _close(cpu["ablate.nc"], other["ablate.nc"], ["icl_score", "loss_early", "loss_late", "baseline_icl_score",
                                                 "baseline_loss_early", "baseline_loss_late", "mean_effect"], LOSSES)
    for name in ("set_layer", "set_head"):  # the same random head sets
        np.testing.assert_array_equal(other["ablate.nc"][name].values, cpu["ablate.nc"][name].values)
