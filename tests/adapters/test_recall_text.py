"""Scoring a language model's own recall: prose is never a recall, decoding loops stop and are counted."""
from __future__ import annotations

import pytest

import cmr
from icl_cmr.adapters.recall_text import (LOOP_PERIODS, LOOP_REPEATS, LOOP_RUN, NEIGHBOUR_WORDS, find_loop,
                                          parse_recall, recall_table)

# "list" and "words" are studied: prose around them must not recall them
STUDY = ["hat", "back", "list", "words", "duck", "Sheriff"]


@pytest.mark.parametrize("text, items, n_filler", [
    # headers: a segment the answer follows with a colon introduces the recalls
    ("Here is the list of words:\nhat, back", ["hat", "back"], 1),
    ("Here is the list of words: hat, back", ["hat", "back"], 1),
    ("Here are the words from the list:\n1. hat\n2. back", ["hat", "back"], 1),
    ("My list:\n- hat\n- back", ["hat", "back"], 1),
    ("The words: hat", ["hat"], 1),
    ("Word list: hat", ["hat"], 1),
    ("Sure! Here is the list:\n\nhat", ["hat"], 2),                 # "Sure" is a sentence of its own
    ("The list:", [], 1),
    ("Here are the items in order:\nhat", ["hat"], 1),            # a header is no intrusion either
    # sentences that hold a studied word
    ("Here is the list of words\nhat", ["hat"], 1),
    ("The duck was on the list, back", ["back"], 1),
    ("I remember the words on the list.\nhat", ["hat"], 1),
    ("I will write the list in order from memory\nhat\nback", ["hat", "back"], 1),
    ("I think the sheriff was one of them, duck", ["duck"], 1),
    # markers, quotes, case and trailing punctuation stay recalls
    ("1. hat\n2. back\n3) list", ["hat", "back", "list"], 0),
    ("- hat\n* back\n\u2022 duck", ["hat", "back", "duck"], 0),
    ('"hat", \'back\', \u201cduck\u201d', ["hat", "back", "duck"], 0),
    ("HAT, Back, sHeRiFf", ["hat", "back", "Sheriff"], 0),
    ("hat.\nback!\nduck?\nlist...", ["hat", "back", "duck", "list"], 0),
    ("Hat; List; Words.", ["hat", "list", "words"], 0),
    # an item with up to NEIGHBOUR_WORDS words beside it is still a recall
    ("the hat, a red back, my list", ["hat", "back", "list"], 0),
    ("hat back duck", ["hat", "back", "duck"], 0),
])
def test_prose_is_never_a_recall(text, items, n_filler):
    parsed = parse_recall(text, STUDY)
    assert (parsed.items, parsed.n_filler) == (items, n_filler)
    assert parsed.n_intrusions == 0 and parsed.n_correct == len(items)


def test_a_header_no_longer_than_an_item_is_read_as_any_segment():
    # small models write every recalled word followed by a colon
    parsed = parse_recall("Sheriff:\n\nHat:\n\nzebra:\n\nlist:", STUDY)
    assert parsed.items == ["Sheriff", "hat", "zebra", "list"]
    assert (parsed.n_correct, parsed.n_intrusions, parsed.n_filler) == (3, 1, 0)
    # the bound is the longest item: with a three-word item, a three-word header is an item's length
    study = ["new york city", "hat"]
    assert parse_recall("New York City:\nhat", study).items == ["new york city", "hat"]
    parsed = parse_recall("The city hall:\nhat", study)  # as long as an item: an intrusion, as without the colon
    assert parsed.items == ["city hall", "hat"] and parsed.n_intrusions == 1 and parsed.n_filler == 0
    assert parsed.n_extra_words == 1  # the leading determiner
    parsed = parse_recall("The city list:\nhat", study)  # "list" is a prose word: never an intrusion
    assert parsed.items == ["hat"] and parsed.n_intrusions == 0 and parsed.n_filler == 1
    parsed = parse_recall("Here is my list:\nhat", study)
    assert parsed.items == ["hat"] and parsed.n_filler == 1


def test_header_before_the_first_word_is_not_a_backward_first_recall():
    study = ["robber", "list", "hat", "back"]
    events = cmr.from_table(recall_table([study], ["Here is the list of words:\nrobber, list, hat, back"], "m|greedy|0"))
    assert events["recalls"].values.tolist() == [[1, 2, 3, 4]]  # "list" once, from position 2, not first


def test_the_neighbour_bound_follows_the_longest_item():
    assert NEIGHBOUR_WORDS == 2
    # a three-word item with two neighbours is a recall; with three it is prose
    study = ["new york city", "hat"]
    assert parse_recall("all of new york city", study).items == ["new york city"]
    parsed = parse_recall("we loved new york city a lot", study)
    assert parsed.items == [] and parsed.n_filler == 1 and parsed.n_extra_words == 0
    # without a studied item, the intrusion bound is the longest item (the pool's, when given)
    assert parse_recall("san francisco", ["hat", "back"]).n_filler == 1
    parsed = parse_recall("san francisco", ["hat", "back"], max_intrusion_words=2)
    assert parsed.items == ["san francisco"] and parsed.n_intrusions == 1


