"""The language model as a free-recall subject: parsing hand-written answers, generation, events."""
from __future__ import annotations

import numpy as np
import pytest

import cmr
from cmr.errors import ParameterError, RecallDataError
from icl_cmr.adapters.recall_text import parse_recall, recall_table

STUDY = ["duck", "peal", "lipstick", "badge", "robber", "New York"]


def test_numbered_list_with_preamble():
    text = "Sure! Here are the words I remember:\n1. badge\n2) Duck\n3. robber."
    parsed = parse_recall(text, STUDY)
    assert parsed.items == ["badge", "duck", "robber"]
    # "Sure" and the header are two prose segments
    assert (parsed.n_correct, parsed.n_filler, parsed.n_intrusions, parsed.n_case_changed) == (3, 2, 0, 1)


def test_commas_bullets_quotes_and_and():
    parsed = parse_recall('* "peal", lipstick; NEW YORK and duck', STUDY)
    assert parsed.items == ["peal", "lipstick", "New York", "duck"]
    assert parsed.n_case_changed == 1  # only NEW YORK differs from the studied spelling


def test_extra_words_repeats_and_intrusions():
    parsed = parse_recall("the duck, badge, duck, zebra, a red lipstick, badge", STUDY)
    assert parsed.items == ["duck", "badge", "duck", "zebra", "lipstick", "badge"]
    assert (parsed.n_correct, parsed.n_repeats, parsed.n_intrusions, parsed.n_extra_words) == (3, 2, 1, 3)


def test_long_prose_is_filler_not_intrusion():
    parsed = parse_recall("I will write the words in order from the list.\nrobber", STUDY)
    assert parsed.items == ["robber"] and parsed.n_filler == 1 and parsed.n_intrusions == 0
    # several studied items inside one segment are all recalls, in order
    assert parse_recall("duck peal robber", STUDY).items == ["duck", "peal", "robber"]


def test_parse_rejects_bad_study_lists():
    with pytest.raises(ParameterError):
        parse_recall("duck", ["duck", "Duck"])
    with pytest.raises(ParameterError):
        parse_recall("duck", [])


def test_table_to_events_matches_psifr():
    psifr = pytest.importorskip("psifr.fr")
    lists = [STUDY, ["alpha", "beta", "gamma", "delta"]]
    answers = ["1. badge\n2. robber\n3. robber\n4. zebra\n5. duck", "beta, gamma, alpha, delta, omega"]
    table = recall_table(lists, answers, "m|greedy|0")
    events = cmr.from_table(table)
    cmr.validate(events)
    assert events["recalls"].values.tolist() == [[4, 5, 5, -1, 1], [2, 3, 1, 4, -1]]
    ours = cmr.lag_crp(events, by="subject")
    merged = psifr.merge_free_recall(table[["subject", "list", "trial_type", "position", "item"]])
    theirs = psifr.lag_crp(merged)
    for lag, row in theirs.reset_index().set_index("lag").iterrows():
        if lag in ours["lag"].values:
            got = ours.sel(lag=lag).isel(subject=0)
            assert int(got["actual"]) == row["actual"] and int(got["possible"]) == row["possible"]


def test_table_rejects_mismatched_answers():
    with pytest.raises(RecallDataError):
        recall_table([STUDY], [], "m")


def test_generation_on_tiny_model(tiny):
    from icl_cmr.adapters.lm import recall_task as task

    words = [w.strip("Ġ") for w in tiny.tokenizer.get_vocab() if w.startswith("Ġ") and w[1:].isalpha()]
    lists = task.study_lists(sorted(words), n_lists=3, list_length=5, rng=0)
    greedy = task.generate_answers(tiny, lists, batch_size=2, max_new_tokens=6)
    assert len(greedy) == 3 and greedy == task.generate_answers(tiny, lists, batch_size=3, max_new_tokens=6)
    sampled = [task.generate_answers(tiny, lists, decoding="sample", rng=s, batch_size=3, max_new_tokens=6, trim=False)
               for s in (1, 1, 2)]
    assert sampled[0] == sampled[1] and sampled[0] != sampled[2]
    everything = [(layer, head) for layer in range(2) for head in range(4)]
    ablated = task.generate_answers(tiny, lists, decoding="sample", rng=1, batch_size=3, max_new_tokens=6, trim=False,
                                    heads=everything)
    assert any(sampled[0]) and ablated != sampled[0]
    events, table = task.recall_events(tiny, lists, decoding="sample", seeds=[0, 1], max_new_tokens=6)
    cmr.validate(events)
    assert sorted(set(events["subject"].values)) == ["tiny-llama|sample-T0.7|0", "tiny-llama|sample-T0.7|1"]
    assert events["n_correct"].dims == ("trial",) and len(table) >= 2 * 3 * 5
    with pytest.raises(ParameterError):
        task.generate_answers(tiny, lists, decoding="beam")


