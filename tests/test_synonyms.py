"""The workspace synonym store: KB synonyms, PubTator harvest, curator additions (audited)."""

from __future__ import annotations

import pytest

from curation.matching.matcher import EntityMatcher
from curation.store.entities import (
    Entities,
)
from curation.store.importer import add_entity, import_items
from kb_sources.errors import CurationError
from kb_sources.types import Annotation, Document, Entity

BRAF = Entity("BRAF", "gene", "673", ("B-Raf", "BRAF1"))


@pytest.fixture
def ws(tmp_workspace):
    with tmp_workspace.transaction():
        add_entity(tmp_workspace, BRAF, source="civic")
    return tmp_workspace


def _annotated_docs() -> list[Document]:
    t1 = "B-raf proto-oncogene and BRAF"
    t2 = "Vemurafenib (PLX4032) and BRAF V600E"
    return [
        Document("1", t1, "", source="biored", annotations=(
            Annotation(0, 20, "B-raf proto-oncogene", "gene", ("673",)),
            Annotation(25, 29, "BRAF", "gene", ("673",)))),
        Document("2", t2, "", source="biored", annotations=(
            Annotation(0, 11, "Vemurafenib", "chemical", ("D000077484",)),
            Annotation(13, 20, "PLX4032", "chemical", ("D000077484",)),
            Annotation(26, 30, "BRAF", "gene", ("673",)),
            Annotation(31, 36, "V600E", "variant", ("p|SUB|V|600|E",)),
            Annotation(0, 4, "Vemu", "chemical", ()))),
    ]


def test_kb_synonyms_are_stored_by_the_importer(ws) -> None:
    assert Entities(ws).synonyms("gene:673") == ("B-Raf", "BRAF", "BRAF1")
    entity = Entities(ws).get("gene:673")
    assert entity == Entity("BRAF", "gene", "673", ("B-Raf", "BRAF1"))


def test_curator_synonym_is_added_once_and_audited(ws) -> None:
    assert Entities(ws).add_curator_synonym("gene:673", "  v-raf   murine sarcoma ", actor="ana")
    assert not Entities(ws).add_curator_synonym("gene:673", "v-raf murine sarcoma", actor="ana")
    assert "v-raf murine sarcoma" in Entities(ws).synonyms("gene:673")
    (row,) = ws.audit_log("synonym")
    assert (row.actor, row.action, row.object_id) == ("ana", "add", "gene:673")
    assert '"synonym": "v-raf murine sarcoma"' in row.after


def test_curator_synonym_errors_say_how_to_fix(ws) -> None:
    with pytest.raises(CurationError, match="No entity with key 'gene:999'"):
        Entities(ws).add_curator_synonym("gene:999", "X", actor="ana")
    with pytest.raises(CurationError, match="synonym is empty"):
        Entities(ws).add_curator_synonym("gene:673", "   ", actor="ana")
    with pytest.raises(CurationError, match="at most 200"):
        Entities(ws).add_curator_synonym("gene:673", "x" * 201, actor="ana")
    with pytest.raises(CurationError, match="import a KB or a PubTator corpus first"):
        Entities(ws).get("drug:nothing")


def test_only_curator_synonyms_can_be_removed(ws) -> None:
    Entities(ws).add_curator_synonym("gene:673", "B raf kinase", actor="ana")
    assert Entities(ws).remove_curator_synonym("gene:673", "B raf kinase", actor="bob")
    assert not Entities(ws).remove_curator_synonym("gene:673", "BRAF1", actor="bob")  # from the KB
    assert "BRAF1" in Entities(ws).synonyms("gene:673")
    assert [r.action for r in ws.audit_log("synonym")] == ["remove", "add"]


def test_harvest_turns_annotations_into_synonyms_per_id(ws) -> None:
    import_items(ws, _annotated_docs(), reader="docs:pubtator", path="mem", progress=False)
    added = Entities(ws).harvest_annotation_synonyms(actor="admin")
    assert added == 4  # B-raf proto-oncogene, Vemurafenib, PLX4032, V600E (BRAF is known)
    assert "B-raf proto-oncogene" in Entities(ws).synonyms("gene:673")
    drug = Entities(ws).get("chemical:D000077484")
    assert drug.text in ("PLX4032", "Vemurafenib") and len(drug.synonyms) == 1
    assert Entities(ws).get("variant:p|SUB|V|600|E").text == "V600E"
    assert Entities(ws).harvest_annotation_synonyms() == 0  # idempotent
    assert ws.audit_log("synonyms")[0].action == "harvest"


def test_harvest_can_be_limited_to_types(ws) -> None:
    import_items(ws, _annotated_docs(), reader="docs:pubtator", path="mem", progress=False)
    assert Entities(ws).harvest_annotation_synonyms(types=["variant"]) == 1
    assert Entities(ws).synonyms("chemical:D000077484") == ()


def test_term_list_synonyms_for_a_new_entity(ws) -> None:
    melanoma = Entity("Melanoma", "disease", "D008545")
    added = Entities(ws).add_synonyms(melanoma, ["Melanomas", "Malignant Melanoma", " "], "mesh")
    assert added == 3
    assert Entities(ws).add_synonyms(melanoma, ["Melanomas"], "mesh") == 0
    assert Entities(ws).get("disease:D008545").synonyms == (
        "Malignant Melanoma", "Melanomas")


def test_stored_entity_feeds_the_matcher(ws) -> None:
    Entities(ws).add_curator_synonym("gene:673", "v-raf murine sarcoma viral oncogene homolog B1",
                                     actor="ana")
    entity = Entities(ws).get("gene:673")
    text = "The v-raf murine sarcoma viral oncogene homolog B1 was mutated."
    assert EntityMatcher().mentions(entity, text)
