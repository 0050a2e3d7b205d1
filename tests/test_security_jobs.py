"""Issue 28, security third pass: job submission and the table queue's liveness checks."""

from __future__ import annotations

import pytest

from curation.access.users import Role, User
from curation.jobs.queue import list_jobs, submit_job
from kb_sources.errors import CurationError

CURATOR = User("cur", Role.CURATOR)


# -- item 4: index jobs never take a vector-store location -----------------------------------------
@pytest.mark.parametrize(("retriever", "options", "option"), [
    ("dense", {"vector_store": {"kind": "qdrant", "url": "http://127.0.0.1:9123"}},
     "options.vector_store"),
    ("dense", {"vector_store": {"kind": "qdrant"}}, "options.vector_store"),
    ("hybrid", {"dense": {"vector_store": {"kind": "qdrant", "url": "http://x:1"}}},
     "options.dense.vector_store"),
    ("dense", {"url": "http://127.0.0.1:9123"}, "options.url"),
    ("dense", {"host": "evil.example"}, "options.host"),
    ("dense", {"model": "https://evil.example/model"}, "options.model"),
])
def test_index_jobs_refuse_vector_store_and_urls(tmp_workspace, retriever, options, option):
    with pytest.raises(CurationError, match=rf"Index job option {option}\b.*workspace setting"):
        submit_job(tmp_workspace, "index", {"retriever": retriever, "options": options},
                   user=CURATOR, start=False)
    assert list_jobs(tmp_workspace) == []
