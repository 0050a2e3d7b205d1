"""MeSH descriptor UI -> name mappings: NLM's file, a TSV, or derived from the mentions.

Expected mappings are worked out by hand from the mentions and headings in each test.
"""

from __future__ import annotations

import json

import pytest

from curation.training.recipes.biohicl.mesh_descriptors import (
    FROM_ANNOTATIONS,
    derive_descriptor_names,
    descriptor_names,
    descriptor_names_from_annotations,
)
from curation.training.recipes.biohicl.mesh_labels import mesh_labels
from kb_sources.errors import CurationError

HEADINGS = ["Neoplasms", "Breast Neoplasms", "Carcinoma, Hepatocellular", "Aspirin",
            "Carcinogenesis", "Lung Neoplasms", "Aged, 80 and over"]


def ids(*uis: str) -> str:
    return json.dumps(list(uis))


def test_derive_names_spellings_votes_and_collisions():
    mentions = [
        ("breast neoplasm", ids("MESH:D001943")),          # drops/adds an s -> Breast Neoplasms
        ("Hepatocellular  carcinoma", ids("D006528")),     # inverted heading, spaces collapsed
        ("aspirin", ids("D001241")), ("ASPIRIN", ids("D001241")),
        ("tumor", ids("D009369")),                         # spells no heading
        ("carcinogenesis", ids("D009369")),                # one vote for Carcinogenesis ...
        ("neoplasms", ids("D009369")), ("neoplasm", ids("D009369")),  # ... two for Neoplasms
        ("carcinogenesis", ids("D063646")), ("carcinogenesis", ids("D063646")),
        ("lung cancer", ids("D008175")),                   # unnamed: no heading spelled
        ("aspirin", ids("C012345")),                       # a supplementary concept: ignored
        ("aspirin", "not json"),
    ]
    names, stats = derive_descriptor_names(mentions, HEADINGS)
    assert names == {"D001241": "Aspirin", "D001943": "Breast Neoplasms",
                     "D006528": "Carcinoma, Hepatocellular", "D009369": "Neoplasms",
                     "D063646": "Carcinogenesis"}
    assert stats == {"descriptor_ids": 6, "descriptor_ids_named": 5,
                     "descriptor_ids_unnamed": 1, "mentions_matched": 9}


def test_a_heading_goes_to_one_ui_only():
    # both UIs spell only "Neoplasms"; the one with more votes keeps it, the other stays unnamed
    mentions = [("neoplasms", ids("D1000001")), ("neoplasms", ids("D1000002")),
                ("neoplasms", ids("D1000002"))]
    names, stats = derive_descriptor_names(mentions, HEADINGS)
    assert names == {"D1000002": "Neoplasms"}
    assert stats["descriptor_ids_unnamed"] == 1
    # a tie is broken by the UI, so the result does not depend on the row order
    tie = [("neoplasms", ids("D1000002")), ("neoplasms", ids("D1000001"))]
    assert derive_descriptor_names(tie, HEADINGS)[0] == {"D1000001": "Neoplasms"}
    assert derive_descriptor_names(list(reversed(tie)), HEADINGS)[0] == {"D1000001": "Neoplasms"}


def _workspace(ws) -> None:
    tree = [("Neoplasms", "C04"), ("Breast Neoplasms", "C04.588.180"), ("Aspirin", "D02.241.223")]
    docs = [("1", "biored"), ("2", "biored"), ("3", "bc5cdr")]
    annotations = [("1", "Disease", "breast neoplasms", ids("MESH:D001943")),
                   ("2", "Chemical", "aspirin", ids("D001241")),
                   ("2", "Gene", "neoplasms", ids("D009369")),      # not a disease/chemical
                   ("3", "Disease", "neoplasms", ids("D009369"))]   # reserved corpus: never
    with ws.transaction() as conn:
        conn.executemany("INSERT INTO mesh_tree(term, tree_number) VALUES (?, ?)", tree)
        conn.executemany(
            "INSERT INTO documents(doc_id, title, abstract, source, mesh, content_hash, added_at, "
            "updated_at) VALUES (?, 't', 'a', ?, '[]', 'h', 't', 't')", docs)
        conn.executemany("INSERT INTO annotations(doc_id, start, end, text, type, ids) "
                         "VALUES (?, 0, 1, ?, ?, ?)",
                         [(d, text, kind, i) for d, kind, text, i in annotations])


def test_names_from_a_workspace_skip_reserved_corpora_and_other_types(tmp_workspace):
    with pytest.raises(CurationError, match="kbcurate import mesh"):
        descriptor_names_from_annotations(tmp_workspace)
    _workspace(tmp_workspace)
    names, stats = descriptor_names_from_annotations(tmp_workspace)
    assert names == {"D001241": "Aspirin", "D001943": "Breast Neoplasms"}
    assert stats["descriptor_ids"] == 2
    # the derived names feed the entity labels: both BioRED documents get labels
    labels = mesh_labels(tmp_workspace, entity_mesh=True, descriptor_names=names)
    assert labels.doc_ids == ("1", "2")
    assert labels.stats["entity_descriptor_assignments"] == 2
    got, provenance = descriptor_names(tmp_workspace, FROM_ANNOTATIONS)
    assert got == names and provenance["source"] == "annotations"
    assert provenance["descriptor_ids_named"] == 2


def test_no_usable_annotation_is_a_clear_error(tmp_workspace):
    with tmp_workspace.transaction() as conn:
        conn.execute("INSERT INTO mesh_tree(term, tree_number) VALUES ('Aspirin', 'D02')")
    with pytest.raises(CurationError, match="PubTator corpus with MeSH-normalised mentions"):
        descriptor_names_from_annotations(tmp_workspace)


def test_a_file_source_is_read_as_before(tmp_workspace, tmp_path):
    tsv = tmp_path / "headings.tsv"
    tsv.write_text("pmid\tdescriptor\tdescriptor_ui\n1\tAspirin\tD001241\n", encoding="utf-8")
    names, provenance = descriptor_names(tmp_workspace, str(tsv))
    assert names == {"D001241": "Aspirin"}
    assert provenance == {"source": "headings.tsv", "descriptor_ids_named": 1}
