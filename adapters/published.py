"""The study's published attention-head lag profiles as a ``lag_profile`` dataset.

Ji-An, Zhou, Benna & Mattar (NeurIPS 2024) saved, for every head of GPT-2 small, Pythia
(70m/410m/2.8b/12b deduped, 16 training checkpoints each), Qwen-7B, Mistral-7B and Llama3-8B,
the mean pre-softmax attention score by lag (``head_profiles.csv.gz``: one row per model,
checkpoint, layer, head, lag with ``score_mean`` and ``score_sem``) and head scores
(``head_metrics.csv.gz``: ``induction_score``, ``copying_score``). This module reads them into
the same dataset an attention-head scan produces, so the paper's heads can be re-analysed
without any model.

Representation: dims (model, checkpoint, layer, head, lag). Models have different numbers of
layers and heads and different checkpoints; when several models are read together they share
the union of those coords and the missing cells are NaN (``attrs["padded"] = 1``). Select one
model (``model=...``) for a dense dataset; :func:`cmr.profile_fit.fit_profiles` gives NaN results
for all-NaN padding units without complaint.
"""
from __future__ import annotations

import functools
import hashlib
import os
import warnings
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from cmr.errors import DataSourceError, FileFormatError, ParameterError
from cmr.files import check_input_file
from cmr.constants import HEAD_DIMS
from cmr.deprecation import keyword_only
from cmr.schema import provenance_attrs, validate

__all__ = [
    "read_published_profiles",
    "read_published_metrics",
    "published_human_fits",
    "published_file",
    "file_sha256",
    "file_provenance",
    "reference_dir",
    "embedded_dir",
    "PUBLISHED_FILES",
    "PROFILE_COLUMNS",
    "METRIC_COLUMNS",
    "ReferenceDataWarning",
]

PROFILE_COLUMNS = ("model", "checkpoint", "layer", "head", "lag", "score_mean", "score_sem")
METRIC_COLUMNS = ("model", "checkpoint", "layer", "head", "induction_score", "copying_score")
_INT_COLUMNS = ("checkpoint", "layer", "head", "lag")
ORIGIN = "Ji-An, Zhou, Benna & Mattar (NeurIPS 2024), published head profiles (MIT)"
#: the study's published files, as installed with the package (data/published/README.md)
PUBLISHED_FILES = ("head_profiles.csv.gz", "head_metrics.csv.gz", "cmr_crp_grid.npz")
#: environment variable naming another folder of the study's files (instead of the installed copy)
REFERENCE_VARIABLE = "ICL_CMR_REFERENCE"


class ReferenceDataWarning(UserWarning):
    """A file given as the study's published output differs from the published file."""


def embedded_dir() -> Path:
    """The folder of the study's published files installed with the package (``icl_cmr.data``)."""
    return Path(str(resources.files("icl_cmr.data.published")))


@functools.lru_cache(maxsize=1)
def _published_checksums() -> dict[str, str]:
    """``{file name: sha256}`` of the published files, from the installed ``SHA256SUMS``."""
    path = embedded_dir() / "SHA256SUMS"
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise DataSourceError(f"the installed copy of the study's files lacks its checksum list {str(path)!r}: "
                              "reinstall icl-cmr") from exc
    sums = {}
    for line in filter(str.strip, lines):  # sha256sum's format: "<digest>  <name>"
        digest, name = line.split(maxsplit=1)
        sums[name.strip().lstrip("*")] = digest
    return sums


