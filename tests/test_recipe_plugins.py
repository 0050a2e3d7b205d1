"""A recipe is a plug-in: a toy recipe in a temporary package, registered through the
``kbcurate.recipes`` entry-point group, trains through the CLI (its flags generated from its
options), learns from labels in ``kbcurate retrain --recipe toy`` and trains from the app's form
(its widgets generated from the same options)."""

from __future__ import annotations

import json
import os
import textwrap

import pytest
from app_helpers import APP, add_users, build_app_workspace, sign_in
from streamlit.testing.v1 import AppTest

from curation.cli.main import build_parser, main
from curation.jobs.queue import JobStatus, list_jobs, wait_for_job
from curation.store.labels import Labels
from curation.store.models import Models
from curation.store.workspace import Workspace
from curation.training import recipes
from kb_sources.errors import CurationError
from tests.loop_fixtures import make_loop_workspace

#: The whole plug-in: what a team writes to add a recipe (counted in the closing note).
TOY = textwrap.dedent('''
    """A toy recipe: each train query's cited abstracts are positives, another query's are
    negatives; labelled complete abstracts are positives too."""
    import hashlib
    from dataclasses import dataclass

    from curation.store.documents import Documents
    from curation.training.recipes.base import Recipe, TrainingData, TrainingOptions, option


    @dataclass(frozen=True)
    class ToyOptions(TrainingOptions):
        negative_mu: float = option(1.0, "margin class of a negative pair")
        shuffle_negatives: bool = option(True, "pair each query with the next query's gold")


    class ToyRecipe(Recipe):
        name = "toy"
        description = "Toy: cited abstracts as pairs"
        labels = "complete -> positive pair"
        Options = ToyOptions

        def build_data(self, data_in, options):
            from retrievers.training.config import PairExample

            queries = [q for q in data_in.task.split("train") if q.gold]
            rows, used = [], []
            for i, q in enumerate(queries):
                other = queries[(i + 1) % len(queries)] if options.shuffle_negatives else q
                docs = [(d, True) for d in q.gold] + [(d, False) for d in other.gold
                                                      if d not in q.gold]
                rows += [(q.text, d, pos) for d, pos in docs]
            if data_in.labels is not None:
                for label_id, e in data_in.labels.used_examples():
                    if e.cls == "label:complete":
                        rows.append((e.query, e.doc_id, True))
                        used.append(label_id)
            texts = Documents(data_in.ws).texts([d for _, d, _ in rows])
            pairs = [PairExample(q, t, pos, 0.0 if pos else options.negative_mu, "toy")
                     for (q, _, pos), t in zip(rows, texts)]
            digest = hashlib.sha256(repr(rows).encode()).hexdigest()
            return TrainingData(pairs, {"examples": len(pairs), "sha256": digest},
                                "{title} {abstract}", len(queries), tuple(used))

        def train(self, base, data, options, *, run_dir, resume, progress, eval_fn):
            from retrievers.training.trainer import train_pairs

            return train_pairs(base, data.rows, run_dir, options.train_config(), resume=resume,
                               progress=progress, eval_fn=eval_fn)


    RECIPE = ToyRecipe()
''')


