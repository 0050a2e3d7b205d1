"""The Models page's learned-ranker section: a schema's ranker versions (held-out metrics, which
labels each learned from, which is active), the last ranker rounds (when, labels, held-out
scores, promoted or kept and why), the default ranking and the measurement that chose it, how
many new labels wait for the next round, and, for admins, rollback, a round started now and the
retraining schedule.

A damaged version record or an active version that cannot be used (its folder gone, its model
damaged) is named in a warning; the other versions stay listed and an admin can activate one of
them or train a new one (issue 35).

Buttons only record requests; :func:`curation.training.ranker.promote_ranker`,
:func:`~curation.training.ranker.start_round` and
:func:`~curation.training.ranker.set_ranker_schedule` check the admin role in the library. What
a request did (or why it was refused) shows here, in the settings, which stay open to show it
(issue 36 item 9), never later on another page.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import streamlit as st

from app_pages.common import AppContext
from app_pages.safe import md
from curation.ranking.versions import ActiveRanker, RankerVersion, active_ranker, scan_versions
from curation.search.ranked import default_for
from curation.store.rankers import Rankers
from curation.training.ranker import promote_ranker, set_ranker_schedule, start_round
from curation.training.ranker_round import learned_from, round_line
from curation.training.round_history import RoundRecord, last_rounds
from kb_sources.errors import CurationError

#: Rounds listed on the Models page.
ROUNDS_SHOWN = 10


def _request(kind: str) -> None:
    st.session_state["ranker_request"] = {
        "kind": kind,
        "version": st.session_state.get("ranker_version"),
        "reason": st.session_state.get("ranker_reason", ""),
        "every": st.session_state.get("ranker_every"),
        "schema": st.session_state.get("models_schema"),
    }


def handle_request(ctx: AppContext) -> tuple[str, str] | None:
    """Carry out a pending rollback, round or schedule change as the signed-in user; returns
    (kind, message) to show in the settings ("success" or "error"), or None."""
    request = st.session_state.get("ranker_request")
    st.session_state["ranker_request"] = None
    if not request:
        return None
    try:
        if request["kind"] == "activate":
            version = promote_ranker(ctx.ws, request.get("version") or "", user=ctx.user,
                                     reason=request.get("reason") or "")
            return "success", f"{md(version.id)} now ranks {md(version.schema)}."
        if request["kind"] == "train":
            job = start_round(ctx.ws, request.get("schema") or "", user=ctx.user)
            return "success", (f"Ranker round job {job.id:d} started; its version and verdict "
                               "show here (Ranker rounds) when it ends.")
        every = set_ranker_schedule(ctx.ws, int(request.get("every") or 0), user=ctx.user)
        return "success", (f"The ranker retrains after {every:d} new labels." if every
                           else "The ranker no longer retrains by itself.")
    except CurationError as exc:
        return "error", md(exc)


def gate_verdict(manifest: Mapping[str, Any]) -> str:
    """The versions table's gate column: "promoted", or "kept: " and the gate's last reason
    (without repeating "kept as a candidate")."""
    gate = manifest.get("gate")
    if not isinstance(gate, dict):
        return ""
    reasons = gate.get("reasons") or []
    last = str(reasons[-1]).removeprefix("kept as a candidate").lstrip(": ") if reasons else ""
    return ("promoted" if gate.get("activated") else f"kept: {last}" if last else "kept")


def version_row(v: RankerVersion, state: ActiveRanker) -> dict[str, Any]:
    """One row of the versions table."""
    m = v.metrics
    return {"version": v.id, "active": state.ident == v.id, "model": v.manifest.get("kind", ""),
            "held-out NDCG@10": m.get("heldout", {}).get("ndcg@10"),
            "dev NDCG@10": m.get("dev", {}).get("ndcg@10"),
            "test NDCG@10": m.get("test", {}).get("ndcg@10"),
            "labels used": len(v.manifest.get("labels_used", []) or []),
            "learned from": learned_from(v.manifest),
            "gate": gate_verdict(v.manifest),
            "dense features": ", ".join(
                x for x in (v.manifest.get("dense") or "", "base" if v.manifest.get("base")
                            else "") if x) or "none",
            "model file": "cannot be used" if state.ident == v.id and state.problem
            else "present" if v.file.is_file() else "missing",
            "created": v.manifest.get("created_at", ""), "by": v.manifest.get("created_by", "")}


def version_rows(ctx: AppContext, schema: str,
                 state: ActiveRanker | None = None) -> tuple[list[dict], tuple[str, ...]]:
    """(one row per version of ``schema``, newest first; one line per damaged record)."""
    state = state or active_ranker(ctx.ws, schema)
    found = scan_versions(ctx.ws, schema)
    return [version_row(v, state) for v in reversed(found.versions)], found.problems


def round_rows(records: list[RoundRecord]) -> list[dict[str, Any]]:
    """The rounds table (newest first)."""
    rows = []
    for rec in records:
        held = rec.detail.get("heldout") or {}
        rows.append({"when": rec.started_at[:19].replace("T", " "),
                     "by": rec.started_by + (f" for {rec.on_behalf_of}"
                                             if rec.on_behalf_of else ""),
                     "trigger": rec.detail.get("trigger", ""), "labels": rec.labels,
                     "held-out queries": held.get("compared"),
                     "candidate NDCG@10": (held.get("candidate") or {}).get("ndcg@10"),
                     "compared with": held.get("against", ""),
                     "its NDCG@10": (held.get("reference") or {}).get("ndcg@10"),
                     "outcome": rec.outcome, "version": rec.version or "",
                     "why": "; ".join(rec.reasons)})
    return rows


def rounds_table(ctx: AppContext, schema: str) -> None:
    """The schema's last ranker rounds."""
    records = last_rounds(ctx.ws, schema, ROUNDS_SHOWN)
    st.markdown("**Ranker rounds**")
    if not records:
        st.caption("No ranker round yet: one runs after every "
                   f"{Rankers(ctx.ws).retrain_every():d} new labels, or when an admin starts it.")
        return
    st.caption(md(round_line(records[0])))
    st.dataframe(pd.DataFrame(round_rows(records)), hide_index=True, key="ranker_rounds",
                 width="stretch")


