"""The top heads by a score: one ranking for every head set the study chooses.

Ablation sets, induction controls, the composition test's targets, the top-N table of the
published profiles and the command-line summaries all rank heads with :func:`rank_heads`, so
they agree on direction, on heads without a score and on ties. :func:`top_heads` is the
``(layer, head)`` list of a dataset's best heads; :func:`cmr_like_heads` chooses the top
CMR-like heads under either definition of :mod:`cmr.cmr_like` (the study's, or strict);
:func:`composing_heads` holds the one rule that keeps layer 0 out of a ranking (the
composition test's targets, which need an earlier head to compose with).
"""
from __future__ import annotations

import numpy as np

from cmr.checks import integer
from cmr.deprecation import keyword_only
from cmr.errors import ParameterError, SchemaError

__all__ = ["rank_heads", "top_heads", "composing_heads", "cmr_like_heads", "ranked_head_set", "CMR_LIKE_DEFINITIONS",
           "FIRST_COMPOSING_LAYER"]

#: the definitions of "CMR-like" a head set can be ranked by (``icl-cmr ablate --rank-by``)
CMR_LIKE_DEFINITIONS = ("study", "strict")
#: the first layer whose heads can compose with an earlier head: layer 0 has none before it
FIRST_COMPOSING_LAYER = 1


@keyword_only
def rank_heads(scores, *, n: int | None = None, largest: bool = True) -> np.ndarray:
    """Flat indices of the ``n`` best heads of ``scores``, best first.

    Parameters
    ----------
    scores : array_like of float
        One score per head, any shape: a (layer, head) grid, or heads pooled along one axis.
    n : int, optional
        How many heads to return; all ranked heads when omitted. Fewer than ``n`` come back
        when fewer heads have a finite score: a caller that needs exactly ``n`` checks the length.
    largest : bool
        True ranks the highest score first (e.g. induction score), False the lowest (e.g. CMR
        distance).

    Returns
    -------
    numpy.ndarray of int64
        Indices into ``scores`` flattened in C order; for a (layer, head) grid,
        ``np.unravel_index(order, scores.shape)`` gives the layer and head indices.

    Notes
    -----
    Heads whose score is not finite (NaN, e.g. an unfitted head, or +-inf, e.g. a head
    excluded on purpose) are never ranked. Equal scores keep C order, i.e. (layer, head)
    order on a grid: the sort is stable.
    """
    if n is not None:
        n = integer(n, "n", minimum=0)  # None: all heads
    values = np.asarray(scores, dtype=np.float64).ravel()
    finite = np.flatnonzero(np.isfinite(values))
    key = -values[finite] if largest else values[finite]
    order = finite[np.argsort(key, kind="stable")].astype(np.int64)
    return order if n is None else order[: int(n)]


def composing_heads(scores) -> np.ndarray:
    """A float64 copy of a (layer, head) grid of scores with the layers before
    :data:`FIRST_COMPOSING_LAYER` set to NaN, so :func:`rank_heads` never ranks them: a head of
    layer 0 has no earlier head to compose with (the composition test's targets)."""
    grid = np.array(scores, dtype=np.float64)
    if grid.ndim != 2:
        raise ParameterError(f"scores must be a (layer, head) grid; got shape {grid.shape}")
    grid[:FIRST_COMPOSING_LAYER] = np.nan
    return grid


def _head_grid(dataset, variable):
    """``variable`` of a dataset as a float64 (layer, head) grid with its layer and head labels."""
    if variable not in dataset:
        raise SchemaError(f"dataset has no variable {variable!r}; variables: {', '.join(map(str, dataset.data_vars))}")
    values = dataset[variable]
    extra = [d for d in values.dims if d not in ("layer", "head")]
    if not {"layer", "head"} <= set(values.dims) or any(values.sizes[d] != 1 for d in extra):
        raise SchemaError(
            f"{variable!r} must have dims layer and head (others of size 1) to rank heads; got {dict(values.sizes)}")
    values = values.squeeze(extra, drop=True).transpose("layer", "head")
    return (np.asarray(values.values, dtype=np.float64), np.asarray(values["layer"].values),
            np.asarray(values["head"].values))


@keyword_only
def top_heads(ranked, *, variable: str = "distance", fraction: float = 0.1, n_heads: int | None = None,
              largest: bool = False, composing: bool = False) -> list[tuple[int, int]]:
    """The best heads of a dataset by ``variable``: the study's one way to choose a head set.

    Parameters
    ----------
    ranked : xarray.Dataset
        A dataset whose ``variable`` has dims ``layer`` and ``head`` (other dims, e.g. ``model``
        and ``checkpoint``, of size 1): a ``profile_fit`` ranked by ``distance`` (the top
        CMR-like heads), or a head ``lag_profile`` ranked by ``induction_score`` with
        ``largest=True`` (the top induction heads).
    variable : str
        The score that ranks the heads.
    fraction : float
        Set size as a share of all heads: ``round(fraction * heads)``, at least 1.
    n_heads : int, optional
        Set size, instead of ``fraction``.
    largest : bool
        True: the largest scores first; False (default): the smallest (a distance).
    composing : bool
        Leave out the heads that cannot compose with an earlier head (layer 0,
        :func:`composing_heads`).

    Returns
    -------
    list of (layer, head)
        Best first, by :func:`rank_heads` (heads without a finite score never chosen, ties in
        (layer, head) order).

    Raises
    ------
    cmr.errors.ParameterError
        Fewer heads with a finite score than the set size.
    cmr.errors.SchemaError
        No ``variable``, or not a (layer, head) grid.
    """
    grid, layers, heads = _head_grid(ranked, variable)
    if composing:
        grid = composing_heads(grid)
    size = integer(n_heads, "n_heads", minimum=1) if n_heads is not None else max(
        1, int(round(float(fraction) * grid.size)))
    order = rank_heads(grid, largest=largest)
    if size > order.size:
        raise ParameterError(f"cannot choose {size} heads: {order.size} of {grid.size} heads have a finite {variable}")
    rows, cols = np.unravel_index(order[:size], grid.shape)
    return [(int(layers[r]), int(heads[c])) for r, c in zip(rows, cols)]


