"""BioHiCL: MeSH labels from a workspace, the HiCL loss, the hierarchy batch sampler, LoRA.

Expected numbers are computed by hand in each test (``math``), never by the code under test. The
model tests use the tiny random BERT (``tiny_model_path``); one test runs the real
sentence-transformers trainer for one short epoch.
"""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import sparse

from curation.training.recipes.biohicl.mesh_labels import (
    DEFAULT_CHECK_TAGS,
    expand_tree_number,
    is_reserved_source,
    label_similarity,
    label_similarity_matrix,
    mesh_labels,
    node_weight,
    positive_partners,
    read_descriptor_names,
)
from kb_sources.errors import CurationError
from retrievers.errors import RetrieverError
from retrievers.training.hicl import (
    HiCLLoss,
    HierarchyBatchSampler,
    hicl_loss,
    hierarchy_batch_sampler,
)
from retrievers.training.lora import adapter_names, add_lora, merge_lora

TREE = [
    ("Neoplasms", "C04"),
    ("Neoplasms by Site", "C04.588"),
    ("Breast Neoplasms", "C04.588.180"),
    ("Lung Neoplasms", "C04.588.894"),
    ("Respiratory Tract Diseases", "C08"),
    ("Lung Diseases", "C08.381"),
    ("Lung Neoplasms", "C08.381.540"),
    ("Skin and Connective Tissue Diseases", "C17"),
    ("Skin Diseases", "C17.800"),
    ("Breast Diseases", "C17.800.090"),
    ("Breast Neoplasms", "C17.800.090.500"),
    ("Aspirin", "D02.241.223"),  # D02 and D02.241 are positions without a term here
    ("Humans", "B01.050.150.900.649.313.988.400.112.400.400"),
    ("Mice", "B01.050.150.900.649.313.992.635.505.500"),
]

DOCS = [  # doc_id, source, headings
    ("1", "medline", ["Breast Neoplasms", "Humans", "Female"]),
    ("2", "medline", ["Lung Neoplasms", "Humans"]),
    ("3", "pubmedqa", ["Aspirin", "Mice"]),
    ("4", "medline", ["*Breast Neoplasms/therapy"]),
    ("5", "medline", ["Humans", "Male"]),  # check tags only
    ("6", "bc5cdr", ["Breast Neoplasms"]),  # reserved corpus
    ("7", "medline", ["Renamed Heading"]),  # not in the tree
    ("8", "biored", []),
]

W = [None] + [math.log(d + 1) for d in range(1, 12)]  # W[d] = log(depth + 1)


def fill(ws, tree=TREE, docs=DOCS, annotations=()) -> None:
    with ws.transaction() as conn:
        conn.executemany("INSERT INTO mesh_tree(term, tree_number) VALUES (?, ?)", tree)
        conn.executemany(
            "INSERT INTO documents(doc_id, title, abstract, source, mesh, content_hash, added_at, "
            "updated_at) VALUES (?, 't', 'a', ?, ?, 'h', 't', 't')",
            [(d, s, json.dumps(m)) for d, s, m in docs])
        conn.executemany("INSERT INTO annotations(doc_id, start, end, text, type, ids) "
                         "VALUES (?, 0, 1, 'x', ?, ?)",
                         [(d, t, json.dumps(ids)) for d, t, ids in annotations])


# -- labels ---------------------------------------------------------------------------------------

def test_expand_depth_and_weight():
    assert expand_tree_number("C04.588.180") == ["C04", "C04.588", "C04.588.180"]
    assert expand_tree_number("C04") == ["C04"]
    assert node_weight("C04") == pytest.approx(math.log(2))
    assert node_weight("C04.588.180") == pytest.approx(math.log(4))
    assert node_weight("B01.050.150.900.649.313.988.400.112.400.400") == pytest.approx(
        math.log(12))


def test_reserved_sources_recognised_as_words():
    assert is_reserved_source("bc5cdr") and is_reserved_source("BC5CDR_test")
    assert is_reserved_source("seth-corpus") and is_reserved_source("seth")
    assert not is_reserved_source("methods") and not is_reserved_source("medline_sample")


def test_default_check_tags():
    assert {"Humans", "Animals", "Male", "Female", "Mice", "Rats", "Aged, 80 and over",
            "Infant, Newborn", "Child, Preschool", "Young Adult", "Middle Aged"} <= \
        DEFAULT_CHECK_TAGS
    assert "Neoplasms" not in DEFAULT_CHECK_TAGS


