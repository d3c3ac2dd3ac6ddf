"""Hypothesis strategies for free-recall data, CMR parameters and lag profiles.

Each function returns a hypothesis strategy; hypothesis is imported when one is called, so
``import cmr.testing`` works without it. Every strategy draws valid data of the toolkit's
data model (docs/schema.md): recall matrices in the EMBAM / jaxcmr convention, psifr long
tables, events datasets, parameter sets inside their admissible bounds and lag-profile
datasets. Ranges are ``(low, high)`` pairs, both ends included.
"""
from __future__ import annotations

import importlib
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ..checks import integer, is_integer, lag_window
from ..errors import OptionalDependencyError, ParameterError
from ..events import from_table
from ..schema import provenance_attrs
from ..textbook.parameters import PARAMETER_SPECS

__all__ = [
    "hypothesis_strategies",
    "recall_sequences",
    "recall_matrices",
    "recall_tables",
    "events_datasets",
    "textbook_parameters",
    "paper_parameters",
    "lag_profiles",
]

#: the paper's variant: name -> (low, high, low end excluded), as cmr.paper.check_parameters
PAPER_BOUNDS = {"beta_enc": (0.0, 1.0, True), "beta_rec": (0.0, 1.0, False), "gamma": (0.0, 1.0, False)}


def hypothesis_strategies():
    """``hypothesis.strategies``, or OptionalDependencyError naming the missing package."""
    try:
        return importlib.import_module("hypothesis.strategies")
    except ImportError:
        raise OptionalDependencyError(
            "cmr.testing needs hypothesis for its strategies and invariant checks; "
            "install it with `pip install hypothesis` (it is in icl-cmr's `test` extra)"
        ) from None


def _span(value, what: str, minimum: int) -> tuple[int, int]:
    """An int or an inclusive (low, high) pair of ints >= minimum, as a pair."""
    low, high = (value, value) if is_integer(value) else tuple(value)
    if not (int(low) == low and int(high) == high and minimum <= low <= high):
        raise ParameterError(f"{what} must be an int or a (low, high) pair with {minimum} <= low <= high; got {value!r}")
    return int(low), int(high)


def recall_sequences(list_length, *, max_recalls: int | None = None):
    """Correct first recalls of one list: distinct serial positions 1..list_length.

    A drawn ``list[int]`` is a prefix (possibly empty, possibly every item) of a permutation,
    the recall sequences a CMR likelihood scores.
    """
    st = hypothesis_strategies()
    n = integer(list_length, "list_length")
    cap = n if max_recalls is None else min(n, integer(max_recalls, "max_recalls", minimum=0))
    return st.permutations(range(1, n + 1)).flatmap(lambda order: st.integers(0, cap).map(lambda k: list(order[:k])))


def recall_matrices(
    *,
    list_length=(1, 9),
    n_trials=(1, 5),
    n_outputs=(1, 12),
    intrusions: bool = True,
    repeats: bool = True,
    ragged: bool = False,
):
    """Recall matrices ``(recalls, list_length)`` with intrusions, repeats and padding.

    Parameters
    ----------
    list_length, n_trials, n_outputs : int or (low, high)
        Items per list, rows and columns of the matrix.
    intrusions : bool
        Allow ``-1`` (an intrusion) among the recalls.
    repeats : bool
        Allow a serial position to come back in a row; without repeats a row has at most
        ``list_length`` recalls.
    ragged : bool
        Draw one list length per trial (then ``list_length`` is an int64 array).

    Returns
    -------
    strategy of (numpy.ndarray, int or numpy.ndarray)
        ``recalls`` int64 ``(n_trials, n_outputs)``: 1-based serial positions in output
        order, ``-1`` intrusions, ``0`` padding after a row's last recall; and the list
        length(s).
    """
    st = hypothesis_strategies()
    length_span = _span(list_length, "list_length", 1)
    trial_span = _span(n_trials, "n_trials", 1)
    output_span = _span(n_outputs, "n_outputs", 1)

    @st.composite
    def matrices(draw):
        n_rows = draw(st.integers(*trial_span))
        width = draw(st.integers(*output_span))
        lengths = [draw(st.integers(*length_span))] * n_rows if not ragged else [
            draw(st.integers(*length_span)) for _ in range(n_rows)
        ]
        rows = []
        for length in lengths:
            k = draw(st.integers(0, width))
            row: list[int] = []
            for _ in range(k):
                options = ([-1] if intrusions else []) + [
                    pos for pos in range(1, length + 1) if repeats or pos not in row
                ]
                if not options:  # every item recalled and no intrusions allowed: the row ends
                    break
                row.append(draw(st.sampled_from(options)))
            rows.append(row + [0] * (width - len(row)))
        recalls = np.array(rows, dtype=np.int64).reshape(n_rows, width)
        return recalls, (np.array(lengths, dtype=np.int64) if ragged else lengths[0])

    return matrices()


