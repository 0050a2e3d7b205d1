"""The suggestions panel of the Curate page: answer candidates found in the top abstracts.

The tool suggests, the curator decides: a candidate becomes a source-suggestion row (PMID, the
relation's slots, the answer, a required comment, who confirmed it) only by the curator's click.

What the panel shows (rules: :func:`curation.search.candidates.answer_candidates`): the
candidates named in a sentence with the query entities, one row per entity, flagged NEW (an
answer the KB lacks), pending / accepted / rejected (a source suggestion of it for this relation
awaits moderation or was moderated: never NEW again once moderated) or marked as a class /
generic therapy (never NEW), each with its supporting sentences; below them, in one caption, the
candidates only mentioned elsewhere in the abstracts.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_pages.common import AppContext, current_user, flash, short_hash, show_flash
from app_pages.safe import md
from curation.search.answer_classes import AnswerKind
from curation.search.candidates import Candidate, is_pmid, with_suggestions
from curation.search.cards import PUBMED_URL
from curation.search.session import SearchResult
from curation.search.suggestions import (
    SuggestionStatus,
    add_suggestion,
    list_suggestions,
    suggestions_csv,
)
from curation.store.relations import PartialRelation
from kb_sources.errors import CurationError
from kb_sources.schema import Schema

SHOWN = 15
#: Mentioned-only candidates named in the caption under the table.
MENTIONED_SHOWN = 10
#: Supporting sentences shown for the chosen candidate.
SENTENCES_SHOWN = 6
COLUMNS = ["candidate", "flag", "PubMed", "abstracts", "sentences", "PMIDs", "from"]
#: Column widths in pixels (the panel is narrow: the candidate stays pinned while the table
#: scrolls sideways); a PMID (up to 10 digits) is never cut.
COLUMN_CONFIG = {
    "candidate": st.column_config.TextColumn("candidate", width=115, pinned=True),
    "flag": st.column_config.TextColumn(
        "flag", width=70, help="NEW: a specific answer this relation lacks, named in a "
        "sentence with the query. pending / accepted / rejected: a source suggestion of it for "
        "this relation awaits moderation, or was accepted or rejected. class (a drug class: "
        "BRAF inhibitor; a gene family: ALDH, estrogen receptor; a disease class: cancer, "
        "malignancies) or generic (a generic therapy: chemotherapy): a kind of answer, never "
        "NEW"),
    "PubMed": st.column_config.LinkColumn(
        "PubMed", width=90, help="the best-ranked supporting abstract on PubMed",
        display_text=r"https://pubmed\.ncbi\.nlm\.nih\.gov/(\d+)/"),
    "abstracts": st.column_config.NumberColumn("abstracts", width="small",
                                               help="abstracts with a supporting sentence"),
    "sentences": st.column_config.NumberColumn("sentences", width="small"),
    "PMIDs": st.column_config.TextColumn("PMIDs", width="large"),
    "from": st.column_config.TextColumn("from", width="small"),
}


#: The flag column's word for a class or generic therapy (short: the panel is narrow).
KIND_FLAGS = {AnswerKind.CLASS: "class", AnswerKind.GENERIC_THERAPY: "generic"}


#: The flag column's word for a candidate with a source suggestion for this relation.
SUGGESTION_FLAGS = {SuggestionStatus.NEW: "pending", SuggestionStatus.ACCEPTED: "accepted",
                    SuggestionStatus.REJECTED: "rejected"}


def flag(candidate: Candidate) -> str:
    """What the flag column says: class or generic (therapy); else pending, accepted or
    rejected (the relation's source suggestion of it); else NEW, or nothing (a known answer)."""
    if candidate.kind.generic:
        return KIND_FLAGS[candidate.kind]
    if candidate.suggestion is not None:
        return SUGGESTION_FLAGS[candidate.suggestion]
    return "NEW" if candidate.new else ""


def candidates_frame(candidates: list[Candidate]) -> pd.DataFrame:
    """One row per candidate: flag, supporting abstracts and sentences, the first abstract as a
    PubMed link (an id that is no PMID gets no link) and every PMID."""
    return pd.DataFrame.from_records(
        [{"candidate": c.text, "flag": flag(c), "abstracts": c.count,
          "sentences": len(c.sentences),
          "PubMed": next((PUBMED_URL.format(pmid=p) for p in c.pmids if is_pmid(p)), None),
          "PMIDs": ", ".join(c.pmids), "from": "+".join(c.sources)} for c in candidates],
        columns=COLUMNS)


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


def _option_label(candidate: Candidate) -> str:
    mark = (candidate.kind.value if candidate.kind.generic else flag(candidate)) or (
        "" if candidate.with_query else "not with the query")
    return f"{candidate.text} ({candidate.count})" + (f" · {mark}" if mark else "")


def supporting_sentences(candidate: Candidate, pmid: str | None = None) -> None:
    """The sentences that name ``candidate`` with the query entities (those of ``pmid`` first),
    each after its PMID, as plain text (``st.text``: no markdown or HTML is parsed, so the
    abstract's own characters show as they are)."""
    if not candidate.sentences:
        st.caption(f"{md(candidate.text)} is mentioned in these abstracts, but in no sentence "
                   "with the query entities.")
        return
    ordered = sorted(candidate.sentences, key=lambda s: s.pmid != pmid)
    with st.expander(f"Sentences supporting {md(candidate.text)} ({len(ordered)})",
                     expanded=True, key=f"sugg_sent_{short_hash(candidate.key)}"):
        for support in ordered[:SENTENCES_SHOWN]:  # plain text: never parsed as markdown
            st.text(f"PMID {support.pmid} · {support.text}", width="stretch")
        if len(ordered) > SENTENCES_SHOWN:
            st.caption(f"and {len(ordered) - SENTENCES_SHOWN:d} more")


def _confirm_form(ctx: AppContext, schema: Schema, partial: PartialRelation,
                  candidates: list[Candidate]) -> None:
    by_key = {c.key: c for c in candidates}
    pick_key = f"sugg_pick_{short_hash(partial.query_key)}"
    if st.session_state.get(pick_key) not in by_key:
        st.session_state[pick_key] = candidates[0].key
    chosen = by_key[st.selectbox("Candidate", list(by_key), key=pick_key,
                                 format_func=lambda k: _option_label(by_key[k]))]
    pmids = [p for p in chosen.pmids if is_pmid(p)]
    if not pmids:
        supporting_sentences(chosen)
        st.caption("No PubMed abstract supports this candidate.")
        return
    suffix = short_hash(partial.query_key + chosen.key)
    pmid_key, comment_key = f"sugg_pmid_{suffix}", f"sugg_comment_{suffix}"
    pmid = st.selectbox("Supporting PMID", pmids, key=pmid_key)
    supporting_sentences(chosen, pmid)
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


def _mentioned(mentioned: list[Candidate]) -> None:
    if not mentioned:
        return
    names = ", ".join(f"{c.text} ({c.count})" for c in mentioned[:MENTIONED_SHOWN])
    more = len(mentioned) - MENTIONED_SHOWN
    st.caption(f"Also mentioned in these abstracts, but in no sentence with the query (not "
               f"suggested): {md(names)}" + (f" and {more:d} more" if more > 0 else ""))


def suggestions_panel(ctx: AppContext, schema: Schema, partial: PartialRelation,
                      result: SearchResult) -> None:
    """Candidates named with the query (flags, sentences, PMIDs); mentions; confirm; export."""
    st.markdown(f"**Suggested {md(schema.answer)}** in the top {len(result.docs)} abstracts")
    # the search may have run before a suggestion was added or moderated: flags as they stand
    candidates = with_suggestions(ctx.ws, schema.name, partial.query_key, result.candidates)
    suggested = [c for c in candidates if c.with_query][:SHOWN]
    mentioned = [c for c in candidates if not c.with_query]
    if not suggested:
        st.caption(f"No {md(schema.answer)} candidate named in a sentence with the query "
                   "entities in these abstracts.")
    else:
        st.dataframe(candidates_frame(suggested), hide_index=True, key="candidates_table",
                     width="stretch", column_config=COLUMN_CONFIG)
    _mentioned(mentioned)
    if suggested or mentioned:
        _confirm_form(ctx, schema, partial, suggested + mentioned[:MENTIONED_SHOWN])
    _saved(ctx, schema, partial)


def _saved(ctx: AppContext, schema: Schema, partial: PartialRelation) -> None:
    """This relation's source suggestions (every status) and their CSV export."""
    saved = list_suggestions(ctx.ws, schema=schema.name, query_key=partial.query_key)
    if not saved:
        return
    st.caption(f"{len(saved)} source suggestion(s) for this relation")
    st.dataframe(pd.DataFrame([{"PMID": s.pmid, schema.answer: s.answer, "status": s.status.value,
                                "comment": s.comment, "by": s.confirmed_by} for s in saved]),
                 hide_index=True, key="saved_suggestions", width="stretch",
                 column_config={"PMID": st.column_config.TextColumn("PMID", width=100)})
    st.download_button("Export suggestions (CSV)", key="sugg_export",
                       data=lambda: suggestions_csv(saved, ctx.ws.schemas()),
                       file_name="source_suggestions.csv", mime="text/csv",
                       on_click="ignore")
