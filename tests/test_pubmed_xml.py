"""Tests of the PubMed XML reader (kb_sources.pubmed_xml)."""

from __future__ import annotations

import gzip
import io
import json
import random
from pathlib import Path

import pytest

from kb_sources.errors import InputFormatError
from kb_sources.pubmed_xml import iter_article_elements, parse_pubmed_xml, read_pubmed_xml
from kb_sources.registry import get_reader
from kb_sources.types import Document

MEDLINE_2016 = Path("medline_sample/medline16n0902_sample.xml.gz")
NEJM = Path("medline_sample/pubmed-29768149.xml")
HEADER = (
    '<?xml version="1.0" ?>\n'
    '<!DOCTYPE PubmedArticleSet PUBLIC "-//NLM//DTD PubMedArticle, 1st January 2025//EN" '
    '"https://dtd.nlm.nih.gov/ncbi/pubmed/out/pubmed_250101.dtd">\n'
)


def _article(pmid: str = "1", title: str = "A title.", abstract: str = "An abstract.") -> str:
    return (
        f"<PubmedArticle><MedlineCitation><PMID>{pmid}</PMID><Article><ArticleTitle>{title}"
        f"</ArticleTitle><Abstract><AbstractText>{abstract}</AbstractText></Abstract></Article>"
        "</MedlineCitation></PubmedArticle>\n"
    )


def _write(tmp_path: Path, body: str | bytes, name: str = "bad.xml") -> Path:
    path = tmp_path / name
    path.write_bytes(body.encode() if isinstance(body, str) else body)
    return path


@pytest.fixture(scope="module")
def sample(fixtures_dir: Path) -> list[Document]:
    return list(read_pubmed_xml(fixtures_dir / "pubmed_sample.xml"))


# --- fixture file ----------------------------------------------------------------------------

def test_sample_reads_two_articles_and_skips_the_book(sample: list[Document]) -> None:
    assert [d.doc_id for d in sample] == ["90000001", "90000002"]
    assert {d.source for d in sample} == {"pubmed-xml"}


def test_inline_markup_is_flattened_and_sections_joined(sample: list[Document]) -> None:
    first = sample[0]
    assert first.title == "Response of BRAF V600E melanoma to vemurafenib."
    assert first.abstract == (
        "Mutations in BRAF drive melanoma. Vemurafenib gave a response rate of 48\u00a0% "
        "(p<0.01) with IC50 values near 30 nM."
    )
    assert first.text.startswith("Response of BRAF V600E melanoma to vemurafenib. Mutations")


def test_journal_year_mesh_and_references(sample: list[Document]) -> None:
    first, second = sample
    assert first.journal == "Journal of hypothetical oncology"
    assert first.year == 2019
    assert first.mesh == ("Melanoma", "Proto-Oncogene Proteins B-raf", "Humans")
    # ReferenceList PMIDs first, then CommentsCorrections Cites; DOI-only and CommentIn dropped
    assert first.references == ("21639808", "12068308")
    assert second.year == 1998  # from <MedlineDate>1998 Dec-1999 Jan</MedlineDate>
    assert (second.abstract, second.mesh, second.references) == ("", (), ())
    assert second.journal == "Archives of imaginary medicine"


def test_abstract_labels_option(fixtures_dir: Path) -> None:
    first = next(read_pubmed_xml(fixtures_dir / "pubmed_sample.xml", abstract_labels=True))
    assert first.abstract.startswith("BACKGROUND: Mutations in BRAF drive melanoma. RESULTS: ")


def test_gzip_bytes_and_registry_give_the_same_documents(
    fixtures_dir: Path, tmp_path: Path, sample: list[Document]
) -> None:
    raw = (fixtures_dir / "pubmed_sample.xml").read_bytes()
    gz = _write(tmp_path, gzip.compress(raw), "sample.xml.gz")
    assert list(read_pubmed_xml(gz)) == sample
    assert list(parse_pubmed_xml(io.BytesIO(raw), "response")) == sample
    assert list(get_reader("docs", "pubmed-xml").read(fixtures_dir / "pubmed_sample.xml")) == sample


