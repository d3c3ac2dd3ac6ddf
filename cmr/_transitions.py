"""numba kernels: which recalls and transitions count (psifr ``maskers.py``), in one place.

Every statistic kernel (cmr/_lag_crp.py, cmr/_recall_stats.py) walks a trial's outputs through
these functions; none re-implements the rule. The rule, as psifr's maskers:

* padding (0) ends the list (:func:`is_end`);
* a recall is *valid* when it is a serial position (> 0) not recalled before in this list;
  intrusions (-1) and repeats are not (:func:`is_fresh`, :func:`step_recall`);
* a transition from output o to o+1 counts when both recalls are valid
  (:func:`step_transition`);
* the walk keeps ``recalled[j]`` (serial position j, 1-based, validly recalled so far). After
  stepping past output o, the positions with ``recalled[j]`` False are the ones still available
  (psifr's ``possible``: every not-yet-recalled position, the "to" position included).

A caller walks a trial as::

    start_trial(recalled, length)
    for o in range(n_outputs - 1):
        if is_end(recalls, t, o):
            break
        if not step_transition(recalls, t, o, recalled):
            continue
        ...  # count the transition recalls[t, o] -> recalls[t, o + 1]

The functions are inlined into their callers (``inline="always"``): the walk then compiles to
the hand-written loop (a single step function returning a state code measured ~9 % slower on
the lag-CRP kernel). numba's on-disk cache keys on the caller's file only (checked, numba 0.68):
after editing this module, clear the ``__pycache__`` ``*.nbi``/``*.nbc`` files of its callers.
No validation here: recalls are 1..list_length, -1 or 0 (the public layer checks them).
"""
from __future__ import annotations

from numba import njit

from .jit import JIT


@njit(**JIT, inline="always")
def start_trial(recalled, length):
    """Reset the walk's state for a trial of ``length`` study positions.

    Parameters
    ----------
    recalled : bool (>= length + 1,)
        Entries 0..length are set False; entry j is serial position j.
    length : int
    """
    recalled[: length + 1] = False


@njit(**JIT, inline="always")
def is_end(recalls, t, o):
    """Whether output ``o`` of trial ``t`` is padding, which ends the trial's recalls.

    Parameters
    ----------
    recalls : int64 (n_trials, n_outputs)
        1-based serial positions, -1 intrusion, 0 padding.
    t, o : int
        Trial and output index.
    """
    return recalls[t, o] == 0


@njit(**JIT, inline="always")
def is_fresh(position, recalled):
    """Whether a recall of ``position`` would be valid: a serial position not recalled yet.

    Intrusions (-1), padding (0) and repeats are not.
    """
    return position > 0 and not recalled[position]


@njit(**JIT, inline="always")
def step_recall(recalls, t, o, recalled):
    """Step past output ``o`` of trial ``t``: whether its recall is valid; marks it recalled.

    Parameters
    ----------
    recalls : int64 (n_trials, n_outputs)
    t, o : int
        Trial and output index; a trial's outputs are stepped in order 0, 1, ...
    recalled : bool (>= list_length + 1,)
        The walk's state (see :func:`start_trial`); updated.

    Returns
    -------
    bool
        True for a valid (first-time, correct) recall, False for an intrusion, a repeat or
        padding.
    """
    position = recalls[t, o]
    if position <= 0 or recalled[position]:
        return False  # intrusion, padding or repeat
    recalled[position] = True
    return True


@njit(**JIT, inline="always")
def step_transition(recalls, t, o, recalled):
    """Step past output ``o`` (o < n_outputs - 1): whether the transition o -> o+1 counts.

    Marks the recall at ``o`` recalled if it is valid (as :func:`step_recall`); the recall at
    o+1 is only looked at. So after a counted transition, ``recalled[j]`` False means position
    j was available for it, the "to" position included.

    Returns
    -------
    bool
        True when both recalls are valid.
    """
    if not step_recall(recalls, t, o, recalled):
        return False  # from an intrusion, padding or repeat
    following = recalls[t, o + 1]
    return following > 0 and not recalled[following]  # not to an intrusion, padding or repeat


@njit(**JIT, inline="always")
def start_pool(recalled, length, in_pool, t):
    """:func:`start_trial` for a pool restricted by psifr's ``item_query``.

    An item outside the pool is marked recalled from the start: recalling it is then invalid
    (as psifr's masker treats an item not in its pool) and it is never possible.

    Parameters
    ----------
    recalled : bool (>= length + 1,)
    length : int
    in_pool : bool (n_trials, n_study)
    t : int
    """
    recalled[0] = False
    for j in range(length):
        recalled[j + 1] = not in_pool[t, j]


@njit(**JIT, inline="always")
def step_masked_transition(recalls, t, o, recalled, code, allowed):
    """:func:`step_transition`, then psifr's ``test`` on the pair: whether the transition counts.

    ``code[t, j]`` is the test-value code of study position j + 1 and ``allowed[a, b]`` the
    tabulated test (cmr/masks.py). A transition failing the test still marks its "from" recall.
    """
    if not step_transition(recalls, t, o, recalled):
        return False
    return allowed[code[t, recalls[t, o] - 1], code[t, recalls[t, o + 1] - 1]]