def test_labels_nodes_weights_and_exclusions(tmp_workspace):
    fill(tmp_workspace)
    labels = mesh_labels(tmp_workspace)
    # 5 (check tags only), 6 (bc5cdr), 7 (unknown heading), 8 (no heading) have no labels
    assert labels.doc_ids == ("1", "2", "3", "4")
    index = labels.node_index
    row1 = labels.matrix[0].toarray().ravel()
    nodes1 = {labels.nodes[i] for i in np.flatnonzero(row1)}
    assert nodes1 == {"C04", "C04.588", "C04.588.180", "C17", "C17.800", "C17.800.090",
                      "C17.800.090.500"}  # Humans, Female dropped; both positions expanded
    norm1 = math.sqrt(2 * W[1] ** 2 + 2 * W[2] ** 2 + 2 * W[3] ** 2 + W[4] ** 2)
    assert row1[index["C04"]] == pytest.approx(W[1] / norm1)
    assert row1[index["C17.800.090.500"]] == pytest.approx(W[4] / norm1)
    row3 = labels.matrix[2].toarray().ravel()
    assert {labels.nodes[i] for i in np.flatnonzero(row3)} == {"D02", "D02.241", "D02.241.223"}
    assert not any(n.startswith("B01") for n in labels.nodes)  # Humans, Mice dropped
    assert labels.heading_counts.tolist() == [1, 1, 1, 1]
    assert labels.labels_per_doc.tolist() == [7, 6, 3, 7]
    assert labels.stats["documents_excluded_reserved"] == 1
    # 1: Humans, Female; 2: Humans; 3: Mice; 5: Humans, Male
    assert labels.stats["check_tag_assignments"] == 6
    assert labels.stats["unknown_heading_assignments"] == 1
    assert np.allclose(sparse.linalg.norm(labels.matrix, axis=1), 1.0)


def test_check_tags_configurable(tmp_workspace):
    fill(tmp_workspace)
    labels = mesh_labels(tmp_workspace, check_tags=())
    assert "5" in labels.doc_ids  # Humans now counts
    humans = "B01.050.150.900.649.313.988.400.112.400.400"
    assert humans in labels.nodes
    row = labels.matrix[labels.row("5")].toarray().ravel()
    assert np.count_nonzero(row) == 11  # Humans and its 10 ancestors; Male has no tree number
    assert labels.stats["unknown_heading_assignments"] == 3  # Female, Male, Renamed Heading
    assert labels.summary()["check_tags"] == []


def test_label_similarity_by_hand(tmp_workspace):
    fill(tmp_workspace)
    labels = mesh_labels(tmp_workspace)
    n1 = math.sqrt(2 * W[1] ** 2 + 2 * W[2] ** 2 + 2 * W[3] ** 2 + W[4] ** 2)
    n2 = math.sqrt(2 * W[1] ** 2 + 2 * W[2] ** 2 + 2 * W[3] ** 2)
    breast_lung = (W[1] ** 2 + W[2] ** 2) / (n1 * n2)  # they share C04 and C04.588
    assert breast_lung == pytest.approx(0.2005, abs=1e-4)
    assert label_similarity(labels, "1", "2") == pytest.approx(breast_lung)
    assert label_similarity(labels, 0, 3) == pytest.approx(1.0)  # '*.../therapy' normalised
    assert label_similarity(labels, "1", "3") == 0.0
    sim = label_similarity_matrix(labels, [0, 1, 2])
    assert sim == pytest.approx(np.array([[1, breast_lung, 0], [breast_lung, 1, 0], [0, 0, 1]]))
    with pytest.raises(CurationError, match="no row"):
        label_similarity(labels, "6", "1")


def test_positive_partners_beta_filter(tmp_workspace):
    fill(tmp_workspace)
    labels = mesh_labels(tmp_workspace)
    partners = positive_partners(labels, beta=0.3)  # SimL(1,2) = 0.2005 is below
    assert [p.tolist() for p in partners] == [[3], [], [], [0]]
    low = positive_partners(labels, beta=0.1)
    assert [p.tolist() for p in low] == [[1, 3], [0, 3], [], [0, 1]]
    capped = positive_partners(labels, beta=0.1, max_partners=1)
    assert [len(p) for p in capped] == [1, 1, 0, 1]
    assert all(set(c.tolist()) <= set(full.tolist()) for c, full in zip(capped, low, strict=True))
    with pytest.raises(CurationError, match="beta"):
        positive_partners(labels, beta=1.0)


