"""The causal test's design: every size, mode and measure of one ablation run, in one place.

:class:`AblationDesign` holds what :func:`icl_cmr.analyses.causal.ablation.run_ablation`
needs beyond the model, the passages and the heads. Its defaults are those of ``icl-cmr
ablate`` without options (300 passages, 120 random and 50 layer-matched sets, zero and mean
ablation, every measure that fits); :data:`PRESETS` (``icl-cmr ablate --design NAME``,
:meth:`AblationDesign.preset`) are the sizes docs/ablation.md argues for:

* ``cpu``   24 passages, 120 random sets, zero ablation, ``icl,bigram,repeated_tokens``:
  >= 80% power for the bigram and repeated-token measures within 2 hours on 2 CPU cores;
* ``study`` 300 passages, 1,000 random and 1,000 layer-matched sets, zero and mean ablation,
  the ICL score, meant for a GPU (``--device cuda --dtype bfloat16``, given apart);
* ``demo``  the ablation stage of ``icl-cmr run``: 6 passages, 50 random sets, zero ablation,
  the ICL score with ``bigram`` beside it (a measure with power at 6 passages, from the same
  forward passes).

The study (:mod:`icl_cmr.analyses.study.stages`) and the command build their design here, so their
sizes cannot drift apart.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from cmr.checks import integer
from cmr.deprecation import keyword_only
from cmr.errors import ParameterError

from ...adapters.lm.interventions import SET_MODES as MODES
from .measures import MEASURES, check_measures, check_window

__all__ = ["AblationDesign", "PRESETS", "ALL_MEASURES", "MODE_NAMES"]

#: the value of ``measures`` that asks for every measure the passages and the model's context fit
ALL_MEASURES = "all"
#: the names of mode sets (``icl-cmr ablate --mode``) -> the ablation modes they run
MODE_NAMES = {"zero": ("zero",), "mean": ("mean",), "resample": ("resample",), "both": ("zero", "mean"),
              "all": ("zero", "mean", "resample")}


def _measures(value):
    if isinstance(value, str) and value.strip() == ALL_MEASURES:
        return ALL_MEASURES
    if not isinstance(value, str) and list(value) == [ALL_MEASURES]:
        return ALL_MEASURES
    return check_measures(value)


@dataclass(frozen=True)
class AblationDesign:
    """Sizes, modes and measures of one run of the causal test (docs/ablation.md, "The design").

    Parameters
    ----------
    n_passages : int
        Text passages (>= 2).
    n_random, n_matched : int
        Random head sets (>= 1, drawn among all heads) and layer-matched random sets (>= 0).
    modes : tuple of {"zero", "mean", "resample"}
        How heads are ablated.
    measures : "all" or tuple of str
        Measures beside the ICL score (:data:`icl_cmr.analyses.causal.measures.MEASURES`,
        ``icl`` always first). ``"all"`` keeps those that fit the passages and the model's
        context and leaves out the others (:meth:`fitted_measures`); named ones must fit.
    dtype : str
        Model dtype the command loads (float32 unless a preset says otherwise).
    top_fraction : float
        Share of all heads in the top set, in (0, 1].
    n_tokens, early, late, window : int
        Tokens per passage and the ICL score's positions and half-window (0-based text positions).
    wide_early, wide_late : (int, int)
        Inclusive windows of ``wide_icl``.
    repeat_length : int
        Random tokens repeated once in each ``repeated_tokens`` passage.
    batch_size : int
        Ablated conditions per forward pass.
    n_boot : int
        Bootstrap resamples of the d_z intervals.
    """

    n_passages: int = 300
    n_random: int = 120
    n_matched: int = 50
    modes: tuple = ("zero", "mean")
    measures: object = ALL_MEASURES
    dtype: str = "float32"
    top_fraction: float = 0.1
    n_tokens: int = 512
    early: int = 50
    late: int = 500
    window: int = 5
    wide_early: tuple = (20, 100)
    wide_late: tuple = (400, 505)
    repeat_length: int = 100
    batch_size: int = 8
    n_boot: int = 2000

    def __post_init__(self):
        counts = dict(n_passages=2, n_random=1, n_matched=0, n_tokens=2, early=0, late=1, window=0,
                      repeat_length=2, batch_size=1, n_boot=1)
        for name, low in counts.items():
            why = " (the rank test needs random sets)" if name == "n_random" else ""
            object.__setattr__(self, name, integer(getattr(self, name), name + why, minimum=low))
        modes = (self.modes,) if isinstance(self.modes, str) else tuple(self.modes)
        if not modes or any(m not in MODES for m in modes) or len(set(modes)) != len(modes):
            raise ParameterError(f"modes must be a non-empty subset of {MODES}; got {modes}")
        object.__setattr__(self, "modes", modes)
        object.__setattr__(self, "measures", _measures(self.measures))
        fraction = self.top_fraction
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
            raise ParameterError(f"top_fraction must be a share in (0, 1]; got {fraction!r}")
        object.__setattr__(self, "top_fraction", float(fraction))
        for name in ("wide_early", "wide_late"):
            try:
                if isinstance(getattr(self, name), str):
                    raise TypeError
                first, last = (integer(v, name, minimum=None) for v in getattr(self, name))
            except (TypeError, ValueError, ParameterError):
                raise ParameterError(f"{name} must be two token positions (first, last); "
                                     f"got {getattr(self, name)!r}") from None
            object.__setattr__(self, name, (first, last))
        object.__setattr__(self, "dtype", str(self.dtype))

    @classmethod
    def preset(cls, name: str, **overrides) -> "AblationDesign":
        """The preset ``name`` (:data:`PRESETS`), with ``overrides`` replacing its fields."""
        if name not in PRESETS:
            raise ParameterError(f"no ablation design {name!r}; presets: {', '.join(PRESETS)}")
        return PRESETS[name].replace(**overrides)

    def replace(self, **changes) -> "AblationDesign":
        """A copy with ``changes``; ``None`` values keep the field (unset options)."""
        fields = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - fields)
        if unknown:
            raise ParameterError(f"unknown design fields {', '.join(unknown)}; fields: {', '.join(sorted(fields))}")
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})

    @property
    def named_measures(self) -> bool:
        """Whether the measures were named (then each must fit) rather than ``all``."""
        return self.measures != ALL_MEASURES

    @keyword_only
    def fitted_measures(self, *, n_tokens: int | None = None, n_ctx: int | None = None) -> tuple[tuple, list[str]]:
        """The measures this design runs on passages of ``n_tokens`` with a model context of ``n_ctx``.

        ``measures="all"`` leaves out ``wide_icl`` when its windows do not fit the passages and
        ``repeated_tokens`` when ``2 * repeat_length + 1`` tokens exceed the context, each with a
        note; named measures that do not fit raise :class:`~cmr.errors.ParameterError`.
        Returns ``(measures, notes)``.
        """
        n_tokens = self.n_tokens if n_tokens is None else int(n_tokens)
        measures = MEASURES if self.measures == ALL_MEASURES else self.measures
        notes = []
        if "wide_icl" in measures:
            try:
                check_window(self.wide_early, n_tokens, "--wide-early")
                check_window(self.wide_late, n_tokens, "--wide-late")
            except ParameterError:
                if self.named_measures:
                    raise
                measures = tuple(m for m in measures if m != "wide_icl")
                notes.append(f"wide_icl left out: its windows {self.wide_early[0]}:{self.wide_early[1]} and "
                             f"{self.wide_late[0]}:{self.wide_late[1]} do not fit passages of {n_tokens} tokens "
                             "(--wide-early, --wide-late)")
        if "repeated_tokens" in measures and n_ctx is not None and 2 * self.repeat_length + 1 > int(n_ctx):
            if self.named_measures:
                raise ParameterError(f"repeated_tokens passages of 2 x {self.repeat_length} tokens and a BOS exceed "
                                     f"the model's context of {int(n_ctx)} tokens; give a smaller --repeat-length")
            measures = tuple(m for m in measures if m != "repeated_tokens")
            notes.append(f"repeated_tokens left out: 2 x {self.repeat_length} tokens and a BOS exceed the model's "
                         f"context of {int(n_ctx)} tokens (--repeat-length)")
        return tuple(measures), notes

    def options(self) -> str:
        """The preset as ``icl-cmr ablate`` options (for ``--help``; ``--dtype`` only when not float32)."""
        mode = {modes: name for name, modes in MODE_NAMES.items()}.get(tuple(self.modes), ",".join(self.modes))
        measures = self.measures if self.measures == ALL_MEASURES else ",".join(self.measures)
        dtype = "" if self.dtype == AblationDesign.dtype else f" --dtype {self.dtype}"
        return (f"--n-passages {self.n_passages} --n-random {self.n_random} --n-matched {self.n_matched} "
                f"--mode {mode} --measures {measures}{dtype}")


#: the named designs of docs/ablation.md; explicit options override them. ``cpu``: the power
#: calculation of docs/ablation.md ("Power and the CPU design") on SmolLM2-135M, 2 cores, 2 hours;
#: 120 random sets, not 1,000, because 1,000 would take 8 times as long. ``study``: 1,000 random
#: and 1,000 layer-matched sets, so that the rank test resolves p far below Holm's level and its
#: power is set by the sets' spread, not by their number (about 2 hours on one H100 in bfloat16).
#: ``demo``: the ablation stage of ``icl-cmr run``, about 5 minutes on 2 cores; ``bigram`` reads the
#: losses of the same forward passes (its CPU time was within the noise of the ICL score's alone),
#: ``repeated_tokens`` would add passes (+23% CPU time measured), so the demo leaves it out.
PRESETS = {
    "cpu": AblationDesign(n_passages=24, n_random=120, n_matched=0, modes=("zero",),
                          measures=("icl", "bigram", "repeated_tokens"), dtype="float32"),
    "study": AblationDesign(n_passages=300, n_random=1000, n_matched=1000, modes=("zero", "mean"),
                            measures=("icl",), dtype="float32"),
    "demo": AblationDesign(n_passages=6, n_random=50, n_matched=0, modes=("zero",), measures=("icl", "bigram"),
                           dtype="float32"),
}
