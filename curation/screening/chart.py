"""The chart of a query's screening: relevant found against documents screened, with the
estimated total (found + expected left) and its interval (plotly; the page renders it)."""

from __future__ import annotations

from typing import Any

from curation.screening.view import ScreeningView


def found_chart(view: ScreeningView, title: str = "Found so far") -> Any:
    """A plotly figure of ``view``: the found curve, the estimated total as a dashed line and
    its interval as a band."""
    import plotly.graph_objects as go

    rem = view.remaining
    x = list(range(len(view.found_curve) + 1))
    y = [0, *view.found_curve]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name="relevant found"))
    last = max(x[-1], 1)
    fig.add_trace(go.Scatter(x=[0, last, last, 0], y=[rem.found + rem.low] * 2
                             + [rem.found + rem.high] * 2, fill="toself", mode="none",
                             name=f"{rem.level:.0%} interval of the total",
                             fillcolor="rgba(99,110,250,0.15)"))
    fig.add_hline(y=rem.found + rem.expected, line_dash="dash",
                  annotation_text=f"estimated total {rem.found + rem.expected:.1f}")
    fig.update_layout(title=title, xaxis_title="documents screened",
                      yaxis_title="relevant documents", template="plotly_white",
                      showlegend=True)
    return fig
