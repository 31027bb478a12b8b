#!/bin/sh
# Differential check of oajail's settings validation against srt 0.0.83's schema.
# Needs node, npm (registry access) and python3; see README.md.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
oajail=${OAJAIL:-$repo/target/debug/oajail}
for tool in node npm python3; do
    command -v "$tool" >/dev/null || { echo "run.sh: $tool is required" >&2; exit 2; }
done
[ -x "$oajail" ] || { echo "run.sh: $oajail not found (cargo build first)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm init -y >/dev/null && npm install --silent @anthropic-ai/sandbox-runtime@0.0.83 >/dev/null)
cp "$here/check.mjs" "$work/"
mkdir "$work/cases" "$work/out"
python3 "$here/gen.py" "$work/cases"
verdicts() { # oajail's verdict per file, in check.mjs's format
    for f in "$@"; do
        if "$oajail" policy -s "$f" check >/dev/null 2>&1; then echo "ok   $f"; else echo "FAIL $f"; fi
    done
}
verdicts "$work"/cases/*.json | cut -c1-4 >"$work/ours"
(cd "$work" && node check.mjs cases/*.json) | cut -c1-4 >"$work/srt"
ls "$work"/cases/*.json >"$work/names"
differences=$(paste "$work/names" "$work/ours" "$work/srt" | awk '$2 != $3' | tee /dev/stderr | wc -l)
echo "$(wc -l <"$work/names") cases, $differences differences"
for f in "$repo"/examples/policies/*.json; do
    "$oajail" policy -s "$f" print --format srt >"$work/out/$(basename "$f")" 2>/dev/null
done
(cd "$work" && node check.mjs out/*.json) | tee "$work/outputs"
! grep -q '^FAIL' "$work/outputs" && [ "$differences" -eq 0 ]