@pytest.mark.parametrize("architecture", ["llama", "gpt2"])
def test_generation_runs_on_a_plain_copy_equal_to_the_bridge_without_cache(tl, architecture):
    """The plain model (shared weights, key-value cache, heads zeroed at the output projection's
    input) gives the bridge's logits and greedy tokens, the bridge recomputing everything with
    ``hook_z`` zeroed and no cache (the bridge's own cache is not kept under transformers >= 5.24)."""
    import torch

    from icl_cmr.adapters.lm import interventions
    from icl_cmr.adapters.lm.recall_task import zero_ablation_hooks

    tiny = tl.tiny_model(rng=1, architecture=architecture)
    bridge = tiny.bridge
    plain = interventions.plain_model(bridge)
    assert plain is not None and interventions.plain_model(bridge) is plain
    assert all(p.data_ptr() in {q.data_ptr() for q in bridge.parameters()} for p in plain.parameters())  # no copy
    ids = torch.randint(5, 60, (2, 12), generator=torch.Generator().manual_seed(0))
    options = dict(attention_mask=torch.ones_like(ids), max_new_tokens=10, do_sample=False, pad_token_id=0)
    for heads in ([], [(0, 1), (1, 2), (1, 3)]):
        with torch.no_grad():
            with interventions.zeroed_heads(bridge, plain, heads):
                ours = plain(ids).logits
                generated = plain.generate(input_ids=ids, use_cache=True, **options)
            with bridge.hooks(fwd_hooks=zero_ablation_hooks(heads)):
                reference = bridge.original_model(ids).logits
                expected = bridge.original_model.generate(input_ids=ids, use_cache=False, **options)
        torch.testing.assert_close(ours, reference, rtol=0, atol=1e-4)
        assert torch.equal(generated, expected), heads
    with pytest.raises(ParameterError, match="heads must lie in layers 0..1"):
        with interventions.zeroed_heads(bridge, plain, [(2, 0)]):
            pass


def test_degenerate_rows_by_hand():
    from icl_cmr.adapters.lm.recall_task import DEGENERATE_RUN, degenerate_rows

    eos = 0
    rows = np.array([
        [5] + [7] * 19,                              # "The-----...": one token fills the answer
        [5, 6, 8, 6, 8, 6, 8, 6, 8, 6, 8, 6, 8, 6, 8, 6, 8, 6, 8, 6],  # a loop of two items: scored as repeats
        [5, 6] + [7] * (DEGENERATE_RUN - 1) + [eos] * 11,  # a run shorter than DEGENERATE_RUN
        [5] + [7] * DEGENERATE_RUN + [eos] * 11,     # ... and one that reaches it, before the end of turn
        [eos] * 20,                                   # an empty answer
    ])
    assert degenerate_rows(rows, eos).tolist() == [True, False, False, True, False]


def _fake_generate(plain, monkeypatch, new_tokens):
    """Make ``plain.generate`` append ``new_tokens`` to every row (what a broken library would write)."""
    import torch

    def generate(input_ids, **options):
        tail = torch.as_tensor(new_tokens, dtype=torch.long).expand(input_ids.shape[0], -1)
        return torch.cat([input_ids, tail], dim=1)

    monkeypatch.setattr(plain, "generate", generate)


def test_an_intact_model_writing_degenerate_answers_is_an_error(tl, monkeypatch):
    from icl_cmr.adapters.lm import recall_task as task
    from icl_cmr.adapters.lm import interventions
    from icl_cmr.adapters.errors import ModelOutputError

    tiny = tl.tiny_model(rng=2)
    vocab = tiny.tokenizer.get_vocab()
    words = sorted(w.strip("Ġ") for w in vocab if w.startswith("Ġ") and w[1:].isalpha())
    lists = task.study_lists(words, n_lists=3, list_length=5, rng=0)
    plain = interventions.plain_model(tiny.bridge)
    _fake_generate(plain, monkeypatch, [vocab["Ġ" + lists[0][0]]] + [vocab["Ġ" + words[-1]]] * 15)
    with pytest.raises(ModelOutputError, match="degenerate answer to every one of 3 list.*transformers"):
        task.generate_answers(tiny, lists, max_new_tokens=16)
    # with heads ablated, such output can be the ablation's effect: it is a result
    assert len(task.generate_answers(tiny, lists, max_new_tokens=16, heads=[(0, 0)])) == 3


