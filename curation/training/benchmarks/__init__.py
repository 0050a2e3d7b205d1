"""The training benchmarks behind two CLI commands: ``kbcurate train-bench`` (does training beat
BM25? :mod:`curation.training.benchmarks.train_bench`) and ``kbcurate train-speed`` (training
pairs/s by precision and batching: :mod:`curation.training.benchmarks.train_speed`). The
benchmark scripts that print figures without a CLI command live in the top-level benchmarks/."""
