"""The checks of public arguments, one per concept, shared by every layer (``cmr.checks``).

Each checker takes what a user has in hand, returns it in the form the kernels need, or raises
one typed error that says what was expected and what came in. No public function, here or in
the layers built on cmr, re-implements these rules with its own argument names or error types::

    from cmr.checks import as_generator, index, integer

    n_words = integer(n_words, "n_words", minimum=2, error=PromptError)
    layer = index(layer, "layer", n_layers)
    generator = as_generator(rng)

Datasets are checked by :func:`cmr.validate` (:mod:`cmr.schema`), arguments here.
"""
from __future__ import annotations

import numbers

import numpy as np

from .deprecation import keyword_only
from .errors import ParameterError, ProfileError, RecallDataError

__all__ = ["is_integer", "integer", "index", "probability", "lag_window", "as_generator", "seed_of", "n_jobs",
           "recall_arrays", "shown", "parse_json"]


def shown(value) -> str:
    """``value`` as an error message shows it: numpy scalars as the plain Python value they hold
    (``1``, not ``np.int64(1)``), anything else as its ``repr``."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (list, tuple)):
        return ("[" if isinstance(value, list) else "(") + ", ".join(shown(v) for v in value) + (
            "]" if isinstance(value, list) else ("," if len(value) == 1 else "") + ")")
    return repr(value)


def parse_json(text, what: str, error=None):
    """The value of JSON ``text``; ``error`` (default FileFormatError) naming ``what`` when it is not
    JSON or is nested too deeply for the parser (a hostile file may nest 100,000 levels)."""
    import json

    from .errors import FileFormatError

    error = error or FileFormatError
    try:
        return json.loads(text)
    except RecursionError:
        raise error(f"{what} is not valid JSON: expected arrays and objects nested at most about 900 "
                    "levels deep; got deeper nesting") from None
    except (ValueError, TypeError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise error(f"{what} is not valid JSON: {exc}") from None


def is_integer(value) -> bool:
    """Whether ``value`` is one integer (a Python or numpy integer; never a bool)."""
    return isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, (bool, np.bool_))


def integer(value, what: str, minimum: int | None = 1, error=ParameterError, *, maximum: int | None = None) -> int:
    """``value`` as a Python int in ``minimum..maximum`` (inclusive; None: unbounded).

    Parameters
    ----------
    value : int or numpy integer
    what : str
        The argument's name, as the error message shows it.
    minimum, maximum : int or None
        Inclusive bounds; the default asks for a positive integer (``>= 1``).
    error : exception class
        Raised otherwise (default :class:`cmr.errors.ParameterError`), with the message
        ``"<what> must be an integer >= <minimum>; got <value>"`` (or ``in <minimum>..<maximum>``).
    """
    if not is_integer(value) or (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        if minimum is not None and maximum is not None:
            bound = f"an integer in {minimum}..{maximum}"
        elif minimum is not None:
            bound = f"an integer >= {minimum}"
        elif maximum is not None:
            bound = f"an integer <= {maximum}"
        else:
            bound = "an integer"
        raise error(f"{what} must be {bound}; got {shown(value)}")
    return int(value)


def index(value, what: str, size: int, error=ParameterError) -> int:
    """``value`` as a Python int indexing ``size`` things (``0..size-1``); ``error`` otherwise."""
    return integer(value, what, minimum=0, maximum=int(size) - 1, error=error)


def probability(value, what: str, *, open_low: bool = False, open_high: bool = False) -> float:
    """``value`` as a float in [0, 1] (ends excluded where asked); ParameterError otherwise."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    low_ok = number > 0.0 if open_low else number >= 0.0
    high_ok = number < 1.0 if open_high else number <= 1.0
    if isinstance(value, (bool, np.bool_)) or not (low_ok and high_ok):
        interval = ("(" if open_low else "[") + "0, 1" + (")" if open_high else "]")
        raise ParameterError(f"{what} must be a number in {interval}; got {shown(value)}")
    return number


