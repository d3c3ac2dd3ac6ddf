"""report.md of a run: every number in it is read from this run's outputs and summaries."""
from __future__ import annotations

import json
from pathlib import Path

from cmr.io import atomic_write


def _human_section(ctx) -> list[str]:
    summary = ctx.summaries.get("human_crp", {})
    lines = [
        "## Human free recall",
        "",
        "Lag-CRP per subject with psifr's rule (transitions between correct first recalls;",
        "`possible` counts lags to not-yet-recalled positions), averaged over subjects.",
        "",
        "| data set | subjects | lists | CRP(+1) | CRP(-1) |",
        "|---|---:|---:|---:|---:|",
    ]
    for source, s in summary.items():
        lines.append(
            f"| `{source}` | {s['subjects']} | {s['trials']} | {s['crp_lag_+1']:.3f} | {s['crp_lag_-1']:.3f} |"
        )
    lines += ["", "![Human lag-CRP](figures/human_lag_crp.png)", ""]
    return lines


def write_report(ctx) -> Path:
    """Write ``report.md`` (and ``report.html`` when the markdown package is present)."""
    lines = [
        "# icl-cmr study report",
        "",
        f"Settings: `{json.dumps(ctx.settings, sort_keys=True)}`",
        "",
    ]
    lines += _human_section(ctx)
    text = "\n".join(lines) + "\n"
    path = Path(ctx.out_dir) / "report.md"
    with atomic_write(path, suffix=".md") as tmp:
        tmp.write_text(text)
    return path
