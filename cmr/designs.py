"""Study-list designs for simulation: lists with repeated items as Lohnas & Kahana (2014) studied them.

:func:`repetition_design` lays out repeat-free control lists and mixed lists in which some items
are studied twice at distances from massed to 8 items between; ``cmr.simulate_experiment`` then
gives recalls (the embedded ``data/repetition_simulated.csv`` was made so, docs/repetition.md).
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from .checks import seed_of
from .deprecation import renamed_keywords
from .errors import ParameterError

__all__ = ["repetition_design"]

#: distances (second position minus first) of the repeated items: massed (1) to 8 items between (9)
DISTANCES = tuple(range(1, 10))


@renamed_keywords(seed="rng")
def repetition_design(*, n_subjects: int = 6, n_control: int = 4, n_mixed: int = 8, list_length: int = 24,
                      n_repeated: int = 6, rng=0) -> xr.Dataset:
    """Events dataset (no recalls) of control lists and lists with repeated items.

    Each subject studies ``n_control`` repeat-free lists and ``n_mixed`` lists in which
    ``n_repeated`` items are studied twice, in a random order of lists. The repeated items of
    the mixed lists take the distances 1 (massed) to 9 (8 items between) in turn, so every
    spacing bin of Lohnas & Kahana (2014) is filled; their positions are drawn at random, longest
    distance first, the other positions get items studied once. Items are numbered within a
    subject and never studied in two lists.

    Parameters
    ----------
    n_subjects, n_control, n_mixed, list_length, n_repeated : int
        The design (defaults 6, 4, 8, 24 and 6).
    rng : int, numpy.random.Generator or None
        Source of the positions and the order of lists (default 0): an int is the seed; a
        Generator draws one integer seed (``int(rng.integers(2**63))``); None draws one from
        fresh entropy.

    Returns
    -------
    xarray.Dataset
        Kind ``"events"`` with ``presentation_item`` and all-zero ``recalls``: the template of
        :func:`cmr.simulate_experiment`.
    """
    from .checks import is_integer
    from .repetition import from_presentations

    sizes = {"n_subjects": n_subjects, "n_control": n_control, "n_mixed": n_mixed, "list_length": list_length,
             "n_repeated": n_repeated}
    bad = [f"{k}={v!r}" for k, v in sizes.items() if not is_integer(v) or int(v) < (0 if k in ("n_control",
                                                                                               "n_mixed") else 1)]
    if bad or 2 * n_repeated + max(DISTANCES) > list_length + n_repeated or n_control + n_mixed < 1:
        raise ParameterError(f"repetition_design needs whole numbers, at least one list and room for the repeats "
                             f"(2 * n_repeated + 9 <= list_length + n_repeated); got {', '.join(bad) or sizes}")
    rng = np.random.default_rng(seed_of(rng))
    rows, subjects = [], []
    for subject in range(1, n_subjects + 1):
        kinds = rng.permutation(np.repeat([0, 1], [n_control, n_mixed]))
        next_item, mixed_seen = 1, 0
        for kind in kinds:
            order = _positions(rng, list_length, [DISTANCES[(mixed_seen * n_repeated + r) % len(DISTANCES)]
                                                  for r in range(n_repeated)] if kind else [])
            mixed_seen += int(kind)
            rows.append(order + next_item - 1)
            next_item += int(order.max())
            subjects.append(subject)
    pres = np.array(rows, dtype=np.int64)
    return from_presentations(np.zeros((pres.shape[0], 1), dtype=np.int64), pres, subject=np.array(subjects),
                              source="cmr.repetition_design")


def _positions(rng, length: int, distances) -> np.ndarray:
    """Item numbers 1..n by position, items studied twice at ``distances``, in order of first presentation."""
    for _ in range(1000):
        slot = np.zeros(length, dtype=np.int64)  # 0 free, else a pair's id
        for pair, d in enumerate(sorted(distances, reverse=True), start=1):
            free = np.nonzero((slot[:length - d] == 0) & (slot[d:] == 0))[0]
            if free.size == 0:
                break
            first = int(rng.choice(free))
            slot[first] = slot[first + d] = pair
        else:
            break
    else:  # pragma: no cover - the sizes are checked above
        raise ParameterError(f"cannot place repeats at distances {distances} in {length} positions")
    items = np.zeros(length, dtype=np.int64)
    number, seen = 0, {}
    for p in range(length):  # number items by first presentation
        if slot[p] == 0 or slot[p] not in seen:
            number += 1
            if slot[p]:
                seen[slot[p]] = number
            items[p] = number
        else:
            items[p] = seen[slot[p]]
    return items
