"""Generated recall text -> free-recall events: the scoring of a language model's recall.

A model that is asked to recall a studied word list answers in free text: a numbered list,
a comma-separated line, a sentence before the words ("Sure! Here are the words I remember:"),
words with extra words around them ("the duck"), repeated words, words that were never
studied, and often the whole list again. :func:`parse_recall` turns one such answer into an
ordered list of recalled items by these rules, applied in this order:

1. **Segments.** The text is cut at newlines, commas, semicolons, colons and bullets, then
   within each piece at sentence ends (``.``, ``!``, ``?``, the ellipsis character and dashes, asterisks,
   ``&``, ``|``, ``/`` between words), at inline list markers (``1.``, ``2)``: "1. River
   2. Candle" is two segments) and at the word "and" - but never inside a studied item:
   studied items are found in the word stream first, so "Romeo and Juliet" or "St. Louis"
   stay whole. Markers, quotes, brackets and punctuation are dropped and case is folded.
   Every step is one pass over the text (linear time, whatever its length).
2. **Prose words.** :data:`PROSE_WORDS` (pronouns, verbs such as "are" and "remember",
   interjections such as "sure", "okay", "well", and the words of the task: "list",
   "words", "items", "order") and contractions ("can't", "they're") mark prose: a segment
   that holds one (beside its studied items, or without any) is never a recall and never an
   intrusion. A studied item is always read as itself ("well" studied and written is a recall).
3. **Headers.** A segment the text follows with a colon and with more words than the longest
   item ("Here is the list of words:", "My list:") is prose. A shorter one is read as any
   segment: small models write each recalled word as "Detergent:" on its own line.
4. **Recalls.** The segment's words are scanned left to right for studied items (longest
   item first, so multi-word items match whole). If at most :data:`NEIGHBOUR_WORDS` (2) of
   its words lie outside those items and none is a prose word ("the duck", "a red
   lipstick"), each item is a recall and the other words count as ``extra_words``.
5. **Frames.** Otherwise, if the words before the first item end with a framing verb of
   :data:`FRAME_ENDS` ("The words were X", "Items I remember X") and the rest holds studied
   items with at most two determiners beside them ("The words were a Z"), the frame is prose
   and the rest is read by rule 4. Any other segment with studied items is prose ("The duck
   was on the list", "Here is the list of words" recall nothing, even with "list" studied).
6. **Intrusions.** A segment without a studied item is an intrusion when, after leading
   determiners (:data:`DETERMINERS`: "a zebra" is "zebra" with one extra word), it has at
   most ``max_intrusion_words`` words (default: the longest studied item's word count; pass
   the pool's longest item when the pool holds longer items than the list), no prose word
   and not only digits and single letters ("b" of a stray "</b>"); otherwise it is prose.
7. **Loops** (:func:`find_loop`), on the recalls and intrusions in output order: a block of
   1 to :data:`LOOP_PERIODS` (4) items repeated at least :data:`LOOP_REPEATS` (3) times in a
   row up to the end ("hat, back, hat, back, hat, back"), or a second pass: from the first
   place where :data:`LOOP_RUN` (3) distinct recalls repeat, in the same order, a run that
   already occurred ("drug, pebble, literature, ..., drug, pebble, literature": the list
   recited again from the top). From the loop's start on, every item that occurred before
   is a loop copy, counted as ``n_loop`` and neither a repeat nor an intrusion nor in the
   recall sequence; a new item there is read as usual. A language model that falls into a
   loop would otherwise repeat it until its token limit.

A repeat (an item recalled again outside a loop) stays in the sequence, as a human repeat
does in a psifr table; the analyses skip it as psifr does. Counts of every category are
returned, and every segment keeps its category (``recall``, ``repeat``, ``intrusion``,
``filler`` for prose, ``loop``), so nothing is dropped silently. Rows of a psifr long table
are built by :func:`recall_table` (with the prompt, the answer and its segments per list),
whose ``subject`` label is ``"model|decoding|seed"`` (one subject per model, decoding
setting and seed); :func:`recall_dataset` turns that table into an events dataset.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from cmr.checks import seed_of
from cmr.deprecation import renamed_keywords
from cmr.errors import ParameterError, RecallDataError
from cmr.events import from_table

__all__ = ["ParsedRecall", "normalise", "parse_recall", "find_loop", "recall_table", "recall_dataset",
           "segments_text", "subject_label", "COUNT_NAMES", "CATEGORIES", "LIST_TEXTS", "NEIGHBOUR_WORDS",
           "LOOP_PERIODS", "LOOP_REPEATS", "LOOP_RUN", "PROSE_WORDS", "FRAME_ENDS", "DETERMINERS"]

#: per-list counts of :class:`ParsedRecall` (and the period of a loop, 0 without one), in
#: the order tables and datasets report them
COUNT_NAMES = ("n_correct", "n_repeats", "n_intrusions", "n_extra_words", "n_filler", "n_case_changed", "n_loop",
               "loop_period")
#: the category of every segment of an answer (the first three are recalls in the sequence)
CATEGORIES = ("recall", "repeat", "intrusion", "filler", "loop")
#: per-list text columns of :func:`recall_table` (trial variables of :func:`recall_dataset`)
LIST_TEXTS = ("prompt", "answer", "answer_cut", "answer_segments")
#: words outside the studied items that a recall segment may hold ("the duck", "a red lipstick");
#: a segment with more is prose
NEIGHBOUR_WORDS = 2
#: a decoding loop repeats a block of 1 to LOOP_PERIODS items at least LOOP_REPEATS times in a row,
#: or repeats a run of LOOP_RUN distinct items in the same order (a second pass over the list)
LOOP_PERIODS = 4
LOOP_REPEATS = 3
LOOP_RUN = 3
#: words that never stand beside a recall nor make an intrusion: pronouns, verbs, interjections and
#: the words of the task and its instructions ("separated by commas"). Of the bundled pools only
#: "item", "list" and "well" (peers) are among them: studied, they are recalls; unstudied, they are
#: read as prose, not as intrusions
PROSE_WORDS = frozenset("""
    i me we us you it they them he him she her our your their its this that these those what which who
    is are was were be been being am have has had do does did could will would shall should may might must
    i'm i've i'll i'd it's that's here's there's let's what's they're we're you're
    remember remembered remembering recall recalled recalling think thought know knew see seen try tried
    write wrote written writing let go going gone get got repeat repeated listed given shown
    sure okay ok well yes yeah no not so here there now then also again please certainly sorry oh um uh
    hmm alright great thanks thank indeed just only
    words word items item list lists order answer memory original corrected following
    study studied read separated commas comma same