@pytest.mark.parametrize("items, keep, period", [
    ([], 0, 0),
    (["a"], 1, 0),
    (["a", "a"], 2, 0),                                             # two copies are a repeat, not a loop
    (["a", "a", "a"], 1, 1),
    (["x", "a", "b", "a", "b"], 5, 0),
    (["a", "b", "a", "b", "a", "b"], 2, 2),
    (["x", "a", "b", "a", "b", "a", "b", "a"], 3, 2),               # a final partial copy belongs to the loop
    (["a", "b", "c"] * 3, 3, 3),
    (["x", "y", "a", "b", "c", "d"] * 1 + ["a", "b", "c", "d"] * 2, 6, 4),
    (["a", "b", "c", "d", "e"] * 3, 5, 5),                          # past LOOP_PERIODS: a second pass
    (["a", "b", "c", "d", "e", "a", "b", "c"], 5, 5),               # a second pass needs LOOP_RUN items only
    (["a", "b", "c", "d", "e", "a", "b"], 7, 0),                    # two are a repeat
    (["x", "a", "b", "c", "a", "b", "c", "y"], 4, 3),               # new items after a loop's start stay
    (["a", "b", "a", "b", "b", "b"], 4, 1),                         # the smallest period that fits
])
def test_find_loop_by_hand(items, keep, period):
    assert (LOOP_PERIODS, LOOP_REPEATS, LOOP_RUN) == (4, 3, 3)
    assert find_loop(items) == (keep, period)


def test_loop_items_are_neither_repeats_nor_intrusions():
    parsed = parse_recall("duck, hat, back, hat, back, hat, back, hat, back, hat", STUDY)
    assert parsed.items == ["duck", "hat", "back"]
    assert parsed.counts() == dict(n_correct=3, n_repeats=0, n_intrusions=0, n_extra_words=0, n_filler=0,
                                   n_case_changed=0, n_loop=7, loop_period=2)
    # a loop of intrusions keeps its first block as intrusions
    parsed = parse_recall("hat, zebra, yak, zebra, yak, zebra, yak", STUDY)
    assert parsed.items == ["hat", "zebra", "yak"] and (parsed.n_intrusions, parsed.n_loop) == (2, 4)
    # repeats before a loop stay repeats; a loop's extra words are not counted
    parsed = parse_recall("hat, back, hat, the duck, the duck, the duck", STUDY)
    assert parsed.items == ["hat", "back", "hat", "duck"]
    assert (parsed.n_repeats, parsed.n_loop, parsed.loop_period, parsed.n_extra_words) == (1, 2, 1, 1)


def test_loops_reach_the_table_and_the_events():
    lists = [["hat", "back", "duck"], ["hat", "back", "duck"]]
    table = recall_table(lists, ["hat, back, hat, back, hat, back", "duck, hat, duck"], "m|greedy|0")
    assert {"n_loop", "loop_period"} <= set(table.columns)
    per_list = table.groupby("list")[["n_repeats", "n_loop", "loop_period"]].first()
    assert per_list.to_dict("list") == dict(n_repeats=[0, 1], n_loop=[4, 0], loop_period=[2, 0])
    events = cmr.from_table(table)
    assert events["recalls"].values.tolist() == [[1, 2, 0], [3, 1, 3]]  # 0 pads the shorter recall sequence


# --- the loop stop during batched generation --------------------------------------------------


def _scripted(tiny, monkeypatch, scripts, pieces):
    """Make generation write ``scripts`` (one token list per row) step by step as transformers does:
    stopping criteria after every token, a finished row padded. ``pieces`` spells token ids."""
    import torch

    from icl_cmr.adapters.lm import interventions

    plain = interventions.plain_model(tiny.bridge)
    steps = []

    def generate(input_ids, *, stopping_criteria, eos_token_id, pad_token_id, max_new_tokens, **options):
        unfinished = torch.ones(input_ids.shape[0], dtype=torch.bool)
        for step in range(max_new_tokens):
            wanted = torch.tensor([s[step] if step < len(s) else eos_token_id for s in scripts])
            token = torch.where(unfinished, wanted, torch.tensor(pad_token_id))
            input_ids = torch.cat([input_ids, token[:, None]], dim=1)
            unfinished &= token != eos_token_id
            for criterion in stopping_criteria:
                unfinished &= ~criterion(input_ids, None)
            steps.append(unfinished.tolist())
            if not unfinished.any():
                break
        return input_ids

    def batch_decode(ids, skip_special_tokens=True):
        return ["".join(pieces.get(int(i), "") for i in row) for row in ids]

    monkeypatch.setattr(plain, "generate", generate)
    monkeypatch.setattr(tiny.tokenizer, "batch_decode", batch_decode)
    return steps


