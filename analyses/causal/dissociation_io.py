"""A ``dissociation`` file: experiments combined, read back, printed; the design presets.

See :mod:`icl_cmr.analyses.causal.dissociation` and docs/dissociation.md.
"""
from __future__ import annotations

import json

import numpy as np
import xarray as xr

from cmr.errors import SchemaError
from cmr.schema import provenance_attrs, register_kind

__all__ = ["KIND", "HOLM_FAMILIES", "DEFAULTS", "DESIGNS", "EXPERIMENTS", "PREFIXES", "combine", "experiment_view", "summary_lines",
           "validate_dissociation"]

KIND = "dissociation"
#: what the Holm families of each experiment hold, as printed beside their adjusted p-values
HOLM_FAMILIES = {
    "sets": {"primary": "rank tests of cmr_not_induction, cmr_lag0 and cmr_lag1 among their stratified sets on the "
                        "primary measure, every mode",
             "all measures": "every target x measure x mode rank test"},
    "heads": {"primary": "permutation p of the CMR features on the primary measure, every mode",
              "all measures": "permutation p of the CMR features, every measure x mode"},
    "random_sets": {"primary": "t p of the named head's membership and of the CMR-like count on the primary measure, "
                               "every mode",
                    "all measures": "t p of every predictor, measure and mode"},
}


#: ``icl-cmr dissociate --design`` presets (docs/dissociation.md gives the power and time behind them)
DESIGNS = {
    "cpu": dict(n_passages=6, n_sets=60, set_modes="zero", head_modes="zero,resample", dtype="float32"),
    "study": dict(n_passages=300, n_sets=1000, set_modes="zero,resample", head_modes="zero,resample",
                  dtype="bfloat16", batch_size=64),
}
#: the values of the options a design preset sets (``icl-cmr dissociate`` without ``--design``)
DEFAULTS = dict(n_passages=6, n_sets=60, set_modes="zero", head_modes="zero,resample", dtype="float32", batch_size=8)
#: the experiments of a dissociation run, in the order a combined file holds them
EXPERIMENTS = ("sets", "heads", "random_sets")

#: variable prefix of each experiment; its measure and mode dims are renamed with it in a combined file
PREFIXES = {"sets": "set", "heads": "head", "random_sets": "random"}


def combine(parts) -> xr.Dataset:
    """One ``dissociation`` dataset from experiments' datasets: each experiment's ``measure`` and
    ``mode`` dims become ``<prefix>_measure`` and ``<prefix>_mode`` (``set``, ``head``, ``random``),
    so experiments with different modes or measures share a file; each one's provenance is kept
    in attr ``<experiment>_provenance``."""
    renamed, attrs, names = [], {}, []
    for part in parts:
        name = str(part.attrs["experiments"])
        prefix = PREFIXES[name]
        mapping = {d: f"{prefix}_{d}" for d in ("measure", "mode") if d in part.dims}
        renamed.append(part.rename(mapping))
        names.append(name)
        for key, value in part.attrs.items():
            if key == "provenance":
                attrs[f"{name}_provenance"] = value
            elif key not in ("icl_cmr_kind", "icl_cmr_schema", "experiments", "holm_families"):
                attrs[f"{name}_{key}" if key in attrs else key] = value
        attrs[f"{name}_holm_families"] = part.attrs.get("holm_families", "")
    out = xr.merge(renamed, combine_attrs="drop_conflicts")
    out.attrs = {}
    info = {n: json.loads(p.attrs["provenance"]) for n, p in zip(names, parts)}
    out.attrs.update(provenance_attrs(KIND, "icl_cmr.analyses.causal.dissociation.combine", experiments=info))
    out.attrs.update(attrs)
    out.attrs["experiments"] = ",".join(names)
    return out


def experiment_view(ds: xr.Dataset, name: str) -> xr.Dataset:
    """The variables of one experiment of a combined file, with plain ``measure`` and ``mode`` dims."""
    prefix = PREFIXES[name]
    keep = [v for v in ds.data_vars if str(v).startswith(prefix + "_")]
    if not keep:
        raise SchemaError(f"the dissociation dataset holds no experiment {name!r} (experiments: "
                          f"{ds.attrs.get('experiments')})")
    part = ds[keep]
    mapping = {f"{prefix}_{d}": d for d in ("measure", "mode") if f"{prefix}_{d}" in part.dims}
    part = part.rename(mapping)
    part.attrs = dict(ds.attrs)
    part.attrs["provenance"] = ds.attrs.get(f"{name}_provenance", ds.attrs.get("provenance", ""))
    return part