""".split())
#: framing verbs: "The words were X", "Items I remember X"
FRAME_ENDS = frozenset("are were is was include includes included including remember remembered recall "
                       "recalled contain contains contained".split())
#: determiners that may stand before an item or an intrusion ("the duck", "a zebra")
DETERMINERS = frozenset("a an the my some".split())

#: hard separators: line breaks of every kind (as str.splitlines), commas, semicolons, colons, bullets (and
#: their full-width forms); one character class, so one pass without backtracking
_HARD = re.compile(r"[\n\r\v\f\x1c-\x1e\x85\u2028\u2029,;:\u2022\u00b7\u3001\uff0c\uff1b\uff1a]+")
_WORD = re.compile(r"[^\W_]+(?:['\u2019-][^\W_]+)*")
_SOFT = frozenset(".!?\u2026-*+\u2013\u2014&|/\u3002\uff01\uff1f")
_CONTRACTIONS = ("n't", "'re", "'ve", "'ll", "'m", "'d")


def normalise(text: str) -> str:
    """Case-folded words of ``text`` joined by single spaces (punctuation and list markers dropped)."""
    words = _WORD.findall(str(text).casefold())
    marker = re.match(r"\s*[(\[]?\d+[.)\]]", str(text))  # a leading list marker "1." / "2)"
    return " ".join(words[1:] if marker and words and words[0].isdigit() else words)


@dataclass
class ParsedRecall:
    """One parsed answer.

    Attributes
    ----------
    items : list of str
        Recalled items in output order, studied items spelled as studied, intrusions as
        normalised text.
    raw : list of str
        The segment of the answer each recall came from (its words as written).
    categories : list of str
        ``recall``, ``repeat`` or ``intrusion`` per item.
    segments : list of (str, str, str)
        Every segment of the answer in order, as (text, category, item): category one of
        :data:`CATEGORIES`, item ``""`` for prose.
    n_correct, n_repeats, n_intrusions : int
        First recalls of studied items, recalls of an already recalled item, and recalls of
        items not on the list.
    n_extra_words : int
        Words next to an item in a segment ("the duck": 1).
    n_filler : int
        Prose segments (rules 2, 3, 5 and 6 of the module).
    n_case_changed : int
        Recalls of studied items whose case or punctuation differed from the studied spelling.
    n_loop : int
        Loop copies (:func:`find_loop`): not in ``items``, not counted as repeats or intrusions.
    loop_period : int
        The loop's period (its block's length, or the distance of a second pass to its first
        one); 0 without a loop.
    """

    items: list = field(default_factory=list)
    raw: list = field(default_factory=list)
    categories: list = field(default_factory=list)
    segments: list = field(default_factory=list)
    n_correct: int = 0
    n_repeats: int = 0
    n_intrusions: int = 0
    n_extra_words: int = 0
    n_filler: int = 0
    n_case_changed: int = 0
    n_loop: int = 0
    loop_period: int = 0

    def counts(self) -> dict:
        return {name: getattr(self, name) for name in COUNT_NAMES}


def _pieces(text: str, keys: dict, lengths):
    """(words, spans, matches, is_header) per segment: words case-folded, spans their (start, end) in
    ``text``, matches (first, stop, item) of studied items within the segment's words."""
    bounds = [0]
    for sep in _HARD.finditer(text):
        bounds += [sep.start(), sep.end()]
    bounds.append(len(text))
    for b in range(0, len(bounds), 2):
        start, stop = bounds[b], bounds[b + 1]
        header = b + 2 < len(bounds) and not {":", "\uff1a"}.isdisjoint(text[stop:bounds[b + 2]])
        found = [(m.start(), m.end(), m.group().casefold().replace("\u2019", "'"))
                 for m in _WORD.finditer(text, start, stop)]
        if not found:
            continue
        words = [w for _, _, w in found]
        within = {}  # word index -> (first, stop, item) of the studied item it belongs to
        i = 0
        while i < len(words):
            for n in lengths:
                if i + n <= len(words) and " ".join(words[i:i + n]) in keys:
                    for k in range(i, i + n):
                        within[k] = (i, i + n, keys[" ".join(words[i:i + n])])
                    i += n
                    break
            else:
                i += 1
        segments, current = [], []
        for k, (w_start, w_end, word) in enumerate(found):
            if k in within and within[k][0] < k:  # inside a studied item: never cut
                current.append(k)
                continue
            gap = text[found[k - 1][1] if k else start:w_start]
            after = text[w_end:found[k + 1][0] if k + 1 < len(found) else stop]
            marker = word.isdigit() and k not in within and after[:1] in (".", ")", "]")
            if current and (marker or (k not in within and word == "and") or not _SOFT.isdisjoint(gap)):
                segments.append(current)
                current = []
            if not marker and not (k not in within and word == "and"):
                current.append(k)
        if current:
            segments.append(current)
        for n_seg, seg in enumerate(segments):
            first = seg[0]
            matches = sorted({within[k] for k in seg if k in within})
            yield ([words[k] for k in seg], [found[k][:2] for k in seg],
                   [(a - first, z - first, item) for a, z, item in matches], header and n_seg == len(segments) - 1)


