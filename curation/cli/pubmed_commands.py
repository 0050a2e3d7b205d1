"""``kbcurate pubmed``: search PubMed for a relation (``search``), show the Entrez query a
relation builds (``query``), show or set the workspace's NCBI contact (``settings``).

``search`` runs in this process (the app submits the same work as a ``pubmed_search`` job):
esearch, fetch the records the workspace lacks (cached in ``WS/cache/entrez``), import them in
one transaction, refresh the indexes and rank with the schema's default ranking
(:func:`curation.pubmed.search.search_pubmed`). ``--json`` prints ``{"pubmed_query", "count",
"fetched", "imported", "hits": [{"pmid", "rank", "score"}]}``.
"""

from __future__ import annotations

import argparse
import sys

from tqdm.auto import tqdm

from curation.cli.common import CLI_ADMIN, print_json, workspace_path
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.eutils import EUTILS_URL_ENV
from kb_sources.schema import Schema, get_schema

#: Ranked hits the plain-text output lists (``--json`` lists them all).
SHOWN = 10


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """The ``pubmed`` command and its actions."""
    p = sub.add_parser("pubmed", parents=[common], help="search PubMed for a relation (online)",
                       description=f"E-utilities at ${EUTILS_URL_ENV} (default NCBI's); contact "
                                   "email and API key from the options, $NCBI_EMAIL / "
                                   "$NCBI_API_KEY, or the workspace (pubmed settings)")
    psub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    s = psub.add_parser("search", parents=[common],
                        help="search PubMed, import the new abstracts, rank the union")
    _relation_args(s)
    s.add_argument("--query", help="an edited Entrez query instead of the built one")
    s.add_argument("--rank-text", help="the ranking's query text (default: the relation's "
                                       "templated question)")
    s.add_argument("--max", type=int, default=200, dest="max_hits",
                   help="PubMed ids to take, relevance order (default 200, at most 10,000)")
    s.add_argument("--email", help="contact email NCBI requires (default: $NCBI_EMAIL, else "
                                   "the workspace setting)")
    s.add_argument("--api-key", help="NCBI API key: 10 instead of 3 requests/s (default: "
                                     "$NCBI_API_KEY, else the workspace setting)")
    s.add_argument("--json", action="store_true", help="print JSON for scripts")
    q = psub.add_parser("query", parents=[common], help="show the Entrez query of a relation")
    _relation_args(q)
    q.add_argument("--json", action="store_true", help="print JSON for scripts")
    t = psub.add_parser("settings", parents=[common],
                        help="show or set the workspace's NCBI contact email and API key",
                        description="Setting a value is an admin action, audited as actor "
                                    "'cli'; the environment ($NCBI_EMAIL, $NCBI_API_KEY) "
                                    "overrides the workspace's values")
    t.add_argument("--email", help="new contact email")
    key = t.add_mutually_exclusive_group()
    key.add_argument("--api-key", help="new API key (never printed)")
    key.add_argument("--clear-api-key", action="store_true", help="forget the stored API key")


def _relation_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--schema", default="PO", help="relation schema (default PO)")
    p.add_argument("slots", nargs="+", metavar="SLOT=TEXT",
                   help="the relation's query entities, e.g. gene=BRAF variant=V600E")


def parse_slots(schema: Schema, values: list[str]) -> dict[str, str]:
    """``["gene=BRAF", "variant=V600E"]`` -> ``{"gene": "BRAF", "variant": "V600E"}``.

    Raises:
        CurationError: A value without ``=`` or an unknown slot (the message lists them).
    """
    out: dict[str, str] = {}
    for value in values:
        slot, eq, text = value.partition("=")
        if not eq or not text.strip():
            raise CurationError(f"{value!r} is not SLOT=TEXT; e.g. "
                                f"{schema.query_slots[0]}=BRAF")
        if slot.strip() not in schema.slot_names:
            raise CurationError(f"{schema.name} has no slot {slot.strip()!r}; its slots: "
                                f"{', '.join(schema.slot_names)}")
        out[slot.strip()] = text.strip()
    return out


def cmd_pubmed(args: argparse.Namespace) -> int:
    return {"search": _search, "query": _query, "settings": _settings}[args.action](args)


def _search(args: argparse.Namespace) -> int:
    from curation.pubmed.ncbi import ncbi_settings
    from curation.pubmed.search import SearchProgress, search_pubmed

    with Workspace.open(workspace_path(args)) as ws:
        schema = get_schema(args.schema, ws.schemas())
        slots = parse_slots(schema, args.slots)
        settings = ncbi_settings(ws, email=args.email, api_key=args.api_key)
        bar = tqdm(total=0, unit=" records", desc="PubMed", disable=args.quiet, file=sys.stderr)

        def show(p: SearchProgress) -> None:
            bar.total, bar.n = max(p.to_fetch, 1), min(p.fetched, max(p.to_fetch, 1))
            bar.set_description(f"PubMed: {p.stage}")
            bar.set_postfix_str(p.message(), refresh=True)

        try:
            result = search_pubmed(ws, schema, slots, settings=settings, actor="cli",
                                   query=args.query, max_hits=args.max_hits,
                                   rank_text=args.rank_text, progress=show)
        finally:
            bar.close()
    if args.json:
        print_json(result.to_json())
        return 0
    print(f"PubMed query: {result.pubmed_query}")
    print(f"found {result.count:,} in PubMed ({len(result.found):,} taken); fetched "
          f"{result.fetched:,}; imported {result.imported:,} new abstracts (search "
          f"#{result.search_id})")
    print(f"ranked by {result.ranking} (the schema's default: {result.configuration}); "
          f"top {min(SHOWN, len(result.hits))} of {len(result.hits):,}:")
    for hit in result.hits[:SHOWN]:
        print(f"  {hit.rank:>4}  {hit.pmid:<12} {hit.score:8.4f}"
              + ("  (PubMed hit)" if hit.from_pubmed else ""))
    return 0


def _query(args: argparse.Namespace) -> int:
    from curation.pubmed.query import build_pubmed_query

    with Workspace.open(workspace_path(args)) as ws:
        schema = get_schema(args.schema, ws.schemas())
        built = build_pubmed_query(ws, schema.name, parse_slots(schema, args.slots))
    if args.json:
        print_json({"pubmed_query": built.text,
                    "slots": [{"slot": s.slot, "forms": list(s.forms), "clause": s.clause,
                               "note": s.note} for s in built.slots]})
        return 0
    print(built.text)
    for s in built.slots:
        print(f"  {s.slot}: {len(s.forms)} forms" + (f" ({s.note})" if s.note else ""))
    return 0


def _settings(args: argparse.Namespace) -> int:
    from curation.pubmed.ncbi import ncbi_contact, set_ncbi_contact

    with Workspace.open(workspace_path(args)) as ws:
        api_key = "" if args.clear_api_key else args.api_key
        if args.email is not None or api_key is not None:
            set_ncbi_contact(ws, user=CLI_ADMIN, email=args.email, api_key=api_key)
        contact, _ = ncbi_contact(ws)
    print(f"NCBI contact: {contact.describe()}")
    return 0


HANDLERS = {"pubmed": cmd_pubmed}
