"""Chapter 9's experiments ("Does the bound bind?"): one package, one runner, one report.

Layout (one task module and one model module per experiment; nothing else is on the path of
the stored results):

* :mod:`~rope_lib.experiments.recall_task`, :mod:`~rope_lib.experiments.recall_model`:
  experiment 1, one RoPE attention layer trained on key-value recall;
* :mod:`~rope_lib.experiments.needle_task`, :mod:`~rope_lib.experiments.needle_model`:
  experiment 2, a tiny Hugging Face Llama trained on needle recall;
* :mod:`~rope_lib.experiments.predictions`: both experiments' predictions, computed from
  rope_lib and written down before the sweeps that test them;
* :mod:`~rope_lib.experiments.runner`: the registry of experiments and the one resumable
  runner (keys, per-run files, two worker processes, the progress bar, the results files);
* :mod:`~rope_lib.experiments.cli` (``python -m rope_lib.experiments``, ``make experiment``);
* :mod:`~rope_lib.experiments.report`: summaries and statistics of both experiments, from the
  stored results (no matplotlib: the figures are in :mod:`rope_lib.figures.experiments`).

This ``__init__`` imports nothing, so that importing a task or model module loads no other
part of the package (the key of the stored results covers what those modules load).

The first edition of these experiments (``rope_lib/experiment.py``, ``experiment_report.py``,
``experiment_lm.py``, ``experiment_lm_report.py``, ``sweep.py``, ``experiment_cli.py`` and
their stored results) has been removed; this package replaces it.
"""
