#!/usr/bin/env bash
# Start-up ratio to bubblewrap on another kernel, in a VM (docs/benchmarks.md,
# "Jail start-up on Debian 12's 6.1, in a VM"; issue 11).
#
#   bash bench/jail-vm.sh [ROUNDS RUNS [OAJAIL_BIN...]]   # default: 3 5 target/release/oajail
#
# Boots the newest /boot/vmlinuz-6.1.0-*-amd64 (Debian 12's kernel, Landlock
# ABI 2; OAJAIL_VM_KERNEL names another image) with virtme-ng and the host's
# root file system, and runs bench/jail-ab.py inside: the same interleaved
# hyperfine rounds against `bwrap --unshare-all ...` as on the host, from a
# scratch project and HOME on the guest's own /var/tmp (a fresh tmpfs). The
# VM runs under TCG (this machine's /dev/kvm aborts qemu; see
# .ci/kernel-matrix), so every absolute time is tens of times the host's;
# the ratio to bwrap measured in the same guest is the number to compare.
# The binaries are staged under target/ (the guest sees the host's root file
# system but not the host's /var/tmp or /tmp), then copied, with bwrap, to
# the guest's tmpfs so that no side pays for reading through the VM's
# shared file system.
# Needs: virtme-ng (.ci/kernel-matrix installs it in /opt/oajail-ci/vng),
# qemu-system-x86, hyperfine, bwrap, python3.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = --guest ]; then
  shift
  rounds=$1 runs=$2
  shift 2
  ab=$PWD/bench/jail-ab.py
  work=$(mktemp -d /var/tmp/oajail-vm-bench.XXXXXX)
  mkdir -p "$work/home" "$work/proj/src" "$work/bin"
  echo 'int main(void){return 0;}' >"$work/proj/src/main.c"
  # Every binary runs from the guest's tmpfs: read through the VM's shared
  # host file system, a 30 MB binary's page faults cost seconds under TCG
  # (`oajail --version` alone took 5.7 s), which says nothing about start-up.
  # bwrap is copied too, so both sides load from the same place.
  cp /usr/bin/bwrap "$work/bin/bwrap"
  guest_bins=()
  for b in "$@"; do
    cp "$b" "$work/bin/$(basename "$b")"
    guest_bins+=("$work/bin/$(basename "$b")")
  done
  cd "$work/proj"
  echo "guest: kernel $(uname -r), $(nproc) cpu, load $(cut -d' ' -f1-3 /proc/loadavg)"
  HOME="$work/home" "${guest_bins[0]}" -d -- /bin/true 2>&1 | grep -E 'layer landlock|enforced' || true
  HOME="$work/home" PATH="$work/bin:$PATH" env -u OAJAIL_SETTINGS \
    python3 "$ab" "$rounds" "$runs" "${guest_bins[@]}"
  exit 0
fi

rounds=${1:-3}
runs=${2:-5}
shift $(($# < 2 ? $# : 2))
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=(target/release/oajail)
kernel=${OAJAIL_VM_KERNEL:-$(ls /boot/vmlinuz-6.1.0-*-amd64 | sort -V | tail -1)}
# vng runs virtme-run from its own PATH entry.
export PATH="/opt/oajail-ci/vng/bin:$PATH"
for tool in vng hyperfine bwrap python3; do
  command -v "$tool" >/dev/null || { echo "bench: $tool not installed" >&2; exit 1; }
done
mkdir -p target
stage=$(mktemp -d "$PWD/target/jail-vm.XXXXXX")
trap 'rm -rf "$stage"' EXIT
guest_bins=()
for i in "${!bins[@]}"; do
  cp "${bins[$i]}" "$stage/oajail-$i"
  guest_bins+=("$stage/oajail-$i")
  echo "oajail-$i = ${bins[$i]}"
done
echo "host: $(nproc) cpu, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg); vm kernel $kernel (TCG)"
vng --disable-kvm --memory 2G --cpus 2 --run "$kernel" --user root \
  --exec "bash $PWD/bench/jail-vm.sh --guest $rounds $runs ${guest_bins[*]}"
