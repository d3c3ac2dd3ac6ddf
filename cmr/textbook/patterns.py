"""Item patterns of semantic and category CMR: a pool of items, their similarities and features.

cymr configures knowledge about items with *patterns* (``patterns["vector"]`` for the
item-context weights, ``patterns["similarity"]`` for item-item weights) placed into the network
by weight expressions of a ``CMRParameters`` object. :class:`ItemPatterns` holds the same
information for the one family of configurations this package implements (Polyn, Norman &
Kahana 2009; Morton & Polyn 2016), whose weights are the parameters ``Sfc, Scf, Sff, Cfc, Ccf``
(docs/semantic-cmr.md gives the cymr configuration term by term):

* item segment of context, one unit per pool item:
  ``M_fc_pre = Afc + Dfc * loc + Sfc * sem`` and ``M_cf_pre = Acf + Dcf * loc + Scf * sem``;
* feature units (e.g. one per category): ``Cfc * features`` and ``Ccf * features``, either a
  segment of the same context layer (``feature_layer="segment"``) or a context sublayer of their
  own, normalised and integrated separately (``feature_layer="sublayer"``);
* item-to-item cue of the last recalled item: ``M_ff_pre = Sff * sem``.

``sem`` is the pool's similarity matrix (``similarity``) and ``loc`` the identity.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from ..errors import ParameterError, RecallDataError
from ..similarity import check_similarity

__all__ = [
    "ItemPatterns",
    "item_patterns",
    "similarity_from_distances",
    "category_features",
    "FEATURE_LAYERS",
]

#: where feature units live: a segment of the one context layer, or a sublayer of their own
FEATURE_LAYERS = ("segment", "sublayer")

# what ItemPatterns.study_terms keeps per pool: the last few study sequences, within a memory budget
_RECENT_STUDY_SEQUENCES = 4
_RECENT_TERMS_BYTES = 64 * 2**20


@dataclass(frozen=True, eq=False)
class ItemPatterns:
    """A pool of items with optional similarities and feature vectors (see :func:`item_patterns`).

    Attributes
    ----------
    items : (P,) object array of str
        The pool, in the order of the rows of ``similarity`` and ``features``.
    similarity : (P, P) float64 or None
        ``sem``: pre-experimental similarity of item i to item j.
    features : (P, U) float64 or None
        Feature vector of each item (e.g. one-hot categories).
    feature_names : tuple of str
        Names of the U feature units.
    feature_layer : {"segment", "sublayer"}
    """

    items: np.ndarray
    similarity: np.ndarray | None
    features: np.ndarray | None
    feature_names: tuple
    feature_layer: str
    # derived once: row sums of sem, sem @ sem.T, features @ features.T, item -> row
    _row_sum: np.ndarray = field(init=False, repr=False)
    _similarity_gram: np.ndarray = field(init=False, repr=False)
    _feature_gram: np.ndarray = field(init=False, repr=False)
    _index: dict = field(init=False, repr=False)
    # the list terms of recent study sequences (see study_terms), newest last
    _recent_terms: OrderedDict = field(init=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "_recent_terms", OrderedDict())
        sim = self.similarity
        feats = self.features
        object.__setattr__(self, "_row_sum", None if sim is None else sim.sum(axis=1))
        object.__setattr__(self, "_similarity_gram", None if sim is None else sim @ sim.T)
        object.__setattr__(self, "_feature_gram", None if feats is None else feats @ feats.T)
        object.__setattr__(self, "_index", {item: i for i, item in enumerate(self.items.tolist())})

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_recent_terms"] = OrderedDict()  # kept terms stay in this process (a pickle stays small)
        return state

    @property
    def size(self) -> int:
        """Number of items in the pool (cymr's pool size: units of the item segment)."""
        return int(self.items.size)

    @property
    def n_blocks(self) -> int:
        """Context sublayers: 2 when feature units form a sublayer of their own, else 1."""
        return 2 if self.features is not None and self.feature_layer == "sublayer" else 1

    def index_of(self, study_items: np.ndarray) -> np.ndarray:
        """Pool row of every studied item, shape of ``study_items``; -1 where the slot is empty.

        Raises RecallDataError naming items that are not in the pool.
        """
        flat = np.asarray(study_items, dtype=object).ravel()
        rows = np.array([self._index.get(item, -1) if item != "" else -2 for item in flat], dtype=np.int64)
        missing = sorted({flat[i] for i in np.flatnonzero(rows == -1)})
        if missing:
            raise RecallDataError(
                f"{len(missing)} studied item(s) are not in the item pool of {self.size} items, e.g. "
                f"{', '.join(map(repr, missing[:5]))}; the pool must contain every studied item"
            )
        rows[rows == -2] = -1
        return rows.reshape(np.shape(study_items))

    def list_arrays(self, rows: np.ndarray):
        """Similarity terms of the items ``rows`` (n,) of one list, as the kernels read them.

        Returns ``sim`` (n, n) = sem[rows][:, rows], ``sim_gram`` (n, n) = (sem sem^T)[rows][:, rows],
        ``row_sum`` (n,) and ``feature_gram`` (n, n) = (F F^T)[rows][:, rows]; zeros where absent.
        """
        n = rows.size
        zeros = np.zeros((n, n))
        if self.similarity is None:
            sim, gram, row_sum = zeros, zeros, np.zeros(n)
        else:
            sim = self.similarity[np.ix_(rows, rows)]
            gram = self._similarity_gram[np.ix_(rows, rows)]
            row_sum = self._row_sum[rows]
        feats = zeros if self.features is None else self._feature_gram[np.ix_(rows, rows)]
        return sim, gram, row_sum, feats

    def lists_arrays(self, rows: np.ndarray, list_length: np.ndarray):
        """:meth:`list_arrays` of every list at once, zero-padded to the longest list.

        ``rows`` (T, >= L) are the pool rows of each list's studied items (:meth:`index_of`)
        and ``list_length`` (T,) the lists' lengths, L the longest. Returns ``sim``,
        ``sim_gram``, ``feature_gram`` (T, L, L) and ``row_sum`` (T, L): list t's terms in
        ``[t, :n, :n]`` (``[t, :n]``), the same values as :meth:`list_arrays` of
        ``rows[t, :n]``, and 0 elsewhere.
        """
        longest = int(list_length.max())
        inside = np.arange(longest) < list_length[:, None]
        # a row outside a list reads row 0 and is then zeroed; one inside is used as given
        safe = np.where(inside, rows[:, :longest], 0)
        pairs = inside[:, :, None] & inside[:, None, :]
        # entry [t, i, j] of a (P, P) matrix, as an index into its flat (C-order) values
        flat = (safe[:, :, None] % self.size) * self.size + (safe[:, None, :] % self.size)
        zeros = np.zeros(pairs.shape)
        if self.similarity is None:
            sim, gram, row_sum = zeros, zeros.copy(), np.zeros(inside.shape)
        else:
            sim = np.where(pairs, np.take(self.similarity.ravel(), flat), 0.0)
            gram = np.where(pairs, np.take(self._similarity_gram.ravel(), flat), 0.0)
            row_sum = np.where(inside, self._row_sum[safe], 0.0)
        feats = zeros.copy() if self.features is None else np.where(pairs, np.take(self._feature_gram.ravel(), flat), 0.0)
        return sim, gram, row_sum, feats

    def study_terms(self, study_items: np.ndarray, list_length: np.ndarray):
        """Pool rows (:meth:`index_of`) and :meth:`lists_arrays` of the study lists, kept for reuse.

        The results of the last few study sequences (by content: the same items in the same
        slots and the same list lengths) are kept and returned again, the same arrays: they
        must only be read.
        """
        study_items = np.asarray(study_items, dtype=object)
        lengths = np.ascontiguousarray(list_length, dtype=np.int64)
        key = (study_items.shape, lengths.tobytes(), tuple(study_items.ravel().tolist()))
        try:
            found = self._recent_terms.get(key)
        except TypeError:  # an unhashable item: nothing is kept
            key, found = None, None
        if found is not None:
            return found
        rows = self.index_of(study_items)
        terms = (rows, *self.lists_arrays(rows, lengths))
        if key is not None and sum(a.nbytes for a in terms) <= _RECENT_TERMS_BYTES:
            recent = self._recent_terms
            recent[key] = terms
            try:
                while len(recent) > _RECENT_STUDY_SEQUENCES or (
                        sum(a.nbytes for kept in recent.values() for a in kept) > _RECENT_TERMS_BYTES):
                    recent.popitem(last=False)  # the oldest
            except (KeyError, RuntimeError):  # changed meanwhile by another thread
                pass
        return terms


def _matrix(value, what: str, shape=None) -> np.ndarray:
    try:
        array = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterError(f"{what} must be a numeric matrix; got {type(value).__name__}") from None
    if array.ndim != 2 or (shape is not None and any(s is not None and a != s for a, s in zip(array.shape, shape))):
        raise ParameterError(f"{what} must have shape {tuple('*' if s is None else s for s in shape)}; got {array.shape}")
    if not np.isfinite(array).all():
        raise ParameterError(f"{what} must be finite; got NaN or infinite values")
    array.setflags(write=False)
    return array


def item_patterns(
    items,
    similarity=None,
    features=None,
    *,
    feature_names=None,
    feature_layer: str = "segment",
) -> ItemPatterns:
    """Item pool and its patterns for semantic / category CMR.

    Parameters
    ----------
    items : sequence of str, shape (P,)
        Every item that may be studied (cymr's ``patterns["items"]``); distinct.
    similarity : array_like, shape (P, P), optional
        Pre-experimental similarity ``sem`` (e.g. :func:`similarity_from_distances`): symmetric,
        in [-1, 1] and positive semi-definite within :data:`cmr.similarity.SIMILARITY_TOLERANCES`
        (ParameterError beyond them, SimilarityWarning inside their warning band). Used as
        cymr uses one matrix in both ``patterns["vector"]["sem"]`` (weights ``Sfc``, ``Scf``)
        and ``patterns["similarity"]["sem"]`` (weight ``Sff``).
    features : array_like, shape (P, U), optional
        Feature vector of each item, e.g. :func:`category_features` (cymr's
        ``patterns["vector"]["cat"]``; weights ``Cfc``, ``Ccf``).
    feature_names : sequence of str, optional
        Names of the U feature units (default ``feature_1..U``).
    feature_layer : {"segment", "sublayer"}
        Feature units in the same context layer as the items (normalised together) or in a
        sublayer of their own, normalised and integrated separately with the same drift rates
        (cymr ``set_sublayers(c=["task", "cat"])``). A sublayer has its own start unit, so it is
        a different model from localist CMR even with ``Cfc = Ccf = 0``.

    Returns
    -------
    ItemPatterns
        Read-only arrays; the derived products (``sem @ sem.T``, ``F @ F.T``) are computed once.
    """
    labels = np.asarray(items).astype(str).astype(object)
    if labels.ndim != 1 or labels.size == 0:
        raise ParameterError(f"items must be a non-empty 1-d sequence of item names; got shape {labels.shape}")
    if len(set(labels.tolist())) != labels.size:
        raise ParameterError("items must be distinct (each pool item has one row of the patterns)")
    if "" in set(labels.tolist()):
        raise ParameterError("items must be non-empty strings")
    labels.setflags(write=False)
    n = labels.size
    sim = None if similarity is None else check_similarity(_matrix(similarity, "similarity", (n, n)))
    feats = None if features is None else _matrix(features, "features", (n, None))
    if feature_layer not in FEATURE_LAYERS:
        raise ParameterError(f"feature_layer must be one of {FEATURE_LAYERS}; got {feature_layer!r}")
    if feats is None:
        names = ()
    else:
        names = tuple(str(x) for x in (feature_names if feature_names is not None
                                       else [f"feature_{k}" for k in range(1, feats.shape[1] + 1)]))
        if len(names) != feats.shape[1]:
            raise ParameterError(f"feature_names needs {feats.shape[1]} names; got {len(names)}")
    return ItemPatterns(labels, sim, feats, names, feature_layer)


def similarity_from_distances(distances, *, metric: str = "cosine") -> np.ndarray:
    """Similarity matrix from a distance matrix.

    ``metric="cosine"``: ``similarity = 1 - distance`` (cosine distance is one minus cosine
    similarity; psifr's bundled ``Morton2013`` distances are cosine distances: ``1 - d`` is
    positive semi-definite with unit diagonal, ``1 - d**2 / 2`` is not). ``metric="euclidean"``
    for distances between unit vectors: ``similarity = 1 - distance**2 / 2``.
    """
    d = _matrix(distances, "distances")
    if d.shape[0] != d.shape[1]:
        raise ParameterError(f"distances must be square; got shape {d.shape}")
    if metric == "cosine":
        return 1.0 - d
    if metric == "euclidean":
        return 1.0 - d * d / 2.0
    raise ParameterError(f"metric must be 'cosine' or 'euclidean'; got {metric!r}")


def category_features(categories) -> tuple[np.ndarray, tuple]:
    """One-hot feature vectors of item categories.

    Parameters
    ----------
    categories : sequence, shape (P,)
        Category label of each pool item.

    Returns
    -------
    features : (P, K) float64
        1 in the column of the item's category.
    names : tuple of str
        The K categories, sorted.
    """
    labels = np.asarray(categories).astype(str)
    if labels.ndim != 1 or labels.size == 0:
        raise ParameterError(f"categories must be a non-empty 1-d sequence; got shape {labels.shape}")
    names, index = np.unique(labels, return_inverse=True)
    features = np.zeros((labels.size, names.size))
    features[np.arange(labels.size), index] = 1.0
    return features, tuple(names.tolist())