def _family(primary, everything):
    if np.isfinite(primary):
        return f"Holm {primary:.3g}, family: primary"
    return f"Holm {everything:.3g}, family: all measures"


def summary_lines(ds: xr.Dataset) -> list[str]:
    """One line per test of a combined ``dissociation`` dataset, each with its Holm value and family."""
    lines = []
    experiments = str(ds.attrs.get("experiments", "")).split(",")
    if "sets" in experiments:
        part = experiment_view(ds, "sets")
        for target in part["target"].values:
            row = part.sel(target=target)
            size, family = int(row["target_size"]), str(row["null_family"].values)
            for measure in part["measure"].values:
                for mode in part["mode"].values:
                    v = row.sel(measure=measure, mode=mode)
                    lines.append(
                        f"sets {target} ({size} heads) {measure} {mode}: effect {float(v['set_mean_effect']):+.3f} "
                        f"nats, rank {float(v['set_rank']):.0f} of {float(v['set_n_null']) + 1:.0f} {family} sets, "
                        f"p {float(v['set_rank_pvalue']):.3f}, z {float(v['set_z']):+.2f} (random "
                        f"{float(v['set_null_mean']):+.3f} +- {float(v['set_null_sd']):.3f}) "
                        f"({_family(float(v['set_holm_pvalue']), float(v['set_measure_holm_pvalue']))})")
    if "heads" in experiments:
        part = experiment_view(ds, "heads")
        for measure in part["measure"].values:
            for mode in part["mode"].values:
                v = {k: float(part[k].sel(measure=measure, mode=mode)) for k in part.data_vars
                     if set(part[k].dims) == {"measure", "mode"}}
                lines.append(
                    f"heads {measure} {mode}: CMR features beyond the baseline over {v['head_n_rows']:.0f} heads: "
                    f"partial R2 {v['head_partial_r2']:.3f}, adjusted {v['head_partial_r2_adjusted']:+.3f} "
                    f"[{v['head_ci_low']:+.3f}, {v['head_ci_high']:+.3f}], R2 {v['head_r2_base']:.3f} -> "
                    f"{v['head_r2_full']:.3f} (delta {v['head_delta_r2']:+.3f}), permutation p "
                    f"{v['head_permutation_pvalue']:.3g} "
                    f"({_family(v['head_holm_pvalue'], v['head_measure_holm_pvalue'])}), F p {v['head_f_pvalue']:.2g}")
    if "random_sets" in experiments:
        part = experiment_view(ds, "random_sets")
        for measure in part["measure"].values:
            for mode in part["mode"].values:
                for predictor in part["predictor"].values[1:]:
                    v = {k: float(part[f"random_{k}"].sel(measure=measure, mode=mode, predictor=predictor))
                         for k in ("estimate", "se", "t_pvalue", "holm_pvalue", "measure_holm_pvalue")}
                    lines.append(
                        f"random_sets {measure} {mode} {predictor}: {v['estimate']:+.4g} nats (se {v['se']:.2g}) "
                        f"over {float(part['random_n_sets'].sel(measure=measure, mode=mode)):.0f} sets, t p "
                        f"{v['t_pvalue']:.2g} ({_family(v['holm_pvalue'], v['measure_holm_pvalue'])})")
    return lines


def validate_dissociation(ds: xr.Dataset) -> None:
    """Check a ``dissociation`` dataset: at least one experiment's variables (docs/dissociation.md)."""
    experiments = [e for e in str(ds.attrs.get("experiments", "")).split(",") if e]
    needs = {"sets": "set_rank_pvalue", "heads": "head_effect", "random_sets": "random_estimate"}
    if not experiments or any(e not in needs for e in experiments):
        raise SchemaError(f"dissociation dataset: attr experiments must list some of {', '.join(needs)}; "
                          f"got {ds.attrs.get('experiments')!r}")
    for name in experiments:
        if needs[name] not in ds:
            raise SchemaError(f"dissociation dataset: experiment {name!r} needs variable {needs[name]!r}")


register_kind(KIND, validate_dissociation)