def ranker_section(ctx: AppContext, schema: str) -> None:
    """The learned ranker of ``schema``."""
    st.subheader("Learned ranker")
    message = handle_request(ctx)
    default = default_for(ctx.ws, schema)
    every = Rankers(ctx.ws).retrain_every()
    st.caption(f"Default ranking: {md(default.configuration)}, {md(default.reason)}. "
               + (f"Retrains after every {every:d} new labels; "
                  f"{Rankers(ctx.ws).labels_waiting(schema):d} wait for the next round."
                  if every else "Automatic retraining is off."))
    state = active_ranker(ctx.ws, schema)
    if state.problem:
        st.warning(md(state.notice(default.configuration)))
    rows, problems = version_rows(ctx, schema, state)
    for problem in problems:
        st.warning(md(f"Skipped a damaged ranker version: {problem}"))
    if not rows:
        st.info("No ranker version yet: the first round runs after the first labels, or an "
                "admin starts one below (or runs kbcurate rank train).")
    else:
        st.dataframe(pd.DataFrame(rows), hide_index=True, key="ranker_table", width="stretch")
    rounds_table(ctx, schema)
    if ctx.user.is_admin:
        settings(ctx, rows, every, message, open_=bool(state.problem))


def settings(ctx: AppContext, rows: list[dict], every: int, message: tuple[str, str] | None,
             *, open_: bool) -> None:
    """The admin's ranker settings; open while they show what a request did."""
    with st.expander("Ranker settings (admin)", expanded=open_ or message is not None,
                     key="ranker_settings"):
        if message is not None:
            (st.error if message[0] == "error" else st.success)(message[1])
        if rows:
            st.selectbox("Rank with this version (rollback, or promote a kept candidate; "
                         "below 20 held-out queries the gate waits for this)",
                         [r["version"] for r in rows], key="ranker_version")
            st.text_input("Reason (required, audited)", key="ranker_reason")
            st.button("Activate", key="ranker_activate", on_click=_request, args=("activate",))
        st.button("Train a new version now (in the background)", key="ranker_train",
                  on_click=_request, args=("train",))
        st.number_input("Retrain after this many new labels (0: never)", 0, 10_000, every,
                        step=5, key="ranker_every")
        st.button("Save", key="ranker_every_save", on_click=_request, args=("schedule",))
