"""Search PubMed for a relation (issue 37, item 1): the real client and service against the
loopback E-utilities of tests/eutils_server.py (nothing leaves the machine).

Covered: esearch -> only the PMIDs the workspace lacks -> efetch in batches of 200 (by WebEnv
when a batch is wholly new, else by PMID; an expired WebEnv falls back) through the cache ->
one import with the search's record -> refreshed indexes -> the union ranked by the schema's
default ranking; idempotence; an interrupted fetch imports nothing and resumes from the cache;
the rate limit; PubMed unreachable; the NCBI contact settings; the job (roles, progress, one per
relation); the CLI; the cards' "from PubMed" badge.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from app_helpers import build_app_workspace
from eutils_server import EutilsServer, Fault, eutils_server_fixture, synthetic_corpus  # noqa: F401

from curation.access.users import PermissionDenied, Role, User
from curation.cli.main import main
from curation.jobs.queue import get_job, run_job
from curation.pubmed.jobs import check_pubmed_params, submit_pubmed_search
from curation.pubmed.ncbi import ncbi_contact, ncbi_settings, set_ncbi_contact
from curation.pubmed.query import build_pubmed_query
from curation.pubmed.search import SearchProgress, search_pubmed
from curation.search.cards import RankedDoc, card_html, with_fetch_dates
from curation.store.documents import Documents
from curation.store.importer import import_items
from curation.store.pubmed_hits import PubmedHits
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.fetch import EntrezSettings, FetchError, fetch_pubmed
from kb_sources.types import Document

BRAF = {"gene": "BRAF", "variant": "V600E"}
CURATOR, ANNOTATOR, ADMIN = (User("cora", Role.CURATOR), User("ann", Role.ANNOTATOR),
                             User("root", Role.ADMIN))


@pytest.fixture
def ws(tmp_path: Path):
    """CIViC, UniProt and PubTator samples and the app's abstracts, BM25 built."""
    with Workspace.open(build_app_workspace(tmp_path / "ws")) as opened:
        yield opened


def settings(ws: Workspace, server: EutilsServer, **kwargs: object) -> EntrezSettings:
    return EntrezSettings(email="cora@lab.org", base_url=server.base_url,
                          cache_dir=ws.root / "cache" / "entrez", **kwargs)


def test_search_imports_what_the_workspace_lacks_and_ranks_the_union(ws, eutils_server):
    seen: list[SearchProgress] = []
    result = search_pubmed(ws, ws.schemas()["PO"], BRAF, settings=settings(ws, eutils_server),
                           actor="cora", progress=seen.append)
    built = build_pubmed_query(ws, "PO", BRAF).text
    assert result.pubmed_query == built  # the relation's query, built from its slots
    assert eutils_server.requests("esearch.fcgi")[0].params["term"] == [built]
    # PubMed's ten BRAF V600E records; 25265492 was in the workspace already
    assert (result.count, len(result.found), result.fetched, result.imported) == (10, 10, 9, 9)
    (efetch,) = eutils_server.requests("efetch.fcgi")
    assert sorted(efetch.ids()) == sorted(p for p in result.found if p != "25265492")
    assert [p.stage for p in seen] == ["found", "fetched", "fetched", "imported", "indexed",
                                       "ranked"]
    assert seen[-1].message() == "found 10 in PubMed (10 taken) · fetched 9 of 9 new · " \
                                 "imported 9 · ranked"
    rows = Documents(ws).rows_by_id(["99200001", "25265492"])
    assert rows["99200001"].title == "Vemurafenib in melanoma with the BRAF V600E mutation."
    sources = dict(ws.conn.execute("SELECT doc_id, source FROM documents WHERE doc_id IN "
                                   "('99200001', '25265492')").fetchall())
    assert sources == {"99200001": "pubmed", "25265492": "jsonl"}
    # the union, ranked by the default (bm25 + rerank): workspace and PubMed documents together
    assert result.ranking == "bm25+rerank" and result.configuration == "bm25+rerank"
    ranked = {h.pmid: h for h in result.hits}
    assert {"99200001", "90100001"} <= set(ranked)  # a PubMed hit, a workspace-only abstract
    assert ranked["99200001"].from_pubmed and not ranked["90100001"].from_pubmed
    assert [h.rank for h in result.hits] == list(range(1, len(result.hits) + 1))
    (search,) = PubmedHits(ws).searches("PO")
    assert (search.actor, search.hit_count, search.fetched, search.imported) == ("cora", 10, 9, 9)
    dates = PubmedHits(ws).fetch_dates(result.found)
    assert set(dates) == set(result.found) - {"25265492"}  # only what this search imported
    assert (ws.root / "cache/entrez/pubmed/99200001.xml").is_file()


