"""An embedded, deterministic NOVA-like sample dataset for tests and dry runs.

``generate_sample(out_dir, n_cases=..., seed=..., images_per_case=...)`` writes synthetic
brain MRI slices (rendered from the MNI152 template that nilearn ships) in the layout of
the current Hugging Face release: ``data/nova-v1.parquet`` plus ``images/*.png``.

Modules: ``anatomy`` (template, lesion sites, location names), ``render`` (slice
geometry, sequence contrasts, noise), ``lesions`` (lesion shapes, signal, gold boxes),
``raters`` (the two raters' boxes), ``catalog`` (diagnoses), ``text`` (clinical
histories and captions), ``generate`` (the dataset writer).
"""

from novabench.sample.generate import generate_sample

__all__ = ["generate_sample"]
