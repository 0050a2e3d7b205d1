"""What a simulation reports: WSS@95, the round table, the targets, JSON + plotly HTML."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def wss_at(ranked: Sequence[str], relevant: set[str], recall: float = 0.95) -> float:
    """WSS@R = R - n_R / N (Cohen et al. 2006; ASReview insights): n_R documents screened in
    ``ranked`` order until ``recall`` of ``relevant`` is found, N = len(ranked)."""
    need = max(1, math.ceil(recall * len(relevant) - 1e-9))
    found = 0
    for i, d in enumerate(ranked, 1):
        found += d in relevant
        if found >= need:
            return recall - i / len(ranked)
    return 0.0


def targets(rows: list[dict[str, Any]]) -> dict[str, Any]:
    first, last = rows[0], rows[-1]
    out: dict[str, Any] = {
        "kb_only_ndcg@10": first["ndcg@10"], "final_active_ndcg@10": last["active_ndcg@10"],
        "gain_over_kb_only_pp": round(100 * (last["active_ndcg@10"] - first["ndcg@10"]), 2),
        "best_candidate_gain_pp": round(100 * (max(r["ndcg@10"] for r in rows[1:])
                                               - first["ndcg@10"]), 2) if len(rows) > 1 else 0.0,
        "target_gain_pp": 2.0,
    }
    if "zero_shot_ndcg@10" in first:
        out["gain_over_zero_shot_pp"] = round(
            100 * (last["active_ndcg@10"] - first["zero_shot_ndcg@10"]), 2)
    return out


def format_rounds(summary: dict[str, Any]) -> str:
    """A plain-text table of the rounds."""
    head = (f"{'round':>5} {'labels':>6} {'NDCG@10':>8} {'ER@10':>7} {'active':>8} "
            f"{'goldrec':>8} {'WSS@95':>7} {'promoted':>8} {'sec':>7}  version")
    lines = [f"simulation {summary['schema']} (test split, pool evaluation)", head]
    for r in summary["rounds"]:
        def f(key: str, row: dict[str, Any] = r) -> str:
            v = row.get(key)
            return f"{v:.4f}" if isinstance(v, float) else "-"
        lines.append(f"{r['round']:>5} {r['labels']:>6} {f('ndcg@10'):>8} "
                     f"{f('entity_recall@10'):>7} {f('active_ndcg@10'):>8} "
                     f"{f('gold_recall_labelled'):>8} {f('wss@95'):>7} "
                     f"{str(r['promoted']):>8} {r.get('seconds', 0):>7}  {r['version']}")
    first = summary["rounds"][0]
    if "zero_shot_ndcg@10" in first:
        lines.append(f"zero-shot base: NDCG@10 {first['zero_shot_ndcg@10']:.4f}, "
                     f"ER@10 {first['zero_shot_entity_recall@10']:.4f}")
    lines.append(json.dumps(summary["targets"]))
    return "\n".join(lines)


def write_outputs(summary: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    """``simulation.json``, ``simulation.html`` (plotly) and ``simulation.txt`` in ``out_dir``."""
    import plotly.graph_objects as go

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "simulation.json", "html": out_dir / "simulation.html",
             "table": out_dir / "simulation.txt"}
    paths["json"].write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    paths["table"].write_text(format_rounds(summary) + "\n", encoding="utf-8")
    rounds = summary["rounds"]
    x = [r["labels"] for r in rounds]
    fig = go.Figure()
    for key, name in (("ndcg@10", "candidate NDCG@10"), ("active_ndcg@10", "active NDCG@10"),
                      ("entity_recall@10", "candidate EntityRecall@10")):
        fig.add_trace(go.Scatter(x=x, y=[r.get(key) for r in rounds], mode="lines+markers",
                                 name=name))
    if "zero_shot_ndcg@10" in rounds[0]:
        fig.add_hline(y=rounds[0]["zero_shot_ndcg@10"], line_dash="dot",
                      annotation_text="zero-shot NDCG@10")
    fig.update_layout(title=f"Simulated feedback loop: {summary['schema']} (held-out test split)",
                      xaxis_title="labels given", yaxis_title="score")
    fig.write_html(paths["html"], include_plotlyjs=True, full_html=True)
    return paths
