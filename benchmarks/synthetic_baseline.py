"""Write NLM-like PubMed baseline and update files from the abstract pool (synthetic, seeded).

Each file is a gzip ``<PubmedArticleSet>`` in NLM's layout (DOCTYPE, ``PubmedArticle`` /
``MedlineCitation`` with ``<PMID Version>``, ``DateRevised``, journal, title, structured
abstract, MeSH headings, ``PubmedData``), then one ``<DeleteCitation>`` block, plus NLM's
``NAME.md5`` sidecar. Texts are the pool's sentences recombined (``benchmarks/bm25_scaling.py``'s
method) under new PMIDs from 40,000,001 up, so nothing collides with real PubMed ids.

``--baseline B --updates U --per-file N``: B baseline files of N new citations each
(``baseline/pubmed25n0001.xml.gz`` ...), then U update files (``updatefiles/...``, numbered on)
of which ``--revised`` are revisions of earlier citations (new title and DateRevised), the rest
new, with ``--deleted`` earlier PMIDs in each update file's ``DeleteCitation``.

Usage:
    python benchmarks/synthetic_baseline.py OUT --baseline 48 --updates 2 --per-file 20000
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np
from bm25_scaling import _SENTENCE, load_pool

HEAD = ('<?xml version="1.0" ?>\n<!DOCTYPE PubmedArticleSet PUBLIC "-//NLM//DTD PubMedArticle, '
        '1st January 2025//EN" "https://dtd.nlm.nih.gov/ncbi/pubmed/out/pubmed_250101.dtd">\n'
        "<PubmedArticleSet>\n")
FIRST_PMID = 40_000_001
MESH = ("Humans", "Neoplasms", "Mutation", "Melanoma", "Lung Neoplasms", "Antineoplastic Agents",
        "Proto-Oncogene Proteins B-raf", "Mice", "Signal Transduction", "Female", "Male")


@dataclass(frozen=True)
class Plan:
    """What to write."""

    baseline: int
    updates: int
    per_file: int
    revised: int
    deleted: int
    seed: int = 13


def article(pmid: int, title: str, sentences: list[str], rng: np.random.Generator,
            revised: str = "2024-12-15") -> str:
    year, month, day = revised.split("-")
    half = max(1, len(sentences) // 2)
    mesh = "".join(f'<MeshHeading><DescriptorName UI="D{i:06d}" MajorTopicYN="N">{escape(m)}'
                   f"</DescriptorName></MeshHeading>"
                   for i, m in enumerate(rng.choice(MESH, size=3, replace=False)))
    return (
        f'<PubmedArticle><MedlineCitation Status="MEDLINE" Owner="NLM">'
        f'<PMID Version="1">{pmid}</PMID><DateRevised><Year>{year}</Year><Month>{month}'
        f"</Month><Day>{day}</Day></DateRevised><Article PubModel=\"Print\"><Journal>"
        f"<JournalIssue><PubDate><Year>{2000 + pmid % 25}</Year></PubDate></JournalIssue>"
        f"<Title>Journal of synthetic {['oncology', 'genetics', 'pharmacology'][pmid % 3]}"
        f"</Title></Journal><ArticleTitle>{escape(title)}</ArticleTitle><Abstract>"
        f'<AbstractText Label="BACKGROUND">{escape(" ".join(sentences[:half]))}</AbstractText>'
        f'<AbstractText Label="RESULTS">{escape(" ".join(sentences[half:]))}</AbstractText>'
        f"</Abstract>{_authors(pmid)}<Language>eng</Language><PublicationTypeList>"
        f'<PublicationType UI="D016428">Journal Article</PublicationType>'
        f"</PublicationTypeList></Article><MeshHeadingList>{mesh}</MeshHeadingList>"
        f"</MedlineCitation><PubmedData>{_history(pmid)}<PublicationStatus>ppublish"
        f'</PublicationStatus><ArticleIdList><ArticleId IdType="pubmed">{pmid}</ArticleId>'
        f"</ArticleIdList>{_references(pmid)}</PubmedData></PubmedArticle>\n")


def _authors(pmid: int, n: int = 6) -> str:
    """An AuthorList of the size of a typical PubMed record (authors with affiliations)."""
    return '<AuthorList CompleteYN="Y">' + "".join(
        f'<Author ValidYN="Y"><LastName>Author{(pmid + i) % 997}</LastName><ForeName>'
        f"Name{i}</ForeName><Initials>N</Initials><AffiliationInfo><Affiliation>Department "
        f"of Synthetic Medicine {i}, University of Nowhere, 1000 Example Street, City "
        f"{pmid % 50}, Country.</Affiliation></AffiliationInfo></Author>"
        for i in range(n)) + "</AuthorList>"


def _history(pmid: int) -> str:
    return "<History>" + "".join(
        f'<PubMedPubDate PubStatus="{s}"><Year>{2000 + pmid % 25}</Year><Month>{m}</Month>'
        f"<Day>{d}</Day></PubMedPubDate>"
        for s, m, d in (("received", 1, 5), ("accepted", 3, 9), ("pubmed", 4, 1))) + "</History>"


def _references(pmid: int, n: int = 15) -> str:
    """A ReferenceList with cited PMIDs (real records cite ~30; every 3rd has no PMID)."""
    refs = []
    for i in range(n):
        cited = 10_000_000 + (pmid * 31 + i * 7919) % 30_000_000
        ids = (f'<ArticleIdList><ArticleId IdType="pubmed">{cited}</ArticleId></ArticleIdList>'
               if i % 3 else "")
        refs.append(f"<Reference><Citation>Author{i} A, Other B. A cited study number {i}. "
                    f"J Synth. {1990 + i}; {i}:{i * 10}-{i * 10 + 9}.</Citation>{ids}</Reference>")
    return "<ReferenceList>" + "".join(refs) + "</ReferenceList>"


class Texts:
    """Seeded titles and sentence mixes of the pool."""

    def __init__(self, pool: list[tuple[str, str]], seed: int) -> None:
        self.titles = [t for t, _ in pool]
        self.sentences = [_SENTENCE.split(a) for _, a in pool]
        self.rng = np.random.default_rng(seed)

    def one(self) -> tuple[str, list[str]]:
        a, b, c = self.rng.integers(0, len(self.titles), size=3)
        mixed = self.sentences[a] + self.sentences[b][: len(self.sentences[b]) // 2] \
            + self.sentences[c][-2:]
        keep = sorted(self.rng.permutation(len(mixed))[: max(3, len(self.sentences[a]))])
        return self.titles[a], [mixed[i] for i in keep]


def write_file(path: Path, articles: Iterator[str], deleted: list[int]) -> int:
    """Write one gzip file and its ``.md5``; returns the number of citations."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=6) as fh:
        fh.write(HEAD)
        for text in articles:
            fh.write(text)
            n += 1
        if deleted:
            fh.write("<DeleteCitation>" + "".join(f'<PMID Version="1">{p}</PMID>'
                                                  for p in deleted) + "</DeleteCitation>\n")
        fh.write("</PubmedArticleSet>\n")
    digest = hashlib.md5(path.read_bytes(), usedforsecurity=False).hexdigest()
    path.with_name(path.name + ".md5").write_text(f"MD5({path.name})= {digest}\n")
    return n