def test_processed_elements_are_cleared(fixtures_dir: Path) -> None:
    with open(fixtures_dir / "pubmed_sample.xml", "rb") as fh:
        elements = iter_article_elements(fh, "sample")
        first = next(elements)
        assert first.find("MedlineCitation/PMID").text == "90000001"
        second = next(elements)
        assert len(first) == 0 and second.find("MedlineCitation/PMID").text == "90000002"


# --- real data -------------------------------------------------------------------------------

def test_medline_2016_baseline_sample(data_dir: Path) -> None:
    docs = list(read_pubmed_xml(data_dir / MEDLINE_2016))
    assert len(docs) == 604
    assert len({d.doc_id for d in docs}) == 604
    assert sum(bool(d.abstract) for d in docs) == 526
    assert sum(bool(d.mesh) for d in docs) == 94
    assert sum(len(d.references) for d in docs) == 3547  # CommentsCorrections RefType="Cites"
    assert all(d.year and d.journal and d.title for d in docs)
    first = docs[0]
    assert first.doc_id == "17942999"
    assert first.title.startswith("Neuroplasticity in the processing of pitch dimensions")
    assert first.abstract.startswith("An auditory electrophysiological study was conducted")
    assert "Pitch Perception" in first.mesh and first.year == 2007


def test_pubmed_2019_dtd_record(data_dir: Path) -> None:
    (doc,) = read_pubmed_xml(data_dir / NEJM)
    assert doc.doc_id == "29768149"
    assert doc.title == "Inhaled Combined Budesonide-Formoterol as Needed in Mild Asthma."
    assert doc.journal == "The New England journal of medicine" and doc.year == 2018
    assert len(doc.mesh) == 23 and "Asthma" in doc.mesh
    # <sub>2</sub> inside the text is flattened, indentation collapsed
    assert "fast-acting \u03b2 2-agonist may be" in doc.abstract


def test_biopython_efetch_samples(data_dir: Path) -> None:
    folder = data_dir / "medline_sample"
    docs = {d.doc_id: d for f in sorted(folder.glob("biopython_entrez_pubmed*.xml"))
            for d in read_pubmed_xml(f)}
    assert len(docs) == 8  # PROVENANCE says 7: that is the number with an abstract
    assert sum(bool(d.abstract) for d in docs.values()) == 7
    assert docs["29963580"].references[:2] == ("25144646", "8028666")
    assert len(docs["29963580"].references) == 49  # ReferenceList (one PMID listed twice)
    assert len(docs["27797938"].references) == 48  # CommentsCorrections Cites
    assert docs["27797938"].title == ("Leucocyte telomere length, genetic variants at the TERT "
                                      "gene region and risk of pancreatic cancer.")


def test_text_matches_the_abstract_pool(data_dir: Path) -> None:
    """The pool was built from the same XML (it also appended <OtherAbstract> text)."""
    docs = {d.doc_id: d for d in read_pubmed_xml(data_dir / MEDLINE_2016)}
    checked = 0
    with gzip.open(data_dir / "abstract_pool/abstract_pool.jsonl.gz", "rt") as fh:
        for line in fh:
            record = json.loads(line)
            if record["source"] != "medline_sample":
                continue
            doc = docs[record["pmid"]]
            assert " ".join(doc.title.split()) == " ".join(record["title"].split())
            assert " ".join(record["abstract"].split()).startswith(" ".join(doc.abstract.split()))
            checked += 1
    assert checked == 526


# --- malformed input -------------------------------------------------------------------------

def test_entity_expansion_doctype_is_refused(tmp_path: Path) -> None:
    laughs = (
        '<?xml version="1.0"?>\n<!DOCTYPE PubmedArticleSet [\n <!ENTITY lol "lol">\n'
        ' <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">\n'
        ' <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">\n]>\n'
        "<PubmedArticleSet>" + _article(title="&lol2;") + "</PubmedArticleSet>"
    )
    path = _write(tmp_path, laughs)
    with pytest.raises(InputFormatError, match=r"bad\.xml: entity declarations are refused "
                       r"\(found <!ENTITY lol .*Fix: remove the internal subset"):
        list(read_pubmed_xml(path))


