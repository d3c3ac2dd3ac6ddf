"""Recall fits scale out: one task per subject on a dask.distributed cluster, identical to local threads."""
from __future__ import annotations

import numpy as np

import cmr
from cmr.events import from_table
from tests.conftest import require

FAST_DE = dict(popsize=6, tol=0.05, maxiter=20)


def assert_same(a, b):
    for name in ("value", "logl", "n", "nfev", "restart_value", "restart_logl", "aic"):
        np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)


def test_fit_recall_on_a_local_cluster_matches_threads():
    distributed = require("distributed")
    truths = {s: dict(cmr.default_parameters(), B_enc=b) for s, b in zip("abc", (0.4, 0.6, 0.8))}
    events = from_table(cmr.simulate_free_recall(truths, 8, 10, rng=11))
    spec = cmr.FitSpec(["B_enc", "T"], tied={"B_rec": "B_enc"})
    options = dict(n_restarts=2, rng=7, progress=False, de_options=FAST_DE)
    local = cmr.fit_recall(events, spec, n_jobs=2, **options)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        remote = cmr.fit_recall(events, spec, executor=client, **options)
        cv_local = cmr.cross_validate(events, cmr.FitSpec(["T"]), n_folds=2, progress=False, de_options=FAST_DE)
        cv_remote = cmr.cross_validate(events, cmr.FitSpec(["T"]), n_folds=2, progress=False, de_options=FAST_DE,
                                       executor=client)
    assert_same(local, remote)
    np.testing.assert_array_equal(cv_local["fold_logl"].values, cv_remote["fold_logl"].values)


def test_fit_tasks_pickle_for_process_workers():
    """Worker processes receive the model spec (tied expressions as text) and the trial arrays."""
    import pickle

    from cmr.textbook._optimize import model_spec

    spec = model_spec(["B_enc", "T"], tied={"B_rec": "1 - 0.5 * B_enc"})
    back = pickle.loads(pickle.dumps(spec))
    x = np.array([[0.3, 0.2], [0.9, 0.5]])
    np.testing.assert_array_equal(back.vectors(x)[0], spec.vectors(x)[0])
