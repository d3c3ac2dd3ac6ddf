"""Generated recall text -> free-recall events: the scoring of a language model's recall.

A model that is asked to recall a studied word list answers in free text: a numbered list,
a comma-separated line, a sentence before the words ("Sure! Here are the words I remember:"),
words with extra words around them ("the duck"), repeated words and words that were never
studied. :func:`parse_recall` turns one such answer into an ordered list of recalled items
by these rules, applied in this order:

1. The text is cut into segments at newlines, commas, semicolons, colons and the word "and"
   between items; list markers (``1.``, ``2)``, ``-``, ``*``, bullets) and enclosing quotes,
   brackets and final punctuation are stripped, case is folded.
2. A segment equal to a studied item is a recall of it.
3. Otherwise the segment's words are scanned left to right for studied items (longest item
   first, so multi-word items such as "New York" match whole); each is a recall and the other
   words count as ``extra_words``.
4. A segment with no studied item and at most ``max_intrusion_words`` words (default: the
   longest studied item's word count) is an intrusion; a longer one is ``filler`` (prose that
   is no recall attempt) and is dropped.

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

__all__ = ["ParsedRecall", "normalise", "parse_recall", "recall_table", "subject_label", "COUNT_NAMES"]

#: per-list counts of :class:`ParsedRecall`, in the order tables and datasets report them
COUNT_NAMES = ("n_correct", "n_repeats", "n_intrusions", "n_extra_words", "n_filler", "n_case_changed")

_SPLIT = re.compile(r"[\n,;:\u2022]+|\s+(?:and|&)\s+", re.IGNORECASE)
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
        Segments that were neither a studied item nor short enough to be an intrusion.
    n_case_changed : int
        Recalls of studied items whose case or punctuation differed from the studied spelling.
    """

    items: list = field(default_factory=list)
    raw: list = field(default_factory=list)
    n_correct: int = 0
    n_repeats: int = 0
    n_intrusions: int = 0
    n_extra_words: int = 0
    n_filler: int = 0
    n_case_changed: int = 0

    def counts(self) -> dict:
        return {name: getattr(self, name) for name in COUNT_NAMES}


def _segments(text: str) -> list[str]:
    return [s.strip() for s in _SPLIT.split(str(text)) if s and s.strip()]


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
        longest studied item's word count.

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
    seen = set()

    def add(item, segment, studied):
        parsed.items.append(item)
        parsed.raw.append(segment)
        if not studied:
            parsed.n_intrusions += 1
        elif item in seen:
            parsed.n_repeats += 1
        else:
            seen.add(item)
            parsed.n_correct += 1
        if studied and item not in segment:
            parsed.n_case_changed += 1

    for segment in _segments(text):
        words = normalise(segment).split()
        if not words:
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
        if found:
            parsed.n_extra_words += len(words) - sum(len(normalise(f).split()) for f in found)
            for item in found:
                add(item, _MARKER.sub("", segment).strip(), True)
        elif len(words) <= limit:
            add(" ".join(words), segment, False)
        else:
            parsed.n_filler += 1
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
