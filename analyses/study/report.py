"""report.md of a run: every number in it is read from this run's outputs and summaries."""
from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np

from cmr.deprecation import keyword_only
from cmr.io import atomic_write
from cmr.markdown import markdown_table

from ..memory.llm_recall import report_section
from .layout import CMR_LIKE_DISTANCE


def ablation_summary(result, top_heads) -> dict:
    """JSON-safe summary of an ``ablation`` dataset (per mode: effects and statistics)."""
    # the random family alone (not the induction control nor layer-matched sets)
    random_sets = [s for s in result["head_set"].values if str(s).startswith("random_")]
    out = {"top_heads": [f"L{l}.H{h}" for l, h in top_heads], "n_passages": int(result.sizes["passage"]),
           "n_random": len(random_sets), "modes": {}}
    for mode in result["mode"].values:
        effect = result["mean_effect"].sel(mode=mode)
        random = effect.sel(head_set=random_sets).values
        entry = {
            "baseline_icl_score": float(result["baseline_icl_score"].mean()),
            "top_effect": float(effect.sel(head_set="top")),
            "random_effect_mean": float(np.mean(random)),
            "random_effect_sd": float(np.std(random, ddof=1)) if random.size > 1 else float("nan"),
            "empirical_pvalue": float(result["empirical_pvalue"].sel(mode=mode)),
        }
        for comparison in result["comparison"].values:
            entry[str(comparison)] = {
                name: float(result[name].sel(mode=mode, comparison=comparison))
                for name in result.data_vars if result[name].dims == ("mode", "comparison")
            }
        out["modes"][str(mode)] = entry
    if "measure" in result.dims:  # the measures beside the ICL score: each set against the random sets
        out["measures"] = {
            str(measure): {str(mode): {str(c): {name: float(result[f"measure_{name}"].sel(measure=measure, mode=mode,
                                                                                         comparison=c))
                                               for name in ("mean_difference", "rank", "n_null", "rank_pvalue", "z",
                                                            "holm_rank_pvalue")}
                                       for c in ("top_vs_random", "induction_vs_random")
                                       if c in result["comparison"].values}
                           for mode in result["mode"].values}
            for measure in result["measure"].values if str(measure) != "icl"}
    return out


def composition_stage_summary(scores, causal, roles, distance) -> dict:
    """JSON-safe summary of the composition stage: scores against the baseline, the tested heads."""
    out = {"mean_score": {}, "baseline_mean": {}, "heads": []}
    for kind in scores["composition"].values:
        out["mean_score"][str(kind)] = float(scores["score"].sel(composition=kind).mean())
        out["baseline_mean"][str(kind)] = float(scores["baseline_mean"].sel(composition=kind))
    for t in causal["target"].values:
        row = causal.sel(target=t)
        layer, head = int(row["layer"]), int(row["head"])
        out["heads"].append({
            "head": f"L{layer}.H{head}", "roles": list(roles[(layer, head)]),
            "induction": float(row["base_induction"]), "drop_q": float(row["drop_moved"].sel(path="Q")),
            "drop_k": float(row["drop_moved"].sel(path="K")), "class": str(row["composition_class"].values),
            "whole_output_class": str(row["whole_output_class"].values),
            "drop_v": float(row["value_drop_moved"]),
            "upstream": str(row["upstream"].values), "distance": float(distance[layer, head]),
        })
    return out


