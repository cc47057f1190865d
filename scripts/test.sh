#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh machine, then run it (README's second command).
# - Debian packages: prometheus (real server for the collector tests), prometheus-node-exporter (real
#   node detail for the conformance tests), prometheus-alertmanager and victoria-metrics (vmalert: the
#   generated rule file on the real engines), tmux (real-terminal tests), iproute2 (tc: a throttled network
#   namespace for the DDP all-reduce test), openssl (a self-signed certificate for the TLS test), chromium
#   (headless, driven over its DevTools protocol: `serve` tested in a real browser)
# - a virtualenv in .venv with the project, its test extras and the CPU build of PyTorch (example job)
# - ruff (formatting), then mypy (scripts/typecheck.sh: strict on the collectors and the planner, mypy's
#   defaults on the app and the demo): either failing stops the run before the tests
# Exit status is pytest's: non-zero on any failure, including "no tests collected" (5).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v prometheus >/dev/null 2>&1 || need_apt+=(prometheus)
command -v prometheus-node-exporter >/dev/null 2>&1 || need_apt+=(prometheus-node-exporter)
command -v prometheus-alertmanager >/dev/null 2>&1 || need_apt+=(prometheus-alertmanager)
command -v victoria-metrics >/dev/null 2>&1 || need_apt+=(victoria-metrics)
command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)
command -v tc >/dev/null 2>&1 || need_apt+=(iproute2)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "installing Debian packages: ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  # Debian's package starts its own service; the tests run their own servers on ephemeral ports.
  $SUDO systemctl stop prometheus prometheus-node-exporter prometheus-alertmanager victoria-metrics 2>/dev/null || true
fi

# One headless start of Chromium before the tests: a fresh machine reads its ~250 MB and builds its caches here,
# not inside the browser test's wait (that test also starts Chromium again if a start says nothing for 45 s).
if command -v chromium >/dev/null 2>&1; then
  warm=$(mktemp -d)
  timeout 120 chromium --headless --no-sandbox --disable-gpu --user-data-dir="$warm" --dump-dom about:blank >/dev/null 2>&1 || true
  rm -rf "$warm"
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# setuptools' one informational note about editable installs of a package-dir mapping ("be careful with
# folders named like the package") is silenced; the metadata itself installs without warnings.
PYTHONWARNINGS="ignore:Editable installation" .venv/bin/python -m pip install -q -e '.[test,example]'

# Formatting is checked, not fixed: run `.venv/bin/ruff format` to apply it (Python files; Markdown excluded).
.venv/bin/ruff format --check --quiet . || { echo "ruff format: the files above need formatting (.venv/bin/ruff format)" >&2; exit 1; }

# Types: 0 errors, or the run stops here (cold cache: 31 s of CPU, 2 min 11 s wall at load average 11; warm: 5 s).
scripts/typecheck.sh || { echo "mypy: the errors above fail the run (scripts/typecheck.sh)" >&2; exit 1; }

unset NO_COLOR
# Two workers, a test file to each at a time (module fixtures such as a real Prometheus start once): the
# tests mostly wait on servers, jobs and terminals, so two overlap well on two cores (three, with a CPU hog beside them, starved the timing-sensitive real-job tests).
exec .venv/bin/python -m pytest -q -ra -n 2 --dist loadfile "$@"