def test_summary_coverage(tmp_workspace):
    fill(tmp_workspace)
    summary = mesh_labels(tmp_workspace).summary(beta=0.3, pairs=20_000, seed=1)
    assert summary["documents"] == summary["documents_with_labels"] == 4
    assert summary["mean_labels_per_doc"] == pytest.approx((7 + 6 + 3 + 7) / 4)
    # 12 ordered pairs: (1,4) twice above beta; pairs with 3 (6 of 12) at zero
    assert summary["share_above_beta"] == pytest.approx(2 / 12, abs=0.02)
    assert summary["share_zero"] == pytest.approx(6 / 12, abs=0.02)
    json.dumps(summary)  # manifest-ready


def test_explicit_doc_ids(tmp_workspace):
    fill(tmp_workspace)
    labels = mesh_labels(tmp_workspace, ["8", "1", "6", "5"])
    assert labels.doc_ids == ("8", "1", "5")  # bc5cdr dropped, order kept
    assert labels.has_labels.tolist() == [False, True, False]
    assert labels.summary()["documents_with_labels"] == 1
    with pytest.raises(CurationError, match="not in workspace"):
        mesh_labels(tmp_workspace, ["1", "999"])
    with pytest.raises(CurationError, match="MeSH heading"):
        mesh_labels(tmp_workspace, ["5", "8"])


def test_errors_name_the_fix(tmp_workspace):
    with pytest.raises(CurationError, match="kbcurate import mesh"):
        mesh_labels(tmp_workspace)
    fill(tmp_workspace, docs=[("1", "medline", [])])
    with pytest.raises(CurationError, match="kbcurate import mesh-headings"):
        mesh_labels(tmp_workspace)


def test_entity_mesh(tmp_workspace):
    annotations = [("8", "Disease", ["MESH:D001943"]), ("8", "chemical", ["C012345"]),
                   ("8", "gene", ["D001241"]), ("2", "chemical", ["D001241", "D999999"]),
                   ("6", "disease", ["D001943"])]
    fill(tmp_workspace, annotations=annotations)
    with pytest.raises(CurationError, match="descriptor UI -> name mapping"):
        mesh_labels(tmp_workspace, entity_mesh=True)
    names = {"D001943": "Breast Neoplasms", "D001241": "Aspirin"}
    labels = mesh_labels(tmp_workspace, entity_mesh=True, descriptor_names=names)
    assert labels.doc_ids == ("1", "2", "3", "4", "8")  # 6 is bc5cdr: never
    assert label_similarity(labels, "8", "1") == pytest.approx(1.0)
    row2 = {labels.nodes[i] for i in np.flatnonzero(labels.matrix[1].toarray())}
    assert {"D02", "D02.241", "D02.241.223", "C08.381.540"} <= row2  # heading + chemical
    assert labels.heading_counts[1] == 2
    assert labels.stats["entity_descriptor_assignments"] == 2  # 8: D001943; 2: D001241
    assert labels.stats["entity_ids_unmapped"] == 1  # D999999
    assert labels.stats["entity_ids_not_descriptors"] == 1  # C012345 (the gene is not used)


def test_read_descriptor_names(tmp_path):
    ascii_file = tmp_path / "d2019.bin"
    ascii_file.write_text("*NEWRECORD\nRECTYPE = D\nMH = Aspirin\nMN = D02.241.223\n"
                          "UI = D001241\n\n*NEWRECORD\nRECTYPE = D\nMH = Breast Neoplasms\n"
                          "UI = D001943\n", encoding="utf-8")
    assert read_descriptor_names(ascii_file) == {"D001241": "Aspirin",
                                                 "D001943": "Breast Neoplasms"}
    tsv = tmp_path / "headings.tsv"
    tsv.write_text("pmid\tdescriptor\tdescriptor_ui\n1\tAspirin\tD001241\n2\tHumans\t\n",
                   encoding="utf-8")
    assert read_descriptor_names(tsv) == {"D001241": "Aspirin"}


# -- the loss -------------------------------------------------------------------------------------