def write_corpus(out: Path, plan: Plan, data_dir: Path) -> dict[str, int]:
    """Write the files of ``plan`` under ``out``; returns what the workspace should end with."""
    texts = Texts(load_pool(data_dir), plan.seed)
    rng = np.random.default_rng(plan.seed + 7)
    next_pmid = FIRST_PMID
    live: set[int] = set()
    number = 0

    def fresh(n: int) -> Iterator[str]:
        nonlocal next_pmid
        for _ in range(n):
            pmid, next_pmid = next_pmid, next_pmid + 1
            live.add(pmid)
            title, sentences = texts.one()
            yield article(pmid, title, sentences, rng)

    for _ in range(plan.baseline):
        number += 1
        write_file(out / "baseline" / f"pubmed25n{number:04d}.xml.gz", fresh(plan.per_file), [])
    for _ in range(plan.updates):
        number += 1
        pool = np.array(sorted(live))
        picks = rng.choice(pool, size=min(len(pool), plan.revised + plan.deleted),
                           replace=False)
        revised, deleted = picks[: plan.revised], [int(p) for p in picks[plan.revised:]]

        def update(revised: np.ndarray = revised) -> Iterator[str]:
            for pmid in revised:
                title, sentences = texts.one()
                yield article(int(pmid), "Revised: " + title, sentences, rng, "2025-03-01")
            yield from fresh(plan.per_file - len(revised))

        write_file(out / "updatefiles" / f"pubmed25n{number:04d}.xml.gz", update(), deleted)
        live -= set(deleted)
    return {"files": number, "documents": len(live), "pmids_written": next_pmid - FIRST_PMID}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--baseline", type=int, default=3)
    parser.add_argument("--updates", type=int, default=1)
    parser.add_argument("--per-file", type=int, default=1000)
    parser.add_argument("--revised", type=int, default=100)
    parser.add_argument("--deleted", type=int, default=50)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--data", default=os.environ.get("KBCURATE_DATA", "../shared/data"))
    args = parser.parse_args()
    plan = Plan(args.baseline, args.updates, args.per_file, args.revised, args.deleted, args.seed)
    print(write_corpus(args.out, plan, Path(args.data)))


if __name__ == "__main__":
    main()
