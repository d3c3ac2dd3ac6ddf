"""Recall parsing on the adversarial table of tests/adapters/data/recall_parse_cases.py, and the record it leaves.

Every row is one (answer, studied list, expected recalls, expected counts) case; the rows cover every
rule of :mod:`icl_cmr.adapters.recall_text` (headers with and without a colon, sentence frames, one-word
fillers, one-line numbered lists, period-separated recalls, markers, neighbours, intrusions, "and" and
items of several words, short loops and second passes, long hostile inputs) and real answers of
SmolLM2-135M-Instruct and gemma3-270m.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cmr
from cmr.errors import ParameterError, RecallDataError
from icl_cmr.adapters.recall_text import (CATEGORIES, COUNT_NAMES, FRAME_ENDS, LIST_TEXTS, PROSE_WORDS,
                                          find_loop, parse_recall, recall_dataset, recall_table,
                                          segments_text)
from tests.adapters.data.recall_parse_cases import CASES, L, W

LETTERS = dict(zip("crixfklp", COUNT_NAMES))


def _counts(text: str) -> dict:
    counts = dict.fromkeys(COUNT_NAMES, 0)
    for token in text.split():
        counts[LETTERS[token[0]]] = int(token[1:])
    return counts


def test_the_table_covers_every_rule():
    rules = {rule.split(" seed")[0] for rule, *_ in CASES}
    assert len(CASES) >= 80
    assert {"header colon", "header no colon", "frame", "filler word", "numbered line", "periods", "markers",
            "neighbours", "intrusions", "and", "short loop", "second pass", "hostile"} <= rules
    assert any(r.startswith("smollm2") for r in rules) and any(r.startswith("gemma3") for r in rules)


@pytest.mark.parametrize("rule, text, study, items, counts", CASES,
                         ids=[f"{i}-{rule}" for i, (rule, *_) in enumerate(CASES)])
def test_parse_table(rule, text, study, items, counts):
    parsed = parse_recall(text, study)
    assert parsed.items == items
    assert parsed.counts() == _counts(counts)
    # the record agrees with the counts: one category per recall and per segment
    assert len(parsed.raw) == len(parsed.categories) == len(items)
    kinds = [category for _, category, _ in parsed.segments]
    assert set(kinds) <= set(CATEGORIES)
    assert [c for c in kinds if c in ("recall", "repeat", "intrusion")] == parsed.categories
    assert (kinds.count("filler"), kinds.count("loop")) == (parsed.n_filler, parsed.n_loop)


def test_segments_name_what_was_read_and_how():
    text = "Sure! The words were river, zebra, river\nGoing back, river, zebra, river, zebra, river, zebra"
    parsed = parse_recall(text, W)
    # a block repeated three times up to the end: its first copy is read as usual, the others are the loop
    assert parsed.segments == [("Sure", "filler", ""), ("The words were", "filler", ""), ("river", "recall", "river"),
                               ("zebra", "intrusion", "zebra"), ("river", "repeat", "river"),
                               ("Going back", "filler", ""), ("river", "repeat", "river"),
                               ("zebra", "intrusion", "zebra")] + [("river", "loop", "river"),
                                                                   ("zebra", "loop", "zebra")] * 2
    assert segments_text(parsed).splitlines()[:3] == ["filler: Sure", "filler: The words were", "recall: river"]


def test_a_second_pass_is_a_loop_not_repeats():
    # four of the six lists of the demonstration run recite the list again from the top
    answer = ("Leopard, wire, map, japan, antelope, groom, sidel, shingle, hamburger, dictator, copier,\n\n"
              "Here's the corrected list:\n\nLeopard, wire, map, japan, antelope, groom, shingle, hamburger,")
    study = ["leopard", "wire", "map", "japan", "antelope", "groom", "shingle", "hamburger", "dictator", "copier"]
    parsed = parse_recall(answer, study)
    assert (parsed.n_repeats, parsed.n_intrusions, parsed.n_loop, parsed.loop_period) == (0, 1, 8, 11)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(L + ["zebra", "yak"]), max_size=30))
def test_loop_copies_only_repeat_earlier_items(items):
    start, period = find_loop(items)
    assert 0 <= start <= len(items) and (period == 0) == (start == len(items))
    parsed = parse_recall(", ".join(items), L)
    kept = [item for item in items[:start]] + [item for k, item in enumerate(items[start:], start)
                                               if item not in items[:k]]
    assert parsed.items == kept and parsed.n_loop == len(items) - len(kept)
    assert parsed.n_correct == len(set(kept) & set(L))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(list(" \n,.;:-and1)&'\"x") + ["river", "Romeo and Juliet", "Sure"]),
                max_size=40).map("".join))
def test_any_text_parses_and_accounts_for_every_segment(text):
    parsed = parse_recall(text, ["Romeo and Juliet", "river"])
    counts = parsed.counts()
    assert counts["n_correct"] + counts["n_repeats"] + counts["n_intrusions"] == len(parsed.items)
    assert all(raw and "\n" not in raw and ":" not in raw for raw, _, _ in parsed.segments)
    assert set(parsed.items) <= {"Romeo and Juliet", "river"} | {item for _, c, item in parsed.segments
                                                                  if c == "intrusion"}


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(sorted(PROSE_WORDS - set(W))), min_size=1, max_size=8),
       st.lists(st.sampled_from([" ", ", ", ". ", "! ", "\n", ": ", " - "]), min_size=8, max_size=8))
def test_prose_words_are_never_recalls_nor_intrusions(words, separators):
    text = "".join(word + separator for word, separator in zip(words, separators))
    parsed = parse_recall(text, W, max_intrusion_words=3)
    assert parsed.items == [] and parsed.n_filler >= 1
    # beside a studied item they make the segment prose too, unless they frame it ("were river")
    parsed = parse_recall(f"{words[0]} river", W)
    framed = words[0] in FRAME_ENDS
    assert parsed.items == (["river"] if framed else []) and parsed.n_filler == 1


def test_an_answer_must_be_text():
    with pytest.raises(ParameterError, match="the answer must be text; got float nan"):
        parse_recall(float("nan"), W)
    with pytest.raises(ParameterError, match="got NoneType"):
        recall_table([W], [None], "m|greedy|0")


def test_prompts_must_match_the_lists():
    with pytest.raises(RecallDataError, match="one prompt per studied list"):
        recall_table([W], ["river"], "m|greedy|0", prompts=["a", "b"])


# --- the record: prompt, answer and segments in the table, the events and their exports -----------------


def _recorded():
    lists = [W[:4], L[:5]]
    answers = ["Sure! The words were river, candle\n\nzebra, river", "drug, pebble, bacon, drug, pebble\x00bacon"]
    prompts = ["<|user|>Study this list of words:\nriver\ncandle\n\u00e9t\u00e9", "Study\tthis list:\ndrug"]
    return lists, answers, prompts, recall_table(lists, answers, "m|greedy|0", prompts=prompts)


def test_the_table_keeps_prompt_answer_and_every_segment():
    lists, answers, prompts, table = _recorded()
    assert {"raw", "category", *COUNT_NAMES, *LIST_TEXTS} <= set(table.columns)
    first = table.groupby("list")[list(LIST_TEXTS)].first()
    assert first["prompt"].tolist() == prompts and first["answer"].tolist() == answers
    assert first["answer_segments"][1].splitlines() == ["filler: Sure", "filler: The words were", "recall: river",
                                                        "recall: candle", "intrusion: zebra", "repeat: river"]
    recalls = table[table["trial_type"] == "recall"]
    assert recalls["category"].tolist() == ["recall", "recall", "intrusion", "repeat", "recall", "recall", "recall"]
    assert (table.loc[table["trial_type"] == "study", "category"] == "").all()


def test_the_events_keep_them_through_netcdf_and_export(tmp_path):
    lists, answers, prompts, table = _recorded()
    events = recall_dataset(table, source="test")
    for name in LIST_TEXTS:
        assert events[name].dims == ("trial",)
    assert events["prompt"].values.tolist() == prompts
    assert events["answer"].values.tolist() == [answers[0], answers[1].replace("\x00", "\ufffd")]  # NUL unstorable
    assert events["recall_category"].values[0].tolist() == ["recall", "recall", "intrusion", "repeat"]
    assert events["n_loop"].values.tolist() == [0, 3]
    assert events["recall_raw"].values[1].tolist()[:3] == ["drug", "pebble", "bacon"]
    assert events["answer_segments"].values[1].splitlines()[-1] == "loop: pebble\ufffdbacon"
    path = cmr.save_dataset(events, tmp_path / "recall.nc")
    back = cmr.load_dataset(path)
    for name in (*LIST_TEXTS, "recall_raw", "recall_category"):
        assert back[name].values.tolist() == events[name].values.tolist(), name
    # psifr's table keeps each recall's segment and category; a trial layout keeps the texts and counts
    psifr_table = cmr.to_dataframe(back)
    assert {"raw", "category"} <= set(psifr_table.columns)
    per_list = cmr.to_dataframe(back, layout="answer")
    assert per_list["answer"].tolist() == events["answer"].values.tolist()
    assert {*LIST_TEXTS, *COUNT_NAMES} <= set(per_list.columns)
    assert "answer_segments" in cmr.tables.left_out_line(back)
    assert np.array_equal(back["recalls"].values, events["recalls"].values)
