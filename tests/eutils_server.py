"""A loopback stand-in for NCBI E-utilities (esearch, efetch) over a small fixture corpus.

The real client code (:mod:`kb_sources.fetch`) talks HTTP to it through
``$KBCURATE_EUTILS_URL`` / ``EntrezSettings.base_url``; nothing leaves the machine.

- esearch: the term is a boolean expression of phrases (quoted or bare words, optional
  ``[field]`` tags ignored), ``AND`` / ``OR`` / ``NOT`` and parentheses (adjacent phrases mean
  AND, as in PubMed); a phrase matches a record whose title or abstract contains it
  (case-insensitive, at word boundaries). Relevance order: most phrase occurrences first, then
  the higher PMID. ``usehistory=y`` keeps the result under a new ``WebEnv`` (query_key 1);
  ``retstart``/``retmax``; ``mindate``/``maxdate`` with ``datetype=edat`` filter on the
  record's Entrez date (``PubMedPubDate[@PubStatus="entrez"]``).
- efetch: by ``id=`` (comma-separated, GET or POST) or by ``WebEnv`` + ``query_key`` with
  ``retstart``/``retmax``; answers a ``PubmedArticleSet`` of the records it has (an unknown
  ``WebEnv`` gets E-utilities' ``<ERROR>`` answer).
- faults (:class:`Fault`, consumed in order by the requests they match): an HTTP status (429,
  500 ...) with optional headers, a slow answer (``seconds`` before the first byte), an
  ``<ERROR>`` body, a reset connection (closed without an answer) and a cut-off body (the full
  ``Content-Length`` announced, half of it sent); and the hostile answers of issue 42: an efetch
  answer carrying records nobody asked for (``extra``), an esearch answer with made-up ids and
  ``<Count>``/``<RetStart>`` texts (``ids``), an answer sent one byte at a time (``trickle``:
  the body, ``trickle-head``: from the status line on), a body of ``size`` bytes (``huge``,
  streamed, its length announced or not) and a redirect (``redirect``, to another server).
- ``delay``: seconds every request waits before answering (a realistic 0.3 s for benchmarks).
- ``log``: every request with its arrival time (``time.monotonic()``), to check the rate limit.

Use the ``eutils_server`` fixture (import ``eutils_server_fixture`` into the test module; it
also sets ``$KBCURATE_EUTILS_URL``), or start :class:`EutilsServer` yourself (benchmarks).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit
from xml.etree import ElementTree as ET

import pytest
from defusedxml.ElementTree import parse as safe_parse

CORPUS = Path(__file__).parent / "fixtures" / "eutils" / "pubmed_corpus.xml"
ERROR_BODY = ('<?xml version="1.0" encoding="UTF-8" ?>\n<{root}>\n\t<ERROR>{message}</ERROR>\n'
              '</{root}>\n')


@dataclass(frozen=True)
class Record:
    """One article the fake PubMed holds."""

    pmid: str
    text: str  # title + abstract, lower-cased
    edat: str  # YYYY/MM/DD
    xml: str  # the PubmedArticle element


def load_corpus(path: Path = CORPUS) -> list[Record]:
    """The records of a PubmedArticleSet file."""
    out = []
    for article in safe_parse(str(path)).getroot().iterfind("PubmedArticle"):
        pmid = article.findtext("MedlineCitation/PMID", "").strip()
        title = "".join(article.find("MedlineCitation/Article/ArticleTitle").itertext())
        abstract = " ".join("".join(a.itertext()) for a in
                            article.iterfind("MedlineCitation/Article/Abstract/AbstractText"))
        date = article.find("PubmedData/History/PubMedPubDate[@PubStatus='entrez']")
        edat = "/".join(f"{int(date.findtext(p, '1')):02d}" for p in ("Year", "Month", "Day")) \
            if date is not None else "1900/01/01"
        out.append(Record(pmid, f"{title} {abstract}".lower(), edat,
                          ET.tostring(article, encoding="unicode")))
    return out


def synthetic_corpus(n: int, words: Sequence[str] = ("BRAF", "V600E", "melanoma")
                     ) -> list[Record]:
    """``n`` generated records that all mention ``words`` (benchmarks)."""
    out = []
    for i in range(n):
        pmid = str(98_000_000 + i)
        title = f"Study {i} of {' '.join(words)} (synthetic)."
        abstract = (f"Patients with {words[0]} {words[1] if len(words) > 1 else ''} were "
                    f"treated in cohort {i}; responses were recorded over {i % 24 + 1} months.")
        xml = (f'<PubmedArticle><MedlineCitation Status="MEDLINE" Owner="NLM"><PMID Version="1">'
               f"{pmid}</PMID><Article><Journal><JournalIssue><PubDate><Year>{2000 + i % 25}"
               f"</Year></PubDate></JournalIssue><Title>Synthetic Reports</Title></Journal>"
               f"<ArticleTitle>{title}</ArticleTitle><Abstract><AbstractText>{abstract}"
               f"</AbstractText></Abstract></Article></MedlineCitation></PubmedArticle>")
        out.append(Record(pmid, f"{title} {abstract}".lower(), "2020/01/01", xml))
    return out


# -- the query language ----------------------------------------------------------------------
_TOKEN = re.compile(r'\s*(?:(\()|(\))|"([^"]*)"(?:\[[^\]]*\])?|([^\s()"\[]+)(?:\[[^\]]*\])?)')


def _tokens(term: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(term):
        m = _TOKEN.match(term, pos)
        if not m or m.end() == pos:
            if term[pos:].strip():
                raise ValueError(f"cannot read the query at {term[pos:pos + 20]!r}")
            break
        pos = m.end()
        if m.group(1):
            out.append(("(", "("))
        elif m.group(2):
            out.append((")", ")"))
        elif m.group(3) is not None:
            out.append(("phrase", m.group(3)))
        elif m.group(4).upper() in ("AND", "OR", "NOT"):
            out.append((m.group(4).upper(), m.group(4)))
        else:
            out.append(("phrase", m.group(4)))
    return out


class _Query:
    """A parsed term: ``score(text)`` is 0 for no match, else the phrase occurrences (>= 1)."""

    def __init__(self, term: str) -> None:
        self.toks = _tokens(term)
        self.pos = 0
        self.tree = self._or()
        if self.pos != len(self.toks):
            raise ValueError(f"unexpected {self.toks[self.pos][1]!r}")

    def _peek(self) -> str | None:
        return self.toks[self.pos][0] if self.pos < len(self.toks) else None

    def _or(self) -> tuple:
        node = self._and()
        while self._peek() == "OR":
            self.pos += 1
            node = ("or", node, self._and())
        return node

    def _and(self) -> tuple:
        node = self._atom()
        while self._peek() in ("AND", "NOT", "phrase", "("):
            op = self._peek()
            if op in ("AND", "NOT"):
                self.pos += 1
            node = ("not" if op == "NOT" else "and", node, self._atom())
        return node

    def _atom(self) -> tuple:
        kind = self._peek()
        if kind == "(":
            self.pos += 1
            node = self._or()
            if self._peek() != ")":
                raise ValueError("missing ')'")
            self.pos += 1
            return node
        if kind == "phrase":
            self.pos += 1
            words = self.toks[self.pos - 1][1].lower().split()
            pattern = r"(?<![a-z0-9])" + r"\W+".join(map(re.escape, words)) + r"(?![a-z0-9])"
            return ("phrase", re.compile(pattern))
        raise ValueError(f"expected a phrase, got {kind or 'the end'}")

    def score(self, text: str, node: tuple | None = None) -> int:
        node = node or self.tree
        if node[0] == "phrase":
            return len(node[1].findall(text))
        left, right = self.score(text, node[1]), self.score(text, node[2])
        if node[0] == "or":
            return left + right
        if node[0] == "and":
            return left + right if left and right else 0
        return left if left and not right else 0  # not


# -- faults and the log ----------------------------------------------------------------------
@dataclass
class Fault:
    """One misbehaviour, for the next request to ``endpoint`` (any when None).

    kind: ``status`` (answer HTTP ``code`` with ``headers``), ``slow`` (wait ``seconds``, then
    answer normally), ``error`` (HTTP 200 with an ``<ERROR>message</ERROR>`` body), ``reset``
    (close without answering), ``truncate`` (announce the whole body, send half), ``extra``
    (efetch: the answer also carries the corpus records ``pmids``; one that was asked for comes
    again with its title prefixed ``FORGED``), ``ids`` (esearch: the id list is ``pmids``, and
    ``tags`` replace the text of ``Count``/``RetStart``), ``trickle`` (the answer's body one
    byte every ``seconds``), ``trickle-head`` (the same from the status line on), ``huge``
    (HTTP 200 with ``size`` bytes of XML padding, with ``Content-Length`` when ``declare``,
    else until the connection closes) or ``redirect`` (HTTP ``code`` to ``location`` + the
    endpoint and query asked for).
    """

    kind: str
    endpoint: str | None = None
    code: int = 500
    seconds: float = 0.0
    message: str = "Search Backend failed"
    headers: dict[str, str] = field(default_factory=dict)
    pmids: tuple[str, ...] = ()
    tags: dict[str, str] = field(default_factory=dict)
    size: int = 0
    declare: bool = True
    location: str = ""


@dataclass(frozen=True)
class Logged:
    """One request the server received."""

    at: float  # time.monotonic() on arrival
    method: str
    endpoint: str
    params: dict[str, list[str]]

    def ids(self) -> list[str]:
        return [i for v in self.params.get("id", []) for i in v.split(",") if i]


class EutilsServer:
    """The fake E-utilities on 127.0.0.1 (see the module docstring)."""

    def __init__(self, records: Sequence[Record] | None = None, *, delay: float = 0.0) -> None:
        self.records = list(load_corpus() if records is None else records)
        self.by_pmid = {r.pmid: r for r in self.records}
        self.delay = delay
        self.faults: list[Fault] = []
        self.log: list[Logged] = []
        self.histories: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        self._closed = False
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                server._handle(self, urlsplit(self.path).query)

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                server._handle(self, self.rfile.read(length).decode())

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/entrez/eutils/"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,),
                                        daemon=True)

    def __enter__(self) -> EutilsServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed = True  # ends trickling and huge answers
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)

    # what tests ask
    def requests(self, endpoint: str | None = None) -> list[Logged]:
        return [r for r in self.log if endpoint is None or r.endpoint == endpoint]

    def forget_histories(self) -> None:
        """Expire every WebEnv (as NCBI does after some hours)."""
        with self._lock:
            self.histories.clear()

    def max_rate(self, window: float = 1.0) -> int:
        """The most requests that arrived within any ``window`` seconds."""
        times = sorted(r.at for r in self.log)
        return max((sum(1 for t in times[i:] if t - start < window)
                    for i, start in enumerate(times)), default=0)

    # serving
    def _handle(self, handler: BaseHTTPRequestHandler, query: str) -> None:
        endpoint = urlsplit(handler.path).path.rsplit("/", 1)[-1]
        params = parse_qs(query, keep_blank_values=True)
        with self._lock:
            self.log.append(Logged(time.monotonic(), handler.command, endpoint, params))
            fault = next((f for f in self.faults if f.endpoint in (None, endpoint)), None)
            if fault is not None:
                self.faults.remove(fault)
        if self.delay:
            time.sleep(self.delay)
        if fault is not None and fault.kind == "slow":
            time.sleep(fault.seconds)
            fault = None
        if fault is not None and self._misbehave(handler, fault, endpoint, query):
            return
        status, body = self._answer(endpoint, params, fault)
        if fault is not None and fault.kind == "truncate":
            self._send(handler, status, body[:len(body) // 2], length=len(body))
            handler.close_connection = True
        elif fault is not None and fault.kind in ("trickle", "trickle-head"):
            self._trickle(handler, status, body, fault)
        else:
            self._send(handler, status, body)

    def _misbehave(self, handler: BaseHTTPRequestHandler, fault: Fault, endpoint: str,
                   query: str) -> bool:
        """Answer a fault that replaces the whole answer; False for the others."""
        if fault.kind == "reset":
            handler.close_connection = True
            handler.connection.close()
        elif fault.kind == "status":
            self._send(handler, fault.code, b"fault", fault.headers)
        elif fault.kind == "error":
            root = "eSearchResult" if endpoint == "esearch.fcgi" else "eFetchResult"
            self._send(handler, 200, ERROR_BODY.format(root=root, message=fault.message).encode())
        elif fault.kind == "redirect":
            target = f"{fault.location}{endpoint}?{query}"
            self._send(handler, fault.code, b"moved", {"Location": target})
        elif fault.kind == "huge":
            self._send_huge(handler, fault)
        else:
            return False
        return True

    def _send_huge(self, handler: BaseHTTPRequestHandler, fault: Fault) -> None:
        """``fault.size`` bytes of well-formed XML, streamed 1 MiB at a time."""
        head = b'<?xml version="1.0" ?>\n<PubmedArticleSet>\n'
        handler.send_response(200)
        handler.send_header("Content-Type", "text/xml; charset=UTF-8")
        if fault.declare:
            handler.send_header("Content-Length", str(fault.size))
        else:
            handler.send_header("Connection", "close")
        handler.end_headers()
        handler.close_connection = True
        chunk, sent = b" " * (1 << 20), 0
        try:
            handler.wfile.write(head)
            sent = len(head)
            while sent < fault.size and not self._closed:
                part = chunk[:fault.size - sent]
                handler.wfile.write(part)
                sent += len(part)
        except (BrokenPipeError, ConnectionResetError):  # the client stopped reading
            pass

    def _trickle(self, handler: BaseHTTPRequestHandler, status: int, body: bytes,
                 fault: Fault) -> None:
        """The answer one byte every ``fault.seconds`` (the body, or from the status line on)."""
        head = (f"HTTP/1.1 {status} OK\r\nContent-Type: text/xml; charset=UTF-8\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        data = head + body
        first = 0 if fault.kind == "trickle-head" else len(head)
        handler.close_connection = True
        try:
            handler.wfile.write(data[:first])
            for i in range(first, len(data)):
                if self._closed:
                    return
                time.sleep(fault.seconds)
                handler.wfile.write(data[i:i + 1])
        except (BrokenPipeError, ConnectionResetError):  # the client gave up
            pass

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes,
              headers: dict[str, str] | None = None, length: int | None = None) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "text/xml; charset=UTF-8")
        handler.send_header("Content-Length", str(len(body) if length is None else length))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        try:
            handler.wfile.write(body)
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a time-out)
            handler.close_connection = True

    def _answer(self, endpoint: str, params: dict[str, list[str]],
                fault: Fault | None = None) -> tuple[int, bytes]:
        one = {k: v[0] for k, v in params.items()}
        if not one.get("email") or one.get("tool") != "kbcurate":
            return 400, b"tool and email are required"
        if endpoint == "esearch.fcgi":
            return 200, self._esearch(one, fault)
        if endpoint == "efetch.fcgi":
            return 200, self._efetch(one, fault)
        return 404, b"no such endpoint"

    def _esearch(self, p: dict[str, str], fault: Fault | None = None) -> bytes:
        try:
            query = _Query(p.get("term", ""))
        except ValueError as exc:
            return ERROR_BODY.format(root="eSearchResult", message=f"Invalid query: {exc}"
                                     ).encode()
        lo, hi = p.get("mindate"), p.get("maxdate")
        scored = [(query.score(r.text), r) for r in self.records
                  if not lo or _date_key(lo) <= r.edat <= _date_key(hi or lo, end=True)]
        ids = [r.pmid for s, r in sorted(scored, key=lambda t: (-t[0], -int(t[1].pmid))) if s]
        start, size = int(p.get("retstart", 0)), int(p.get("retmax", 20))
        page = ids[start:start + size]
        history = ""
        if p.get("usehistory") == "y":
            with self._lock:
                webenv = f"MCID_fake{len(self.histories) + 1:04d}"
                self.histories[webenv] = ids
            history = f"<QueryKey>1</QueryKey><WebEnv>{webenv}</WebEnv>"
        tags = {"Count": str(len(ids)), "RetStart": str(start)}
        if fault is not None and fault.kind == "ids":
            page = list(fault.pmids)
            tags.update({"Count": str(len(page))}, **fault.tags)
        id_list = "".join(f"<Id>{i}</Id>" for i in page)
        return (f'<?xml version="1.0" encoding="UTF-8" ?>\n<eSearchResult><Count>{tags["Count"]}'
                f"</Count><RetMax>{len(page)}</RetMax><RetStart>{tags['RetStart']}</RetStart>"
                f"{history}"
                f"<IdList>{id_list}</IdList><TranslationSet/><QueryTranslation>"
                f"{_escape(p.get('term', ''))}</QueryTranslation></eSearchResult>\n").encode()

    def _efetch(self, p: dict[str, str], fault: Fault | None = None) -> bytes:
        if "WebEnv" in p:
            with self._lock:
                ids = self.histories.get(p["WebEnv"])
            if ids is None or p.get("query_key") != "1":
                return ERROR_BODY.format(root="eFetchResult", message="Unable to obtain query "
                                         f"#{p.get('query_key')}").encode()
            start = int(p.get("retstart", 0))
            ids = ids[start:start + int(p.get("retmax", 20))]
        else:
            ids = [i for i in p.get("id", "").split(",") if i]
            if not ids:
                return ERROR_BODY.format(root="eFetchResult",
                                         message="Empty id list - nothing todo").encode()
        records = [self.by_pmid[i].xml for i in ids if i in self.by_pmid]
        if fault is not None and fault.kind == "extra":
            records += [self.by_pmid[i].xml.replace("<ArticleTitle>", "<ArticleTitle>FORGED ", 1)
                        if i in ids else self.by_pmid[i].xml for i in fault.pmids]
        body = "\n".join(records)
        return (f'<?xml version="1.0" ?>\n<PubmedArticleSet>\n{body}\n</PubmedArticleSet>\n'
                ).encode()


def _date_key(value: str, end: bool = False) -> str:
    parts = value.split("/")
    fill = ["12", "31"] if end else ["01", "01"]
    parts += fill[len(parts) - 1:]
    return "/".join([parts[0], *(f"{int(x):02d}" for x in parts[1:3])])


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


@pytest.fixture(name="eutils_server")
def eutils_server_fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[EutilsServer]:
    """The fake E-utilities over the fixture corpus; ``$KBCURATE_EUTILS_URL`` points at it."""
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with EutilsServer() as server:
        monkeypatch.setenv("KBCURATE_EUTILS_URL", server.base_url)
        yield server
