"""``icl-cmr plot`` draws every kind of result or refuses it in one line; the category CRP stores its chance level.

The kinds drawn here (events, CMR grids, recall fits by subject, the language model's recall
ablation) come from small real runs; the other figures are tested in test_plot_command.py and
test_plot_result_figures.py.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import cmr
from cmr.errors import SchemaError
from cmr.schema import KIND_ATTR, known_kinds, provenance_attrs
from icl_cmr.analyses import plots
from icl_cmr.analyses.cli import main
from icl_cmr.analyses.plots.standard import NO_STANDARD_FIGURE, STANDARD_FIGURES, figure_function
from tests.conftest import morton_events, require


@pytest.fixture(scope="module", autouse=True)
def _matplotlib():
    require("matplotlib")


@pytest.fixture(scope="module")
def events():
    return morton_events(3)


@pytest.fixture(scope="module")
def grid():
    return cmr.paper_teacher_forced_grid(beta_enc=[0.2, 0.5, 0.8], beta_rec=[0.2, 0.5, 0.8], gamma=[0.0, 0.5])


@pytest.fixture(scope="module")
def subject_fits(events):
    """Three subjects' fits, the first of one list only (too few events); B_enc's narrow range puts it at a bound."""
    first, *others = np.unique(events["subject"].values)
    trials = [*np.flatnonzero(events["subject"].values == first)[:1],
              *[t for s in others for t in np.flatnonzero(events["subject"].values == s)[:5]]]
    spec = cmr.FitSpec(["B_enc", "B_rec", "T"], bounds={"B_enc": (0.01, 0.02)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cmr.errors.FitWarning)  # the flags are what this fit is for
        return cmr.fit_recall(events.isel(trial=trials), spec, progress=False, de_options={"maxiter": 2, "popsize": 3},
                              rng=0)


@pytest.fixture(scope="module")
def recall_ablation():
    require("torch")
    from icl_cmr.adapters.lm.loading import tiny_model
    from icl_cmr.analyses.causal import recall as causal_recall

    sets = {"top_cmr": [(1, 0)], "top_induction": [(1, 1)], "random_0": [(0, 2)], "random_1": [(0, 3)]}
    return causal_recall.recall_ablation(tiny_model(), sets, n_lists=3, list_length=4, rng=5)


# one small real dataset per figure function this file tests
BUILDERS = {
    "recall_curves": lambda r: r("events"),
    "grid_profiles": lambda r: r("grid"),
    "subject_parameters": lambda r: r("subject_fits"),
    "recall_ablation_effects": lambda r: r("recall_ablation"),
}


def _drawn_kinds() -> set[str]:
    return {kind for kind, _, _, _ in STANDARD_FIGURES}


def test_every_registered_kind_is_drawn_or_refused():
    """A new kind in the registry without a figure, or without a line in NO_STANDARD_FIGURE, fails here."""
    registered = set(known_kinds())
    assert registered - _drawn_kinds() - set(NO_STANDARD_FIGURE) == set()
    assert _drawn_kinds() & set(NO_STANDARD_FIGURE) == set()
    assert set(NO_STANDARD_FIGURE) <= registered  # no stale entry
    for kind in ("events", "llm_recall_ablation", "lag_profile", "recall_fit", "model_comparison", "recall_cv",
                 "profile_null", "cmr_states", "circuit_trace"):
        assert kind in _drawn_kinds()


@pytest.mark.parametrize("held", [None, "traces of a plug-in"])
def test_refused_kind_names_the_kinds_drawn_in_one_line(held, monkeypatch):
    """A kind registered by another package (or listed in NO_STANDARD_FIGURE) is refused in one line."""
    if held is not None:
        monkeypatch.setitem(NO_STANDARD_FIGURE, "plugin_trace", held)
    with pytest.raises(SchemaError) as caught:
        plots.standard_figure(xr.Dataset(attrs={KIND_ATTR: "plugin_trace"}))
    message = str(caught.value)
    assert "\n" not in message
    table = f" ({held}: cmr.to_dataframe gives its table)" if held else ""
    assert message.startswith(f"no standard figure for a dataset of kind 'plugin_trace'{table}; figures exist for: ")
    for drawn in ("events", "llm_recall_ablation", "lag_profile (a CMR grid: unit_kind cmr_parameters)",
                  "recall_fit (fits by subject or pooled)", "predictive_check", "circuit_trace", "profile_null"):
        assert drawn in message


def test_plot_command_refuses_a_plugin_kind_in_one_line(tmp_path, capsys, monkeypatch):
    from cmr import schema

    monkeypatch.setattr(schema, "_VALIDATORS", dict(schema._VALIDATORS))  # the registration ends with the test
    schema.register_kind("plugin_trace", lambda ds: None)
    made = xr.Dataset({"score": ("step", [0.5, 0.25])}, attrs=provenance_attrs("plugin_trace", "a plug-in"))
    source = cmr.save_dataset(made, tmp_path / "trace.nc")
    assert main(["plot", str(source), "-o", str(tmp_path / "trace.png")]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "icl-cmr plot: error: no standard figure for a dataset of kind 'plugin_trace'; figures exist for: events; ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.nc"]


@pytest.mark.parametrize("function", sorted(BUILDERS))
def test_plot_writes_the_figure_of_each_new_kind(function, request, tmp_path, capsys):
    from matplotlib.image import imread

    result = BUILDERS[function](request.getfixturevalue)
    assert figure_function(result) == function
    source = cmr.save_dataset(result, tmp_path / "result.nc")
    assert main(["plot", str(source), "-o", str(tmp_path / "figure.png")]) == 0
    assert (tmp_path / "figure.png").stat().st_size > 0
    image = imread(tmp_path / "figure.png")
    assert image.ndim == 3 and min(image.shape[:2]) > 100 and image[..., :3].std() > 0  # something drawn
    assert f"{function} of the {result.attrs[KIND_ATTR]} dataset" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figure.png", "result.nc"]  # nothing left behind


def test_events_figure_is_the_three_recall_panels_and_takes_units(events, tmp_path):
    fig = plots.standard_figure(events)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_ylabel() for ax in visible] == ["Conditional response probability", "Recall probability",
                                                   "Probability of first recall"]
    spc_line = visible[1].lines[0]
    np.testing.assert_allclose(spc_line.get_ydata(), cmr.spc(events)["prob"].mean("subject").values)
    first = str(events["subject"].values[0])
    one = plots.standard_figure(events, units=first)
    assert "n = 1 subjects" in one.axes[0].get_legend().get_texts()[0].get_text()
    source = cmr.save_dataset(events, tmp_path / "events.nc")
    assert main(["plot", str(source), "--units", first, "-o", str(tmp_path / "one.pdf")]) == 0
    assert (tmp_path / "one.pdf").read_bytes()[:4] == b"%PDF"


def test_grid_figure_draws_each_parameter_axis_at_the_others_middle(grid):
    fig = plots.standard_figure(grid)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 3  # beta_enc, beta_rec, gamma all vary
    titles = [ax.get_legend().get_title().get_text() for ax in panels]
    assert titles[0] == "beta_enc\n(beta_rec = 0.5, gamma = 0.5)"
    assert titles[2] == "gamma\n(beta_enc = 0.5, beta_rec = 0.5)"
    lines = [line for line in panels[0].lines if len(line.get_xdata()) == grid.sizes["lag"]]
    assert len(lines) == 3
    np.testing.assert_allclose(lines[0].get_ydata(), grid["profile"].sel(beta_enc=0.2, beta_rec=0.5, gamma=0.5))
    np.testing.assert_allclose(lines[2].get_ydata(), grid["profile"].sel(beta_enc=0.8, beta_rec=0.5, gamma=0.5))
    assert [t.get_text() for t in panels[2].get_legend().get_texts()] == ["0", "0.5"]


def test_subject_fits_figure_marks_bounds_and_flags(subject_fits):
    free = [str(p) for p, f in zip(subject_fits["parameter"].values, subject_fits["free"].values) if f]
    n_bound = int(subject_fits["at_bound"].sel(parameter=free).sum())
    n_few = int(subject_fits["few_events"].sum())
    assert n_few == 1 and n_bound > 0  # the case this figure is for: both flags occur
    fig = plots.standard_figure(subject_fits)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == free
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert texts == ["subject", f"at a search bound ({n_bound})", f"few events ({n_few})", "search bounds"]
    for ax, name in zip(panels, free):
        levels = sorted({float(line.get_ydata()[0]) for line in ax.lines if line.get_linestyle() == "--"})
        assert levels == [float(subject_fits["lower"].sel(parameter=name)),
                          float(subject_fits["upper"].sel(parameter=name))]
        points = np.concatenate([c.get_offsets()[:, 1] for c in ax.collections])
        np.testing.assert_allclose(np.sort(points), np.sort(subject_fits["value"].sel(parameter=name).values))
        hollow = sum(len(c.get_offsets()) for c in ax.collections if len(c.get_facecolor()) == 0)
        assert hollow == n_few


def test_recall_ablation_figure_draws_the_mean_and_t_interval(recall_ablation):
    from scipy import stats

    effect = recall_ablation["effect"].copy(data=recall_ablation["effect"].values.copy())
    effect.loc[{"head_set": "top_cmr", "measure": "crp_forward"}] = [0.1, 0.3, np.nan]
    effect.loc[{"head_set": "random_0", "measure": "crp_forward"}] = [-0.2, 0.0, 0.4]
    result = recall_ablation.assign(effect=effect)
    fig = plots.standard_figure(result)
    ax = [ax for ax in fig.axes if ax.get_title() == "CRP at lag +1"][0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["top_cmr", "top_induction", "random_0", "random_1"]
    bars = {int(round(c.lines[0].get_xdata()[0])): c for c in ax.containers}
    for position, values in ((0, [0.1, 0.3]), (2, [-0.2, 0.0, 0.4])):
        values = np.array(values)
        half = stats.t.ppf(0.975, values.size - 1) * values.std(ddof=1) / np.sqrt(values.size)
        (segment,) = bars[position].lines[2][0].get_segments()
        np.testing.assert_allclose(segment[:, 1], [values.mean() - half, values.mean() + half])
    undefined = [ax for ax in fig.axes if ax.get_title() == "CRP at lag -1"][0]
    assert [t.get_text() for t in undefined.texts] == ["undefined on every list"]  # NaN on every list of this model


# --- the chance level of the category CRP ------------------------------------------------------------


def _one_list(categories: str, recalls: list[int]) -> pd.DataFrame:
    rows = [("s", 1, "study", p, f"w{p}", c) for p, c in enumerate(categories, 1)]
    rows += [("s", 1, "recall", o, f"w{p}", categories[p - 1]) for o, p in enumerate(recalls, 1)]
    return pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item", "category"])


def test_category_crp_chance_by_hand():
    # psifr's test_category_count list: a a a a b b b b, recalls 1 3 4 8 5 4(repeat) 2 7 6.
    # Counted transitions, the same-category share of the still available items (the "to" item included):
    #   1->3: {2,3,4} of {2..8} = 3/7; 3->4: {2,4} of {2,4,5,6,7,8} = 2/6; 4->8: {2} of {2,5,6,7,8} = 1/5;
    #   8->5: {5,6,7} of {2,5,6,7} = 3/4; 2->7: no a left (not counted); 7->6: {6} of {6} = 1.
    crp = cmr.category_crp(_one_list("aaaabbbb", [1, 3, 4, 8, 5, 4, 2, 7, 6]), by=None)
    assert (int(crp["actual"]), int(crp["possible"])) == (4, 5)  # psifr's counts, unchanged
    expected = 3 / 7 + 2 / 6 + 1 / 5 + 3 / 4 + 1
    assert float(crp["expected"]) == pytest.approx(expected, rel=1e-12)
    assert float(crp["chance"]) == pytest.approx(expected / 5, rel=1e-12)
    assert list(crp.data_vars)[:3] == ["prob", "actual", "possible"]  # psifr's variables first, as before


def test_category_crp_chance_is_the_same_category_share_of_a_random_order(events):
    """Recalling a random order of every item, the within-category CRP comes out at its chance level."""
    crp = cmr.category_crp(events, by=None)
    assert 0.0 < float(crp["chance"]) < float(crp["prob"])  # these subjects cluster by category
    rng = np.random.default_rng(0)
    cats = np.repeat(np.array(list("abc")), 8)
    rows = []
    for t in range(400):
        order = rng.permutation(24) + 1  # eight recalls drawn uniformly, without replacement, from the available items
        rows += [("s", t + 1, "study", p, f"w{p}", cats[p - 1]) for p in range(1, 25)]
        rows += [("s", t + 1, "recall", o, f"w{p}", cats[p - 1]) for o, p in enumerate(order[:8], 1)]
    random_order = cmr.category_crp(pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item",
                                                                "category"]), by=None)
    assert float(random_order["prob"]) == pytest.approx(float(random_order["chance"]), abs=0.03)


def test_category_crp_figure_draws_the_stored_chance_unless_overridden(events, tmp_path):
    stat = cmr.category_crp(events)

    def chance_lines(fig):
        return [line for line in fig.axes[0].lines if line.get_label().startswith("chance")]

    (line,) = chance_lines(plots.standard_figure(stat))
    level = float(stat["chance"].mean())
    assert line.get_linestyle() == "--" and np.allclose(line.get_ydata(), level)
    assert line.get_label() == f"chance ({level:.2f})"
    (line,) = chance_lines(plots.standard_figure(stat, chance=0.3))
    assert np.allclose(line.get_ydata(), 0.3)
    assert chance_lines(plots.category_crp(stat, chance=False)) == []
    source = cmr.save_dataset(stat, tmp_path / "crp.nc")
    assert main(["plot", str(source), "--chance", "0.3", "-o", str(tmp_path / "crp.png")]) == 0
    several = plots.category_crp({"one": stat, "pooled": cmr.category_crp(events.isel(trial=slice(0, 48)), by=None)})
    segments = chance_lines(several)
    assert len(segments) == 1 and segments[0].get_label() == "chance (each data set)"
