"""Typed exceptions for the whole toolkit.

Every error a user can trigger derives from :class:`ICLCMRError` and from the builtin
that fits (``ValueError``, ``TypeError``, ``LookupError``, ``ImportError``), so callers
can catch either. Messages say what was expected and what came in. Packages built on
``cmr`` (such as the language-model adapters of icl-cmr) derive their errors from
:class:`ICLCMRError` too.
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
    "OptionalDependencyError",
    "OutputError",
    "UnverifiedFileWarning",
    "RecallDataWarning",
    "FitWarning",
    "SimilarityWarning",
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
    """A parameter of a model or of a call is unknown, missing, NaN or outside its bounds."""


class ProfileError(ICLCMRError, ValueError):
    """A lag window is malformed, or a lag profile cannot be fitted or compared (NaN lags, zero
    variance, a window the data lack)."""


class OptionalDependencyError(ICLCMRError, ImportError):
    """An optional dependency (an extra of icl-cmr) is needed but not installed."""


class OutputError(ICLCMRError, OSError):
    """An output cannot be written where asked: the name is a directory or one of the inputs,
    the directory is not writable, or another process is writing the same output."""


class UnverifiedFileWarning(UserWarning):
    """A file was read that carries no checksums (a netCDF-3 file), so damage to its numbers
    cannot be detected; only the schema's range checks apply."""


class RecallDataWarning(UserWarning):
    """Recall data that read without an error but would give other numbers with an option the
    user can set (recalls typed in another case or with surrounding spaces, counted as intrusions)."""


class FitWarning(UserWarning):
    """A fit finished but some of its estimates need a second look: an estimate at its search
    bound, or a unit with few scored events per free parameter (the fit's ``at_bound`` and
    ``few_events`` variables say which)."""


class SimilarityWarning(UserWarning):
    """A similarity matrix that is not quite symmetric, inside [-1, 1] or positive semi-definite,
    within the warning band of :data:`cmr.similarity.SIMILARITY_TOLERANCES`; used as given."""
