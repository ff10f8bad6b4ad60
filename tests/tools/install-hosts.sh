#!/bin/sh
# Installs the static hosts the host tests run against (nginx and Caddy, from Debian's
# packages), the headless browser of the HTML view tests (Chromium), and Node with npm (the edge
# handler tests' runtime and the installer of the npm packages the tests use), and strace (a
# test kills a build at an exact system call), when missing.
# Used by `make test` and so by CI.
#
# Never fails the build: without root or apt the host tests skip with a message instead.
# Services are not started: the tests run their own nginx and caddy as the current user.
set -u

missing=""
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing="$missing nginx"
command -v caddy >/dev/null 2>&1 || missing="$missing caddy"
command -v chromium >/dev/null 2>&1 || missing="$missing chromium fonts-liberation"
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
command -v strace >/dev/null 2>&1 || missing="$missing strace"
[ -z "$missing" ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-hosts: apt-get not found; the host tests will skip (missing:$missing)" >&2
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
    sudo=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo="sudo -n"
else
    echo "install-hosts: not root and no passwordless sudo; the host tests will skip (missing:$missing)" >&2
    exit 0
fi

# Keep the packages' maintainer scripts from starting system services (nginx on port 80):
# the standard policy-rc.d hook, only for the duration of the install, only if none exists.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
    $sudo sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod 755 $policy"
    trap '$sudo rm -f "$policy"' EXIT
fi

echo "install-hosts: installing$missing from Debian's packages" >&2
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null 2>&1; then
    $sudo apt-get update -qq >/dev/null 2>&1
    $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
        echo "install-hosts: apt-get install$missing failed; the host tests will skip" >&2
fi
exit 0
