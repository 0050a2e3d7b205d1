"""Safe reading of local input files: gzip detection, strict UTF-8, TSV headers, size limits.

Every reader goes through these helpers so that bad input (truncated gzip, bad UTF-8, a NUL byte,
an empty file, a wrong delimiter, a duplicate or missing column, an absurdly long line or field)
ends in one :class:`~kb_sources.errors.InputFormatError` naming the file and line. Lines are read
with a bounded size, so a small gzip that expands to one huge line is refused without being held
in memory. Checks of single values (PMIDs, document ids, text fields) live in
:mod:`kb_sources.checks`.
"""

from __future__ import annotations

import gzip
import io
import unicodedata
import zlib
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path

from kb_sources.checks import check_text
from kb_sources.errors import InputFormatError

#: Longest line (bytes, without its line break) accepted in line-oriented formats.
MAX_LINE_BYTES = 1_000_000

_GZIP_MAGIC = b"\x1f\x8b"

#: Bytes (after gzip) looked at by :func:`refuse_binary`.
SNIFF_BYTES = 4096
#: Share of control or non-UTF-8 characters above which a file is binary, not text in another
#: encoding (random bytes: ~60%; a Latin-1 abstract: well under 5%).
BINARY_SHARE = 0.3
_TEXT_CONTROLS = frozenset("\t\n\r\f\v")


def is_gzip(path: str | Path) -> bool:
    """True when the file starts with the gzip magic bytes (whatever its extension)."""
    with open(path, "rb") as fh:
        return fh.read(2) == _GZIP_MAGIC


@contextmanager
def open_binary(path: str | Path) -> Iterator[io.BufferedIOBase]:
    """Open a local file for binary reading, transparently decompressing gzip.

    Raises:
        InputFormatError: The file does not exist, is empty or cannot be opened.
    """
    p = Path(path)
    if not p.is_file():
        raise InputFormatError(
            p, "file not found", expected="an existing file", fix="check the path"
        )
    if p.stat().st_size == 0:
        raise InputFormatError(
            p, "file is empty", expected="at least a header or one record",
            fix="re-export or re-download the file",
        )
    try:
        raw_file = open(p, "rb")  # closed by the with below
    except OSError as exc:
        raise InputFormatError(
            p, f"cannot open the file ({exc.strerror})", expected="a readable file",
            fix="check the file's permissions",
        ) from exc
    with raw_file as raw:
        if raw.read(2) == _GZIP_MAGIC:
            raw.seek(0)
            with gzip.GzipFile(fileobj=raw) as gz:
                yield gz  # type: ignore[misc]
        else:
            raw.seek(0)
            yield raw  # type: ignore[misc]


def binary_problem(path: str | Path) -> str | None:
    """Why the start of a file is binary rather than text, or None when it may be text.

    Looks at the first :data:`SNIFF_BYTES` bytes (decompressed when gzip). A UTF-16 file, or
    UTF-8 text with a few bad bytes, is left to :func:`iter_lines`, whose message names the line
    and says how to convert it.

    Raises:
        InputFormatError: The file is missing or empty (as :func:`open_binary`).
    """
    try:
        with open_binary(path) as fh:
            head = fh.read(SNIFF_BYTES)
    except (EOFError, gzip.BadGzipFile, zlib.error, OSError):
        return None  # iter_lines reports corrupt compressed data
    if not head or head.startswith((b"\xff\xfe", b"\xfe\xff")) or _utf16_ascii(head):
        return None
    text = head.decode("utf-8", errors="replace")
    bad = sum(1 for c in text if c == "\ufffd"
              or (unicodedata.category(c) == "Cc" and c not in _TEXT_CONTROLS))
    if bad <= BINARY_SHARE * len(text):
        return None
    return (f"{bad:,} of {len(text):,} characters in its first {len(head):,} bytes are control "
            "characters or not UTF-8")


def _utf16_ascii(head: bytes) -> bool:
    """True when every other byte is NUL: UTF-16 text without a byte-order mark."""
    return any(len(half) > 1 and half.count(0) >= 0.9 * len(half)
               for half in (head[0::2], head[1::2]))