ANGLES = [0.0, math.pi / 3, math.pi / 2, math.pi]
SCALES = [2.0, 1.0, 3.0, 0.5]  # embeddings are not unit length: the loss normalises
ROWS = [[1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0]]


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    emb = torch.tensor([[s * math.cos(a), s * math.sin(a)] for a, s in zip(ANGLES, SCALES,
                                                                           strict=True)],
                       dtype=torch.float64, requires_grad=True)
    return emb, torch.tensor(ROWS, dtype=torch.float64)


def sim_e(i: int, j: int) -> float:
    return math.cos(ANGLES[i] - ANGLES[j])


# SimL: (0,1) = 1/sqrt 2, (0,3) = 1/2 are positives; (0,2), (1,2), (1,3), (2,3) share no label.
SIM_L = {(0, 1): 1 / math.sqrt(2), (0, 3): 0.5}
POSITIVES = [(0, 1), (1, 0), (0, 3), (3, 0)]
NEGATIVES = {0: [2], 1: [2, 3], 2: [0, 1, 3], 3: [1, 2]}  # doc 2 has no positive: skipped


def sim_l(i: int, j: int) -> float:
    return SIM_L.get((min(i, j), max(i, j)), 0.0)


def expected_mse() -> float:
    return sum((sim_e(i, j) - sim_l(i, j)) ** 2 for i, j in POSITIVES) / len(POSITIVES)


def test_loss_printed_by_hand():
    emb, rows = batch()
    total, mse, con = hicl_loss(emb, rows, beta=0.3, lam=0.1, variant="printed")
    terms = []
    for i, p in POSITIVES:
        lse = math.log(sum(math.exp(sim_e(i, j)) for j in NEGATIVES[i]))
        terms.append(-(math.log(sim_l(i, p)) + sim_e(i, p) - lse))
    con_hand = sum(terms) / len(terms)
    assert mse.item() == pytest.approx(expected_mse(), abs=1e-12)
    assert mse.item() == pytest.approx(((0.5 - 1 / math.sqrt(2)) ** 2 + 1.5 ** 2) / 2)
    assert con.item() == pytest.approx(con_hand, abs=1e-12)
    assert total.item() == pytest.approx(expected_mse() + 0.1 * con_hand, abs=1e-12)
    total.backward()
    assert emb.grad is not None and torch.isfinite(emb.grad).all()
    assert emb.grad.abs().sum() > 0


def test_loss_tempered_by_hand():
    emb, rows = batch()
    tau = 0.05
    total, mse, con = hicl_loss(emb, rows, beta=0.3, lam=0.2, variant="tempered", tau=tau)
    terms = []
    for i, p in POSITIVES:
        positive = math.exp(sim_e(i, p) / tau)
        negatives = sum(math.exp(sim_e(i, j) / tau) for j in NEGATIVES[i])
        terms.append(-sim_l(i, p) * math.log(positive / (positive + negatives)))
    con_hand = sum(terms) / len(terms)
    assert con.item() == pytest.approx(con_hand, rel=1e-10)
    assert total.item() == pytest.approx(expected_mse() + 0.2 * con_hand, rel=1e-10)
    con.backward()
    assert torch.isfinite(emb.grad).all() and emb.grad.abs().sum() > 0


def test_loss_runs_in_fp32_under_bf16_autocast():
    emb, rows = batch()
    emb32, rows32 = emb.detach().float(), rows.float()
    plain = hicl_loss(emb32, rows32, variant="tempered")[0]
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        inside = hicl_loss(emb32, rows32, variant="tempered")[0]
    assert inside.dtype == torch.float32
    assert inside.item() == pytest.approx(plain.item(), rel=1e-6)


def test_loss_printed_weight_has_no_gradient_but_embeddings_do():
    emb, rows = batch()
    rows.requires_grad_(True)
    _, _, con = hicl_loss(emb, rows, beta=0.3, lam=0.1)
    con.backward()
    assert rows.grad is None  # SimL is a constant (TRAINING.md section 3)
    assert emb.grad.abs().sum() > 0


def test_loss_without_qualifying_pairs_is_zero_and_backward_works():
    emb = torch.randn(3, 4, requires_grad=True)
    rows = torch.eye(3)  # nobody shares a label: no positive
    total, mse, con = hicl_loss(emb, rows)
    assert total.item() == mse.item() == con.item() == 0.0
    total.backward()
    assert emb.grad is not None and torch.count_nonzero(emb.grad) == 0
    same = torch.ones(3, 2)  # all positives, no negative: mse only
    emb.grad = None
    total, mse, con = hicl_loss(emb, same, lam=0.5)
    assert con.item() == 0.0 and total.item() == pytest.approx(mse.item())
    total.backward()


