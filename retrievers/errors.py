"""Errors raised by the retrieval engines.

Every error a caller can fix (a bad ``k``, an unknown retriever name or option, a malformed
document, a folder that holds no saved index) is a :class:`RetrieverError`. It subclasses
``ValueError`` so plain Python callers can catch it without importing this module; the CLI and the
app catch it in one place and show the message. Messages say what arrived, what was expected and
how to fix it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


class RetrieverError(ValueError):
    """A retriever was given input it cannot use; the message says how to fix it."""


def unknown_name(kind: str, name: object, available: Iterable[str]) -> RetrieverError:
    """Build the error for an unknown name, listing the valid ones.

    Args:
        kind: What was looked up ("retriever", "option of retriever 'bm25'", "pooling").
        name: The name that arrived.
        available: The valid names, in the order to show them.

    Returns:
        A RetrieverError whose message ends with "Available options: ...".
    """
    options = ", ".join(sorted(str(a) for a in available)) or "(none)"
    return RetrieverError(f"Unknown {kind} {name!r}. Available options: {options}")


def check_k(k: object) -> int:
    """Validate a requested number of hits.

    Args:
        k: The number of hits asked for.

    Returns:
        ``k`` as an int.

    Raises:
        RetrieverError: ``k`` is not a positive integer.
    """
    if isinstance(k, bool) or not isinstance(k, int):
        raise RetrieverError(
            f"k must be a positive integer (the number of hits to return), got {k!r} of type "
            f"{type(k).__name__}; pass an int such as k=10"
        )
    if k <= 0:
        raise RetrieverError(
            f"k must be a positive integer (the number of hits to return), got k={k}; "
            "set k to 1 or more (for example k=10)"
        )
    return k


def check_options(retriever: str, options: Mapping[str, Any],
                  allowed: Iterable[str]) -> None:
    """Fail on option names a retriever does not accept.

    Raises:
        RetrieverError: Names the unknown option and lists the accepted ones.
    """
    allowed = list(allowed)
    for key in options:
        if key not in allowed:
            raise unknown_name(f"option of retriever {retriever!r}:", key, allowed)
