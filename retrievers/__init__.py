"""Ranking engines over ``(doc_id, text)`` documents: BM25, dense (bi-encoder + FAISS), hybrid.

Knows documents and vectors only; nothing about knowledge bases, entities or workspaces.
Start with :func:`~retrievers.registry.build_retriever` and
:func:`~retrievers.registry.load_retriever`.
Importing this package loads neither torch nor faiss.
"""

from __future__ import annotations

from retrievers.base import Doc, Hit, Retriever
from retrievers.errors import RetrieverError
from retrievers.registry import build_retriever, load_retriever, retriever_names

__all__ = ["Doc", "Hit", "Retriever", "RetrieverError", "build_retriever", "load_retriever",
           "retriever_names"]
