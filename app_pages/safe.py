"""Untrusted text made safe to show: escaped for Streamlit markdown, or for plotly's HTML labels.

Streamlit renders markdown in far more places than ``st.markdown``: messages (``st.info`` and
kin), captions, widget labels, ``help`` tooltips, expander and tab labels, progress and spinner
texts, and the options of radios, pills and segmented controls. Its dialect adds GitHub-flavoured
autolinks (``www.x.org``, ``http://...``, ``a@b.org``), images, ``:color[...]`` directives,
``:material/icon:`` icons, emoji shortcodes and ``$...$`` LaTeX. A document id, title, entity
name, user name, schema name or an error message that quotes input reaches those calls only through
:func:`md`; ``tests/test_markdown_safety.py`` checks every such call in ``app.py`` and
``app_pages/`` on the source.

Emoji shortcodes (``:smile:``) are swapped in on rendered text, after escapes are resolved; but
Streamlit loads that plugin only when the raw string holds a ``:word:`` run, which escaped colons
never form, so an escaped ``:smile:`` stays text unless the trusted part of the string has one.

Plotly draws titles, axis labels, legends and hover text with a small HTML subset (``<a href>``,
``<b>``, ...): text for a figure goes through :func:`html_text` or :func:`html_frame`.
"""

from __future__ import annotations

import html
import re

import pandas as pd

#: Every ASCII character with a meaning in Streamlit's markdown: CommonMark and GFM syntax
#: (emphasis, code, links, images, headings, lists, tables, strikethrough, raw HTML, entities),
#: autolinks (``:``, ``/``, ``.``, ``@``), directives and icons (``:``), LaTeX (``$``).
_MARKDOWN_CHARS = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=&^/@])")
#: ZERO WIDTH SPACE: invisible, and neither a word character nor white space to the autolink rules.
ZERO_WIDTH = "\u200b"
#: Where GFM autolink literals start: ``http(s)://`` (cut after the colon), ``www.`` (cut before
#: the dot) and the ``@`` of an address, ``name@host.domain`` (cut before it; ``ndcg@10`` is no
#: address and stays as it is).
_AUTOLINK_STARTS = re.compile(
    r"(?<=https:)(?=//)|(?<=http:)(?=//)|(?<=www)(?=\.)|(?<=[\w.+-])(?=@[-\w]+\.[-\w])",
    re.IGNORECASE)


def md(text: object) -> str:
    """``text`` as Streamlit markdown that shows exactly ``text``, on one line.

    Contract: every markdown, GFM and Streamlit metacharacter is backslash-escaped (a CommonMark
    backslash escape always renders the bare character), and runs of whitespace, newlines
    included, become one space, so the result can be placed anywhere in a markdown string
    (inside ``**...**`` too) and never starts a block, a link, an image, an autolink, raw HTML, a
    directive, an icon or a formula. GFM autolink literals (``http://``, ``https://``, ``www.``,
    ``name@host``) are matched on the text *after* escapes are resolved, so a backslash cannot
    stop them: a zero-width space (:data:`ZERO_WIDTH`) goes after ``http:``/``https:``, between
    ``www`` and its dot, and before the ``@`` of an address. It is invisible, so the curator
    reads the same text (a copy of it holds the invisible character). Not for code spans
    (backslashes are literal there) or for ``unsafe_allow_html=True`` (use :func:`html.escape`).

    Args:
        text: Anything; ``str(text)`` is escaped (an exception gives its message).

    Returns:
        The escaped text: ``md("![p](x.png)")`` is ``\\!\\[p\\]\\(x\\.png\\)``.
    """
    unlinked = _AUTOLINK_STARTS.sub(ZERO_WIDTH, " ".join(str(text).split()))
    return _MARKDOWN_CHARS.sub(r"\\\1", unlinked)


def html_text(text: object) -> str:
    """``text`` escaped for plotly's HTML-like labels (titles, axis and legend labels, hover)."""
    return html.escape(str(text), quote=True)


def html_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` whose text cells and column names are escaped with :func:`html_text`,
    for a plotly figure (its hover text, legend and axis labels show cells and column names)."""
    out = frame.rename(columns=lambda c: html_text(c) if isinstance(c, str) else c)
    for column in out.columns:
        if out[column].dtype == object or pd.api.types.is_string_dtype(out[column]):
            out[column] = out[column].map(lambda v: html_text(v) if isinstance(v, str) else v)
    return out
