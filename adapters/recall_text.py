"""Generated recall text -> free-recall events: the scoring of a language model's recall.

A model that is asked to recall a studied word list answers in free text: a numbered list,
a comma-separated line, a sentence before the words ("Sure! Here are the words I remember:"),
words with extra words around them ("the duck"), repeated words and words that were never
studied. :func:`parse_recall` turns one such answer into an ordered list of recalled items
by these rules, applied in this order:

1. The text is cut into segments at newlines, commas, semicolons, colons and the word "and"
   between items; list markers (``1.``, ``2)``, ``-``, ``*``, bullets) and enclosing quotes,
   brackets and final punctuation are stripped, case is folded.
2. A header, a segment the answer follows with a colon, with more words than the longest
   item ("Here is the list of words:", "My list:") is prose (``filler``), never a recall,
   whatever words it holds. A shorter one is read as any segment below: small models write
   each recalled word as "Detergent:" on its own line.
3. A segment equal to a studied item is a recall of it.
4. Otherwise the segment's words are scanned left to right for studied items (longest item
   first, so multi-word items such as "New York" match whole). If at most
   :data:`NEIGHBOUR_WORDS` (2) of its words lie outside those items ("the duck", "a red
   lipstick"), each item is a recall and the other words count as ``extra_words``; with more
   ("The duck was on the list") the segment is prose (``filler``): an item with its
   neighbours never needs more words than the item itself plus two.
5. A segment with no studied item and at most ``max_intrusion_words`` words (default: the
   longest studied item's word count; pass the pool's longest item when the pool holds longer
   items than the list) is an intrusion; a longer one is ``filler`` (prose that is no recall
   attempt) and is dropped.
6. A decoding loop, recalls that end by repeating one block of 1 to :data:`LOOP_PERIODS` (4)
   items at least :data:`LOOP_REPEATS` (3) times in a row ("hat, back, hat, back, hat,
   back"), keeps its first block as ordinary recalls; the later copies (and a final partial
   copy) are counted as ``n_loop`` and are neither repeats nor intrusions
   (:func:`find_loop`). A language model that falls into such a loop would otherwise repeat
   it until its token limit.

A repeat (an item recalled again) stays in the sequence, as a human repeat does in a psifr
table; the analyses skip it as psifr does. Counts of every category are returned, so nothing
is dropped silently. Rows of a psifr long table are built by :func:`recall_table`, whose
``subject`` label is ``"model|decoding|seed"`` (one subject per model, decoding setting and
seed).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

from cmr.errors import ParameterError, RecallDataError

__all__ = ["ParsedRecall", "normalise", "parse_recall", "find_loop", "recall_table", "subject_label", "COUNT_NAMES",
           "NEIGHBOUR_WORDS", "LOOP_PERIODS", "LOOP_REPEATS"]

#: per-list counts of :class:`ParsedRecall` (and the period of a final loop, 0 without one), in
#: the order tables and datasets report them
COUNT_NAMES = ("n_correct", "n_repeats", "n_intrusions", "n_extra_words", "n_filler", "n_case_changed", "n_loop",
               "loop_period")
#: words outside the studied items that a recall segment may hold ("the duck", "a red lipstick");
#: a segment with more is prose
NEIGHBOUR_WORDS = 2
#: a decoding loop repeats a block of 1 to LOOP_PERIODS items at least LOOP_REPEATS times in a row
LOOP_PERIODS = 4
LOOP_REPEATS = 3

_SPLIT = re.compile(r"([\n,;:\u2022]+|\s+(?:and|&)\s+)", re.IGNORECASE)
_MARKER = re.compile(r"^\s*(?:\(?\d+[.)\]]|[-*+\u2013\u2014]|#+)\s*")
_WORD = re.compile(r"[^\W_]+(?:['\u2019-][^\W_]+)*")


def normalise(text: str) -> str:
    """Case-folded words of ``text`` joined by single spaces (punctuation and markers dropped)."""
    return " ".join(_WORD.findall(_MARKER.sub("", str(text)).casefold()))


@dataclass
class ParsedRecall:
    """One parsed answer.

    Attributes
    ----------
    items : list of str
        Recalled items in output order, studied items spelled as studied, intrusions as
        normalised text.
    raw : list of str
        The segment of the answer each recall came from (stripped).
    n_correct, n_repeats, n_intrusions : int
        First recalls of studied items, recalls of an already recalled item, and recalls of
        items not on the list.
    n_extra_words : int
        Words next to a studied item in a segment ("the duck": 1).
    n_filler : int
        Prose segments: headers longer than an item, segments with more than :data:`NEIGHBOUR_WORDS` words beside
        their studied items, and segments without one that are too long to be an intrusion.
    n_case_changed : int
        Recalls of studied items whose case or punctuation differed from the studied spelling.
    n_loop : int
        Recalls dropped as a decoding loop's repeated copies (:func:`find_loop`); not in
        ``items`` and not counted as repeats or intrusions.
    loop_period : int
        Items in the loop's repeated block (1 to :data:`LOOP_PERIODS`); 0 without a loop.
    """

    items: list = field(default_factory=list)
    raw: list = field(default_factory=list)
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


def _segments(text: str) -> list[tuple[str, bool]]:
    """(segment, is_header) pairs: a header is a segment the text follows with a colon."""
    parts = _SPLIT.split(str(text))  # the capturing group keeps each separator after its segment
    pairs = []
    for i in range(0, len(parts), 2):
        segment = parts[i].strip()
        if segment:
            pairs.append((segment, i + 1 < len(parts) and ":" in parts[i + 1]))
    return pairs


def find_loop(items, *, max_period: int = LOOP_PERIODS, repeats: int = LOOP_REPEATS) -> tuple[int, int]:
    """Where a decoding loop at the end of ``items`` starts repeating, and its period.

    A loop is a block of ``p`` items (``p`` from 1 to ``max_period``, the smallest that fits)
    that the sequence repeats at least ``repeats`` times in a row up to its end, possibly with
    a final partial copy ("hat, back, hat, back, hat, back, hat": ``p`` = 2).

    Returns
    -------
    (keep, period) : tuple of int
        ``items[:keep]`` ends with the loop's first block; ``items[keep:]`` are its repeated
        copies. Without a loop: ``(len(items), 0)``.
    """
    items = list(items)
    n = len(items)
    for period in range(1, int(max_period) + 1):
        i = n - 1
        while i >= period and items[i] == items[i - period]:
            i -= 1
        start = i + 1 - period if i >= period else 0  # the periodic tail is items[start:]
        if n - start >= period * int(repeats):
            return start + period, period
    return n, 0


def parse_recall(text: str, study_items, *, max_intrusion_words: int | None = None) -> ParsedRecall:
    """Recalled items of one generated answer, matched to the studied items (rules above).

    Parameters
    ----------
    text : str
        The model's answer (the generated text only, not the prompt).
    study_items : sequence of str
        The studied list, in study order; matching ignores case and punctuation.
    max_intrusion_words : int, optional
        Longest segment (in words) scored as an intrusion rather than filler; default the
        longest studied item's word count (pass the pool's longest item when the pool holds
        longer items than the list).

    Returns
    -------
    ParsedRecall
    """
    study = [str(s) for s in study_items]
    keys = [normalise(s) for s in study]
    if not study or any(not k for k in keys):
        raise ParameterError(f"study items must be non-empty words; got {study!r}")
    if len(set(keys)) != len(keys):
        raise ParameterError(f"study items must differ after case folding; got {study!r}")
    by_key = dict(zip(keys, study))
    lengths = sorted({len(k.split()) for k in keys}, reverse=True)
    limit = max(lengths) if max_intrusion_words is None else int(max_intrusion_words)
    parsed = ParsedRecall()
    recalls = []  # (item, raw segment, studied, extra words of its segment) in output order
    for segment, header in _segments(text):
        words = normalise(segment).split()
        if not words:
            continue
        if header and len(words) > limit:  # "Here is the list of words:" introduces the recalls
            parsed.n_filler += 1
            continue
        found, i = [], 0
        while i < len(words):
            for n in lengths:
                key = " ".join(words[i:i + n])
                if len(words[i:i + n]) == n and key in by_key:
                    found.append(by_key[key])
                    i += n
                    break
            else:
                i += 1
        extra = len(words) - sum(len(normalise(f).split()) for f in found)
        if found and extra <= NEIGHBOUR_WORDS:
            raw = _MARKER.sub("", segment).strip()
            recalls.extend((item, raw, True, extra if k == 0 else 0) for k, item in enumerate(found))
        elif not found and len(words) <= limit:
            recalls.append((" ".join(words), segment, False, 0))
        else:
            parsed.n_filler += 1
    keep, parsed.loop_period = find_loop([item for item, *_ in recalls])
    parsed.n_loop = len(recalls) - keep
    seen = set()
    for item, raw, studied, extra in recalls[:keep]:
        parsed.items.append(item)
        parsed.raw.append(raw)
        parsed.n_extra_words += extra
        if not studied:
            parsed.n_intrusions += 1
        elif item in seen:
            parsed.n_repeats += 1
        else:
            seen.add(item)
            parsed.n_correct += 1
        if studied and item not in raw:
            parsed.n_case_changed += 1
    return parsed


def subject_label(model: str, decoding: str, seed: int) -> str:
    """``"model|decoding|seed"``: one recall subject per model, decoding setting and seed."""
    return f"{model}|{decoding}|{int(seed)}"


def recall_table(lists, answers, subjects, *, list_numbers=None, max_intrusion_words=None) -> pd.DataFrame:
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

    Returns
    -------
    pandas.DataFrame
        Columns ``subject, list, trial_type, position, item, raw`` (``raw``: the answer's
        segment a recall came from; ``""`` for study rows), plus the counts of
        :data:`COUNT_NAMES` per list as columns on every row of that list.
    """
    lists = [list(map(str, items)) for items in lists]
    answers = list(answers)
    if len(lists) != len(answers):
        raise RecallDataError(f"need one answer per studied list; got {len(lists)} lists and {len(answers)} answers")
    subjects = [subjects] * len(lists) if isinstance(subjects, str) else list(subjects)
    if len(subjects) != len(lists):
        raise RecallDataError(f"need one subject label per list; got {len(subjects)} for {len(lists)} lists")
    if list_numbers is None:
        counter = {}
        list_numbers = []
        for subject in subjects:
            counter[subject] = counter.get(subject, 0) + 1
            list_numbers.append(counter[subject])
    rows = []
    for items, answer, subject, number in zip(lists, answers, subjects, list_numbers):
        parsed = parse_recall(answer, items, max_intrusion_words=max_intrusion_words)
        counts = parsed.counts()
        for position, item in enumerate(items, 1):
            rows.append(dict(subject=subject, list=int(number), trial_type="study", position=position, item=item,
                             raw="", **counts))
        for position, (item, raw) in enumerate(zip(parsed.items, parsed.raw), 1):
            rows.append(dict(subject=subject, list=int(number), trial_type="recall", position=position, item=item,
                             raw=raw, **counts))
    return pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item", "raw", *COUNT_NAMES])
