"""A hand-made disease -> gene KB with enough query entities for train, dev and test splits."""

from __future__ import annotations

from curation.store.importer import import_items
from kb_sources.types import Document, Entity, Relation

#: (disease, gene) pairs: ten diseases, so the seeded 60/20/20 split has test queries.
PAIRS = [("melanoma", "BRAF"), ("melanoma", "NRAS"), ("glioma", "IDH1"),
         ("glioma", "TP53"), ("cystic fibrosis", "CFTR"), ("breast cancer", "BRCA1"),
         ("breast cancer", "BRCA2"), ("leukemia", "ABL1"), ("leukemia", "FLT3"),
         ("retinoblastoma", "RB1"), ("neurofibromatosis", "NF1"), ("colon cancer", "APC"),
         ("colon cancer", "KRAS"), ("lung cancer", "EGFR"), ("thyroid cancer", "RET")]


def loop_documents() -> list[Document]:
    docs = []
    for i, (disease, gene) in enumerate(PAIRS, 1):
        docs.append(Document(str(100 + i), f"{gene} in {disease}",
                             f"Mutations of {gene} cause {disease} in many families.",
                             source="handmade"))
        docs.append(Document(str(200 + i), f"Clinical course of {disease}",
                             f"Patients with {disease} were followed for ten years.",
                             source="handmade"))
    for i in range(1, 21):
        docs.append(Document(str(300 + i), f"Cohort study {i}",
                             f"Participants in cohort {i} reported diet and sleep.",
                             source="handmade"))
    return docs


def loop_relations() -> list[Relation]:
    return [Relation("disease_gene", "handmade", f"r{i}",
                     {"disease": (Entity(d, "disease"),), "gene": (Entity(g, "gene"),)},
                     (str(100 + i),))
            for i, (d, g) in enumerate(PAIRS, 1)]


def make_loop_workspace(ws):
    """Import the documents and relations into ``ws``; returns it."""
    import_items(ws, [*loop_documents(), *loop_relations()], reader="test", path="handmade",
                 progress=False)
    return ws