def _composition_section(ctx) -> list[str]:
    s = ctx.summaries.get("composition")
    if not s:
        return []
    means = ", ".join(f"{k} {_fmt(v)} (random {_fmt(s['baseline_mean'][k])})" for k, v in s["mean_score"].items())
    lines = [
        "## Which composition the heads use",
        "",
        "CMR built as attention is a Q-composition circuit (docs/circuit.md). Mean composition scores "
        f"(Elhage et al. 2021) over all head pairs: {means}. Causal test: what every earlier head moved "
        "from other positions (its direct output without its attention to the position itself) removed from "
        "only the query input or only the key input of the head; relative drop of its induction score (K: the "
        "key path carries it, Q: the query path, mixed: both).",
        "",
    ]
    rows = []
    for h in s["heads"]:
        # a weak head has almost no induction score to lose: its relative drops mean nothing
        drops = ("-", "-") if h["class"] == "weak" else (_fmt(h["drop_q"]), _fmt(h["drop_k"]))
        rows.append((h["head"], ", ".join(r.replace("_", "-") for r in h["roles"]), _fmt(h["induction"]),
                     _fmt(h["distance"]), *drops, h["class"], h.get("whole_output_class", "n/a"), h["upstream"]))
    lines += markdown_table(("head", "chosen as", "induction score", "lsq CMR distance", "drop (query path)",
                             "drop (key path)", "class", "class, whole output", "upstream"), rows,
                            align="llrrrrlll").split("\n")
    counts = {}
    for h in s["heads"]:
        counts[h["class"]] = counts.get(h["class"], 0) + 1
    lines += ["", "Classes of the tested heads: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
              + ". The study argued that CMR-like heads resemble Q-composition; "
              + ("none of the tested heads is Q-composed." if "Q" not in counts else
                 f"{counts['Q']} of {len(s['heads'])} tested heads are Q-composed."), "",
              "![Composition class of the tested heads against their CMR distance](figures/composition_vs_cmr.png)", ""]
    return lines


def _fmt(x, digits=3):
    return "n/a" if x is None or (isinstance(x, float) and not np.isfinite(x)) else f"{x:.{digits}f}"


def _human_section(ctx) -> list[str]:
    summary = ctx.summaries.get("human_crp", {})
    lines = [
        "## Human free recall",
        "",
        "Lag-CRP per subject with psifr's rule (transitions between correct first recalls;",
        "`possible` counts lags to not-yet-recalled positions), averaged over subjects.",
        "",
    ]
    rows = [(f"`{source}`", f"{s['subjects']}", f"{s['trials']}", _fmt(s["crp_lag_+1"]), _fmt(s["crp_lag_-1"]))
            for source, s in summary.items()]
    lines += markdown_table(("data set", "subjects", "lists", "CRP(+1)", "CRP(-1)"), rows, align="lrrrr").split("\n")
    lines += ["", "![Human lag-CRP](figures/human_lag_crp.png)", ""]
    return lines


def _heads_section(ctx) -> list[str]:
    s = ctx.summaries.get("heads")
    if not s:
        return []
    model = ctx.settings["model"]
    lines = [
        f"## Attention heads of `{model}`",
        "",
        f"{s['n_layers']} layers x {s['n_heads']} heads; prompts: BOS + two copies of a random permutation of "
        f"{ctx.settings['n_words']} single-token words, {ctx.settings['n_prompts']} seeded prompts.",
    ]
    if "loss_first_copy" in s:
        lines.append(
            f"Loss per token: {_fmt(s['loss_first_copy'])} nats on the first copy, "
            f"{_fmt(s['loss_second_copy'])} on the second (in-context copying)."
        )
    top = [(f"L{t['layer']}.H{t['head']}", _fmt(t["induction_score"])) for t in s["top_induction"]]
    lines += ["", *markdown_table(("head", "induction score"), top, align="lr").split("\n")]
    lines.append("")
    if "attention_pattern" in s:
        p = s["attention_pattern"]
        lines += [
            f"Attention of the top induction head L{p['layer']}.H{p['head']} over prompt {p['prompt']} (query x key; "
            "the diagonal in the lower-left block is the induction target, lag +1):",
            "",
            f"![Attention of L{p['layer']}.H{p['head']} over the repeated prompt](figures/attention_top_head.png)",
            "",
        ]
    return lines


