"""KB-aware training: the recipes, the rounds that run them and the learned ranker's rounds.

- ``recipes/`` (:mod:`curation.training.recipes`): the training recipes by name, one folder each
  holding the recipe and its own data builders: ``edel/`` (KB examples graded by margin classes
  from entity matching and KB relations: ``examples``, ``margins``), ``bica/`` (the citation /
  kNN graph and its walks: ``triplets``, ``graph``), ``biohicl/`` (MeSH inputs, labels and
  descriptor names: ``mesh_inputs``, ``mesh_labels``, ``mesh_descriptors``); ``base`` is the
  recipe interface plug-ins implement.
- Round mechanics (the modules of this folder): one round of any recipe (``rounds``), the
  feedback loop's retraining on labels (``retrain``, ``feedback``, ``label_plan``: which labels a
  round uses, ``pool``, ``scoring``), the gate (``gate``; ``round_gate``: what a dense round's
  gate measures), activation (``activation``), published checkpoints (``imports``), the learned
  ranker's rounds (``ranker``, ``ranker_data``, ``ranker_round``, ``round_measure``,
  ``round_history``, ``heldout``) and the background jobs (``jobs``, ``job_kinds``).
- ``benchmarks/``: ``kbcurate train-bench`` (``train_bench``) and ``kbcurate train-speed``
  (``train_speed``).

Simulated curators replaying these rounds live in :mod:`curation.simulation`, which imports this
wing (never the other way). Text-only engines (losses, trainer, graph walks) live in
retrievers.training.

May import: curation.evaluation, curation.search, curation.store, curation.matching, curation.jobs,
curation.ranking, curation.screening, curation.access, curation.templates, kb_sources, retrievers.
"""
