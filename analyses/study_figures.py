"""The figures of ``icl-cmr run``, drawn from the run's own netCDF outputs."""
from __future__ import annotations

import numpy as np
import xarray as xr

from icl_cmr.adapters.published import published_human_fits
from icl_cmr.analyses import figures as F
from icl_cmr.analyses.run_layout import CMR_LIKE_DISTANCE, OBJECTIVES, head_fit_file, human_files, human_fit_files, slug


def _heads_2d(da: xr.DataArray) -> xr.DataArray:
    """Drop size-1 model/checkpoint dims; keep (layer, head, ...)."""
    extra = [d for d in ("model", "checkpoint") if d in da.dims]
    return da.squeeze(extra, drop=True)


def top_head_fits(path, heads: xr.Dataset, fits: xr.Dataset, n: int = 6) -> None:
    """Lag profiles of the top induction heads with their CMR and fair Gaussian fits."""
    from icl_cmr.analyses.ablation import top_heads_from_fits

    induction = _heads_2d(heads["induction_score"])
    top = top_heads_from_fits(heads, variable="induction_score", n_heads=n, largest=True)
    ncols = 3
    nrows = int(np.ceil(len(top) / ncols))
    with F.figure(path, ncols=ncols, nrows=nrows, width=2.5, height=2.1, pdf=True) as (fig, axes):
        for k, (layer, head) in enumerate(top):
            ax = axes.flat[k]
            sel = {"layer": layer, "head": head}
            unit = _heads_2d(fits["profile"]).sel(sel)
            lags = unit["lag"].values
            sem = _heads_2d(heads["sem"]).sel(sel).sel(lag=lags).values if "sem" in heads else None
            ax.errorbar(lags, unit.values, yerr=sem, fmt="o", color="k", ms=3, lw=1, label="head (mean +- SEM)", zorder=3)
            ax.plot(lags, _heads_2d(fits["fitted"]).sel(sel).values, color=F.PALETTE[0], label="CMR fit")
            ax.plot(lags, _heads_2d(fits["gaussian_fitted"]).sel(sel).values, color=F.PALETTE[1], ls="--",
                    label="Gaussian fit")
            d = float(_heads_2d(fits["distance"]).sel(sel))
            gd = float(_heads_2d(fits["gaussian_distance"]).sel(sel))
            ax.text(0.03, 0.97, f"d CMR {d:.3f}\nd Gauss {gd:.3f}", transform=ax.transAxes, va="top", fontsize=6.5)
            ax.set_title(f"L{layer}.H{head}  (induction {float(induction.sel(sel)):.2f})")
            ax.set_xticks(lags[::2] if len(lags) > 8 else lags)
            ax.set_xlabel("Lag")
        for ax in axes[:, 0]:
            ax.set_ylabel("Pre-softmax score")
        for ax in list(axes.flat)[len(top):]:
            ax.axis("off")
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=3, bbox_to_anchor=(0.5, -0.04))


def distance_vs_induction(path, heads: xr.Dataset, fits_by_objective: dict) -> None:
    """CMR distance of every head against its induction score, one panel per objective."""
    induction = _heads_2d(heads["induction_score"])
    with F.figure(path, ncols=len(fits_by_objective), width=3.0, height=2.7, pdf=True, sharey=True) as (fig, axes):
        for ax, (objective, fits) in zip(axes[0], fits_by_objective.items()):
            distance = _heads_2d(fits["distance"]).transpose(*induction.dims)
            ax.scatter(induction.values.ravel(), distance.values.ravel(), s=9, color=F.PALETTE[0], alpha=0.7, lw=0)
            ax.axhline(CMR_LIKE_DISTANCE, color="0.5", lw=0.8, ls=":")
            ax.set_yscale("log")
            ax.set_xlabel("Induction score")
            ax.set_title(f"objective '{objective}'")
        axes[0][0].set_ylabel("CMR distance")


def share_by_depth(path, fits_by_objective: dict, threshold: float = CMR_LIKE_DISTANCE, n_bins: int = 5) -> None:
    """Share of heads with CMR distance below ``threshold`` by relative layer depth."""
    with F.figure(path, width=3.4, height=2.6, pdf=True) as (fig, axes):
        ax = axes[0][0]
        width = 0.8 / len(fits_by_objective)
        for k, (objective, fits) in enumerate(fits_by_objective.items()):
            distance = _heads_2d(fits["distance"])
            layers = distance["layer"].values
            depth = layers / max(1, layers.max())
            bins = np.minimum((depth * n_bins).astype(int), n_bins - 1)
            values = distance.transpose("layer", "head").values
            share = [np.mean(values[bins == b] < threshold) if (bins == b).any() else np.nan for b in range(n_bins)]
            ax.bar(np.arange(n_bins) + (k - (len(fits_by_objective) - 1) / 2) * width, share, width,
                   color=F.PALETTE[k], label=objective)
        ax.set_xticks(range(n_bins))
        ax.set_xticklabels([f"{b / n_bins:.1f}-{(b + 1) / n_bins:.1f}" for b in range(n_bins)])
        ax.set_xlabel("Relative layer depth")
        ax.set_ylabel(f"Share of heads with d < {threshold}")
        ax.set_ylim(0, 1)
        ax.legend()


