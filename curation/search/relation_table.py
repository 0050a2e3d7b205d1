"""Partial relations as a table: the ``kbcurate relations`` listing and the Curate page's
relation table draw the same frame; :func:`curation_order` decides which relation a list offers
first.

A variant named without a position ("G-to-A", "CC to TT", "deletion": PubTator's tmVar ids
``c|SUB|G||A``, ``c|DEL||TGAG`` with an empty position field) is one entity in every abstract
that names such a change, whatever the gene: its partial relation merges unrelated genes and
diseases, and, most cited, would be the first relation of ``variant_disease``. A relation whose
query is only such variants is *vague* (:func:`vague_relation`) and comes after every other one.
A variant next to a gene (PO's "BRAF · MUTATION") is not vague: the gene anchors it.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from curation.matching.patterns import VARIANT_TYPES
from curation.store.relations import PartialRelation
from kb_sources.types import Entity

#: tmVar change kinds whose position is the id's fourth field (``p|SUB|V|600|E``); the others
#: (``c|DEL|1234|T``) have it third.
_REF_FIRST = frozenset({"SUB", "FS"})


def positionless_variant(entity: Entity) -> bool:
    """Whether ``entity`` is a variant named without a position: a tmVar id with an empty
    position field ("c|SUB|G||A"), or, without an id, a name with no digit ("G-to-A")."""
    if entity.type.lower() not in VARIANT_TYPES:
        return False
    ident = entity.id.strip()
    if not ident:
        return not any(c.isdigit() for c in entity.text)
    fields = ident.split("|")
    if len(fields) < 3:  # an rsID or another scheme's id: a position of its own
        return False
    position = fields[3] if fields[1].upper() in _REF_FIRST and len(fields) > 3 else fields[2]
    return not position.strip()


def vague_relation(partial: PartialRelation) -> bool:
    """Whether the relation's query names nothing but position-less variants."""
    entities = [e for ents in partial.query.values() for e in ents]
    return bool(entities) and all(positionless_variant(e) for e in entities)


def curation_order(rows: Sequence[PartialRelation]) -> list[PartialRelation]:
    """``rows`` with the vague relations (:func:`vague_relation`) last, the order otherwise
    kept: what a relation list offers first, and where the worklist starts."""
    return sorted(rows, key=vague_relation)


def relations_frame(rows: list[PartialRelation], schema_answer: str) -> pd.DataFrame:
    """Partial relations as a table (one row each): query slots, known answers, PMIDs."""
    records = []
    for p in rows:
        rec = {slot: " / ".join(e.text for e in ents) for slot, ents in p.query.items()}
        answers = p.answer_texts()
        rec[f"known {schema_answer}"] = "; ".join(answers[:5]) + (" ..." if len(answers) > 5
                                                                   else "")
        rec["n_answers"] = len(answers)
        rec["n_pmids"] = len(p.pmids)
        rec["sources"] = ",".join(p.sources)
        records.append(rec)
    return pd.DataFrame.from_records(records)