def recall_tables(
    *,
    subjects=(1, 3),
    lists=(1, 3),
    list_length=(1, 7),
    ragged: bool = True,
    max_recalls: int | None = None,
    intrusions: bool = True,
    prior_list_intrusions: bool = True,
    repeats: bool = True,
    subject_labels: str = "any",
    list_gaps: bool = False,
    n_words: int = 40,
):
    """psifr long tables: several subjects, uneven lists, intrusions and repeats.

    Parameters
    ----------
    subjects, lists : int or (low, high)
        Number of subjects, and of lists per subject.
    list_length : int or (low, high)
        Items per list; one length per list when ``ragged``, else one per table.
    max_recalls : int, optional
        Most recall rows per list (default: list length + 3).
    intrusions : bool
        Recalls may include extra-list words (``"xx"``, ``"yy"``, never studied).
    prior_list_intrusions : bool
        Recalls may include up to three words of the subject's previous list.
    repeats : bool
        A word may be recalled more than once in a list.
    subject_labels : {"any", "int", "str"}
        Subject labels as ints ``1..k``, strings ``"s1".."sk"``, or either (drawn per table).
    list_gaps : bool
        Number a subject's lists with gaps (e.g. 1, 3, 4) instead of 1..n.
    n_words : int
        Size of the word pool the lists are drawn from (words are distinct within a list).

    Returns
    -------
    strategy of pandas.DataFrame
        Columns ``subject, list, trial_type, position, item``; study rows then recall rows
        of each list, recall positions 1..m.
    """
    st = hypothesis_strategies()
    subject_span = _span(subjects, "subjects", 1)
    list_span = _span(lists, "lists", 1)
    length_span = _span(list_length, "list_length", 1)
    if subject_labels not in ("any", "int", "str"):
        raise ParameterError(f"subject_labels must be 'any', 'int' or 'str'; got {subject_labels!r}")
    if n_words < length_span[1]:
        raise ParameterError(f"n_words ({n_words}) must be >= the longest list ({length_span[1]})")
    words = [f"w{i}" for i in range(n_words)]

    @st.composite
    def tables(draw):
        kind = draw(st.sampled_from(["int", "str"])) if subject_labels == "any" else subject_labels
        n_subjects = draw(st.integers(*subject_span))
        table_length = draw(st.integers(*length_span))
        rows = []
        for s in range(1, n_subjects + 1):
            subject = s if kind == "int" else f"s{s}"
            previous: list[str] = []
            list_no = 0
            for _ in range(draw(st.integers(*list_span))):
                list_no += draw(st.integers(1, 2)) if list_gaps else 1
                length = draw(st.integers(*length_span)) if ragged else table_length
                study = draw(st.permutations(words))[:length]
                pool = study + (previous[:3] if prior_list_intrusions else []) + (["xx", "yy"] if intrusions else [])
                cap = length + 3 if max_recalls is None else max_recalls
                if repeats:
                    recalled = draw(st.lists(st.sampled_from(pool), max_size=cap))
                else:
                    recalled = draw(st.lists(st.sampled_from(pool), max_size=min(cap, len(pool)), unique=True))
                rows += [(subject, list_no, "study", i + 1, w) for i, w in enumerate(study)]
                rows += [(subject, list_no, "recall", i + 1, w) for i, w in enumerate(recalled)]
                previous = study
        return pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item"])

    return tables()


