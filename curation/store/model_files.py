"""Checks of a model folder's files before anything loads them: no pickle-format file (by suffix
or by its first bytes), and config/tokenizer files within their size limits (issue 28).
"""

from __future__ import annotations

from pathlib import Path

from kb_sources.errors import CurationError

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".ckpt", ".pickle")
#: First bytes of a pickle (protocols 2-5) and of torch's zip checkpoints: such a file is refused
#: whatever its name, before anything loads it.
PICKLE_MAGIC = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05", b"PK\x03\x04")
#: Size limits (MiB) of a model folder's small files: every ``*.json`` but the tokenizer, and
#: the tokenizer files (:data:`TOKENIZER_FILES`). A 300 MB config.json is an attack, not a model.
CONFIG_LIMIT_MIB = 1
TOKENIZER_LIMIT_MIB = 64
TOKENIZER_FILES = frozenset({"tokenizer.json", "vocab.txt", "vocab.json", "merges.txt",
                             "spiece.model", "sentencepiece.bpe.model", "tokenizer.model",
                             "added_tokens.json", "special_tokens_map.json"})

def check_model_files(folder: Path, what: str) -> None:
    """Refuse a model folder holding a pickle-format file (by suffix or by its first bytes) or
    a config/tokenizer file over its size limit; nothing in it is loaded before this passes.

    Raises:
        CurationError: Not a folder, a pickle-format file, or an oversized file (named, with
            the limit and the fix).
    """
    if not folder.is_dir():
        raise CurationError(f"{what} is not a folder; pass a sentence-transformers model folder")
    for path in sorted(folder.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(folder).as_posix()
        if path.suffix.lower() in PICKLE_SUFFIXES or _starts_like_pickle(path):
            raise CurationError(
                f"{what}: {rel} is a pickle-format file (Python pickle or torch checkpoint), "
                "which can run code when loaded, so it is refused before anything is loaded. "
                "Convert the weights to safetensors on a trusted machine: load the model there, "
                "save it with model.save_pretrained(..., safe_serialization=True) (or "
                "SentenceTransformer.save), remove the pickle files and import the folder again")
        limit = _size_limit_mib(path.name)
        size = path.stat().st_size
        if limit is not None and size > limit * 2**20:
            raise CurationError(
                f"{what}: {rel} is {size / 2**20:.1f} MiB, over the limit {limit} MiB for "
                f"{'tokenizer' if limit == TOKENIZER_LIMIT_MIB else 'config'} files; a real "
                "model's file is far smaller. Replace it with the model's own file")


def _starts_like_pickle(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            head = fh.read(4)
    except OSError:
        return False
    return head.startswith(PICKLE_MAGIC)


def _size_limit_mib(name: str) -> int | None:
    if name in TOKENIZER_FILES:
        return TOKENIZER_LIMIT_MIB
    return CONFIG_LIMIT_MIB if name.endswith(".json") else None
