"""Plain numpy reference of CMR on lists that study an item more than once (no numba, no shortcuts).

One list at a time, with an explicit network: one context unit per item unit of the pool and a
start unit, dense weight rows, the equations as docs/equations.md writes them. Repeated items
(docs/repetition.md): one item unit per distinct item; each presentation integrates the item's
full input ``M_fc[i] = M_fc_pre[i] + M_fc_exp[i]`` (what it learned at earlier presentations
included) and then learns ``M_fc_exp[i] += Lfc c`` and ``M_cf_exp[i] += (Lcf + P1 exp(-P2 p)) c``
at serial position ``p`` (0-based); a recall of the item integrates its full ``M_fc`` row, and
only distinct items not yet recalled compete. It is the oracle of the compiled kernels
(``tests/cmr/test_repeated_items_model.py``).
"""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np

__all__ = ["ReferenceNetwork", "repeated_event_probabilities", "repeated_log_likelihood", "repeated_simulation"]

SUPPORT_FLOOR = 1e-6
STOP_FLOOR = 1e-6
EVENT_FLOOR = 1e-5


class ReferenceNetwork:
    """Localist or semantic CMR with explicit units for one list (see the module docstring)."""

    def __init__(self, params: Mapping[str, float], presentation, pool_size=None, similarity=None, pool_rows=None):
        self.p = {name: float(value) for name, value in params.items()}
        for name in ("Sfc", "Scf", "Sff"):
            self.p.setdefault(name, 0.0)
        self.presentation = [int(v) for v in presentation]  # 1-based first positions
        self.items = sorted(set(self.presentation))  # distinct items, named by first position
        d = len(self.items)
        units = d if pool_size is None and similarity is None else (
            int(pool_size) if similarity is None else np.asarray(similarity).shape[0])
        self.units = units
        self.sim = np.zeros((units, units)) if similarity is None else np.asarray(similarity, dtype=float)
        rows = range(d) if pool_rows is None else pool_rows
        self.unit_of = {item: int(r) for item, r in zip(self.items, rows)}  # item -> its pool unit
        p = self.p
        self.fc_pre, self.cf_pre = {}, {}
        for item in self.items:
            r = self.unit_of[item]
            one = np.zeros(units + 1)
            one[:units] = 1.0
            own = np.zeros(units + 1)
            own[r] = 1.0
            sem = np.zeros(units + 1)
            sem[:units] = self.sim[r]
            self.fc_pre[item] = p["Afc"] * one + p["Dfc"] * own + p["Sfc"] * sem
            self.cf_pre[item] = p["Acf"] * one + p["Dcf"] * own + p["Scf"] * sem
        self.fc_exp = {item: np.zeros(units + 1) for item in self.items}
        self.cf_exp = {item: np.zeros(units + 1) for item in self.items}
        self.c = np.zeros(units + 1)
        self.c[units] = 1.0  # the start unit

    def integrate(self, c_in, beta):
        norm = np.linalg.norm(c_in)
        if norm > 0:
            c_in = c_in / norm
        cdot = float(self.c @ c_in)
        rho = math.sqrt(1.0 + beta * beta * (cdot * cdot - 1.0)) - beta * cdot
        self.c = rho * self.c + beta * c_in

    def study(self):
        p = self.p
        for position, item in enumerate(self.presentation):
            self.integrate(self.fc_pre[item] + self.fc_exp[item], p["B_enc"])
            self.fc_exp[item] = self.fc_exp[item] + p["Lfc"] * self.c
            rate = p["Lcf"] + p["P1"] * math.exp(-p["P2"] * position)
            self.cf_exp[item] = self.cf_exp[item] + rate * self.c
        start = np.zeros(self.units + 1)
        start[self.units] = 1.0
        self.integrate(start, p["B_start"])

    def stop(self, output, n_left):
        if n_left == 0:
            return 1.0
        value = self.p["X1"] * math.exp(self.p["X2"] * output)
        return min(max(value, STOP_FLOOR), 1.0 - STOP_FLOOR)

    def choice(self, recalled, previous):
        """Choice probability of each distinct item not yet recalled (dict item -> p)."""
        support = {}
        for item in self.items:
            if item in recalled:
                continue
            a = float((self.cf_pre[item] + self.cf_exp[item]) @ self.c)
            if previous is not None:
                a += self.p["Sff"] * self.sim[self.unit_of[previous], self.unit_of[item]]
            support[item] = max(a, SUPPORT_FLOOR)
        top = max(support.values())
        weights = {item: math.exp(2.0 * (a - top) / self.p["T"]) for item, a in support.items()}
        total = sum(weights.values())
        return {item: w / total for item, w in weights.items()}

    def recall(self, item):
        self.integrate(self.fc_pre[item] + self.fc_exp[item], self.p["B_rec"])

    def simulate(self, rng) -> list[int]:
        """Study the list, then one recall sequence (first positions), drawing as the compiled simulator does.

        Before each output one uniform draw for the stop; otherwise one uniform draw walked along
        the cumulative choice probabilities of the candidates in order of first position.
        """
        self.study()
        out, recalled, previous = [], set(), None
        for output in range(len(self.items)):
            if rng.random() < self.stop(output, len(self.items) - len(recalled)):
                break
            probabilities = self.choice(recalled, previous)
            draw, cum, chosen = rng.random(), 0.0, None
            for item in sorted(probabilities):
                chosen = item
                cum += probabilities[item]
                if draw < cum:
                    break
            out.append(chosen)
            recalled.add(chosen)
            self.recall(chosen)
            previous = chosen
        return out


def repeated_event_probabilities(params, presentation, recalls, *, pool_size=None, similarity=None,
                                 pool_rows=None) -> np.ndarray:
    """Probability of each scored event of one list: its correct first recalls, then the stop.

    Parameters
    ----------
    params : mapping
        The 14 textbook parameters (cymr names), optionally ``Sfc, Scf, Sff``.
    presentation : sequence of int
        For each study position, the 1-based position of its item's first presentation.
    recalls : sequence of int
        Recalls as first positions in output order; ``0`` ends the list, ``-1`` intrusions and
        repeats are skipped (cymr's rules).
    pool_size : int, optional
        Item units of a localist pool-sized context (default: one per distinct item).
    similarity : (P, P) array, optional
        Semantic CMR: the pool's similarities; ``pool_rows`` gives each distinct item's row (in
        order of first presentation).
    """
    net = ReferenceNetwork(params, presentation, pool_size, similarity, pool_rows)
    net.study()
    out, recalled, previous = [], set(), None
    for value in list(recalls) + [0]:
        value = int(value)
        if value == 0:
            break
        if value < 0 or value in recalled:
            continue
        p_stop = net.stop(len(out), len(net.items) - len(recalled))
        out.append(net.choice(recalled, previous)[value] * (1.0 - p_stop))
        recalled.add(value)
        net.recall(value)
        previous = value
    out.append(net.stop(len(out), len(net.items) - len(recalled)))
    return np.array(out)


def repeated_log_likelihood(params, presentation, recalls, **options) -> float:
    """Floored log-likelihood of one list (each event clipped to [1e-5, 1], as cymr)."""
    probabilities = repeated_event_probabilities(params, presentation, recalls, **options)
    return float(np.sum(np.log(np.clip(probabilities, EVENT_FLOOR, 1.0))))


def repeated_simulation(params, presentation, rng, **options) -> list[int]:
    """One simulated recall sequence (first positions): :meth:`ReferenceNetwork.simulate`."""
    return ReferenceNetwork(params, presentation, **options).simulate(rng)
