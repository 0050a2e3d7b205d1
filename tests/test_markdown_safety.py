"""Untrusted text reaches Streamlit's markdown only through ``app_pages.safe.md`` (issue 12).

Two kinds of check:

* on the source: every call of ``app.py`` and ``app_pages/*.py`` that renders markdown (messages,
  captions, widget labels, help, expander/tab labels, progress texts, options of radios, pills
  and segmented controls, ``flash``) gets literals, ``md(...)``, ``len(...)``, numbers formatted
  with a numeric format spec, or ALL_CAPS constants; HTML (``unsafe_allow_html=True``) comes only
  from the escaping builders; plotly figures get ``html_frame(...)`` data and escaped titles.
  ``st.html`` is left out: it is given only the app's own style sheet.
* in the app (AppTest): a document id carrying an image, links, an icon and LaTeX shows as its
  literal characters in the Curate page's Undo message and the Review page's relabel message.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pandas as pd
import pytest
from app_helpers import (
    APP,
    add_users,
    build_app_workspace,
    label_rows,
    live_markdown,
    shown,
    sign_in,
)
from streamlit.testing.v1 import AppTest

from app_pages.safe import ZERO_WIDTH, html_frame, html_text, md
from curation.store.labels import Labels
from curation.store.workspace import Workspace

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "app.py", *sorted((ROOT / "app_pages").glob("*.py"))]

#: Streamlit calls whose first argument (body or label) is rendered as markdown.
SINKS = frozenset({
    "markdown", "write", "caption", "title", "header", "subheader", "info", "success", "warning",
    "error", "toast", "expander", "popover", "tabs", "progress", "spinner", "status", "metric",
    "button", "download_button", "form_submit_button", "link_button", "page_link", "checkbox",
    "toggle", "radio", "selectbox", "multiselect", "select_slider", "text_input", "text_area",
    "number_input", "slider", "date_input", "time_input", "file_uploader", "color_picker",
    "segmented_control", "pills", "feedback", "chat_input"})
#: Sinks whose first parameter is called ``body`` (the others': ``label`` or ``text``).
BODY_FIRST = frozenset({"markdown", "caption", "title", "header", "subheader", "info", "success",
                        "warning", "error", "toast"})
#: Widgets whose options are rendered as markdown (selectbox options are plain text).
OPTION_SINKS = frozenset({"radio", "pills", "segmented_control"})
#: Keyword arguments rendered as markdown.
MARKDOWN_KWARGS = frozenset({"body", "label", "text", "help", "caption", "captions"})
#: Receivers that are not Streamlit (logging has .info/.warning/.error too).
NOT_STREAMLIT = frozenset({"logger", "logging", "parser", "warnings"})
#: Functions that return escaped HTML (tested by the XSS tests of card and highlight).
HTML_BUILDERS = frozenset({"card_html", "render_highlighted", "render_legend"})
NUMERIC_TYPES = tuple("bdeEfFgGnoxX%")


def _call_name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else (
        node.attr if isinstance(node, ast.Attribute) else "")


def _numeric_spec(spec: ast.expr | None) -> bool:
    """A format spec that fails on text (``:d``, ``:,``, ``:.3f``): the value is a number."""
    if not isinstance(spec, ast.JoinedStr) or not all(isinstance(v, ast.Constant)
                                                       for v in spec.values):
        return False
    text = "".join(str(v.value) for v in spec.values)
    return text.endswith(NUMERIC_TYPES) or "," in text or "_" in text


def is_safe(node: ast.expr | None, escapers: frozenset[str] = frozenset({"md"})) -> bool:
    """Whether ``node`` can only produce text without live markup."""
    if node is None or isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.JoinedStr):
        return all(is_safe(v, escapers) for v in node.values)
    if isinstance(node, ast.FormattedValue):
        return _numeric_spec(node.format_spec) or is_safe(node.value, escapers)
    if isinstance(node, ast.Call):
        return _call_name(node.func) in escapers | {"len"}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return is_safe(node.left, escapers) and is_safe(node.right, escapers)
    if isinstance(node, ast.IfExp):
        return is_safe(node.body, escapers) and is_safe(node.orelse, escapers)
    if isinstance(node, ast.Name | ast.Attribute):  # module constants only
        return _call_name(node).isupper()
    if isinstance(node, ast.List | ast.Tuple):
        return all(is_safe(e, escapers) for e in node.elts)
    return False


def _arg(call: ast.Call, index: int, name: str) -> ast.expr | None:
    found = [k.value for k in call.keywords if k.arg == name]
    return found[0] if found else (call.args[index] if len(call.args) > index else None)


def _root(node: ast.expr) -> str:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


def _markdown_args(call: ast.Call, sink: str) -> list[ast.expr | None]:
    """The arguments of a Streamlit call that are rendered as markdown."""
    if sink == "write":
        args: list[ast.expr | None] = list(call.args)
    elif sink == "progress":
        args = [_arg(call, 1, "text")]
    else:
        args = [_arg(call, 0, "body" if sink in BODY_FIRST else "label")]
    args += [k.value for k in call.keywords if k.arg in MARKDOWN_KWARGS and k.value not in args]
    if sink in OPTION_SINKS:
        func = next((k.value for k in call.keywords if k.arg == "format_func"), None)
        args.append(func.body if isinstance(func, ast.Lambda) else _arg(call, 1, "options"))
    return args


def _html_allowed(call: ast.Call) -> bool:
    return any(k.arg == "unsafe_allow_html" and not (isinstance(k.value, ast.Constant)
                                                     and k.value.value is False)
               for k in call.keywords)


def violations(source: str, filename: str = "<src>") -> list[str]:
    """Markdown-rendering calls in ``source`` that may get unescaped text."""
    found = []
    for call in (n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)):
        where = f"{filename}:{call.lineno}"
        name, root = _call_name(call.func), _root(call.func)
        if isinstance(call.func, ast.Name) and name == "flash":
            checks = [(_arg(call, 1, "text"), frozenset({"md"}))]
        elif root == "px":
            checks = [(_arg(call, 0, "data_frame"), frozenset({"html_frame"})),
                      *((k.value, frozenset({"html_text"})) for k in call.keywords
                        if k.arg in {"title", "x", "y", "color", "hover_name"})]
        elif isinstance(call.func, ast.Attribute) and name in SINKS and \
                root not in NOT_STREAMLIT:
            if name == "markdown" and _html_allowed(call):
                body = _arg(call, 0, "body")
                if not (isinstance(body, ast.Call) and _call_name(body.func) in HTML_BUILDERS):
                    found.append(f"{where}: unsafe_allow_html needs an escaping HTML builder")
                continue
            checks = [(a, frozenset({"md"})) for a in _markdown_args(call, name)]
        else:
            continue
        found += [f"{where}: {name}() gets {ast.unparse(arg)}" for arg, esc in checks
                  if not is_safe(arg, esc)]
    return found


def test_every_markdown_call_of_the_app_gets_escaped_text():
    problems = [v for path in SOURCES
                for v in violations(path.read_text(encoding="utf-8"), path.relative_to(ROOT))]
    assert not problems, "wrap untrusted text in app_pages.safe.md():\n" + "\n".join(problems)


@pytest.mark.parametrize("snippet", [
    'flash("info", f"Undid your label on {label.doc_id}.")',
    'st.success(f"Relabelled {label.doc_id}")',
    "st.error(str(exc))",
    "st.sidebar.caption(schema.description)",
    'cols[0].button(f"Build {name}", key="b")',
    'st.checkbox(slot, key="x")',
    'st.progress(0.5, text=f"Job {job.message}")',
    'st.info("a" + name)',
    'st.radio("Mode", [g.value for g in grades], key="m")',
    'st.segmented_control("L", OPTIONS, key="s", format_func=lambda o: f"{o.name}")',
    'st.checkbox("x", key="x", help=note)',
    'st.expander(f"Runs {name}")',
    "st.markdown(text, unsafe_allow_html=True)",
    'px.box(frame, x="a", title=f"{metric} per query")',
    'px.bar(html_frame(frame), y=metric)',
    'st.caption(f"{count:>10} rows")',
])
def test_the_check_catches_unescaped_text(snippet):
    assert violations(snippet), snippet


@pytest.mark.parametrize("snippet", [
    'flash("info", f"Undid your label on {md(label.doc_id)}.")',
    'st.caption(f"{len(rows):,} relations" + (f" (first {SHOWN})" if big else ""))',
    'st.progress(0.5, text=f"Job {job.id:d}: {md(job.message)}")',
    "st.error(md(exc))",
    'st.radio("Query from", MODES, key="m")',
    "st.markdown(card_html(doc, text), unsafe_allow_html=True)",
    'px.box(html_frame(frame), y=html_text(metric), title=f"{html_text(metric)} per query")',
    'logger.info("failed sign-in for %r", name)',
    'st.selectbox("Pick", names, key="p", format_func=lambda k: labels[k])',
])
def test_the_check_accepts_escaped_text(snippet):
    assert violations(snippet) == [], snippet


EVIL = ("X![px](http://host/p.png)[clickme](javascript:alert(1)) :material/home: :red[red] "
        "$x^2$ <img src=x onerror=alert(1)> www.evil.org a@evil.org `code` **b** _i_ ~~s~~")


@pytest.mark.parametrize("text", [EVIL, "# heading", "1. item", "- item", "> quote", "| a |",
                                  "&lt;b&gt; &#x3C;", "back\\slash", ":smile: :+1:", "===", "a\nb"])
def test_md_shows_text_literally(text):
    escaped = md(text)
    assert live_markdown(escaped) == []
    assert shown(escaped) == " ".join(text.split()) and "\n" not in escaped
    if text[0] in "#>|=-":  # a block never starts: the first character is escaped
        assert escaped.startswith("\\")
    assert "\\." in escaped or "." not in text  # "1. item" is no list


#: The autolink-literal rules of Streamlit's markdown (mdast-util-gfm-autolink-literal, as in
#: Streamlit's frontend bundle): they run on text nodes after backslash escapes are resolved, so
#: an escaped ``http\:\/\/`` still becomes a link. JavaScript's ``\w`` is ASCII (re.ASCII); the
#: e-mail rule's look-behind is dropped, which only makes the check stricter.
GFM_AUTOLINKS = (re.compile(r"(https?://|www(?=\.))([-.\w]+)([^ \t\r\n]*)", re.I | re.A),
                 re.compile(r"([-.\w+]+)@([-\w]+(?:\.[-\w]+)+)", re.A))
URLS = ["http://evil.example/x", "HTTPS://evil.example", "see www.evil.org now",
        "WWW.Evil.org", "mail a.b+c@evil.example.org", "mailto:x@y.org", "<https://a.b>",
        "xmpp:foo@bar.baz", "(http://evil.example)", "ftp.example.org", "a@b", "ndcg@10",
        "user@localhost"]


def resolved(markdown: str) -> str:
    """The text node a markdown string becomes: escapes resolved, invisible characters kept."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)


