"""Named constants of the toolkit, in one place.

The numbers of Ji-An, Zhou, Benna & Mattar (NeurIPS 2024) that define the study's procedure,
and the conventions every analysis shares. Modules import them from here; none re-states them.
"""
from __future__ import annotations

__all__ = [
    "CMR_LIKE_DISTANCE",
    "PAPER_LAGS",
    "RECALL_LAGS",
    "STUDY_LIST_LENGTH",
    "STUDY_START_POSITIONS",
    "STUDY_N_TRIALS",
    "STUDY_MAX_RECALLS",
    "STUDY_MAX_LAG",
    "HEAD_DIMS",
    "MAX_INTRUSION_SHARE",
    "INTRUSION_CHECK_MIN_RECALLS",
    "AT_BOUND_TOLERANCE",
    "MIN_EVENTS_PER_PARAMETER",
    "CONVERGENCE_TOLERANCE",
    "STRICT_MASS_RATIO",
    "STRICT_FORWARD_EFFECT",
]

#: The study's threshold on the CMR distance below which a unit is called "CMR-like". A
#: distance divides by the unit's own variance, so report it with a null, never alone.
CMR_LIKE_DISTANCE = 0.5

#: The study's fitting window for attention-head profiles: lags -5..+5.
PAPER_LAGS = tuple(range(-5, 6))

#: The same window for recall lag-CRPs, whose lag 0 is undefined (an item cannot follow itself).
RECALL_LAGS = tuple(lag for lag in PAPER_LAGS if lag != 0)

#: Items per studied list of the paper's CMR variant (the heads' prompts also use 100 words).
STUDY_LIST_LENGTH = 100

#: The study's recall start positions s0 = 0..19, as 1-based serial positions.
STUDY_START_POSITIONS = tuple(range(1, 21))

#: Monte Carlo trials per start position of the study's saved grid.
STUDY_N_TRIALS = 500

#: Cap on recalls per trial of the study's saved grid.
STUDY_MAX_RECALLS = 50

#: The study's lag histogram covers -8..+8.
STUDY_MAX_LAG = 8

#: Widest lag any analysis accepts in a lag window (``-MAX_LAG..MAX_LAG``), unless its lists or
#: contexts are longer: lags beyond a list are kept (zero counts, so profiles of lists of
#: different lengths share a window), but a window of 10**12 lags would need terabytes.
MAX_LAG = 10_000

#: Unit dims of attention-head datasets, in order.
HEAD_DIMS = ("model", "checkpoint", "layer", "head")

#: A recall table whose share of recalls matching no studied item exceeds this is refused by
#: default: real free-recall data have far fewer intrusions (psifr's Morton2013: 5 %), so such
#: a table nearly always means recalls typed differently from the study list.
MAX_INTRUSION_SHARE = 0.5

#: Tables with fewer recalls than this are not checked against MAX_INTRUSION_SHARE: a share of
#: a few recalls says little, and small synthetic tables may be mostly intrusions on purpose.
INTRUSION_CHECK_MIN_RECALLS = 100

#: A recall fit's estimate lies "at a bound" when it is within this share of its search range
#: of the lower or upper bound: the likelihood still rose toward the bound, so the best value
#: may lie beyond it and the estimate reports the search range, not the data.
AT_BOUND_TOLERANCE = 1e-3

#: A recall fit unit with fewer scored events (correct first recalls plus stops) than this many
#: per free parameter is flagged: the usual floor of events per estimated parameter (Peduzzi et
#: al., 1996, J Clin Epidemiol 49:1373), below which maximum-likelihood estimates are biased and
#: AIC/BIC's large-sample approximations do not hold.
MIN_EVENTS_PER_PARAMETER = 10

#: A maximum-likelihood fit has converged when its best two independent restarts (searches
#: from different seeds) reach log-likelihoods within this many log units of each other: two
#: searches that end on the same maximum are the evidence that no better one was missed. 0.1
#: log units is a likelihood ratio of 1.1, far below any AIC or BIC difference read as
#: evidence (2 log units of AIC per parameter).
CONVERGENCE_TOLERANCE = 0.1

#: Strict "CMR-like", attention floor: a head's attention probability mass on lags -5..5
#: (:data:`PAPER_LAGS`) must be at least this many times the mass uniform attention over the
#: visible keys puts there (about 0.075 for 100-word lists, so the floor is about 0.23). A head
#: that looks nowhere near the list fits CMR as well as one that follows it: the distance
#: divides by the profile's own variance.
STRICT_MASS_RATIO = 3.0

#: Strict "CMR-like", effect-size floor of forward asymmetry: ``(y(+1) - y(-1))`` divided by the
#: profile's range over the fitting window (offset- and gain-free, like the fit) must be at least
#: this, beside being significant; a 3% lean is significant with a small SEM but is no asymmetry.
STRICT_FORWARD_EFFECT = 0.1
