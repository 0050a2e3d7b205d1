"""Bulk encoding of a large corpus: shards encoded by parallel workers, written straight into a
vector collection, resumable shard by shard.

:func:`bulk_encode` cuts the documents into shards of ``shard_size`` (in the given order), encodes
the shards that are not done yet and adds each finished shard's vectors to the collection
(:mod:`retrievers.vector_store`), saves the collection, then records the shard in a JSON manifest.
A rerun with the same documents, model and shard size skips the recorded shards; one written but
not recorded (killed between the two steps) is deleted from the collection and encoded again.

Engines (:class:`BulkConfig` ``engine``):

- ``local``: one encoder in this process;
- ``ray``: ``workers`` Ray actors, each loading the encoder once (torch threads: the usable cores
  divided among the workers). Connects to the cluster at ``ray_address`` or the environment
  variable :data:`RAY_ADDRESS_ENV`; without one it starts a Ray instance on this machine for the
  run and shuts it down afterwards. Workers of a cluster need kbcurate and the model installed.
  Shards come back to this process, which writes them: a FAISS or local-mode Qdrant collection
  lives here, and a Qdrant server takes the upserts just as well from one writer;
- ``auto`` (default): ``ray`` when ``workers > 1`` (or an address is set) and Ray is installed,
  else ``local``.

Ray is optional (``pip install 'kbcurate[ray]'``) and imported only by the ``ray`` engine.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrievers.base import Doc, Progress, coerce_docs, progress_reporter
from retrievers.encoder import Encoder, EncoderConfig, usable_cores
from retrievers.errors import RetrieverError, unknown_name
from retrievers.vector_store import VectorCollection

logger = logging.getLogger(__name__)

#: Environment variable with the address of a Ray cluster (``ray://head:10001`` or ``auto``).
RAY_ADDRESS_ENV = "KBCURATE_RAY_ADDRESS"
ENGINES = ("auto", "local", "ray")


@dataclass(frozen=True)
class BulkConfig:
    """How a bulk encode runs.

    Attributes:
        shard_size: Documents per shard (the unit of work and of resuming).
        workers: Parallel Ray workers (the ``ray`` engine).
        engine: "auto", "local" or "ray" (module docstring).
        ray_address: Ray cluster address; ``None``: :data:`RAY_ADDRESS_ENV`, else a Ray started
            on this machine for the run.
    """

    shard_size: int = 5000
    workers: int = 2
    engine: str = "auto"
    ray_address: str | None = None

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise unknown_name("bulk encoding engine", self.engine, ENGINES)
        for name in ("shard_size", "workers"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise RetrieverError(f"BulkConfig.{name} must be an integer >= 1, got {value!r}")

    def address(self) -> str | None:
        """``ray_address``, else :data:`RAY_ADDRESS_ENV`, else ``None``."""
        return self.ray_address or os.environ.get(RAY_ADDRESS_ENV) or None

    def resolved_engine(self) -> str:
        """The engine that will run: ``auto`` decided (see the module docstring)."""
        if self.engine != "auto":
            return self.engine
        if self.workers > 1 or self.address():
            try:
                import ray  # noqa: F401
            except ImportError:
                logger.info("Ray is not installed: encoding in this process")
                return "local"
            return "ray"
        return "local"


@dataclass(frozen=True)
class BulkReport:
    """What one :func:`bulk_encode` run did.

    Attributes:
        shards: Shards of the corpus.
        encoded: Shards encoded by this run.
        skipped: Shards found done by an earlier run.
        vectors: Vectors in the collection at the end.
        seconds: Wall time of the run.
        engine: "local" or "ray".
    """

    shards: int
    encoded: int
    skipped: int
    vectors: int
    seconds: float
    engine: str


def shard_ranges(n: int, shard_size: int) -> list[tuple[int, int]]:
    """``[start, end)`` of each shard of ``n`` documents."""
    return [(start, min(start + shard_size, n)) for start in range(0, n, shard_size)]


def corpus_digest(ids: list[str], texts: list[str]) -> str:
    """SHA-256 over (id, text) of every document, in order."""
    h = hashlib.sha256()
    for doc_id, text in zip(ids, texts, strict=True):
        h.update(f"{doc_id}\t{hashlib.sha256(text.encode()).hexdigest()}\n".encode())
    return h.hexdigest()


class ShardManifest:
    """The JSON record of finished shards (replaced atomically after each shard).

    Args:
        path: The manifest file.
        run: What the shards belong to (collection, model, corpus digest, shard size); a
            manifest written for another run is refused.

    Raises:
        RetrieverError: The file belongs to another run or is not valid JSON.
    """

    def __init__(self, path: Path, run: dict[str, Any]) -> None:
        self.path = path
        self.run = run
        self.done: dict[int, int] = {}  # shard -> documents
        if path.is_file():
            self._read()

    def _read(self) -> None:
        try:
            saved = json.loads(self.path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise RetrieverError(f"{self.path} is not valid JSON ({exc}); delete it to encode "
                                 "the corpus from the start") from exc
        differs = [k for k, v in self.run.items() if saved.get("run", {}).get(k) != v]
        if differs:
            raise RetrieverError(
                f"{self.path} records shards of another run ({', '.join(differs)} differ); "
                "delete it to encode from the start, or rerun with the same documents, model, "
                "collection and shard size to resume")
        self.done = {int(k): int(v) for k, v in saved.get("done", {}).items()}

    def mark_done(self, shard: int, count: int) -> None:
        """Record ``shard`` (``count`` documents) as written to the collection."""
        self.done[shard] = count
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"run": self.run, "done": self.done}, sort_keys=True),
                       encoding="utf-8")
        os.replace(tmp, self.path)


def bulk_encode(docs: Iterable[Doc], encoder: EncoderConfig, collection: VectorCollection,
                manifest: str | Path, config: BulkConfig | None = None, *,
                progress: Progress = True) -> BulkReport:
    """Encode ``docs`` shard by shard into ``collection``, resuming from ``manifest``.

    Args:
        docs: ``(doc_id, text)`` pairs; the order fixes the shards.
        encoder: The document encoder's settings (workers rebuild the encoder from them).
        collection: Where the vectors go (FAISS or Qdrant, see :mod:`retrievers.vector_store`).
        manifest: JSON file recording finished shards.
        config: Shard size, workers, engine.
        progress: ``True`` for a bar, ``False`` for none, or ``fn(done, total)`` in documents.

    Returns:
        What the run did.

    Raises:
        RetrieverError: Malformed documents; a manifest of another run; a collection that lost
            vectors of recorded shards; Ray missing or unreachable.
    """
    config = config or BulkConfig()
    started = time.perf_counter()
    ids, texts = coerce_docs(docs)
    ranges = shard_ranges(len(ids), config.shard_size)
    run = {"collection": collection.name, "model": _model_key(encoder), "documents": len(ids),
           "corpus": corpus_digest(ids, texts), "shard_size": config.shard_size}
    state = ShardManifest(Path(manifest), run)
    _reconcile(collection, ids, ranges, state)
    todo = [i for i in range(len(ranges)) if i not in state.done]
    engine = config.resolved_engine() if todo else "local"
    logger.info("bulk encode: %d shards, %d done, %d to encode (%s)", len(ranges),
                len(state.done), len(todo), engine)
    jobs = [(i, texts[ranges[i][0]:ranges[i][1]]) for i in todo]
    encoded = _encode_ray(jobs, encoder, config) if engine == "ray" else \
        _encode_local(jobs, encoder)
    with progress_reporter(len(ids), progress, "bulk encoding", min_bar=1) as advance:
        advance(sum(state.done.values()))
        try:
            for shard, vectors in encoded:
                start, end = ranges[shard]
                collection.add(ids[start:end], vectors)
                collection.save()
                state.mark_done(shard, end - start)
                advance(end - start)
        finally:
            encoded.close()  # stops the Ray workers at once when a shard fails
    return BulkReport(len(ranges), len(todo), len(ranges) - len(todo), len(collection),
                      round(time.perf_counter() - started, 3), engine)


def _model_key(encoder: EncoderConfig) -> str:
    return json.dumps({k: v for k, v in asdict(encoder).items()
                       if k not in ("device", "num_threads", "batch_size", "export_dir")},
                      sort_keys=True, default=str)


def _reconcile(collection: VectorCollection, ids: list[str], ranges: list[tuple[int, int]],
               state: ShardManifest) -> None:
    """Make the collection hold exactly the recorded shards (drop a written, unrecorded one)."""
    recorded = sum(state.done.values())
    held = len(collection)
    if held > recorded:
        stray = [d for i, (a, b) in enumerate(ranges) if i not in state.done for d in ids[a:b]]
        removed = collection.delete(stray)
        logger.warning("bulk encode: removed %d vectors of unrecorded shards (an interrupted "
                       "run) from %s", removed, collection.name)
        held = len(collection)
    if held != recorded:
        raise RetrieverError(
            f"{state.path} records {recorded:,} encoded documents but collection "
            f"{collection.name!r} holds {held:,} vectors; delete the manifest (and the "
            "collection) to encode from the start")


def _encode_local(jobs: list[tuple[int, list[str]]], config: EncoderConfig
                  ) -> Iterator[tuple[int, np.ndarray]]:
    if not jobs:
        return
    encoder = Encoder(config)
    for shard, texts in jobs:
        yield shard, encoder.encode_documents(texts)


class _ShardEncoder:
    """A Ray actor: one encoder, loaded once, encoding whole shards."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.encoder = Encoder(EncoderConfig.from_dict(config))

    def encode(self, shard: int, texts: list[str]) -> tuple[int, np.ndarray]:
        return shard, self.encoder.encode_documents(texts)


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise RetrieverError(
            f"the 'ray' bulk encoding engine needs Ray, which is not installed ({exc}); "
            "pip install 'kbcurate[ray]', or use engine 'local'") from exc
    return ray


