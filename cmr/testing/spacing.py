"""Simulated free recall of lists with massed and spaced repeats, as in Lohnas & Kahana (2014).

A mixed list has 40 study positions and 28 distinct items: 16 studied once, 3 studied twice in
a row (massed) and 3 studied twice at each spacing bin 1-2, 3-5 and 6-8 (the number of
positions between the two presentations), placed at random. :func:`repetition_table` simulates
subjects studying and recalling such lists with textbook CMR (or with the first-presentation
variant below) and returns a psifr long table, which is how ``data/repetition_simulated.csv``
is made::

    python -m cmr.testing.spacing data/repetition_simulated.csv

The variant ``first_weight < 1`` learns a later presentation's item-to-context association
with ``first_weight * Lfc`` instead of ``Lfc``, so recalling a repeated item reinstates mostly
the context of its first presentation: data with a first-presentation bias that textbook CMR
(``first_weight = 1``) cannot produce. It runs the plain numpy network of
:mod:`cmr.testing.repeated` (slow, obvious); ``first_weight = 1`` runs the compiled simulator.
"""
from __future__ import annotations

import argparse
import math

import numpy as np
import pandas as pd

from ..checks import as_generator
from ..errors import ParameterError
from .repeated import _Network

__all__ = ["SPACING_BINS", "DATA_PARAMETERS", "lohnas_kahana_list", "repetition_table", "main"]

#: spacing (positions between the two presentations) of each repeated condition
SPACING_BINS = {"massed": (0, 0), "1-2": (1, 2), "3-5": (3, 5), "6-8": (6, 8)}

#: textbook CMR parameters of the embedded simulated set (about half the items recalled)
DATA_PARAMETERS = {
    "Lfc": 0.3, "Lcf": 0.2, "P1": 1.5, "P2": 1.0, "B_enc": 0.6, "B_start": 0.2, "B_rec": 0.8, "T": 0.25,
    "X1": 0.01, "X2": 0.25, "Afc": 0.0, "Acf": 0.0, "Dfc": 0.7, "Dcf": 0.8,
}


def lohnas_kahana_list(rng=None, *, list_length: int = 40, per_bin: int = 3, max_tries: int = 1000) -> np.ndarray:
    """One mixed list: for each study position, the 1-based position of its item's first presentation.

    ``per_bin`` items of each of :data:`SPACING_BINS` are presented twice; the remaining
    positions hold items presented once. Positions and spacings are drawn from ``rng``.
    """
    rng = as_generator(rng)
    n_repeated = per_bin * len(SPACING_BINS)
    if 2 * n_repeated > list_length:
        raise ParameterError(f"list_length ({list_length}) is too short for {n_repeated} repeated items")
    for _ in range(max_tries):
        slots = np.zeros(list_length, dtype=np.int64)  # 0 free, else the pair's id
        bins = [b for b in SPACING_BINS.values() for _ in range(per_bin)]
        ok = True
        for pair, index in enumerate(rng.permutation(len(bins)), start=1):
            low, high = bins[index]
            options = [(p, p + s + 1) for s in range(low, high + 1) for p in range(list_length - s - 1)
                       if slots[p] == 0 and slots[p + s + 1] == 0]
            if not options:
                ok = False
                break
            first, second = options[rng.integers(len(options))]
            slots[first] = slots[second] = pair
        if ok:
            break
    else:
        raise ParameterError(f"no placement of {n_repeated} repeated items found in {max_tries} tries")
    presentation = np.arange(1, list_length + 1, dtype=np.int64)
    for pair in range(1, n_repeated + 1):
        first, second = np.flatnonzero(slots == pair)
        presentation[second] = first + 1
    return presentation


class _FirstWeighted(_Network):
    """The numpy network with a later presentation's M_fc learning scaled by ``first_weight``."""

    def __init__(self, params, presentation, first_weight):
        super().__init__(params, presentation)
        self.first_weight = float(first_weight)

    def study(self):
        p = self.p
        seen = set()
        for position, item in enumerate(self.presentation):
            self.integrate(self.fc_pre[item] + self.fc_exp[item], p["B_enc"])
            weight = self.first_weight if item in seen else 1.0
            seen.add(item)
            self.fc_exp[item] = self.fc_exp[item] + weight * p["Lfc"] * self.c
            rate = p["Lcf"] + p["P1"] * math.exp(-p["P2"] * position)
            self.cf_exp[item] = self.cf_exp[item] + rate * self.c
        start = np.zeros(self.units + 1)
        start[self.units] = 1.0
        self.integrate(start, p["B_start"])