def parameters_heads_vs_humans(path, head_fits: xr.Dataset, human_fits: dict, top_heads) -> None:
    """Fitted (beta_enc, beta_rec) of the top CMR-like heads, of human subjects, and published fits."""
    with F.figure(path, width=3.6, height=3.2, pdf=True) as (fig, axes):
        ax = axes[0][0]
        for k, (label, fits) in enumerate(human_fits.items()):
            p = fits["parameters"]
            ax.scatter(p.sel(parameter="beta_enc"), p.sel(parameter="beta_rec"), s=10, alpha=0.5, lw=0,
                       color=F.PALETTE[2 + k], label=f"{label} subjects")
        p = _heads_2d(head_fits["parameters"])
        be = [float(p.sel(layer=l, head=h, parameter="beta_enc")) for l, h in top_heads]
        br = [float(p.sel(layer=l, head=h, parameter="beta_rec")) for l, h in top_heads]
        ax.scatter(be, br, s=28, marker="^", color=F.PALETTE[0], label="top CMR-like heads")
        published = published_human_fits()
        ax.scatter(published["beta_enc"], published["beta_rec"], s=60, marker="*", color=F.PALETTE[1],
                   label="published human fits")
        ax.set_xlabel(r"$\beta_{enc}$")
        ax.set_ylabel(r"$\beta_{rec}$")
        ax.set_xlim(0, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.legend(loc="lower left", fontsize=6.5)


def human_vs_soft_crp(path, human: dict, soft: xr.Dataset, top_heads, max_lag: int = 5) -> None:
    """Human lag-CRPs beside the soft-transition lag-CRP of the top heads (same CRP scale)."""
    with F.figure(path, ncols=2, width=3.0, height=2.6, pdf=True, sharey=True) as (fig, axes):
        axes[0][0].set_yscale("log")  # heads are far sharper than humans; a log axis shows both shapes
        ax = axes[0][0]
        for k, (label, ds) in enumerate(human.items()):
            window = ds["profile"].sel(lag=slice(-max_lag, max_lag))
            mean, sem = F.mean_sem(window, [d for d in window.dims if d != "lag"])
            F.plot_lag_segments(ax, window["lag"].values, mean.values, sem.values, color=F.PALETTE[2 + k], label=label)
        ax.set_title("Human free recall")
        ax.set_ylabel("Conditional response probability")
        ax.legend()
        ax = axes[0][1]
        profile = _heads_2d(soft["profile"]).sel(lag=slice(-max_lag, max_lag))
        for k, (l, h) in enumerate(top_heads[:4]):
            unit = profile.sel(layer=l, head=h)
            F.plot_lag_segments(ax, unit["lag"].values, unit.values, color=F.PALETTE[k], label=f"L{l}.H{h}")
        ax.set_title("Attention heads (soft lag-CRP)")
        ax.legend()
        for ax in axes[0]:
            ax.set_xlabel("Lag")
            ax.set_xticks(range(-max_lag, max_lag + 1))


def ablation_result(path, ablation: xr.Dataset) -> None:
    """Mean ICL-score change of the top CMR-like set against the random sets, per ablation mode."""
    modes = list(ablation["mode"].values)
    with F.figure(path, ncols=len(modes), width=3.2, height=2.5, pdf=True) as (fig, axes):
        for ax, mode in zip(axes[0], modes):
            effect = ablation["mean_effect"].sel(mode=mode)
            random = effect.sel(head_set=[s for s in ablation["head_set"].values if s != "top"]).values
            ax.hist(random, bins=12, color="0.7", label=f"{random.size} random sets")
            ax.axvline(float(effect.sel(head_set="top")), color=F.PALETTE[1], lw=2, label="top CMR-like set")
            ax.axvline(0, color="k", lw=0.6)
            p = float(ablation["empirical_pvalue"].sel(mode=mode))
            ax.set_title(f"{mode} ablation (empirical p = {p:.3f})")
            ax.set_xlabel("Change in ICL score (nats; > 0 hurts ICL)")
            ax.set_ylabel("Head sets")
            ax.legend(fontsize=6.5)


def make_all(ctx) -> list[str]:
    """Draw every figure the run's outputs allow; return their paths relative to the run dir."""
    from icl_cmr.adapters.head_profiles import select_profile
    from icl_cmr.analyses.ablation import top_heads_from_fits
    from cmr.io import load_dataset

    out = ctx.path("figures")
    out.mkdir(exist_ok=True)
    made = []

    def done(name):
        made.append(f"figures/{name}")
        return out / name

    human = {slug(s): load_dataset(ctx.path(f), kind="lag_profile") for s, f in human_files(ctx.settings).items()}
    F.human_lag_crp(human, done("human_lag_crp.png"), pdf=True)
    if not ctx.path("heads.nc").is_file():
        return made
    heads = load_dataset(ctx.path("heads.nc"), kind="lag_profile")
    fits = {o: load_dataset(ctx.path(head_fit_file(o)), kind="profile_fit") for o in OBJECTIVES}
    top = top_heads_from_fits(fits["lsq"], fraction=float(ctx.settings["ablation_fraction"]))
    top_head_fits(done("top_heads_fits.png"), heads, fits["lsq"])
    distance_vs_induction(done("distance_vs_induction.png"), heads, fits)
    share_by_depth(done("cmr_like_by_depth.png"), fits)
    human_fits = {slug(s): load_dataset(ctx.path(f), kind="profile_fit")
                  for (s, o), f in human_fit_files(ctx.settings).items() if o == "lsq"}
    parameters_heads_vs_humans(done("parameters_heads_vs_humans.png"), fits["lsq"], human_fits, top)
    human_vs_soft_crp(done("human_vs_head_crp.png"), human, select_profile(heads, "soft_lag_crp"), top)
    if ctx.path("ablation.nc").is_file():
        ablation_result(done("ablation.png"), load_dataset(ctx.path("ablation.nc"), kind="ablation"))
    return made
