"""``icl-cmr plot``: every result kind with a standard figure becomes a readable figure in one command,
other kinds and bad outputs are one error line; and the figures keep their text and legends off the data.

Geometry is read back after a draw: window extents of texts, legends, axes and image cells.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import cmr
from icl_cmr.analyses import plots
from icl_cmr.analyses.cli import main
from icl_cmr.analyses.plots.standard import STANDARD_FIGURES, figure_function
from tests.conftest import REPO_ROOT, attention_pattern_example, morton_events, require, tiny_head_scan


@pytest.fixture(scope="module", autouse=True)
def _matplotlib():
    require("matplotlib")


@pytest.fixture(scope="module")
def events():
    return morton_events(3)


@pytest.fixture(scope="module")
def timed():
    timed = cmr.from_recall_matrix([[2, 3, 1], [1, 2, 0]], 3)
    timed["recall_rt"] = (("trial", "output_position"), [[0.8, 2.0, 4.1], [1.1, 1.9, float("nan")]])
    return timed


@pytest.fixture(scope="module")
def tiny():
    """A random tiny model, its head scan and a least-squares fit of every head on a small grid."""
    model, heads, grid = tiny_head_scan()
    from icl_cmr.adapters.head_profiles import select_profile

    fits = cmr.fit_profiles(select_profile(heads, which="score"), grid, objective="lsq", lags=cmr.PAPER_LAGS, invalid="nan")
    return model, heads, fits


@pytest.fixture(scope="module")
def causal(tiny):
    from icl_cmr.adapters.lm.causal_composition import path_ablation
    from icl_cmr.adapters.lm.composition import composition_scores

    model, *_ = tiny
    scores = composition_scores(model, n_baseline=10)
    return scores, path_ablation(model, [(1, 0), (1, 1)], n_words=12, n_prompts=1, composition=scores)


def _pattern(n_words=20):
    return attention_pattern_example(n_words)


def _distance_bins(events):
    from icl_cmr.adapters.recall_data import load_item_distances

    return load_item_distances("psifr:Morton2013")


# one small dataset per figure function of the table
BUILDERS = {
    "lag_crp": lambda r: cmr.lag_crp(r("events")),
    "head_profiles": lambda r: r("tiny")[1],
    "spc": lambda r: cmr.spc(r("events")),
    "pfr": lambda r: cmr.pfr(r("events")),
    "category_crp": lambda r: cmr.category_crp(r("events")),
    "category_clustering": lambda r: cmr.category_clustering(r("events")),
    "distance_crp": lambda r: cmr.distance_crp(r("events"), None, _distance_bins(None), [0.3, 0.6, 0.8, 1.0]),
    "distance_rank": lambda r: cmr.distance_rank(r("events"), None, _distance_bins(None)),
    "distance_rank_shifted": lambda r: cmr.distance_rank_shifted(r("events"), None, _distance_bins(None), 2),
    "distance_rank_window": lambda r: cmr.distance_rank_window(r("events"), None, _distance_bins(None), [-1, 0, 1]),
    "input_crp": lambda r: cmr.input_crp(r("events")),
    "pli_list_lag": lambda r: cmr.pli_list_lag(r("events"), 2),
    "irt": lambda r: cmr.irt(r("timed"), time_key="rt", by=None),
    "lag_crl": lambda r: cmr.lag_crl(r("timed"), time_key="rt", by=None),
    "stop_probability": lambda r: cmr.stop_probability(r("events")),
    "share_cmr_like_by_depth": lambda r: r("tiny")[2],
    "parameter_recovery": lambda r: _recovery(),
    "attention_pattern": lambda r: _pattern(),
    "composition_matrix": lambda r: r("causal")[0],
    "causal_composition": lambda r: r("causal")[1],
    "ablation_result": lambda r: _ablation(r("tiny")[0]),
    "predictive_check": lambda r: cmr.posterior_predictive(r("events"), cmr.default_parameters(), n_rep=1, rng=0),
    "rep_crp": lambda r: cmr.rep_crp(_repetition()),
    "rep_neighbor_crp": lambda r: cmr.neighbor_crp(_repetition(), n_shuffles=2),
    "spacing_recall": lambda r: cmr.spacing_recall(_repetition()),
    "first_presentation_bias": lambda r: cmr.first_presentation_bias(_repetition(), n_shuffles=2),
    "analysis_set": lambda r: cmr.run_analyses(r("events"), analyses="lag_crp,spc,category_crp,lag_rank"),
    "first_presentation_heads": lambda r: _repetition_heads(),
}


def _repetition_heads():
    from tests.adapters.test_repetition_heads import _planted, _prompts

    return _planted(_prompts(n_prompts=3), target=1.0)


def _repetition():
    from icl_cmr.adapters.recall_data import load_recall_data

    return load_recall_data("icl-cmr:repetition")


def _recovery():
    with pytest.warns(cmr.errors.FitWarning):  # two generations on 4 lists: estimates end at a bound
        return cmr.parameter_recovery(2, cmr.FitSpec(["B_enc", "B_rec"]), list_length=6, n_lists=4, progress=False,
                                      de_options={"maxiter": 2, "popsize": 3})


def _ablation(model):
    from icl_cmr.analyses.causal.ablation import run_ablation

    passages = np.random.default_rng(0).integers(2, 60, size=(3, 30))
    return run_ablation(model.bridge, passages, [(1, 0)], n_random=3, early=4, late=25, window=2, modes=("zero",),
                        measures="icl",
                        progress=False)


def test_every_function_of_the_table_has_a_case():
    from tests.analyses.test_plots_every_kind import BUILDERS as EVERY_KIND  # events, grids, subject fits, recall ablation
    from tests.analyses.test_plots_result_figures import KINDS as RESULT_KINDS  # comparisons, nulls, CMR's states

    assert {function for _, _, function, _ in STANDARD_FIGURES} == set(BUILDERS) | set(EVERY_KIND) | set(RESULT_KINDS)


@pytest.mark.parametrize("function", sorted(BUILDERS))
def test_plot_writes_the_standard_figure_of_each_kind(function, request, tmp_path, capsys):
    from matplotlib.image import imread

    result = BUILDERS[function](request.getfixturevalue)
    assert figure_function(result) == function
    source = cmr.save_dataset(result, tmp_path / "result.nc")
    assert main(["plot", str(source), "-o", str(tmp_path / "figure.png")]) == 0
    image = imread(tmp_path / "figure.png")
    assert image.ndim == 3 and min(image.shape[:2]) > 100 and image[..., :3].std() > 0  # something drawn
    assert f"{function} of the {result.attrs['icl_cmr_kind']} dataset" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figure.png", "result.nc"]  # nothing left behind


def test_plot_picks_the_format_by_extension_and_units_and_title(events, tmp_path):
    source = cmr.save_dataset(cmr.lag_crp(events), tmp_path / "crp.nc")
    assert main(["plot", str(source), "-o", str(tmp_path / "crp.pdf")]) == 0
    assert (tmp_path / "crp.pdf").read_bytes()[:4] == b"%PDF"
    assert main(["plot", str(source), "-o", str(tmp_path / "crp.svg"), "--title", "Morton"]) == 0
    assert b"<svg" in (tmp_path / "crp.svg").read_bytes()[:500]
    first = str(events["subject"].values[0])
    fig = plots.standard_figure(cmr.load_dataset(source), units=first, title="one subject")
    assert fig._suptitle.get_text() == "one subject"
    assert "n = 1 subjects" in fig.axes[0].get_legend().get_texts()[0].get_text()


def _one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("icl-cmr plot: error: "), captured.err
    return lines[0]


def test_plot_refuses_a_kind_without_a_figure_in_one_line(events, tmp_path, capsys):
    pnr = cmr.save_dataset(cmr.pnr(events), tmp_path / "pnr.nc")
    assert main(["plot", str(pnr), "-o", str(tmp_path / "pnr.png")]) == 1
    line = _one_error_line(capsys)
    assert "no standard figure for a dataset of kind 'recall_stat' with stat_kind 'pnr'" in line
    assert "lag_profile (profile_kind lag_crp)" in line and "attention_pattern" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pnr.nc"]


def test_plot_refuses_bad_outputs_and_inputs_in_one_line(events, tmp_path, capsys):
    source = cmr.save_dataset(cmr.spc(events), tmp_path / "spc.nc")
    before = source.read_bytes()
    assert main(["plot", str(source), "-o", str(tmp_path / "spc.jpg")]) == 1
    assert ".png, .pdf, .svg; got '.jpg'" in _one_error_line(capsys)
    assert main(["plot", str(source), "-o", str(source)]) == 1
    assert "also an input" in _one_error_line(capsys)
    assert source.read_bytes() == before
    (tmp_path / "text.nc").write_text("not netCDF")
    assert main(["plot", str(tmp_path / "text.nc"), "-o", str(tmp_path / "x.png")]) == 1
    assert "not a readable netCDF file" in _one_error_line(capsys)
    assert main(["plot", str(source), "-o", str(tmp_path / "x.png"), "--units", "nobody"]) == 1
    assert "subjects nobody are not in the dataset" in _one_error_line(capsys)
    assert main(["plot", str(source), "-o", str(tmp_path / "x.png"), "--time-unit", "s"]) == 1
    assert "time_unit applies to inter-response times" in _one_error_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spc.nc", "text.nc"]


def test_plot_help_lists_every_kind_and_function_and_loads_no_matplotlib(capsys):
    with pytest.raises(SystemExit):
        main(["plot", "--help"])
    text = capsys.readouterr().out
    for kind, _, function, _ in STANDARD_FIGURES:
        assert kind in text and f"{function}:" in text
    code = "import sys; from icl_cmr.analyses.cli import build_parser; build_parser(); print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    assert out.stdout.strip() == "False"


# --- geometry of the figures ---------------------------------------------------------------------


def _drawn(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()
    return fig.canvas.get_renderer()


def _outside(box, area) -> bool:
    """``box`` shares no area with ``area`` (touching edges allowed)."""
    return box.x1 <= area.x0 + 0.5 or box.x0 >= area.x1 - 0.5 or box.y1 <= area.y0 + 0.5 or box.y0 >= area.y1 - 0.5


def test_composition_legends_sit_outside_the_data(causal, tiny):
    _, fits = tiny[0], tiny[2]
    for fig in (plots.causal_composition(causal[1]), plots.composition_against_cmr(causal[1], fits)):
        renderer = _drawn(fig)
        ax = fig.axes[0]
        legend = ax.get_legend()
        assert legend is not None and legend.get_texts()
        assert _outside(legend.get_window_extent(renderer), ax.get_window_extent(renderer))


def test_attention_pattern_label_overlaps_no_text_and_no_data():
    from matplotlib.text import Annotation, Text

    for n_words in (3, 5, 20, 50):
        fig = plots.attention_pattern(_pattern(n_words))
        renderer = _drawn(fig)
        ax = fig.axes[0]
        (label,) = [t for t in ax.texts if isinstance(t, Annotation)]
        box = Text.get_window_extent(label, renderer)  # the words alone, without the arrow
        assert not _outside(box, ax.get_window_extent(renderer))  # inside the axes ...
        others = [t for t in fig.findobj(Text) if t is not label and t.get_visible() and t.get_text().strip()]
        for text in others:
            extent = text.get_window_extent(renderer)
            inside_figure = extent.x1 > 0 and extent.x0 < fig.bbox.x1 and extent.y1 > 0 and extent.y0 < fig.bbox.y1
            on_tick_in_view = not hasattr(text, "get_position") or inside_figure
            if on_tick_in_view and extent.width > 0:
                assert _outside(box, extent), (n_words, label.get_text(), text.get_text())
        # ... crossing none of the lines drawn on the image (the edges of BOS and the copies) ...
        for artist in [*ax.lines, *ax.collections]:
            assert _outside(box, artist.get_window_extent(renderer)), (n_words, artist)
        # ... over cells the causal mask leaves blank: every cell under the label is NaN
        corners = ax.transData.inverted().transform([[box.x0, box.y0], [box.x1, box.y1]])
        (k0, q1), (k1, q0) = corners  # y grows down the image: query rows from top to bottom
        seq = 2 * n_words + 1
        keys = range(max(0, int(np.floor(k0 + 0.5))), min(seq, int(np.floor(k1 + 0.5)) + 1))
        queries = range(max(0, int(np.floor(q0 + 0.5))), min(seq, int(np.floor(q1 + 0.5)) + 1))
        image = np.ma.filled(ax.get_images()[0].get_array(), np.nan)
        assert all(np.isnan(image[q, k]) for q in queries for k in keys), n_words


def test_inter_response_times_name_their_unit(timed):
    stat = cmr.irt(timed, time_key="rt", by=None)
    assert plots.irt(stat, time_unit="s").axes[0].get_ylabel() == "Inter-response time (s)"
    assert plots.lag_crl(cmr.lag_crl(timed, time_key="rt", by=None), time_unit="milliseconds").axes[0].get_ylabel() \
        == "Inter-response time (ms)"
    assert plots.irt(stat).axes[0].get_ylabel() == "Inter-response time (units of 'rt')"  # the column, unit unknown
    stat["irt"].attrs["units"] = "ms"
    assert plots.irt(stat).axes[0].get_ylabel() == "Inter-response time (ms)"


def test_category_crp_draws_the_labelled_chance_level(events):
    chance = plots.category_chance(events)
    # by hand: every list of these subjects, each item's share of same-category items among the others
    shares = []
    for trial in range(events.sizes["trial"]):
        length = int(events["list_length"][trial])
        categories = events["study_category"].values[trial, :length].tolist()
        for c in categories:
            if categories.count(c) > 1:
                shares.append((categories.count(c) - 1) / (length - 1))
    assert chance == pytest.approx(np.mean(shares), rel=1e-12)
    for given in (events, chance):
        ax = plots.category_crp(cmr.category_crp(events), chance=given).axes[0]
        (line,) = [line for line in ax.lines if line.get_label().startswith("chance")]
        assert line.get_linestyle() == "--" and np.allclose(line.get_ydata(), chance)
        assert [t.get_text() for t in ax.get_legend().get_texts()] == [f"chance ({chance:.2f})"]
    assert not [line for line in plots.category_crp(cmr.category_crp(events), chance=False).axes[0].lines
                if line.get_label().startswith("chance")]
    with pytest.raises(ValueError, match="probability"):
        plots.category_crp(cmr.category_crp(events), chance=2.0)


def test_predictive_check_is_in_the_house_style(events):
    from matplotlib.text import Text

    from icl_cmr.analyses.plots.style import STYLE

    fig = plots.predictive_check(cmr.posterior_predictive(events, cmr.default_parameters(), n_rep=1, rng=0))
    renderer = _drawn(fig)
    sizes = {t.get_fontsize() for t in fig.findobj(Text) if t.get_text().strip()}
    assert max(sizes) <= STYLE["font.size"]
    assert all(ax.spines["top"].get_visible() is False for ax in fig.axes)
    legend = fig.axes[2].get_legend()
    assert _outside(legend.get_window_extent(renderer), fig.axes[2].get_window_extent(renderer))
    assert fig.axes[0].get_xlabel() == "Lag (serial positions)"
