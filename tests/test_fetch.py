"""Tests of the online fetchers (kb_sources.fetch, kb_sources.eutils, kb_sources.eutils_http)
against local stand-ins for E-utilities: a stub that answers recorded responses
(tests/fixtures/eutils/) and records every request, and the fake E-utilities of
tests/eutils_server.py (esearch/efetch over a fixture corpus, with fault modes). Every request
goes to ``EntrezSettings.base_url`` (default ``$KBCURATE_EUTILS_URL``); nothing leaves the
machine. Retries and throttle waits run on a fake clock where the test counts them. The
hostile-server cases of issue 42 are in tests/test_eutils_hardening.py.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from Bio import Entrez
from eutils_server import EutilsServer, Fault, eutils_server_fixture  # noqa: F401 (fixture)

from kb_sources.errors import InputFormatError
from kb_sources.fetch import (
    EFETCH_BATCH,
    EUTILS_BASE_URL,
    EntrezSettings,
    EutilsError,
    FetchError,
    SearchHistory,
    Throttle,
    download_civic_nightly,
    elink_citations,
    esearch,
    fetch_pubmed,
    fetch_pubmed_history,
)
from kb_sources.pubmed_xml import read_pubmed_xml

Reply = tuple[int, bytes]


@dataclass
class Request:
    path: str
    params: dict[str, list[str]]
    method: str = "GET"


@dataclass
class StubServer:
    """What the fake E-utilities answers, and what it was asked."""

    base_url: str = ""
    content_type: str = "text/xml; charset=UTF-8"  # what NCBI sends with retmode=xml
    requests: list[Request] = field(default_factory=list)
    queued: list[Reply] = field(default_factory=list)  # answered first, in order
    routes: dict[str, Callable[[Request], Reply]] = field(default_factory=dict)

    def reply(self, request: Request) -> Reply:
        self.requests.append(request)
        if self.queued:
            return self.queued.pop(0)
        route = self.routes.get(request.path)
        return route(request) if route else (404, b"no such endpoint")

    def ids(self, endpoint: str) -> list[list[str]]:
        """The ids sent in each request to ``endpoint``."""
        return [_ids(r) for r in self.requests if r.path.endswith(endpoint)]


def _ids(request: Request) -> list[str]:
    return [i for value in request.params.get("id", []) for i in value.split(",")]


def _synthetic_efetch(request: Request) -> Reply:
    articles = "".join(
        f"<PubmedArticle><MedlineCitation><PMID Version=\"1\">{pmid}</PMID><Article>"
        f"<ArticleTitle>Title {pmid}.</ArticleTitle></Article></MedlineCitation></PubmedArticle>\n"
        for pmid in _ids(request) if pmid != "404"  # PMID 404 "does not exist"
    )
    body = f'<?xml version="1.0" ?>\n<PubmedArticleSet>\n{articles}</PubmedArticleSet>'
    return 200, body.encode()


@pytest.fixture
def eutils(monkeypatch: pytest.MonkeyPatch) -> Iterator[StubServer]:
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    stub = StubServer(routes={"/eutils/efetch.fcgi": _synthetic_efetch})

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            self._answer(self.rfile.read(length).decode(), "POST")

        def do_GET(self) -> None:
            self._answer(urlsplit(self.path).query, "GET")

        def _answer(self, query: str, method: str) -> None:
            request = Request(urlsplit(self.path).path, parse_qs(query), method)
            status, body = stub.reply(request)
            self.send_response(status)
            self.send_header("Content-Type", stub.content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    stub.base_url = f"http://127.0.0.1:{server.server_address[1]}/eutils/"
    yield stub
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


class FakeClock:
    """A monotonic clock that only moves when someone sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _settings(stub: StubServer | EutilsServer, **kwargs: object) -> EntrezSettings:
    """Settings for tests that talk to ``stub``."""
    return EntrezSettings(email="curator@example.org", base_url=stub.base_url, **kwargs)


def _throttle(settings: EntrezSettings, clock: FakeClock) -> Throttle:
    return Throttle.for_settings(settings, clock=clock, sleep=clock.sleep)


