"""Item pools of bundled free-recall data sets: semantic similarities and categories for CMR.

``load_item_patterns("psifr:Morton2013")`` gives the 768-item pool of Morton & Polyn's
experiments (``psifr:Morton2013`` and ``cymr:Morton2013_mixed``, whose ``item_index`` column
is the row of this pool), with

* similarities from psifr's bundled ``Morton2013`` distances: they are cosine distances
  (``1 - d`` is positive semi-definite with unit diagonal; ``1 - d**2/2`` is not), so
  ``similarity = 1 - distance`` (:func:`cmr.similarity_from_distances`);
* one-hot category features (celebrities, locations, objects) from the ``category`` column
  of the studied items in psifr's Morton2013 table.
"""
from __future__ import annotations

import numpy as np

from cmr.errors import DataSourceError, OptionalDependencyError, ParameterError
from cmr.textbook.patterns import ItemPatterns, category_features, item_patterns, similarity_from_distances

from .recall_data import read_recall_table

__all__ = ["POOLS", "PATTERN_KINDS", "load_item_patterns", "load_patterns_of_kind"]

#: bundled data sets with an item pool: name -> (psifr distances, table with item categories)
POOLS = {
    "psifr:Morton2013": ("Morton2013", "psifr:Morton2013"),
    "cymr:Morton2013_mixed": ("Morton2013", "psifr:Morton2013"),
}


def load_item_patterns(
    source: str = "psifr:Morton2013",
    *,
    similarity: bool = True,
    categories: bool = True,
    feature_layer: str = "segment",
) -> ItemPatterns:
    """Item pool of a bundled data set with its semantic similarities and category features.

    Parameters
    ----------
    source : str
        A data set name of :data:`POOLS`.
    similarity, categories : bool
        Include the similarity matrix (weights ``Sfc, Scf, Sff``) and the category units
        (weights ``Cfc, Ccf``).
    feature_layer : {"segment", "sublayer"}
        Where the category units live in context (see :func:`cmr.item_patterns`).
    """
    if source not in POOLS:
        raise DataSourceError(f"no item pool for {source!r}; known: {', '.join(POOLS)}")
    study, table_source = POOLS[source]
    try:
        import psifr.fr as fr
    except ImportError as exc:
        raise OptionalDependencyError(f"the item pool of {source!r} is read from psifr: pip install psifr ({exc})") from exc
    items, distances = fr.sample_distances(study)
    features = names = None
    if categories:
        table = read_recall_table(table_source)
        studied = table[table["trial_type"] == "study"]
        category = dict(zip(studied["item"].astype(str), studied["category"].astype(str)))
        labels = np.array([category.get(str(item), "") for item in items])
        features, names = category_features(labels)
        keep = [k for k, name in enumerate(names) if name != ""]  # items never studied get no category unit
        features, names = features[:, keep], tuple(names[k] for k in keep)
    return item_patterns(
        np.asarray(items).astype(str), similarity_from_distances(distances) if similarity else None, features,
        feature_names=names, feature_layer=feature_layer,
    )


#: the item patterns of each CMR variant by name: keyword arguments of :func:`load_item_patterns`
PATTERN_KINDS = {
    "semantic": dict(similarity=True, categories=False),
    "category": dict(similarity=False, categories=True),
    "semantic+category": dict(similarity=True, categories=True),
}


def load_patterns_of_kind(source: str, kind: str | None, *, feature_layer: str = "segment") -> ItemPatterns | None:
    """Item patterns of a bundled data set for a CMR variant named in :data:`PATTERN_KINDS`.

    Parameters
    ----------
    source : str
        A data set name of :data:`POOLS`.
    kind : {None, "semantic", "category", "semantic+category"}
        None: localist CMR, no patterns (returns None).
    feature_layer : {"segment", "sublayer"}
        Where the category units live in context (see :func:`cmr.item_patterns`).
    """
    if kind is None:
        return None
    if kind not in PATTERN_KINDS:
        raise ParameterError(f"item patterns must be one of {', '.join(PATTERN_KINDS)} (or None); got {kind!r}")
    return load_item_patterns(source, feature_layer=feature_layer, **PATTERN_KINDS[kind])
