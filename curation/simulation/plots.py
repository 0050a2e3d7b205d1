"""The screening simulation's HTML: mean recall against documents screened, one line per
learner (plotly, the library bundled in the file so it opens offline)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def recall_figure(curves: Mapping[str, Sequence[float]], title: str) -> Any:
    """A plotly figure: recall (mean over queries) after k documents screened."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for name, ys in curves.items():
        fig.add_trace(go.Scatter(x=list(range(len(ys))), y=list(ys), mode="lines", name=name))
    fig.update_layout(title=title, xaxis_title="documents screened",
                      yaxis_title="recall (mean over queries)", yaxis_range=[0, 1.02],
                      template="plotly_white")
    return fig


def write_recall_html(result: Mapping[str, Any], path: Path) -> Path:
    """The report's recall curves as one HTML file (per-task curves are pooled)."""
    tasks = ", ".join(result.get("tasks", []))
    queries = next(iter(result["learners"].values()), {}).get("queries", 0)
    fig = recall_figure(result["curves"],
                        f"Screening replay: {tasks} ({result['split']}, {queries} queries)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.write_html(path, include_plotlyjs=True, full_html=True)
    return path
