#!/usr/bin/env bash
# Per guarded call: the guard against the floor of its design, in µs
# (docs/benchmarks.md, "Per guarded call").
#
#   sudo bash bench/guard-floor.sh [ROUNDS]    # default 7; root: mounts a tmpfs
#
# Two workloads on a tmpfs: tar x of 10,000 files in 600 directories, and a
# local git clone of 20,000 files in 1,000 directories. Each round runs,
# alternating:
#   plain         the command, no jail, no filter
#   floor         the command under bench/notify-floor.c: exactly the calls
#                 the guard's filter sends to pid 1 are notified and answered
#                 CONTINUE at once (synchronous wake-up on, as in the guard)
#   perform       the same, but the parent makes each open itself and hands
#                 the file over with ADDFD, as any supervisor must that never
#                 answers CONTINUE for a path (no decision, no cache)
#   noguard       oajail (release test-layers build), OAJAIL_TEST_DISABLE=guard
#   guard         the same jail with its guard
# N = the notified calls (counted by the floor stub; the guard's filter
# notifies the same). Per call: floor = (floor - plain) / N, perform =
# (perform - plain) / N, guard = (guard - noguard) / N, in wall time and in
# CPU time (perf stat task-clock of every process of the run, when perf is
# installed; it moves less on a shared machine).
#
#   sudo bash bench/guard-floor.sh --vm [ROUNDS]
#
# runs the same inside Debian 12's 6.1 kernel (the newest
# /boot/vmlinuz-6.1.0-*-amd64, or OAJAIL_VM_KERNEL) with virtme-ng under
# TCG, as bench/jail-vm.sh does, with 2,000 files per workload (every
# system call is emulated there: absolute times are tens of times the
# host's; the per-call figures side by side are the point). That kernel has
# no synchronous wake-up (6.6), for the guard or the floor.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench/guard-floor.sh: run as root (it mounts a tmpfs)" >&2; exit 1; }
if [ "${1:-}" = --vm ]; then
  rounds=${2:-3}
  cargo build -q --release --locked -p oajail --features test-layers --target-dir target/test-layers
  kernel=${OAJAIL_VM_KERNEL:-$(ls /boot/vmlinuz-6.1.0-*-amd64 | sort -V | tail -1)}
  export PATH="/opt/oajail-ci/vng/bin:$PATH"
  stage=$(mktemp -d "$PWD/target/guard-vm.XXXXXX")
  trap 'rm -rf "$stage"' EXIT
  cp target/test-layers/release/oajail "$stage/oajail"
  echo "host: $(nproc) cpu, load $(cut -d' ' -f1-3 /proc/loadavg); vm kernel $kernel (TCG)"
  exec vng --disable-kvm --memory 3G --cpus 2 --run "$kernel" --user root \
    --exec "OAJAIL_BIN=$stage/oajail TAR_FILES=2000 REPO_FILES=2000 bash $PWD/bench/guard-floor.sh $rounds"
fi
rounds=${1:-7}
tar_files=${TAR_FILES:-10000}
repo_files=${REPO_FILES:-20000}
work=$(mktemp -d /var/tmp/oajail-floor.XXXXXX)
mount -t tmpfs -o size=4g none "$work"
trap 'cd /; umount -l "$work"; rmdir "$work"' EXIT
if [ -n "${OAJAIL_BIN:-}" ]; then
  # In the VM: run the binary from the tmpfs, not through the shared
  # file system (its page faults would cost seconds under TCG).
  cp "$OAJAIL_BIN" "$work/oajail"
else
  cargo build -q --release --locked -p oajail --features test-layers --target-dir target/test-layers
  cp target/test-layers/release/oajail "$work/oajail"
fi
oajail=$work/oajail
gcc -O2 -o "$work/floor" bench/notify-floor.c
python3 - "$work/src/tar/pkg" "$work/src/repo" "$tar_files" "$repo_files" <<'PY'
import os, random, sys
random.seed(1)
tar_files, repo_files = int(sys.argv[3]), int(sys.argv[4])
for d in range(600):
    os.makedirs(f"{sys.argv[1]}/d{d}", exist_ok=True)
for i in range(tar_files):
    with open(f"{sys.argv[1]}/d{i % 600}/f{i}.js", "wb") as f:
        f.write(b"x" * random.randint(100, 8000))
for i in range(repo_files):
    d = f"{sys.argv[2]}/pkg{i % 40}/sub{(i // 40) % 25}"
    os.makedirs(d, exist_ok=True)
    with open(f"{d}/f{i}.txt", "w") as f:
        f.write(("line %d\n" % i) * random.randint(2, 60))
