"""Where recall fits run: threads of this process, or the workers of a dask.distributed cluster.

The fitters (:func:`cmr.fit_recall`, :func:`cmr.cross_validate`, :func:`cmr.fit_cmr2`,
:func:`cmr.fit_population`, :func:`cmr.population_recovery`) take ``executor=``: a
``dask.distributed.Client`` gets one task per subject (per subject and fold, per subject and
EM iteration). :func:`fit_executor` opens that client, on a running scheduler or on a cluster
of worker processes it starts on this machine, and closes what it started. The numbers do not
depend on where a fit ran: each subject's searches are seeded from the root seed and the
subject's label, never from the worker or the order tasks finish in.
"""
from __future__ import annotations

import contextlib
import logging

from cmr.checks import integer
from cmr.errors import OptionalDependencyError, ParameterError

__all__ = ["fit_executor", "describe_executor", "CONNECT_TIMEOUT"]

#: seconds to wait for a scheduler to answer, and for it to have a worker (default of fit_executor)
CONNECT_TIMEOUT = 10.0

_EXTRA = "pip install 'icl-cmr[analyses]'"
#: the scheduler's HTTP routes (health, metrics; no dashboard) on a free port, not 8787 that another cluster may hold
_NO_FIXED_PORT = {"dashboard_address": "127.0.0.1:0"}


@contextlib.contextmanager
def fit_executor(*, scheduler: str | None = None, workers: int | None = None,
                 connect_timeout: float = CONNECT_TIMEOUT):
    """The executor of a fit: ``None`` (local threads), or a ``dask.distributed.Client``.

    Parameters
    ----------
    scheduler : str, optional
        Address of a running dask scheduler (``tcp://host:8786``, as ``dask scheduler`` prints it);
        the client connects to it and closes on exit, leaving the cluster running.
    workers : int, optional
        Start a ``distributed.LocalCluster`` of this many worker processes on this machine (one
        thread each, listening on 127.0.0.1, no dashboard) and close it on exit.
    connect_timeout : float
        Seconds to wait for the scheduler to answer and to have at least one worker.

    Yields
    ------
    dask.distributed.Client or None
        ``None`` when neither ``scheduler`` nor ``workers`` is given.

    Raises
    ------
    ParameterError
        Both ``scheduler`` and ``workers``, a bad count or timeout, a scheduler that does not
        answer, or one without workers.
    OptionalDependencyError
        dask.distributed is not installed (it comes with the ``analyses`` extra).
    """
    if scheduler is None and workers is None:
        yield None
        return
    if scheduler is not None and workers is not None:
        raise ParameterError(f"give a scheduler address or a number of local workers, not both; got scheduler "
                             f"{scheduler!r} and workers {workers!r}")
    if isinstance(connect_timeout, bool) or not isinstance(connect_timeout, (int, float)) or not connect_timeout > 0:
        raise ParameterError(f"connect_timeout must be a positive number of seconds; got {connect_timeout!r}")
    try:
        import distributed
    except ImportError as exc:
        raise OptionalDependencyError(f"fits on a dask cluster need dask.distributed: {_EXTRA} ({exc})") from None
    if workers is not None:
        integer(workers, "workers", minimum=1, error=ParameterError)
        with _local_cluster(distributed, int(workers)) as cluster, distributed.Client(cluster) as client:
            yield client
        return
    with _connected(distributed, str(scheduler), float(connect_timeout)) as client:
        yield client


def _local_cluster(distributed, workers: int):
    """A LocalCluster of ``workers`` processes; a worker that cannot start is one OSError line, not a traceback."""
    try:
        return distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                        dashboard_address=None, silence_logs=logging.ERROR,
                                        scheduler_kwargs=_NO_FIXED_PORT)
    except (RuntimeError, OSError) as exc:  # a spawned worker failed to start (memory, process limits)
        raise OSError(f"could not start {workers} dask worker process{'' if workers == 1 else 'es'} on this "
                      f"machine: {exc}") from exc


@contextlib.contextmanager
def _connected(distributed, address: str, timeout: float):
    """A client of the scheduler at ``address`` that has at least one worker; ParameterError otherwise."""
    try:
        client = distributed.Client(address, timeout=timeout)
    except (ValueError, TypeError) as exc:  # no port, an unknown scheme
        raise ParameterError(f"{address!r} is not a dask scheduler address ({exc}); expected one like "
                             "tcp://HOST:8786, as dask scheduler prints it") from None
    except OSError as exc:  # refused or timed out
        raise ParameterError(
            f"no dask scheduler answered at {address!r} within {timeout:g} s ({exc}): start one (dask scheduler) "
            "and give the address it prints, like tcp://HOST:8786"
        ) from None
    with client:
        try:
            client.wait_for_workers(1, timeout=timeout)
        except (OSError, TimeoutError):
            raise ParameterError(f"the dask scheduler at {address!r} has no workers after {timeout:g} s: start some "
                                 f"(dask worker {address})") from None
        yield client


def describe_executor(client, *, n_jobs: int = 1) -> str:
    """Where a fit ran, for a summary line: ``on 2 dask workers`` or ``in 1 thread``."""
    if client is None:
        return f"in {n_jobs} thread{'' if n_jobs == 1 else 's'}"
    count = len(client.nthreads())
    return f"on {count} dask worker{'' if count == 1 else 's'}"