# --- throttle --------------------------------------------------------------------------------

def test_throttle_spaces_requests_three_per_second(clock: FakeClock) -> None:
    throttle = Throttle(3, clock=clock, sleep=clock.sleep)
    times = []
    for _ in range(4):
        throttle.wait()
        times.append(clock.now)
    assert [round(t - times[0], 6) for t in times] == [0, 0.333333, 0.666667, 1.0]


def test_throttle_does_not_sleep_when_requests_are_spread(clock: FakeClock) -> None:
    throttle = Throttle(3, clock=clock, sleep=clock.sleep)
    throttle.wait()
    clock.now += 5
    throttle.wait()
    assert clock.sleeps == []


def test_throttles_sharing_a_file_take_turns(tmp_path: Path, clock: FakeClock) -> None:
    """Two throttles on one lock file (as two processes would be) keep the spacing together."""
    shared = tmp_path / "cache" / ".throttle"
    first, second = (Throttle(3, clock=clock, sleep=clock.sleep, shared_file=shared)
                     for _ in range(2))
    first.wait()
    second.wait()
    first.wait()
    assert clock.sleeps == pytest.approx([1 / 3, 1 / 3])
    assert float(shared.read_text()) == pytest.approx(clock.now)  # the last request's time


@pytest.mark.parametrize(("text", "sleeps"), [
    ("not a time", []),  # unreadable: no wait
    ("99999999999.5", [1 / 3]),  # far ahead (a wall clock set back): one interval at most
])
def test_shared_throttle_file_with_odd_content(tmp_path: Path, clock: FakeClock, text: str,
                                               sleeps: list[float]) -> None:
    shared = tmp_path / ".throttle"
    shared.write_text(text)
    Throttle(3, clock=clock, sleep=clock.sleep, shared_file=shared).wait()
    assert clock.sleeps == pytest.approx(sleeps)


def test_throttle_keeps_to_its_process_when_the_file_cannot_be_made(
        tmp_path: Path, clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "a file").write_text("")
    throttle = Throttle(3, clock=clock, sleep=clock.sleep,
                        shared_file=tmp_path / "a file" / ".throttle")
    with caplog.at_level(logging.WARNING, logger="kb_sources.eutils"):
        throttle.wait()
        throttle.wait()
    assert clock.sleeps == pytest.approx([1 / 3])
    assert "cannot share the E-utilities rate limit through" in caplog.text
    assert "keeping it for this process only" in caplog.text


def test_settings_share_the_throttle_through_the_cache_folder(tmp_path: Path) -> None:
    assert Throttle.for_settings(EntrezSettings(email="a@b.org", cache_dir=tmp_path)
                                 ).shared_file == tmp_path / ".throttle"
    assert Throttle.for_settings(EntrezSettings(email="a@b.org")).shared_file is None


def test_rate_follows_the_api_key_with_a_margin() -> None:
    assert Throttle.for_settings(EntrezSettings(email="a@b.org")).interval == \
        pytest.approx(1.1 / 3)
    assert Throttle.for_settings(EntrezSettings(email="a@b.org", api_key="K")).interval == \
        pytest.approx(0.11)


def test_settings_need_an_email() -> None:
    with pytest.raises(FetchError, match="EntrezSettings.email is ''.*NCBI requires one"):
        EntrezSettings(email="")


# --- efetch ----------------------------------------------------------------------------------

def test_recorded_efetch_response(eutils: StubServer, clock: FakeClock,
                                  fixtures_dir: Path) -> None:
    recorded = (fixtures_dir / "eutils/efetch_pubmed.xml").read_bytes()
    eutils.routes["/eutils/efetch.fcgi"] = lambda request: (200, recorded)
    settings = _settings(eutils)
    docs = list(fetch_pubmed([90000031, "90000032", "90000031"], settings,
                             throttle=_throttle(settings, clock)))
    assert [d.doc_id for d in docs] == ["90000031", "90000032"]
    assert docs[0].title == "ALK fusions predict crizotinib response."
    assert docs[0].abstract == "Crizotinib was active in ALK-rearranged lung cancer."
    assert (docs[0].year, docs[0].references, docs[0].source) == (2020, ("20979469",),
                                                                  "pubmed-efetch")
    (request,) = eutils.requests
    assert (request.path, request.method) == ("/eutils/efetch.fcgi", "GET")
    assert request.params == {"db": ["pubmed"], "retmode": ["xml"], "id": ["90000031,90000032"],
                              "tool": ["kbcurate"], "email": ["curator@example.org"]}