def test_unlabelled_rows_are_neither_positive_nor_negative():
    emb, rows = batch()
    extra = torch.cat([emb.detach(), torch.tensor([[1.0, 0.5]], dtype=torch.float64)])
    rows_extra = torch.cat([rows, torch.zeros(1, 4, dtype=torch.float64)])
    with_zero = hicl_loss(extra, rows_extra)
    without = hicl_loss(emb.detach(), rows)
    for a, b in zip(with_zero, without, strict=True):
        assert a.item() == pytest.approx(b.item(), abs=1e-12)


def test_loss_parameter_checks():
    emb, rows = batch()
    with pytest.raises(RetrieverError, match="Available options: printed, tempered"):
        hicl_loss(emb, rows, variant="weighted")
    with pytest.raises(RetrieverError, match="beta"):
        hicl_loss(emb, rows, beta=1.5)
    with pytest.raises(RetrieverError, match="tau"):
        hicl_loss(emb, rows, variant="tempered", tau=0.0)
    with pytest.raises(RetrieverError, match="same batch"):
        hicl_loss(emb, rows[:3])


@pytest.mark.parametrize("module", ["hicl.py", "hicl_sampler.py"])
def test_hicl_modules_have_no_curation_import(module):
    source = Path(__file__).resolve().parents[1] / "retrievers" / "training" / module
    imported = set()
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert "torch" in imported or "numpy" in imported  # the parse found the imports
    assert not imported & {"curation", "kb_sources"}


# -- the sampler ----------------------------------------------------------------------------------

def clusters(n: int = 40, size: int = 10) -> list[np.ndarray]:
    """Label rows in clusters of ``size``; partners are the others of the cluster."""
    return [np.array([j for j in range(i // size * size, min(n, i // size * size + size))
                      if j != i]) for i in range(n)]


def dataset(rows: list[int]):
    from datasets import Dataset

    return Dataset.from_dict({"text": [f"doc {r}" for r in rows], "label": rows})


def make(partners, rows, batch_size=8, drop_last=False, seed=0) -> HierarchyBatchSampler:
    build = hierarchy_batch_sampler(partners)
    return build(dataset(rows), batch_size=batch_size, drop_last=drop_last,
                 valid_label_columns=["label", "score"], generator=torch.Generator(), seed=seed)


def has_pair(batch: list[int], rows: list[int], partners) -> bool:
    labels = [rows[i] for i in batch]
    return any(b in set(partners[a].tolist()) for a in labels for b in labels if a != b)


def test_sampler_batches_hold_pairs_once_each():
    partners = clusters()
    rows = np.random.default_rng(5).permutation(40).tolist()  # dataset order != label rows
    sampler = make(partners, rows)
    batches = list(sampler)
    assert len(batches) == len(sampler) == 5
    assert [len(b) for b in batches] == [8] * 5
    assert all(len(set(b)) == len(b) for b in batches)
    assert sorted(i for b in batches for i in b) == list(range(40))
    assert all(has_pair(b, rows, partners) for b in batches)


def test_sampler_deterministic_per_seed_and_epoch():
    partners, rows = clusters(), list(range(40))
    first, again = make(partners, rows, seed=3), make(partners, rows, seed=3)
    assert list(first) == list(again)
    assert list(make(partners, rows, seed=4)) != list(first)
    epoch0 = list(first)
    first.set_epoch(1)
    epoch1 = list(first)
    assert epoch1 != epoch0
    again.set_epoch(1)
    assert list(again) == epoch1


def test_sampler_sizes_and_drop_last():
    partners = clusters(41)
    uneven = make(partners, list(range(41)))
    assert len(uneven) == 6 and [len(b) for b in uneven] == [7, 7, 7, 7, 7, 6]
    dropped = make(partners, list(range(41)), drop_last=True)
    assert len(dropped) == 5 and [len(b) for b in dropped] == [8] * 5
    assert all(has_pair(b, list(range(41)), partners) for b in dropped)


def test_sampler_with_few_pairs_borrows_one_for_every_batch():
    partners = [np.array([1]), np.array([0])] + [np.array([], dtype=np.int64)] * 18
    sampler = make(partners, list(range(20)), batch_size=4, seed=2)
    batches = list(sampler)
    assert len(batches) == len(sampler) == 5
    assert all(len(set(b)) == len(b) == 4 for b in batches)
    assert all({0, 1} <= set(b) for b in batches)


def test_sampler_factory_pickles_without_partners():
    import pickle

    factory = hierarchy_batch_sampler(clusters())
    restored = pickle.loads(pickle.dumps(factory))  # the trainer pickles its arguments
    assert restored.rows == 40 and restored.partners is None
    with pytest.raises(RetrieverError, match="unpickled"):
        restored(dataset(list(range(40))), 8, False, ["label"])


def test_sampler_errors():
    with pytest.raises(RetrieverError, match="no positive pair"):
        make([np.array([], dtype=np.int64)] * 4, [0, 1, 2, 3])
    with pytest.raises(RetrieverError, match="appears twice"):
        make(clusters(), [0, 1, 1, 2])
    with pytest.raises(RetrieverError, match="label column"):
        HierarchyBatchSampler(dataset([0, 1]), 2, False, ["score"], partners=clusters())


# -- model: loss module, LoRA, trainer ------------------------------------------------------------

TEXTS = ["BRAF V600E melanoma responds to vemurafenib.", "EGFR L858R lung cancer and erlotinib.",
         "KRAS G12C inhibitors in pancreatic cancer.", "Aspirin and statins reduce cancer risk.",
         "PIK3CA H1047R in breast cancer.", "Metformin in diabetes patients."]


def load(path: Path):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(path), device="cpu")


