"""numba kernel: the list lag of each intrusion (psifr's prior-list intrusion scoring, each counted once).

Items are integer codes (the same code for the same item text across lists). No validation
here: the public layer (cmr/intrusions.py) prepares the codes.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .jit import JIT


@njit(**JIT)
def intrusion_lags(recalls, list_length, subject, ordinal, study_code, recall_code, n_codes):
    """List lag of each intrusion: this list's number minus the latest earlier list that studied the item.

    Trials must come grouped by subject, in list order within a subject.

    Returns
    -------
    int64 (n_trials, n_outputs)
        0 for correct recalls, repeats and padding; k >= 1 for a prior-list intrusion; -1 for
        an extra-list intrusion.
    """
    n_trials, n_outputs = recalls.shape
    out = np.zeros((n_trials, n_outputs), dtype=np.int64)
    latest = np.zeros(n_codes, dtype=np.int64)  # list number that last studied the item
    owner = np.full(n_codes, -1, dtype=np.int64)  # ... of this subject (stale entries are another's)
    for t in range(n_trials):
        s = subject[t]
        for o in range(n_outputs):
            if recalls[t, o] != -1:
                continue
            c = recall_code[t, o]
            out[t, o] = ordinal[t] - latest[c] if owner[c] == s else -1
        for j in range(list_length[t]):
            c = study_code[t, j]
            latest[c] = ordinal[t]
            owner[c] = s
    return out
