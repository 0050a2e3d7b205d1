"""Links of an entity's id (NCBI Gene, UniProt, MeSH, dbSNP, Taxonomy, Cellosaurus, OMIM) and of a
KB record (CIViC, OncoKB, UniProt): each id family gives its URL, and an id that fails its
pattern (ids come from files and are untrusted) gives none (issue 36 item 10)."""

from __future__ import annotations

import pytest

from curation.matching.entity_links import MAX_LINKS, Link, entity_links, record_link


def urls(etype: str, ident: str) -> list[str]:
    return [link.url for link in entity_links(etype, ident)]


@pytest.mark.parametrize(("etype", "ident", "label", "url"), [
    ("gene", "673", "NCBI Gene 673", "https://www.ncbi.nlm.nih.gov/gene/673"),
    ("Gene", "NCBIGene:7157", "NCBI Gene 7157", "https://www.ncbi.nlm.nih.gov/gene/7157"),
    ("species", "NCBITaxon:10090", "NCBI Taxonomy 10090",
     "https://www.ncbi.nlm.nih.gov/Taxonomy/Browser/wwwtax.cgi?id=10090"),
    ("gene", "P04637", "UniProt P04637", "https://www.uniprot.org/uniprotkb/P04637/entry"),
    ("gene", "A0A023GPI8", "UniProt A0A023GPI8",
     "https://www.uniprot.org/uniprotkb/A0A023GPI8/entry"),
    ("protein", "Q9Y6K9", "UniProt Q9Y6K9", "https://www.uniprot.org/uniprotkb/Q9Y6K9/entry"),
    ("disease", "D009369", "MeSH D009369", "https://meshb.nlm.nih.gov/record/ui?ui=D009369"),
    ("disease", "MESH:D009369", "MeSH D009369",
     "https://meshb.nlm.nih.gov/record/ui?ui=D009369"),
    ("chemical", "C534883", "MeSH C534883", "https://meshb.nlm.nih.gov/record/ui?ui=C534883"),
    ("chemical", "D000077212", "MeSH D000077212",
     "https://meshb.nlm.nih.gov/record/ui?ui=D000077212"),
    ("variant", "rs113488022", "dbSNP rs113488022", "https://www.ncbi.nlm.nih.gov/snp/rs113488022"),
    ("variant", "RS#:113488022", "dbSNP rs113488022",
     "https://www.ncbi.nlm.nih.gov/snp/rs113488022"),
    ("species", "9606", "NCBI Taxonomy 9606",
     "https://www.ncbi.nlm.nih.gov/Taxonomy/Browser/wwwtax.cgi?id=9606"),
    ("cell_line", "CVCL_0023", "Cellosaurus CVCL_0023", "https://www.cellosaurus.org/CVCL_0023"),
    ("disease", "OMIM:114480", "OMIM 114480", "https://www.omim.org/entry/114480"),
])
def test_each_id_family_links_its_database(etype, ident, label, url):
    assert entity_links(etype, ident) == (Link(label, url),)


def test_the_type_decides_what_bare_digits_are():
    assert urls("gene", "9606") == ["https://www.ncbi.nlm.nih.gov/gene/9606"]
    assert urls("species", "9606")[0].endswith("wwwtax.cgi?id=9606")
    assert urls("disease", "9606") == [] and urls("variant", "600") == []
    assert urls("drug", "P04637") == []  # an accession is a protein's, not a drug's


def test_ids_of_several_parts_link_each_part_that_matches():
    assert urls("disease", "D007859|D008569") == [
        "https://meshb.nlm.nih.gov/record/ui?ui=D007859",
        "https://meshb.nlm.nih.gov/record/ui?ui=D008569"]
    assert urls("gene", "673,673;5728") == ["https://www.ncbi.nlm.nih.gov/gene/673",
                                           "https://www.ncbi.nlm.nih.gov/gene/5728"]
    assert urls("variant", "p|SUB|V|600|E") == []  # a tmVar id names no database record
    assert len(entity_links("gene", ",".join(str(i) for i in range(1, 20)))) == MAX_LINKS


@pytest.mark.parametrize("ident", [
    '673"><script>alert(1)</script>', "javascript:alert(1)", "673 674", " 673", "673\n",
    "D009369 ", "rs12<b>", "CVCL_00231", "P04637/../../x", "MESH:D0093", "", "gene:673",
    "variant:v600e", "0", "https://evil.example/673", "６７３",
])
def test_an_id_that_fails_its_pattern_gets_no_link(ident):
    for etype in ("gene", "species", "disease", "chemical", "variant", "cell_line"):
        assert entity_links(etype, ident) == (), (etype, ident)


@pytest.mark.parametrize(("source", "record_id", "label", "url"), [
    ("civic", "EID1425", "CIViC EID1425", "https://civicdb.org/evidence/1425/summary"),
    ("civic", "EID1425:Dabrafenib", "CIViC EID1425", "https://civicdb.org/evidence/1425/summary"),
    ("CIViC", "EID7:a:b", "CIViC EID7", "https://civicdb.org/evidence/7/summary"),
    ("oncokb", "BRAF:V600E:Melanoma:1:Dabrafenib + Trametinib", "OncoKB BRAF V600E",
     "https://www.oncokb.org/gene/BRAF/V600E"),
    ("oncokb", "EGFR:Exon 19 in-frame deletions", "OncoKB EGFR Exon 19 in-frame deletions",
     "https://www.oncokb.org/gene/EGFR/Exon%2019%20in-frame%20deletions"),
    ("oncokb", "ABL1:BCR-ABL1 Fusion:CML:1:Imatinib", "OncoKB ABL1 BCR-ABL1 Fusion",
     "https://www.oncokb.org/gene/ABL1/BCR-ABL1%20Fusion"),
    ("uniprot", "P04637:15:Phosphoserine:ATM", "UniProt P04637",
     "https://www.uniprot.org/uniprotkb/P04637/entry"),
])
def test_kb_records_link_their_pages(source, record_id, label, url):
    assert record_link(source, record_id) == Link(label, url)


@pytest.mark.parametrize(("source", "record_id"), [
    ("civic", "EID"), ("civic", "1425"), ("civic", 'EID1"><script>'), ("civic", "EID-3"),
    ("civic", "xEID12"), ("oncokb", "BRAF"), ("oncokb", ":V600E"),
    ("oncokb", 'BRAF:V600E"><script>:x'), ("oncokb", "BRAF:V600E<x>:y"),
    ("oncokb", "BR/AF:V600E"), ("uniprot", "p04637:15"), ("uniprot", "javascript:x"),
    ("biored", "123:Association:673:D009369"), ("pubtator", "EID12"), ("other", "P04637:1"),
])
def test_records_without_a_valid_id_or_of_other_sources_get_none(source, record_id):
    assert record_link(source, record_id) is None


def test_an_oncokb_alteration_is_quoted_into_one_path_segment():
    link = record_link("oncokb", "KIT:D816V/Y (x)")
    assert link is not None and link.url == "https://www.oncokb.org/gene/KIT/D816V%2FY%20%28x%29"
    # a record id such as "BRAF:javascript:..." only ever gives a path under the fixed prefix
    odd = record_link("oncokb", "BRAF:javascript:alert(1)")
    assert odd is not None and odd.url == "https://www.oncokb.org/gene/BRAF/javascript"