def _prose(words) -> bool:
    """Whether any of ``words`` is a prose word or a contraction ("can't", "they're")."""
    return any(w in PROSE_WORDS or w.endswith(_CONTRACTIONS) for w in words)


def _read(text, words, spans, matches, header, limit):
    """The readings of one segment: (kind, item, segment text, extra words, the item as written) with kind studied,
    intrusion or filler."""
    def raw(a, z):
        return text[spans[a][0]:spans[z - 1][1]]

    n = len(words)
    prose = [("filler", "", raw(0, n), 0, "")]
    if (header and n > limit) or all(w.isdigit() for w in words):
        return prose
    if matches:
        inside = {k for a, z, _ in matches for k in range(a, z)}

        def recalls(cut, allowed=None):
            extras = [words[k] for k in range(cut, n) if k not in inside]
            if len(extras) > NEIGHBOUR_WORDS or _prose(extras) or (
                    allowed is not None and not allowed.issuperset(extras)):
                return None
            segment = raw(cut, n)  # once: a segment may hold thousands of items
            return [("studied", item, segment, len(extras) if j == 0 else 0, raw(a, z))
                    for j, (a, z, item) in enumerate(matches)]

        whole = recalls(0)
        if whole is not None:
            return whole
        cut = matches[0][0]
        while cut > 0 and words[cut - 1] in DETERMINERS:
            cut -= 1
        framed = recalls(cut, DETERMINERS) if cut > 0 and words[cut - 1] in FRAME_ENDS else None
        return [("filler", "", raw(0, cut), 0, ""), *framed] if framed else prose
    cut = 0
    while cut < n and words[cut] in DETERMINERS:
        cut += 1
    core = words[cut:]
    if not core or len(core) > limit or _prose(core) or all(w.isdigit() or len(w) == 1 for w in core):
        return prose
    return [("intrusion", " ".join(core), raw(0, n), cut, "")]


