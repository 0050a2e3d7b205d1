"""PubTator reader: documents, annotations and document-level relations."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import pytest

from kb_sources.errors import InputFormatError, UnknownNameError
from kb_sources.pubtator import (
    entity_index,
    entity_type,
    parse_ids,
    read_pubtator_docs,
    read_pubtator_kb,
    relation_slots,
)
from kb_sources.registry import get_reader
from kb_sources.schema import builtin_schemas
from kb_sources.types import Annotation, Document, Entity, Relation


def _split(items: list[Document | Relation]) -> tuple[list[Document], list[Relation]]:
    docs = [i for i in items if isinstance(i, Document)]
    rels = [i for i in items if isinstance(i, Relation)]
    return docs, rels


# ------------------------------------------------------------------------------ pure functions


@pytest.mark.parametrize(
    ("raw", "ours"),
    [("GeneOrGeneProduct", "gene"), ("Gene", "gene"), ("DiseaseOrPhenotypicFeature", "disease"),
     ("SpecificDisease", "disease"), ("ChemicalEntity", "chemical"), ("Chemical", "chemical"),
     ("SequenceVariant", "variant"), ("ProteinMutation", "variant"), ("DNAMutation", "variant"),
     ("SNP", "variant"), ("OrganismTaxon", "species"), ("CellLine", "cell_line"),
     ("Pathway", "pathway")],
)
def test_entity_type(raw: str, ours: str) -> None:
    assert entity_type(raw) == ours


def test_parse_ids_keeps_pipes_of_tmvar_ids() -> None:
    assert parse_ids("3172,3651;6927", "gene") == ("3172", "3651", "6927")
    assert parse_ids("D003110|D009369", "disease") == ("D003110", "D009369")
    assert parse_ids("p|SUB|V|600|E", "variant") == ("p|SUB|V|600|E",)
    assert parse_ids("rs113488022;p|SUB|V|600|E", "variant") == ("rs113488022", "p|SUB|V|600|E")
    assert parse_ids("-", "disease") == ()


def test_entity_index_most_frequent_text_and_composite_ids() -> None:
    annotations = [
        Annotation(0, 4, "HNF6", "gene", ("3175",)),
        Annotation(5, 10, "HNF-6", "gene", ("3175",)),
        Annotation(11, 16, "HNF-6", "gene", ("3175",)),
        Annotation(17, 40, "learning and memory", "disease", ("D007859", "D008569")),
    ]
    index = entity_index(annotations)
    assert index["3175"] == Entity("HNF-6", "gene", "3175", ("HNF6",))
    assert index["D007859|D008569"].text == "learning and memory"
    assert index["D008569"].type == "disease"


def test_relation_slots_choose_schema_by_types_in_either_order() -> None:
    gene, disease = Entity("BRAF", "gene", "673"), Entity("melanoma", "disease", "D008545")
    chem, var = Entity("aspirin", "chemical", "D001241"), Entity("V600E", "variant", "x")
    assert relation_slots(disease, gene) == ("disease_gene", {"disease": (disease,),
                                                              "gene": (gene,)})
    assert relation_slots(gene, disease)[0] == "disease_gene"
    assert relation_slots(gene, chem) == ("chemical_gene", {"chemical": (chem,), "gene": (gene,)})
    assert relation_slots(disease, var)[1] == {"variant": (var,), "disease": (disease,)}
    assert relation_slots(gene, gene) == ("pair", {"subject": (gene,), "object": (gene,)})
    assert relation_slots(chem, disease)[1] == {"subject": (chem,), "object": (disease,)}


# ---------------------------------------------------------------------- hand-made fixture file


def test_fixture_documents_and_annotations(fixtures_dir: Path) -> None:
    docs = list(read_pubtator_docs(fixtures_dir / "pubtator_sample.txt"))
    assert [d.doc_id for d in docs] == ["99000001", "99000002", "99000003"]
    assert [len(d.annotations) for d in docs] == [13, 8, 2]
    assert {d.source for d in docs} == {"pubtator_sample"}
    for doc in docs:
        for ann in doc.annotations:
            assert doc.text[ann.start:ann.end] == ann.text
    first = docs[0].annotations
    assert first[1] == Annotation(5, 10, "V600E", "variant", ("p|SUB|V|600|E",))
    composite = docs[1].annotations[1]  # 7-column line (BC5CDR composite mention)
    assert (composite.type, composite.ids) == ("disease", ("D018500", "D051437"))
    assert docs[1].annotations[-1].ids == ("3172", "6927")
    assert docs[2].abstract == "" and docs[2].annotations[1].ids == ()


def test_fixture_kb_yields_document_then_its_relations(fixtures_dir: Path) -> None:
    items = list(read_pubtator_kb(fixtures_dir / "pubtator_sample.txt", source="mycorpus"))
    kinds = ["D" if isinstance(i, Document) else "R" for i in items]
    assert "".join(kinds) == "DRRRRDRRD"
    _, rels = _split(items)
    by_id = {r.record_id: r for r in rels}
    dg = by_id["99000001:Association:673:D008545"]
    assert dg.schema == "disease_gene" and dg.source == "mycorpus"
    assert dg.slots["disease"] == (Entity("melanoma", "disease", "D008545",
                                          ("cutaneous melanoma",)),)
    assert dg.slots["gene"] == (Entity("BRAF", "gene", "673"),)
    assert dg.pmids == ("99000001",)
    assert dg.attributes == {"relation_type": "Association", "novel": "No"}
    cg = by_id["99000001:Negative_Correlation:D000077484:673"]
    assert cg.schema == "chemical_gene"
    assert cg.slots["chemical"][0].synonyms == ("Vemurafenib",)
    vd = by_id["99000001:Positive_Correlation:p|SUB|V|600|E:D008545"]
    assert vd.schema == "variant_disease"
    assert vd.slots["variant"] == (Entity("V600E", "variant", "p|SUB|V|600|E", ("p.V600E",)),)
    pair = by_id["99000001:Negative_Correlation:D000077484:p|SUB|V|600|E"]
    assert pair.schema == "pair" and pair.slot_text("object") == "V600E"
    cid = by_id["99000002:CID:D008094:D018500|D051437"]  # BC5CDR style: 4 columns, no novelty
    assert cid.attributes == {"relation_type": "CID"}
    assert cid.slot_text("object") == "nephrogenic diabetes insipidus and renal failure"
    schemas = builtin_schemas()
    for rel in rels:
        schemas[rel.schema].validate_relation(rel)


def test_default_relation_source(fixtures_dir: Path) -> None:
    items = list(read_pubtator_kb(fixtures_dir / "pubtator_sample.txt"))
    docs, rels = _split(items)
    assert {r.source for r in rels} == {"pubtator"}
    assert {d.source for d in docs} == {"pubtator_sample"}


# ------------------------------------------------------------------------------------ real data


@pytest.mark.parametrize(
    ("name", "n_docs", "n_annotations", "n_relations", "schemas"),
    [
        ("Train", 400, 13351, 4178,
         {"pair": 1974, "disease_gene": 1045, "chemical_gene": 621, "variant_disease": 538}),
        ("Dev", 100, 3533, 1162,
         {"pair": 531, "disease_gene": 293, "variant_disease": 184, "chemical_gene": 154}),
        ("Test", 100, 3535, 1163,
         {"pair": 549, "disease_gene": 295, "variant_disease": 171, "chemical_gene": 148}),
    ],
)
def test_biored_counts(data_dir: Path, name: str, n_docs: int, n_annotations: int,
                       n_relations: int, schemas: dict[str, int]) -> None:
    docs, rels = _split(list(read_pubtator_kb(data_dir / "biored" / f"{name}.PubTator.gz",
                                              source="biored")))
    assert len(docs) == n_docs
    assert sum(len(d.annotations) for d in docs) == n_annotations
    assert len(rels) == n_relations
    assert Counter(r.schema for r in rels) == schemas
    assert len({r.record_id for r in rels}) == n_relations
    for doc in docs:
        text = doc.text
        assert all(text[a.start:a.end] == a.text for a in doc.annotations)
    # Every relation id resolves to an annotated entity (composite ids included).
    assert all(e.type != "entity" for r in rels for slot in r.slots.values() for e in slot)


def test_biored_first_train_document(data_dir: Path) -> None:
    items = read_pubtator_kb(data_dir / "biored" / "Train.PubTator.gz")
    doc = next(items)
    assert doc.doc_id == "10491763"
    assert doc.title.startswith("Hepatocyte nuclear factor-6: associations")
    rels = [next(items) for _ in range(3)]
    assert isinstance(next(items), Document)
    assert [r.record_id for r in rels] == [
        "10491763:Association:3175:D003924",
        "10491763:Positive_Correlation:D005947:3630",
        "10491763:Association:D005947:D003924",
    ]
    assert [r.schema for r in rels] == ["disease_gene", "chemical_gene", "pair"]
    gene = rels[0].slots["gene"][0]
    assert (gene.text, gene.id) == ("HNF-6", "3175")
    assert gene.synonyms == ("Hepatocyte nuclear factor-6", "hepatocyte nuclear factor (HNF)-6")
    assert rels[0].slots["disease"][0].text == "Type II diabetes"
    assert rels[0].attributes == {"relation_type": "Association", "novel": "No"}


def test_tmvar_variants(data_dir: Path) -> None:
    for name, n_docs, n_ann in (("tmVar_train", 334, 967), ("tmVar_test", 166, 464)):
        docs = list(read_pubtator_docs(data_dir / "tmvar" / f"{name}.PubTator.txt.gz"))
        assert (len(docs), sum(len(d.annotations) for d in docs)) == (n_docs, n_ann)
        assert {a.type for d in docs for a in d.annotations} == {"variant"}
    first = docs[0].annotations[0]
    assert (first.text, first.ids) == ("c.737delC", ("c|DEL|737|C",))


def test_ncbi_disease_real_offset_mismatch(data_dir: Path) -> None:
    path = data_dir / "ncbi_disease" / "NCBItrainset_corpus.txt.gz"
    with pytest.raises(InputFormatError,
                       match=r"NCBItrainset_corpus\.txt\.gz, line 3248, record 10923035: mention "
                             r"'generalized epilepsy.*does not match the text at 711-761"):
        list(read_pubtator_docs(path))
    docs = list(read_pubtator_docs(path, mismatch="skip"))
    assert len(docs) == 593  # 592 PMIDs; 8528200 appears twice in the corpus file
    assert sum(len(d.annotations) for d in docs) == 5144  # 5145 lines, 1 skipped
    test_docs = list(read_pubtator_docs(data_dir / "ncbi_disease" / "NCBItestset_corpus.txt.gz"))
    assert (len(test_docs), sum(len(d.annotations) for d in test_docs)) == (100, 960)


# ------------------------------------------------------------------------------ malformed input

GOOD = "1|t|BRAF in melanoma.\n1|a|BRAF is mutated.\n1\t0\t4\tBRAF\tGene\t673\n"


def _write(tmp_path: Path, name: str, data: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def test_empty_file(tmp_path: Path) -> None:
    with pytest.raises(InputFormatError, match=r"empty\.txt: file is empty"):
        list(read_pubtator_docs(_write(tmp_path, "empty.txt", "")))


def test_truncated_gzip(tmp_path: Path, fixtures_dir: Path) -> None:
    blob = gzip.compress((fixtures_dir / "pubtator_sample.txt").read_bytes() * 50)
    path = _write(tmp_path, "cut.txt.gz", blob[: len(blob) // 2])
    with pytest.raises(InputFormatError, match=r"cut\.txt\.gz: compressed data is truncated"):
        list(read_pubtator_kb(path))


def test_bad_utf8(tmp_path: Path) -> None:
    path = _write(tmp_path, "latin1.txt", GOOD.encode() + b"2|t|Caf\xe9 and cancer\n")
    with pytest.raises(InputFormatError, match=r"latin1\.txt, line 4: invalid UTF-8"):
        list(read_pubtator_docs(path))


def test_absurdly_long_abstract(tmp_path: Path) -> None:
    path = _write(tmp_path, "long.txt", "1|t|T\n1|a|" + "word " * 50_000 + "\n")
    with pytest.raises(InputFormatError,
                       match=r"long\.txt, line 2, record 1: abstract is 250,000 characters"):
        list(read_pubtator_docs(path))


def test_offsets_outside_text(tmp_path: Path) -> None:
    path = _write(tmp_path, "off.txt", GOOD + "1\t30\t90\tmelanoma\tDisease\tD008545\n")
    with pytest.raises(InputFormatError,
                       match=r"off\.txt, line 4, record 1: offsets 30-90 fall outside the "
                             r"document text \(34 characters\)"):
        list(read_pubtator_docs(path))


def test_mention_mismatch_error_and_skip(tmp_path: Path) -> None:
    path = _write(tmp_path, "mis.txt", GOOD + "1\t8\t16\tmelanomX\tDisease\tD008545\n")
    with pytest.raises(InputFormatError,
                       match=r"mis\.txt, line 4, record 1: mention 'melanomX' does not match "
                             r"the text at 8-16 \('melanoma'\)"):
        list(read_pubtator_docs(path))
    docs = list(read_pubtator_docs(path, mismatch="skip"))
    assert [a.text for a in docs[0].annotations] == ["BRAF"]
    with pytest.raises(UnknownNameError, match="Available options: error, skip"):
        list(read_pubtator_docs(path, mismatch="ignore"))


def test_space_separated_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "spaces.txt", GOOD + "1 8 16 melanoma Disease D008545\n")
    with pytest.raises(InputFormatError,
                       match=r"spaces\.txt, line 4: line for '1 8 16 melanoma Disease D008545' "
                             r"appears inside document 1.*columns must be tab-separated"):
        list(read_pubtator_docs(path))


def test_line_of_no_known_kind(tmp_path: Path) -> None:
    path = _write(tmp_path, "cols.txt", GOOD + "1\t8\t16\tmelanoma\tDisease\tD1\tx\ty\n")
    with pytest.raises(InputFormatError,
                       match=r"cols\.txt, line 4, record 1: line with 8 tab-separated column\(s\) "
                             r"is neither.*Expected 'PMID\|t\|title'"):
        list(read_pubtator_docs(path))


def test_annotation_before_title(tmp_path: Path) -> None:
    path = _write(tmp_path, "orphan.txt", "1\t0\t4\tBRAF\tGene\t673\n")
    with pytest.raises(InputFormatError,
                       match=r"orphan\.txt, line 1: line for '1' appears inside no document"):
        list(read_pubtator_docs(path))


def test_annotation_of_another_pmid(tmp_path: Path) -> None:
    path = _write(tmp_path, "other.txt", GOOD + "2\t0\t4\tBRAF\tGene\t673\n")
    with pytest.raises(InputFormatError,
                       match=r"other\.txt, line 4: line for '2' appears inside document 1"):
        list(read_pubtator_docs(path))


def test_two_abstract_lines(tmp_path: Path) -> None:
    path = _write(tmp_path, "two.txt", GOOD + "1|a|again\n")
    with pytest.raises(InputFormatError, match=r"two\.txt, line 4, record 1: second abstract"):
        list(read_pubtator_docs(path))


def test_documents_without_blank_line_and_crlf(tmp_path: Path) -> None:
    text = GOOD + "2|t|Second title.\n2|a|Text.\n"
    docs = list(read_pubtator_docs(_write(tmp_path, "crlf.txt", text.replace("\n", "\r\n"))))
    assert [(d.doc_id, d.title) for d in docs] == [("1", "BRAF in melanoma."),
                                                    ("2", "Second title.")]


def test_streaming_yields_documents_before_a_later_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "late.txt", GOOD + "\n" + "2|t|T\n2 broken line\n")
    items = read_pubtator_kb(path)
    assert next(items).doc_id == "1"
    with pytest.raises(InputFormatError, match=r"late\.txt, line 6"):
        next(items)


# ------------------------------------------ issue 12: inputs that crashed or slipped through

@pytest.mark.parametrize(("offsets", "shown"), [("0\t²", "'0'-'²'"), ("٠\t٤", "'٠'-'٤'")])
def test_offsets_in_other_scripts_are_refused(tmp_path: Path, offsets: str, shown: str) -> None:
    # '²' crashed in int(); Arabic-Indic digits were read as numbers by int()
    path = _write(tmp_path, "digits.txt", GOOD + f"1\t{offsets}\tBRAF\tGene\t673\n")
    with pytest.raises(InputFormatError, match=rf"digits\.txt, line 4, record 1: annotation "
                       rf"offsets {shown} are not ASCII digits. Expected offsets written with "
                       "the digits 0-9"):
        list(read_pubtator_docs(path))


@pytest.mark.parametrize(("doc_id", "problem"), [
    ("X![px](http://host/p.png)[clickme](javascript:alert(1))",
     r"document id 'X'\.\.\. has '!' EXCLAMATION MARK \(U\+0021\) at position 2"),
    ("PMC 1", r"document id 'PMC'\.\.\. has SPACE \(U\+0020\) at position 4"),
])
def test_unsafe_document_ids_are_refused(tmp_path: Path, doc_id: str, problem: str) -> None:
    path = _write(tmp_path, "ids.txt", GOOD + f"\n{doc_id}|t|Title.\n{doc_id}|a|Text.\n")
    with pytest.raises(InputFormatError, match=r"ids\.txt, line 5: " + problem):
        list(read_pubtator_kb(path))


def test_skipped_annotations_are_counted(tmp_path: Path) -> None:
    path = _write(tmp_path, "skip.txt", GOOD + "1\t0\t400\tBRAF\tGene\t673\n"
                  "1\t5\t8\tXYZ\tGene\t1\n")
    result = get_reader("docs", "pubtator").read(path, mismatch="skip")
    assert [len(d.annotations) for d in result] == [1]
    [issue] = result.issues
    assert (issue.kind.value, issue.count) == ("annotation_skipped", 2)
    assert issue.first == ("line 4, record 1: offsets 0-400 fall outside the document text "
                           "(34 characters)")
