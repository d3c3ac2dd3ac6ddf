"""Typed exceptions for the whole toolkit.

Every error a user can trigger derives from :class:`ICLCMRError` and from the builtin
that fits (``ValueError``, ``TypeError``, ``LookupError``, ``ImportError``), so callers
can catch either. Messages say what was expected and what came in.
"""
from __future__ import annotations

__all__ = [
    "ICLCMRError",
    "RecallDataError",
    "SchemaError",
    "DataSourceError",
    "FileFormatError",
    "ParameterError",
    "ProfileError",
    "ModelNotAvailableError",
    "PromptError",
    "OptionalDependencyError",
]


class ICLCMRError(Exception):
    """Base class of every error raised on purpose by icl-cmr."""


class RecallDataError(ICLCMRError, ValueError):
    """A recall table, recall matrix or events dataset is malformed."""


class SchemaError(ICLCMRError, ValueError):
    """A dataset does not follow the icl-cmr schema it claims (see docs/schema.md)."""


class DataSourceError(ICLCMRError, LookupError):
    """A named data source is unknown, or a file cannot be found or read."""


class FileFormatError(ICLCMRError, ValueError):
    """A file exists but is not a readable file of the expected format (e.g. corrupt netCDF)."""


class ParameterError(ICLCMRError, ValueError):
    """A model parameter is unknown, missing, NaN or outside its bounds."""


class ProfileError(ICLCMRError, ValueError):
    """A lag profile cannot be fitted or compared (NaN lags, zero variance, window mismatch)."""


class ModelNotAvailableError(ICLCMRError, LookupError):
    """A language model is not available offline."""


class PromptError(ICLCMRError, ValueError):
    """Prompt settings do not fit the model (too long, too few usable tokens, window too wide)."""


class OptionalDependencyError(ICLCMRError, ImportError):
    """An optional dependency (an extra of icl-cmr) is needed but not installed."""
