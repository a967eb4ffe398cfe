"""novabench: the importable code behind the NOVA benchmark pipeline.

Snakemake rules stay thin and call into this package; researchers can import the
same loaders, adapters and scorers from a notebook.
"""

__version__ = "0.1.0"
