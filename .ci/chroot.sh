#!/usr/bin/env bash
# Newer Slurm for the live suites: Debian trixie (Slurm 24.11) and sid (Slurm 26.05) need
# their own glibc, so they run in debootstrap chroots beside the host's 22.05. A bare root
# (minbase, nothing added) stands in for a fresh machine and is the container image's base.
#
#   .ci/chroot.sh build SUITE           build (or reuse) the chroot, install this checkout
#   .ci/chroot.sh run SUITE CMD [ARG..] run CMD in the chroot, in the checkout's copy
#   .ci/chroot.sh base SUITE            build (or reuse) the bare root; print its path
#   .ci/chroot.sh fresh SUITE CMD [ARG..] run CMD as root in a throwaway copy of the bare
#                                       root, in a copy of this checkout at /root/blox-slurm
#
# A chroot is cached under /var/cache/blox-slurm/chroots/SUITE[-base]-<hash of this recipe>, so
# a changed recipe builds a new one instead of reusing a stale one; the checkout is copied in
# afresh on every build call and the venv is rebuilt only when pyproject.toml changes.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
mirror="http://deb.debian.org/debian"
packages="python3 python3-venv python3-pip slurmctld slurmd slurm-client munge lua5.1 procps iproute2 ca-certificates"

die() { echo "chroot.sh: $*" >&2; exit 1; }

root_for() {  # SUITE [PACKAGES]: where that recipe's root is cached (no PACKAGES: the bare one)
  local recipe
  recipe="$(printf '%s\n%s\n%s\n' "$1" "${2-}" "$mirror" | sha256sum | cut -c1-16)"
  echo "/var/cache/blox-slurm/chroots/$1$([ -n "${2-}" ] || echo -base)-$recipe"
}

bootstrap() {  # SUITE DIR [PACKAGES]: a minbase Debian plus PACKAGES; no daemons started.
  # Its chatter (dpkg inside a chroot without /proc) goes to DIR.log, shown only on failure.
  local suite="$1" dir="$2" partial="$2.partial" extra="${3-}"
  rm -rf "$partial"
  if ! { debootstrap --variant=minbase "$suite" "$partial" "$mirror" \
      && printf '#!/bin/sh\nexit 101\n' >"$partial/usr/sbin/policy-rc.d" \
      && chmod +x "$partial/usr/sbin/policy-rc.d" \
      && echo 'Acquire::Check-Valid-Until "false";' >"$partial/etc/apt/apt.conf.d/99snapshot" \
      && cp /etc/resolv.conf "$partial/etc/resolv.conf" \
      && { [ -z "$extra" ] || chroot "$partial" /usr/bin/env DEBIAN_FRONTEND=noninteractive sh -c \
        "apt-get update -qq && apt-get install -y -qq --no-install-recommends $extra"; }
    } >"$dir.log" 2>&1; then
    tail -n 30 "$dir.log" >&2
    die "building the $suite chroot failed (whole log: $dir.log)"
  fi
  mv "$partial" "$dir"
}

in_chroot() {  # DIR CMD...: a clean environment; the host's CA bundle (PyPI sits behind a
  # TLS proxy here) replaces the chroot's own, whose path the host's variables name.
  local dir="$1"; shift
  chroot "$dir" /usr/bin/env -i HOME=/root LANG=C.UTF-8 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/blox-venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PIP_CERT=/etc/ssl/host-ca.crt SSL_CERT_FILE=/etc/ssl/host-ca.crt \
    REQUESTS_CA_BUNDLE=/etc/ssl/host-ca.crt "$@"
}

