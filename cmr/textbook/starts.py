"""Starting points that every default fit polishes from, beside its differential-evolution searches.

Many free-recall subjects have their maximum-likelihood fit of textbook CMR in a corner of the
parameter space (``T`` on its lower bound, small ``Lfc``, ``Lcf``, ``P1``, ``B_start`` near 1),
at the end of a narrow curved ridge, and a second maximum with a large basin elsewhere; a
differential-evolution search often ends on the second one, and two searches then agree on it.
A local search started from where a search of *another* subject ended crosses into the first
basin: on psifr's Morton2013 (Morton & Polyn 2016; 40 subjects, the ten parameters of
:data:`cmr.STANDARD_FREE`) a polish from another subject's search end reached every subject's
best known maximum, and raised six subjects' best known maxima by up to 4.2 log units.

:data:`START_LIBRARY` holds ten points. Eight are where searches of Morton2013 subjects ended,
from both regions, chosen greedily among the 40 subjects' search ends so that a polish from one
of them reaches the best known maximum of every Morton2013 subject (chosen without a subject,
eight starts still reach 38 of 40 held-out subjects). PEERS subjects (psifr's peers_notask,
126 subjects) have a second corner the Morton2013 points miss: ``T`` on its bound with
``B_start`` at 0 (16 of them). The last two rows are maxima of two PEERS subjects there, chosen
greedily among 24 PEERS maxima (16 in that corner, 8 spread over the rest) so that the library
reaches the most of all 166 subjects; chosen without the held-out subject, the library and that
subject's first search reach 164 of the 166, and with its later searches 165
(docs/fitting-recall.md has the numbers). They are starting points, not priors: the
fit's maximum is whatever the polishes from them and the searches find; a start that is
inadmissible for a spec (a tied parameter out of range) is skipped. Each polish costs about 700
evaluations of a Morton2013 subject, a twentieth of one search.
"""
from __future__ import annotations

import numpy as np

__all__ = ["START_LIBRARY", "START_NAMES", "library_starts"]

#: the parameters of each row of :data:`START_LIBRARY`
START_NAMES = ("Lfc", "Lcf", "P1", "P2", "B_enc", "B_start", "B_rec", "T", "X1", "X2")

#: where searches of ``FitSpec()`` ended for Morton2013 subjects 4, 43, 5, 3, 29, 1, 8 and 28 (A and D
#: fixed at cymr's values): six of them those subjects' best known maxima (``T`` on its bound), two
#: (subjects 43 and 5) a second maximum in the middle of the space, which is where other subjects'
#: maxima lie; then the best known maxima of peers_notask subjects 75 and 107 (``T`` on its bound,
#: ``B_start`` 0)
START_LIBRARY = np.array([
    (0.01560883, 0.00921581, 0.02694424, 0.46523953, 0.67777909, 0.99581002, 0.86124896, 0.01, 0.00854269, 0.2143478),
    (0.42192117, 0.20191036, 0.87611977, 0.81692152, 0.81999835, 0.5892767, 0.79705619, 0.30333245, 0.00095072,
     0.40256168),
    (0.1512427, 0.1802904, 0.79868531, 0.98210672, 0.60015927, 0.15476257, 0.66383092, 0.15082979, 0.00180746,
     0.29262457),
    (0.00956048, 0.00876288, 0.01991444, 0.79130548, 0.70857841, 0.99463776, 0.90609032, 0.01, 0.00487147, 0.31319752),
    (0.00662227, 0.00624914, 0.02471408, 0.90681927, 0.73083191, 0.99680432, 0.82394257, 0.01, 0.00433183, 0.27140447),
    (0.01217893, 0.00606844, 0.01241249, 0.62060369, 0.78049393, 0.99731907, 0.8557209, 0.01, 0.00398114, 0.30701031),
    (0.00840792, 0.00465756, 0.01067016, 0.24923563, 0.7423454, 0.99807937, 0.75725935, 0.01, 0.00773259, 0.32802832),
    (0.01189617, 0.00939672, 0.00235059, 0.8610738, 0.70828772, 0.99752751, 0.89039532, 0.01000003, 0.0044935,
     0.26349662),
    (0.1523077, 0.18716146, 0.06109672, 0.23916303, 0.17661089, 0.0, 0.59873042, 0.01, 0.0108238, 0.43278638),
    (0.0098087, 0.01257001, 0.95718442, 4.11279131, 0.74339541, 0.0, 0.96936093, 0.01, 0.00548881, 0.35294828),
], dtype=np.float64)


def library_starts(spec) -> list[np.ndarray]:
    """The library's points as free values of ``spec`` (a ``ModelSpec``): distinct, inside the bounds.

    A free parameter the library does not name takes the spec's template value (its fixed or
    default value); a spec that frees none of the library's parameters gets no starts.
    """
    names = list(spec.free)
    if not set(names) & set(START_NAMES):
        return []
    from .parameters import MODEL_PARAMETER_NAMES

    template = dict(zip(MODEL_PARAMETER_NAMES, spec.template))
    low = np.array([b[0] for b in spec.bounds], dtype=np.float64)
    high = np.array([b[1] for b in spec.bounds], dtype=np.float64)
    points: list[np.ndarray] = []
    for row in START_LIBRARY:
        values = dict(zip(START_NAMES, row))
        x = np.clip(np.array([values.get(n, template.get(n, np.nan)) for n in names], dtype=np.float64), low, high)
        if np.isfinite(x).all() and not any(np.array_equal(x, p) for p in points):
            points.append(x)
    return points
