#!/usr/bin/env bash
# Makes sure `python3 -m venv` works: on a fresh Debian or Ubuntu, python3 comes without the
# venv support (the python3-venv package: ensurepip), and `python3 -m venv` fails. Installs
# python3-venv (and python3 when missing) with apt, as .ci/run installs its other tools; exits
# non-zero, saying what to install, when that is not possible. Called by .ci/run.
set -euo pipefail
if python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  exit 0
fi
echo "python3 cannot create virtualenvs (no python3 or no python3-venv): installing python3-venv with apt"
if ! (apt-get update -qq && apt-get install -y -qq python3 python3-venv >/dev/null); then
  echo "error: apt-get could not install python3-venv; install it (apt-get install python3-venv) and run .ci/run again" >&2
  exit 1
fi
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  echo "error: python3 still cannot create virtualenvs after installing python3-venv; check that python3 on PATH is Debian's" >&2
  exit 1
fi
