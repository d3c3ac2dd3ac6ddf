"""The standard figures of model comparisons, cross-validation, nulls of CMR-like and CMR's states.

Each is drawn from a small real dataset of its kind through ``icl-cmr plot`` (the PNG read back)
and its drawn values are checked against the dataset's.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr

import cmr
from cmr.schema import KIND_ATTR, provenance_attrs
from icl_cmr.analyses import plots
from icl_cmr.analyses.cli import main
from icl_cmr.analyses.plots.standard import figure_function
from tests.conftest import require

FAST_DE = {"maxiter": 2, "popsize": 4}


@pytest.fixture(scope="module", autouse=True)
def _matplotlib():
    require("matplotlib")


@pytest.fixture(scope="module")
def events():
    table = cmr.simulate_free_recall(cmr.default_parameters(), 8, 6, subjects=["01", "02", "10"], rng=3)
    return cmr.from_table(table)


@pytest.fixture(scope="module")
def fits(events):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cmr.errors.FitWarning)  # two generations may end at a bound
        return {p: cmr.fit_recall(events, cmr.FitSpec([p]), rng=0, progress=False, polish=False, de_options=FAST_DE)
                for p in ("B_rec", "T")}


@pytest.fixture(scope="module")
def cvs(events):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cmr.errors.FitWarning)
        return {p: cmr.cross_validate(events, cmr.FitSpec([p]), n_folds=2, rng=3, progress=False, de_options=FAST_DE)
                for p in ("B_rec", "T")}


@pytest.fixture(scope="module")
def comparison(fits, cvs):
    return cmr.compare_models(fits, cv=cvs)


@pytest.fixture(scope="module")
def null():
    """Two CMR profiles of the grid (beyond chance), one mirrored (backward), two of noise."""
    grid = cmr.paper_teacher_forced_grid([0.3, 0.6], [0.5, 0.75], [0.0, 0.3], lags=range(-5, 6))
    cmr_like = grid["profile"].isel(beta_enc=[0, 1], beta_rec=0, gamma=0).transpose("beta_enc", "lag").values
    lags = np.arange(-5, 6)
    values = np.vstack([cmr_like, cmr_like[:1, ::-1], np.random.default_rng(0).normal(size=(2, lags.size))])
    units = xr.Dataset({"profile": (("unit", "lag"), values), "sem": (("unit", "lag"), np.full(values.shape, 0.01))},
                       coords={"unit": np.arange(len(values)), "lag": lags},
                       attrs={**provenance_attrs("lag_profile", "tests"), "profile_kind": "attention_score"})
    return cmr.cmr_like_null(units, grid, objective="paper", n_null=40, n_bank=400)


@pytest.fixture(scope="module")
def states(events):
    return cmr.record_states(events.isel(trial=[0, 1, 6]), cmr.default_parameters())


@pytest.fixture(scope="module")
def trace():
    return cmr.attention_circuit(list_length=5, recalls=[2, 3, 1])


KINDS = {"model_comparison": "comparison", "recall_cv": "cvs", "profile_null": "null", "cmr_states": "states",
         "circuit_trace": "trace"}


def _dataset(kind, request):
    result = request.getfixturevalue(KINDS[kind])
    return result["T"] if kind == "recall_cv" else result


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_plot_writes_the_standard_figure_of_the_kind(kind, request, tmp_path, capsys):
    from matplotlib.image import imread

    result = _dataset(kind, request)
    assert result.attrs[KIND_ATTR] == kind and figure_function(result) == kind
    source = cmr.save_dataset(result, tmp_path / "result.nc")
    assert main(["plot", str(source), "-o", str(tmp_path / "figure.png")]) == 0
    image = imread(tmp_path / "figure.png")
    assert image.ndim == 3 and min(image.shape[:2]) > 100 and image[..., :3].std() > 0  # something drawn
    assert f"{kind} of the {kind} dataset" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figure.png", "result.nc"]  # nothing left behind


def _points(ax) -> np.ndarray:
    """The markers drawn by scatter (error bars are collections too)."""
    from matplotlib.collections import PathCollection

    return np.concatenate([c.get_offsets() for c in ax.collections if isinstance(c, PathCollection)])


def test_model_comparison_draws_each_subjects_difference_to_the_best_and_the_weights(comparison):
    assert comparison.attrs["criterion"] == "cv_logl"
    fig = plots.standard_figure(comparison)
    ax = fig.axes[0]
    best = comparison.attrs["best_model"]
    expected = comparison["cv_logl"] - comparison["cv_logl"].sel(model=best)
    points = _points(ax)
    for m, model in enumerate(comparison["model"].values):
        drawn = points[np.abs(points[:, 0] - m) < 0.5, 1]
        np.testing.assert_allclose(np.sort(drawn), np.sort(expected.sel(model=model).values), rtol=1e-12)
    labels = [t.get_text() for t in ax.get_xticklabels()]
    for label, model in zip(labels, comparison["model"].values):
        weight = float(comparison["akaike_weight"].sel(model=model))
        total = float(comparison["total_cv_logl"].sel(model=model) - comparison["total_cv_logl"].sel(model=best))
        n_best = int(comparison["n_best_cv"].sel(model=model))
        assert label == f"{model}\nsum {total:+.1f}\nw_AIC {weight:.2f}\nbest {n_best}/3"
    assert ax.get_title().startswith(f"best: {best} (cross-validated")
    two = plots.standard_figure(comparison, units="02,10").axes[0]  # sums and the best over the subjects drawn
    values = comparison["cv_logl"].sel(subject=["02", "10"])
    best_two = str(values["model"].values[int(np.argmax(values.sum("subject").values))])
    for label, model in zip([t.get_text() for t in two.get_xticklabels()], comparison["model"].values):
        total = float(values.sel(model=model).sum() - values.sel(model=best_two).sum())
        assert label.startswith(f"{model}\nsum {total:+.1f}\n") and label.endswith("/2")


def test_model_comparison_by_aic_draws_delta_aic(fits):
    comparison = cmr.compare_models(fits)
    assert comparison.attrs["criterion"] == "aic"
    ax = plots.standard_figure(comparison).axes[0]
    best = comparison.attrs["best_model"]
    points = _points(ax)
    for m, model in enumerate(comparison["model"].values):
        drawn = points[np.abs(points[:, 0] - m) < 0.5, 1]
        expected = comparison["aic"].sel(model=model) - comparison["aic"].sel(model=best)
        np.testing.assert_allclose(np.sort(drawn), np.sort(expected.values), rtol=1e-12)
        label = ax.get_xticklabels()[m].get_text()
        assert f"sum {float(comparison['delta_aic'].sel(model=model)):+.1f}" in label
        assert f"w_AIC {float(comparison['akaike_weight'].sel(model=model)):.2f}" in label
    assert ax.get_ylabel().startswith("AIC - best model's")


def test_recall_cv_draws_held_out_per_event_with_the_folds_range(cvs):
    cv = cvs["T"]
    ax = plots.standard_figure(cv).axes[0]
    (held,) = [c for c in ax.containers if c.get_label().startswith("held out")]
    np.testing.assert_allclose(held.lines[0].get_ydata(), cv["logl"] / cv["n"], rtol=1e-12)
    per_fold = (cv["fold_logl"] / cv["fold_n"]).transpose("subject", "fold").values
    segments = held.lines[2][0].get_segments()
    np.testing.assert_allclose([s[:, 1] for s in segments], np.column_stack([per_fold.min(1), per_fold.max(1)]),
                               rtol=1e-12)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["01", "02", "10"]
    training_n = cv["n"] - cv["fold_n"]
    training = _points(ax)[:, 1]
    np.testing.assert_allclose(training, (cv["fold_train_logl"] / training_n).mean("fold"), rtol=1e-12)


def test_profile_null_draws_distance_against_threshold_with_the_shares(null):
    forward, backward = int(null["forward_beyond_chance"].sum()), int(null["backward_beyond_chance"].sum())
    beyond = int(null["beyond_chance"].sum())
    assert beyond == 2 and backward >= 1 and forward >= 1  # the cases this figure is for
    ax = plots.standard_figure(null).axes[0]
    n = null.sizes["unit"]
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts == ["distance = threshold", f"beyond chance: {beyond}/{n} ({beyond / n:.0%})",
                     f"not beyond: {n - beyond}/{n} ({(n - beyond) / n:.0%})", f"forward asymmetry: {forward}/{n}",
                     f"backward asymmetry: {backward}/{n}"]
    assert float(null.attrs["share_beyond_chance"]) == pytest.approx(beyond / n)
    filled, hollow = ax.collections[0], ax.collections[1]
    chance = null["beyond_chance"].values == 1
    pairs = np.column_stack([null["threshold"].values, null["distance"].values])
    np.testing.assert_allclose(filled.get_offsets(), pairs[chance], rtol=1e-12)
    np.testing.assert_allclose(hollow.get_offsets(), pairs[~chance], rtol=1e-12)
    assert len(filled.get_facecolor()) == 1 and len(hollow.get_facecolor()) == 0


def test_cmr_states_draws_one_lists_context_and_recall_probabilities(states, tmp_path):
    fig = plots.standard_figure(states)
    images = [ax.images[0] for ax in fig.axes if ax.images]
    assert len(images) == 3
    one = states.isel(trial=0)
    scored = np.isfinite(one["stop_probability"].values)
    np.testing.assert_array_equal(images[0].get_array(), one["study_context"].values)
    np.testing.assert_array_equal(images[1].get_array(), one["cue_context"].values[scored])
    probability = np.column_stack([one["probability"].values, one["stop_probability"].values])[scored]
    np.testing.assert_array_equal(np.ma.filled(images[2].get_array(), np.nan), probability)
    recalled = fig.axes[[i for i, ax in enumerate(fig.axes) if ax.images][2]].collections[0].get_offsets()
    positions = one["event_position"].values[scored]
    np.testing.assert_array_equal(recalled[:, 0], np.where(positions > 0, positions - 1, states.sizes["study_position"]))
    assert fig.get_suptitle() == "subject 01, list 1"
    other = str(states["subject"].values[-1])
    assert other != "01" and plots.standard_figure(states, units=other).get_suptitle().startswith(f"subject {other},")
    source = cmr.save_dataset(states, tmp_path / "states.nc")
    assert main(["plot", str(source), "--units", other, "-o", str(tmp_path / "states.pdf")]) == 0
    assert (tmp_path / "states.pdf").read_bytes()[:4] == b"%PDF"


@pytest.mark.parametrize("variant", ["textbook", "paper"])
def test_circuit_trace_draws_context_and_probability_at_each_cue(trace, variant):
    if variant == "paper":
        trace = cmr.attention_circuit({"beta_enc": 0.6, "beta_rec": 0.7, "gamma": 0.3}, list_length=5,
                                      recalls=[2, 3, 1], variant="paper")
    fig = plots.standard_figure(trace)
    context, probability = (ax.images[0] for ax in fig.axes if ax.images)
    np.testing.assert_array_equal(context.get_array(), trace["context"].transpose("step", "unit").values)
    np.testing.assert_array_equal(probability.get_array(), trace["probability"].transpose("step", "study_position"))
    axes = [ax for ax in fig.axes if ax.images]
    cues = axes[1].collections[0].get_offsets()
    cued = trace["cue_position"].values > 0
    np.testing.assert_array_equal(cues[:, 0], trace["cue_position"].values[cued] - 1)
    np.testing.assert_array_equal(cues[:, 1], np.flatnonzero(cued))
    assert fig.get_suptitle() == f"CMR as an attention circuit ({variant})"


def test_legends_and_annotations_sit_outside_the_data(cvs, null, comparison):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    def outside(box, area) -> bool:
        return box.x1 <= area.x0 + 0.5 or box.x0 >= area.x1 - 0.5 or box.y1 <= area.y0 + 0.5 or box.y0 >= area.y1 - 0.5

    for fig in (plots.recall_cv(cvs["T"]), plots.profile_null(null)):
        FigureCanvasAgg(fig).draw()
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        assert outside(ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer))
    fig = plots.model_comparison(comparison)
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    labels = [t for t in ax.get_xticklabels() if t.get_text()]
    assert labels and all("w_AIC" in t.get_text() for t in labels)
    for text in labels:  # the sums and weights are written below the axes, never over the points
        assert outside(text.get_window_extent(renderer), ax.get_window_extent(renderer))