def events_datasets(**table_options):
    """Events datasets (``cmr.from_table`` of :func:`recall_tables`; same options)."""
    return recall_tables(**table_options).map(lambda table: from_table(table, source="cmr.testing.events_datasets"))


def _float_range(st, name: str, low: float, high: float, admissible: tuple[float, float], exclude_min=False):
    if not (admissible[0] <= low <= high <= admissible[1]):
        raise ParameterError(
            f"range of {name} must lie within its bounds [{admissible[0]:g}, {admissible[1]:g}]; got ({low!r}, {high!r})"
        )
    if low == high:
        return st.just(float(low))
    return st.floats(low, high, exclude_min=exclude_min and low == admissible[0])


def textbook_parameters(
    *,
    within: str = "admissible",
    bounds: Mapping[str, tuple[float, float]] | None = None,
    fixed: Mapping[str, float] | None = None,
):
    """Parameter sets of textbook CMR in cymr's names, inside their bounds.

    Parameters
    ----------
    within : {"admissible", "fit"}
        Draw every parameter in its admissible range (where the model is defined) or in its
        typical search range (``cmr.textbook.PARAMETER_SPECS``).
    bounds : mapping of name to (low, high), optional
        Narrower ranges for some parameters (each inside the admissible range).
    fixed : mapping of name to float, optional
        Parameters held at one value.

    Returns
    -------
    strategy of dict
        Every parameter of ``PARAMETER_SPECS`` as a float; ``Afc + Dfc > 0`` always (an item
        must give context some input).
    """
    st = hypothesis_strategies()
    if within not in ("admissible", "fit"):
        raise ParameterError(f"within must be 'admissible' or 'fit'; got {within!r}")
    bounds, fixed = dict(bounds or {}), dict(fixed or {})
    known = {spec.name for spec in PARAMETER_SPECS}
    unknown = sorted((set(bounds) | set(fixed)) - known)
    if unknown:
        raise ParameterError(
            f"unknown CMR parameter(s) {', '.join(map(repr, unknown))}; known: {', '.join(spec.name for spec in PARAMETER_SPECS)}"
        )
    draws = {}
    for spec in PARAMETER_SPECS:
        admissible = (spec.lower, spec.upper)
        if spec.name in fixed:
            value = float(fixed[spec.name])
            draws[spec.name] = _float_range(st, spec.name, value, value, admissible)
            continue
        default = admissible if within == "admissible" else (spec.fit_lower, spec.fit_upper)
        draws[spec.name] = _float_range(st, spec.name, *map(float, bounds.get(spec.name, default)), admissible)
    # hypothesis may draw the keys in another order: give them back in the kernels' order
    return st.fixed_dictionaries(draws).filter(lambda p: p.get("Afc", 0.0) + p.get("Dfc", 1.0) > 0).map(
        lambda p: {name: p[name] for name in draws}
    )


def paper_parameters(*, bounds: Mapping[str, tuple[float, float]] | None = None):
    """Parameter sets ``{"beta_enc", "beta_rec", "gamma"}`` of the paper's variant.

    ``beta_enc`` in (0, 1], ``beta_rec`` and ``gamma`` in [0, 1] (Ji-An et al. 2024), or the
    narrower ``bounds`` given per name.
    """
    st = hypothesis_strategies()
    bounds = dict(bounds or {})
    unknown = sorted(set(bounds) - set(PAPER_BOUNDS))
    if unknown:
        raise ParameterError(f"unknown parameter(s) of the paper's variant {unknown}; known: {', '.join(PAPER_BOUNDS)}")
    draws = {}
    for name, (low, high, open_low) in PAPER_BOUNDS.items():
        lo, hi = map(float, bounds.get(name, (low, high)))
        if open_low and lo == low:
            if hi == low:
                raise ParameterError(f"{name} must lie in (0, 1]; got the range ({lo!r}, {hi!r})")
        draws[name] = _float_range(st, name, lo, hi, (low, high), exclude_min=open_low)
    return st.fixed_dictionaries(draws).map(lambda p: {name: p[name] for name in draws})