def test_generation_stops_a_looping_row_and_leaves_the_others_whole(tiny, monkeypatch):
    from icl_cmr.adapters.lm import recall_task as task

    vocab = tiny.tokenizer.get_vocab()
    eos = tiny.tokenizer.eos_token_id
    words = ["bab", "bac", "bad", "baf", "bag", "bah"]
    ids = {w: vocab["\u0120" + w] for w in words}
    comma, comma_ba = vocab["x"], vocab["yo"]  # spelled "," and ", ba" (a token that starts the next item)
    pieces = {**{i: " " + w for w, i in ids.items()}, comma: ",", comma_ba: ", ba"}
    bab, bac, bad, baf = ids["bab"], ids["bac"], ids["bad"], ids["baf"]
    loop = [bab, comma, bac, comma, bab, comma, bac, comma, bab, comma, bac, comma_ba, ids["bag"]] + [bab] * 20
    whole = [bad, comma, bab, comma, bad, comma, bab, comma, baf, comma, bac, eos]  # two copies: no loop
    single = [baf, comma, baf, comma, baf, comma] + [baf] * 20  # period 1: stops at the third copy
    lists = [words[:5]] * 3
    steps = _scripted(tiny, monkeypatch, [loop, whole, single], pieces)
    answers = task.generate_answers(tiny, lists, batch_size=3, max_new_tokens=30)
    assert answers == [" bab, bac, bab, bac, bab, bac,", " bad, bab, bad, bab, baf, bac", " baf, baf, baf,"]
    # the looping rows stop at the token that completes the loop; the whole row runs to its end of turn
    assert [s[0] for s in steps].index(False) == 11 and [s[2] for s in steps].index(False) == 5
    assert [s[1] for s in steps].index(False) == len(whole) - 1 and len(steps) == len(whole)

    events, _ = task.recall_events(tiny, lists, batch_size=3, max_new_tokens=30)
    assert events["n_loop"].values.tolist() == [4, 0, 2] and events["loop_period"].values.tolist() == [2, 0, 1]
    assert events["n_repeats"].values.tolist() == [0, 2, 0] and int(events["n_intrusions"].sum()) == 0
    # the events keep what was parsed and what was cut off; together they are the generated text
    assert events["answer"].values.tolist() == answers
    assert events["answer_cut"].values.tolist() == [" ba", "", ""]  # the start of an item after the loop stop


def test_summary_and_report_count_loops(tiny, monkeypatch):
    from icl_cmr.adapters.lm import recall_task as task
    from icl_cmr.analyses.memory.llm_recall import recall_summary, report_section

    vocab = tiny.tokenizer.get_vocab()
    words = ["bab", "bac", "bad", "baf"]
    ids = {w: vocab["\u0120" + w] for w in words}
    pieces = {**{i: " " + w for w, i in ids.items()}, vocab["x"]: ","}
    comma = vocab["x"]
    loop = [ids["bab"], comma, ids["bac"], comma] * 4
    plain = [ids["bab"], comma, ids["bac"], comma, ids["bad"], tiny.tokenizer.eos_token_id]
    _scripted(tiny, monkeypatch, [loop, plain], pieces)
    events, _ = task.recall_events(tiny, [words, words], batch_size=2, max_new_tokens=20)
    summary = recall_summary(events)
    assert summary["lists_with_loop"] == 1 and summary["per_list"]["n_loop"] == 2.0
    assert summary["per_list"]["n_repeats"] == 0.0
    assert "1 of 2 answers ended in a decoding loop" in report_section(summary)[2]
    del summary["lists_with_loop"]  # a summary written before loops were counted still reports
    assert "decoding loop" not in report_section(summary)[2]


def test_a_model_that_mostly_intrudes_is_a_result(tiny, monkeypatch):
    from icl_cmr.adapters.lm import recall_task as task

    vocab = tiny.tokenizer.get_vocab()
    words = sorted(w[1:] for w in vocab if w.startswith("\u0120") and w[1:].isalpha())
    comma = vocab["x"]
    pieces = {**{vocab["\u0120" + w]: " " + w for w in words}, comma: ","}
    studied, other = words[:4], words[10:30]  # 20 distinct words never studied: no loop, only intrusions
    script = [t for w in [studied[0], *other] for t in (vocab["\u0120" + w], comma)] + [tiny.tokenizer.eos_token_id]
    _scripted(tiny, monkeypatch, [script] * 6, pieces)
    events, _ = task.recall_events(tiny, [studied] * 6, batch_size=6, max_new_tokens=len(script))
    assert events["n_intrusions"].values.tolist() == [20] * 6 and events["n_correct"].values.tolist() == [1] * 6
