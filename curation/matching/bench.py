"""Measured matcher quality: "given a normalised entity, find its mentions" on PubTator gold.

For every document and every normalised id annotated in it, the entity is built the way a KB
would give it: the id, its most frequent mention text across the corpus file as the name and every
other mention text of that id in the file as synonyms (``held_out=True`` leaves out the
document's own mentions, a stricter check of normalisation). The matcher predicts spans of that
entity in the document text (title + " " + abstract):

* a predicted span is correct when it overlaps a gold span of the same id (precision);
* a gold span is found when a predicted span of its id overlaps it (recall).

Results are reported per entity type (the reader maps PubTator types to gene, variant,
chemical, disease, species, cell_line). Run it as ``kbcurate match-bench FILE [--json]``; FILE is
PubTator or BioC JSON (:mod:`curation.matching.bench_corpora`).

Built from every mention text of the corpus, an entity already has the spellings a paper uses,
so that figure says little about how the matcher finds a gene a KB names by its symbol only.
:func:`run_symbol_bench` measures that: each gene id becomes an entity with one upper-case
symbol (:func:`kb_symbol`: "B-Raf" -> BRAF, "HER-2" -> HER2, "c-Met" -> MET), and recall counts
the id's gold mentions that spell that symbol (Akt1, akt1, B-Raf, HER-2, c-Met; not "protein
kinase B"); precision counts predicted spans overlapping any gold mention of the id.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curation.matching.bench_corpora import read_bench_docs
from curation.matching.matcher import EntityMatcher, MatchConfig
from curation.matching.normalize import fold, is_symbol
from kb_sources.types import Document, Entity

logger = logging.getLogger(__name__)

_IdKey = tuple[str, str]  # (entity type, normalised id)


@dataclass(frozen=True)
class MatchBenchResult:
    """Span recall and precision of one entity type.

    Attributes:
        recall: Gold spans found / gold spans.
        precision: Correct predicted spans / predicted spans.
        gold: Gold spans (an annotation with several ids counts once per id).
        predicted: Predicted spans.
        true_positive: Predicted spans that overlap a gold span of their id.
        gold_found: Gold spans overlapped by a predicted span of their id.
        documents: Documents with at least one gold span of the type.
    """

    recall: float
    precision: float
    gold: int
    predicted: int
    true_positive: int
    gold_found: int
    documents: int

    @property
    def false_positive(self) -> int:
        """Predicted spans that overlap no gold span of their id."""
        return self.predicted - self.true_positive

    def to_json(self) -> dict[str, Any]:
        """The JSON object ``match-bench --json`` prints for one type."""
        return {"recall": round(self.recall, 4), "precision": round(self.precision, 4),
                "gold": self.gold, "predicted": self.predicted,
                "true_positive": self.true_positive, "false_positive": self.false_positive,
                "gold_found": self.gold_found, "documents": self.documents}


@dataclass
class _Tally:
    gold: int = 0
    predicted: int = 0
    true_positive: int = 0
    gold_found: int = 0
    documents: int = 0

    def result(self) -> MatchBenchResult:
        recall = self.gold_found / self.gold if self.gold else 0.0
        precision = self.true_positive / self.predicted if self.predicted else 0.0
        return MatchBenchResult(recall, precision, self.gold, self.predicted,
                                self.true_positive, self.gold_found, self.documents)


def gold_spans(doc: Document) -> dict[_IdKey, list[tuple[int, int]]]:
    """(type, id) -> gold (start, end) spans of one document; annotations without ids skipped."""
    spans: dict[_IdKey, list[tuple[int, int]]] = defaultdict(list)
    for ann in doc.annotations:
        for ident in ann.ids:
            spans[(ann.type, ident)].append((ann.start, ann.end))
    return dict(spans)


def mention_counts(docs: Iterable[Document]) -> dict[_IdKey, Counter[str]]:
    """(type, id) -> Counter of its mention texts over the documents."""
    counts: dict[_IdKey, Counter[str]] = defaultdict(Counter)
    for doc in docs:
        for ann in doc.annotations:
            for ident in ann.ids:
                counts[(ann.type, ident)][ann.text] += 1
    return dict(counts)


def entity_for(key: _IdKey, texts: Counter[str]) -> Entity:
    """The normalised entity of an id: most frequent mention as text, the others as synonyms.

    Without mention texts the entity has only its id (a variant id still gives its keys).
    """
    ranked = [t for t, _ in sorted(texts.items(), key=lambda x: (-x[1], x[0])) if t.strip()]
    if not ranked:
        return Entity("", key[0], key[1])
    return Entity(ranked[0], key[0], key[1], tuple(ranked[1:]))


def run_match_bench(
    path: str | Path,
    types: Sequence[str] | None = None,
    *,
    matcher: EntityMatcher | None = None,
    held_out: bool = False,
) -> dict[str, MatchBenchResult]:
    """Span recall/precision per entity type of the matcher on a PubTator file.

    Args:
        path: PubTator file (plain or gzip) with gold annotations.
        types: Entity types to evaluate (default: every type in the file).
        matcher: The matcher to evaluate (default: ``EntityMatcher()``).
        held_out: Build each entity without the document's own mention texts.

    Returns:
        Entity type -> result, sorted by type.

    Raises:
        InputFormatError: The file is neither PubTator nor BioC JSON (annotations that do not
            fit the text are skipped with a warning).
    """
    docs = read_bench_docs(path)
    corpus = mention_counts(docs)
    matcher = matcher or EntityMatcher(MatchConfig())
    wanted = {t.lower() for t in types} if types else None
    tallies: dict[str, _Tally] = defaultdict(_Tally)
    for doc in docs:
        own = mention_counts([doc]) if held_out else {}
        seen_types: set[str] = set()
        for key, golds in gold_spans(doc).items():
            if wanted is not None and key[0] not in wanted:
                continue
            texts = corpus[key] - own[key] if held_out else corpus[key]
            tally = tallies[key[0]]
            tally.gold += len(golds)
            seen_types.add(key[0])
            _score(tally, matcher.spans(entity_for(key, texts), doc.text), golds)
        for etype in seen_types:
            tallies[etype].documents += 1
    logger.info("match-bench %s: %d documents", path, len(docs))
    return {etype: tallies[etype].result() for etype in sorted(tallies)}


_CELLULAR = re.compile(r"^[cC][-\u2010\u2011](?=\w)")  # c-Met, c-MYC: the c- prefix
_LETTER_HYPHEN = re.compile(r"^([A-Za-z])[-\u2010\u2011](?=[A-Za-z]{2})")  # B-Raf -> BRaf
_DIGIT_HYPHEN = re.compile(r"(?<=[A-Za-z])[-\u2010\u2011](?=\d+$)")  # HER-2 -> HER2
_PLURAL = re.compile(r"(?<=[A-Z0-9]{2})s$")  # MMPs -> MMP


def symbol_key(text: str) -> str:
    """Spelling-free key of a symbol mention: without a c- prefix or a plural s, then
    :func:`fold` ("c-Met", "MET", "Met" -> "met"; "B-Raf", "BRAF" -> "braf"; "MMPs" -> "mmp")."""
    return fold(_PLURAL.sub("", _CELLULAR.sub("", text.strip())))


def kb_symbol(texts: Counter[str]) -> str | None:
    """The upper-case symbol a KB would store for a gene id, from its mention texts.

    Mentions without spaces are grouped by :func:`symbol_key`; the group with the most
    mentions among those with a symbol-like member (a digit or two capitals) wins, and its most
    frequent spelling, without a c- prefix, a hyphen after a first single letter or before a
    final number, or a plural s, is upper-cased ("B-Raf" -> BRAF, "HER-2" -> HER2, "c-Met" ->
    MET, "Akt1" -> AKT1, "MMPs" -> MMP). None when the id has no symbol-like mention
    ("insulin" only).
    """
    groups: dict[str, Counter[str]] = defaultdict(Counter)
    for text, n in texts.items():
        t = text.strip()
        if t and not any(ch.isspace() for ch in t) and any(ch.isalpha() for ch in t):
            groups[symbol_key(t)][t] += n
    symbolic = {k: g for k, g in groups.items()
                if k and any(is_symbol(_CELLULAR.sub("", t)) for t in g)}
    if not symbolic:
        return None
    key = max(symbolic, key=lambda k: (sum(symbolic[k].values()), k))
    spelling = min(symbolic[key].items(), key=lambda x: (-x[1], x[0]))[0]
    spelling = _LETTER_HYPHEN.sub(r"\1", _CELLULAR.sub("", spelling.strip()))
    return _PLURAL.sub("", _DIGIT_HYPHEN.sub("", spelling)).upper()


def run_symbol_bench(path: str | Path, *, matcher: EntityMatcher | None = None,
                     ) -> MatchBenchResult:
    """Gene mentions found from the symbol alone (see the module docstring and
    :func:`kb_symbol`).

    Every gene id of a document with a :func:`kb_symbol` is searched as ``Entity(symbol,
    "gene", id)`` without synonyms. Gold (recall): the id's mentions in the document that
    spell the symbol (same :func:`symbol_key`); a predicted span is correct when it overlaps
    any gold mention of the id.

    Raises:
        InputFormatError: The file is neither PubTator nor BioC JSON.
    """
    docs = read_bench_docs(path)
    corpus = mention_counts(docs)
    symbols = {key: kb_symbol(texts) for key, texts in corpus.items() if key[0] == "gene"}
    matcher = matcher or EntityMatcher(MatchConfig())
    tally = _Tally()
    for doc in docs:
        searched = False
        for key, golds in gold_spans(doc).items():
            symbol = symbols.get(key)
            if not symbol:
                continue
            spelled = [(a.start, a.end) for a in doc.annotations
                       if a.type == key[0] and key[1] in a.ids
                       and symbol_key(a.text) == symbol_key(symbol)]
            spans = matcher.spans(Entity(symbol, "gene", key[1]), doc.text)
            tally.gold += len(spelled)
            tally.predicted += len(spans)
            tally.true_positive += sum(any(_overlap(s.start, s.end, g) for g in golds)
                                       for s in spans)
            tally.gold_found += sum(any(_overlap(s.start, s.end, g) for s in spans)
                                    for g in spelled)
            searched = True
        tally.documents += searched
    logger.info("match-bench symbols %s: %d documents", path, len(docs))
    return tally.result()


def _score(tally: _Tally, spans: Sequence[Any], golds: list[tuple[int, int]]) -> None:
    tally.predicted += len(spans)
    tally.true_positive += sum(any(_overlap(s.start, s.end, g) for g in golds) for s in spans)
    tally.gold_found += sum(any(_overlap(s.start, s.end, g) for s in spans) for g in golds)


def _overlap(start: int, end: int, gold: tuple[int, int]) -> bool:
    return start < gold[1] and gold[0] < end


def results_to_json(results: dict[str, MatchBenchResult]) -> str:
    """``{"<type>": {"recall": .., "precision": .., "gold": .., "predicted": .., ...}}``."""
    return json.dumps({t: r.to_json() for t, r in results.items()}, indent=2)


def format_table(results: dict[str, MatchBenchResult]) -> str:
    """A plain-text table: type, documents, gold, predicted, false positives, recall,
    precision."""
    lines = [f"{'type':<12}{'docs':>6}{'gold':>8}{'predicted':>11}{'fp':>7}{'recall':>9}"
             f"{'precision':>11}"]
    for etype, r in results.items():
        lines.append(f"{etype:<12}{r.documents:>6}{r.gold:>8}{r.predicted:>11}"
                     f"{r.false_positive:>7}{r.recall:>9.3f}{r.precision:>11.3f}")
    return "\n".join(lines)


def match_bench_report(path: str | Path, types: Sequence[str] | None = None, *,
                       as_json: bool = False, held_out: bool = False,
                       symbols: bool = False) -> str:
    """What ``kbcurate match-bench FILE [--types ...] [--json]`` prints; with ``symbols``, the
    row ``gene-symbol`` of :func:`run_symbol_bench` follows the per-type rows.

    Raises:
        InputFormatError: The file is missing or neither PubTator nor BioC JSON.
    """
    results = run_match_bench(path, types, held_out=held_out)
    if symbols:
        results["gene-symbol"] = run_symbol_bench(path)
    return results_to_json(results) if as_json else format_table(results)
