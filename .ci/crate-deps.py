#!/usr/bin/env python3
"""The workspace's dependency rule: one crate per trust boundary, edges one way.

Checked from `cargo metadata` (no build): each crate's normal and build
dependencies may name only the workspace crates listed here (dev-dependencies,
test-only code, may name any), and the pure crates forbid `unsafe`.
Exit 1 with one line per breach.

    policy            (no workspace crate: no syscalls)
    bpf      → policy (hand-written seccomp programs, plain data)
    jail     → policy, bpf
    proxy    → policy
    mcp      → policy, bpf
    audit    → policy (oajail audit's catalogue, probe, lab and judging)
    security → audit, policy (the security suite: tests only, not shipped)
    oajail   → anything (the binary: thin glue)
"""
import json
import pathlib
import subprocess
import sys

ALLOWED = {
    "oajail-policy": set(),
    "oajail-bpf": {"oajail-policy"},
    "oajail-jail": {"oajail-policy", "oajail-bpf"},
    "oajail-proxy": {"oajail-policy"},
    "openagenda-mcp": {"oajail-policy", "oajail-bpf"},
    "oajail-audit": {"oajail-policy"},
    "oajail-security-tests": {"oajail-audit", "oajail-policy"},
    "oajail": None,
}
# Crates whose lib.rs must say `#![forbid(unsafe_code)]`.
FORBID_UNSAFE = {"oajail-bpf"}


def main() -> int:
    out = subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    packages = json.loads(out)["packages"]
    names = {p["name"] for p in packages}
    bad = []
    for p in packages:
        name = p["name"]
        if name not in ALLOWED:
            bad.append(f"crate-deps: {name}: not in the rule (add it to .ci/crate-deps.py)")
            continue
        # Test-only code may use any crate (dev-dependencies are not shipped).
        deps = {d["name"] for d in p["dependencies"] if d["name"] in names and d["kind"] != "dev"}
        allowed = ALLOWED[name]
        if allowed is not None:
            for dep in sorted(deps - allowed):
                bad.append(f"crate-deps: {name} must not depend on {dep}")
        if name in FORBID_UNSAFE:
            lib = pathlib.Path(p["manifest_path"]).parent / "src" / "lib.rs"
            if "#![forbid(unsafe_code)]" not in lib.read_text():
                bad.append(f"crate-deps: {name}: {lib} lacks #![forbid(unsafe_code)]")
    for line in bad:
        print(line, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
