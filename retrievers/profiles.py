"""What a model card asks of an encoder: pooling, query/document prefixes, a separate query
model and the query length, looked up by a fragment of the model name."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelProfile:
    """What a model card asks for. ``None`` leaves the choice to the model folder / defaults."""

    pooling: str | None = None
    query_prefix: str = ""
    doc_prefix: str = ""
    query_model: str | None = None
    query_max_seq_length: int | None = None


_BGE_QUERY = "Represent this sentence for searching relevant passages: "
#: Lower-case name fragment -> profile. Sources: the model cards / saved pooling configs.
MODEL_PROFILES: tuple[tuple[str, ModelProfile], ...] = (
    # MedCPT (Jin et al. 2023): [CLS] of the last layer; queries <= 64 tokens, own query encoder
    ("medcpt", ModelProfile("cls", query_model="ncbi/MedCPT-Query-Encoder",
                            query_max_seq_length=64)),
    # BioHiCL: LoRA on BAAI/bge-*-en-v1.5 (merged), so BGE's CLS pooling; card names no prefix
    ("biohicl", ModelProfile("cls")),
    # BiCA (Sinha et al.): GTE-small/base fine-tuned; saved 1_Pooling config is mean
    ("bica", ModelProfile("mean")),
    ("bge-", ModelProfile("cls", query_prefix=_BGE_QUERY)),
    ("e5-", ModelProfile("mean", query_prefix="query: ", doc_prefix="passage: ")),
    ("gte-", ModelProfile("mean")),
    ("minilm", ModelProfile("mean")),
)


def model_profile(model: str) -> ModelProfile:
    """The profile of the first :data:`MODEL_PROFILES` fragment found in ``model``."""
    name = model.lower()
    for fragment, profile in MODEL_PROFILES:
        if fragment in name:
            return profile
    return ModelProfile()
