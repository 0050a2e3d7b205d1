"""EDEL examples, margin tables, a training round into the registry, and using the version."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from curation.evaluation.harness import build_task
from curation.store.importer import import_items
from curation.store.models import Models
from curation.training.recipes.edel.examples import Ablation, ExampleConfig, build_examples
from curation.training.recipes.edel.margins import derived_table, margin_table, parse_table
from kb_sources.errors import CurationError
from kb_sources.schema import builtin_schemas
from kb_sources.types import Document, Entity, Relation

ALL_TRAIN = (1.0, 0.0, 0.0)

# TRAINING.md 1.3 (Tables 7 and 8)
PO_POSITIVE = {"111": 0.0, "101": 0.2, "011": 0.2, "110": 0.6, "100": 1.0, "010": 1.0,
               "001": 1.0, "000": 1.2}


def ptm_expected(pattern: str) -> float:
    n, catalyst = pattern.count("1"), pattern[3] == "1"
    if n == 4:
        return 0.0
    if n == 3:
        return 0.4 if catalyst else 0.6
    return {2: 0.6, 1: 0.8, 0: 1.0}[n]


def test_po_table_has_every_g_pattern_in_its_class():
    table = margin_table(builtin_schemas()["PO"])
    assert dict(table.positive) == PO_POSITIVE
    assert table.bm25 == 0.8 and table.random == 1.0


def test_ptm_table_has_every_g_pattern_in_its_class():
    table = margin_table(builtin_schemas()["PTM"])
    for bits in itertools.product("01", repeat=4):
        pattern = "".join(bits)
        assert table.positive_mu(pattern) == ptm_expected(pattern), pattern
    assert table.positive_mu("1101") == 0.4  # class 2 is 0.4, not Table 2's misprint 0.2
    assert table.random == 1.2


def test_ptm_negative_classes():
    table = margin_table(builtin_schemas()["PTM"])
    assert table.negative_class(["1", "1", "0", "1"]) == ("1 S D 1", 0.4)
    assert table.negative_class(["1", "0", "1", "1"]) == ("1 D - 1", 0.6)
    assert table.negative_class(["1", "1", "0*", "0"]) == ("1 S D 0", 0.6)
    assert table.negative_class(["1*", "1", "1", "1"]) == ("1* - - 1", 0.8)
    assert table.negative_class(["0", "1", "1", "0"]) == ("D - - 0", 1.0)


def test_derived_rule_reproduces_edel_tables():
    assert dict(derived_table(2).positive) == PO_POSITIVE
    ptm = derived_table(3)
    assert all(ptm.positive[p] == ptm_expected(p) for p in ptm.positive)


def test_binary_schemas_use_the_derived_binary_table():
    table = margin_table(builtin_schemas()["disease_gene"])
    assert dict(table.positive) == {"11": 0.0, "10": 0.6, "01": 1.0, "00": 1.2}
    assert table.origin == "assets/margins/binary.toml"


def test_workspace_override_and_bad_tables(tmp_workspace):
    (tmp_workspace.root / "margins").mkdir()
    override = tmp_workspace.root / "margins" / "disease_gene.toml"
    override.write_text('[positive]\n"11" = 0.0\n"10" = 0.4\n"01" = 0.8\n"00" = 1.0\n'
                        '[negative]\n"D 1" = 0.9\nrandom = 1.1\n', encoding="utf-8")
    table = margin_table(builtin_schemas()["disease_gene"], tmp_workspace.root)
    assert table.positive["10"] == 0.4 and table.random == 1.1 and table.bm25 == 0.8
    with pytest.raises(CurationError, match="positive patterns 00 have no margin"):
        parse_table({"positive": {"11": 0, "10": 0.6, "01": 1}}, "x.toml", 1)
    with pytest.raises(CurationError, match=r"x.toml: positive.11 = 3; expected .* \[0, 2\]"):
        parse_table({"positive": {"11": 3, "10": 0.6, "01": 1, "00": 1}}, "x.toml", 1)
    with pytest.raises(CurationError, match="negative pattern 'Q 1' must be"):
        parse_table({"positive": {"11": 0, "10": 0.6, "01": 1, "00": 1},
                     "negative": {"Q 1": 0.8}}, "x.toml", 1)


def _po(gene, variant, treatment, pmid, rid):
    slots = {"gene": (Entity(gene, "gene"),), "variant": (Entity(variant, "variant"),)}
    if treatment:
        slots["treatment"] = (Entity(treatment, "drug"),)
    return Relation("PO", "handmade", rid, slots, (pmid,))


TEXTS = {
    "1": ("BRAF V600E melanoma", "BRAF V600E melanoma responds to vemurafenib."),
    "2": ("MEK inhibition", "BRAF V600E tumours respond to MEK inhibition."),
    "3": ("Trametinib", "Trametinib in advanced melanoma patients."),
    "4": ("BRAF V600K", "BRAF V600K melanoma responds to trametinib."),
    "5": ("BRAF mutant melanoma", "BRAF mutant melanoma treated with cobimetinib."),
    "6": ("Thyroid cancer", "BRAF V600E is frequent in papillary thyroid cancer."),
    "7": ("EGFR L858R", "EGFR L858R lung cancer responds to erlotinib."),
    "8": ("KRAS G12C", "KRAS G12C occurs in lung adenocarcinoma."),
    **{str(i): (f"Cohort study {i}", f"Patients in cohort {i} were followed for survival.")
       for i in range(9, 25)},
}


@pytest.fixture
def po_workspace(tmp_workspace):
    rels = [_po("BRAF", "V600E", "vemurafenib", "1", "r1"),
            _po("BRAF", "V600E", "dabrafenib", "2", "r2"),
            _po("BRAF", "V600E", "trametinib", "3", "r3"),
            _po("BRAF", "V600K", "trametinib", "4", "r4"),
            _po("BRAF", "V600D", "cobimetinib", "5", "r5"),
            _po("BRAF", "V600E", None, "6", "r6"),
            _po("EGFR", "L858R", "erlotinib", "7", "r7"),
            _po("KRAS", "G12C", None, "8", "r8")]
    docs = [Document(k, t, a, source="handmade") for k, (t, a) in TEXTS.items()]
    import_items(tmp_workspace, [*docs, *rels], reader="test", path="handmade", progress=False)
    return tmp_workspace


def _braf_v600e(example_set):
    return [e for e in example_set.examples if "BRAF" in e.query and "V600E" in e.query]


def _build(ws, **kw):
    task = build_task(ws, "PO", fractions=ALL_TRAIN)
    return build_examples(ws, "PO", ExampleConfig(**kw), task=task, progress=False)


def test_positives_graded_by_g_and_negatives_by_f(po_workspace):
    es = _build(po_workspace, negatives_per_class=10)
    mine = _braf_v600e(es)
    pos = {e.doc_id: (e.mu, e.cls) for e in mine if e.positive}
    assert pos == {"1": (0.0, "pos:111"), "2": (0.6, "pos:110"), "3": (1.0, "pos:001")}
    neg = {e.doc_id: (e.mu, e.cls) for e in mine if not e.positive}
    assert neg["5"] == (0.2, "neg:1 0* 1")  # same gene, its variant not in its abstract
    assert neg["4"] == (0.6, "neg:1 0 1")
    assert neg["6"] == (0.6, "neg:1 S 0")  # same gene and variant, no treatment
    assert neg["7"] == (0.8, "neg:D - 1")
    assert neg["8"] == (1.0, "neg:D - 0")
    assert not set(pos) & set(neg)  # a query's positives never become its negatives
    randoms = {d for d, (_, c) in neg.items() if c == "neg:random"}
    assert randoms and randoms <= {str(i) for i in range(9, 25)}
    assert all(es.text(e.doc_id).startswith(TEXTS[e.doc_id][0] + " [SEP] ") for e in mine)
    assert es.manifest["classes"]["pos:111"] >= 1 and es.manifest["split"]["split"] == "train"


def test_caps_per_class(po_workspace):
    es = _build(po_workspace, negatives_per_class=1)
    mine = _braf_v600e(es)
    n_pos = sum(e.positive for e in mine)
    per_class = {}
    for e in mine:
        if not e.positive:
            per_class[e.cls] = per_class.get(e.cls, 0) + 1
    assert per_class and max(per_class.values()) <= 1 * n_pos
    assert es.manifest["config"]["negatives_per_class"] == 1


def test_seeded_examples_are_reproducible(po_workspace):
    a = _build(po_workspace, seed=3, negatives_per_class=1)
    b = _build(po_workspace, seed=3, negatives_per_class=1)
    c = _build(po_workspace, seed=4, negatives_per_class=1)  # other random samples
    assert a.examples == b.examples and a.manifest["sha256"] == b.manifest["sha256"]
    assert a.manifest["sha256"] != c.manifest["sha256"]


@pytest.mark.parametrize("ablation", [a.value for a in Ablation if a is not Ablation.NONE])
def test_ablations(po_workspace, ablation):
    mine = _braf_v600e(_build(po_workspace, negatives_per_class=10, ablation=ablation))
    pos = {e.doc_id: e.mu for e in mine if e.positive}
    neg = {e.doc_id: (e.mu, e.cls) for e in mine if not e.positive}
    if ablation == "no-multimargin":
        assert pos == {"1": 0.0, "2": 0.0, "3": 0.0}
        assert "5" not in neg  # class-2 negatives dropped
    else:
        assert pos == {"1": 0.0}  # complete positives only
    assert {mu for mu, _ in neg.values()} == {0.8}
    if ablation == "no-hardneg":
        assert {c for _, c in neg.values()} == {"neg:random-kb"}
        assert set(neg) <= {"4", "5", "6", "7", "8"}


def test_no_train_query_is_a_clear_error(tmp_workspace):
    with pytest.raises(CurationError, match="No PO relation cites a document"):
        build_examples(tmp_workspace, "PO", progress=False)


def test_train_register_and_use_a_version(po_workspace, tiny_model_path):
    from curation.search.indexing import get_index, with_workspace_defaults
    from curation.training.recipes.edel import EdelOptions
    from curation.training.rounds import run_round

    options = EdelOptions(base=str(tiny_model_path), epochs=2, batch_size=4, max_seq_length=32,
                          negatives_per_class=2, dev_depth=5, dev_random=5, seed=1)
    result = run_round(po_workspace, "PO", "edel", options, actor="alice", progress=False)
    version = result.version
    assert version.id == "PO-edel@1" and version.status == "candidate"
    # tiny data is named with its numbers (this fixture has no test query: no test metrics)
    assert result.test_queries == len(build_task(po_workspace, "PO").split("test")) == 0
    assert "test_ndcg@10" not in version.metrics
    n = Models(po_workspace).get(version.id).manifest["examples"]["examples"]
    assert result.warnings == tuple(version.metrics["warnings"]) == (
        f"Trained on only {n} examples (< 200): the version may be no better than its base "
        "model; import more KB records or label more",
        "Trained on only 3 train queries (< 20): too few to learn the schema's queries",
        "No test query cites a document of the workspace: the version has no test metrics and "
        "the gate cannot compare it; import the cited abstracts")
    m = Models(po_workspace).get(version.id).manifest
    assert m["recipe"] == "edel" and m["seed"] == 1 and m["document_format"].endswith(
        "[SEP] {abstract}")
    assert m["epochs_run"] == 2 and len(m["curve"]) == m["steps"] > 0
    assert m["examples"]["sha256"] and m["examples"]["positives"] >= 1
    assert (version.model_dir / "model.safetensors").is_file()
    # a registry version is a dense model name everywhere: its folder, format and cache key
    opts = with_workspace_defaults(po_workspace, "dense", {"model": version.id})
    assert opts["model"] == str(version.model_dir) and opts["max_seq_length"] == 32
    assert opts["document_format"] == "{title} [SEP] {abstract}"
    index = get_index(po_workspace, "dense", {"model": version.id}, progress=False)
    hits = index.search("Treatment for gene BRAF and variant V600E?", 5)
    assert len(hits) == 5 and len(index) == len(TEXTS)
    # corrupted weights are refused before any use
    weights = version.model_dir / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(CurationError, match="checksum"):
        with_workspace_defaults(po_workspace, "dense", {"model": version.id})


def test_training_job_is_admin_only_and_checked_before_queueing(po_workspace, tiny_model_path):
    from curation.access.users import PermissionDenied, Role, User
    from curation.jobs.queue import list_jobs, wait_for_job
    from curation.training.jobs import start_training

    curator, admin = User("cur", Role.CURATOR), User("root", Role.ADMIN)
    with pytest.raises(PermissionDenied):
        start_training(po_workspace, curator, "PO", {"base": str(tiny_model_path)})
    with pytest.raises(CurationError, match="TrainConfig.epochs must be an integer >= 1"):
        start_training(po_workspace, admin, "PO", {"epochs": 0})
    with pytest.raises(CurationError, match="Unknown edel training option.*lr.*Available options"):
        start_training(po_workspace, admin, "PO", {"lr": 1})
    assert list_jobs(po_workspace) == []  # nothing was queued by the refused requests
    job = start_training(po_workspace, admin, "PO", {
        "base": str(tiny_model_path), "batch_size": 4, "max_seq_length": 32, "dev_depth": 0})
    done = wait_for_job(po_workspace, job.id, timeout=240)
    assert done.status == "done", done.error
    assert done.result["version"] == "PO-edel@1"
    assert [v.created_by for v in Models(po_workspace).versions()] == ["root"]


def test_interrupted_round_resumes_from_its_epoch_checkpoint(po_workspace, tiny_model_path):
    from curation.training.recipes.edel import EdelOptions
    from curation.training.rounds import run_round

    options = EdelOptions(base=str(tiny_model_path), epochs=2, batch_size=4, max_seq_length=32,
                          negatives_per_class=2, dev_depth=0, seed=5)

    class Stop(Exception):
        pass

    def interrupt(fraction: float, message: str) -> None:
        if message.startswith("training step "):
            done, total = map(int, message.split()[-1].replace(",", "").split("/"))
            if done > total // 2:  # inside epoch 2, after epoch 1's checkpoint
                raise Stop(message)

    with pytest.raises(Stop):
        run_round(po_workspace, "PO", "edel", options, actor="root", progress=False,
                  report=interrupt)
    (run_dir,) = (po_workspace.root / "cache" / "training").iterdir()
    assert [p.name for p in (run_dir / "checkpoints").iterdir()]  # epoch 1 kept
    version = run_round(po_workspace, "PO", "edel", options, actor="root", progress=False).version
    assert version.manifest["epochs_run"] == 2 and not run_dir.exists()
    fresh = run_round(po_workspace, "PO", "edel", options, actor="root", progress=False).version
    from safetensors.numpy import load_file

    a = load_file(version.model_dir / "model.safetensors")
    b = load_file(fresh.model_dir / "model.safetensors")
    assert a.keys() == b.keys() and all(np.allclose(a[k], b[k], atol=1e-6) for k in a)