def test_an_instruction_tuned_model_that_recalls_nothing_is_an_error(tl, monkeypatch):
    from icl_cmr.adapters.lm import recall_task as task
    from icl_cmr.adapters.lm import interventions
    from icl_cmr.adapters.errors import ModelOutputError

    tiny = tl.tiny_model(rng=3)
    vocab = tiny.tokenizer.get_vocab()
    words = sorted(w.strip("Ġ") for w in vocab if w.startswith("Ġ") and w[1:].isalpha())
    lists = task.study_lists(words[:20], n_lists=2, list_length=4, rng=0)
    plain = interventions.plain_model(tiny.bridge)
    _fake_generate(plain, monkeypatch, [vocab["Ġ" + words[-1]], vocab["Ġ" + words[-2]]])  # two words never studied
    events, _ = task.recall_events(tiny, lists, max_new_tokens=2)  # a base model (no chat template) may recall nothing
    assert int(events["n_correct"].sum()) == 0
    monkeypatch.setattr(tiny.tokenizer, "chat_template", "{% for m in messages %}{{ m['content'] }}{% endfor %}",
                        raising=False)
    with pytest.raises(ModelOutputError, match="instruction-tuned model, recalled no studied word on any of 2"):
        task.recall_events(tiny, lists, max_new_tokens=2)
    events, _ = task.recall_events(tiny, lists, max_new_tokens=2, heads=[(1, 0)])  # ablated: a result
    assert int(events["n_correct"].sum()) == 0


def test_recall_measures_by_hand():
    from icl_cmr.analyses.memory.llm_recall import recall_measures

    lists = [["a", "b", "c", "d", "e", "f"], ["a", "b", "c", "d", "e", "f"]]
    # list 1: 1 2 3 6 5 (lags +1, +1, +3, -1); list 2: 4, an intrusion, a repeat (no valid transition)
    events = cmr.from_table(recall_table(lists, ["a, b, c, f, e", "d, zebra, d"], "m|greedy|0"))
    measures = recall_measures(events)
    np.testing.assert_allclose(measures["crp_forward"].values, [2 / 3, np.nan])  # 3 -> 6 could have gone to 4
    np.testing.assert_allclose(measures["crp_backward"].values, [1 / 1, np.nan])  # from 6 only 5 is left at -1
    np.testing.assert_allclose(measures["forward_share"].values, [3 / 4, np.nan])
    np.testing.assert_allclose(measures["n_correct"].values, [5, 1])
    np.testing.assert_allclose(measures["recall_early"].values, [1.0, 0.0])
    np.testing.assert_allclose(measures["recall_late"].values, [1.0, 0.0])


def test_recall_ablation_on_tiny_model(tiny):
    from icl_cmr.analyses.memory import llm_recall
    from icl_cmr.analyses.causal import recall

    sets = {"top_cmr": [(1, 0)], "top_induction": [(1, 1)], "random_0": [(0, 2)], "random_1": [(0, 3)]}
    base, _ = llm_recall.model_recall(tiny, n_lists=3, list_length=4, rng=5, max_new_tokens=8)
    result = recall.recall_ablation(tiny, sets, n_lists=3, list_length=4, rng=5, baseline=base)
    cmr.validate(result)
    assert list(result["head_set"].values) == ["none", *sets]
    assert "top_cmr_vs_random" in result["comparison"].values
    assert np.all(result["effect"].sel(head_set="none").fillna(0).values == 0)
    table = recall.ablation_table(result)
    assert {"comparison", "measure", "t_pvalue", "n_lists"} <= set(table.columns)
    with pytest.raises(ParameterError):
        recall.recall_ablation(tiny, sets, n_lists=3, list_length=4, rng=6, baseline=base)
    summary = llm_recall.recall_summary(base, ablation=result)
    assert summary["lists"] == 3 and "top_cmr_vs_random" in summary["ablation"]["comparisons"]
    assert llm_recall.report_section(summary)[0].startswith("## The language model")


@pytest.mark.parametrize("argv, message", [
    (["--seeds", "0,x", "-o", "out.csv"], "--seeds must be comma-separated integers"),
    (["-o", "out.txt"], ".txt"),
    (["--pool", "no_such_words.txt", "-o", "out.csv"], "word pool"),
    (["--ablate", "L1H", "-o", "out.csv"], "heads must look like"),
])
def test_recall_lm_command_rejects_bad_input_in_one_line(argv, message, tmp_path, monkeypatch, capsys):
    from icl_cmr.analyses.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["recall-lm", *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and not list(tmp_path.iterdir())


def test_recall_vs_humans_figure():
    pytest.importorskip("matplotlib")
    from icl_cmr.analyses.plots import recall_vs_humans
    from icl_cmr.analyses.plots.llm_recall import lists_as_subjects

    lists = [["a", "b", "c", "d", "e", "f"]] * 3
    model = cmr.from_table(recall_table(lists, ["a, b, c", "b, c, d, e", "f, e"], "m|greedy|0"))
    humans = cmr.from_table(recall_table(lists, ["c, b", "a, f", "d, e, f"], ["s1", "s2", "s2"]))
    assert len(set(lists_as_subjects(model)["subject"].values)) == 3  # one unit per list
    fig = recall_vs_humans(model, humans, labels=("model", "people"), lags=2)
    assert len(fig.axes) == 3


def test_docs_python_examples_run():
    import re

    from tests.conftest import REPO_ROOT

    text = (REPO_ROOT / "docs" / "llm-recall.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/llm-recall.md", "exec"), {})