@keyword_only
def lag_window(lags, *, longest: int | None = None) -> np.ndarray:
    """The lag window as strictly increasing int64 lags.

    Parameters
    ----------
    lags : None, int or sequence of int
        ``None``: every lag a list of ``longest`` items allows, ``-(longest-1)..longest-1``;
        an int ``K >= 0``: ``-K..K``; a sequence (``range(-5, 6)``, ``[-2, -1, 1, 2]``): those
        lags, strictly increasing.
    longest : int, optional
        The longest list; needed for ``lags=None``.

    Raises
    ------
    ProfileError
        For anything else (the message names the three accepted forms), and for a lag beyond
        ``-MAX_LAG..MAX_LAG`` (:data:`cmr.constants.MAX_LAG`; ``longest - 1`` when the lists are
        longer): such a window would need more memory than any machine has.
    """
    from .constants import MAX_LAG

    widest = max(MAX_LAG, int(longest) - 1) if longest is not None else MAX_LAG
    lists = "" if longest is None else f"; the longest list ({int(longest)} items) has lags up to {max(int(longest) - 1, 0)}"
    if lags is None:
        if longest is None:
            raise ProfileError("lags=None (every possible lag) needs the list length; give the lags explicitly")
        span = max(int(longest) - 1, 0)
        return np.arange(-span, span + 1, dtype=np.int64)
    if is_integer(lags):
        if lags < 0:
            raise ProfileError(f"lags as an integer K means -K..K and needs K >= 0; got {lags}")
        if lags > widest:
            raise ProfileError(f"lags as an integer K means -K..K and needs K <= {widest}{lists}; got {lags}")
        return np.arange(-int(lags), int(lags) + 1, dtype=np.int64)
    if isinstance(lags, (str, bytes)) or not hasattr(lags, "__iter__"):
        raise ProfileError(
            f"lags must be None (every lag), an integer K (lags -K..K) or a sequence of integers; got {shown(lags)}"
        )
    if isinstance(lags, range) and max(abs(lags.start), abs(lags.stop)) > widest + 1:
        raise ProfileError(f"lags must lie in -{widest}..{widest}{lists}; got {lags}")  # before listing it
    values = list(lags)
    if not values or not all(is_integer(v) for v in values):
        raise ProfileError(
            f"lags must be None (every lag), an integer K (lags -K..K) or a non-empty sequence of integers; "
            f"got {shown(lags)}"
        )
    beyond = [int(v) for v in values if abs(v) > widest]
    if beyond:
        raise ProfileError(f"lags must lie in -{widest}..{widest}{lists}; got {beyond[0]}")
    window = np.asarray(values, dtype=np.int64)
    if (np.diff(window) <= 0).any():
        raise ProfileError(f"lags must be strictly increasing; got {window.tolist()}")
    return window


def as_generator(rng) -> np.random.Generator:
    """A numpy Generator from ``rng``: a Generator (used as is), an int seed, a SeedSequence or None."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or is_integer(rng) or isinstance(rng, np.random.SeedSequence):
        if is_integer(rng) and rng < 0:
            raise ParameterError(f"rng as an integer seed must be >= 0; got {rng}")
        return np.random.default_rng(rng)
    raise ParameterError(
        f"rng must be a numpy.random.Generator, an integer seed >= 0 or None; got {type(rng).__name__}"
    )


def seed_of(rng) -> int:
    """One integer seed from ``rng`` (an int is used as is; a Generator draws one)."""
    if is_integer(rng):
        return integer(rng, "rng (a seed)", minimum=0)
    return int(as_generator(rng).integers(2**63))


def n_jobs(value) -> int:
    """Number of parallel workers: a positive integer."""
    return integer(value, "n_jobs")


def recall_arrays(recalls, list_length) -> tuple[np.ndarray, np.ndarray]:
    """A recall matrix and its list lengths, checked and coerced for the kernels.

    Parameters
    ----------
    recalls : array_like of int, shape (n_trials, n_outputs)
        1-based serial positions, -1 intrusions, 0 padding after the last recall.
    list_length : int or array_like of int, shape (n_trials,)

    Returns
    -------
    recalls : C-contiguous int64 (n_trials, n_outputs)
    list_length : C-contiguous int64 (n_trials,)
    """
    recalls = np.asarray(recalls)
    lengths = np.asarray(list_length)
    if recalls.ndim != 2 or recalls.dtype.kind not in "iu":
        raise RecallDataError(
            f"recalls must be a 2-d integer array (trials x outputs); got {recalls.ndim}-d {recalls.dtype}"
        )
    if lengths.ndim == 0:
        lengths = np.full(recalls.shape[0], lengths)
    if lengths.shape != (recalls.shape[0],) or lengths.dtype.kind not in "iu":
        raise RecallDataError(
            f"list_length must be an integer or one integer per trial ({recalls.shape[0]}); "
            f"got shape {lengths.shape} of {lengths.dtype}"
        )
    if recalls.shape[0] and (lengths < 1).any():
        raise RecallDataError(f"list_length must be >= 1; got {lengths.min()}")
    outside = (recalls < -1) | (recalls > lengths[:, None])
    if outside.any():
        t, o = np.argwhere(outside)[0]
        raise RecallDataError(
            f"recall matrix entries must be serial positions 1..list_length ({lengths[t]}), 0 (padding) "
            f"or -1 (intrusion); got {recalls[t, o]} at trial {t}, output {o + 1}"
        )
    after_pad = (np.cumsum(recalls == 0, axis=1) > 0) & (recalls != 0)
    if after_pad.any():
        t, o = np.argwhere(after_pad)[0]
        raise RecallDataError(
            f"recall matrix padding (0) must come after the last recall; got {recalls[t, o]} after a 0 "
            f"at trial {t}, output {o + 1}"
        )
    return np.ascontiguousarray(recalls, dtype=np.int64), np.ascontiguousarray(lengths, dtype=np.int64)
