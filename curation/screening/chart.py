"""The chart of a query's screening: relevant found against documents screened, with the
estimated total (found + expected left) and its interval (plotly; the page renders it)."""

from __future__ import annotations

from typing import Any

from curation.screening.view import ScreeningView


def found_chart(view: ScreeningView, title: str = "Found so far") -> Any:
    """A plotly figure of ``view``: the found curve, the estimated total as a dashed line and
    its interval as a band.

    Laid out for the panel's narrow column (about 200 px at a 1280 px window): the legend
    under the plot, so the plot keeps the column's width, and the total's label anchored at
    the plot's left edge, growing into the plot (anchored right, as plotly puts it, a label
    wider than a narrow plot ran over the y axis).
    """
    import plotly.graph_objects as go

    rem = view.remaining
    x = list(range(len(view.found_curve) + 1))
    y = [0, *view.found_curve]
    total = rem.found + rem.expected
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name="relevant found"))
    last = max(x[-1], 1)
    fig.add_trace(go.Scatter(x=[0, last, last, 0], y=[rem.found + rem.low] * 2
                             + [rem.found + rem.high] * 2, fill="toself", mode="none",
                             name=f"{rem.level:.0%} interval of the total",
                             fillcolor="rgba(99,110,250,0.15)"))
    fig.add_hline(y=total, line_dash="dash", annotation_text=f"estimated total {total:.1f}",
                  annotation_position="top left", annotation_font_size=11)
    top = max(rem.found + rem.high, total, 1) * 1.2 + 0.5  # room for the label above the line
    fig.update_layout(title=title, xaxis_title="documents screened", yaxis_title="relevant",
                      yaxis_range=[0, top], template="plotly_white", showlegend=True,
                      legend={"orientation": "h", "x": 0, "xanchor": "left", "y": -0.3,
                              "yanchor": "top"},
                      margin={"l": 40, "r": 10, "t": 40, "b": 10}, height=340)
    return fig

