"""Typed errors of the language-model adapters, in the hierarchy of :mod:`cmr.errors`."""
from __future__ import annotations

from cmr.errors import ICLCMRError

__all__ = ["ModelNotAvailableError", "PromptError", "ModelOutputError"]


class ModelNotAvailableError(ICLCMRError, LookupError):
    """A language model is not available offline, or its files cannot be used: a damaged cached copy, a
    missing part (config, tokenizer, weights), custom code or pickled objects (never run), a refused chat template."""


class PromptError(ICLCMRError, ValueError):
    """Prompt settings do not fit the model (too long, too few usable tokens, window too wide)."""


class ModelOutputError(ICLCMRError, RuntimeError):
    """An intact model's output cannot be a result: degenerate text on every input, or no recall at all
    from an instruction-tuned model (a broken model file or an incompatible library, not a finding)."""
