"""The plotting package: each figure draws the numbers of its dataset, refuses the wrong kind,
and saves atomically; the examples of docs/figures.md run as written.

Drawn values are read back from the matplotlib artists (the data line and error bars of each
``errorbar`` container, scatter offsets, bar heights, the image array) and compared with the
datasets, or with an independent computation from them.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
import xarray as xr

import cmr
from cmr.errors import ParameterError, ProfileError, SchemaError
from icl_cmr.analyses import plots  # matplotlib loads only when a figure is drawn
from tests.conftest import REPO_ROOT, morton_events, require, tiny_head_scan

DOC = REPO_ROOT / "docs" / "figures.md"


@pytest.fixture(scope="module", autouse=True)
def _matplotlib():
    require("matplotlib")


@pytest.fixture(scope="module")
def events():
    return morton_events(8)


@pytest.fixture(scope="module")
def tiny():
    """A random tiny model, its head scan and fits of both objectives on a small grid."""
    model, heads, grid = tiny_head_scan()
    from icl_cmr.adapters.head_profiles import select_profile

    fits = {o: cmr.fit_profiles(select_profile(heads, which="score"), grid, objective=o, lags=cmr.PAPER_LAGS, invalid="nan")
            for o in ("paper", "lsq")}
    return model, heads, grid, fits


def _errorbars(ax):
    """(x, y, sem or None) of every errorbar container of an Axes, in drawing order."""
    from matplotlib.container import ErrorbarContainer

    out = []
    for container in ax.containers:
        if isinstance(container, ErrorbarContainer):
            line, _, bars = container.lines
            x, y = (np.asarray(v, dtype=float) for v in line.get_data())
            sem = None
            if bars:
                segments = np.asarray(bars[0].get_segments())  # (point, 2 ends, xy)
                sem = (segments[:, 1, 1] - segments[:, 0, 1]) / 2
            out.append((x, y, sem))
    return out


def _joined(ax):
    parts = _errorbars(ax)
    return tuple(None if parts[0][k] is None else np.concatenate([p[k] for p in parts]) for k in range(3))


def _figure(fig):
    from matplotlib.figure import Figure

    assert isinstance(fig, Figure)
    return fig


# --- free recall -------------------------------------------------------------------------------


def test_lag_crp_draws_the_mean_and_sem_across_subjects(events):
    crp = cmr.lag_crp(events, by="subject", lags=5)
    ax = _figure(plots.lag_crp(crp)).axes[0]
    x, y, sem = _joined(ax)
    assert x.tolist() == [-5, -4, -3, -2, -1, 1, 2, 3, 4, 5]  # the gap at lag 0
    values = crp["profile"].sel(lag=x).transpose("subject", "lag").values
    np.testing.assert_allclose(y, np.nanmean(values, axis=0), rtol=1e-12)
    n = np.isfinite(values).sum(axis=0)
    np.testing.assert_allclose(sem, np.nanstd(values, axis=0, ddof=1) / np.sqrt(n), rtol=1e-12)
    # the pooled lag-CRP's sem is the same SEM across subjects, computed by cmr itself
    np.testing.assert_allclose(sem, cmr.lag_crp(events, by=None, lags=5)["sem"].sel(lag=x), rtol=1e-12)
    assert "8 subjects" in ax.get_legend().get_texts()[0].get_text()


def test_lag_crp_by_trial_draws_the_by_subject_curve_and_pooled_its_own(events):
    by_subject = _joined(plots.lag_crp(cmr.lag_crp(events, by="subject")).axes[0])
    by_trial = _joined(plots.lag_crp(cmr.lag_crp(events, by="trial")).axes[0])
    for a, b in zip(by_subject, by_trial):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    pooled = cmr.lag_crp(events, by=None)
    x, y, sem = _joined(plots.lag_crp(pooled, lags=None).axes[0])
    assert x.tolist() == [lag for lag in pooled["lag"].values.tolist() if lag != 0]
    np.testing.assert_array_equal(y, pooled["profile"].sel(lag=x))
    np.testing.assert_allclose(sem, pooled["sem"].sel(lag=x), rtol=1e-12)


def test_lag_crp_overlays_a_mapping_and_draws_subjects(events):
    first, second = cmr.lag_crp(events.isel(trial=slice(0, 144))), cmr.lag_crp(events.isel(trial=slice(144, None)))
    ax = plots.lag_crp({"first": first, "second": second}).axes[0]
    curves = _errorbars(ax)
    assert len(curves) == 4  # two datasets x two lag segments
    lines = [c.lines[0] for c in ax.containers]
    assert lines[0].get_color() != lines[2].get_color() and lines[0].get_marker() != lines[2].get_marker()
    assert [t.get_text().split(" (")[0] for t in ax.get_legend().get_texts()] == ["first", "second"]
    ax = plots.lag_crp(first, per_subject=True).axes[0]
    assert len(ax.lines) == 2 * first.sizes["subject"]
    drawn = np.concatenate([line.get_ydata() for line in ax.lines[:2]])
    np.testing.assert_array_equal(drawn, first["profile"].isel(subject=0).sel(lag=[-5, -4, -3, -2, -1, 1, 2, 3, 4, 5]))


def test_spc_and_pfr_draw_the_mean_across_subjects(events):
    for function, stat in ((plots.spc, cmr.spc(events)), (plots.pfr, cmr.pfr(events))):
        x, y, sem = _joined(_figure(function(stat)).axes[0])
        values = stat["prob"].transpose("subject", "serial_position").values
        np.testing.assert_array_equal(x, stat["serial_position"])
        np.testing.assert_allclose(y, values.mean(axis=0), rtol=1e-12)
        np.testing.assert_allclose(sem, values.std(axis=0, ddof=1) / np.sqrt(len(values)), rtol=1e-12)
    pooled = cmr.pfr(events, by=None)
    x, y, sem = _joined(plots.pfr(pooled).axes[0])
    np.testing.assert_array_equal(y, pooled["prob"])
    assert sem is None  # a pooled PFR has no SEM to draw
    np.testing.assert_allclose(_joined(plots.spc(cmr.spc(events, by="trial")).axes[0])[1],
                               _joined(plots.spc(cmr.spc(events)).axes[0])[1], rtol=1e-12)


def test_recall_figures_refuse_the_wrong_dataset(events):
    crp = cmr.lag_crp(events)
    with pytest.raises(SchemaError, match="lag_profile"):
        plots.lag_crp(events)
    with pytest.raises(SchemaError, match="lag_crp"):
        plots.lag_crp(cmr.lag_crp_compound(events))
    with pytest.raises(SchemaError, match="DataFrame"):
        plots.lag_crp(crp.to_dataframe())
    with pytest.raises(SchemaError, match="pfr"):
        plots.pfr(cmr.spc(events))
    with pytest.raises(SchemaError, match="recall_stat"):
        plots.spc(crp)
    with pytest.raises(ParameterError, match="pooled"):
        plots.lag_crp(cmr.lag_crp(events, by=None), per_subject=True)
    with pytest.raises(ProfileError, match="lacks lags"):
        plots.lag_crp(cmr.lag_crp(events, lags=3), lags=5)
    with pytest.raises(ParameterError, match="empty"):
        plots.lag_crp({})


def test_predictive_check_draws_the_data_and_every_model(events):
    params = cmr.default_parameters()
    checks = {"CMR": cmr.posterior_predictive(events, params, n_rep=1, rng=0),
              "slow drift": cmr.posterior_predictive(events, {**params, "B_rec": 0.4}, n_rep=1, rng=0)}
    fig = _figure(plots.predictive_check(checks))
    for ax, name in zip(fig.axes, ("crp", "spc", "pfr")):
        data = [p for p in _errorbars(ax) if p[2] is not None]  # the data carry error bars, models do not
        x = np.concatenate([p[0] for p in data])
        y = np.concatenate([p[1] for p in data])
        group = checks["CMR"][f"{name}_group"].sel(source="data")
        dim = group.dims[0]
        np.testing.assert_allclose(y, group.sel({dim: x}), rtol=1e-12)
        if name == "crp":
            assert 0 not in x  # negative and positive lags, apart
    texts = [t.get_text() for t in fig.axes[2].get_legend().get_texts()]
    assert texts == ["data", "CMR", "slow drift"]
    with pytest.raises(SchemaError, match="predictive_check"):
        plots.predictive_check(cmr.spc(events))
    with pytest.raises(ParameterError, match="empty"):
        plots.predictive_check({})


# --- attention heads ---------------------------------------------------------------------------


def test_head_profiles_draw_the_top_induction_heads_with_their_fits(tiny):
    _, heads, _, fits = tiny
    fit = fits["lsq"]
    fig = _figure(plots.head_profiles(heads, fits=fit, units=3))
    induction = heads["induction_score"].squeeze(drop=True).stack(unit=("layer", "head"))
    expected = [tuple(map(int, u)) for u in induction.sortby(-induction)["unit"].values[:3]]
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title().split(",")[0] for ax in panels] == [f"L{l}.H{h}" for l, h in expected]
    for ax, (layer, head) in zip(panels, expected):
        unit = dict(model=heads["model"].values[0], checkpoint=-1, layer=layer, head=head)
        x, y, sem = _errorbars(ax)[0]
        np.testing.assert_array_equal(x, fit["lag"])
        np.testing.assert_array_equal(y, fit["profile"].sel(unit))
        np.testing.assert_allclose(sem, heads["sem"].sel(unit).sel(lag=x), rtol=1e-12)
        cmr_line, gaussian_line = (line for line in ax.lines if line.get_label() in ("CMR fit", "Gaussian fit"))
        np.testing.assert_array_equal(cmr_line.get_ydata(), fit["fitted"].sel(unit))
        np.testing.assert_array_equal(gaussian_line.get_ydata(), fit["gaussian_fitted"].sel(unit))
        assert f"{float(fit['distance'].sel(unit)):.3f}" in ax.get_title()
    panels = plots.head_profiles(heads, fits=fit, units="L1.H2,L0.H0").axes
    assert [ax.get_title().split(",")[0] for ax in panels if ax.get_visible()] == ["L1.H2", "L0.H0"]


def test_head_figures_refuse_wrong_datasets_and_heads(tiny):
    _, heads, _, fits = tiny
    with pytest.raises(SchemaError, match="profile_fit"):
        plots.head_profiles(heads, fits=heads)
    with pytest.raises(SchemaError, match="lag_profile"):
        plots.head_profiles(fits["lsq"], fits=fits["lsq"])
    with pytest.raises(ParameterError, match="L7.H0"):
        plots.head_profiles(heads, fits=fits["lsq"], units=[(7, 0)])
    with pytest.raises(ParameterError):
        plots.head_profiles(heads, fits=fits["lsq"], units=0)
    with pytest.raises(SchemaError, match="one model"):
        plots.distance_vs_induction(xr.concat([heads, heads.assign_coords(checkpoint=[5])], "checkpoint"), fits)
    with pytest.raises(SchemaError, match="attention_pattern"):
        plots.attention_pattern(heads)
    with pytest.raises(SchemaError, match="profile_fit"):
        plots.share_cmr_like_by_depth({"lsq": heads})


def test_attention_pattern_is_one_head_over_one_extraction_prompt(tiny, tmp_path):
    from icl_cmr.adapters.lm.extraction import attention_pass, attention_pattern, make_prompts

    model, *_ = tiny
    pattern = attention_pattern(model, 1, 2, n_words=20, rng=3, prompt=2)
    made = make_prompts(model, n_words=20, n_prompts=5, rng=3)  # the set extract_heads reads
    scores, probs, _ = attention_pass(model, made.tokens[2])
    np.testing.assert_array_equal(pattern["prob"], probs[1, 2].astype(np.float64))
    future = np.triu(np.ones((41, 41), bool), 1)
    assert np.isnan(pattern["score"].values[future]).all()
    np.testing.assert_array_equal(pattern["score"].values[~future], scores[1, 2][~future])
    np.testing.assert_allclose(pattern["prob"].sum("key"), 1.0, rtol=1e-5)
    words = [made.words[i] for i in made.permutations[2]]
    assert pattern["query_token"].values[1:].tolist() == words + words
    assert pattern["key_copy"].values.tolist() == [0] + [1] * 20 + [2] * 20
    assert (pattern.attrs["layer"], pattern.attrs["head"], pattern.attrs["n_words"]) == (1, 2, 20)
    back = cmr.load_dataset(cmr.save_dataset(pattern, tmp_path / "pattern.nc"), kind="attention_pattern")
    xr.testing.assert_identical(back, pattern)
    bad = pattern.copy()
    bad.attrs["n_words"] = 19
    with pytest.raises(SchemaError, match="0..38"):
        cmr.save_dataset(bad, tmp_path / "bad.nc")
    with pytest.raises(ParameterError, match="layer"):
        attention_pattern(model, 2, 0, n_words=20)
    with pytest.raises(ParameterError, match="prompt"):
        attention_pattern(model, 0, 0, n_words=20, prompt=-1)

    fig = _figure(plots.attention_pattern(pattern))
    image = fig.axes[0].get_images()[0].get_array()
    np.testing.assert_array_equal(image.filled(np.nan)[~future], pattern["prob"].values[~future])
    assert np.ma.getmaskarray(image)[future].all()  # keys after the query are blank
    score_image = plots.attention_pattern(pattern, which="score").axes[0].get_images()[0].get_array()
    np.testing.assert_array_equal(score_image.filled(np.nan)[~future], pattern["score"].values[~future])
    with pytest.raises(ParameterError, match="which"):
        plots.attention_pattern(pattern, which="logit")


def test_distance_vs_induction_and_share_by_depth_draw_every_head(tiny):
    _, heads, _, fits = tiny
    fig = _figure(plots.distance_vs_induction(heads, fits, log_induction=False))
    assert [ax.get_title() for ax in fig.axes] == ["objective 'paper'", "objective 'lsq'"]
    induction = heads["induction_score"].squeeze(drop=True)
    for ax, objective in zip(fig.axes, ("paper", "lsq")):
        distance = fits[objective]["distance"].squeeze(drop=True)
        keep = np.isfinite(distance.values) & (distance.values > 0)
        expected = sorted(zip(induction.values[keep], distance.values[keep]))
        np.testing.assert_array_equal(sorted(map(tuple, ax.collections[0].get_offsets())), expected)

    fig = _figure(plots.share_cmr_like_by_depth(fits, threshold=0.3, n_bins=2))
    distance = fits["lsq"]["distance"].squeeze(drop=True).transpose("layer", "head").values
    share = [np.mean(distance[layer][np.isfinite(distance[layer])] < 0.3) for layer in (0, 1)]  # 2 layers, 2 bins
    bars = fig.axes[0].containers[1]  # objective 'lsq'
    np.testing.assert_allclose([bar.get_height() for bar in bars], share, rtol=1e-12)


def test_soft_crp_vs_humans_draws_the_heads_soft_crp(tiny, events):
    _, heads, _, _ = tiny
    fig = _figure(plots.soft_crp_vs_humans(cmr.lag_crp(events), heads, units=[(1, 0), (0, 3)]))
    human, head_axes = fig.axes[:2]
    assert human.get_yscale() == "log"
    x, y, _ = _joined(head_axes)
    lags = [-5, -4, -3, -2, -1, 1, 2, 3, 4, 5]
    soft = heads["soft_crp"].squeeze(drop=True)
    expected = np.concatenate([soft.sel(layer=1, head=0, lag=lags), soft.sel(layer=0, head=3, lag=lags)])
    np.testing.assert_array_equal(y, expected)
    with pytest.raises(SchemaError, match="lag_crp"):
        plots.soft_crp_vs_humans(heads, heads)


# --- fits, ablation, dynamics ------------------------------------------------------------------


def test_parameters_heads_vs_humans_draws_heads_subjects_and_published(tiny, events):
    import pandas as pd

    _, heads, grid, fits = tiny
    human = cmr.fit_profiles(cmr.lag_crp(events), grid, objective="lsq", lags=cmr.RECALL_LAGS, invalid="nan")
    published = pd.DataFrame({"study": ["A"], "beta_enc": [0.3], "beta_rec": [0.6]})
    ax = _figure(plots.parameters_heads_vs_humans(fits["lsq"], {"M": human}, 2, published=published)).axes[0]
    subjects, top, stars = (c.get_offsets() for c in ax.collections)
    p = human["parameters"]
    np.testing.assert_array_equal(subjects, np.column_stack([p.sel(parameter="beta_enc"), p.sel(parameter="beta_rec")]))
    distance = fits["lsq"]["distance"].squeeze(drop=True).stack(unit=("layer", "head")).dropna("unit")
    best = distance.sortby(distance)["unit"].values[:2]
    hp = fits["lsq"]["parameters"].squeeze(drop=True)
    np.testing.assert_array_equal(top, [[hp.sel(layer=l, head=h, parameter=n) for n in ("beta_enc", "beta_rec")]
                                        for l, h in best])
    # published textbook fits are drawn decay-matched on the variant's scale
    np.testing.assert_allclose(stars, [[cmr.paper_beta(0.3, phase="enc"), cmr.paper_beta(0.6, phase="rec")]], rtol=1e-12)
    default = plots.parameters_heads_vs_humans(fits["lsq"], human, [(1, 0)]).axes[0]
    from icl_cmr.adapters.published import published_human_fits

    assert len(default.collections[2].get_offsets()) == len(published_human_fits())
    with pytest.raises(SchemaError, match="beta_enc"):
        plots.parameters_heads_vs_humans(fits["lsq"], human, 2, published=pd.DataFrame({"x": [1]}))
    with pytest.raises(SchemaError, match="profile_fit"):
        plots.parameters_heads_vs_humans(fits["lsq"], cmr.lag_crp(events), 2)


def test_parameter_recovery_draws_true_against_recovered():
    fits = cmr.parameter_recovery(3, cmr.FitSpec(["B_enc", "B_rec"]), list_length=8, n_lists=6, progress=False,
                                  de_options={"maxiter": 3, "popsize": 4})
    fig = _figure(plots.parameter_recovery(fits))
    assert [ax.get_title().split()[0] for ax in fig.axes] == ["B_enc", "B_rec"]
    for ax, name in zip(fig.axes, ("B_enc", "B_rec")):
        np.testing.assert_array_equal(ax.collections[0].get_offsets(),
                                      np.column_stack([fits["true_value"].sel(parameter=name),
                                                       fits["value"].sel(parameter=name)]))
    with pytest.raises(SchemaError, match="true_value"):
        plots.parameter_recovery(fits.drop_vars(["true_value", "correlation"]))


def test_ablation_result_marks_the_top_set_among_random_sets(tiny):
    from icl_cmr.analyses.causal.ablation import run_ablation

    model, heads, *_ = tiny
    passages = np.random.default_rng(0).integers(2, 60, size=(4, 36))
    ablation = run_ablation(model.bridge, passages, [(1, 0)], n_random=5, early=5, late=30, window=2,
                            modes=("zero",), measures="icl", progress=False)
    ax = _figure(plots.ablation_result(ablation)).axes[0]
    top = next(line for line in ax.lines if line.get_label() == "top CMR-like set")
    assert top.get_xdata()[0] == pytest.approx(float(ablation["mean_effect"].sel(mode="zero", head_set="top")))
    assert sum(bar.get_height() for bar in ax.patches) == 5
    assert f"{float(ablation['empirical_pvalue'].sel(mode='zero')):.3f}" in ax.get_title()
    assert f"z = {float(ablation['z'].sel(mode='zero', comparison='top_vs_random')):+.2f}" in ax.get_title()
    with pytest.raises(SchemaError, match="ablation"):
        plots.ablation_result(heads)


def test_training_dynamics_panels_and_bad_tables():
    import pandas as pd

    table = pd.DataFrame({"checkpoint": [0, 10, 0, 10], "layer": [0, 0, 1, 1], "max_induction_score": [0, 0.1, 0, 0.8],
                          "best_distance": [1.0, 0.7, 1.0, 0.1], "beta_enc": [0.5] * 4, "beta_rec": [0.9] * 4})
    fig = _figure(plots.training_dynamics(table))
    assert len(fig.axes) == 3
    np.testing.assert_array_equal(fig.axes[1].lines[1].get_ydata(), [1.0, 0.1])  # layer 1's best distance
    with pytest.raises(SchemaError, match="best_distance"):
        plots.training_dynamics(table.drop(columns="best_distance"))
    with pytest.raises(SchemaError, match="training_log"):
        plots.training_dynamics(table, training_log={"checkpoints": [{"step": 0}]})


# --- style and saving --------------------------------------------------------------------------


def test_new_figure_leaves_global_state_alone():
    import matplotlib
    import matplotlib.pyplot as plt

    before = dict(matplotlib.rcParams)
    open_figures = plt.get_fignums()
    fig, axes = plots.new_figure(ncols=2, nrows=2, width=2.0, height=1.5)
    assert axes.shape == (2, 2) and tuple(fig.get_size_inches()) == (4.0, 3.0)
    assert dict(matplotlib.rcParams) == before and plt.get_fignums() == open_figures
    with pytest.raises(ParameterError, match="ncols"):
        plots.new_figure(ncols=0)


def test_save_figure_is_atomic(tmp_path, monkeypatch):
    fig, ax = plots.new_figure()
    ax.plot([0, 1], [0, 1])
    target = plots.save_figure(fig, tmp_path / "out" / "f.png", pdf=True)
    assert target.read_bytes()[:4] == b"\x89PNG" and target.with_suffix(".pdf").read_bytes()[:4] == b"%PDF"
    before = target.read_bytes()

    def broken(path, format=None, **kw):
        if format == "pdf":
            raise OSError("disk full")
        return type(fig).savefig(fig, path, format=format, **kw)

    monkeypatch.setattr(fig, "savefig", broken)
    with pytest.raises(OSError, match="disk full"):
        plots.save_figure(fig, tmp_path / "out" / "g.png", pdf=True)
    with pytest.raises(OSError, match="disk full"):
        plots.save_figure(fig, target, pdf=True)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["f.pdf", "f.png"]  # no g.png, no temporaries
    assert target.read_bytes() == before
    with pytest.raises(ParameterError, match=r"\.png"):
        plots.save_figure(fig, tmp_path / "f.jpg")
    with pytest.raises(ParameterError, match="Figure"):
        plots.save_figure(ax, tmp_path / "h.png")


# --- the documentation -------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::cmr.errors.FitWarning")  # the doc's recovery is tiny: its fits are flagged
def test_figures_doc_examples_run(tmp_path, monkeypatch):
    require("psifr")
    require("torch")
    from matplotlib.figure import Figure

    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 6
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)  # noqa: S102 - our own documentation
        assert isinstance(namespace["fig"], Figure)
    assert {p.name for p in tmp_path.iterdir()} == {"lag_crp.png", "lag_crp.pdf", "attention.png", "recall.png"}
    public = set(plots.__all__) - {"PALETTE"}
    assert {name for name in public if f"plots.{name}(" in DOC.read_text()} == public