def test_batches_of_200(eutils: StubServer, clock: FakeClock) -> None:
    pmids = [str(100_000 + i) for i in range(450)]
    settings = _settings(eutils)
    docs = list(fetch_pubmed(pmids, settings, throttle=_throttle(settings, clock)))
    assert [d.doc_id for d in docs] == pmids
    assert [len(batch) for batch in eutils.ids("efetch.fcgi")] == [EFETCH_BATCH, EFETCH_BATCH, 50]
    assert eutils.ids("efetch.fcgi")[2] == pmids[400:]
    assert [r.method for r in eutils.requests] == ["POST", "POST", "GET"]  # POST from 200 ids
    assert clock.sleeps == pytest.approx([1.1 / 3, 1.1 / 3])  # throttled between the requests


def test_cache_hit_makes_no_request(eutils: StubServer, tmp_path: Path,
                                    caplog: pytest.LogCaptureFixture) -> None:
    settings = _settings(eutils, cache_dir=tmp_path / "cache")
    with caplog.at_level(logging.WARNING, logger="kb_sources.fetch"):
        first = list(fetch_pubmed(["11", "12", "404"], settings))
    assert len(eutils.requests) == 1 and [d.doc_id for d in first] == ["11", "12"]
    assert "PubMed returned no record for 1 PMID(s): 404" in caplog.text
    cached = tmp_path / "cache/pubmed/11.xml"
    assert list(read_pubmed_xml(cached))[0].title == "Title 11."
    assert sorted(p.name for p in (tmp_path / "cache/pubmed").iterdir()) == ["11.xml", "12.xml"]

    again = list(fetch_pubmed(["11", "12"], settings))
    assert len(eutils.requests) == 1  # the server saw no second request
    assert again == first

    list(fetch_pubmed(["12", "13", "404"], settings))
    assert eutils.ids("efetch.fcgi")[-1] == ["13", "404"]  # only the misses are fetched


def test_retry_after_503(eutils: StubServer, clock: FakeClock) -> None:
    eutils.queued = [(503, b"Service Unavailable"), (502, b"Bad Gateway")]
    settings = _settings(eutils, backoff=2.0)
    docs = list(fetch_pubmed(["21"], settings, throttle=_throttle(settings, clock)))
    assert [d.doc_id for d in docs] == ["21"]
    assert len(eutils.requests) == 3
    assert clock.sleeps == [2.0, 4.0]  # exponential backoff; the throttle interval is covered


def test_gives_up_after_max_retries(eutils: StubServer, clock: FakeClock) -> None:
    eutils.queued = [(503, b"busy")] * 5
    settings = _settings(eutils, max_retries=2)
    with pytest.raises(FetchError, match=r"E-utilities efetch.fcgi failed after 3 attempts "
                       r"\(HTTP Error 503.*try again later"):
        list(fetch_pubmed(["21"], settings, throttle=_throttle(settings, clock)))
    assert len(eutils.requests) == 3


def test_client_error_is_not_retried(eutils: StubServer, clock: FakeClock) -> None:
    eutils.queued = [(400, b"bad request")]
    settings = _settings(eutils)
    with pytest.raises(FetchError, match="efetch.fcgi failed with HTTP 400"):
        list(fetch_pubmed(["21"], settings, throttle=_throttle(settings, clock)))
    assert len(eutils.requests) == 1


def test_api_key_is_sent_and_raises_the_rate(eutils: StubServer, clock: FakeClock) -> None:
    settings = _settings(eutils, api_key="SECRET123")
    pmids = [str(i) for i in range(1, 402)]
    list(fetch_pubmed(pmids, settings, throttle=_throttle(settings, clock)))
    assert {r.params["api_key"][0] for r in eutils.requests} == {"SECRET123"}
    assert clock.sleeps == pytest.approx([0.11, 0.11])


