"""Issue 42: the PubMed client against a hostile E-utilities server (tests/eutils_server.py).

Each test plays one misbehaviour on loopback and checks what the client keeps, refuses and
says: records nobody asked for (by id and by WebEnv), an esearch answer with 20,000 ids, an
answer that trickles or never ends, a malformed base URL and error answers that would show the
API key and the e-mail (the server's ``<ERROR>`` text, and what the parsers quote of a record or
log of an answer), the rate limit shared by separate processes, a redirect to another origin,
and an odd ``<Count>``. Deadlines and limits are set small here (seconds, MiB).
"""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import textwrap
import time
import traceback
from dataclasses import replace
from pathlib import Path

import pytest
from eutils_server import (  # noqa: F401 (fixture)
    EutilsServer,
    Fault,
    Record,
    eutils_server_fixture,
)

from curation.cli.main import main
from curation.pubmed.search import fetch_missing
from kb_sources.errors import InputFormatError
from kb_sources.eutils import redact
from kb_sources.fetch import (
    EntrezSettings,
    EutilsError,
    FetchError,
    Throttle,
    esearch,
    fetch_pubmed,
)

REPO = Path(__file__).resolve().parents[1]
KEY, EMAIL = "SECRETKEY123", "curator@example.org"
#: PubMed records of the loopback corpus nobody asks for in these tests.
UNASKED = ("99200001", "99200002", "99200003")


def _settings(server: EutilsServer, **kwargs: object) -> EntrezSettings:
    return EntrezSettings(email=EMAIL, base_url=server.base_url, **kwargs)


def _cached(cache: Path) -> list[str]:
    return sorted(p.stem for p in (cache / "pubmed").glob("*.xml"))


# --- 1. only the PMIDs asked for --------------------------------------------------------------

