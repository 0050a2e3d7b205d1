"""The training wing's background job kinds, registered through the entry point
``kbcurate.job_kinds`` (``training`` in pyproject.toml; see :mod:`curation.jobs.kinds`)."""

from __future__ import annotations

from curation.jobs.kinds import JobKind

#: The job that trains each schema's ranker and records its default (the demo's last step).
DEFAULTS_JOB_KIND = "measure_defaults"

JOB_KINDS = (
    JobKind("train", "curation.training.jobs:run_training",
            "train a dense retriever (EDEL, BiCA or BioHiCL) into a new model version",
            params=("schema", "options", "recipe")),
    JobKind("retrain", "curation.training.jobs:run_retrain",
            "retrain a schema's model on KB + labels; promote it if it passes the gate",
            params=("schema", "options")),
    JobKind("activate", "curation.training.activation:run_activation",
            "build a model version's dense and hybrid indexes, then make it the active one",
            params=("schema", "version", "reason"), unique_by=("schema",),
            validator="curation.training.activation:check_activation_params"),
    JobKind("rank", "curation.training.ranker:run_ranker_job",
            "retrain a schema's learned ranker on KB + labels (seconds); the gate promotes it",
            params=("schema", "labels", "labeller"),
            validator="curation.training.ranker:check_rank_params"),
    JobKind(DEFAULTS_JOB_KIND, "curation.training.defaults:run_defaults_job",
            "train each schema's learned ranker and record its measured default ranking (the "
            "demo's last step, after the app is served)", max_seconds=3 * 3600.0),
)
