"""What ranked a result list, in a curator's words (issue 36, item 10).

A search records its model-version label on every label row (``bm25+rerank``,
``hybrid:rrf(bm25+dense:disease_gene-minilm-1-1377e9af0ca0-5d1c2e3f4a5b)``, ``ranked ·
PO-ranker@2``): exact, for the audit, but not for reading. :func:`ranking_label` turns one into
the name a curator knows from the Models page and the retriever menu:

=========================================================  =========================================
``bm25``                                                   BM25
``bm25+rerank``                                            BM25 + entity rerank
``dense:disease_gene-minilm-1-1377e9af0ca0-<digest>``      dense disease_gene-minilm@1
``dense:all-MiniLM-L6-v2-<digest>``                        dense all-MiniLM-L6-v2
``hybrid:rrf(bm25+dense:disease_gene-minilm-1-...)``       hybrid of BM25 and disease_gene-minilm@1
``ranked · PO-ranker@2``                                   learned ranker PO-ranker@2
=========================================================  =========================================

Versions are read with :meth:`curation.store.identities.ModelVersionId.find`, so every form a
label row ever held is named the same way. Hex digests never reach the curator.
"""

from __future__ import annotations

import re

from curation.store.identities import RANKED, RERANK, ModelVersionId

__all__ = ["ranking_label"]

#: Retriever names as a curator reads them.
NAMES = {"bm25": "BM25", "tantivy": "BM25 (tantivy)", "dense": "dense", "hybrid": "hybrid"}
_DIGEST = re.compile(r"-[0-9a-f]{12}(?=-|$)")
_HYBRID = re.compile(r"^hybrid:(\w+)\((.*)\)$", re.DOTALL)
_FUSIONS = {"rrf": "", "score": " (score fusion)"}


def ranking_label(model_version: str | None) -> str:
    """The curator's name of what ranked a list, from its model-version label.

    Args:
        model_version: A search result's (or label row's) ``model_version``.

    Returns:
        A short plain-text name ("hybrid of BM25 and disease_gene-minilm@1", "BM25 + entity
        rerank", "learned ranker PO-ranker@2"); "an unknown ranking" for an empty label. The
        caller escapes it for markdown like any text.
    """
    text = str(model_version or "").strip()
    if not text:
        return "an unknown ranking"
    rerank = text.endswith(RERANK)
    if rerank:
        text = text[:-len(RERANK)].rstrip()
    return _base_name(text) + (" + entity rerank" if rerank else "")


def _base_name(text: str) -> str:
    """The name of a label without its "+rerank" suffix."""
    if text.split("·")[0].strip() == RANKED:
        version = ModelVersionId.find(text)  # None: "ranked · active", before it was pinned
        return "learned ranker" + (f" {version}" if version else " (active version)")
    hybrid = _HYBRID.match(text)
    if hybrid:
        parts = [_component(p) for p in _split_components(hybrid[2])]
        fusion = _FUSIONS.get(hybrid[1], f" ({hybrid[1]} fusion)")
        return f"hybrid{fusion} of {' and '.join(parts)}"
    if text.startswith("dense:"):
        return f"dense {_component(text)}"
    return NAMES.get(text, _plain(text))


def _split_components(inner: str) -> list[str]:
    """The component labels of a hybrid's ``a+b+c`` (a "+" inside parentheses stays)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(inner):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "+" and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    return [p.strip() for p in parts if p.strip()]


def _component(label: str) -> str:
    """One retriever of a hybrid (or a dense label) by the model version it names; a dense
    model without a registry version by its model name, digests dropped."""
    version = ModelVersionId.find(label)
    if version is not None:
        return str(version)
    if label.startswith("dense:"):
        return _plain(label[len("dense:"):])
    return NAMES.get(label, _plain(label))


def _plain(text: str) -> str:
    """A label no rule knows, with its hex digests dropped."""
    return _DIGEST.sub("", text) or text