def _fits_section(ctx) -> list[str]:
    heads = ctx.summaries.get("fit_heads")
    if not heads:
        return []
    grid = ctx.summaries.get("grid", {})
    lines = [
        "## CMR fits: heads and humans through the same call",
        "",
        f"Grid: {grid.get('source', '?')} ({grid.get('points', '?')} parameter points). Distance "
        "d = mean over lags of (fitted - profile)^2 / variance of the profile over lags; heads on "
        "lags -5..+5 (pre-softmax scores), humans on lags -5..-1, +1..+5 (lag-CRP). `paper` = the "
        "study's min/max-matched map on the grid; `lsq` = least-squares affine map, refined. The "
        "Gaussian baseline a + b exp(-(lag-mu)^2/(2 s^2)) is fitted fairly (started at the peak lag). "
        f"\"Beyond chance\": p <= 0.05 against both structureless nulls (permuted lags; smooth profiles "
        f"as rough as the unit), the share to read instead of d < {CMR_LIKE_DISTANCE}; \"null d < "
        f"{CMR_LIKE_DISTANCE}\": how often the smooth null profiles pass that threshold (docs/null-models.md).",
        "",
    ]

    def row(label, objective, f):
        return (label, objective, f"{f['units']}", _fmt(f["median_distance"]), _fmt(f["share_cmr_like"], 2),
                _fmt(f.get("share_beyond_chance"), 2), _fmt(f.get("null_share_cmr_like"), 2),
                _fmt(f.get("gaussian_median_distance")), _fmt(f.get("gaussian_beats_cmr_distance"), 2),
                _fmt(f.get("gaussian_beats_cmr_aic"), 2))

    rows = [row(f"heads of `{ctx.settings['model']}`", objective, f) for objective, f in heads.items()]
    rows += [row(f"subjects of `{source}`", objective, f)
             for source, by_objective in ctx.summaries.get("fit_humans", {}).items()
             for objective, f in by_objective.items()]
    lines += markdown_table(("units", "objective", "n", "median d (CMR)", f"share d < {CMR_LIKE_DISTANCE}",
                             "beyond chance", f"null d < {CMR_LIKE_DISTANCE}", "median d (Gaussian)",
                             "Gaussian better (d)", "Gaussian better (AIC)"), rows, align="llrrrrrrrr").split("\n")
    lines += [
        "",
        "![Top heads with CMR and Gaussian fits](figures/top_heads_fits.png)",
        "",
        "![CMR distance against induction score](figures/distance_vs_induction.png)",
        "",
        "![Share of CMR-like heads by depth](figures/cmr_like_by_depth.png)",
        "",
        "![Fitted parameters of heads and humans](figures/parameters_heads_vs_humans.png)",
        "",
        "![Human lag-CRP beside the soft lag-CRP of the top heads](figures/human_vs_head_crp.png)",
        "",
    ]
    return lines


def _ablation_section(ctx) -> list[str]:
    s = ctx.summaries.get("ablation")
    if not s:
        return []
    lines = [
        "## Causal test: ablating the top CMR-like heads",
        "",
        f"ICL score = loss at token 500 minus loss at token 50 (each averaged over +-5 tokens), on "
        f"{s['n_passages']} Wikipedia passages of 512 tokens. Top set ({len(s['top_heads'])} heads, the 10% with "
        f"the smallest `lsq` CMR distance): {', '.join(s['top_heads'])}; compared with {s['n_random']} seeded "
        "random sets of the same size. Effect = ablated ICL score - intact ICL score (> 0: ablation hurts ICL).",
        "",
        "The primary test is the top set's place among the random sets (rank, exact permutation p, z); the "
        "contrast with the random sets' mean, over article means, is tested with set and article as crossed random "
        "effects.",
        "",
    ]
    verdicts, rows = [], []
    for mode, e in s["modes"].items():
        tr = e.get("top_vs_random", {})
        rows.append((
            mode, _fmt(e["baseline_icl_score"]), _fmt(e["top_effect"]),
            f"{_fmt(e['random_effect_mean'])} +- {_fmt(e['random_effect_sd'])}",
            f"{_fmt(tr.get('rank'), 0)} of {_fmt(tr.get('n_null', float('nan')) + 1, 0)}",
            _fmt(e["empirical_pvalue"], 3), _fmt(tr.get("z"), 2),
            f"{_fmt(tr.get('mean_difference'))} [{_fmt(tr.get('ci_low'))}, {_fmt(tr.get('ci_high'))}]",
            _fmt(tr.get("t_pvalue"), 4),
        ))
        hurts = e["empirical_pvalue"] < 0.05
        verdicts.append(
            f"- {mode} ablation: the top CMR-like set {'ranks above' if hurts else 'is not detected above'} random sets "
            f"of the same size by the rank test (p = {_fmt(e['empirical_pvalue'], 3)}, before Holm; "
            f"z = {_fmt(tr.get('z'), 2)})."
        )
    lines += markdown_table(("mode", "intact ICL score", "top-set effect", "random effect (mean +- sd)", "rank",
                             "rank p (primary)", "z", "contrast with random mean, article means [95% CI]",
                             "crossed t p"), rows, align="lrrrrrrrr").split("\n")
    lines += ["", *verdicts, ""]
    for mode, e in s["modes"].items():
        for comparison in ("top_vs_layer_matched", "induction_vs_random"):
            c = e.get(comparison)
            if c:
                lines.append(
                    f"- {mode}, {comparison.replace('_', ' ')}: mean difference {_fmt(c['mean_difference'])} "
                    f"[{_fmt(c.get('ci_low'))}, {_fmt(c.get('ci_high'))}], rank {_fmt(c.get('rank'), 0)} of "
                    f"{_fmt(c.get('n_null', float('nan')) + 1, 0)}, p {_fmt(c.get('rank_pvalue'), 3)} "
                    f"(Holm {_fmt(c.get('holm_rank_pvalue'), 3)}, family: primary).")
    if s.get("measures"):
        lines += ["", "Measures beside the ICL score (docs/ablation.md, \"Measures with power\"; effect = ablated - "
                  "intact, > 0: ablation hurts; Holm over every measure, mode and comparison):", ""]
        for measure, modes in s["measures"].items():
            for mode, comparisons in modes.items():
                for comparison, c in comparisons.items():
                    lines.append(
                        f"- {measure}, {mode}, {comparison.replace('_', ' ')}: mean difference "
                        f"{_fmt(c['mean_difference'])}, rank {_fmt(c['rank'], 0)} of {_fmt(c['n_null'] + 1, 0)}, "
                        f"p {_fmt(c['rank_pvalue'], 3)} (Holm {_fmt(c['holm_rank_pvalue'], 3)}), z {_fmt(c['z'], 2)}.")
    lines += ["", "![Ablation](figures/ablation.png)", ""]
    return lines


