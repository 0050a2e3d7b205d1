"""EDEL margin classes as data: which mu a (query, document) example gets.

A margin table has two parts (see ``assets/margins/po.toml`` for the token legend):

* ``positive``: the g pattern of a cited abstract (one bit per slot in schema order, 1 = the
  abstract mentions the record's entity) -> mu;
* ``negative``: f patterns of another record against the query (one token per query slot, then
  the answer) -> mu, first match wins; plus ``bm25`` and ``random`` for the non-KB negatives.

Which table a schema uses, first that exists: ``WS/margins/<schema>.toml`` (the workspace's
override), ``assets/margins/<schema>.toml`` (PO and PTM exactly as EDEL's Tables 7-8), and for
other schemas the derived rule of TRAINING.md 1.4: ``assets/margins/binary.toml`` for one query
slot, :func:`derived_table` for more.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from kb_sources.errors import CurationError
from kb_sources.schema import Schema, SchemaError, read_toml

#: Negative-pattern tokens for one query slot and what they accept.
SLOT_TOKENS: dict[str, frozenset[str]] = {
    "1": frozenset({"1"}), "1*": frozenset({"1*"}), "0": frozenset({"0"}),
    "0*": frozenset({"0*"}), "S": frozenset({"1", "1*"}), "D": frozenset({"0", "0*"}),
    "-": frozenset({"1", "1*", "0", "0*"}),
}
ANSWER_TOKENS: dict[str, frozenset[str]] = {
    "1": frozenset({"1"}), "0": frozenset({"0"}), "-": frozenset({"0", "1"})}


@dataclass(frozen=True)
class MarginTable:
    """Margin classes of one schema.

    Attributes:
        schema: Schema name the table is for ("*binary*" for the shared binary table).
        source: Where the numbers come from.
        positive: g pattern ("101") -> mu.
        negative: (f-pattern tokens, mu) in file order; the first match wins.
        bm25: mu of BM25 negatives.
        random: mu of random corpus negatives.
        origin: The file (or rule) the table was read from.
    """

    schema: str
    source: str
    positive: Mapping[str, float]
    negative: tuple[tuple[tuple[str, ...], float], ...]
    bm25: float
    random: float
    origin: str = ""
    n_slots: int = field(default=0)

    def positive_mu(self, pattern: str) -> float:
        """mu of a positive whose abstract has this g pattern."""
        try:
            return self.positive[pattern]
        except KeyError:
            raise CurationError(
                f"Margin table {self.origin} has no positive class for g pattern {pattern!r}; "
                f"it lists {', '.join(self.positive)}. Add the pattern to the table") from None

    def negative_class(self, tokens: Sequence[str]) -> tuple[str, float] | None:
        """(pattern, mu) of another record with these f tokens; None: not a negative."""
        for pattern, mu in self.negative:
            if len(pattern) != len(tokens):
                continue
            *slots, answer = pattern
            if all(t in SLOT_TOKENS[p] for p, t in zip(slots, tokens[:-1], strict=True)) \
                    and tokens[-1] in ANSWER_TOKENS[answer]:
                return " ".join(pattern), mu
        return None

    def to_json(self) -> dict[str, Any]:
        return {"schema": self.schema, "source": self.source, "origin": self.origin,
                "positive": dict(self.positive),
                "negative": {" ".join(p): mu for p, mu in self.negative},
                "bm25": self.bm25, "random": self.random}


def parse_table(data: Mapping[str, Any], origin: str, n_query_slots: int) -> MarginTable:
    """Validate a margin table read from TOML.

    Raises:
        CurationError: A pattern has the wrong length or unknown tokens, or a mu is not a number
            in [0, 2]; the message names the file and the entry.
    """
    def mu_of(key: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 2:
            raise CurationError(f"{origin}: {key} = {value!r}; expected a margin angle mu in "
                                "[0, 2] (0 = positive, 1 = orthogonal)")
        return float(value)

    n_slots = n_query_slots + 1
    positive = {}
    for pattern, value in dict(data.get("positive", {})).items():
        if len(pattern) != n_slots or set(pattern) - {"0", "1"}:
            raise CurationError(f"{origin}: positive pattern {pattern!r} must be {n_slots} "
                                "characters of 0/1 (one per slot, answer last)")
        positive[pattern] = mu_of(f"positive.{pattern}", value)
    missing = ["".join(b) for b in itertools.product("10", repeat=n_slots)
               if "".join(b) not in positive]
    if missing:
        raise CurationError(f"{origin}: positive patterns {', '.join(missing)} have no margin; "
                            "every g pattern needs one")
    negative = []
    for key, value in dict(data.get("negative", {})).items():
        if key in ("bm25", "random"):
            continue
        tokens = tuple(key.split())
        if (len(tokens) != n_slots or any(t not in SLOT_TOKENS for t in tokens[:-1])
                or tokens[-1] not in ANSWER_TOKENS):
            raise CurationError(
                f"{origin}: negative pattern {key!r} must be {n_query_slots} query-slot tokens "
                f"({', '.join(SLOT_TOKENS)}) and an answer token (1, 0, -), space-separated")
        negative.append((tokens, mu_of(f"negative.{key}", value)))
    neg = dict(data.get("negative", {}))
    return MarginTable(
        schema=str(data.get("schema", "")), source=str(data.get("source", "")),
        positive=positive, negative=tuple(negative),
        bm25=mu_of("negative.bm25", neg.get("bm25", 0.8)),
        random=mu_of("negative.random", neg.get("random", 1.0)),
        origin=origin, n_slots=n_slots)


def derived_table(n_query_slots: int) -> MarginTable:
    """The n-ary rule of TRAINING.md 1.4 for Q >= 2 query slots (PO for Q = 2, PTM for Q = 3).

    Positives by (matched query slots m, answer matched): (Q, yes) 0; (Q-1, yes) 0.2 if Q = 2
    else 0.4; (Q, no) or two or more matches 0.6; exactly one 1.0 if Q = 2 else 0.8; none 1.2 if
    Q = 2 else 1.0. Negatives: first query entity shared with an answer 0.6, without 0.8; other
    first entity 0.8 with an answer, 1.0 without; BM25 0.8; random 1.0 (Q = 2) or 1.2.
    """
    q = n_query_slots
    positive = {}
    for bits in itertools.product("10", repeat=q + 1):
        pattern = "".join(bits)
        matched, answer = pattern[:q].count("1"), pattern[q] == "1"
        total = matched + answer
        if matched == q and answer:
            mu = 0.0
        elif matched == q - 1 and answer:
            mu = 0.2 if q == 2 else 0.4
        elif total >= 2:
            mu = 0.6
        elif total == 1:
            mu = 1.0 if q == 2 else 0.8
        else:
            mu = 1.2 if q == 2 else 1.0
        positive[pattern] = mu
    rest = ("-",) * (q - 1)
    negative = ((("S", *rest, "1"), 0.6), (("S", *rest, "0"), 0.8),
                (("D", *rest, "1"), 0.8), (("D", *rest, "0"), 1.0))
    return MarginTable(schema=f"*{q}-ary*", source="derived rule (TRAINING.md 1.4)",
                       positive=positive, negative=negative, bm25=0.8,
                       random=1.0 if q == 2 else 1.2, origin="derived rule", n_slots=q + 1)


def margin_table(schema: Schema, workspace_root: Path | None = None) -> MarginTable:
    """The margin table a schema trains with (workspace override, shipped file, or rule)."""
    q = len(schema.query_slots)
    candidates: list[tuple[str, Any]] = []
    if workspace_root is not None:
        override = Path(workspace_root) / "margins" / f"{schema.name}.toml"
        if override.is_file():
            candidates.append((str(override), override))
    shipped = resources.files("assets") / "margins"
    for name in (f"{schema.name.lower()}.toml", "binary.toml" if q == 1 else ""):
        if name and (shipped / name).is_file():
            candidates.append((f"assets/margins/{name}", shipped / name))
    if not candidates:
        return derived_table(q)
    origin, path = candidates[0]
    try:
        data = read_toml(Path(str(path)), "margin table")
    except SchemaError as exc:
        raise CurationError(str(exc)) from exc
    return parse_table(data, origin, q)
