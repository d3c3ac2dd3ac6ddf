"""What a CMR fit estimates: free, fixed and tied parameters, search bounds, item patterns, pool size.

One :class:`FitSpec` is handed to every fitter (:func:`cmr.fit_recall`, :func:`cmr.cross_validate`,
:func:`cmr.parameter_recovery`); how a fit runs (restarts, seed, threads, executor, polish,
differential-evolution options) stays with the fitter call. A spec is checked when it is made,
with the errors the fitters raised for the same arguments, and cannot change afterwards::

    spec = cmr.FitSpec(["B_enc", "T"], tied={"B_rec": "B_enc"})
    fits = cmr.fit_recall(events, spec, n_restarts=2)
    cv = cmr.cross_validate(events, dataclasses.replace(spec, free=["T"]), n_folds=4)
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Mapping, Sequence

from ..checks import integer
from ..errors import ParameterError, RecallDataError
from ._optimize import model_spec
from .patterns import ItemPatterns

__all__ = ["BaseFitSpec", "FitSpec", "STANDARD_FREE"]

# the ten parameters usually fitted to free recall (Morton & Polyn 2016), A/D fixed
STANDARD_FREE = ("Lfc", "Lcf", "P1", "P2", "B_enc", "B_start", "B_rec", "T", "X1", "X2")

#: the fields of :class:`FitSpec`, which the fitters also take as deprecated separate arguments
MODEL_ARGUMENTS = ("free", "fixed", "bounds", "tied", "patterns", "pool_size")


def check_patterns(patterns) -> None:
    """RecallDataError unless ``patterns`` is None or an :class:`ItemPatterns`."""
    if patterns is not None and not isinstance(patterns, ItemPatterns):
        raise RecallDataError(f"patterns must come from cmr.item_patterns(...); got {type(patterns).__name__}")


def _check_pool_size(pool_size, patterns) -> None:
    """The data-free checks of ``pool_size`` (its bound by the longest list needs the data)."""
    if pool_size is None:
        return
    if patterns is not None:
        if int(pool_size) != patterns.size:
            raise RecallDataError(
                f"pool_size ({pool_size!r}) must be left out or equal the item pool's size ({patterns.size})"
            )
    else:
        integer(pool_size, "pool_size", error=RecallDataError)


def _pair(value):
    """A bounds entry as a tuple (hashable); anything else unchanged."""
    return tuple(value) if isinstance(value, (list, tuple)) else value


def freeze_spec(spec, model) -> None:
    """Store a frozen fit spec's checked ``model`` and its fields as immutable, hashable values.

    ``free`` becomes the model's tuple; ``fixed``, ``bounds`` (each entry a tuple) and ``tied``
    read-only mappings. Used by :class:`BaseFitSpec` for every family's spec.
    """
    object.__setattr__(spec, "free", model.free)
    object.__setattr__(spec, "fixed", MappingProxyType(dict(spec.fixed or {})))
    object.__setattr__(spec, "bounds", MappingProxyType({n: _pair(b) for n, b in dict(spec.bounds or {}).items()}))
    object.__setattr__(spec, "tied", MappingProxyType(dict(spec.tied or {})))
    object.__setattr__(spec, "_model", model)


@dataclass(frozen=True, repr=False)
class BaseFitSpec:
    """What every fit spec holds: free, fixed and tied parameters and search bounds, checked once.

    The base of :class:`FitSpec` (textbook CMR), :class:`cmr.CMR2FitSpec` and
    :class:`cmr.NetworkFitSpec`. A family's spec adds its own defaults and fields (the item
    patterns of a textbook fit, the network of a network fit) and checks everything in
    :meth:`_checked_model`, which returns the checked model its fitter runs on. The base makes
    the spec immutable and normalised (``free`` a tuple; ``fixed``, ``bounds`` with tuple
    entries, and ``tied`` read-only mappings), hashable and equal by value, picklable (rebuilt
    and re-checked from plain values) and printed with only what was given. ``k`` counts the
    free parameters. A new spec from an old one: ``dataclasses.replace(spec, free=[...])``.
    """

    free: Sequence[str] | str
    fixed: Mapping[str, float] | None = None
    bounds: Mapping[str, tuple[float, float]] | None = None
    tied: Mapping[str, str] | None = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # in the class body before @dataclass runs, so a frozen subclass keeps this hash instead of
        # getting one generated over its fields (read-only mappings are not hashable)
        cls.__hash__ = BaseFitSpec.__hash__

    def __post_init__(self):
        freeze_spec(self, self._checked_model())

    def _checked_model(self):
        """The checked model of the fit (raises the family's errors); the family's spec defines it."""
        raise NotImplementedError(f"{type(self).__name__} must define _checked_model")

    @property
    def k(self) -> int:
        """Number of free parameters (tied and fixed ones are not counted)."""
        return len(self.free)

    def _extra_values(self) -> tuple:
        """The values of the family's own fields, in order (after ``tied``)."""
        return tuple(getattr(self, f.name) for f in fields(self)[4:] if f.init)

    def _identity(self) -> tuple:
        """What the family's own fields contribute to the hash (their values by default)."""
        return self._extra_values()

    def _extra_repr(self) -> list[str]:
        """The ``name=value`` parts of the family's own fields that were given."""
        return []

    def __hash__(self):
        return hash((self.free, frozenset(self.fixed.items()), frozenset(self.bounds.items()),
                     frozenset(self.tied.items())) + self._identity())

    def __reduce__(self):
        # read-only mappings do not pickle; a spec is rebuilt (and re-checked) from plain dicts
        return (type(self), (self.free, dict(self.fixed), dict(self.bounds), dict(self.tied)) + self._extra_values())

    def __repr__(self) -> str:
        parts = [f"free={self.free!r}"]
        parts += [f"{name}={dict(value)!r}" for name, value in
                  (("fixed", self.fixed), ("bounds", self.bounds), ("tied", self.tied)) if value]
        return f"{type(self).__name__}({', '.join(parts + self._extra_repr())})"


@dataclass(frozen=True, repr=False)
class FitSpec(BaseFitSpec):
    """The model a CMR fit estimates, checked once and immutable.

    Parameters
    ----------
    free : sequence of str or str
        Fitted parameters (default: the ten of Morton & Polyn 2016, :data:`STANDARD_FREE`).
        With ``patterns``, the pattern weights ``Sfc, Scf, Sff, Cfc, Ccf`` may be free too.
    fixed : mapping, optional
        Values of other parameters; any parameter neither free, fixed nor tied takes its
        default (:func:`cmr.default_parameters`; pattern weights 0).
    bounds : mapping, optional
        Search bounds ``name -> (low, high)`` overriding the typical ranges.
    tied : mapping, optional
        ``name -> expression`` of other parameters, e.g. ``{"B_rec": "B_enc"}`` or
        ``{"Dfc": "1 - Lfc"}`` (cymr's dependent parameters; parsed, never ``eval``-ed).
        An expression that cannot be evaluated over the search bounds (division by zero,
        overflow, a complex value) or whose value leaves its parameter's admissible range
        there is refused (:func:`cmr.textbook.tied.check_tied_range`).
    patterns : ItemPatterns, optional
        Item pool and patterns for semantic / category CMR (:func:`cmr.item_patterns`).
    pool_size : int, optional
        Localist CMR: cymr pool size for a pool-sized context (default: list-sized). With
        ``patterns`` it may only repeat the pool's size.

    Raises
    ------
    ParameterError
        No, repeated or unknown free parameters; a parameter both free and fixed (or tied);
        bounds outside a parameter's admissible range; a malformed or chained tie, or one that
        fails or leaves its parameter's range over the bounds; pattern weights without ``patterns``.
    RecallDataError
        ``patterns`` not made by :func:`cmr.item_patterns`; a ``pool_size`` that is not a
        positive integer, or differs from the size of ``patterns``.

    Attributes
    ----------
    free : tuple of str
    fixed, bounds, tied : read-only mappings (empty when not given)
    patterns : ItemPatterns or None
    pool_size : int or None
    k : int
        Number of free parameters (tied and fixed ones do not count).

    A new spec from an old one: ``dataclasses.replace(spec, free=[...])``.
    """

    free: Sequence[str] | str = STANDARD_FREE
    patterns: ItemPatterns | None = None
    pool_size: int | None = None

    def _checked_model(self):
        check_patterns(self.patterns)
        # checked on the arguments as given, exactly as the fitters always checked them
        model = model_spec(self.free, self.fixed, self.bounds, self.tied, patterns=self.patterns is not None)
        _check_pool_size(self.pool_size, self.patterns)
        return model

    def _extra_repr(self) -> list[str]:
        parts = []
        if self.patterns is not None:
            p = self.patterns
            what = ["similarity"] if p.similarity is not None else []
            what += [f"features {', '.join(p.feature_names)} ({p.feature_layer})"] if p.features is not None else []
            parts.append(f"patterns=<{p.size} items{': ' if what else ''}{'; '.join(what)}>")
        if self.pool_size is not None:
            parts.append(f"pool_size={self.pool_size!r}")
        return parts


def resolve_spec(caller: str, spec, positional: tuple, keywords: dict, *,
                 positional_names: Sequence[str] = ("fixed", "bounds"),
                 accepted: Sequence[str] = MODEL_ARGUMENTS, spec_type: type = FitSpec,
                 model_arguments: Sequence[str] = MODEL_ARGUMENTS) -> tuple[BaseFitSpec, dict, str | None]:
    """The spec of a fitter call, given as one spec or as deprecated separate arguments.

    ``spec`` is a ``spec_type`` (default :class:`FitSpec`; ``model_arguments`` its fields),
    None (the default spec) or, deprecated, the free parameters;
    ``positional`` are further deprecated positional arguments (named ``positional_names``)
    and ``keywords`` the deprecated model keyword arguments (``accepted``). Returns the spec,
    the deprecated positional arguments that are not part of a spec (by name), and the
    deprecation message to warn when any deprecated argument was used.
    Raises TypeError as Python does for surplus, unknown or repeated arguments, and
    ParameterError when a FitSpec comes with model arguments as well.
    """
    old = {}
    if spec is not None and not isinstance(spec, spec_type):
        old["free"] = spec
        spec = None
    if len(positional) > len(positional_names):
        most = 2 + len(positional_names)
        raise TypeError(f"{caller}() takes at most {most} positional arguments; "
                        f"got {most + len(positional) - len(positional_names)}")
    given = [(name, value, False) for name, value in zip(positional_names, positional)]
    for name, value, by_keyword in given + [(name, value, True) for name, value in keywords.items()]:
        if by_keyword and name not in accepted:
            raise TypeError(f"{caller}() got an unexpected keyword argument {name!r}")
        if name in old:
            raise TypeError(f"{caller}() got multiple values for argument {name!r}")
        old[name] = value
    others = {name: old.pop(name) for name in list(old) if name not in model_arguments}
    if spec is not None:
        if old:
            raise ParameterError(f"{caller} takes the model as one cmr.{spec_type.__name__}; got spec and also "
                                 f"{', '.join(old)} (pass them inside the {spec_type.__name__})")
        return spec, others, None
    used = list(old) + list(others)
    message = None if not used else (
        f"{caller}'s arguments {', '.join(used)} are deprecated and will be removed in the next release; "
        f"pass the model as one spec, cmr.{spec_type.__name__}({', '.join(f'{n}=...' for n in old)}), "
        "and any other argument by keyword"
    )
    return spec_type(**old), others, message