def find_loop(items, *, max_period: int = LOOP_PERIODS, repeats: int = LOOP_REPEATS,
              run: int = LOOP_RUN) -> tuple[int, int]:
    """Where a decoding loop in ``items`` starts, and its period.

    Two kinds of loop, the one that starts first wins:

    - a block of ``p`` items (``p`` from 1 to ``max_period``, the smallest that fits) that the
      sequence repeats at least ``repeats`` times in a row up to its end, possibly with a final
      partial copy ("hat, back, hat, back, hat, back, hat": ``p`` = 2); the loop starts after
      the first block;
    - a second pass: the first place where ``run`` distinct items follow each other in the
      same order as they did earlier ("a, b, c, d, e, f, a, b, c": a recitation from the top);
      the period is the distance between the two runs.

    Returns
    -------
    (start, period) : tuple of int
        From ``items[start]`` on, every item that occurred earlier in ``items`` is a loop copy.
        Without a loop: ``(len(items), 0)``.
    """
    items = list(items)
    n = len(items)
    best = (n, 0)
    for period in range(1, int(max_period) + 1):
        i = n - 1
        while i >= period and items[i] == items[i - period]:
            i -= 1
        start = i + 1 - period if i >= period else 0  # the periodic tail is items[start:]
        if n - start >= period * int(repeats):
            best = (start + period, period)
            break
    first = {}
    for j in range(n - int(run) + 1):
        key = tuple(items[j:j + int(run)])
        if len(set(key)) < len(key):
            continue
        if key in first:
            return min(best, (j, j - first[key]))
        first[key] = j
    return best