def test_identity_comes_from_the_settings_not_biopython_globals(
        eutils: StubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Entrez, "email", "global@example.org")
    monkeypatch.setattr(Entrez, "api_key", "GLOBALKEY")
    monkeypatch.setattr(Entrez, "tool", "biopython")
    list(fetch_pubmed(["5"], _settings(eutils, tool="kbtest")))
    (request,) = eutils.requests
    assert request.params["email"] == ["curator@example.org"]
    assert request.params["tool"] == ["kbtest"]
    assert "api_key" not in request.params  # settings without a key send none


def test_library_leaves_biopython_globals_alone(eutils: StubServer, fixtures_dir: Path) -> None:
    recorded = (fixtures_dir / "eutils/elink_refs.xml").read_bytes()
    eutils.routes["/eutils/elink.fcgi"] = lambda request: (200, recorded)
    before = (Entrez.email, Entrez.api_key, Entrez.tool)
    list(fetch_pubmed(["5"], _settings(eutils, api_key="K")))
    list(elink_citations(["5"], _settings(eutils, api_key="K")))
    assert (Entrez.email, Entrez.api_key, Entrez.tool) == before


def test_text_plain_answer_is_read_as_bytes(eutils: StubServer) -> None:
    eutils.content_type = "text/plain; charset=UTF-8"  # Bio.Entrez wrapped these as text
    body = ('<?xml version="1.0" ?>\n<PubmedArticleSet><PubmedArticle><MedlineCitation>'
            '<PMID Version="1">7</PMID><Article><ArticleTitle>β-catenin in tumours.'
            '</ArticleTitle></Article></MedlineCitation></PubmedArticle></PubmedArticleSet>')
    eutils.queued = [(200, body.encode())]
    (doc,) = fetch_pubmed(["7"], _settings(eutils))
    assert doc.title == "β-catenin in tumours."


def test_unreachable_server(clock: FakeClock) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = EntrezSettings(email="a@b.org", max_retries=1,
                              base_url=f"http://127.0.0.1:{port}/")
    with pytest.raises(FetchError, match=r"failed after 2 attempts.*check the network"):
        list(fetch_pubmed(["1"], settings, throttle=_throttle(settings, clock)))
    assert clock.sleeps[-1] == 1.0


def test_error_answer_and_bad_pmids(eutils: StubServer, fixtures_dir: Path) -> None:
    error = (fixtures_dir / "eutils/efetch_error.xml").read_bytes()
    eutils.queued = [(200, error)]
    with pytest.raises(FetchError, match="answered with an error: 'Empty id list"):
        list(fetch_pubmed(["1"], _settings(eutils)))
    with pytest.raises(FetchError, match=r"not PubMed ids: 'PMID:1'.*remove prefixes"):
        list(fetch_pubmed(["PMID:1"], _settings(eutils)))


def test_hostile_response_is_refused(eutils: StubServer) -> None:
    laughs = (b'<?xml version="1.0"?>\n<!DOCTYPE PubmedArticleSet [<!ENTITY a "aaaa">]>\n'
              b"<PubmedArticleSet>&a;</PubmedArticleSet>")
    eutils.queued = [(200, laughs)]
    with pytest.raises(InputFormatError, match=r"efetch response for PMIDs 1\.\.1 .*entity "
                       "declarations are refused"):
        list(fetch_pubmed(["1"], _settings(eutils)))


# --- elink -----------------------------------------------------------------------------------

