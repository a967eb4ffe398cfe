"""Rule `serve_model`: one model's server for all its tasks in this run (a service job).

A shell command (``exec`` of this file), not a ``script:``: Snakemake ends a service job
by signalling the process of its shell command, and a ``script:`` job has none it knows.
"""

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))

from novabench.models.base import load_adapter
from novabench.rules import run
from novabench.serving import serve_model


def arguments(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--settings", required=True, type=json.loads)
    parser.add_argument("--service", required=True, type=Path)
    parser.add_argument("--cache-dir", required=True, type=Path)
    parser.add_argument("--log", required=True)
    parser.add_argument("--plugins", default="[]", type=json.loads)
    return parser.parse_args(argv)


def main(args):
    job = SimpleNamespace(log=[args.log], output=[args.service], config={"plugins": args.plugins})

    def body(smk):
        adapter = load_adapter(args.model, args.settings, cache_dir=args.cache_dir)
        serve_model(args.model, adapter, args.service)

    run(job, body)


if __name__ == "__main__":
    main(arguments(sys.argv[1:]))