@pytest.mark.parametrize("text", URLS + [EVIL])
def test_md_leaves_no_autolink_and_reads_the_same(text):
    """Issue 28, item 8: URLs and e-mail addresses in escaped text are no links."""
    escaped = md(text)
    node = resolved(escaped)
    assert [r.pattern for r in GFM_AUTOLINKS if r.search(node)] == [], node
    assert shown(escaped) == " ".join(text.split())  # what the curator reads is unchanged
    assert node.replace(ZERO_WIDTH, "") == " ".join(text.split())


def test_the_autolink_check_finds_links_in_plain_escaping():
    plain = resolved(re.sub(r"([\\`*_{}\[\]()#+\-.!|<>~$:=&^/@])", r"\\\1", URLS[0]))
    assert GFM_AUTOLINKS[0].search(plain).group(0) == "http://evil.example/x"
    assert GFM_AUTOLINKS[1].search("x a.b+c@evil.example.org").group(0) == "a.b+c@evil.example.org"
    assert md("ndcg@10 of user@localhost") == "ndcg\\@10 of user\\@localhost"  # no address


def test_plotly_text_is_html_escaped():
    frame = pd.DataFrame({"query": ["<a href='javascript:x'>q</a>"], "ndcg@10": [0.5],
                          "retriever": ["<b>bm25</b>"]})
    safe = html_frame(frame)
    assert safe["query"].tolist() == ["&lt;a href=&#x27;javascript:x&#x27;&gt;q&lt;/a&gt;"]
    assert safe["retriever"].tolist() == ["&lt;b&gt;bm25&lt;/b&gt;"]
    assert safe["ndcg@10"].tolist() == [0.5] and list(frame["query"]) != list(safe["query"])
    assert html_text("<i>x</i>") == "&lt;i&gt;x&lt;/i&gt;"