def _timings(ctx, manifest) -> list[str]:
    stages = (manifest or {}).get("stages", {})
    if not stages:
        return []
    rows = [(name, f"{entry.get('seconds', 0):.1f}") for name, entry in stages.items()]
    lines = ["## Run", "", *markdown_table(("stage", "seconds"), rows, align="lr").split("\n")]
    return lines + [""]


@keyword_only
def write_report(ctx, *, manifest=None) -> Path:
    """Write ``report.md`` and a self-contained ``report.html`` beside it."""
    lines = [
        "# icl-cmr study report",
        "",
        f"Settings: `{json.dumps(ctx.settings, sort_keys=True)}`",
        "",
    ]
    lines += _human_section(ctx) + _heads_section(ctx) + _fits_section(ctx) + _composition_section(ctx)
    lines += _ablation_section(ctx)
    lines += report_section(ctx.summaries.get("llm_recall", {}))
    lines += _timings(ctx, manifest)
    text = "\n".join(lines) + "\n"
    path = Path(ctx.out_dir) / "report.md"
    with atomic_write(path, suffix=".md") as tmp:
        tmp.write_text(text)
    with atomic_write(path.with_suffix(".html"), suffix=".html") as tmp:
        tmp.write_text(_html(text))
    return path


def _html(markdown: str) -> str:
    """A plain HTML rendering (headings, tables, images, paragraphs) without extra dependencies."""
    out, table = [], []

    def flush_table():
        if table:
            rows = [r for r in table if not set(r.replace("|", "").strip()) <= set("-: ")]
            cells = [[html.escape(c.strip()) for c in r.strip().strip("|").split("|")] for r in rows]
            head = "".join(f"<th>{c}</th>" for c in cells[0])
            body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in cells[1:])
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
            table.clear()

    for line in markdown.splitlines():
        if line.startswith("|"):
            table.append(line)
            continue
        flush_table()
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{html.escape(line[level:].strip())}</h{level}>")
        elif line.startswith("![") and "](" in line:
            alt, src = line[2:].split("](", 1)
            out.append(f'<p><img src="{html.escape(src.rstrip(")"))}" alt="{html.escape(alt)}" style="max-width:100%"></p>')
        elif line.strip():
            out.append(f"<p>{html.escape(line)}</p>")
    flush_table()
    style = "body{font-family:sans-serif;max-width:60em;margin:auto}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}"
    return f"<!doctype html><html><head><meta charset='utf-8'><title>icl-cmr report</title><style>{style}</style></head><body>{''.join(out)}</body></html>\n"
