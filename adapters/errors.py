"""Typed errors of the language-model adapters, in the hierarchy of :mod:`cmr.errors`."""
from __future__ import annotations

from cmr.errors import ICLCMRError

__all__ = ["ModelNotAvailableError", "PromptError"]


class ModelNotAvailableError(ICLCMRError, LookupError):
    """A language model is not available offline (or its cached copy is damaged)."""


class PromptError(ICLCMRError, ValueError):
    """Prompt settings do not fit the model (too long, too few usable tokens, window too wide)."""
