"""BioHiCL (Lan et al.; TRAINING.md 3): the MeSH hierarchy of the corpus's headings -> MSE +
hierarchical contrastive loss, LoRA merged before registration.

Rows: the workspace's documents with MeSH headings (optionally also MeSH ids of their
disease/chemical annotations), expanded to all ancestors with depth weights
(:mod:`curation.training.recipes.biohicl.mesh_labels`). BioHiCL sees no query and no relation:
the schema only decides which dev split picks the epoch and the version's name.

Curators' labels become **extra pairs**: the documents labelled *complete* or *partial* for one
(train-split) query get one more label column, ``label:<query>``, of weight 1 beside their MeSH
vector (rows renormalised), so two of them have label similarity >= 0.5 > beta and the loss pulls
them together; a labelled document without headings joins the rows with that column alone.
*irrelevant* labels carry no signal in a similarity-of-labels loss and are counted unused.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from curation.store.documents import Documents
from curation.training.recipes.base import (
    Recipe,
    RoundInput,
    TrainingData,
    TrainingOptions,
    option,
)
from curation.training.recipes.edel.examples import DEFAULT_DOCUMENT_FORMAT
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

VARIANTS = ("printed", "tempered")
#: Weight of a label column beside a document's (unit) MeSH vector.
LABEL_WEIGHT = 1.0


@dataclass(frozen=True)
class HiclOptions(TrainingOptions):
    """Options of one BioHiCL round. The paper: batch 32, lr 1e-5, AdamW without weight decay;
    our default lr 1e-4 is the usual LoRA rate, since a CPU-sized round takes a few dozen steps.
    ``max_queries`` does not apply (BioHiCL uses no query)."""

    epochs: int = option(2, "passes over the labelled documents")
    batch_size: int = option(32, "documents per step, >= 4 so a batch holds positive and "
                                 "negative pairs (paper: 32)")
    learning_rate: float = option(1e-4, "peak AdamW learning rate (LoRA; paper 1e-5)")
    beta: float = option(0.3, "label similarity above which a pair is positive (paper: 0.3)")
    lam: float = option(0.1, "weight of the hierarchical contrastive term (paper: 0.1)")
    variant: str = option("printed", "printed: the paper's L_con (SimL inside the log); "
                          "tempered: SimL as a weight outside the log", VARIANTS)
    tau: float = option(0.05, "temperature of the tempered variant")
    lora_rank: int = option(8, "LoRA adapter rank")
    lora_alpha: int = option(16, "LoRA alpha")
    lora_dropout: float = option(0.1, "LoRA dropout, in [0, 1)")
    lora_targets: str = option("query,value", "comma-separated modules the adapter wraps")
    full_finetune: bool = option(False, "train all weights instead of LoRA (the paper's "
                                        "ablation)")
    entity_mesh: bool = option(False, "also label documents by the MeSH ids of their "
                                      "disease/chemical annotations (needs mesh_descriptors)")
    mesh_descriptors: str = option("", "descriptor id -> name: NLM d2019.bin, a TSV with "
                                   "descriptor_ui and descriptor columns, or 'annotations' "
                                   "(names derived from the mentions, an adaptation)")

    def train_config(self, **extra: Any) -> Any:
        return super().train_config(weight_decay=0.0, **extra)  # BioHiCL: no weight decay

    def targets(self) -> tuple[str, ...]:
        return tuple(t.strip() for t in self.lora_targets.split(",") if t.strip())

    def validate(self) -> None:
        super().validate()
        problems = []
        if not 0 <= self.beta < 1:
            problems.append(f"beta must be in [0, 1) (paper: 0.3), got {self.beta!r}")
        if self.lam < 0:
            problems.append(f"lam must be >= 0 (paper: 0.1), got {self.lam!r}")
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


@dataclass(frozen=True)
class HiclRows:
    """BioHiCL's rows: document texts, their label rows and each one's positive partners."""

    texts: list[str]
    labels: Any
    partners: list[Any]


class BioHiclRecipe(Recipe):
    """BioHiCL: MeSH hierarchy, LoRA; labels as extra positive pairs."""

    name = "biohicl"
    description = "BioHiCL: the MeSH hierarchy of the corpus's headings (LoRA)"
    labels = ("complete/partial documents of one query become a positive group (an extra label "
              "column); irrelevant unused")
    Options = HiclOptions
    uses_queries = False

    def build_data(self, data_in: RoundInput, options: Any) -> TrainingData:
        from curation.training.recipes.biohicl.mesh_descriptors import descriptor_names
        from curation.training.recipes.biohicl.mesh_labels import mesh_labels, positive_partners

        ws = data_in.ws
        names, provenance = (descriptor_names(ws, options.mesh_descriptors)
                             if options.entity_mesh else (None, None))
        labels = mesh_labels(ws, entity_mesh=options.entity_mesh, descriptor_names=names)
        used: tuple[int, ...] = ()
        label_facts: dict[str, Any] = {}
        if data_in.labels is not None:
            labels, used, label_facts = with_labels(labels, data_in.labels)
        partners = positive_partners(labels, beta=options.beta)
        anchors = sum(1 for p in partners if len(p))
        if anchors < 2:
            raise CurationError(
                f"BioHiCL needs documents whose MeSH labels overlap above beta={options.beta}: "
                f"only {anchors} of {len(labels.doc_ids)} labelled documents have a partner; "
                "import more MeSH headings or lower beta")
        fmt = DEFAULT_DOCUMENT_FORMAT
        texts = Documents(ws).texts(list(labels.doc_ids), fmt)
        manifest = {"recipe": "biohicl", "examples": len(texts), "documents": len(texts),
                    "anchors_with_partner": anchors, "entity_mesh": options.entity_mesh,
                    "labels": {**labels.summary(beta=options.beta), **label_facts},
                    "sha256": _digest(labels)}
        if provenance:
            manifest["descriptor_names"] = provenance
        logger.info("BioHiCL on %d labelled documents (%d with a partner above beta %.2f)",
                    len(texts), anchors, options.beta)
        return TrainingData(HiclRows(texts, labels, partners), manifest, fmt, 0, used)

    def train(self, base: str, data: TrainingData, options: Any, *, run_dir: Path,
              resume: bool, progress: Any, eval_fn: Any) -> Any:
        from datasets import Dataset

        from retrievers.training.engine import train_model
        from retrievers.training.hicl import HiCLLoss, hierarchy_batch_sampler
        from retrievers.training.lora import add_lora, merge_lora

        rows: HiclRows = data.rows
        dataset = Dataset.from_dict({"text": rows.texts, "label": list(range(len(rows.texts)))})
        lora = not options.full_finetune

        def prepare(model: Any) -> Any:
            trainable = add_lora(model, rank=options.lora_rank, alpha=options.lora_alpha,
                                 dropout=options.lora_dropout, targets=options.targets())
            total = sum(p.numel() for p in model.parameters())
            data.extra_manifest["lora"] = {
                "rank": options.lora_rank, "alpha": options.lora_alpha,
                "targets": list(options.targets()), "trainable_parameters": trainable,
                "trainable_share": round(trainable / max(total, 1), 6), "merged": True}
            return model

        data.extra_manifest.setdefault("lora", None)
        return train_model(
            base, dataset,
            lambda model: HiCLLoss(model, rows.labels.matrix, beta=options.beta,
                                   lam=options.lam, variant=options.variant, tau=options.tau),
            run_dir, options.train_config(), resume=resume, progress=progress, eval_fn=eval_fn,
            batch_sampler=hierarchy_batch_sampler(rows.partners),
            prepare_model=prepare if lora else None, finalize_model=merge_lora if lora else None)


def with_labels(labels: Any, made: Any) -> tuple[Any, tuple[int, ...], dict[str, Any]]:
    """MeSH label rows plus one ``label:<query>`` column per labelled query (module docstring)."""
    import numpy as np
    from scipy import sparse

    groups: dict[str, list[tuple[int, str]]] = {}
    for label_id, e in made.used_examples():
        if e.positive:
            groups.setdefault(e.qid, []).append((label_id, e.doc_id))
    groups = {q: g for q, g in groups.items() if len({d for _, d in g}) >= 2}
    used = tuple(sorted(i for g in groups.values() for i, _ in g))
    facts = {"label_groups": len(groups), "label_documents_used": len(used),
             "labels_unused": sorted(set(made.used) - set(used)),
             "last_label_id": made.last_label_id}
    if not groups:
        return labels, used, facts
    doc_ids = list(labels.doc_ids)
    index = {d: i for i, d in enumerate(doc_ids)}
    for g in groups.values():
        for _, doc in g:
            if doc not in index:
                index[doc] = len(doc_ids)
                doc_ids.append(doc)
    n_old, n_nodes = labels.matrix.shape
    extra = sparse.lil_matrix((len(doc_ids), len(groups)))
    for col, qid in enumerate(sorted(groups)):
        for _, doc in groups[qid]:
            extra[index[doc], col] = LABEL_WEIGHT
    base = sparse.vstack([labels.matrix, sparse.csr_matrix((len(doc_ids) - n_old, n_nodes))])
    matrix = sparse.hstack([base, extra.tocsr()]).tocsr()
    norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
    matrix = sparse.diags(1.0 / np.where(norms > 0, norms, 1.0)) @ matrix
    counts = np.concatenate([labels.heading_counts,
                             np.zeros(len(doc_ids) - n_old, dtype=labels.heading_counts.dtype)])
    nodes = tuple(labels.nodes) + tuple(f"label:{q}" for q in sorted(groups))
    return (replace(labels, doc_ids=tuple(doc_ids), nodes=nodes, matrix=matrix.tocsr(),
                    heading_counts=counts), used, facts)


def _digest(labels: Any) -> str:
    digest = hashlib.sha256()
    matrix = labels.matrix.tocsr() if hasattr(labels.matrix, "tocsr") else labels.matrix
    for i, doc in enumerate(labels.doc_ids):
        row = matrix[i]
        cols = row.indices.tolist() if hasattr(row, "indices") else row.nonzero()[-1].tolist()
        digest.update(f"{doc}\t{','.join(map(str, cols))}\n".encode())
    return digest.hexdigest()


RECIPE = BioHiclRecipe()