def _simulate_weighted(params, presentation, first_weight, rng) -> list[int]:
    net = _FirstWeighted(params, presentation, first_weight)
    net.study()
    out, recalled, previous = [], set(), None
    for output in range(len(net.items)):
        if rng.random() < net.stop(output, len(net.items) - len(recalled)):
            break
        probabilities = net.choice(recalled, previous)
        items = sorted(probabilities)
        chosen = items[min(int(np.searchsorted(np.cumsum([probabilities[i] for i in items]), rng.random(),
                                               side="right")), len(items) - 1)]
        out.append(chosen)
        recalled.add(chosen)
        net.recall(chosen)
        previous = chosen
    return out


def repetition_table(params=None, *, n_subjects: int = 4, n_lists: int = 12, rng=0, first_weight: float = 1.0,
                     list_length: int = 40, per_bin: int = 3) -> pd.DataFrame:
    """psifr long table of simulated subjects studying and recalling mixed repetition lists.

    Parameters
    ----------
    params : mapping, optional
        Textbook CMR parameters (default :data:`DATA_PARAMETERS`), shared by the subjects.
    n_subjects, n_lists : int
        Subjects (labelled 1..n) and lists per subject (numbered 1..n).
    rng : numpy.random.Generator or int or None
        Source of randomness; the same seed gives the same table.
    first_weight : float
        1 for textbook CMR; below 1 the first-presentation variant (module docstring).
    list_length, per_bin : int
        Study positions per list, repeated items per spacing bin.

    Returns
    -------
    pandas.DataFrame
        Columns ``subject, list, trial_type, position, item``; items are words ``w0001, ...``
        numbered per subject, a repeated item has one name at both its positions, and a recall
        names the item it reports.
    """
    from .. import simulate_recalls

    rng = as_generator(rng)
    params = dict(DATA_PARAMETERS if params is None else params)
    if not 0.0 <= float(first_weight) <= 1.0:
        raise ParameterError(f"first_weight must be in [0, 1]; got {first_weight!r}")
    rows = []
    for subject in range(1, n_subjects + 1):
        presentation = np.array([lohnas_kahana_list(rng, list_length=list_length, per_bin=per_bin)
                                 for _ in range(n_lists)])
        if first_weight == 1.0:
            recalls = simulate_recalls(params, list_length, n_lists, rng=rng, presentation=presentation)
        else:
            recalls = np.zeros((n_lists, list_length), dtype=np.int64)
            for t in range(n_lists):
                out = _simulate_weighted(params, presentation[t], first_weight, rng)
                recalls[t, :len(out)] = out
        counter = 0
        for t in range(n_lists):
            names = {}
            for position, first in enumerate(presentation[t], start=1):
                if first not in names:
                    counter += 1
                    names[first] = f"w{counter:04d}"
                rows.append((subject, t + 1, "study", position, names[first]))
            for output, first in enumerate(recalls[t][recalls[t] > 0], start=1):
                rows.append((subject, t + 1, "recall", output, names[int(first)]))
    return pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item"])


def main(argv=None) -> int:
    """Write the simulated repetition set: ``python -m cmr.testing.spacing OUT.csv``."""
    parser = argparse.ArgumentParser(prog="python -m cmr.testing.spacing", description=main.__doc__)
    parser.add_argument("out", help="CSV file to write (psifr long format)")
    parser.add_argument("--subjects", type=int, default=4)
    parser.add_argument("--lists", type=int, default=12)
    parser.add_argument("--seed", type=int, default=2014)
    parser.add_argument("--first-weight", type=float, default=1.0)
    args = parser.parse_args(argv)
    table = repetition_table(n_subjects=args.subjects, n_lists=args.lists, rng=args.seed,
                             first_weight=args.first_weight)
    from ..io import write_table

    write_table(table, args.out)  # atomic, and text cells safe in a spreadsheet like every CSV written
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