def test_efetch_by_id_keeps_only_the_requested_records(
        eutils_server: EutilsServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    eutils_server.faults.append(Fault("extra", endpoint="efetch.fcgi",
                                      pmids=(*UNASKED, "99200016")))
    settings = _settings(eutils_server, cache_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="kb_sources.fetch"):
        docs = list(fetch_pubmed(["99200016"], settings))
    assert [(d.doc_id, d.title) for d in docs] == [
        ("99200016", "Crizotinib in ALK-rearranged non-small-cell lung cancer.")]
    assert _cached(tmp_path) == ["99200016"]  # nothing unasked reached the cache
    assert "dropped 3 record(s) nobody asked for: 99200001, 99200002, 99200003" in caplog.text
    assert "dropped 1 repeated record(s) (the first copy is kept): 99200016" in caplog.text
    assert "FORGED" not in (tmp_path / "pubmed/99200016.xml").read_text()


def test_a_cached_file_of_another_pmid_is_not_used(eutils_server: EutilsServer,
                                                   tmp_path: Path) -> None:
    settings = _settings(eutils_server, cache_dir=tmp_path)
    list(fetch_pubmed(["99200001"], settings))
    planted = tmp_path / "pubmed" / "99200016.xml"
    planted.write_bytes((tmp_path / "pubmed" / "99200001.xml").read_bytes())
    (doc,) = fetch_pubmed(["99200016"], settings)
    assert (doc.doc_id, doc.title) == (
        "99200016", "Crizotinib in ALK-rearranged non-small-cell lung cancer.")
    assert [r.ids() for r in eutils_server.requests("efetch.fcgi")] == [["99200001"],
                                                                        ["99200016"]]
    assert "<PMID Version=\"1\">99200016</PMID>" in planted.read_text()  # replaced


def test_cli_fetch_imports_only_the_requested_pmid(
        eutils_server: EutilsServer, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``kbcurate fetch pubmed PMID`` imported 4 documents, 3 unasked (the issue's report)."""
    eutils_server.faults.append(Fault("extra", endpoint="efetch.fcgi", pmids=UNASKED))
    ws = tmp_path / "ws"
    assert main(["init", str(ws)]) == 0
    code = main(["fetch", "pubmed", "99200016", "--email", EMAIL, "-w", str(ws), "-q"])
    out = capsys.readouterr().out
    assert code == 0 and "documents +1" in out
    assert _cached(ws / "cache" / "entrez") == ["99200016"]


def test_webenv_fetch_keeps_only_the_window_esearch_listed(
        eutils_server: EutilsServer, tmp_path: Path) -> None:
    settings = _settings(eutils_server, cache_dir=tmp_path)
    found = esearch("ALK", settings)
    assert found.history is not None and "99200016" in found.ids
    eutils_server.faults.append(Fault("extra", endpoint="efetch.fcgi", pmids=UNASKED))
    docs = fetch_missing(found, list(found.ids), settings, Throttle.for_settings(settings))
    assert sorted(d.doc_id for d in docs) == sorted(found.ids)
    assert _cached(tmp_path) == sorted(found.ids)  # the WebEnv answer's extras not cached
    (efetch,) = eutils_server.requests("efetch.fcgi")
    assert efetch.params["WebEnv"] == [found.history.webenv]  # the WebEnv path was taken


# --- 2. esearch answers are capped -----------------------------------------------------------

def test_esearch_keeps_at_most_retmax_ids_without_repeats(
        eutils_server: EutilsServer, caplog: pytest.LogCaptureFixture) -> None:
    ids = tuple(str(30_000_000 + i // 2) for i in range(20_000))  # each id twice
    eutils_server.faults.append(Fault("ids", pmids=ids))
    with caplog.at_level(logging.WARNING, logger="kb_sources.fetch"):
        result = esearch("BRAF", _settings(eutils_server), retmax=200)
    assert result.ids == tuple(str(30_000_000 + i) for i in range(200))
    assert result.count == 20_000
    assert ("esearch listed 20,000 ids (10,000 repeated) for retmax 200; kept the first 200 "
            "distinct ones") in caplog.text


# --- 3. a deadline and a byte limit per request ------------------------------------------------

@pytest.mark.parametrize("kind", ["trickle", "trickle-head"])
def test_trickling_answer_gives_up_at_the_deadline(eutils_server: EutilsServer,
                                                   kind: str) -> None:
    eutils_server.faults.append(Fault(kind, endpoint="esearch.fcgi", seconds=0.1))
    settings = _settings(eutils_server, deadline=1.0, timeout=0.5)
    start = time.monotonic()
    with pytest.raises(FetchError, match=r"E-utilities esearch.fcgi: no complete answer within "
                       r"the 1 s deadline \(EntrezSettings.deadline; \d+ bytes arrived\)\. "
                       "Fix: try again later"):
        esearch("BRAF", settings)
    assert time.monotonic() - start < 1.8  # 0.1 s per byte: the answer needs 60 s or more
    assert len(eutils_server.requests()) == 1  # the deadline is spent: no retry


def test_retries_stop_when_the_deadline_is_spent(eutils_server: EutilsServer) -> None:
    eutils_server.faults.extend(Fault("slow", seconds=1.0) for _ in range(4))
    settings = _settings(eutils_server, deadline=1.5, timeout=0.4, backoff=0.5)
    start = time.monotonic()
    with pytest.raises(FetchError, match=r"failed after 2 attempts \(.*timed out\); the next "
                       r"would start after the request's 1.5 s deadline"):
        esearch("BRAF", settings)
    assert time.monotonic() - start < 1.6
    assert len(eutils_server.requests()) == 2


@pytest.mark.parametrize("declare", [True, False], ids=["announced", "unannounced"])
def test_oversized_answer_is_refused(eutils_server: EutilsServer, declare: bool) -> None:
    eutils_server.faults.append(Fault("huge", endpoint="efetch.fcgi", size=20 << 20,
                                      declare=declare))
    settings = _settings(eutils_server, max_bytes=1 << 20)
    arrived = "it announced 20,971,520" if declare else "more arrived"
    with pytest.raises(FetchError, match=r"E-utilities efetch.fcgi: the answer is larger than "
                       rf"1 MiB \(1,048,576 bytes, EntrezSettings.max_bytes; {arrived}\)\. "
                       "Fix: fetch fewer records per request or raise max_bytes"):
        list(fetch_pubmed(["99200016"], settings))
    assert len(eutils_server.requests()) == 1  # not retried


# --- 5. the API key and the e-mail never show --------------------------------------------------

@pytest.mark.parametrize(("url", "problem"), [
    ("http://127.0.0.1:8/entrez eutils/", r"contains ' ' at position 25"),
    ("http://127.0.0.1:8/eutils/\n", r"contains '\\n' at position 26"),
    ("http://127.0.0.1:8/eutils/?tool=x", "has a query or a fragment"),
    ("http://127.0.0.1:8/eutils/#top", "has a query or a fragment"),
    ("http://127.0.0.1:port/eutils/", "has a port that is not a number"),
])
def test_malformed_base_url_is_refused(url: str, problem: str) -> None:
    with pytest.raises(FetchError, match=rf"The E-utilities base URL .* {problem}.*Fix: set "
                       "KBCURATE_EUTILS_URL"):
        EntrezSettings(email=EMAIL, api_key=KEY, base_url=url)


def _shown(exc: BaseException) -> str:
    """All a user or a log could see of ``exc``: message, chain and traceback."""
    chain = [exc.__cause__, exc.__context__]
    return "\n".join([str(exc), *map(repr, chain), *map(str, chain),
                      "".join(traceback.format_exception(exc))])


def _no_secret(text: str) -> None:
    for secret in (KEY, EMAIL, "curator%40example.org"):
        assert secret.lower() not in text.lower()


def test_malformed_url_leaks_no_secret_and_is_not_retried(
        eutils_server: EutilsServer, caplog: pytest.LogCaptureFixture) -> None:
    settings = _settings(eutils_server, api_key=KEY, backoff=0.01)
    # past the check in EntrezSettings, as a URL the check missed would be
    object.__setattr__(settings, "base_url", eutils_server.base_url + "x y/")
    with caplog.at_level(logging.DEBUG), pytest.raises(FetchError) as caught:
        esearch("BRAF", settings)
    assert "E-utilities esearch.fcgi failed (InvalidURL: URL can't contain control " \
           "characters." in str(caught.value)
    assert "&email=***&api_key=***" in str(caught.value)
    assert "not retried" in str(caught.value)
    _no_secret(_shown(caught.value) + caplog.text)
    assert eutils_server.requests() == []


def test_server_errors_leak_no_secret(eutils_server: EutilsServer,
                                      caplog: pytest.LogCaptureFixture) -> None:
    settings = _settings(eutils_server, api_key=KEY, backoff=0.01)
    echo = f"API key {KEY} of curator%40example.org ({EMAIL.upper()}) is invalid"
    eutils_server.faults.extend([Fault("status", code=500), Fault("error", message=echo)])
    with caplog.at_level(logging.DEBUG), pytest.raises(EutilsError) as caught:
        esearch("BRAF", settings)
    assert "answered with an error: 'API key *** of *** (***) is invalid'" in str(caught.value)
    assert "retrying in" in caplog.text
    _no_secret(_shown(caught.value) + caplog.text)


def test_redact_replaces_raw_and_url_encoded_forms() -> None:
    settings = EntrezSettings(email="a.b+c@lab.org", api_key="K3Y/90", base_url="http://h/")
    text = "api_key=K3Y%2F90&email=a.b%2Bc%40lab.org k3y/90 A.B+C@LAB.ORG a.b%2bc%40lab.org"
    assert redact(text, settings) == "api_key=***&email=*** *** *** ***"
    assert "K3Y" not in repr(settings)
    assert redact("nothing secret", replace(settings, api_key=None)) == "nothing secret"


@pytest.mark.parametrize(("key", "text", "expected"), [
    ("k", "api_key=K&email=*** kinase KRAS k", "api_key=***&email=*** kinase KRAS k"),
    ("k/9", "GET /efetch?api_key=K%2F9 key=k/9; k/9 x", "GET /efetch?api_key=*** key=***; k/9 x"),
    ("abc", "?api_key=abcd&term=abc#x 'abc'", "?api_key=abcd&term=***#x 'abc'"),
    ("Ab", "(GET ?email=x&api_key=ab), 'api_key=AB' Abl", "(GET ?email=x&api_key=***), "
     "'api_key=***' Abl"),
    ("cafe01", "decafe01 CAFE01", "de*** ***"),  # 6 characters: anywhere
])
def test_short_secrets_are_redacted_only_as_whole_parameter_values(
        key: str, text: str, expected: str) -> None:
    """A 1-character key must not turn every "k" of a message into ``***``."""
    settings = EntrezSettings(email="cora@lab.org", api_key=key, base_url="http://h/")
    assert redact(text, settings) == expected


def _efetch_server(pmid_text: str, extra: str = "") -> EutilsServer:
    """A server whose record 99200016 has ``pmid_text`` as its PMID, ``extra`` after it."""
    xml = (f'<PubmedArticle><MedlineCitation><PMID Version="1">{pmid_text}</PMID><Article>'
           "<ArticleTitle>A title.</ArticleTitle></Article></MedlineCitation></PubmedArticle>")
    return EutilsServer([Record("99200016", "a title.", "2020/01/01", xml + extra)])


@pytest.mark.parametrize("shown", [KEY, f"{KEY}/{EMAIL}", EMAIL.upper()])
def test_an_unreadable_efetch_record_leaks_no_secret(
        shown: str, caplog: pytest.LogCaptureFixture) -> None:
    """The parser quotes up to 40 characters of the record: a server may echo the secrets."""
    with _efetch_server(shown) as server, caplog.at_level(logging.DEBUG), \
            pytest.raises(InputFormatError) as caught:
        list(fetch_pubmed(["99200016"], _settings(server, api_key=KEY)))
    assert re.search(r"efetch response for PMIDs 99200016\.\.99200016 \(1 requested\), record "
                     r"#1: article has no numeric PMID \(found '\*\*\*(/\*\*\*)?'\)\. "
                     "Expected <MedlineCitation><PMID>digits</PMID>", str(caught.value))
    assert caught.value.__cause__ is None and caught.value.__context__ is None
    _no_secret(_shown(caught.value) + caplog.text)


def test_skipped_elements_of_an_efetch_answer_are_logged_without_secrets(
        caplog: pytest.LogCaptureFixture) -> None:
    with _efetch_server("99200016", extra=f"<x{KEY}/>") as server, \
            caplog.at_level(logging.DEBUG):
        (doc,) = fetch_pubmed(["99200016"], _settings(server, api_key=KEY))
    assert doc.title == "A title."
    assert "skipped 1 <x***>" in caplog.text
    _no_secret(caplog.text)


def test_an_odd_esearch_answer_leaks_no_secret(eutils_server: EutilsServer,
                                               caplog: pytest.LogCaptureFixture) -> None:
    eutils_server.faults.append(Fault("ids", pmids=("99200016",), tags={"Count": KEY}))
    with caplog.at_level(logging.DEBUG), pytest.raises(FetchError) as caught:
        esearch("ALK", _settings(eutils_server, api_key=KEY))
    assert "esearch response: <Count> is '***'; expected a number" in str(caught.value)
    _no_secret(_shown(caught.value) + caplog.text)


# --- 6. one rate limit for every process of a workspace ----------------------------------------

CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from kb_sources.fetch import EntrezSettings, esearch
    base, cache, go = sys.argv[1:4]
    settings = EntrezSettings(email="a@b.org", base_url=base, cache_dir=Path(cache))
    Path(go + "." + sys.argv[4]).touch()
    while not Path(go).exists():
        time.sleep(0.002)
    for _ in range(3):
        esearch("BRAF", settings)
""")


def test_rate_limit_is_shared_between_processes(eutils_server: EutilsServer,
                                                tmp_path: Path) -> None:
    """Three processes, three searches each, one workspace cache: at most 3 requests/s."""
    go = tmp_path / "go"
    children = [subprocess.Popen([sys.executable, "-c", CHILD, eutils_server.base_url,
                                  str(tmp_path / "cache"), str(go), str(n)], cwd=REPO)
                for n in range(3)]
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("go.*"))) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()
    assert [c.wait(timeout=60) for c in children] == [0, 0, 0]
    assert len(eutils_server.requests("esearch.fcgi")) == 9
    assert eutils_server.max_rate(1.0) <= 3
    assert (tmp_path / "cache" / ".throttle").is_file()


# --- 7. redirects stay on the base URL's origin ------------------------------------------------

def test_redirect_to_another_origin_is_refused(eutils_server: EutilsServer) -> None:
    with EutilsServer() as other:
        port = other.base_url.split(":")[2].split("/")[0]
        eutils_server.faults.append(Fault("redirect", code=302, location=other.base_url))
        with pytest.raises(FetchError, match=rf"E-utilities esearch.fcgi answered with a "
                           rf"redirect to http://127.0.0.1:{port}, another origin than "
                           r"http://127.0.0.1:\d+; refused\. Fix: set KBCURATE_EUTILS_URL"):
            esearch("BRAF", _settings(eutils_server, api_key=KEY))
        assert other.requests() == []
    assert len(eutils_server.requests()) == 1  # not retried


def test_redirect_within_the_origin_is_followed(eutils_server: EutilsServer) -> None:
    moved = eutils_server.base_url.replace("/entrez/eutils/", "/moved/")
    eutils_server.faults.append(Fault("redirect", code=302, location=moved))
    result = esearch("ALK", _settings(eutils_server))
    assert "99200016" in result.ids
    assert len(eutils_server.requests("esearch.fcgi")) == 2


# --- 8. odd numbers in esearch answers --------------------------------------------------------

@pytest.mark.parametrize(("tag", "text"), [
    ("Count", "\u00b2"), ("Count", "9" * 5000), ("Count", "-1"), ("Count", "\uff11\uff12"),
    ("RetStart", "\u00b3"),
])
def test_odd_numbers_in_esearch_are_a_clear_error(eutils_server: EutilsServer, tag: str,
                                                  text: str) -> None:
    eutils_server.faults.append(Fault("ids", pmids=("99200016",), tags={tag: text}))
    with pytest.raises(FetchError, match=rf"esearch response: <{tag}> is '.{{1,43}}'; expected "
                       "a number of at most 12 ASCII digits. Fix: check KBCURATE_EUTILS_URL"):
        esearch("ALK", _settings(eutils_server))
