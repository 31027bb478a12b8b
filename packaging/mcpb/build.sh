#!/usr/bin/env bash
# Builds the one-click Claude Desktop bundle of openagenda-mcp:
# openagenda.mcpb, a zip of manifest.json and server/ holding openagenda-mcp,
# its worker and oajail beside them (`--jail` finds oajail there), and the
# registry's server.json for that bundle (fileSha256 filled in).
#
# usage: packaging/mcpb/build.sh [--bin-dir DIR] [--out DIR] [--update-server-json]
#   --bin-dir  where the built binaries are (default: target/release; build
#              them with `cargo build --release -p oajail -p openagenda-mcp`)
#   --out      where openagenda.mcpb and server.json go (default: target/mcpb)
#   --update-server-json  also write the bundle's sha256 into ./server.json
#              (a release: the file the registry gets)
#
# The zip is made by python3's zipfile (no mcpb CLI needed, no network):
# entries in a fixed order with a fixed date, so the same binaries give the
# same bundle and the same sha256. Binaries are stripped when `strip` exists.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin_dir=target/release
out=target/mcpb
update=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin-dir) bin_dir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --update-server-json) update=1; shift ;;
    *) echo "build.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
for b in openagenda-mcp openagenda-mcp-worker oajail; do
  [ -x "$bin_dir/$b" ] || { echo "build.sh: $bin_dir/$b is missing (cargo build --release -p oajail -p openagenda-mcp)" >&2; exit 1; }
done
mkdir -p "$out"
stage=$(mktemp -d "$out/.stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/server"
cp packaging/mcpb/manifest.json "$stage/manifest.json"
for b in openagenda-mcp openagenda-mcp-worker oajail; do
  install -m 0755 "$bin_dir/$b" "$stage/server/$b"
  if command -v strip >/dev/null 2>&1; then strip --strip-unneeded "$stage/server/$b"; fi
done
bundle="$out/openagenda.mcpb"
python3 - "$stage" "$bundle" <<'PY'
import os, sys, zipfile
stage, out = sys.argv[1], sys.argv[2]
paths = []
for root, _, files in os.walk(stage):
    paths += [os.path.join(root, f) for f in files]
with zipfile.ZipFile(out + ".part", "w") as z:
    for p in sorted(paths, key=lambda p: os.path.relpath(p, stage)):
        info = zipfile.ZipInfo(os.path.relpath(p, stage), date_time=(2026, 1, 1, 0, 0, 0))
        mode = 0o755 if os.access(p, os.X_OK) else 0o644
        info.external_attr = (0o100000 | mode) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        with open(p, "rb") as f:
            z.writestr(info, f.read())
os.replace(out + ".part", out)
PY
sha=$(sha256sum "$bundle" | cut -d' ' -f1)
python3 - server.json "$out/server.json" "$sha" <<'PY'
import json, sys
src, dst, sha = sys.argv[1:4]
doc = json.load(open(src))
for p in doc.get("packages", []):
    if p.get("registryType") == "mcpb":
        p["fileSha256"] = sha
with open(dst, "w") as f:
    json.dump(doc, f, indent=2)
    f.write("\n")
PY
if [ -n "$update" ]; then cp "$out/server.json" server.json; fi
echo "$bundle $(stat -c %s "$bundle") bytes sha256 $sha"
