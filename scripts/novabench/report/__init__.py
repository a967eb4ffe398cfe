"""The report stage: from score files to the paper's tables, figures and provenance.

- :mod:`~novabench.report.bootstrap`: case-level bootstrap CIs and paired tests (each
  task's vectorised replicates, equal resample by resample to re-running its scorer, are
  in its folder, ``novabench.tasks.<name>.bootstrap``);
- :mod:`~novabench.report.statistics`: one task's score files bootstrapped together;
- :mod:`~novabench.report.tables`: LaTeX/CSV/Markdown tables, reproduced vs reported, summary;
- :mod:`~novabench.report.figures`: the shared figure families and the one style (a task's
  own families are in ``novabench.tasks.<name>.figures``; :mod:`.imaging` reads the
  sequence and plane from captions for the breakdowns);
- :mod:`~novabench.report.agreement`: Cohen's kappa between judges on the same predictions;
- :mod:`~novabench.report.manifest`: ``results/<tag>/manifest.json``, without secrets;
- :mod:`~novabench.report.inputs`: reading score, per-image and prediction files.
"""