def test_elink_citations_with_cache(eutils: StubServer, fixtures_dir: Path,
                                    tmp_path: Path) -> None:
    recorded = (fixtures_dir / "eutils/elink_refs.xml").read_bytes()
    eutils.routes["/eutils/elink.fcgi"] = lambda request: (200, recorded)
    settings = _settings(eutils, cache_dir=tmp_path)
    edges = list(elink_citations(["90000031", "90000032"], settings))
    assert edges == [("90000031", "20979469"), ("90000031", "17625570")]
    (request,) = eutils.requests
    assert request.params["id"] == ["90000031", "90000032"]  # one id= per PMID: 1-to-1 links
    assert request.params["linkname"] == ["pubmed_pubmed_refs"]
    assert request.params["dbfrom"] == ["pubmed"]

    assert list(elink_citations(["90000032", "90000031"], settings)) == [
        ("90000031", "20979469"), ("90000031", "17625570")]
    assert len(eutils.requests) == 1  # both answered from cache (90000032: no references)
    assert (tmp_path / "elink-pubmed_pubmed_refs/90000032.json").read_text() == \
        '{"pmid": "90000032", "linkname": "pubmed_pubmed_refs", "cited": []}'


def test_elink_unreadable_answer(eutils: StubServer) -> None:
    eutils.queued = [(200, b"<html>oops")]
    with pytest.raises(FetchError, match="elink response is not readable XML"):
        list(elink_citations(["1"], _settings(eutils)))


# --- CIViC nightly ---------------------------------------------------------------------------

TSV = b"gene\tentrez_id\tvariant\tevidence_id\nBRAF\t673\tV600E\t1\n"


def test_download_civic_nightly(eutils: StubServer, tmp_path: Path, clock: FakeClock) -> None:
    eutils.routes["/civic.tsv"] = lambda request: (200, TSV)
    eutils.queued = [(503, b"busy")]
    url = eutils.base_url.replace("/eutils/", "/civic.tsv")
    dest = tmp_path / "downloads" / "civic.tsv"
    assert download_civic_nightly(dest, url, sleep=clock.sleep) == dest
    assert dest.read_bytes() == TSV
    assert clock.sleeps == [1.0]
    assert [p.name for p in dest.parent.iterdir()] == ["civic.tsv"]  # no temp file left


def test_failed_download_keeps_the_old_file(eutils: StubServer, tmp_path: Path) -> None:
    eutils.routes["/civic.tsv"] = lambda request: (200, b"<html>maintenance</html>\n")
    dest = tmp_path / "civic.tsv"
    dest.write_bytes(b"old\tcontent\n")
    url = eutils.base_url.replace("/eutils/", "/civic.tsv")
    with pytest.raises(FetchError, match=r"did not return a TSV \(first line b'<html>"):
        download_civic_nightly(dest, url)
    assert dest.read_bytes() == b"old\tcontent\n"
    assert [p.name for p in tmp_path.iterdir()] == ["civic.tsv"]


# --- one base URL, esearch, history, faults (tests/eutils_server.py) -------------------------