# -- in the app ------------------------------------------------------------------------------------
@pytest.fixture
def ws_root(tmp_path, monkeypatch):
    root = build_app_workspace(tmp_path / "ws")
    add_users(root, alice="curator")
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    return root


def label_evil(root: Path, grade: str = "partial"):
    with Workspace.open(root) as ws:
        return Labels(ws).record(user="alice", schema="PO", query_key="q", query_text="BRAF?",
                                 doc_id=EVIL, grade=grade, model_version="bm25")


def assert_literal(message: str) -> None:
    """The message shows the id's characters and renders none of its markup."""
    assert EVIL in shown(message)
    assert live_markdown(message) == [], message
    assert "![px](" not in message  # no image element


def test_undo_message_shows_the_document_id_literally(ws_root):
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    label_evil(ws_root)
    at.button(key="undo").click().run()
    assert not at.exception and label_rows(ws_root) == []
    (message,) = [i.value for i in at.info if "Undid your label" in i.value]
    assert_literal(message)
    assert shown(message) == f"Undid your label 'partial' on {EVIL}."


def test_relabel_message_shows_the_document_id_literally(ws_root):
    label_evil(ws_root)
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    at.switch_page("app_pages/review.py").run()
    with Workspace.open(ws_root) as ws:
        (target,) = Labels(ws).find(user="alice")
    at.selectbox(key="rv_label").set_value(target.id).run()
    at.selectbox(key="rv_new_grade").set_value("complete").run()
    at.button(key="rv_relabel").click().run()
    assert not at.exception
    (message,) = [s.value for s in at.success if "Relabelled" in s.value]
    assert_literal(message)
    assert shown(message) == f"Relabelled {EVIL} as complete."
