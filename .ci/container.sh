#!/usr/bin/env bash
# The emulator image (emulator/Dockerfile), built and run the way its users run it:
#   1. the base: the bare bookworm root of `.ci/chroot.sh base`, `podman import`ed under the
#      dated name the Dockerfile's FROM pins, once the root's archive date is that date;
#   2. `podman build` with the repository root as context, as emulator/compose.yaml does;
#   3. `podman run -d --init --network host` (the image's default 4 x 4 cluster, on free
#      ports), until the image's own HEALTHCHECK (`blox-slurm emulator status`) passes;
#   4. `blox-slurm demo --no-live` inside (`podman exec`): it brings up its own emulator beside
#      the container's, on other free ports, and must exit 0; then `emulator status` again;
#   5. `podman stop`: the cluster stops on SIGTERM and the container exits 0.
# Podman as it runs on Debian 12 here (docs/emulator.md): runc, vfs storage, cgroupfs and no
# default ulimits; the image is built in Docker's format, as Docker builds it (podman's own
# format drops HEALTHCHECK). Its storage is a temporary directory removed at the end, failure
# or not, so every run builds from the base up and leaves no container, image or mount behind.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
die() { echo "container.sh: $*" >&2; exit 1; }
command -v podman >/dev/null || die "podman is not installed (apt-get install podman runc catatonit)"

image="$(sed -n 's/^FROM //p' emulator/Dockerfile)"
tag=localhost/blox-slurm-emulator:ci
name="blox-ci-emulator-$$"
tmp="$(mktemp -d /var/tmp/blox-podman.XXXXXX)"
pod() {
  podman --root "$tmp/storage" --runroot "$tmp/run" --storage-driver vfs --runtime runc "$@"
}
cleanup() {
  pod rm --force --time 0 "$name" >/dev/null 2>&1 || true
  rm -rf --one-file-system "$tmp"
}
trap cleanup EXIT
printf '[containers]\ndefault_ulimits = []\n[engine]\ncgroup_manager = "cgroupfs"\n' \
  >"$tmp/containers.conf"
export CONTAINERS_CONF="$tmp/containers.conf"
step() { printf '%s: %d s\n' "$1" "$((SECONDS - t0))"; t0=$SECONDS; }

t0=$SECONDS
root="$(bash .ci/chroot.sh base bookworm)"
pinned="${image##*-}"
released="$(date -u +%Y%m%d -d "$(sed -n 's/^Date: //p' \
  "$root"/var/lib/apt/lists/*_dists_bookworm_Release)")"
[ "$pinned" = "$released" ] || die "the archive's bookworm is of $released but emulator/Dockerfile \
pins $image: name the new date in its FROM line and comment"
tar -C "$root" --exclude='./var/lib/apt/lists/*' -cf - . | pod import -q - "$image" >/dev/null
step "base $image imported"

# The host's CA bundle for pip (this network's TLS proxy): a build-time mount and an ARG.
pod build -q --format docker --network host -f emulator/Dockerfile -t "$tag" \
  -v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/host-ca.crt:ro \
  --build-arg PIP_CERT=/etc/ssl/host-ca.crt . >/dev/null
step "image $tag built"

# Without systemd podman cannot schedule health checks and says so on stderr; a check run on
# demand works. That stderr is shown only if the container does not start.
pod run -d --init --network host --name "$name" "$tag" >/dev/null 2>"$tmp/run.err" \
  || die "podman run failed: $(cat "$tmp/run.err")"
healthy() {
  for _ in $(seq 60); do
    pod healthcheck run "$name" >/dev/null 2>&1 && return 0
    sleep 1
  done
  return 1
}
healthy || die "the container never became healthy; its log: $(pod logs "$name" 2>&1 | tail -20)"
pod exec "$name" blox-slurm emulator status
step "container up and healthy"

pod exec "$name" blox-slurm demo --no-live
step "demo in the container"
pod exec "$name" blox-slurm emulator status >/dev/null \
  || die "the container's emulator is unhealthy after the demo"
pod stop --time 30 "$name" >/dev/null 2>&1
rc="$(pod inspect --format '{{.State.ExitCode}}' "$name")"
[ "$rc" = 0 ] || die "the container exited $rc on SIGTERM; its log: $(pod logs "$name" 2>&1 | tail -20)"
step "container stopped (exit 0)"