def test_base_url_is_read_from_the_environment_when_settings_are_made(
        eutils_server: EutilsServer, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = EntrezSettings(email="curator@example.org")  # the fixture set the variable
    assert settings.base_url == eutils_server.base_url
    (doc,) = fetch_pubmed(["99200016"], settings)
    assert doc.title == "Crizotinib in ALK-rearranged non-small-cell lung cancer."
    monkeypatch.delenv("KBCURATE_EUTILS_URL")
    assert EntrezSettings(email="a@b.org").base_url == EUTILS_BASE_URL
    monkeypatch.setenv("KBCURATE_EUTILS_URL", "ftp://mirror.example.org/eutils")
    with pytest.raises(FetchError, match=r"base URL 'ftp://mirror.*not an http\(s\) URL.*"
                       "KBCURATE_EUTILS_URL"):
        EntrezSettings(email="a@b.org")


def test_esearch_in_relevance_order_with_history(eutils_server: EutilsServer) -> None:
    result = esearch('"BRAF"[tiab] AND ("V600E"[tiab] OR "Val600Glu"[tiab]) AND vemurafenib',
                     _settings(eutils_server), retmax=2)
    assert result.count == 4  # 99200001, 99200004, 99200005, 99200007 name all three
    assert result.ids == ("99200005", "99200004")  # 6 phrase occurrences each (ties: PMID)
    assert result.history == SearchHistory("MCID_fake0001", "1")
    (request,) = eutils_server.requests("esearch.fcgi")
    assert {k: v[0] for k, v in request.params.items() if k != "term"} == {
        "db": "pubmed", "retmode": "xml", "retmax": "2", "retstart": "0", "sort": "relevance",
        "usehistory": "y", "tool": "kbcurate", "email": "curator@example.org"}
    page = fetch_pubmed_history(result.history, _settings(eutils_server), retstart=2, retmax=5,
                                expected=["99200001", "99200007"])
    assert [d.doc_id for d in page] == ["99200001", "99200007"]
    assert eutils_server.requests("efetch.fcgi")[0].params["WebEnv"] == ["MCID_fake0001"]


def test_esearch_date_range_and_empty_result(eutils_server: EutilsServer) -> None:
    settings = _settings(eutils_server)
    recent = esearch("ALK", settings, mindate="2017", maxdate="2018/12/31", usehistory=False)
    assert set(recent.ids) == {"99200017", "99200018", "99200019"} and recent.history is None
    assert eutils_server.requests()[0].params["datetype"] == ["edat"]
    none = esearch('"no such gene"', settings)
    assert (none.count, none.ids) == (0, ())
    with pytest.raises(FetchError, match="give both mindate and maxdate"):
        esearch("ALK", settings, mindate="2017")
    with pytest.raises(FetchError, match="The PubMed query is empty"):
        esearch("  ", settings)


def test_eutils_error_answers_are_one_line(eutils_server: EutilsServer) -> None:
    settings = _settings(eutils_server)
    with pytest.raises(EutilsError, match=r"E-utilities esearch.fcgi: E-utilities answered with "
                       r"an error: \"Invalid query: missing '\)'\"\. Fix: check the query"):
        esearch('(BRAF AND "V600E"', settings)
    eutils_server.faults.append(Fault("error", message="Search Backend\n  failed:\tretry"))
    with pytest.raises(EutilsError, match="an error: 'Search Backend failed: retry'"):
        esearch("BRAF", settings)
    with pytest.raises(EutilsError, match="Unable to obtain query #1"):
        fetch_pubmed_history(SearchHistory("MCID_expired", "1"), settings, expected=["1"])


def test_long_queries_are_posted(eutils_server: EutilsServer) -> None:
    term = " OR ".join(f'"form number {i}"[tiab]' for i in range(60)) + " OR BRAF"
    result = esearch(term, _settings(eutils_server))
    assert result.count == 11
    (request,) = eutils_server.requests()
    assert request.method == "POST" and request.params["term"] == [term]


@pytest.mark.parametrize("fault", [
    Fault("status", code=429, headers={"Retry-After": "3"}),
    Fault("status", code=500),
    Fault("reset"),
    Fault("truncate"),
    Fault("slow", seconds=1.5),
], ids=["429", "500", "reset", "truncated", "time-out"])
def test_transient_faults_are_retried(eutils_server: EutilsServer, clock: FakeClock,
                                      fault: Fault) -> None:
    eutils_server.faults.append(fault)
    settings = _settings(eutils_server, timeout=0.5, backoff=0.5)
    docs = list(fetch_pubmed(["99200016", "99200017"], settings,
                             throttle=_throttle(settings, clock)))
    assert [d.doc_id for d in docs] == ["99200016", "99200017"]
    assert len(eutils_server.requests("efetch.fcgi")) == 2
    assert clock.sleeps == [3.0 if fault.code == 429 and fault.kind == "status" else 0.5]


def test_requests_keep_the_rate_limit_across_threads(eutils_server: EutilsServer) -> None:
    """One throttle shared by three threads: arrivals stay 0.11 s apart (10/s with a key)."""
    settings = _settings(eutils_server, api_key="KEY")
    throttle = Throttle.for_settings(settings)
    threads = [threading.Thread(target=lambda: [esearch("ALK", settings, throttle=throttle)
                                                for _ in range(2)]) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    times = sorted(r.at for r in eutils_server.requests())
    assert len(times) == 6
    assert min(b - a for a, b in zip(times, times[1:], strict=False)) > 0.06  # jitter: ms
    assert {r.params["api_key"][0] for r in eutils_server.requests()} == {"KEY"}
