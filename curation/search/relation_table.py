"""Partial relations as a table: the ``kbcurate relations`` listing and the Curate page's
relation table draw the same frame."""

from __future__ import annotations

import pandas as pd

from curation.store.relations import PartialRelation


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