def test_a_second_search_imports_nothing_and_fetches_nothing(ws, eutils_server):
    first = search_pubmed(ws, ws.schemas()["PO"], BRAF, settings=settings(ws, eutils_server),
                          actor="cora", query='"BRAF"[tiab] AND "V600E"[tiab]')
    again = search_pubmed(ws, ws.schemas()["PO"], BRAF, settings=settings(ws, eutils_server),
                          actor="cora", query='"BRAF"[tiab] AND "V600E"[tiab]')
    assert (first.imported, again.fetched, again.imported) == (9, 0, 0)
    assert len(eutils_server.requests("efetch.fcgi")) == 1  # the second asked esearch only
    assert [s.imported for s in PubmedHits(ws).searches("PO")] == [0, 9]
    assert again.hits == first.hits


def test_a_built_dense_index_is_refreshed_encoding_only_the_new_abstracts(
        ws, eutils_server, tiny_model_path, monkeypatch):
    from curation.search.indexing import get_index, index_ready
    from curation.store.models import Models
    from retrievers.encoder import Encoder

    version = Models(ws).register(schema="PO", recipe="edel", base_model="tiny",
                                  model_dir=tiny_model_path, created_by="root",
                                  manifest={"max_seq_length": 32})
    Models(ws).activate(version.id, ADMIN, reason="test")
    get_index(ws, "dense", {"model": version.id}, progress=False)
    encoded: list[int] = []
    original = Encoder.encode_documents

    def counting(self, texts, **kwargs):
        encoded.append(len(texts))
        return original(self, texts, **kwargs)

    monkeypatch.setattr(Encoder, "encode_documents", counting)
    result = search_pubmed(ws, ws.schemas()["PO"], BRAF, settings=settings(ws, eutils_server),
                           actor="cora", query='"BRAF"[tiab] AND "V600E"[tiab]')
    assert sum(encoded) == result.imported == 9  # the cached vectors of the rest were reused
    assert index_ready(ws, "dense", {"model": version.id})
    assert index_ready(ws, "bm25")


@pytest.fixture
def big(monkeypatch: pytest.MonkeyPatch):
    """450 synthetic BRAF V600E records (three efetch batches)."""
    with EutilsServer(synthetic_corpus(450)) as server:
        monkeypatch.setenv("KBCURATE_EUTILS_URL", server.base_url)
        yield server


def test_new_batches_go_by_webenv_known_ones_by_pmid(ws, big):
    cached = settings(ws, big)
    # one record of the third batch in the cache (equal scores: higher PMIDs first, so last)
    list(fetch_pubmed(["98000000"], cached))
    result = search_pubmed(ws, ws.schemas()["PO"], BRAF, settings=cached, actor="cora",
                           query="BRAF AND V600E", max_hits=450)
    assert (result.count, result.fetched, result.imported) == (450, 450, 450)
    efetches = big.requests("efetch.fcgi")[1:]
    assert [(r.params.get("retstart"), len(r.ids())) for r in efetches] == [
        (["0"], 0), (["200"], 0), (None, 49)]  # batch 3: by PMID, without the cached one
    assert [r.method for r in efetches] == ["GET", "GET", "GET"]
    assert efetches[0].params["WebEnv"] == ["MCID_fake0001"]