def parse_recall(text: str, study_items, *, max_intrusion_words: int | None = None) -> ParsedRecall:
    """Recalled items of one generated answer, matched to the studied items (rules above).

    Parameters
    ----------
    text : str
        The model's answer (the generated text only, not the prompt).
    study_items : sequence of str
        The studied list, in study order; matching ignores case and punctuation.
    max_intrusion_words : int, optional
        Longest segment (in words, after leading determiners) scored as an intrusion rather
        than prose; default the longest studied item's word count (pass the pool's longest
        item when the pool holds longer items than the list).

    Returns
    -------
    ParsedRecall

    Raises
    ------
    ParameterError
        ``text`` is not a str (a missing value of a table), or the studied items are empty or
        not distinct after case folding.
    """
    study = [str(s) for s in study_items]
    keys = [" ".join(_WORD.findall(s.casefold().replace("\u2019", "'"))) for s in study]
    if not study or any(not k for k in keys):
        raise ParameterError(f"study items must be non-empty words; got {study!r}")
    if len(set(keys)) != len(keys):
        raise ParameterError(f"study items must differ after case folding; got {study!r}")
    by_key = dict(zip(keys, study))
    lengths = sorted({len(k.split()) for k in keys}, reverse=True)
    limit = max(lengths) if max_intrusion_words is None else int(max_intrusion_words)
    if not isinstance(text, str):
        raise ParameterError(f"the answer must be text; got {type(text).__name__} {text!r:.60}")
    parsed = ParsedRecall()
    recalls = []  # (item, raw, studied, extra words, index in parsed.segments) in output order
    for words, spans, matches, header in _pieces(text, by_key, lengths):
        for kind, item, raw, extra, written in _read(text, words, spans, matches, header, limit):
            if kind != "filler":
                recalls.append((item, raw, kind == "studied", extra, written, len(parsed.segments)))
            parsed.segments.append([raw, "filler", item])
    start, parsed.loop_period = find_loop([item for item, *_ in recalls])
    earlier, recalled = set(), set()
    for index, (item, raw, studied, extra, written, segment) in enumerate(recalls):
        if index >= start and item in earlier:
            category = "loop"
        elif not studied:
            category = "intrusion"
        else:
            category = "repeat" if item in recalled else "recall"
            recalled.add(item)
            parsed.n_case_changed += written != item
        earlier.add(item)
        parsed.segments[segment][1] = category
        if category != "loop":
            parsed.items.append(item)
            parsed.raw.append(raw)
            parsed.categories.append(category)
            parsed.n_extra_words += extra
    parsed.segments = [tuple(s) for s in parsed.segments]
    found = [category for _, category, _ in parsed.segments]
    parsed.n_correct, parsed.n_repeats, parsed.n_intrusions, parsed.n_filler, parsed.n_loop = (
        found.count(c) for c in ("recall", "repeat", "intrusion", "filler", "loop"))
    return parsed


def segments_text(parsed: ParsedRecall) -> str:
    """Every segment of a parsed answer, one line each: ``category: text`` (segments hold no colon nor newline)."""
    return "\n".join(f"{category}: {raw}" for raw, category, _ in parsed.segments)


@renamed_keywords(seed="rng")
def subject_label(model: str, decoding: str, rng) -> str:
    """``"model|decoding|seed"``: one recall subject per model, decoding setting and seed (``rng``:
    an int seed as is; a Generator draws one, ``int(rng.integers(2**63))``)."""
    return f"{model}|{decoding}|{seed_of(rng)}"


