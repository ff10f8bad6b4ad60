#!/bin/sh
# Installs the Python tools of the OpenAPI tests (tests/suite/openapi.rs), and SeaweedFS (`weed`, for
# tests/suite/publish.rs) with awscli (for the publish benchmark), into a virtual environment,
# target/pyvenv by default (GEN_PYVENV overrides it): the pinned versions of
# tests/tools/requirements.txt, from PyPI (pip honours PIP_INDEX_URL, PIP_FIND_LINKS, ...).
#
# Idempotent and quick when nothing changed: the environment is rebuilt only when the
# requirements differ from the ones it was built with. Concurrent runs wait for each other.
# Prints the environment's folder on success; fails (exit 1) with the reason otherwise.
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${GEN_PYVENV:-$root/target/pyvenv}
requirements=$root/tests/tools/requirements.txt
stamp=$venv/.gen-requirements

mkdir -p "$(dirname "$venv")"
if command -v flock >/dev/null 2>&1; then
    exec 9>"$venv.lock"
    flock 9
fi

if [ -x "$venv/bin/python" ] && cmp -s "$requirements" "$stamp"; then
    echo "$venv"
    exit 0
fi

python=${PYTHON:-python3}
if ! command -v "$python" >/dev/null 2>&1; then
    echo "python-venv: $python not found: install Python 3 (Debian: apt-get install python3 python3-venv)" >&2
    exit 1
fi
echo "python-venv: creating $venv with $("$python" --version 2>&1)" >&2
rm -f "$stamp"
if ! "$python" -m venv --clear "$venv" >&2; then
    echo "python-venv: '$python -m venv' failed: install the venv module (Debian: apt-get install python3-venv)" >&2
    exit 1
fi
if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements" >&2; then
    echo "python-venv: pip install -r $requirements failed (is PyPI reachable?)" >&2
    exit 1
fi
cp "$requirements" "$stamp"
echo "$venv"