@keyword_only
def cmr_like_heads(ranked, *, definition: str = "study", fraction: float = 0.1,
                   n_heads: int | None = None) -> tuple[list[tuple[int, int]], list[str]]:
    """The top CMR-like heads under one definition, best (smallest CMR distance) first.

    Parameters
    ----------
    ranked : xarray.Dataset
        ``study``: any dataset with a per-head ``distance`` (a ``profile_fit`` of head profiles,
        or a ``profile_null``). ``strict``: a ``profile_null`` dataset
        (:func:`cmr.null_models.cmr_like_null`, ``icl-cmr null``), whose ``cmr_like_strict`` says
        which heads pass the strict definition.
    definition : {"study", "strict"}
        ``study``: the study's top set, the heads with the smallest CMR distance. ``strict``: the
        heads that pass the strict definition, smallest distance first; when fewer pass than the
        set size, the set is those heads alone (a note says so), never topped up with heads that
        fail it.
    fraction : float
        Set size as a share of all heads (``round(fraction * heads)``, at least 1).
    n_heads : int, optional
        Set size, instead of ``fraction``.

    Returns
    -------
    heads : list of (layer, head)
    notes : list of str
        What the caller should tell the user (a smaller strict set, a criterion not applied).
    """
    if definition not in CMR_LIKE_DEFINITIONS:
        raise ParameterError(f"definition must be one of {', '.join(CMR_LIKE_DEFINITIONS)}; got {definition!r}")
    distance, layers, heads = _head_grid(ranked, "distance")
    size = integer(n_heads, "n_heads", minimum=1) if n_heads is not None else max(
        1, int(round(float(fraction) * distance.size)))
    notes = []
    if definition == "strict":
        if "cmr_like_strict" not in ranked:
            raise SchemaError("ranking by the strict definition needs a profile_null dataset with cmr_like_strict "
                              "(icl-cmr null HEADS.nc -o NULL.nc); this dataset is a "
                              f"{ranked.attrs.get('icl_cmr_kind', 'dataset without a kind')}")
        strict, _, _ = _head_grid(ranked, "cmr_like_strict")
        distance = np.where(strict == 1, distance, np.nan)
        mass = ranked.attrs.get("mass_criterion", "")
        if mass != "applied":
            notes.append(f"the attention-mass criterion was not applied ({mass})")
    order = rank_heads(distance, largest=False)
    if definition == "strict":
        if order.size == 0:
            raise ParameterError(f"no head passes the strict definition of CMR-like "
                                 f"({ranked.attrs.get('strict_criteria', 'see docs/null-models.md')})")
        if order.size < size:
            notes.append(f"only {order.size} heads pass the strict definition: the set has {order.size} heads, "
                         f"not {size}")
            size = order.size
    elif size > order.size:
        raise ParameterError(f"cannot choose {size} heads: {order.size} of {distance.size} heads have a finite distance")
    rows, cols = np.unravel_index(order[:size], distance.shape)
    return [(int(layers[r]), int(heads[c])) for r, c in zip(rows, cols)], notes


@keyword_only
def ranked_head_set(ranked, *, rank_by: str = "study", fraction: float = 0.1,
                    n_heads: int | None = None) -> tuple[list[tuple[int, int]], str, list[str]]:
    """The target head set of a causal test, read from a fits (or heads) dataset by ``rank_by``.

    ``rank_by`` is a definition of CMR-like (:data:`CMR_LIKE_DEFINITIONS`, by
    :func:`cmr_like_heads`) or a variable of ``ranked``: ``distance`` and other variables
    smallest first, ``*_score`` variables (``induction_score``) largest first (:func:`top_heads`).
    ``icl-cmr ablate --heads-from`` and ``icl-cmr recall-lm --sets-from`` choose their set here.

    Returns
    -------
    heads : list of (layer, head)
        Best first.
    how : str
        How the set was chosen, in words (``"CMR-like by the study definition, ..."``).
    notes : list of str
        What the caller should tell the user (:func:`cmr_like_heads`).
    """
    size = f"top {int(n_heads)} heads" if n_heads is not None else f"top {float(fraction):g}"
    if rank_by in CMR_LIKE_DEFINITIONS:
        heads, notes = cmr_like_heads(ranked, definition=rank_by, fraction=fraction, n_heads=n_heads)
        return heads, f"CMR-like by the {rank_by} definition, smallest distance first, {size}", notes
    largest = str(rank_by).endswith("_score")
    heads = top_heads(ranked, variable=rank_by, fraction=fraction, n_heads=n_heads, largest=largest)
    return heads, f"{'largest' if largest else 'smallest'} {rank_by}, {size}", []
