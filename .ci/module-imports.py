#!/usr/bin/env python3
"""Module import rules of the jail and proxy crates, checked from the source
(cheap: no build).

jail: code that runs inside the jail (pid 1, its init, the command process
and the steps they run) must never import the supervisor's modules. jail and
proxy: the crate's top-level modules form no import cycle. A module's
imports are the `crate::NAME` paths in its code naming another top-level
module (comments and doc links left out; a grouped `use crate::{a, b}`
counts each name). Exit 1 with one line per breach.

Usage: python3 .ci/module-imports.py   (`--graph` prints the edges)
"""
import pathlib
import re
import sys

# Every top-level module is on one side; a new module must be added here.
# Runs in the jail, after the clone (pid 1, its init, the command process).
JAIL_SIDE = {"pid1", "init", "command", "caps", "net", "ns", "rlimit", "mount"}
# Runs only in the supervisor (the `oajail` process) or before any jail.
SUPERVISOR_SIDE = {"launcher", "cgroup", "negotiate", "doctor", "envprobe", "hostfs", "tmpdir"}
# Used by both: the channel and what crosses it, the layers whose plans the
# supervisor builds and pid 1 applies, and the syscall wrappers.
SHARED = {
    "connect", "cpus", "error", "exit_code", "fdpass", "guard", "landlock", "layers", "mountinfo",
    "pty", "report", "seccomp", "signals", "spec", "sync", "sys", "terminal", "wire",
}

COMMENT = re.compile(r"//.*$", re.M)
GROUP = re.compile(r"\bcrate::\{([^}]*)\}")
SINGLE = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")


def module_of(src: pathlib.Path, path: pathlib.Path) -> str:
    rel = path.relative_to(src).parts
    return rel[0].removesuffix(".rs")


def imports(text: str) -> set:
    code = COMMENT.sub("", text)
    names = set(SINGLE.findall(code))
    for group in GROUP.findall(code):
        for item in group.split(","):
            head = item.strip().split("::")[0].strip()
            if head and head != "self":
                names.add(head)
    return names


def graph(src: pathlib.Path) -> dict:
    """Top-level module -> the other top-level modules it names."""
    files = sorted(src.rglob("*.rs"))
    modules = {module_of(src, p) for p in files} - {"lib", "main", "bin"}
    edges = {}
    for path in files:
        module = module_of(src, path)
        if module not in modules:
            continue
        found = (imports(path.read_text()) & modules) - {module}
        edges.setdefault(module, set()).update(found)
    return edges


def cycles(edges: dict) -> list:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def check_sides(src: pathlib.Path, edges: dict) -> list:
    bad = []
    known = JAIL_SIDE | SUPERVISOR_SIDE | SHARED
    for m in sorted(set(edges) - known):
        bad.append(f"module-imports: jail/src: {m}: not classified (add it to a side in .ci/module-imports.py)")
    for m in sorted(known - set(edges)):
        bad.append(f"module-imports: jail/src: {m}: classified but not found in {src}")
    for m in sorted(JAIL_SIDE | SHARED):
        for dep in sorted(edges.get(m, set()) & SUPERVISOR_SIDE):
            bad.append(f"module-imports: jail/src: {m} runs in the jail but imports supervisor module {dep}")
    return bad


def main() -> int:
    bad = []
    for src in [pathlib.Path("jail/src"), pathlib.Path("proxy/src")]:
        edges = graph(src)
        if "--graph" in sys.argv:
            for m in sorted(edges):
                print(f"{src}: {m} -> {', '.join(sorted(edges[m]))}")
        if src.parts[0] == "jail":
            bad.extend(check_sides(src, edges))
        for comp in cycles(edges):
            bad.append(f"module-imports: {src}: import cycle among {', '.join(comp)}")
    for line in bad:
        print(line, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
