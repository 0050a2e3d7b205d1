"""Published checkpoints as registry versions without training: ``kbcurate models import``.

BiCA (``bisectgroup/BiCA-small|base``), BioHiCL (``LunaLan07/BioHiCL-Base|Large``), MedCPT
(``ncbi/MedCPT-Query-Encoder`` + ``ncbi/MedCPT-Article-Encoder``), BioLinkBERT / PubMedBERT or
any other bi-encoder become a version ``<schema>-<name>@n`` that evaluation, the app's retriever
menu and the feedback loop (as a warm start) use like a trained one. The source is a local folder
(the offline route: copy the folder from a machine with internet) or a Hugging Face name that is
cached or reachable online; nothing is downloaded when offline, the error says so.

What each kind of folder becomes (TRAINING.md 4):

- a sentence-transformers folder (``modules.json``): kept as it is (its own pooling);
- a plain transformers folder: wrapped as Transformer + Pooling, the pooling from ``--pooling``
  or the name's profile (:mod:`retrievers.profiles`: MedCPT/BioHiCL/BGE CLS, BiCA/GTE mean);
- a PEFT adapter folder (``adapter_config.json``, e.g. BioHiCL's): the adapter is attached to its
  base and merged, so the version needs no peft at inference;
- a query encoder of its own (MedCPT): ``--query-model`` is saved in the version's ``query/``
  folder and used for queries; MedCPT scores by dot product, so both sides are L2-normalised
  (the index is inner product), as EDEL does.

A **cross-encoder** (a sequence-classification ``config.json`` with one label, e.g.
``ncbi/MedCPT-Cross-Encoder`` or ``cross-encoder/ms-marco-MiniLM-L6-v2``; or any source with
``kind="cross"``) becomes a cross version (:func:`import_cross_encoder`): saved as a safetensors
sequence-classification folder, measured by re-ranking BM25's top K of the test queries
(:class:`curation.training.measures.RerankMeasure`), activated as the schema's cross-encoder.

The name's profile also gives query/document prefixes (BGE's instruction) and the query length;
they are stored in the manifest (``encoder``) because the version's folder name no longer carries
the model's name.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from curation.store.model_files import check_model_files
from curation.store.models import Models, ModelVersion
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.schema import get_schema
from retrievers.errors import RetrieverError

logger = logging.getLogger(__name__)


def import_checkpoint(ws: Workspace, source: str, *, schema: str, name: str = "imported",
                      query_model: str | None = None, pooling: str | None = None,
                      max_seq_length: int = 256, query_prefix: str | None = None,
                      doc_prefix: str | None = None, actor: str,
                      evaluation: str | None = "corpus", progress: bool = False) -> ModelVersion:
    """Register a published checkpoint (folder or HF name) as a candidate version, scored on
    the schema's test split as a trained version is (:func:`~curation.training.scoring.
    evaluate_version`), so it is listed with test metrics.

    Args:
        ws: The workspace.
        source: Model folder or Hugging Face name (documents; queries too without
            ``query_model``).
        schema: Schema the version serves (its registry name and active slot).
        name: Middle part of the version id (``<schema>-<name>@n``), e.g. "bica_small".
        query_model: Separate query encoder (MedCPT), folder or HF name.
        pooling: "cls", "mean", ... overriding the folder's and the profile's pooling.
        max_seq_length: Token limit for documents.
        query_prefix, doc_prefix: Override the profile's prefixes.
        actor: Who imports it (``created_by``).
        evaluation: "corpus" (encodes the whole corpus, as ``kbcurate train`` scores), "pool"
            (the cheaper test pool) or None (no test metrics: the version is listed as not
            evaluated).
        progress: Progress bars while scoring.

    Raises:
        CurationError: The source cannot be loaded (named, with the offline route), or it is
            not a bi-encoder sentence-transformers can load.
    """
    from retrievers.profiles import model_profile

    if is_cross_source(source):
        return import_cross_encoder(ws, source, schema=schema, name=name, actor=actor,
                                    max_seq_length=max_seq_length, evaluation=evaluation,
                                    progress=progress)
    sch = get_schema(schema, ws.schemas())
    profile = model_profile(f"{source} {name}")
    encoder: dict[str, Any] = {
        "pooling": pooling or profile.pooling,
        "query_prefix": profile.query_prefix if query_prefix is None else query_prefix,
        "doc_prefix": profile.doc_prefix if doc_prefix is None else doc_prefix,
        "query_max_seq_length": profile.query_max_seq_length,
    }
    query_source = query_model or (profile.query_model if "medcpt" in source.lower() else None)
    (ws.root / "cache").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="import-", dir=ws.root / "cache") as tmp:
        folder = Path(tmp) / "model"
        _save_plain(source, folder, pooling, max_seq_length)
        if query_source:
            _save_plain(query_source, folder / "query", pooling, encoder["query_max_seq_length"]
                        or max_seq_length)
        manifest = {"imported": True, "imported_from": source, "query_model": query_source,
                    "max_seq_length": max_seq_length,
                    "encoder": {k: v for k, v in encoder.items() if v not in (None, "")},
                    "pooling": pooling or profile.pooling or "saved",
                    "similarity": "dot (normalised: cosine)" if query_source else "cosine"}
        version = Models(ws).register(schema=sch.name, recipe=name, base_model=source,
                                      model_dir=folder, manifest=manifest, created_by=actor)
    logger.info("imported %s as %s", source, version.id)
    if evaluation is None:
        return version
    from curation.training.scoring import evaluate_version

    return evaluate_version(ws, version, actor=actor, evaluation=evaluation, progress=progress)


def _save_plain(source: str, dest: Path, pooling: str | None, max_seq_length: int) -> None:
    """Load ``source`` (merging a PEFT adapter) and save a plain safetensors folder."""
    from retrievers.encoder import load_sentence_transformer

    path = Path(source).expanduser()
    if source.startswith(("/", ".", "~")) and not path.is_dir():
        raise CurationError(f"Cannot import {source}: no such folder. Pass a model folder "
                            "(copied from a machine with internet) or a Hugging Face name")
    if path.is_dir():  # pickles and oversized configs are refused before anything loads
        check_model_files(path, f"model folder {source}")
    try:
        model = load_sentence_transformer(str(path) if path.is_dir() else source, pooling,
                                          max_seq_length, "cpu")
    except (RetrieverError, ValueError, ImportError) as exc:
        raise CurationError(
            f"Cannot import {source}: {exc}. Offline, download it on a machine with internet "
            "(e.g. `hf download NAME --local-dir FOLDER`), copy FOLDER here and "
            "import the folder") from exc
    if _has_adapter(model):
        from retrievers.training.lora import merge_lora

        model = merge_lora(model)
    dest.parent.mkdir(parents=True, exist_ok=True)
    model.save(str(dest), safe_serialization=True)
    for stale in ("adapter_config.json", "adapter_model.safetensors"):
        if (dest / stale).exists():
            raise CurationError(f"{source}: its adapter could not be merged ({stale} remains); "
                                "merge it with peft's merge_and_unload and import the result")
    if not (dest / "model.safetensors").is_file():
        shutil.rmtree(dest, ignore_errors=True)
        raise CurationError(f"{source} did not save as model.safetensors; import a "
                            "sentence-transformers or transformers model folder")


def _has_adapter(model: Any) -> bool:
    try:
        return bool(model.has_peft_compatible_model() and model.active_adapters())
    except (ValueError, AttributeError):
        return False


#: Import kinds: a bi-encoder (dense) or a cross-encoder.
KINDS = ("auto", "dense", "cross")


def is_cross_source(source: str) -> bool:
    """Whether ``source`` is a local cross-encoder folder (one-label sequence classification)."""
    from retrievers.cross import is_cross_encoder_folder

    path = Path(source).expanduser()
    return path.is_dir() and is_cross_encoder_folder(path)


def import_cross_encoder(ws: Workspace, source: str, *, schema: str, name: str = "cross_imported",
                         max_seq_length: int = 256, rerank_depth: int = 100, actor: str,
                         evaluation: str | None = "corpus", progress: bool = False
                         ) -> ModelVersion:
    """Register a cross-encoder (folder or HF name) as a cross version of ``schema``, scored
    by re-ranking BM25's top ``rerank_depth`` of the test queries (``evaluation`` None: not
    scored).

    Raises:
        CurationError: No such folder, no safetensors weights (pickles are refused before
            anything loads), not a one-label sequence-classification model.
    """
    from curation.store.documents import PLAIN_FORMAT
    from curation.training.cross_versions import CROSS_KIND
    from retrievers.cross import CrossScorer

    sch = get_schema(schema, ws.schemas())
    path = Path(source).expanduser()
    if source.startswith(("/", ".", "~")) and not path.is_dir():
        raise CurationError(f"Cannot import {source}: no such folder. Pass a cross-encoder folder "
                            "(copied from a machine with internet) or a Hugging Face name")
    if path.is_dir():
        check_model_files(path, f"cross-encoder folder {source}")
    try:
        scorer = CrossScorer.load(str(path) if path.is_dir() else source, device="cpu",
                                  precision="fp32", max_length=max_seq_length)
    except RetrieverError as exc:
        raise CurationError(f"Cannot import {source} as a cross-encoder: {exc}") from exc
    (ws.root / "cache").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="import-", dir=ws.root / "cache") as tmp:
        folder = Path(tmp) / "model"
        scorer.save(folder)
        manifest = {"imported": True, "imported_from": source, "kind": CROSS_KIND,
                    "max_seq_length": max_seq_length, "rerank_depth": rerank_depth,
                    "document_format": PLAIN_FORMAT, "weights_fingerprint": scorer.fingerprint}
        version = Models(ws).register(schema=sch.name, recipe=name, base_model=source,
                                      model_dir=folder, manifest=manifest, created_by=actor)
    logger.info("imported cross-encoder %s as %s", source, version.id)
    if evaluation is None:
        return version
    from curation.training.measures import evaluate_cross

    return evaluate_cross(ws, version, actor=actor, progress=progress)
