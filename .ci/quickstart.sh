#!/usr/bin/env bash
# README.md's quick start where it says it works: the code block after the `<!-- ci:quickstart`
# marker runs as root with `bash -e` in a fresh Debian 12 (a throwaway copy of a bare bookworm
# root from `.ci/chroot.sh fresh`), in a copy of this checkout, with Debian's own python3.
# The block is read from README.md on every run, so the README and CI cannot drift apart.
# Afterwards: the venv runs Debian's interpreter, and another user can run blox-slurm (the
# controller's units run it as `blox`).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"

block="$(awk '/^<!-- ci:quickstart/ { marked = 1; next }
              marked && /^```/ { if (inside) exit; inside = 1; next }
              inside' "$here/README.md")"
if [ -z "$block" ]; then
  echo "quickstart.sh: README.md has no code block after '<!-- ci:quickstart'" >&2
  exit 1
fi
printf 'README.md quick start:\n%s\n' "$block"
checks='echo "venv interpreter: $(readlink -f /opt/blox-slurm/bin/python3)"
runuser -u nobody -- blox-slurm policies >/dev/null
echo "nobody runs $(command -v blox-slurm): ok"'
exec bash "$here/.ci/chroot.sh" fresh bookworm bash -euo pipefail -c "$block
$checks"