def test_an_expired_webenv_falls_back_to_pmids(ws, big):
    big.faults.append(Fault("error", endpoint="efetch.fcgi", message="Unable to obtain query #1"))
    result = search_pubmed(ws, ws.schemas()["PO"], BRAF, settings=settings(ws, big),
                           actor="cora", query="BRAF AND V600E", max_hits=250)
    assert result.imported == 250
    efetches = big.requests("efetch.fcgi")
    assert ["WebEnv" in r.params for r in efetches] == [True, False, True]
    assert [len(r.ids()) for r in efetches] == [0, 200, 0]
    assert efetches[1].method == "POST"  # 200 ids


def test_an_interrupted_fetch_imports_nothing_and_resumes_from_the_cache(ws, big):
    before = Documents(ws).counts()
    # the first batch arrives, the second fails three times (max_retries=2)
    big.faults += [Fault("slow", endpoint="efetch.fcgi", seconds=0.0),
                   *[Fault("status", endpoint="efetch.fcgi", code=503)] * 3]
    quick = settings(ws, big, max_retries=2, backoff=0.01)
    with pytest.raises(FetchError, match=r"efetch.fcgi failed after 3 attempts \(HTTP Error "
                       r"503.*try again later"):
        search_pubmed(ws, ws.schemas()["PO"], BRAF, settings=quick, actor="cora",
                      query="BRAF AND V600E", max_hits=450)
    assert Documents(ws).counts() == before  # the first batch was fetched, none imported
    assert PubmedHits(ws).searches() == []
    assert len(list((ws.root / "cache/entrez/pubmed").iterdir())) == 200
    big.log.clear()
    result = search_pubmed(ws, ws.schemas()["PO"], BRAF, settings=quick, actor="cora",
                           query="BRAF AND V600E", max_hits=450)
    assert result.imported == 450
    assert [r.params.get("retstart") for r in big.requests("efetch.fcgi")] == [["200"], ["400"]]


def test_requests_stay_under_three_per_second(ws, big):
    search_pubmed(ws, ws.schemas()["PO"], BRAF, settings=settings(ws, big), actor="cora",
                  query="BRAF AND V600E", max_hits=450)
    times = [r.at for r in big.log]
    assert len(times) == 4  # esearch + three efetch batches
    # sent 0.367 s apart by the shared throttle (arrival times jitter by a few ms; unthrottled,
    # the four would arrive within milliseconds)
    assert min(b - a for a, b in zip(times, times[1:], strict=False)) > 0.25
    assert big.max_rate(window=0.9) <= 3


def test_pubmed_unreachable_is_one_line_and_changes_nothing(ws):
    before = Documents(ws).counts()
    down = EntrezSettings(email="cora@lab.org", base_url="http://127.0.0.1:9/", max_retries=1,
                          backoff=0.01, timeout=2)
    with pytest.raises(FetchError, match=r"^E-utilities esearch.fcgi failed after 2 attempts "
                       r"\(<urlopen error \[Errno 111\] Connection refused>\)\. Fix: check the "
                       r"network connection or try again later$"):
        search_pubmed(ws, ws.schemas()["PO"], BRAF, settings=down, actor="cora")
    assert Documents(ws).counts() == before and PubmedHits(ws).searches() == []


