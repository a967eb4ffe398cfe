#!/usr/bin/env bash
# Set up everything the pipeline needs on a fresh Debian/Ubuntu machine, idempotently:
#   bash scripts/setup.sh         # runtime: Debian's WordNet 3.0 + a pinned virtualenv in .venv
#   bash scripts/setup.sh --dev   # the same plus the test and lint tools
# Re-running is cheap: nothing is reinstalled unless a requirements file changed.
set -euo pipefail

cd "$(dirname "$0")/.."
dev=0
[[ "${1:-}" == "--dev" ]] && dev=1

# Debian packages: WordNet 3.0 for METEOR (the pipeline copies it into results/ for nltk);
# with --dev as root also SLURM, munge and MariaDB, for the test that starts a throw-away
# single-node SLURM cluster (tests/test_slurm.py).
apt_packages=()
if [[ ! -f /usr/share/wordnet/index.noun || ! -f /usr/share/wordnet/index.sense ]]; then
  apt_packages+=(wordnet-base wordnet-sense-index)
fi
if [[ $dev -eq 1 && $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  for daemon in slurmctld slurmd slurmdbd munged mariadbd; do
    if [[ ! -x /usr/sbin/$daemon ]]; then
      apt_packages+=(slurm-wlm munge slurmdbd mariadb-server)
      break
    fi
  done
fi
if [[ ${#apt_packages[@]} -gt 0 ]]; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "setup: installing ${apt_packages[*]} with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq </dev/null >/dev/null
    apt-get install -y -qq --no-install-recommends "${apt_packages[@]}" </dev/null >/dev/null
  else
    echo "setup: missing Debian packages; run: sudo apt-get install ${apt_packages[*]}" >&2
    exit 1
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
want=$(cat requirements*.txt | sha256sum | cut -d' ' -f1)
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  echo "setup: installing $req into .venv" >&2
  .venv/bin/python -m pip install -q --upgrade pip </dev/null
  .venv/bin/python -m pip install -q -r "$req" </dev/null
  echo "$want" >"$stamp"
fi
echo "setup: ready (.venv/bin/snakemake, .venv/bin/python)" >&2
