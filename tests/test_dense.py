"""Encoder (pooling, prefixes, query model, length-sorted batches) and the dense retriever."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from retrievers import RetrieverError, build_retriever
from retrievers.dense import DenseRetriever
from retrievers.encoder import Encoder, EncoderConfig, resolve_device, resolve_model_path
from retrievers.profiles import model_profile
from retrievers.registry import get_spec

TEXTS = ["BRAF V600E melanoma responds to vemurafenib and dabrafenib in most patients",
         "EGFR", "lung cancer erlotinib", "AKT1 Ser473 phosphorylation by mTORC2 in cells"]


@pytest.fixture(scope="module")
def encoder(tiny_model_path: Path) -> Encoder:
    return Encoder(EncoderConfig(model=str(tiny_model_path), batch_size=2))


def test_vectors_are_normalised_float32_in_input_order(encoder: Encoder) -> None:
    batch = encoder.encode_documents(TEXTS)
    assert batch.shape == (4, 32) and batch.dtype == np.float32
    assert np.linalg.norm(batch, axis=1) == pytest.approx(1.0, abs=1e-5)
    one_by_one = np.stack([encoder.encode_documents([t])[0] for t in TEXTS])
    assert np.allclose(batch, one_by_one, atol=1e-5)  # length sorting restored the order


def test_unnormalised_option(tiny_model_path: Path) -> None:
    raw = Encoder(EncoderConfig(model=str(tiny_model_path), normalize=False))
    assert not np.allclose(np.linalg.norm(raw.encode_documents(TEXTS), axis=1), 1.0)


def test_prefixes_are_prepended(tiny_model_path: Path, encoder: Encoder) -> None:
    prefixed = Encoder(EncoderConfig(model=str(tiny_model_path), query_prefix="query: ",
                                     doc_prefix="passage: "))
    assert np.allclose(prefixed.encode_queries(["BRAF"]),
                       encoder.encode_documents(["query: BRAF"]), atol=1e-5)
    assert np.allclose(prefixed.encode_documents(["BRAF"]),
                       encoder.encode_documents(["passage: BRAF"]), atol=1e-5)


def test_query_length_limit_truncates_queries_only(tiny_model_path: Path) -> None:
    short = Encoder(EncoderConfig(model=str(tiny_model_path), query_max_seq_length=4))
    four_tokens = Encoder(EncoderConfig(model=str(tiny_model_path), max_seq_length=4))
    assert np.allclose(short.encode_queries([TEXTS[0]]),
                       four_tokens.encode_documents([TEXTS[0]]), atol=1e-5)
    assert not np.allclose(short.encode_documents([TEXTS[0]]),
                           four_tokens.encode_documents([TEXTS[0]]), atol=1e-3)


def test_progress_reaches_total(encoder: Encoder) -> None:
    calls: list[tuple[int, int]] = []
    encoder.encode_documents(TEXTS * 10, progress=lambda d, t: calls.append((d, t)))
    assert calls[-1] == (40, 40)


def test_plain_transformers_folder_gets_profile_pooling(tiny_model_path: Path,
                                                        tmp_path: Path) -> None:
    plain = tiny_model_path.parent / "hf"  # BertModel + tokenizer, no sentence-transformers files
    assert Encoder(EncoderConfig(model=str(plain))).doc_model[1].pooling_mode == "mean"
    medcpt = shutil.copytree(plain, tmp_path / "MedCPT-Article-Encoder")
    config = EncoderConfig(model=str(medcpt), query_model=str(medcpt))
    assert Encoder(config).doc_model[1].pooling_mode == "cls"
    assert Encoder(config).config.query_max_seq_length == 64


def test_explicit_pooling_overrides_saved_config(tiny_model_path: Path) -> None:
    encoder = Encoder(EncoderConfig(model=str(tiny_model_path), pooling="CLS"))
    assert encoder.config.pooling == "cls"
    assert encoder.doc_model[1].pooling_mode == "cls"


@pytest.mark.parametrize(("model", "pooling", "query_prefix", "doc_prefix", "query_model"), [
    ("ncbi/MedCPT-Article-Encoder", "cls", "", "", "ncbi/MedCPT-Query-Encoder"),
    ("BAAI/bge-base-en-v1.5", "cls", "Represent this sentence for searching relevant passages: ",
     "", None),
    ("intfloat/e5-base-v2", "mean", "query: ", "passage: ", None),
    ("bisectgroup/BiCA-base", "mean", "", "", None),
    ("LunaLan07/BioHiCL-Large", "cls", "", "", None),
    ("michiyasunaga/BioLinkBERT-base", None, "", "", None),
])
def test_model_profiles(model: str, pooling: str | None, query_prefix: str, doc_prefix: str,
                        query_model: str | None) -> None:
    profile = model_profile(model)
    resolved = EncoderConfig(model=model).resolved()
    assert profile.pooling == pooling
    assert (resolved.query_prefix, resolved.doc_prefix) == (query_prefix, doc_prefix)
    assert resolved.query_model == query_model


def test_config_overrides_profile() -> None:
    resolved = EncoderConfig(model="BAAI/bge-base-en-v1.5", query_prefix="").resolved()
    assert resolved.query_prefix == ""


def test_bad_config_values_list_options() -> None:
    with pytest.raises(RetrieverError, match="Unknown pooling 'avg'. Available options: cls, "
                                             "lasttoken, max, mean"):
        EncoderConfig(pooling="avg")
    with pytest.raises(RetrieverError, match="Unknown dtype 'int4'"):
        EncoderConfig(dtype="int4")
    with pytest.raises(RetrieverError, match="batch_size must be a positive integer, got 0"):
        EncoderConfig(batch_size=0)
    with pytest.raises(RetrieverError, match="Unknown encoder option 'modle'"):
        EncoderConfig.from_dict({"modle": "x"})


def test_missing_model_says_what_was_expected(tmp_path: Path) -> None:
    with pytest.raises(RetrieverError, match="cannot load model .*Expected a sentence-trans"):
        _ = Encoder(EncoderConfig(model=str(tmp_path / "nope"))).dim


def test_model_id_tracks_what_shapes_document_vectors(tiny_model_path: Path) -> None:
    def mid(**kw: object) -> str:
        return Encoder(EncoderConfig(model=str(tiny_model_path), **kw)).model_id

    assert mid() == mid(batch_size=7, query_prefix="q: ", device="cpu")
    assert len({mid(), mid(pooling="cls"), mid(doc_prefix="p: "), mid(max_seq_length=64)}) == 4
    assert mid(model_version="edel-3").startswith("edel-3-")


def test_device_and_packaged_alias() -> None:
    import torch

    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == "cpu"
    assert Path(resolve_model_path("all-MiniLM-L6-v2")).is_dir()


def test_dense_options_and_manifest(tiny_model_path: Path, tmp_path: Path) -> None:
    retriever = build_retriever("dense", model=str(tiny_model_path), index="hnsw", ef_search=64,
                                cache_dir=str(tmp_path / "cache"))
    assert isinstance(retriever, DenseRetriever)
    assert retriever.index_config.kind == "hnsw" and retriever.index_config.ef_search == 64
    retriever.index([("a", TEXTS[0]), ("b", TEXTS[1])], progress=False)
    retriever.save(tmp_path / "saved")
    manifest = json.loads((tmp_path / "saved" / "retriever.json").read_text())
    assert manifest["encoder"]["model"] == str(tiny_model_path)
    assert manifest["index"]["kind"] == "hnsw" and manifest["documents"] == 2
    assert manifest["model_id"] == retriever.encoder.model_id
    assert (manifest["backend"], manifest["precision"]) == ("torch", "fp32")
    assert retriever.label == f"dense:{retriever.encoder.model_id}"
    assert (tmp_path / "cache" / f"{retriever.encoder.model_id}.sqlite").is_file()


def test_dense_options_take_backend_and_precision(tiny_model_path: Path, tmp_path: Path) -> None:
    retriever = build_retriever("dense", model=str(tiny_model_path), backend="onnx",
                                precision="int8", export_dir=str(tmp_path / "exports"))
    config = retriever.encoder.config
    assert (config.backend, config.precision) == ("onnx", "int8")
    assert config.export_dir == str(tmp_path / "exports")
    assert {"backend", "precision", "export_dir"} <= set(get_spec("dense").options)
    with pytest.raises(RetrieverError, match="Unknown backend 'gpu'"):
        build_retriever("dense", backend="gpu")


def test_load_with_an_encoder_in_memory(tiny_model_path: Path, encoder: Encoder,
                                        tmp_path: Path) -> None:
    retriever = DenseRetriever(encoder)
    retriever.index([("a", TEXTS[0]), ("b", TEXTS[2])], progress=False)
    loaded = DenseRetriever.load_with_encoder(retriever.save(tmp_path), encoder)
    assert loaded.encoder is encoder
    assert loaded.search(TEXTS[2], k=1)[0].doc_id == "b"


@pytest.mark.slow
def test_packaged_minilm_ranks_sensibly(tmp_path: Path) -> None:
    retriever = build_retriever("dense", cache_dir=str(tmp_path))
    retriever.index([
        ("melanoma", "BRAF V600E mutant melanoma treated with the BRAF inhibitor vemurafenib."),
        ("lung", "EGFR-mutant non-small cell lung cancer responds to erlotinib."),
        ("diabetes", "Metformin lowers blood glucose in type 2 diabetes."),
        ("cooking", "Slow-roasted tomatoes with garlic and olive oil."),
    ], progress=False)
    assert retriever.search("drug for BRAF mutated skin cancer", k=1)[0].doc_id == "melanoma"
    assert retriever.search("glucose control medication", k=1)[0].doc_id == "diabetes"
    assert retriever.search("recipe with garlic", k=4)[-1].doc_id != "cooking"
    assert retriever.label.startswith("dense:all-MiniLM-L6-v2-")


def test_unknown_saved_config_falls_back_to_profile_pooling(
        tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import retrievers.encoder as encoder_module

    monkeypatch.setattr(encoder_module, "has_sentence_transformers_config", lambda _: None)
    folder = shutil.copytree(tiny_model_path, tmp_path / "bge-small-en-v1.5")
    assert Encoder(EncoderConfig(model=str(folder))).doc_model[1].pooling_mode == "cls"
    assert Encoder(EncoderConfig(model=str(tiny_model_path))).doc_model[1].pooling_mode == "mean"


def test_in_memory_model_needs_a_version(encoder: Encoder) -> None:
    with pytest.raises(RetrieverError, match=r"needs EncoderConfig\(model_version=...\)"):
        Encoder(model=encoder.doc_model)
    wrapped = Encoder(EncoderConfig(model_version="edel-1"), model=encoder.doc_model)
    assert wrapped.model_id.startswith("edel-1-") and wrapped.dim == 32
    assert np.allclose(wrapped.encode_documents(TEXTS), encoder.encode_documents(TEXTS))


def test_cpu_bfloat16_autocast_has_its_own_cache_key_and_close_vectors(tiny_model_path):
    texts = ["BRAF V600E melanoma responds to vemurafenib.", "KRAS G12C in lung cancer."]
    fp32 = Encoder(EncoderConfig(model=str(tiny_model_path), device="cpu"))
    bf16 = Encoder(EncoderConfig(model=str(tiny_model_path), device="cpu", dtype="bfloat16"))
    assert fp32.model_id != bf16.model_id  # reduced-precision vectors never mix in the cache
    a, b = fp32.encode_documents(texts), bf16.encode_documents(texts)
    assert bf16._cpu_bf16 and not fp32._cpu_bf16
    assert not np.array_equal(a, b)  # bf16 matmuls really ran
    assert np.all((a * b).sum(axis=1) > 0.99)


def test_a_pickle_checkpoint_is_never_loaded(tiny_model_path, tmp_path):
    """Issue 28 item 5, for any load path (a folder or a Hugging Face name): weights come only
    from safetensors; a folder whose weights are a pickle (pytorch_model.bin) is refused."""
    import shutil

    import torch
    from transformers import AutoModel

    from retrievers.encoder import load_sentence_transformer
    from retrievers.errors import RetrieverError

    folder = tmp_path / "pickled"
    shutil.copytree(tiny_model_path, folder)
    model = AutoModel.from_pretrained(str(folder))
    (folder / "model.safetensors").unlink()
    torch.save(model.state_dict(), folder / "pytorch_model.bin")  # a pickle checkpoint
    assert (folder / "pytorch_model.bin").is_file()
    assert not (folder / "model.safetensors").exists()
    with pytest.raises(RetrieverError, match="cannot load model"):
        load_sentence_transformer(str(folder), None, 64, "cpu")
    assert load_sentence_transformer(str(tiny_model_path), None, 64, "cpu") is not None