copy_checkout() {  # DEST: this checkout's tracked (and new, unignored) files, into DEST
  mkdir -p "$1"
  (cd "$here" && git ls-files -z --cached --others --exclude-standard \
     | tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -C "$1" -xf -
}

install_checkout() {  # DIR: copy the tracked files in; (re)build the venv when deps changed
  local dir="$1" stamp
  rm -rf "$dir/opt/blox-slurm"
  copy_checkout "$dir/opt/blox-slurm"
  cp /etc/ssl/certs/ca-certificates.crt "$dir/etc/ssl/host-ca.crt"
  stamp="$(sha256sum "$here/pyproject.toml" | cut -c1-16)"
  if [ "$(cat "$dir/opt/blox-venv/.deps" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$dir/opt/blox-venv"
    in_chroot "$dir" sh -c "python3 -m venv /opt/blox-venv && /opt/blox-venv/bin/pip install \
      -q -e '/opt/blox-slurm[dev]'"
    echo "$stamp" >"$dir/opt/blox-venv/.deps"
  else
    in_chroot "$dir" /opt/blox-venv/bin/pip install -q --no-deps -e /opt/blox-slurm >/dev/null
  fi
}

ensure_root() {  # SUITE [PACKAGES]: build that root unless cached; its path goes in $root.
  # Holds the root's lock (fd 9) until this script exits: no two runs build or use it at once.
  local suite="$1" dir
  dir="$(root_for "$suite" "${2-}")"
  command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
  mkdir -p "$(dirname "$dir")"
  exec 9>"$dir.lock"
  flock 9
  if [ ! -d "$dir" ]; then
    local t0=$SECONDS
    bootstrap "$suite" "$dir" "${2-}"
    echo "chroot $suite built in $((SECONDS - t0)) s: $dir" >&2
  fi
  root="$dir"
}

build() {
  ensure_root "$1" "$packages"
  install_checkout "$root"
}

enter() {  # DIR CWD CMD...: a private mount namespace, so nothing stays mounted after the run
  local dir="$1" cwd="$2"; shift 2
  unshare --mount --propagation private /usr/bin/env BLOX_CHROOT="$dir" bash -c '
    set -e
    mount -t proc proc "$BLOX_CHROOT/proc"
    mount -t sysfs sysfs "$BLOX_CHROOT/sys"
    mount --rbind /dev "$BLOX_CHROOT/dev"
    mount -t tmpfs tmpfs "$BLOX_CHROOT/tmp"
    exec "$@"
  ' bash "$here/.ci/chroot.sh" in-chroot "$dir" sh -c 'cd "$0" && exec "$@"' "$cwd" "$@"
}

run() {  # SUITE CMD...
  local suite="$1" dir; shift
  dir="$(root_for "$suite" "$packages")"
  [ -d "$dir" ] || die "no $suite chroot: run '.ci/chroot.sh build $suite' first"
  enter "$dir" /opt/blox-slurm "$@"
}

fresh() {  # SUITE CMD...: what a new machine's root would see. The copy (bare root + checkout
  # + the host's CA bundle, which pip needs behind this network's TLS proxy) is removed after,
  # so whatever CMD installs is installed afresh on every call.
  ensure_root "$1"; shift
  copy="$(mktemp -d /var/tmp/blox-fresh.XXXXXX)"  # global: the EXIT trap reads it
  trap 'rm -rf --one-file-system "$copy"' EXIT
  chmod 0755 "$copy"  # the copy's /: other users must traverse it
  cp -a "$root/." "$copy/"
  copy_checkout "$copy/root/blox-slurm"
  mkdir -p "$copy/etc/ssl"  # minbase has no /etc/ssl (no ca-certificates)
  cp /etc/ssl/certs/ca-certificates.crt "$copy/etc/ssl/host-ca.crt"
  enter "$copy" /root/blox-slurm "$@"
}

case "${1:-}" in
  build) [ $# -eq 2 ] || die "usage: build SUITE"; build "$2" ;;
  base) [ $# -eq 2 ] || die "usage: base SUITE"; ensure_root "$2"; echo "$root" ;;
  in-chroot) shift; in_chroot "$@" ;;  # enter's second half, inside its mount namespace
  run) [ $# -ge 3 ] || die "usage: run SUITE CMD [ARG...]"; shift; run "$@" ;;
  fresh) [ $# -ge 3 ] || die "usage: fresh SUITE CMD [ARG...]"; shift; fresh "$@" ;;
  *) die "usage: $0 build SUITE | run SUITE CMD [ARG...] | base SUITE | fresh SUITE CMD [ARG...]" ;;
esac