@functools.lru_cache(maxsize=32)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    """SHA-256 of a file (cached per path, size and modification time: a changed file is hashed again)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path) -> str:
    """SHA-256 (hex) of the file at ``path``."""
    if not Path(path).is_file():
        raise DataSourceError(f"expected an existing file to checksum; got {str(path)!r}")
    stat = Path(path).stat()
    return _sha256(str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns)


def reference_dir(reference=None) -> Path:
    """The folder of the study's published files (``head_profiles.csv.gz``, ``cmr_crp_grid.npz``, ...).

    ``reference`` when given, else ``$ICL_CMR_REFERENCE`` when that variable is set, else the copy
    installed with the package (:func:`embedded_dir`). A given folder may hold the files or an
    ``icl-cmr/`` folder with them (the study's export layout). Where the package lives never
    matters, and a folder that was named but does not exist is an error, not a silent fallback.
    """
    if reference is None and os.environ.get(REFERENCE_VARIABLE):
        reference, origin = os.environ[REFERENCE_VARIABLE], f"${REFERENCE_VARIABLE}"
    elif reference is not None:
        origin = "the reference folder"
    else:
        return embedded_dir()
    root = Path(reference)
    if not root.is_dir():
        raise DataSourceError(f"{origin}: expected a folder holding the study's published files; "
                              f"got {str(root)!r}, which is not a folder")
    nested = root / "icl-cmr"
    return nested if nested.is_dir() and not (root / PUBLISHED_FILES[0]).exists() else root


@keyword_only
def published_file(name: str, *, reference=None) -> Path:
    """Path of one of the study's published files, its checksum verified.

    Parameters
    ----------
    name : str
        One of :data:`PUBLISHED_FILES`.
    reference : str or Path, optional
        Another folder of the study's files (see :func:`reference_dir`); default
        ``$ICL_CMR_REFERENCE``, else the installed copy.

    The installed copy must equal the published files byte for byte (SHA-256 in
    ``SHA256SUMS``): a damaged copy is an error. A file from another folder that differs from the
    published one is used, with a :class:`ReferenceDataWarning` (results will not be the study's).
    """
    checksums = _published_checksums()
    if name not in checksums:
        raise ParameterError(f"published file must be one of {', '.join(PUBLISHED_FILES)}; got {name!r}")
    folder = reference_dir(reference)
    path = folder / name
    if not path.is_file():
        raise DataSourceError(f"the study's published file {name} is not in {str(folder)!r}")
    digest = file_sha256(path)
    if digest != checksums[name]:
        if folder == embedded_dir():
            raise DataSourceError(f"the installed copy of the study's {name} is damaged (SHA-256 {digest[:12]}..., "
                                  f"published {checksums[name][:12]}...): reinstall icl-cmr")
        warnings.warn(f"{path} is not the study's published file (SHA-256 {digest[:12]}...): results made from it "
                      "will differ from the published ones", ReferenceDataWarning, stacklevel=2)
    return path


def file_provenance(path, what: str) -> dict:
    """Provenance of a read file: its resolved path and SHA-256."""
    path = Path(path)
    return {what: str(path.resolve()), f"{what}_sha256": file_sha256(path)}


def published_human_fits() -> pd.DataFrame:
    """CMR (beta_enc, beta_rec) fitted to human free recall in the literature (data/README.md).

    Columns ``study, data, beta_enc, beta_rec``; read from the installed package data.
    """
    with resources.as_file(resources.files("icl_cmr.data") / "published_human_cmr_fits.csv") as path:
        return pd.read_csv(path)


def _read_table(path, columns, what) -> pd.DataFrame:
    path = Path(path)
    if not path.exists() or path.is_dir():
        raise DataSourceError(f"published {what}: expected an existing CSV file; got {str(path)!r}")
    check_input_file(path, f"published {what}", kind="text")
    try:
        table = pd.read_csv(path)
    except (OSError, ValueError, UnicodeDecodeError, EOFError) as exc:
        raise FileFormatError(f"published {what} {str(path)!r} is not a readable CSV table: {exc}") from exc
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise FileFormatError(
            f"published {what} needs columns {', '.join(columns)}; {str(path)!r} lacks {', '.join(missing)}"
        )
    if table.empty:
        raise FileFormatError(f"published {what} {str(path)!r} has no rows")
    table = table[list(columns)].copy()
    table["model"] = table["model"].astype(str)
    for col in columns[1:]:
        numeric = pd.to_numeric(table[col], errors="coerce")
        if numeric.isna().any() and not table[col].isna().equals(numeric.isna()):
            bad = table.loc[numeric.isna() & table[col].notna(), col].iloc[0]
            raise FileFormatError(f"published {what}: column {col!r} must be numeric; found {bad!r}")
        if col in _INT_COLUMNS:
            if numeric.isna().any() or (numeric != np.round(numeric)).any():
                raise FileFormatError(f"published {what}: column {col!r} must hold integers with no gaps")
            numeric = numeric.astype(np.int64)
        table[col] = numeric
    keys = [c for c in ("model", "checkpoint", "layer", "head", "lag") if c in columns]
    duplicated = table.duplicated(keys)
    if duplicated.any():
        row = table.loc[duplicated, keys].iloc[0].to_dict()
        raise FileFormatError(f"published {what}: duplicate rows for {row}")
    return table


def _select(table, model, checkpoint, what):
    models = sorted(table["model"].unique())
    if model is not None:
        wanted = [model] if isinstance(model, str) else list(model)
        unknown = [m for m in wanted if m not in models]
        if unknown:
            raise DataSourceError(f"published {what}: no model {', '.join(unknown)}; models: {', '.join(models)}")
        table = table[table["model"].isin(wanted)]
    if checkpoint is None:
        return table
    if isinstance(checkpoint, str) and checkpoint.lstrip("-").isdigit():
        checkpoint = int(checkpoint)  # from a command line
    if isinstance(checkpoint, str):
        if checkpoint != "final":
            raise ParameterError(f"checkpoint must be an int, a list of ints or 'final'; got {checkpoint!r}")
        finals = table.groupby("model")["checkpoint"].max()
        if finals.nunique() > 1:
            raise ParameterError(
                "checkpoint='final' needs models with the same final checkpoint; select one model "
                f"(final checkpoints: {finals.to_dict()})"
            )
        return table[table["checkpoint"] == finals.iloc[0]]
    wanted = [int(checkpoint)] if np.ndim(checkpoint) == 0 else [int(c) for c in checkpoint]
    present = set(table["checkpoint"].unique().tolist())
    missing = [c for c in wanted if c not in present]
    if missing:
        raise DataSourceError(
            f"published {what}: no checkpoint {missing} for the selected model(s); "
            f"checkpoints: {sorted(present)}"
        )
    return table[table["checkpoint"].isin(wanted)]


def _check_complete(table, keys, inner, what):
    """Each (model, checkpoint) must hold the full layer x head (x lag) grid it spans."""
    for (model, checkpoint), part in table.groupby(["model", "checkpoint"], sort=False):
        expected = int(np.prod([part[c].nunique() for c in inner]))
        if len(part) != expected:
            raise FileFormatError(
                f"published {what}: model {model!r} checkpoint {checkpoint} has {len(part)} rows; "
                f"a complete {' x '.join(inner)} grid needs {expected}"
            )


@keyword_only
def read_published_metrics(path=None, *, model=None, checkpoint=None) -> xr.Dataset:
    """Read ``head_metrics.csv.gz``: ``induction_score`` and ``copying_score`` with dims
    (model, checkpoint, layer, head) (float64; NaN where a model lacks a layer or head).

    ``path`` defaults to the study's published file (:func:`published_file`)."""
    path = published_file("head_metrics.csv.gz") if path is None else path
    table = _select(_read_table(path, METRIC_COLUMNS, "head metrics"), model, checkpoint, "head metrics")
    _check_complete(table, HEAD_DIMS, ("layer", "head"), "head metrics")
    frame = table.set_index(list(HEAD_DIMS))[["induction_score", "copying_score"]].astype(np.float64)
    return xr.Dataset.from_dataframe(frame)


@keyword_only
def read_published_profiles(path=None, *, model=None, checkpoint=None, metrics="auto") -> xr.Dataset:
    """Read the study's head profiles into a ``lag_profile`` dataset.

    Parameters
    ----------
    path : str or Path, optional
        ``head_profiles.csv.gz`` (columns model, checkpoint, layer, head, lag, score_mean,
        score_sem; one row per head and lag). Default: the study's published file, installed
        with the package and checked against its checksum (:func:`published_file`).
    model : str or list of str, optional
        Model(s) to read (e.g. ``"gpt2-small"``); default all, padded with NaN (module doc).
    checkpoint : int, list of int or "final", optional
        Checkpoint(s) to read; ``-1`` is a released model; ``"final"`` the last one of the
        selected model (142 for Pythia); a string of digits counts as that int. Default all.
    metrics : "auto", path or False
        ``head_metrics.csv.gz`` to merge (``induction_score``, ``copying_score``); "auto" reads
        the file of that name next to ``path`` if it exists.

    Returns
    -------
    xarray.Dataset
        ``profile`` (= score_mean) and ``sem`` (= score_sem) with dims (model, checkpoint,
        layer, head, lag), float64, int64 coords; attrs ``profile_kind="attention_score"``,
        ``unit_kind="heads"``, ``padded`` (1 if some cells are NaN padding) and provenance.
    """
    if path is None:
        path = published_file("head_profiles.csv.gz")
        metrics = published_file("head_metrics.csv.gz") if metrics == "auto" else metrics
    table = _select(_read_table(path, PROFILE_COLUMNS, "head profiles"), model, checkpoint, "head profiles")
    _check_complete(table, (*HEAD_DIMS, "lag"), ("layer", "head", "lag"), "head profiles")
    frame = table.set_index([*HEAD_DIMS, "lag"])[["score_mean", "score_sem"]].astype(np.float64)
    ds = xr.Dataset.from_dataframe(frame).rename({"score_mean": "profile", "score_sem": "sem"})
    ds = ds.transpose(*HEAD_DIMS, "lag")
    for dim in ("checkpoint", "layer", "head", "lag"):
        ds[dim] = ds[dim].astype(np.int64)
    ds["model"] = ds["model"].astype(str)
    padded = int(bool(ds["profile"].isnull().any()))
    metrics_path = None
    if metrics == "auto":
        candidate = Path(path).with_name("head_metrics.csv.gz")
        metrics_path = candidate if candidate.is_file() else None
    elif metrics is not False and metrics is not None:
        metrics_path = Path(metrics)
    if metrics_path is not None:
        scores = read_published_metrics(metrics_path, model=model, checkpoint=checkpoint)
        scores = scores.reindex_like(ds[list(HEAD_DIMS)])
        for name in ("induction_score", "copying_score"):
            ds[name] = scores[name].transpose(*HEAD_DIMS)
    ds["profile"].attrs["long_name"] = "mean pre-softmax attention score from a second-repeat token to lag"
    ds["sem"].attrs["long_name"] = "SEM of the score across query tokens"
    ds.attrs.update(
        provenance_attrs(
            "lag_profile",
            "icl_cmr.adapters.published.read_published_profiles",
            **file_provenance(path, "source"),
            **(file_provenance(metrics_path, "metrics_source") if metrics_path is not None else {"metrics_source": ""}),
            origin=ORIGIN,
            models=sorted(ds["model"].values.tolist()),
            checkpoints=sorted(int(c) for c in ds["checkpoint"].values),
        )
    )
    ds.attrs.update(profile_kind="attention_score", unit_kind="heads", padded=padded)
    return validate(ds, "lag_profile")
