"""Study order of subject, session and list labels: the one rule every reader and model uses.

Labels are ordered so that lists run in the order they were studied, whatever the labels look
like:

1. **Numbers** (an integer or float column) run in numeric order.
2. **Text that reads as numbers** (``"1", "2", "10"``, ``"-1"``, ``"2.5"``) runs in numeric
   order too (``"2"`` before ``"10"``), not in the order of the characters.
3. **Text that is one shared prefix followed by a whole number** (``"L1" .. "L12"``,
   ``"list_01"``, ``"S7"``) runs in the order of the number (natural order: ``"L2"`` before
   ``"L10"``). Labels whose numbers are equal (``"L01"`` and ``"L1"``) keep their text order.
4. **Any other text** (``"practice", "a", "b"``, mixed prefixes such as ``"A1", "B1"``) runs in
   the order of the file: the order in which the labels first appear, within each enclosing
   group (a list label within its subject and session), so two subjects may study lists of the
   same names in different orders.

The rule is read from all the labels of a column at once: one label that does not fit rule 2 or
3 sends the whole column to rule 4.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .deprecation import keyword_only
from .errors import RecallDataError

__all__ = ["ORDER_RULES", "order_rule", "study_order", "replica_labels"]

ORDER_RULES = ("numeric", "numeric_text", "prefix_number", "file")

_PREFIX_NUMBER = re.compile(r"^(\D*)(\d+)$")


def _as_labels(labels) -> np.ndarray:
    values = labels.to_numpy() if isinstance(labels, (pd.Series, pd.Index)) else np.asarray(labels)
    if values.ndim != 1:
        raise RecallDataError(f"labels must be one-dimensional; got shape {values.shape}")
    return values


def _rule_and_keys(distinct: np.ndarray):
    """The rule for these distinct labels and, unless it is ``file``, their sort keys."""
    if distinct.dtype.kind in "iufb":
        return "numeric", [distinct]
    text = [str(v) for v in distinct]
    try:
        values = np.array([float(t) for t in text])
    except ValueError:
        values = None
    if values is not None and np.isfinite(values).all():
        return "numeric_text", [np.array(text, dtype=object), values]
    matches = [_PREFIX_NUMBER.match(t) for t in text]
    if all(matches) and len({m.group(1) for m in matches}) <= 1:
        numbers = np.array([int(m.group(2)) if len(m.group(2)) < 19 else float(m.group(2)) for m in matches])
        return "prefix_number", [np.array(text, dtype=object), numbers]
    return "file", None


def order_rule(labels) -> str:
    """Which of :data:`ORDER_RULES` :func:`study_order` applies to ``labels`` (see the module docstring)."""
    _, distinct = pd.factorize(_as_labels(labels), sort=False)
    return _rule_and_keys(np.asarray(distinct))[0]


@keyword_only
def study_order(labels, *, within=None) -> np.ndarray:
    """Rank of each label in study order (int64, 0-based; equal labels share a rank).

    Parameters
    ----------
    labels : array-like, shape (n,)
        Subject, session or list labels, one per row of a table (numbers or text).
    within : array-like of int, shape (n,), optional
        Code of each row's enclosing group (a list's subject and session). Only text that runs in
        the order of the file uses it: there a label is ranked by its first appearance within its
        group, so ranks of different groups are not comparable. The other rules rank all labels
        of the column together.

    Returns
    -------
    numpy.ndarray
        int64 ranks, 0 .. number of distinct labels - 1 (rules 1-3), or 0 .. the most labels of
        one group - 1 (rule 4): sorting rows by (group, rank) puts them in study order.
    """
    values = _as_labels(labels)
    codes, distinct = pd.factorize(values, sort=False)  # codes by first appearance
    if (codes < 0).any():
        raise RecallDataError(f"labels must have no missing values; got {int((codes < 0).sum())} NaN/None")
    rule, keys = _rule_and_keys(np.asarray(distinct))
    if rule != "file":
        order = np.lexsort(tuple(keys)) if len(keys) > 1 else np.argsort(keys[0], kind="stable")
        rank = np.empty(order.size, dtype=np.int64)
        rank[order] = np.arange(order.size)
        return rank[codes]
    if within is None:
        return codes.astype(np.int64)
    group = np.asarray(within)
    if group.shape != codes.shape:
        raise RecallDataError(f"within must have one group code per label ({codes.size}); got shape {group.shape}")
    group = np.unique(group, return_inverse=True)[1].reshape(-1).astype(np.int64)  # dense: no overflow below
    n_labels = max(int(distinct.size), 1)
    pair = group * n_labels + codes  # each (group, label) once, at its first row
    pairs, first, inverse = np.unique(pair, return_index=True, return_inverse=True)
    pair_group = pairs // n_labels
    by_appearance = np.lexsort((first, pair_group))
    rank_of_pair = np.empty(pairs.size, dtype=np.int64)
    group_start = np.searchsorted(pair_group[by_appearance], pair_group[by_appearance], side="left")
    rank_of_pair[by_appearance] = np.arange(pairs.size) - group_start
    return rank_of_pair[inverse.reshape(-1)]


@keyword_only
def replica_labels(labels, rep, *, within=None) -> np.ndarray:
    """List labels of replica ``rep`` of the lists ``labels``: unique over all replicas, in study order.

    Whole-number labels are shifted by ``rep * (max - min + 1)`` (per group of ``within``, else over
    all labels), so replica 0 keeps the labels and each later replica follows the last one:
    lists 1..N give cymr's ``rep * N + list`` and lists 0..N-1 give ``rep * N + list`` as well,
    never a label of another replica. Any other labels become ``"<rep>:<label>"`` (text in the
    order of the file).

    Parameters
    ----------
    labels : array-like, shape (n,)
        List labels of the data (one per row or per list).
    rep : int or array-like of int, shape (n,)
        Replica (0-based) of each label.
    within : array-like, shape (n,), optional
        Group (subject) of each label, whose own range sets the shift.
    """
    values = _as_labels(labels)
    reps = np.broadcast_to(np.asarray(rep, dtype=np.int64), values.shape)
    if values.dtype.kind in "iu":
        values = values.astype(np.int64)
        if within is None:
            step = np.full(values.shape, int(values.max()) - int(values.min()) + 1 if values.size else 1)
        else:
            groups = pd.Series(values).groupby(np.asarray(within), sort=False)
            step = (groups.transform("max") - groups.transform("min") + 1).to_numpy(dtype=np.int64)
        return values + reps * step
    return np.array([f"{r}:{x}" for r, x in zip(reps, values)], dtype=object)
