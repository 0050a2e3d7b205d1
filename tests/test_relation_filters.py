"""Relation filters name a slot or an attribute (issue 29 item 6): a typo is an error, as
``kbcurate query`` already says, never an empty "no partial relations match"."""

from __future__ import annotations

import pytest

from curation.store.relations import Relations
from kb_sources.errors import CurationError
from tests.loop_fixtures import make_loop_workspace


def test_unknown_filter_names_are_refused_with_the_choices(tmp_workspace, capsys):
    from curation.cli.main import main

    ws = make_loop_workspace(tmp_workspace)
    assert Relations(ws).attributes("disease_gene") == []
    with pytest.raises(CurationError, match=r"Schema disease_gene has no slot or attribute "
                       r"'foo'; filter by a slot \(disease, gene\) or an attribute of its "
                       r"relations \(none\), e.g. disease=TEXT"):
        Relations(ws).partial("disease_gene", {"foo": "bar"})
    found = Relations(ws).partial("disease_gene", {"disease": "melan"})
    assert [p.query["disease"][0].text for p in found] == ["melanoma"]
    assert main(["relations", "-w", str(ws.root), "--schema", "disease_gene", "--where",
                 "foo=bar"]) == 2
    assert "no slot or attribute 'foo'" in capsys.readouterr().err
    assert main(["relations", "-w", str(ws.root), "--schema", "disease_gene", "--where",
                 "gene=BRAF"]) == 0
    assert "melanoma" in capsys.readouterr().out


def test_attribute_filters_still_work(tmp_workspace, fixtures_dir):
    from curation.store.importer import import_file

    import_file(tmp_workspace, "kb", "civic", fixtures_dir / "civic_v1_sample.tsv",
                progress=False)
    assert "evidence_level" in Relations(tmp_workspace).attributes("PO")
    rows = Relations(tmp_workspace).partial("PO", {"evidence_level": "B"})
    assert rows and all("B" in p.attributes.get("evidence_level", ()) for p in rows)
