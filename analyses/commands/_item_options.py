"""The item-pool options of the recall fits (semantic and category CMR), shared through
:mod:`.options`: ``--patterns`` / ``--feature-layer`` (SOURCE's bundled pool), ``--vectors`` /
``--similarity`` (a lab's own pool) and the item patterns they give a fit."""
from __future__ import annotations

__all__ = ["add_patterns", "add_item_files", "item_patterns_of", "model_patterns", "pool_matched_to_study"]


def add_patterns(parser) -> None:
    """``--patterns`` and ``--feature-layer``: the item patterns of semantic / category CMR."""
    from ...adapters.item_pools import PATTERN_KINDS

    parser.add_argument("--patterns", default=None, choices=sorted(PATTERN_KINDS),
                        help="item patterns of SOURCE's pool: semantic similarities and/or category units")
    parser.add_argument("--feature-layer", default="segment", choices=("segment", "sublayer"),
                        help="category units in the item layer of context or in a sublayer (default segment)")
    add_item_files(parser)


def add_item_files(parser) -> None:
    """``--vectors`` / ``--similarity``: a lab's own item pool for semantic CMR (one of them)."""
    own = parser.add_mutually_exclusive_group()
    own.add_argument("--vectors", default=None, metavar="FILE",
                     help="semantic CMR with your own word vectors (cosine similarities): an .npz with arrays items "
                     "and vectors, or a .csv/.tsv/.txt/.vec table of the item then its numbers (GloVe/fastText text)")
    own.add_argument("--similarity", default=None, metavar="FILE",
                     help="semantic CMR with your own item-by-item similarities: an .npz with arrays items and "
                     "similarity, or a square .csv/.tsv table with the items as header row and first column")


def item_patterns_of(args, events):
    """The item patterns of ``--patterns`` (a bundled pool) or ``--vectors`` / ``--similarity``
    (a lab's own pool, which must cover every studied item of ``events``); None for localist CMR."""
    from cmr.errors import ParameterError
    from ...adapters.item_pools import load_patterns_of_kind, patterns_from_file

    vectors, similarity = getattr(args, "vectors", None), getattr(args, "similarity", None)
    kind, layer = getattr(args, "patterns", None), getattr(args, "feature_layer", "segment")
    if vectors is None and similarity is None:
        return load_patterns_of_kind(args.source, kind, feature_layer=layer)
    if kind not in (None, "semantic"):
        raise ParameterError(f"--{'vectors' if vectors else 'similarity'} gives semantic similarities only; "
                             f"got --patterns {kind} (leave --patterns out or give semantic)")
    pool = patterns_from_file(vectors=vectors, similarity=similarity, feature_layer=layer)
    return pool_matched_to_study(pool, events, bool(getattr(args, "normalize_items", False)),
                                 f"--{'vectors' if vectors else 'similarity'} {vectors or similarity}")


def model_patterns(args, events, model: str):
    """The item pool of a named model of cmr.COMPARISON_MODELS: semantic from ``--vectors`` /
    ``--similarity`` or SOURCE's pool, category from SOURCE's pool; None for a localist model."""
    import argparse

    import cmr

    kind = cmr.COMPARISON_MODELS[model][1]
    if kind is None:
        return None
    own = {"vectors": None, "similarity": None} if kind == "category" else {}
    return item_patterns_of(argparse.Namespace(**{**vars(args), "patterns": kind, "feature_layer": "segment", **own}),
                            events)


def pool_matched_to_study(pool, events, normalize_items: bool, label: str):
    """``pool`` (ItemPatterns) whose items cover every studied item of ``events``.

    Items match as written; with ``normalize_items`` also ignoring case and surrounding spaces
    (as recalls match studied words under --normalize-items), and the pool's items then take
    the studied spelling. RecallDataError naming the items otherwise: those that differ only in
    case or spaces (with the option that matches them), and those with no row at all.
    """
    import numpy as np

    from cmr.errors import RecallDataError
    from cmr.lab_tables import item_keys
    from cmr.textbook.patterns import item_patterns

    studied = np.unique(np.asarray(events["study_item"].values, dtype=object).astype(str))
    studied = studied[studied != ""]
    items = np.asarray(pool.items, dtype=object).astype(str)
    missing = np.setdiff1d(studied, items)
    if not missing.size:
        return pool
    pool_keys, missing_keys = item_keys(items, True), item_keys(missing, True)
    by_key: dict = {}
    for item, key in zip(items.tolist(), pool_keys):
        by_key.setdefault(key, []).append(str(item))
    loose = [(str(s), by_key[key]) for s, key in zip(missing.tolist(), missing_keys) if key in by_key]
    absent = [str(s) for s, key in zip(missing.tolist(), missing_keys) if key not in by_key]
    shown = ", ".join(f"{s!r} (pool: {', '.join(map(repr, found))})" for s, found in loose[:5])
    if absent:
        also = f"; {len(loose)} more differ only in case or spaces, e.g. {shown}" if loose else ""
        raise RecallDataError(f"{len(absent)} studied item(s) have no row in {label} ({items.size} items), e.g. "
                              f"{', '.join(map(repr, absent[:5]))}{also}; the file must cover every studied item")
    if not normalize_items:
        raise RecallDataError(f"{len(loose)} studied item(s) differ from the items of {label} only in case or "
                              f"surrounding spaces: {shown}; give --normalize-items to match them, or write them "
                              "the same way")
    renamed = {}
    for s, found in loose:
        if len(found) > 1:
            raise RecallDataError(f"studied item {s!r} matches {len(found)} items of {label} under "
                                  f"--normalize-items ({', '.join(map(repr, found))}); keep one of them")
        if found[0] in renamed and renamed[found[0]] != s:
            raise RecallDataError(f"studied items {renamed[found[0]]!r} and {s!r} are one item under "
                                  f"--normalize-items but {label} can give only one spelling; write them the same way")
        if found[0] in studied:
            raise RecallDataError(f"studied items {found[0]!r} and {s!r} are one item under --normalize-items but "
                                  f"{label} can give only one spelling; write them the same way")
        renamed[found[0]] = s
    items = np.array([renamed.get(item, item) for item in items], dtype=object)
    return item_patterns(items, pool.similarity, pool.features, feature_names=pool.feature_names,
                         feature_layer=pool.feature_layer)
