#!/usr/bin/env bash
# Set up everything the pipeline needs on a fresh machine, idempotently:
#   bash scripts/setup.sh         # runtime: WordNet 3.0 + a pinned virtualenv in .venv,
#                                 # with the `novabench` command
#   bash scripts/setup.sh --dev   # the same plus the test and lint tools
# Debian/Ubuntu (apt-get): WordNet from Debian's packages, offline. Elsewhere (macOS, other
# Linux distributions): WordNet downloaded by nltk into results/nltk_data, checked against
# the checksum nltk_data publishes.
# Re-running is cheap: nothing is reinstalled unless a requirements file changed.
set -euo pipefail

cd "$(dirname "$0")/.."
dev=0
[[ "${1:-}" == "--dev" ]] && dev=1

# Debian packages: WordNet 3.0 for METEOR (the pipeline copies it into results/ for nltk);
# with --dev as root also SLURM, munge and MariaDB, for the test that starts a throw-away
# single-node SLURM cluster (tests/workflow/test_slurm.py), and chromium with its driver, for the
# leaderboard's browser test (tests/report/test_leaderboard_browser.py).
if command -v apt-get >/dev/null; then
  apt_packages=()
  if [[ ! -f /usr/share/wordnet/index.noun || ! -f /usr/share/wordnet/index.sense ]]; then
    apt_packages+=(wordnet-base wordnet-sense-index)
  fi
  if [[ $dev -eq 1 && $(id -u) -eq 0 ]]; then
    for daemon in slurmctld slurmd slurmdbd munged mariadbd; do
      if [[ ! -x /usr/sbin/$daemon ]]; then
        apt_packages+=(slurm-wlm munge slurmdbd mariadb-server)
        break
      fi
    done
    if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
      apt_packages+=(chromium chromium-driver)
    fi
  fi
  if [[ ${#apt_packages[@]} -gt 0 ]]; then
    if [[ $(id -u) -eq 0 ]]; then
      echo "setup: installing ${apt_packages[*]} with apt-get" >&2
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq </dev/null >/dev/null
      apt-get install -y -qq --no-install-recommends "${apt_packages[@]}" </dev/null >/dev/null
    else
      echo "setup: missing Debian packages; run: sudo apt-get install ${apt_packages[*]}" >&2
      exit 1
    fi
  fi
fi

python=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  echo "setup: creating .venv with $($python --version)" >&2
  "$python" -m venv .venv
fi

req=requirements.txt
[[ $dev -eq 1 ]] && req=requirements-dev.txt
stamp=.venv/.installed-$(basename "$req" .txt)
sha256=(sha256sum)
command -v sha256sum >/dev/null || sha256=(shasum -a 256)  # macOS
want=$(cat requirements*.txt | "${sha256[@]}" | cut -d' ' -f1)
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  echo "setup: installing $req into .venv" >&2
  .venv/bin/python -m pip install -q --upgrade pip </dev/null
  .venv/bin/python -m pip install -q -r "$req" </dev/null
  echo "$want" >"$stamp"
fi
# The `novabench` command in .venv/bin, installed editable: it runs this checkout's code, so
# it never goes stale, and finds this workflow's config. Offline when setuptools is there.
if [[ ! -x .venv/bin/novabench ]]; then
  echo "setup: installing the novabench command into .venv" >&2
  isolation=()
  if .venv/bin/python -c 'import setuptools, sys; sys.exit(int(setuptools.__version__.split(".")[0]) < 77)' 2>/dev/null; then
    isolation=(--no-build-isolation)
  fi
  .venv/bin/python -m pip install -q --no-deps ${isolation[@]+"${isolation[@]}"} -e . </dev/null
fi
# Without Debian's WordNet: nltk downloads it (once, needs the internet) to where the
# pipeline reads it (workflow/rules/score.smk). With Debian's, the pipeline copies it itself.
if [[ ! -f /usr/share/wordnet/index.noun || ! -f /usr/share/wordnet/index.sense ]]; then
  PYTHONPATH=scripts .venv/bin/python -m novabench.wordnet --download results/nltk_data >&2
fi
echo "setup: ready (.venv/bin/snakemake, .venv/bin/novabench, .venv/bin/python)" >&2
