"""kbcurate: the curator app (Streamlit). Thin: widgets, caching, calls into curation/.

Run with ``kbcurate serve --workspace DIR`` (or ``streamlit run app.py -- --workspace DIR``).
"""

from __future__ import annotations

import argparse
import os
import sys

import streamlit as st

from curation.commands import relations_frame
from curation.config import WORKSPACE_ENV
from curation.relations import list_partial_relations
from curation.templates import render_query
from curation.workspace import Workspace
from kb_sources.errors import CurationError


def _workspace_arg() -> str | None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--workspace")
    known, _ = parser.parse_known_args(sys.argv[1:])
    return known.workspace or os.environ.get(WORKSPACE_ENV)


@st.cache_resource(show_spinner=False)
def open_workspace(path: str) -> Workspace:
    """One workspace connection per process (WAL allows concurrent readers)."""
    return Workspace.open(path)


def init_state() -> None:
    """The one place session state is initialised."""
    st.session_state.setdefault("schema", "PO")
    st.session_state.setdefault("filter_text", "")
    st.session_state.setdefault("selected", 0)


def page_curate(ws: Workspace) -> None:
    schemas = ws.schemas()
    stats = ws.stats()
    names = [n for n in schemas if stats.relations_by_schema.get(n)] or list(schemas)
    schema_name = st.sidebar.selectbox("Relation schema", names, key="schema")
    schema = schemas[schema_name]
    st.sidebar.caption(schema.description)
    query = st.sidebar.text_input(f"Filter by {schema.query_slots[0]}", key="filter_text")
    filters = {schema.query_slots[0]: query} if query.strip() else {}
    rows = list_partial_relations(ws, schema.name, filters, limit=500)
    st.subheader(f"Partial relations ({schema.name}): {len(rows):,} shown")
    if not rows:
        st.info("No partial relation matches. Clear the filter or import a KB.")
        st.stop()
    st.dataframe(relations_frame(rows, schema.answer), hide_index=True, key="relations_table",
                 width="stretch")
    labels = [" / ".join(p.query[s][0].text for s in schema.query_slots if p.query.get(s))
              for p in rows]
    idx = st.selectbox("Pick a partial relation", range(len(rows)),
                       format_func=lambda i: labels[i], key="selected")
    picked = rows[idx]
    text = render_query(schema, picked.query).text
    st.text_input("Query (edit freely)", value=text, key=f"query_{picked.query_key}")
    st.caption(f"Known {schema.answer}: {', '.join(picked.answer_texts()) or 'none'} · "
               f"{len(picked.pmids)} cited PMIDs")


def main() -> None:
    st.set_page_config(page_title="kbcurate", layout="wide")
    st.title("kbcurate: KB curation assistant")
    init_state()
    path = _workspace_arg()
    if not path:
        st.info("No workspace: start with `kbcurate serve --workspace DIR` or set "
                f"{WORKSPACE_ENV}.")
        st.stop()
    try:
        ws = open_workspace(path)
        stats = ws.stats()
        st.sidebar.metric("Documents", f"{stats.documents:,}")
        st.sidebar.metric("KB relations", f"{stats.relations:,}")
        page_curate(ws)
    except CurationError as exc:
        st.error(str(exc))
        st.stop()


main()
