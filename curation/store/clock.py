"""The workspace's clock: every timestamp column stores UTC ISO-8601 text from :func:`utcnow`."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> str:
    """Current UTC time as ISO-8601 text (what every timestamp column stores)."""
    return datetime.now(UTC).isoformat(timespec="seconds")
