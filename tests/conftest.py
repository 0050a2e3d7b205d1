"""Shared fixtures: the real data folder, offline guards, hand-made fixture files, the tiny model,
PostgreSQL, and the real-browser fixtures (Chromium, the served app: tests/browser_support.py)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
REPO_ROOT = Path(__file__).resolve().parents[1]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--data-dir",
        default=None,
        help="Folder of real sample data (default: $KBCURATE_DATA or ../shared/data).",
    )


@pytest.fixture(scope="session")
def data_dir(request: pytest.FixtureRequest) -> Path:
    """The real data folder. Missing data is a failure, never a skip (CI has it)."""
    from curation.store.config import resolve_data_dir

    path = resolve_data_dir(request.config.getoption("--data-dir"))
    if not path.is_dir():
        pytest.fail(
            f"real data folder {path} not found: set KBCURATE_DATA or --data-dir to the "
            "shared/data folder (tests that need it fail rather than skip)"
        )
    return path


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


_real_connect = socket.socket.connect


def _guarded_connect(self: socket.socket, address: object) -> object:
    host = address[0] if isinstance(address, tuple) else address
    if isinstance(host, str) and host not in ("127.0.0.1", "::1", "localhost") and not \
            host.startswith("/"):
        raise RuntimeError(f"tests must not use the network (tried to connect to {host!r})")
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test downloads anything: HF offline and only loopback sockets."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)


@pytest.fixture
def tmp_workspace(tmp_path: Path):
    """A fresh, initialised workspace."""
    from curation.store.workspace import Workspace

    ws = Workspace.init(tmp_path / "ws")
    yield ws
    ws.close()


os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder of a tiny random BERT sentence-transformers model, built once per session."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("tiny_model", Path(__file__).parent /
                                                  "tiny_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def pg_cluster():
    """A throwaway PostgreSQL server for the session (tests/pg_server.py). A server that cannot
    start is a failure, never a skip: CI installs PostgreSQL (.ci/run)."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from pg_server import ClusterError, ThrowawayCluster

    try:
        cluster = ThrowawayCluster({"fsync": "off", "synchronous_commit": "off",
                                    "full_page_writes": "off"}).start()
    except ClusterError as exc:
        pytest.fail(f"the PostgreSQL test server could not start: {exc}")
    yield cluster
    cluster.stop()


@pytest.fixture
def pg_url(pg_cluster) -> str:
    """The URL of a fresh, empty PostgreSQL database (dropped after the test)."""
    url = pg_cluster.create_database()
    yield url
    pg_cluster.drop_database(url)


@pytest.fixture
def fake_model_dir(tmp_path: Path) -> Path:
    """A small folder shaped like a sentence-transformers model (never loaded)."""
    folder = tmp_path / "fake-st"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(bytes(range(256)) * 4)
    (folder / "config.json").write_text('{"hidden_size": 32}\n')
    (folder / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}\n')
    return folder


@pytest.fixture
def browser():
    """Debian's Chromium driven by Playwright (tests/browser_support.py); fails when missing."""
    from browser_support import chromium

    with chromium() as launched:
        yield launched


@pytest.fixture
def served(tmp_path: Path):
    """The app served on a free loopback port over a small fixture workspace (local mode)."""
    from app_helpers import build_app_workspace
    from browser_support import serving

    root = build_app_workspace(tmp_path / "ws")
    with serving(root, {"HOME": str(tmp_path), "USER": "browser-test"}) as url:
        yield url, root


@pytest.fixture
def served_team(tmp_path: Path):
    """The app over the fixture workspace with a users file (password sign-in) and one item two
    annotators graded differently."""
    from app_helpers import add_users, build_app_workspace
    from browser_support import serving

    from curation.store.labels import Labels
    from curation.store.workspace import Workspace

    root = build_app_workspace(tmp_path / "ws")
    add_users(root, alice="curator", ann="annotator", bob="annotator", boss="admin")
    with Workspace.open(root) as ws:
        for user, grade in (("ann", "complete"), ("bob", "irrelevant")):
            Labels(ws).record(user=user, schema="PO",
                              query_key="gene=gene:673|variant=variant:v600e",
                              query_text="Treatment for gene BRAF and variant V600E?",
                              doc_id="25265492", grade=grade)
    with serving(root, {"HOME": str(tmp_path)}) as url:
        yield url, root


@pytest.fixture(scope="session")
def tiny_cross_encoder(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder of a tiny random BERT cross-encoder (sequence classification, ``num_labels=1``,
    safetensors, the tiny model's WordPiece tokenizer), built once per session.

    Its logits are random but deterministic (seeded); tests check mechanics, never quality.
    """
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    hf = tiny_model_path.parent / "hf"  # the tokenizer and config tiny_model.py wrote
    out = tmp_path_factory.mktemp("tiny-cross") / "cross"
    base = BertConfig.from_pretrained(hf)
    config = BertConfig(vocab_size=base.vocab_size, hidden_size=base.hidden_size,
                        num_hidden_layers=base.num_hidden_layers,
                        num_attention_heads=base.num_attention_heads,
                        intermediate_size=base.intermediate_size,
                        max_position_embeddings=base.max_position_embeddings, num_labels=1)
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(hf).save_pretrained(out)
    return out
