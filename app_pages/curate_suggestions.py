"""The suggestions panel of the Curate page: answer candidates found in the top abstracts.

The tool suggests, the curator decides: a candidate becomes a source-suggestion row (PMID, the
relation's slots, the answer, a required comment, who confirmed it) only by the curator's click.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_pages.common import AppContext, current_user, flash, short_hash, show_flash
from app_pages.safe import md
from curation.search.candidates import Candidate, is_pmid
from curation.search.session import SearchResult
from curation.search.suggestions import add_suggestion, list_suggestions, suggestions_csv
from curation.store.relations import PartialRelation
from kb_sources.errors import CurationError
from kb_sources.schema import Schema

SHOWN = 15


def candidates_frame(candidates: list[Candidate]) -> pd.DataFrame:
    return pd.DataFrame.from_records(
        [{"candidate": c.text, "abstracts": c.count, "new": "NEW" if c.new else "",
          "PMIDs": ", ".join(c.pmids[:6]) + (" ..." if c.count > 6 else ""),
          "from": "+".join(c.sources)} for c in candidates],
        columns=["candidate", "abstracts", "new", "PMIDs", "from"])


def _confirm(ctx: AppContext, schema: Schema, partial: PartialRelation,
             candidate: Candidate, keys: tuple[str, str]) -> None:
    pmid_key, comment_key = keys
    try:
        row = add_suggestion(ctx.ws, user=current_user(ctx.ws), schema=schema, partial=partial,
                             pmid=st.session_state.get(pmid_key) or "",
                             answer=candidate.text, answer_key=candidate.key,
                             comment=st.session_state.get(comment_key, ""))
    except CurationError as exc:
        flash("error", md(exc), where="suggestion")
        return
    st.session_state[comment_key] = ""
    flash("success", f"Source suggestion {row.id:d} saved: PMID {md(row.pmid)} for "
                     f"{md(row.answer)}.", where="suggestion")


def _confirm_form(ctx: AppContext, schema: Schema, partial: PartialRelation,
                  candidates: list[Candidate]) -> None:
    by_key = {c.key: c for c in candidates}
    pick_key = f"sugg_pick_{short_hash(partial.query_key)}"
    if st.session_state.get(pick_key) not in by_key:
        st.session_state[pick_key] = candidates[0].key
    chosen = by_key[st.selectbox(
        "Candidate", list(by_key), key=pick_key,
        format_func=lambda k: f"{by_key[k].text} ({by_key[k].count})"
                              + (" · NEW" if by_key[k].new else ""))]
    pmids = [p for p in chosen.pmids if is_pmid(p)]
    if not pmids:
        st.caption("No PubMed abstract supports this candidate.")
        return
    suffix = short_hash(partial.query_key + chosen.key)
    pmid_key, comment_key = f"sugg_pmid_{suffix}", f"sugg_comment_{suffix}"
    st.selectbox("Supporting PMID", pmids, key=pmid_key)
    st.text_area("Comment (required)", key=comment_key, height=70,
                 placeholder=comment_placeholder(schema, partial, chosen.text))
    st.button("Add source suggestion", key="sugg_add", type="primary", on_click=_confirm,
              args=(ctx, schema, partial, chosen, (pmid_key, comment_key)))
    show_flash("suggestion")  # the outcome right under the button


def comment_placeholder(schema: Schema, partial: PartialRelation, candidate: str) -> str:
    """The comment field's hint, in the words of the schema and the relation at hand."""
    entities = ", ".join(e.text for slot in schema.query_slots
                         for e in partial.query.get(slot, ())[:1])
    return (f"what the abstract shows about {candidate} as the {schema.answer} of {entities}, "
            "e.g. the sentence that says so")


def suggestions_panel(ctx: AppContext, schema: Schema, partial: PartialRelation,
                      result: SearchResult) -> None:
    """Candidates with counts and PMIDs, NEW when the KB lacks them; confirm one; export."""
    st.markdown(f"**Suggested {md(schema.answer)}** in the top {len(result.docs)} abstracts")
    candidates = list(result.candidates[:SHOWN])
    if not candidates:
        st.caption(f"No {md(schema.answer)} candidate found in these abstracts.")
    else:
        st.dataframe(candidates_frame(candidates), hide_index=True, key="candidates_table",
                     width="stretch")
        _confirm_form(ctx, schema, partial, candidates)
    saved = list_suggestions(ctx.ws, schema=schema.name, query_key=partial.query_key)
    if saved:
        st.caption(f"{len(saved)} source suggestion(s) for this relation")
        st.dataframe(pd.DataFrame([{"PMID": s.pmid, schema.answer: s.answer,
                                    "comment": s.comment, "by": s.confirmed_by}
                                   for s in saved]),
                     hide_index=True, key="saved_suggestions", width="stretch")
        st.download_button("Export suggestions (CSV)", key="sugg_export",
                           data=lambda: suggestions_csv(saved, ctx.ws.schemas()),
                           file_name="source_suggestions.csv", mime="text/csv",
                           on_click="ignore")
