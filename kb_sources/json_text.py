"""JSON that may be untrusted (a manifest beside a model, a record kept in the workspace
database), parsed so that every way it can be bad is one clear error.

``json.loads`` raises ``ValueError`` for text that is not JSON, but ``RecursionError`` for
arrays or objects nested deeper than Python's recursion limit (``[`` x 100,000), which no
``except ValueError`` catches; a huge file would be read whole first. :func:`parse_json` and
:func:`read_json` turn all of these into one :class:`~kb_sources.errors.InputFormatError` that
names where the text came from, what was expected and how to fix it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NoReturn

from kb_sources.errors import InputFormatError

#: Largest JSON text parsed (a ranker or model manifest is a few hundred KB at most).
MAX_JSON_BYTES = 64_000_000
#: Deepest nesting of arrays/objects accepted (manifests nest 4 or 5 deep). Text nested a little
#: less deep than the recursion limit parses, but ``json.dumps`` of it fails further down a stack.
MAX_JSON_DEPTH = 64
_TOO_DEEP = "JSON arrays/objects are nested too deeply to parse"


def parse_json(text: str | bytes, where: str | Path, *, expected: str, fix: str,
               max_bytes: int = MAX_JSON_BYTES) -> Any:
    """The value of JSON ``text``.

    Args:
        text: The JSON text (bytes are read as UTF-8).
        where: The file, or the record ("the manifest of X in the workspace database"), named
            in the error.
        expected: What the text should be ("a ranker manifest (a JSON object)").
        fix: How the user can fix it ("remove the folder or re-run the round").
        max_bytes: Longer text is refused without being parsed.

    Raises:
        InputFormatError: Too long, not UTF-8, not JSON, nested more than
            :data:`MAX_JSON_DEPTH` deep, or holding a number too long to convert.
    """
    if len(text) > max_bytes:
        _fail(where, f"{len(text):,} bytes of JSON, more than the {max_bytes:,} read",
              expected, fix)
    try:
        value = json.loads(text)
        if _deeper_than(value, MAX_JSON_DEPTH):
            _fail(where, f"{_TOO_DEEP} (more than {MAX_JSON_DEPTH} levels)", expected, fix)
        return value
    except json.JSONDecodeError as exc:
        problem = f"not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
    except UnicodeDecodeError as exc:
        problem = f"not UTF-8 text (byte {exc.start})"
    except RecursionError:
        problem = _TOO_DEEP
    except ValueError as exc:  # an integer of more than 4,300 digits
        problem = f"a JSON number cannot be converted ({str(exc).split(':')[0]})"
    _fail(where, problem, expected, fix)


def read_json(path: str | Path, *, expected: str, fix: str,
              max_bytes: int = MAX_JSON_BYTES) -> Any:
    """The value of the JSON file at ``path`` (its size checked before it is read).

    Raises:
        OSError: The file cannot be read (the caller says what that means for it).
        InputFormatError: As :func:`parse_json`; the message names the file.
    """
    p = Path(path)
    size = p.stat().st_size
    if size > max_bytes:
        _fail(p, f"{size:,} bytes, more than the {max_bytes:,} read", expected, fix)
    return parse_json(p.read_bytes(), p, expected=expected, fix=fix, max_bytes=max_bytes)


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether arrays/objects in ``value`` nest more than ``limit`` deep (no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _fail(where: str | Path, problem: str, expected: str, fix: str) -> NoReturn:
    raise InputFormatError(where, problem, expected=expected, fix=fix)