def encode(model, texts=TEXTS) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return model.encode(texts, convert_to_tensor=True, normalize_embeddings=False)


def test_hicl_loss_module_matches_function_dense_and_sparse(tiny_model_path):
    model = load(tiny_model_path)
    model.eval()
    rows = np.array([[1, 1, 0], [1, 0, 0], [0, 0, 1], [0, 1, 1], [1, 1, 1], [0, 0, 0]], float)
    features = model.tokenize(TEXTS)
    labels = torch.tensor([0, 1, 2, 3, 4, 5])
    dense = HiCLLoss(model, rows, variant="tempered")
    sparse_loss = HiCLLoss(model, sparse.csr_matrix(rows), variant="tempered")
    with torch.no_grad():
        emb = model(dict(features))["sentence_embedding"]
        expected = hicl_loss(emb, torch.tensor(rows), variant="tempered")[0]
        got_dense = dense([dict(features)], labels)
        got_sparse = sparse_loss([dict(features)], labels)
    assert got_dense.item() == pytest.approx(expected.item(), rel=1e-5)
    assert got_sparse.item() == pytest.approx(expected.item(), rel=1e-5)
    assert set(dense.last_components) == {"mse", "con"}
    assert dense.get_config_dict()["variant"] == "tempered"
    with pytest.raises(RetrieverError, match="one text column"):
        dense([dict(features), dict(features)], labels)
    with pytest.raises(RetrieverError, match=r"in \[0, 6\)"):
        dense([dict(features)], torch.tensor([0, 1, 2, 3, 4, 9]))


def test_add_lora_freezes_base(tiny_model_path):
    model = load(tiny_model_path)
    base_total = sum(p.numel() for p in model.parameters())
    trainable = add_lora(model, rank=8, alpha=16, dropout=0.1, targets=("query", "value"))
    # 2 layers x (query, value) x (A: 8 x 32 + B: 32 x 8)
    assert trainable == 2 * 2 * (8 * 32 + 32 * 8) == 2048
    assert trainable / (base_total + trainable) < 0.06  # tiny model; bge-base: 0.27 %
    assert adapter_names(model) == ["default"]
    for name, parameter in model.named_parameters():
        assert parameter.requires_grad == ("lora_" in name), name
    with pytest.raises(RetrieverError, match="already has adapter"):
        add_lora(model)
    with pytest.raises(RetrieverError, match="rank"):
        add_lora(load(tiny_model_path), rank=0)
    with pytest.raises(RetrieverError, match="cannot add a LoRA adapter"):
        add_lora(load(tiny_model_path), targets=("no_such_layer",))


