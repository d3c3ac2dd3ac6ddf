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

import csv
from pathlib import Path
import warnings

from cmr.errors import (
    DataSourceError,
    FileFormatError,
    OptionalDependencyError,
    ParameterError,
    RecallDataError,
    SimilarityWarning,
)
from cmr.files import check_input_file, read_arrays
from cmr.similarity import check_similarity
from cmr.textbook.patterns import ItemPatterns, category_features, item_patterns, similarity_from_distances

from .recall_data import read_recall_table

__all__ = ["POOLS", "PATTERN_KINDS", "load_item_patterns", "load_patterns_of_kind", "read_item_vectors",
           "read_item_similarity", "patterns_from_file"]

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


# --- a lab's own word vectors or similarities ----------------------------------------------

#: how the text formats of a vector or similarity file are split, by extension
_DELIMITERS = {".csv": ",", ".tsv": "\t", ".txt": None, ".vec": None}


def _numbers(row, label: str, line: int) -> list:
    try:
        return [float(value) for value in row]
    except ValueError:
        raise FileFormatError(f"{label!r} line {line}: expected numbers after the item; got {' '.join(row)[:60]!r}") from None


def _text_rows(path, label: str) -> list:
    """The rows of a CSV (,), TSV (tab) or whitespace-separated text file, as lists of fields."""
    delimiter = _DELIMITERS[Path(path).suffix.lower()]
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            if delimiter is None:
                return [line.split() for line in handle if line.strip()]
            return [[field.strip() for field in row] for row in csv.reader(handle, delimiter=delimiter) if any(row)]
    except FileNotFoundError as exc:
        raise DataSourceError(f"no such file: {label!r}") from exc
    except (UnicodeDecodeError, csv.Error, OSError) as exc:
        raise FileFormatError(f"{label!r} is not a readable text table: {type(exc).__name__}: {exc}") from exc


def _checked_suffix(path, label: str, what: str, npz_arrays: str) -> str:
    suffix = Path(path).suffix.lower()
    if suffix != ".npz" and suffix not in _DELIMITERS:
        raise FileFormatError(f"{label!r}: a {what} file must be .npz (arrays {npz_arrays}) or .csv, .tsv, .txt, .vec; "
                              f"got {suffix or 'no extension'}")
    if not Path(path).exists():
        raise DataSourceError(f"no such {what} file: {label!r}")
    if Path(path).is_dir():
        raise DataSourceError(f"expected a {what} file; got a directory: {label!r}")
    check_input_file(path, f"{what} file", kind="array" if suffix == ".npz" else "text")  # pipes, devices, size
    return suffix


def _npz_arrays(path, label: str, names: tuple, what: str):
    try:
        arrays = read_arrays(path, f"{what} file", names=names)
    except FileFormatError as exc:
        raise FileFormatError(f"{label!r} is not a {what} file (expected an .npz with arrays "
                              f"{' and '.join(map(repr, names))}): {exc}") from None
    return tuple(np.asarray(arrays[name]) for name in names)


def read_item_vectors(path) -> tuple[np.ndarray, np.ndarray]:
    """Word vectors of a lab's item pool: ``(items (P,) str, vectors (P, D) float64)``.

    Formats: an ``.npz`` with arrays ``items`` (P,) and ``vectors`` (P, D); or a text table
    with one item per row, the item in the first column and its D numbers after it: ``.csv``
    (commas), ``.tsv`` (tabs), ``.txt`` / ``.vec`` (spaces, as GloVe and fastText write them).
    A first row whose fields after the item are not numbers is a header; a first row of
    two whole numbers (the word2vec / fastText count line) is skipped.
    """
    label = str(path)
    if _checked_suffix(path, label, "word-vector", "items and vectors") == ".npz":
        items, vectors = _npz_arrays(path, label, ("items", "vectors"), "word-vector")
    else:
        rows = _text_rows(path, label)
        first = 1
        if rows and (len(rows[0]) == 2 and all(f.isdigit() for f in rows[0]) or not _is_numeric(rows[0][1:])):
            rows, first = rows[1:], 2
        if not rows:
            raise FileFormatError(f"{label!r} has no word vectors; expected one row per item: the item, then its numbers")
        items = np.array([row[0] for row in rows], dtype=object)
        vectors = [_numbers(row[1:], label, k) for k, row in enumerate(rows, first)]
        widths = sorted({len(v) for v in vectors})
        if len(widths) != 1:
            raise FileFormatError(f"{label!r}: every item needs a vector of the same length; got lengths "
                                  f"{', '.join(map(str, widths[:5]))}")
        vectors = np.array(vectors, dtype=np.float64)
    if items.ndim != 1 or vectors.ndim != 2 or vectors.shape[0] != items.size or vectors.shape[1] == 0:
        raise FileFormatError(f"{label!r}: expected items (P,) and vectors (P, D) with D >= 1; got shapes "
                              f"{items.shape} and {vectors.shape}")
    if not np.issubdtype(vectors.dtype, np.number) or not np.isfinite(vectors.astype(np.float64)).all():
        raise FileFormatError(f"{label!r}: vectors must be finite numbers")
    norms = _lengths(vectors.astype(np.float64))
    if not np.isfinite(norms).all():  # cosines of such a vector would come out 0, itself included
        huge = items[~np.isfinite(norms)].astype(str)
        raise FileFormatError(f"{label!r}: {huge.size} item(s) have vectors too large to normalise (length beyond "
                              f"{np.finfo(np.float64).max:.3g}), e.g. {', '.join(map(repr, huge[:5].tolist()))}; "
                              f"scale the vectors down")
    if (norms == 0).any():
        zero = items[norms == 0].astype(str)
        raise FileFormatError(f"{label!r}: {zero.size} item(s) have an all-zero vector (no direction to compare), "
                              f"e.g. {', '.join(map(repr, zero[:5].tolist()))}")
    return _distinct_items(items, label), vectors.astype(np.float64)


