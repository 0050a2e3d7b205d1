"""A tiny random BERT sentence-transformers model for fast tests (built in about a second).

2 layers, hidden size 32, 2 heads, a WordPiece vocabulary trained with ``tokenizers`` on the
biomedical sample below, mean pooling. Its vectors are random but deterministic (seeded), so tests
check mechanics (shapes, order, caching, save/load), never quality; quality checks use the real
MiniLM in tests marked ``slow``.

Run as a script to build one: ``python tests/tiny_model.py OUT_DIR``.
"""

from __future__ import annotations

import sys
from pathlib import Path

SAMPLE = """\
BRAF V600E mutation predicts response to vemurafenib and dabrafenib in melanoma.
BRAF V600K melanoma responds to trametinib combined with dabrafenib.
EGFR L858R and exon 19 deletion in lung cancer respond to erlotinib, gefitinib and osimertinib.
EML4-ALK fusion positive non-small cell lung cancer is treated with crizotinib or alectinib.
AKT1 is phosphorylated at Ser473 by mTORC2; PDK1 phosphorylates Thr308.
The c.1799T>A variant (p.V600E, rs113488022) is the most common BRAF mutation in colorectal cancer.
TNF-alpha signalling and 5-FU chemotherapy in colorectal tumours.
KRAS G12C inhibitors sotorasib and adagrasib in pancreatic and lung adenocarcinoma.
PIK3CA H1047R mutation, PTEN loss and resistance to trastuzumab in breast cancer.
Patients with metastatic disease were randomised to placebo or treatment; survival improved.
Gene expression, protein kinase activity, tumour growth and apoptosis were measured in cells.
Aspirin, metformin and statins reduce the risk of cancer in cohort studies of diabetes patients.
"""

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def build_tiny_model(out_dir: str | Path, *, hidden: int = 32, layers: int = 2, heads: int = 2,
                     seed: int = 0) -> Path:
    """Build, save and return the folder of a tiny sentence-transformers model.

    Args:
        out_dir: Folder to write (created).
        hidden: Hidden size.
        layers: Transformer layers.
        heads: Attention heads.
        seed: Torch seed for the random weights.

    Returns:
        ``out_dir`` as a Path, loadable with ``SentenceTransformer(out_dir)``.
    """
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers.trainers import WordPieceTrainer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    out = Path(out_dir)
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(SAMPLE.splitlines(),
                            WordPieceTrainer(vocab_size=600, special_tokens=SPECIAL))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tok.decoder = decoders.WordPiece()
    hf_dir = out / "hf"
    BertTokenizerFast(tokenizer_object=tok, model_max_length=128).save_pretrained(hf_dir)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=hidden,
                        num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=hidden * 2, max_position_embeddings=128)
    BertModel(config).save_pretrained(hf_dir)
    body = Transformer(str(hf_dir), max_seq_length=128)
    model = SentenceTransformer(modules=[body, Pooling(body.get_embedding_dimension(), "mean")],
                                device="cpu")
    model.save(str(out / "st"))
    return out / "st"


if __name__ == "__main__":
    print(build_tiny_model(sys.argv[1] if len(sys.argv) > 1 else "tiny-model"))