def test_ncbi_contact_option_then_environment_then_workspace(ws, monkeypatch):
    monkeypatch.delenv("NCBI_EMAIL", raising=False)
    monkeypatch.delenv("NCBI_API_KEY", raising=False)
    with pytest.raises(CurationError, match="NCBI needs a contact email: pass --email, set "
                       "NCBI_EMAIL, or ask an admin"):
        ncbi_settings(ws)
    with pytest.raises(PermissionDenied, match="needs the admin role; cora"):
        set_ncbi_contact(ws, user=CURATOR, email="cora@lab.org")
    set_ncbi_contact(ws, user=ADMIN, email="lab@lab.org", api_key="SECRETKEY")
    got = ncbi_settings(ws)
    assert (got.email, got.api_key, got.requests_per_second) == ("lab@lab.org", "SECRETKEY", 10)
    assert got.cache_dir == ws.root / "cache" / "entrez"
    monkeypatch.setenv("NCBI_EMAIL", "env@lab.org")
    assert ncbi_settings(ws).email == "env@lab.org"
    assert ncbi_settings(ws, email="opt@lab.org").email == "opt@lab.org"
    contact, _ = ncbi_contact(ws)
    assert contact.describe() == "env@lab.org (environment), API key from the workspace"
    audit = [(e.actor, e.object_id, e.after_value()) for e in ws.audit_log("setting")]
    assert ("root", "ncbi.api_key", {"ncbi.api_key": "set"}) in audit
    assert "SECRETKEY" not in json.dumps([a[2] for a in audit])


def test_the_job_reports_progress_and_only_curators_start_it(ws, eutils_server, monkeypatch):
    monkeypatch.setenv("NCBI_EMAIL", "cora@lab.org")
    schema = ws.schemas()["PO"]
    with pytest.raises(PermissionDenied, match="Searching PubMed needs the curator or admin "
                       "role; ann"):
        submit_pubmed_search(ws, schema, BRAF, user=ANNOTATOR)
    job = submit_pubmed_search(ws, schema, BRAF, user=CURATOR, start=False, max_hits=5)
    assert submit_pubmed_search(ws, schema, BRAF, user=CURATOR, start=False).id == job.id
    assert "NCBI" not in json.dumps(job.params)  # the contact is read when the job runs
    done = run_job(ws, job.id)
    assert done.status.value == "done", done.error
    assert done.message == ("found 10 in PubMed (5 taken) · fetched 5 of 5 new · imported 5 · "
                            "ranked")
    assert set(done.result) >= {"pubmed_query", "count", "fetched", "imported", "hits",
                                "search_id", "ranking"}
    assert (done.result["count"], done.result["imported"]) == (10, 5)
    assert PubmedHits(ws).searches()[0].actor == "cora"


def test_a_failed_job_keeps_the_error_in_one_line(ws, eutils_server, monkeypatch):
    monkeypatch.setenv("NCBI_EMAIL", "cora@lab.org")
    eutils_server.faults.append(Fault("error", message="Search Backend failed: timeout"))
    job = submit_pubmed_search(ws, ws.schemas()["PO"], BRAF, user=CURATOR, start=False)
    failed = get_job(ws, run_job(ws, job.id).id)
    assert failed.status.value == "failed"
    assert "answered with an error: 'Search Backend failed: timeout'" in failed.error
    assert "\n" not in failed.error


@pytest.mark.parametrize("params,message", [
    ({"schema": "PO", "slots": {"drug": "x"}}, "must fill at least one of gene, variant"),
    ({"schema": "PO", "slots": ["BRAF"]}, "slots must map slot names to entity texts"),
    ({"schema": "PO", "slots": BRAF, "max_hits": 0}, "max_hits must be a whole number"),
    ({"schema": "PO", "slots": BRAF, "query": "x" * 5000}, "query must be text of at most"),
    ({"schema": "NOPE", "slots": BRAF}, "NOPE"),
])
def test_job_parameters_are_checked(ws, params, message):
    with pytest.raises(CurationError, match=message):
        check_pubmed_params(ws, params)