@pytest.fixture
def toy_plugin(tmp_path, monkeypatch):
    """Install the toy recipe as a distribution on sys.path (and PYTHONPATH, for workers)."""
    site = tmp_path / "site"
    (site / "toyrecipe-0.1.dist-info").mkdir(parents=True)
    (site / "toyrecipe.py").write_text(TOY, encoding="utf-8")
    (site / "toyrecipe-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: toyrecipe\nVersion: 0.1\n", encoding="utf-8")
    (site / "toyrecipe-0.1.dist-info" / "entry_points.txt").write_text(
        "[kbcurate.recipes]\ntoy = toyrecipe:RECIPE\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]))
    recipes.refresh()
    yield site
    recipes.refresh()


def test_the_plugin_is_registered_with_generated_flags(toy_plugin):
    assert recipes.recipe_names() == ("edel", "bica", "biohicl", "cross", "toy")
    fields = {f.name: f for f in recipes.option_fields(recipes.options_class("toy"))}
    assert (fields["negative_mu"].kind, fields["negative_mu"].default) == (float, 1.0)
    assert fields["shuffle_negatives"].kind is bool and not fields["negative_mu"].shared
    assert fields["epochs"].shared and fields["max_queries"].optional
    args = build_parser().parse_args(["train", "--schema", "disease_gene", "--recipe", "toy",
                                      "--negative-mu", "0.5", "--no-shuffle-negatives"])
    from curation.cli.train_commands import train_values

    assert train_values(args) == {"negative_mu": 0.5, "shuffle_negatives": False}
    with pytest.raises(CurationError, match="Unknown toy training option.*graph"):
        recipes.recipe_options("toy", {"graph": "knn"})


def test_train_and_retrain_the_plugin_through_the_cli(toy_plugin, tmp_workspace,
                                                      tiny_model_path, capsys):
    from curation.evaluation.harness import build_task

    ws = make_loop_workspace(tmp_workspace)
    common = ["-w", str(ws.root), "--quiet", "--schema", "disease_gene"]
    tiny = ["--base", str(tiny_model_path), "--batch-size", "4", "--max-seq-length", "32",
            "--dev-depth", "0", "--recipe", "toy", "--negative-mu", "0.8"]
    assert main(["train", *common, *tiny, "--activate"]) == 0
    out = capsys.readouterr()
    v1 = Models(ws).get("disease_gene-toy@1")
    assert v1.status == "active" and "disease_gene-toy@1 is now the active" in out.out
    assert v1.recipe == "toy" and v1.manifest["options"]["negative_mu"] == 0.8
    assert "registered disease_gene-toy@1" in out.out
    assert f"NDCG@10 {v1.metrics['test_ndcg@10']:.4f}" in out.out  # scored before listed
    assert "warning: Trained on only" in out.err
    q = next(q for q in build_task(ws, "disease_gene").split("train") if q.gold)
    Labels(ws).record(user="root", schema="disease_gene", query_key=q.qid, query_text=q.text,
                      doc_id=q.gold[0], grade="complete")
    assert main(["retrain", *common, *tiny, "--from-base", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["version"] == "disease_gene-toy@2" and result["labels_used"] == 1
    v2 = Models(ws).get("disease_gene-toy@2")
    assert v2.manifest["retrain_options"]["recipe"] == "toy"
    assert v2.manifest["examples"]["examples"] == v1.manifest["examples"]["examples"] + 1


def test_the_app_form_is_generated_and_trains_the_plugin(toy_plugin, tmp_path, monkeypatch,
                                                         tiny_model_path):
    root = build_app_workspace(tmp_path / "ws")
    add_users(root, boss="admin")
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "boss")
    at.switch_page("app_pages/evaluate.py").run()
    at.radio(key="train_recipe").set_value("toy").run()
    assert not at.exception
    at.selectbox(key="train_schema").set_value("PO")
    assert at.number_input(key="train_opt_toy_negative_mu").value == 1.0
    at.number_input(key="train_opt_toy_negative_mu").set_value(0.6)
    at.checkbox(key="train_opt_toy_shuffle_negatives").uncheck()
    at.text_input(key="train_opt_toy_base").set_value(str(tiny_model_path))
    at.number_input(key="train_opt_toy_max_seq_length").set_value(32)
    at.number_input(key="train_opt_toy_dev_depth").set_value(0)
    at.button(key="train_start").click().run()
    assert not at.exception and not at.error
    with Workspace.open(root) as ws:
        (job,) = list_jobs(ws)
        assert (job.kind, job.params["recipe"]) == ("train", "toy")
        assert job.params["options"]["negative_mu"] == 0.6
        assert job.params["options"]["shuffle_negatives"] is False
        done = wait_for_job(ws, job.id, timeout=240)
        assert done.status is JobStatus.DONE, done.error
        assert done.result["version"] == "PO-toy@1"
        assert Models(ws).get("PO-toy@1").manifest["options"]["negative_mu"] == 0.6