def refuse_binary(path: str | Path, format_name: str, expected: str, fix: str) -> None:
    """Raise when ``path`` is binary (see :func:`binary_problem`), naming the format expected.

    Raises:
        InputFormatError: "file is not {format_name}: it is binary or not decodable ...".
    """
    problem = binary_problem(path)
    if problem:
        raise InputFormatError(
            path, f"file is not {format_name}: it is binary or not decodable as UTF-8 text "
            f"({problem})", expected=expected, fix=fix,
        )


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` (1-based, newline stripped) from a text or gzip file.

    Lines are read with a bounded ``readline``, so an over-long line (a 1 MB gzip can expand to
    one 1 GB line) is refused after :data:`MAX_LINE_BYTES` bytes without being held in memory.
    Decodes strictly as UTF-8 (a BOM is dropped) and refuses NUL bytes (a UTF-16 or binary file);
    the message names the first bad byte with its line and column.

    Raises:
        InputFormatError: Empty file, truncated/corrupt gzip, invalid UTF-8, a NUL byte, an
            over-long line, or a file with no non-blank line.
    """
    p = Path(path)
    line_no = 0
    seen_content = False
    try:
        with open_binary(p) as fh:
            for line_no, raw in _raw_lines(fh, p):
                text = _decode(p, line_no, raw)
                seen_content = seen_content or bool(text.strip())
                yield line_no, text
    except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
        raise InputFormatError(
            p, f"compressed data is truncated or corrupt after line {line_no} ({exc})",
            expected="a complete gzip file", fix="re-download or re-compress the file",
        ) from exc
    if not seen_content:
        raise InputFormatError(
            p, "file has no content (only blank lines)", expected="at least one record",
            fix="re-export or re-download the file",
        )


def _raw_lines(fh: io.BufferedIOBase, p: Path) -> Iterator[tuple[int, bytes]]:
    """Raw lines without their line break, each read with ``readline(MAX_LINE_BYTES + 2)``."""
    limit = MAX_LINE_BYTES
    line_no = 0
    while raw := fh.readline(limit + 2):  # + 2: room for "\r\n" after a line of `limit` bytes
        line_no += 1
        raw = raw.rstrip(b"\r\n")
        if len(raw) > limit:
            raise InputFormatError(
                p, f"line is longer than {limit:,} bytes (reading stopped there)", line=line_no,
                expected=f"lines of at most {limit:,} bytes",
                fix="check that the file is in the expected format (not binary or "
                "a single-line dump)",
            )
        yield line_no, raw


def _decode(p: Path, line_no: int, raw: bytes) -> str:
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise InputFormatError(
            p, f"NUL byte at column {nul + 1}", line=line_no, expected="UTF-8 text without NUL "
            "bytes", fix="the file may be UTF-16 or binary: convert it to UTF-8 (e.g. iconv -f "
            "utf-16 -t utf-8), or remove the NUL bytes (tr -d '\\000')",
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFormatError(
            p, f"invalid UTF-8 byte {raw[exc.start:exc.start + 1]!r} at column "
            f"{exc.start + 1}", line=line_no, expected="UTF-8 text",
            fix="convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)",
        ) from exc
    return text[1:] if line_no == 1 and text.startswith("\ufeff") else text


def iter_tsv(
    path: str | Path,
    required: Sequence[str],
    *,
    delimiter: str = "\t",
    format_name: str = "TSV",
    header_fix: str = "",
) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield ``(line_number, row)`` from a delimited file with a header row.

    Quotes are not special (``csv.QUOTE_NONE``): CIViC and OncoKB free text contains stray quotes.
    Blank lines are skipped.

    Args:
        path: File to read (plain or gzip).
        required: Columns that must be in the header.
        delimiter: Field separator.
        format_name: Name of the format for error messages ("CIViC ClinicalEvidenceSummaries").
        header_fix: Extra advice appended to a missing-column error ("or correct the mapping").

    Raises:
        InputFormatError: Missing/duplicate columns, wrong delimiter, a row with more fields than
            the header, or a field over :data:`~kb_sources.checks.MAX_FIELD_CHARS`.
    """
    p = Path(path)
    lines = iter_lines(p)
    header: list[str] | None = None
    for line_no, line in lines:
        if not line.strip():
            continue
        if header is None:
            header = _check_header(p, line_no, line, required, delimiter, format_name,
                                   header_fix)
            continue
        fields = line.split(delimiter)  # quotes are not special (csv.QUOTE_NONE semantics)
        if len(fields) > len(header):
            raise InputFormatError(
                p, f"row has {len(fields)} fields but the header has {len(header)}",
                line=line_no, expected=f"at most {len(header)} {_delim_name(delimiter)}-separated "
                "fields per row", fix="check for unescaped delimiters in free-text fields",
            )
        for name, value in zip(header, fields, strict=False):
            check_text(p, name, value, line=line_no)
        fields += [""] * (len(header) - len(fields))
        yield line_no, dict(zip(header, fields, strict=True))


def _check_header(
    p: Path, line_no: int, line: str, required: Sequence[str], delimiter: str, format_name: str,
    header_fix: str = "",
) -> list[str]:
    header = [h.strip() for h in line.split(delimiter)]
    seen: set[str] = set()
    for name in header:
        if name and name in seen:
            raise InputFormatError(
                p, f"duplicate column {name!r} in the header", line=line_no,
                expected=f"a {format_name} header with unique column names",
                fix="rename or remove the repeated column",
            )
        seen.add(name)
    missing = [c for c in required if c not in seen]
    if missing:
        hint = "check the file is a " + format_name + " export"
        for other in (",", ";", "\t", "|"):
            if other != delimiter and len(line.split(other)) > len(header):
                hint = (f"the header looks {_delim_name(other)}-separated; save the file "
                        f"{_delim_name(delimiter)}-separated")
                break
        raise InputFormatError(
            p, f"missing column(s) {', '.join(repr(m) for m in missing)}", line=line_no,
            expected=f"a {format_name} header with columns {', '.join(required)}",
            fix=f"{hint}, {header_fix}" if header_fix else hint,
        )
    return header


def _delim_name(delimiter: str) -> str:
    names = {"\t": "tab", ",": "comma", ";": "semicolon", "|": "pipe"}
    return names.get(delimiter, repr(delimiter))


def read_header(path: str | Path) -> str:
    """The first non-blank line of a text or gzip file (the header of a TSV), read lazily.

    Raises:
        InputFormatError: The file is missing, empty, not UTF-8 or not valid gzip.
    """
    with closing(iter_lines(path)) as lines:
        for _, line in lines:
            if line.strip():
                return line
    return ""


def split_list(value: str, separators: str = ",;") -> list[str]:
    """Split a list-valued field on any of ``separators``, dropping blanks and whitespace."""
    items = [value]
    for sep in separators:
        items = [part for item in items for part in item.split(sep)]
    return [item.strip() for item in items if item.strip()]