def test_cli_search_json_and_one_line_errors(ws, eutils_server, capsys, monkeypatch):
    monkeypatch.delenv("NCBI_EMAIL", raising=False)
    root = str(ws.root)
    ws.close()
    code = main(["pubmed", "search", "-w", root, "--schema", "PO", "gene=BRAF", "variant=V600E",
                 "--email", "cora@lab.org", "--max", "4", "--json", "-q",
                 "--query", '"BRAF"[tiab] AND "V600E"[tiab]'])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and list(out) == ["pubmed_query", "count", "fetched", "imported", "hits"]
    assert (out["pubmed_query"], out["count"], out["fetched"]) == (
        '"BRAF"[tiab] AND "V600E"[tiab]', 10, 4)
    assert set(out["hits"][0]) == {"pmid", "rank", "score"} and out["hits"][0]["rank"] == 1
    eutils_server.faults.append(Fault("error", message="Invalid query syntax"))
    code = main(["pubmed", "search", "-w", root, "gene=BRAF", "--email", "cora@lab.org", "-q"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("error: E-utilities esearch.fcgi: E-utilities answered with an "
                          "error: 'Invalid query syntax'")
    code = main(["pubmed", "search", "-w", root, "colour=red", "--email", "cora@lab.org"])
    assert code == 2 and "PO has no slot 'colour'" in capsys.readouterr().err
    assert main(["pubmed", "settings", "-w", root, "--email", "lab@lab.org"]) == 0
    assert capsys.readouterr().out == ("NCBI contact: lab@lab.org (workspace), no API key "
                                       "(3 requests/s)\n")


def test_cards_of_fetched_abstracts_say_from_pubmed_escaped():
    doc = RankedDoc("99200001", "T", "A", 2012, "", 1.0, 1, False, (), "bm25")
    (marked,) = with_fetch_dates([doc], {"99200001": "2026-02-01T10:00:00+00:00"})
    assert '<span class="kb-badge kb-pubmed">from PubMed, 2026-02-01</span>' in \
        card_html(marked, "")
    assert "from PubMed" not in card_html(doc, "")
    hostile = RankedDoc("1", "T", "A", None, "", 1.0, 1, False, (), "bm25",
                        from_pubmed="<b>x</b>")
    assert "from PubMed, &lt;b&gt;x&lt;/b&gt;</span>" in card_html(hostile, "")


def test_pubmed_hits_answer_the_same_on_postgresql(tmp_path, pg_url):
    got = {}
    for engine, url in (("sqlite", None), ("postgresql", pg_url)):
        with Workspace.init(tmp_path / engine, store_url=url) as store:
            hits = PubmedHits(store)
            first = hits.record(actor="ann", schema="PO", query_key="k", pubmed_query="q",
                                hit_count=3, pmids=["3", "1", "2", "1"], fetched=2,
                                imported=["1", "2"], at="2026-01-01T00:00:00+00:00")
            hits.record(actor="bob", schema="PO", query_key="k", pubmed_query="q", hit_count=3,
                        pmids=["2", "4"], fetched=1, imported=["4"],
                        at="2026-02-01T00:00:00+00:00")
            import_items(store, [Document(p, f"T{p}", "A", "pubmed") for p in ("1", "2", "4")],
                         reader="test", path="t", progress=False)
            hits.record(actor="bob", schema="PO", query_key="other", pubmed_query="q",
                        hit_count=1, pmids=["4"], fetched=0, imported=[])
            got[engine] = (hits.hits(first), hits.fetch_dates(["1", "2", "3", "4"]),
                           [(s.actor, s.imported) for s in hits.searches("PO", "k")],
                           hits.relation_documents("PO", "k"))
    assert got["sqlite"] == got["postgresql"]
    # the relation's hits in the workspace (3 was never fetched), by best PubMed rank (issue 38:
    # the screening queue adds them to the first stages' candidates)
    assert got["sqlite"][3] == ["2", "1", "4"]  # 1 and 4 tie at rank 2
    assert got["sqlite"] == (
        [("3", 1, None), ("1", 2, "2026-01-01T00:00:00+00:00"),
         ("2", 3, "2026-01-01T00:00:00+00:00")],
        {"1": "2026-01-01T00:00:00+00:00", "2": "2026-01-01T00:00:00+00:00",
         "4": "2026-02-01T00:00:00+00:00"},
        [("bob", 1), ("ann", 2)], ["2", "1", "4"])
