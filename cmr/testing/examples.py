"""A readable textbook CMR in plain numpy, written the way a user's port would be.

:class:`PlainCMR` follows docs/equations.md one method per equation (Polyn, Norman & Kahana
2009; Morton & Polyn 2016; cymr's ``config_loc_cmr`` with a list-sized context). It is slow
and meant to be read: the worked example of docs/testing-cmr.md wraps it as "your model", and
the mutation tests derive broken variants from it by overriding one method each.

Its interface mirrors jaxcmr's memory-search models: :meth:`study` one item at a time (by
label, in any order), :meth:`start_recall`, then :meth:`outcome_probabilities` (stop first,
then items 1..n) and :meth:`recall` of one item.
"""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np

# cymr's floors: least support of an item, P(stop) clipped to [pmin, 1 - pmin], and every
# event probability clipped to [1e-5, 1] before the log
from ..textbook._kernels import EVENT_FLOOR, STOP_FLOOR, SUPPORT_FLOOR
from ..textbook.parameters import validate_parameters

__all__ = ["PlainCMR"]


class PlainCMR:
    """Textbook localist CMR over one list of ``list_length`` items labelled 1..n.

    Context has one unit per item (indexed by label) and a start unit (index 0 holds the
    start unit; item ``i`` has unit ``i``).

    Parameters
    ----------
    params : mapping
        The 14 parameters in cymr's names (``cmr.PARAMETER_NAMES``).
    list_length : int
    """

    def __init__(self, params: Mapping[str, float], list_length: int):
        self.p = validate_parameters(params)
        self.n = int(list_length)
        self.context = self.unit(0)  # context starts as the start unit
        self.studied: dict[int, np.ndarray] = {}  # item -> context right after it was studied
        self.position: dict[int, int] = {}  # item -> 0-based serial position
        self.recalled: list[int] = []

    def unit(self, index: int) -> np.ndarray:
        vector = np.zeros(self.n + 1)
        vector[index] = 1.0
        return vector

    # --- equations ---------------------------------------------------------------------

    def item_input(self, item: int) -> np.ndarray:
        """Unit-length input of an item to context: (M_fc_pre + M_fc_exp) f_item, normalised."""
        c_in = np.full(self.n + 1, self.p["Afc"])
        c_in[0] = 0.0  # the start unit has no pre-experimental input from items
        c_in[item] += self.p["Dfc"]
        if item in self.studied:
            c_in = c_in + self.p["Lfc"] * self.studied[item]
        return self.normalise(c_in)

    def normalise(self, vector: np.ndarray) -> np.ndarray:
        norm = np.linalg.norm(vector)
        return vector / norm if norm > 0 else vector

    def rho(self, c_in: np.ndarray, beta: float) -> float:
        """The factor that keeps context at unit length (Howard & Kahana 2002)."""
        dot = float(self.context @ c_in)
        return math.sqrt(1.0 + beta * beta * (dot * dot - 1.0)) - beta * dot

    def integrate(self, c_in: np.ndarray, beta: float) -> None:
        """c <- rho c + beta c_in."""
        self.context = self.rho(c_in, beta) * self.context + beta * c_in

    def primacy(self, item: int) -> float:
        """Context-to-item learning rate Lcf + P1 exp(-P2 i) at the item's serial position i."""
        return self.p["Lcf"] + self.p["P1"] * math.exp(-self.p["P2"] * self.position[item])

    def support(self, item: int) -> float:
        """a = (M_cf_pre + M_cf_exp)[item] . c, floored."""
        weights = np.full(self.n + 1, self.p["Acf"])
        weights[0] = 0.0
        weights[item] += self.p["Dcf"]
        weights = weights + self.primacy(item) * self.studied[item]
        return max(float(weights @ self.context), SUPPORT_FLOOR)

    def stop_probability(self) -> float:
        if len(self.recalled) == self.n:
            return 1.0
        p = self.p["X1"] * math.exp(self.p["X2"] * len(self.recalled))
        return min(max(p, STOP_FLOOR), 1.0 - STOP_FLOOR)

    def choice_probabilities(self) -> dict[int, float]:
        """Softmax exp(2 a / T) over the items not recalled yet."""
        left = [item for item in range(1, self.n + 1) if item not in self.recalled]
        support = np.array([self.support(item) for item in left])
        weights = np.exp(2.0 * (support - support.max()) / self.p["T"]) if left else support
        return dict(zip(left, weights / weights.sum()))

    # --- the model's life --------------------------------------------------------------

    def study(self, item: int) -> None:
        """Present ``item`` (a label 1..n): drift context with B_enc, then learn."""
        self.integrate(self.item_input(item), self.p["B_enc"])
        self.position[item] = len(self.position)
        self.studied[item] = self.context.copy()

    def start_recall(self) -> None:
        """Reinstate the start-of-list context with B_start."""
        self.integrate(self.unit(0), self.p["B_start"])

    def outcome_probabilities(self) -> np.ndarray:
        """Probabilities of every next event, shape (n + 1,): stop, then items 1..n."""
        p_stop = self.stop_probability()
        out = np.zeros(self.n + 1)
        out[0] = p_stop
        for item, p in self.choice_probabilities().items():
            out[item] = (1.0 - p_stop) * p
        return out

    def recall(self, item: int) -> None:
        """Recall ``item``: drift context towards its input with B_rec."""
        self.recalled.append(item)
        self.integrate(self.item_input(item), self.p["B_rec"])

    # --- the callables of the invariant suite (cmr.testing.RecallModel) ------------------

    @classmethod
    def sequence_probabilities(cls, params, sequence, list_length, presentation=None) -> np.ndarray:
        """Every event probability along one recall sequence, (len(sequence) + 1, n + 1)."""
        model = cls(params, list_length)
        for item in range(1, list_length + 1) if presentation is None else presentation:
            model.study(int(item))
        model.start_recall()
        rows = [model.outcome_probabilities()]
        for item in sequence:
            model.recall(int(item))
            rows.append(model.outcome_probabilities())
        return np.array(rows)

    @classmethod
    def log_likelihood(cls, params, recalls, list_length, presentation=None) -> np.ndarray:
        """Log-probability of each row of a recall matrix (0 padding) and its final stop."""
        out = []
        for row in np.asarray(recalls):
            sequence = row[row > 0]
            probs = cls.sequence_probabilities(params, sequence, list_length, presentation)
            events = np.append(probs[np.arange(sequence.size), sequence], probs[-1, 0])
            out.append(cls.log_probability(events).sum())
        return np.array(out)

    @staticmethod
    def log_probability(events: np.ndarray) -> np.ndarray:
        """log of event probabilities, each clipped to [1e-5, 1] first (as cymr)."""
        return np.log(np.clip(events, EVENT_FLOOR, 1.0))

    @classmethod
    def simulate(cls, params, list_length, n_trials, rng) -> np.ndarray:
        """Recall matrix (n_trials, list_length) drawn event by event from the model."""
        out = np.zeros((n_trials, list_length), dtype=np.int64)
        for trial in range(n_trials):
            model = cls(params, list_length)
            for item in range(1, list_length + 1):
                model.study(item)
            model.start_recall()
            for k in range(list_length):
                event = int(rng.choice(list_length + 1, p=model.outcome_probabilities()))
                if event == 0:
                    break
                out[trial, k] = event
                model.recall(event)
        return out