def _encode_ray(jobs: list[tuple[int, list[str]]], encoder: EncoderConfig,
                config: BulkConfig) -> Iterator[tuple[int, np.ndarray]]:
    ray = _ray()
    from ray.util import ActorPool

    address = config.address()
    started = not ray.is_initialized()
    if started:
        try:
            ray.init(address=address, num_cpus=None if address else config.workers,
                     include_dashboard=False, log_to_driver=False, configure_logging=False)
        except Exception as exc:  # a wrong address: ConnectionError, RuntimeError, ...
            raise RetrieverError(
                f"cannot start or reach Ray at {address or 'this machine'} (BulkConfig."
                f"ray_address / {RAY_ADDRESS_ENV}): {type(exc).__name__}: {str(exc)[:200]}; "
                f"fix the address, unset {RAY_ADDRESS_ENV} for a local Ray, or use engine "
                "'local'") from exc
    threads = encoder.num_threads or max(1, usable_cores() // config.workers)
    settings = {**asdict(encoder), "num_threads": threads}
    actor = ray.remote(num_cpus=1)(_ShardEncoder)
    actors = [actor.remote(settings) for _ in range(min(config.workers, len(jobs)))]
    try:
        pool = ActorPool(actors)
        yield from pool.map_unordered(lambda a, job: a.encode.remote(*job), jobs)
    finally:
        for a in actors:
            ray.kill(a)
        if started:
            ray.shutdown()
