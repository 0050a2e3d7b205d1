"""A hand-made disease -> gene KB where the learned ranker has something to learn (issue 36).

Sixty made-up diseases (so the seeded 60/20/20 split puts 24 queries in the held-out pool, more
than the gate's 20), each with one cited abstract that names a gene in a sentence with the
disease, and three decoys that repeat the disease but name no gene. BM25 ranks the decoys first
(they repeat the query's words) and the entity rerank cannot tell them apart from the cited one
(all name the disease), so bm25 + rerank puts the cited abstract fourth; a ranker trained on the
KB learns that a gene beside the disease matters and puts it first.
"""

from __future__ import annotations

from curation.store.importer import import_items
from kb_sources.types import Document, Entity, Relation

_SYLLABLES = ("ba", "ko", "mi", "tu", "re", "sa", "lo", "ne")
#: Made-up disease names ("Bako disease", ...): sixty, all different.
DISEASES = [f"{a}{b}{c} disease".capitalize() for a in _SYLLABLES[:4] for b in _SYLLABLES
            for c in ("x", "q")][:60]
GENES = ("BRAF", "TP53", "EGFR", "KRAS", "NRAS", "IDH1", "CFTR", "BRCA1", "ABL1", "FLT3",
         "RB1", "APC")


def gene_of(i: int) -> str:
    return GENES[i % len(GENES)]


def learnable_documents(n: int = 60) -> list[Document]:
    docs = []
    for i, disease in enumerate(DISEASES[:n]):
        gene = gene_of(i)
        docs.append(Document(f"{1000 + i}", f"{gene} variants",
                             f"Mutations of {gene} cause {disease} in many families.",
                             source="handmade"))
        for j in range(3):
            docs.append(Document(f"{2000 + 10 * i + j}", f"{disease}: clinical course {j}",
                                 f"Patients with {disease} were followed. {disease} outcomes "
                                 f"and {disease} care were recorded in clinic {j}.",
                                 source="handmade"))
    return docs


def learnable_relations(n: int = 60) -> list[Relation]:
    return [Relation("disease_gene", "handmade", f"r{i}",
                     {"disease": (Entity(d, "disease"),), "gene": (Entity(gene_of(i), "gene"),)},
                     (f"{1000 + i}",))
            for i, d in enumerate(DISEASES[:n])]


def make_learnable_workspace(ws, n: int = 60):
    """Import the documents and relations of the first ``n`` diseases into ``ws`` (20: 8
    held-out queries, fewer than the gate's 20); returns it."""
    import_items(ws, [*learnable_documents(n), *learnable_relations(n)], reader="test",
                 path="handmade", progress=False)
    return ws
