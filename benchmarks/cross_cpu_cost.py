"""What a BERT-base-sized cross-encoder (MedCPT's size) costs on this CPU (issue 45).

MedCPT's cross-encoder (``ncbi/MedCPT-Cross-Encoder``, PubMedBERT-base: 12 layers, hidden 768,
vocabulary 30,522) cannot be downloaded here, so this builds a randomly initialised model of the
same shape (the packaged MiniLM's tokenizer, same vocabulary size), saves it as a
safetensors cross-encoder folder and times :class:`retrievers.cross.CrossScorer` on real
abstracts of a workspace (BM25's top K of test relations): the speed of a model depends on its
shape, not its weights. The packaged MiniLM with a new head is timed the same way beside it.
``--folder F`` times a real cross-encoder folder instead (MedCPT's, copied from a machine with
internet).

Prints, per model and precision, the median seconds to score one relation's top K (K = 20 /
50 / 100) and pairs per second. Take it with the CPU to yourself.

Run::

    python benchmarks/cross_cpu_cost.py -w /tmp/demo45 --schema disease_gene [--folder F]
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

from cross_encoder import scoring_seconds  # the sibling benchmark's timing (run as a script)

from curation.evaluation.harness import build_task
from curation.store.documents import PLAIN_FORMAT
from curation.store.workspace import Workspace
from curation.training.measures import FirstStage
from retrievers.encoder import resolve_model_path


def build_model(folder: Path, *, layers: int, hidden: int, heads: int, seed: int = 0) -> Path:
    """A random BERT sequence classifier (one label) of this shape, with MiniLM's tokenizer."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("all-MiniLM-L6-v2"))
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=hidden,
                        num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=4 * hidden, max_position_embeddings=512,
                        num_labels=1)
    BertForSequenceClassification(config).save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-w", "--workspace", required=True)
    p.add_argument("--schema", default="disease_gene")
    p.add_argument("--folder", help="a real cross-encoder folder to time instead")
    p.add_argument("--relations", type=int, default=5, help="test relations timed per K")
    p.add_argument("--depths", default="20,50,100")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO)
    with Workspace.open(args.workspace, read_only=True) as ws, \
            tempfile.TemporaryDirectory() as tmp:
        stage = FirstStage(ws)
        queries = sorted(build_task(ws, args.schema).split("test"),
                         key=lambda q: q.qid)[:args.relations]
        models = {"MiniLM-L6 + head (6 x 384)": build_model(Path(tmp, "mini"), layers=6,
                                                            hidden=384, heads=12),
                  "BERT-base shape, MedCPT's (12 x 768)": Path(args.folder) if args.folder
                  else build_model(Path(tmp, "base"), layers=12, hidden=768, heads=12)}
        for depth in (int(d) for d in args.depths.split(",")):
            for name, folder in models.items():
                for precision in ("bf16", "fp32"):
                    s = scoring_seconds(stage, queries, str(folder), PLAIN_FORMAT, depth,
                                        precision, 256)
                    print(f"K = {depth:>3}  {name:<38} {precision}: {s:6.2f} s per relation, "
                          f"{depth / s:5.1f} pairs/s", flush=True)


if __name__ == "__main__":
    main()
