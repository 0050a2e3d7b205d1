"""The PubMed query each of 20 CIViC relations builds, as a markdown table (issue 37 item 1).

Usage::

    python benchmarks/pubmed_queries.py [--data-dir DIR] [--max-forms 12] [--uniprot]

Imports the CIViC 01-Aug-2021 evidence export (and, with ``--uniprot``, the Swiss-Prot sample,
whose gene names join the genes they share a symbol with) into a temporary workspace and prints,
for a fixed, varied choice of PO partial relations (point mutations, a codon, an indel, fusions,
amplification, expression, exon changes, a compound), the E-utilities term
:func:`curation.pubmed.query.partial_pubmed_query` builds and what it left out. It prints the time
per query too; a curator should recognise each query as one they would type.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from curation.pubmed.query import partial_pubmed_query  # noqa: E402
from curation.store.config import resolve_data_dir  # noqa: E402
from curation.store.importer import import_file  # noqa: E402
from curation.store.relations import Relations  # noqa: E402
from curation.store.workspace import Workspace  # noqa: E402

CIVIC = "civic/01-Aug-2021-ClinicalEvidenceSummaries.tsv.gz"
UNIPROT = "uniprot_sample/swissprot_entries_sample.dat.gz"
#: (gene, variant) of the 20 relations shown, as CIViC writes them.
CHOICE: tuple[tuple[str, str], ...] = (
    ("BRAF", "V600E"), ("EGFR", "L858R"), ("KRAS", "G12D"), ("PIK3CA", "H1047R"),
    ("BRAF", "V600"), ("KRAS", "G12/G13"), ("ERBB2", "Y772_A775DUP"), ("ALK", "EML4-ALK"),
    ("ABL1", "BCR-ABL T315I"), ("ROS1", "CD74-ROS1 G2032R"), ("ALK", "ALK FUSIONS"),
    ("ERBB2", "AMPLIFICATION"), ("MET", "AMPLIFICATION"), ("ERBB2", "OVEREXPRESSION"),
    ("CD274", "EXPRESSION"), ("PTEN", "LOSS"), ("EGFR", "EXON 19 DELETION"),
    ("MET", "EXON 14 SKIPPING MUTATION"), ("FLT3", "ITD"), ("BRAF", "V600E/K and AMPLIFICATION"),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=None, help="the shared data folder")
    parser.add_argument("--max-forms", type=int, default=12, help="forms per entity")
    parser.add_argument("--uniprot", action="store_true", help="also import the Swiss-Prot sample")
    args = parser.parse_args(argv)
    data = resolve_data_dir(args.data_dir)
    with tempfile.TemporaryDirectory() as tmp, Workspace.init(Path(tmp) / "ws") as ws:
        import_file(ws, "kb", "civic", data / CIVIC, progress=False)
        if args.uniprot:
            import_file(ws, "kb", "uniprot", data / UNIPROT, progress=False)
        partials = {(p.query["gene"][0].text, p.query["variant"][0].text): p
                    for p in Relations(ws).partial("PO")
                    if len(p.query.get("gene", ())) == 1 and len(p.query.get("variant", ())) == 1}
        missing = [pair for pair in CHOICE if pair not in partials]
        if missing:
            print(f"not in {CIVIC}: {missing}", file=sys.stderr)
            return 1
        print("| # | gene | variant (CIViC) | PubMed query | left out / how |")
        print("|---|---|---|---|---|")
        seconds = []
        for i, pair in enumerate(CHOICE, start=1):
            start = time.perf_counter()
            query = partial_pubmed_query(ws, partials[pair], max_forms=args.max_forms)
            seconds.append(time.perf_counter() - start)
            notes = "; ".join(f"{s.slot}: {s.note}" for s in query.slots
                              if s.note and ("left out" in s.note or "codon" in s.note))
            print(f"| {i} | {pair[0]} | {pair[1]} | `{query.text}` | {notes} |")
    print(f"\n{len(seconds)} queries, {1000 * sum(seconds) / len(seconds):.1f} ms per query "
          f"(max {1000 * max(seconds):.1f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
