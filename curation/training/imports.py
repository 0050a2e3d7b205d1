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