def _lengths(vectors: np.ndarray) -> np.ndarray:
    """Euclidean length of each row, scaled first so that rows of huge finite values (1e200) do
    not overflow on the way; inf only where the length itself is beyond float64."""
    scale = np.max(np.abs(vectors), axis=1)
    safe = np.where(scale > 0, scale, 1.0)
    with np.errstate(over="ignore"):
        return scale * np.linalg.norm(vectors / safe[:, None], axis=1)


def _is_numeric(fields) -> bool:
    try:
        [float(f) for f in fields]
    except ValueError:
        return False
    return bool(fields)


def _distinct_items(items, label: str) -> np.ndarray:
    items = np.asarray(items).astype(str)
    values, counts = np.unique(items, return_counts=True)
    if (counts > 1).any() or (items == "").any():
        twice = values[counts > 1].tolist()[:5]
        raise FileFormatError(f"{label!r}: items must be distinct, non-empty names; got "
                              + (f"repeated item(s) {', '.join(map(repr, twice))}" if twice else "an empty item name"))
    return items


def read_item_similarity(path) -> tuple[np.ndarray, np.ndarray]:
    """An item-by-item similarity matrix of a lab's item pool: ``(items (P,), similarity (P, P))``.

    Formats: an ``.npz`` with arrays ``items`` (P,) and ``similarity`` (P, P); or a square
    text table (``.csv``, ``.tsv``, ``.txt``) whose first row names the items (after one
    corner cell) and whose every other row is an item and its P similarities, in that order.
    """
    label = str(path)
    if _checked_suffix(path, label, "similarity", "items and similarity") == ".npz":
        items, matrix = _npz_arrays(path, label, ("items", "similarity"), "similarity")
    else:
        rows = _text_rows(path, label)
        if len(rows) < 2:
            raise FileFormatError(f"{label!r}: expected a header row of items, then one row per item")
        items = np.array(rows[0][1:], dtype=object)
        if [row[0] for row in rows[1:]] != rows[0][1:]:
            raise FileFormatError(f"{label!r}: the rows must name the items of the header row, in the same order")
        matrix = np.array([_numbers(row[1:], label, k) for k, row in enumerate(rows[1:], 2)], dtype=object)
        if matrix.ndim != 2:
            raise FileFormatError(f"{label!r}: every row needs {items.size} similarities")
    if items.ndim != 1 or np.shape(matrix) != (items.size, items.size):
        raise FileFormatError(f"{label!r}: expected items (P,) and a (P, P) similarity matrix; got shapes "
                              f"{items.shape} and {np.shape(matrix)}")
    try:
        matrix = np.asarray(matrix, dtype=np.float64)
    except (TypeError, ValueError):
        raise FileFormatError(f"{label!r}: similarities must be numbers") from None
    if not np.isfinite(matrix).all():
        raise FileFormatError(f"{label!r}: similarities must be finite numbers")
    return _distinct_items(items, label), matrix


def patterns_from_file(*, vectors=None, similarity=None, events=None, feature_layer: str = "segment") -> ItemPatterns:
    """Semantic item patterns of a lab's own pool: cosine similarities of its word vectors
    (``vectors``, see :func:`read_item_vectors`) or its similarity matrix (``similarity``,
    :func:`read_item_similarity`). The file's items are the pool (cymr's ``patterns["items"]``):
    give the experiment's word pool, not a whole vocabulary. With ``events``, every studied
    item must be in the pool (RecallDataError naming how many are not, and a few).
    """
    if (vectors is None) == (similarity is None):
        raise ParameterError("give one of vectors (a word-vector file) or similarity (a similarity file)")

    if vectors is not None:
        label = str(vectors)
        items, matrix = read_item_vectors(vectors)
        scaled = matrix / np.max(np.abs(matrix), axis=1, keepdims=True)  # no overflow on the way to unit length
        unit = scaled / np.linalg.norm(scaled, axis=1, keepdims=True)
        sim = np.clip(unit @ unit.T, -1.0, 1.0)
    else:
        label = str(similarity)
        items, sim = read_item_similarity(similarity)
        check_similarity(sim, f"similarity file {label!r}")  # named by its file; item_patterns checks again
    if events is not None:
        studied = np.unique(np.asarray(events["study_item"].values, dtype=object).astype(str))
        missing = np.setdiff1d(studied[studied != ""], items)
        if missing.size:
            raise RecallDataError(f"{missing.size} studied item(s) have no row in {label!r} ({items.size} items), e.g. "
                                  f"{', '.join(map(repr, missing[:5].tolist()))}; the file must cover every studied item")
    with warnings.catch_warnings():  # a warning was given once above, with the file's name
        warnings.simplefilter("ignore", SimilarityWarning)
        return item_patterns(items, sim, feature_layer=feature_layer)