def test_external_entity_is_refused(tmp_path: Path) -> None:
    body = ('<?xml version="1.0"?>\n<!DOCTYPE PubmedArticleSet [<!ENTITY x SYSTEM '
            '"file:///etc/passwd">]>\n<PubmedArticleSet>&x;</PubmedArticleSet>')
    with pytest.raises(InputFormatError, match="bad.xml: entity declarations are refused"):
        list(read_pubmed_xml(_write(tmp_path, body)))


def test_malformed_xml_names_the_line(tmp_path: Path) -> None:
    body = HEADER + "<PubmedArticleSet>\n" + _article() + "<PubmedArticle>\n</PubmedArticleSet>\n"
    with pytest.raises(InputFormatError, match=r"bad\.xml, line 6: malformed XML at column 3: "
                       "mismatched tag"):
        list(read_pubmed_xml(_write(tmp_path, body)))


def test_stray_ampersand_names_the_line(tmp_path: Path) -> None:
    body = HEADER + "<PubmedArticleSet>\n" + _article(title="Salt & pepper") + \
        "</PubmedArticleSet>\n"
    with pytest.raises(InputFormatError, match=r"line 4: malformed XML .*stray '<' or '&'"):
        list(read_pubmed_xml(_write(tmp_path, body)))


def test_bad_utf8_names_the_line(tmp_path: Path) -> None:
    body = (HEADER + "<PubmedArticleSet>\n").encode() + _article(title="Caf\xe9").encode(
        "latin-1") + b"</PubmedArticleSet>\n"
    with pytest.raises(InputFormatError, match=r"bad\.xml, line 4: malformed XML .*not UTF-8"):
        list(read_pubmed_xml(_write(tmp_path, body)))


def test_truncated_gzip(fixtures_dir: Path, tmp_path: Path) -> None:
    data = gzip.compress((fixtures_dir / "pubmed_sample.xml").read_bytes())
    path = _write(tmp_path, data[: len(data) // 2], "cut.xml.gz")
    with pytest.raises(InputFormatError, match=r"cut\.xml\.gz: compressed data is truncated"):
        list(read_pubmed_xml(path))


def test_truncated_xml(fixtures_dir: Path, tmp_path: Path) -> None:
    text = (fixtures_dir / "pubmed_sample.xml").read_text()
    path = _write(tmp_path, text[: len(text) // 2], "cut.xml")
    with pytest.raises(InputFormatError, match=r"cut\.xml, line \d+: malformed XML .*no element "
                       "found"):
        list(read_pubmed_xml(path))


def test_empty_file(tmp_path: Path) -> None:
    with pytest.raises(InputFormatError, match=r"empty\.xml: file is empty"):
        list(read_pubmed_xml(_write(tmp_path, b"", "empty.xml")))


def test_absurdly_long_abstract_names_the_record(tmp_path: Path) -> None:
    body = HEADER + "<PubmedArticleSet>" + _article("42", abstract="x" * 250_000) + \
        "</PubmedArticleSet>"
    with pytest.raises(InputFormatError, match=r"bad\.xml, record 42: field 'AbstractText' is "
                       "250,000 characters long"):
        list(read_pubmed_xml(_write(tmp_path, body)))


def test_wrong_root_element(tmp_path: Path) -> None:
    with pytest.raises(InputFormatError, match=r"root element is <html>.*Expected "
                       "<PubmedArticleSet>"):
        list(read_pubmed_xml(_write(tmp_path, "<html><body>Not found</body></html>")))


def test_article_without_pmid(tmp_path: Path) -> None:
    body = "<PubmedArticleSet>" + _article("1") + _article("") + "</PubmedArticleSet>"
    docs = read_pubmed_xml(_write(tmp_path, body))
    assert next(docs).doc_id == "1"
    with pytest.raises(InputFormatError, match=r"record #2: article has no numeric PMID"):
        next(docs)


def test_random_bytes_are_not_pubmed_xml(tmp_path: Path) -> None:
    """Issue 28: binary input says so, naming the file, instead of an XML syntax error."""
    data = random.Random(3).randbytes(3072)
    with pytest.raises(InputFormatError, match=r"noise\.xml: file is not MEDLINE/PubMed data "
                       r"\(text or XML\): it is binary or not decodable as UTF-8 text"):
        list(read_pubmed_xml(_write(tmp_path, data, "noise.xml")))
