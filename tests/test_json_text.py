"""JSON that may be untrusted (issue 42 item 10): every way it is bad is one clear error."""

from __future__ import annotations

import pytest

from kb_sources.errors import CurationError, InputFormatError
from kb_sources.json_text import MAX_JSON_DEPTH, parse_json, read_json

NESTED = "[" * 100_000


def parse(text: str | bytes, **kwargs) -> object:
    return parse_json(text, "W", expected="an object", fix="do F", **kwargs)


@pytest.mark.parametrize("text, problem", [
    (NESTED, "JSON arrays/objects are nested too deeply to parse"),
    ("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1),
     f"JSON arrays/objects are nested too deeply to parse (more than {MAX_JSON_DEPTH} levels)"),
    ("{x", "not JSON (Expecting property name enclosed in double quotes at line 1, column 2)"),
    (b"\xff{}", "not UTF-8 text (byte 0)"),
    ("1" * 5000, "a JSON number cannot be converted (Exceeds the limit (4300 digits) for "
                 "integer string conversion)"),
])
def test_bad_json_is_one_error_naming_where_what_and_how(text, problem):
    with pytest.raises(InputFormatError) as caught:
        parse(text)
    assert str(caught.value) == f"W: {problem}. Expected an object. Fix: do F"
    assert isinstance(caught.value, CurationError)


def test_good_json_and_the_size_limit(tmp_path):
    deep = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert parse('{"a": [1, {"b": null}]}') == {"a": [1, {"b": None}]}
    assert parse(deep) is not None
    with pytest.raises(InputFormatError, match=r"^W: 12 bytes of JSON, more than the 10 read"):
        parse('{"a": "xyz"}', max_bytes=10)
    path = tmp_path / "big.json"
    path.write_text('{"a": "xyz"}')
    with pytest.raises(InputFormatError, match=f"^{path}: 12 bytes, more than the 10 read"):
        read_json(path, expected="an object", fix="do F", max_bytes=10)
    assert read_json(path, expected="an object", fix="do F") == {"a": "xyz"}


def test_a_nested_retriever_manifest_is_a_retriever_error(tmp_path):
    from retrievers.errors import RetrieverError
    from retrievers.saved import MANIFEST, read_manifest

    (tmp_path / MANIFEST).write_text(NESTED)
    with pytest.raises(RetrieverError) as caught:
        read_manifest(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path / MANIFEST}: JSON arrays/objects are nested too deeply to parse. Expected a "
        "saved retriever's manifest (a JSON object). Fix: rebuild the index (it replaces the "
        "folder) or delete the folder")
    (tmp_path / MANIFEST).write_text('{"format": "x"}')
    with pytest.raises(RetrieverError, match="not a saved retriever's manifest"):
        read_manifest(tmp_path)


def test_a_nested_round_record_or_model_row_is_skipped_or_named(tmp_workspace, caplog):
    from curation.store.models import Models
    from curation.training.round_history import ROUND, last_rounds

    with tmp_workspace.transaction():
        tmp_workspace.audit("root", "kept", ROUND, "PO", after={"reasons": ["x"]})
        tmp_workspace.conn.execute("UPDATE audit_log SET after = ? WHERE object_type = ?",
                                   (NESTED, ROUND))
    assert last_rounds(tmp_workspace, "PO") == []
    assert "nested too deeply" in caplog.text
    with tmp_workspace.transaction():
        tmp_workspace.conn.execute("INSERT INTO models(name, version, status, created_at, schema, "
                                   "manifest) VALUES ('m', '1', 'candidate', '', 'PO', ?)",
                                   (NESTED,))
    with pytest.raises(InputFormatError) as caught:
        Models(tmp_workspace).versions("PO")
    assert str(caught.value).startswith(
        "the manifest of model version m@1 in the workspace database: JSON arrays/objects are "
        "nested too deeply to parse. Expected a JSON object. Fix: the record is damaged")
