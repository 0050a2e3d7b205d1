"""One BioHiCL round (Lan et al.; TRAINING.md 3): MeSH hierarchy -> LoRA training -> a version.

:func:`train_biohicl` takes the workspace's documents that have MeSH headings (optionally also
MeSH ids of their disease/chemical annotations), expands the headings to all ancestors in the
MeSH tree with depth weights (:mod:`curation.training.mesh_labels`), and trains the base model so
that embedding cosine follows label similarity: MSE over pairs above ``beta`` plus ``lam`` x the
hierarchical contrastive term (:class:`retrievers.training.hicl.HiCLLoss`), in batches that each
hold positive pairs. Only LoRA adapters on the attention query/value projections are trained; they
are merged into the base weights before registration, so the version needs no peft to run.

BioHiCL learns from the corpus's headings, not from the KB: it sees no query and no relation, so
the schema only decides which dev split picks the epoch and which registry name the version gets.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any

from curation.evaluation.harness import build_task
from curation.matching.matcher import EntityMatcher
from curation.store.models import ModelVersion
from curation.store.workspace import Workspace
from curation.training.examples import DEFAULT_DOCUMENT_FORMAT
from curation.training.rounds import (
    Report,
    base_path,
    dev_scorer,
    register_result,
    run_folder,
    step_reporter,
    train_config_of,
)
from kb_sources.errors import CurationError
from retrievers.errors import RetrieverError

logger = logging.getLogger(__name__)

VARIANTS = ("printed", "tempered")


@dataclass(frozen=True)
class HiclOptions:
    """Options of one BioHiCL round.

    Attributes:
        base: Base model: HF name, local folder, registry version or the packaged MiniLM.
        epochs, batch_size, learning_rate, warmup_ratio, max_seq_length, precision, seed:
            see :class:`retrievers.training.config.TrainConfig`. The paper: batch 32, lr 1e-5,
            AdamW without weight decay; our default lr 1e-4 is the usual LoRA rate, since a
            CPU-sized round takes a few dozen steps.
        beta: Label similarity above which a pair is positive (0.3).
        lam: Weight of the hierarchical contrastive term (0.1).
        variant: "printed" (the paper's L_con, SimL inside the log) or "tempered" (SimL as a
            weight outside the log, temperature ``tau``).
        tau: Temperature of the tempered variant.
        lora_rank, lora_alpha, lora_dropout: LoRA adapter (rank 8 on query/value by default).
        lora_targets: Comma-separated module names the adapter wraps.
        full_finetune: Train all weights instead of LoRA (the paper's ablation).
        entity_mesh: Also label documents with the MeSH ids of their disease/chemical
            annotations (never from the reserved corpora); reported separately. Annotations
            carry descriptor ids, the tree carries names: needs ``mesh_descriptors``.
        mesh_descriptors: File mapping descriptor ids to names: NLM's ``d2019.bin``, or a TSV
            with ``descriptor_ui`` and ``descriptor`` columns (the pool's heading file is one,
            covering only the descriptors its headings use); or ``"annotations"``: derive the
            names from the mentions themselves (an adaptation, see
            :mod:`curation.training.mesh_descriptors`; recorded in the manifest).
        dev_depth, dev_random: The dev pool that picks the epoch (0: last epoch).
    """

    base: str = "all-MiniLM-L6-v2"
    epochs: int = 2
    batch_size: int = 32
    learning_rate: float = 1e-4
    warmup_ratio: float = 0.1
    max_seq_length: int = 128
    precision: str = "auto"
    seed: int = 42
    beta: float = 0.3
    lam: float = 0.1
    variant: str = "printed"
    tau: float = 0.05
    lora_rank: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.1
    lora_targets: str = "query,value"
    full_finetune: bool = False
    entity_mesh: bool = False
    mesh_descriptors: str = ""
    dev_depth: int = 20
    dev_random: int = 500

    def train_config(self) -> Any:
        return train_config_of(self, weight_decay=0.0)  # BioHiCL: AdamW without weight decay

    def targets(self) -> tuple[str, ...]:
        return tuple(t.strip() for t in self.lora_targets.split(",") if t.strip())

    def validate(self) -> None:
        """Raise :class:`CurationError` on any invalid value."""
        self.train_config()
        problems = []
        if not 0 <= self.beta < 1:
            problems.append(f"beta must be in [0, 1) (paper: 0.3), got {self.beta!r}")
        if self.lam < 0:
            problems.append(f"lam must be >= 0 (paper: 0.1), got {self.lam!r}")
        if self.variant not in VARIANTS:
            problems.append(f"variant must be one of {', '.join(VARIANTS)}, got "
                            f"{self.variant!r}")
        if self.tau <= 0:
            problems.append(f"tau must be > 0, got {self.tau!r}")
        if not self.full_finetune:
            if not isinstance(self.lora_rank, int) or self.lora_rank < 1:
                problems.append(f"lora_rank must be an integer >= 1 (default 8), got "
                                f"{self.lora_rank!r}")
            if not 0 <= self.lora_dropout < 1:
                problems.append(f"lora_dropout must be in [0, 1), got {self.lora_dropout!r}")
            if not self.targets():
                problems.append("lora_targets must name modules, e.g. 'query,value'")
        if self.entity_mesh and not self.mesh_descriptors:
            problems.append("entity_mesh needs mesh_descriptors: annotations name MeSH "
                            "descriptor ids but the tree names descriptors; pass NLM's "
                            "d2019.bin, a TSV with descriptor_ui and descriptor columns, or "
                            "'annotations' to derive names from the mentions")
        if self.batch_size < 4:
            problems.append(f"batch_size must be >= 4 so a batch holds positive and negative "
                            f"pairs (paper: 32), got {self.batch_size!r}")
        if problems:
            raise CurationError("Invalid BioHiCL options: " + "; ".join(problems))


def train_biohicl(ws: Workspace, schema: str, options: HiclOptions | None = None, *,
                  actor: str, progress: bool = True, report: Report | None = None,
                  extra_manifest: dict[str, Any] | None = None) -> ModelVersion:
    """Train one BioHiCL round and register it as a candidate ``<schema>-biohicl@n``.

    Raises:
        CurationError: No MeSH tree or headings in the workspace, bad options, training failed.
    """
    from datasets import Dataset

    from curation.training.mesh_descriptors import descriptor_names
    from curation.training.mesh_labels import (
        mesh_labels,
        positive_partners,
    )
    from retrievers.training.engine import train_model
    from retrievers.training.hicl import HiCLLoss, hierarchy_batch_sampler
    from retrievers.training.lora import add_lora, merge_lora

    options = options or HiclOptions()
    options.validate()
    train_config = options.train_config()
    task = build_task(ws, schema)
    if report:
        report(0.02, "building MeSH labels")
    names, provenance = (descriptor_names(ws, options.mesh_descriptors) if options.entity_mesh
                         else (None, None))
    labels = mesh_labels(ws, entity_mesh=options.entity_mesh, descriptor_names=names)
    partners = positive_partners(labels, beta=options.beta)
    anchors = sum(1 for p in partners if len(p))
    if anchors < 2:
        raise CurationError(
            f"BioHiCL needs documents whose MeSH labels overlap above beta={options.beta}: only "
            f"{anchors} of {len(labels.doc_ids)} labelled documents have a partner; import more "
            "MeSH headings or lower beta")
    fmt = DEFAULT_DOCUMENT_FORMAT
    texts = _texts(ws, labels.doc_ids, fmt)
    dataset = Dataset.from_dict({"text": texts, "label": list(range(len(texts)))})
    manifest = {"recipe": "biohicl", "examples": len(texts), "documents": len(texts),
                "anchors_with_partner": anchors, "entity_mesh": options.entity_mesh,
                "labels": labels.summary(beta=options.beta), "sha256": _digest(labels)}
    if provenance:
        manifest["descriptor_names"] = provenance
    logger.info("BioHiCL on %d labelled documents (%d with a partner above beta %.2f)",
                len(texts), anchors, options.beta)
    base = base_path(ws, options.base)
    run_dir = run_folder(ws, schema, "biohicl", manifest["sha256"], options)
    resume = (run_dir / "checkpoints").is_dir()
    lora = not options.full_finetune
    facts: dict[str, Any] = {"lora": None}

    def prepare(model: Any) -> Any:
        trainable = add_lora(model, rank=options.lora_rank, alpha=options.lora_alpha,
                             dropout=options.lora_dropout, targets=options.targets())
        total = sum(p.numel() for p in model.parameters())
        facts["lora"] = {"rank": options.lora_rank, "alpha": options.lora_alpha,
                         "targets": list(options.targets()), "trainable_parameters": trainable,
                         "trainable_share": round(trainable / max(total, 1), 6), "merged": True}
        return model

    try:
        result = train_model(
            base, dataset,
            lambda model: HiCLLoss(model, labels.matrix, beta=options.beta, lam=options.lam,
                                   variant=options.variant, tau=options.tau),
            run_dir, train_config, resume=resume, progress=step_reporter(report, progress),
            eval_fn=dev_scorer(ws, task, options, fmt, EntityMatcher()),
            batch_sampler=hierarchy_batch_sampler(partners),
            prepare_model=prepare if lora else None, finalize_model=merge_lora if lora else None)
    except RetrieverError as exc:
        raise CurationError(f"BioHiCL training failed: {exc}") from exc
    return register_result(ws, schema=task.schema, recipe="biohicl", options=options,
                           result=result, train_config=train_config, data_manifest=manifest,
                           document_format=fmt, resumed=resume, actor=actor, run_dir=run_dir,
                           extra_manifest={**facts, **(extra_manifest or {})}, report=report)


def _texts(ws: Workspace, doc_ids: Any, fmt: str) -> list[str]:
    rows = {r[0]: fmt.format(title=r[1], abstract=r[2]).strip() for r in ws.conn.execute(
        "SELECT doc_id, title, abstract FROM documents")}
    return [rows[d] for d in doc_ids]


def _digest(labels: Any) -> str:
    digest = hashlib.sha256()
    matrix = labels.matrix.tocsr() if hasattr(labels.matrix, "tocsr") else labels.matrix
    for i, doc in enumerate(labels.doc_ids):
        row = matrix[i]
        cols = row.indices.tolist() if hasattr(row, "indices") else row.nonzero()[-1].tolist()
        digest.update(f"{doc}\t{','.join(map(str, cols))}\n".encode())
    return digest.hexdigest()