def lag_profiles(
    *,
    lags=5,
    unit_dims: Sequence[str] = ("subject",),
    units=(1, 4),
    values=(-50.0, 50.0),
    counts: bool = False,
    min_variance: float = 0.0,
):
    """Lag-profile datasets (kind ``lag_profile``) over one or more unit dims.

    Parameters
    ----------
    lags : int or sequence of int
        The lag window (``K`` for -K..K, or the lags, strictly increasing).
    unit_dims : sequence of str
        Batch dims, e.g. ``("subject",)`` for humans or ``("layer", "head")`` for heads.
    units : int or (low, high)
        Size of each unit dim.
    values : (low, high)
        Range of the profile values (ignored when ``counts``).
    counts : bool
        Draw lag-CRP counts instead: ``actual <= possible`` (int64), ``profile = actual /
        possible`` (NaN where nothing was possible) and its binomial ``sem``.
    min_variance : float
        Keep only datasets whose every unit's profile has a variance across lags above this
        (profile fits divide by it).

    Returns
    -------
    strategy of xarray.Dataset
        ``profile`` and ``sem`` with dims ``(*unit_dims, lag)``, int64 unit coords 0..k-1,
        attrs ``profile_kind`` (``"lag_crp"`` for counts, else ``"values"``), ``unit_kind``
        and provenance.
    """
    import xarray as xr

    st = hypothesis_strategies()
    window = lag_window(lags)
    dims = tuple(unit_dims)
    if not dims or len(set(dims)) != len(dims) or "lag" in dims:
        raise ParameterError(f"unit_dims must be distinct dim names other than 'lag'; got {unit_dims!r}")
    unit_span = _span(units, "units", 1)
    low, high = map(float, values)

    @st.composite
    def profiles(draw):
        shape = tuple(draw(st.integers(*unit_span)) for _ in dims) + (window.size,)
        size = int(np.prod(shape))
        if counts:
            possible = np.array(draw(st.lists(st.integers(0, 30), min_size=size, max_size=size)), np.int64)
            share = np.array(draw(st.lists(st.floats(0, 1), min_size=size, max_size=size)))
            actual = np.floor(share * possible).astype(np.int64)
            possible, actual = possible.reshape(shape), actual.reshape(shape)
            with np.errstate(invalid="ignore", divide="ignore"):
                profile = np.where(possible > 0, actual / np.maximum(possible, 1), np.nan)
                sem = np.sqrt(profile * (1 - profile) / possible)
            data = {"profile": profile, "sem": sem, "actual": actual, "possible": possible}
        else:
            elements = st.floats(low, high, allow_nan=False, allow_infinity=False)
            profile = np.array(draw(st.lists(elements, min_size=size, max_size=size))).reshape(shape)
            sem = np.abs(np.array(draw(st.lists(elements, min_size=size, max_size=size)))).reshape(shape)
            data = {"profile": profile, "sem": sem}
        ds = xr.Dataset(
            {name: ((*dims, "lag"), array) for name, array in data.items()},
            coords={**{dim: np.arange(n, dtype=np.int64) for dim, n in zip(dims, shape)}, "lag": window},
        )
        ds.attrs.update(provenance_attrs("lag_profile", "cmr.testing.lag_profiles"))
        ds.attrs.update(profile_kind="lag_crp" if counts else "values", unit_kind="_".join(dims))
        return ds

    def varied(ds) -> bool:
        profile = ds["profile"].values
        finite = np.isfinite(profile)
        n = finite.sum(axis=-1)
        mean = np.where(finite, profile, 0.0).sum(axis=-1) / np.maximum(n, 1)
        variance = np.where(finite, (profile - mean[..., None]) ** 2, 0.0).sum(axis=-1) / np.maximum(n, 1)
        return bool(np.all((n > 0) & (variance > min_variance)))

    return profiles().filter(varied) if min_variance > 0 else profiles()