def perturbed_lora(path: Path, seed: int = 0):
    """The tiny model with a LoRA whose B matrices are non-zero (fresh LoRA is the identity)."""
    model = load(path)
    add_lora(model)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)
    return model


def test_merge_lora_same_embeddings_plain_folder(tiny_model_path, tmp_path):
    from safetensors.torch import load_file

    base = encode(load(tiny_model_path))
    model = perturbed_lora(tiny_model_path)
    unmerged = encode(model)
    assert (unmerged - base).abs().max() > 1e-3  # the adapter changes the embeddings
    merged_model = merge_lora(model)
    assert merged_model is model and adapter_names(model) == []
    assert not any("lora_" in name for name, _ in model.named_parameters())
    assert all(p.requires_grad for p in model.parameters())
    assert torch.allclose(encode(model), unmerged, atol=1e-5)
    folder = tmp_path / "merged"
    model.save(str(folder))
    assert not (folder / "adapter_config.json").exists()
    assert not (folder / "adapter_model.safetensors").exists()
    keys = set(load_file(folder / "model.safetensors"))
    assert keys == set(load_file(tiny_model_path / "model.safetensors"))
    reloaded = load(folder)
    assert adapter_names(reloaded) == []
    assert torch.allclose(encode(reloaded), unmerged, atol=1e-5)
    assert merge_lora(reloaded) is reloaded  # no adapter: unchanged


def test_merge_lora_from_adapter_checkpoint(tiny_model_path, tmp_path):
    from safetensors.torch import load_file

    model = perturbed_lora(tiny_model_path, seed=1)
    expected = encode(model)
    checkpoint = tmp_path / "checkpoint"
    model.save(str(checkpoint))  # what the trainer writes while the adapter is attached
    assert (checkpoint / "adapter_config.json").is_file()
    assert not (checkpoint / "model.safetensors").exists()
    loaded = load(checkpoint)  # attaches the adapter to the base named in adapter_config.json
    assert adapter_names(loaded) == ["default"]
    assert torch.allclose(encode(loaded), expected, atol=1e-5)
    merge_lora(loaded)
    folder = tmp_path / "final"
    loaded.save(str(folder))
    assert not (folder / "adapter_config.json").exists()
    keys = set(load_file(folder / "model.safetensors"))
    assert not any(k.startswith("base_model.") or "lora_" in k for k in keys)
    assert torch.allclose(encode(load(folder)), expected, atol=1e-5)


def test_trainer_runs_with_sampler_lora_and_loss(tiny_model_path, tmp_path):
    from datasets import Dataset
    from sentence_transformers.sentence_transformer import (
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from transformers import PrinterCallback

    torch.manual_seed(0)
    model = load(tiny_model_path)
    add_lora(model)
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    lora_before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    rows = np.array([[1, 1, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0], [0, 0, 1, 1], [0, 1, 0, 0],
                     [0, 0, 0, 1], [1, 1, 0, 0], [0, 0, 1, 1]], float)
    unit = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    sims = unit @ unit.T
    partners = [np.array([j for j in range(8) if j != i and sims[i, j] > 0.3]) for i in range(8)]
    texts = [f"{t} case {i}" for i, t in enumerate(TEXTS + TEXTS[:2])]
    data = Dataset.from_dict({"text": texts, "label": list(range(8))})
    args = SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path / "ckpt"), num_train_epochs=1, per_device_train_batch_size=4,
        learning_rate=1e-2, warmup_steps=0, seed=0, use_cpu=True, report_to="none",
        save_strategy="epoch", logging_steps=1, disable_tqdm=True,
        batch_sampler=hierarchy_batch_sampler(partners))
    loss = HiCLLoss(model, sparse.csr_matrix(rows))
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=data, loss=loss)
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    assert trainer.state.global_step == 2
    losses = [r["loss"] for r in trainer.state.log_history if "loss" in r]
    assert losses and all(math.isfinite(v) for v in losses)
    params = dict(model.named_parameters())
    assert all(torch.equal(params[n], v) for n, v in frozen.items())
    assert any(not torch.equal(params[n], v) for n, v in lora_before.items())
    checkpoint = tmp_path / "ckpt" / "checkpoint-2"  # adapter only, training args pickled
    assert (checkpoint / "adapter_config.json").is_file()
    assert (checkpoint / "training_args.bin").is_file()
    assert "HiCLLoss" in (checkpoint / "README.md").read_text(encoding="utf-8")