def recall_table(lists, answers, subjects, *, list_numbers=None, max_intrusion_words=None,
                 prompts=None, cuts=None) -> pd.DataFrame:
    """psifr long table of studied lists and the parsed answers to them.

    Parameters
    ----------
    lists : sequence of sequences of str, (n_lists, list_length)
        The studied items of each list.
    answers : sequence of str, (n_lists,)
        The generated answer to each list.
    subjects : str or sequence of str
        The subject label of every list (one label for all, or one per list).
    list_numbers : sequence of int, optional
        List numbers within each subject (default 1..n in order, per subject).
    max_intrusion_words : int, optional
        As :func:`parse_recall`.
    prompts : sequence of str, optional
        The text each answer was generated from (default ``""``).
    cuts : sequence of str, optional
        The text cut off the end of each answer before parsing (default ``""``; see
        :func:`~icl_cmr.adapters.lm.recall_task.generate_answers`).

    Returns
    -------
    pandas.DataFrame
        Columns ``subject, list, trial_type, position, item``, ``raw`` (the answer's segment a
        recall came from), ``category`` (``recall``, ``repeat`` or ``intrusion``; ``""`` for
        study rows), the counts of :data:`COUNT_NAMES`, and ``prompt``, ``answer``,
        ``answer_cut`` and ``answer_segments`` (:func:`segments_text`: every segment with its
        category, prose and loop copies included), the last two groups per list on every row of
        that list.
    """
    lists = [list(map(str, items)) for items in lists]
    answers = list(answers)
    if len(lists) != len(answers):
        raise RecallDataError(f"need one answer per studied list; got {len(lists)} lists and {len(answers)} answers")
    subjects = [subjects] * len(lists) if isinstance(subjects, str) else list(subjects)
    if len(subjects) != len(lists):
        raise RecallDataError(f"need one subject label per list; got {len(subjects)} for {len(lists)} lists")
    texts = {}
    for name, given in (("prompt", prompts), ("cut", cuts)):
        texts[name] = [""] * len(lists) if given is None else [str(p) for p in given]
        if len(texts[name]) != len(lists):
            raise RecallDataError(f"need one {name} per studied list; got {len(texts[name])} for {len(lists)} lists")
    if list_numbers is None:
        counter = {}
        list_numbers = []
        for subject in subjects:
            counter[subject] = counter.get(subject, 0) + 1
            list_numbers.append(counter[subject])
    rows = []
    for items, answer, subject, number, prompt, cut in zip(lists, answers, subjects, list_numbers, texts["prompt"],
                                                           texts["cut"]):
        parsed = parse_recall(answer, items, max_intrusion_words=max_intrusion_words)
        per_list = dict(**parsed.counts(), prompt=prompt, answer=answer, answer_cut=cut,
                        answer_segments=segments_text(parsed))
        for position, item in enumerate(items, 1):
            rows.append(dict(subject=subject, list=int(number), trial_type="study", position=position, item=item,
                             raw="", category="", **per_list))
        for position, (item, raw, category) in enumerate(zip(parsed.items, parsed.raw, parsed.categories), 1):
            rows.append(dict(subject=subject, list=int(number), trial_type="recall", position=position, item=item,
                             raw=raw, category=category, **per_list))
    return pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item", "raw", "category",
                                       *COUNT_NAMES, *LIST_TEXTS])


def recall_dataset(table: pd.DataFrame, *, source: str = "recall_table"):
    """Events dataset of a :func:`recall_table`: the per-list counts and texts become variables along ``trial``.

    ``recall_raw`` and ``recall_category`` (output_position) hold each recall's segment and
    category; ``prompt``, ``answer``, ``answer_cut`` and ``answer_segments`` (trial) the list's
    texts. Text is
    kept as written, except characters netCDF cannot store (controls other than tab and line
    breaks), which become U+FFFD.
    """
    per_list = [c for c in (*COUNT_NAMES, *LIST_TEXTS) if c in table.columns]
    # the table's labels are ours, so a high share of intrusions is the model's recall, not mislabelled lists
    recalls = table.drop(columns=per_list)
    if "raw" in recalls.columns:
        recalls["raw"] = recalls["raw"].map(_storable)
    events = from_table(recalls, source=source, max_intrusion_share=1)
    first = table.groupby(["subject", "list"], sort=True)[per_list].first()
    keys = pd.MultiIndex.from_arrays([events["subject"].values, events["list"].values])
    for name in per_list:  # aligned with the events' trial order
        values = first[name].reindex(keys)
        if name in COUNT_NAMES:
            events[name] = ("trial", values.to_numpy(dtype=np.int64))
        else:
            events[name] = ("trial", np.array([_storable(v) for v in values.fillna("")], dtype=str))
    return events


_UNSTORABLE = re.compile("[\x00-\x08\x0e-\x1b\x7f\ud800-\udfff]")


def _storable(text) -> str:
    """``text`` with the characters a netCDF string cannot hold (NUL, other controls, lone surrogates) as U+FFFD."""
    return _UNSTORABLE.sub("\ufffd", str(text))