PY
tar cf "$work/files.tar" -C "$work/src/tar" pkg && rm -rf "$work/src/tar"
(cd "$work/src/repo" && git init -q -b main && git add -A &&
  git -c user.email=a@b.c -c user.name=n -c gc.auto=0 commit -qm init && git repack -adq && git prune)
mkdir -p "$work/home" "$work/ws"
echo '{"network": {"allowedDomains": [], "deniedDomains": []},
 "filesystem": {"denyRead": [], "allowWrite": ["."], "denyWrite": [], "allowGitConfig": true}}' >"$work/policy.json"
export HOME=$work/home
have_perf=0
perf stat -e task-clock true >/dev/null 2>&1 && have_perf=1

# run VARIANT CMD...: prints "wall_ms cpu_ms" (cpu "-" without perf).
run() {
  local variant=$1; shift
  local pre=()
  case $variant in
    plain) ;;
    floor) pre=(env SYNC=1 "$work/floor") ;;
    perform) pre=(env SYNC=1 PERFORM=1 "$work/floor") ;;
    noguard) pre=(env OAJAIL_TEST_DISABLE=guard "$oajail" -s "$work/policy.json" --) ;;
    guard) pre=("$oajail" -s "$work/policy.json" --) ;;
  esac
  local t0 t1 cpu=-
  t0=$(date +%s%N)
  if [ "$have_perf" = 1 ]; then
    perf stat -x, -o "$work/perf.out" -e task-clock -- "${pre[@]}" "$@" >/dev/null 2>"$work/err" ||
      { echo "bench: $variant failed: $*: $(tail -2 "$work/err")" >&2; exit 1; }
    cpu=$(awk -F, '/task-clock/ {printf "%.1f", $1}' "$work/perf.out")
  else
    "${pre[@]}" "$@" >/dev/null 2>"$work/err" ||
      { echo "bench: $variant failed: $*: $(tail -2 "$work/err")" >&2; exit 1; }
  fi
  t1=$(date +%s%N)
  if [ "$variant" = floor ]; then grep -o 'notified calls: [0-9]*' "$work/err" | cut -d' ' -f3 >"$work/calls"; fi
  echo "$variant $(( (t1 - t0) / 1000 )) $cpu"
}

workload() {
  local name=$1 setup=$2; shift 2
  : >"$work/rounds"
  for r in $(seq "$rounds"); do
    local order=(plain floor perform noguard guard)
    [ $((r % 2)) = 0 ] && order=(guard noguard perform floor plain)
    for v in "${order[@]}"; do
      (cd "$work/ws" && eval "$setup" && run "$v" "$@") >>"$work/rounds"
    done
  done
  python3 - "$name" "$work/rounds" "$(cat "$work/calls")" <<'PY'
import statistics, sys
name, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [l.split() for l in open(path) if l.strip()]
med = statistics.median
def per_call(col, a, b):
    x = [float(r[col]) for r in rows if r[0] == a]
    y = [float(r[col]) for r in rows if r[0] == b]
    if "-" in (r[col] for r in rows):
        return None
    scale = 1 if col == 1 else 1000  # wall in us, cpu in ms
    return (med(y) - med(x)) * scale / n
print(f"{name}: {n} notified calls, {len(rows) // 5} rounds")
for col, what in ((1, "wall"), (2, "cpu")):
    f, p, g = (per_call(col, "plain", "floor"), per_call(col, "plain", "perform"),
               per_call(col, "noguard", "guard"))
    if f is None:
        continue
    meds = {v: med(float(r[col]) for r in rows if r[0] == v) for v in
            ("plain", "floor", "perform", "noguard", "guard")}
    shown = ", ".join(f"{v} {m / (1000 if col == 1 else 1):.0f}" for v, m in meds.items())
    print(f"  {what} medians (ms): {shown}")
    print(f"  {what} per call (us): floor {f:.1f}, perform {p:.1f}, guard {g:.1f}; "
          f"guard above the floor {g - f:.1f} ({(g - f) / f * 100:.0f}% of it), "
          f"above perform {g - p:.1f}")
PY
}

echo "machine: $(nproc) cpu, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r)"
echo "commit: $(git rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
workload "tar x of $tar_files files" "rm -rf pkg" tar xf "$work/files.tar"
workload "git clone of $repo_files files" "rm -rf c" git clone -q "$work/src/repo" c
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
