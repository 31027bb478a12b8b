#!/usr/bin/env python3
"""The jail crate's import rule, checked from the source (cheap: no build).

Code that runs inside the jail (pid 1, its init, the command process and the
steps they run) must never import the supervisor's modules, and the crate's
top-level modules must form no import cycle. A module's imports are the
`crate::NAME` paths in its code (comments and doc links left out; a grouped
`use crate::{a, b}` counts each name). Exit 1 with one line per breach.

Usage: python3 .ci/jail-imports.py [jail/src]   (`--graph` prints the edges)
"""
import pathlib
import re
import sys

# Every top-level module is on one side; a new module must be added here.
# Runs in the jail, after the clone (pid 1, its init, the command process).
JAIL_SIDE = {"pid1", "init", "command", "caps", "net", "ns", "rlimit", "mount"}
# Runs only in the supervisor (the `oajail` process) or before any jail.
SUPERVISOR_SIDE = {"launcher", "cgroup", "negotiate", "doctor", "hostfs"}
# Used by both: the channel and what crosses it, the layers whose plans the
# supervisor builds and pid 1 applies, and the syscall wrappers.
SHARED = {
    "error", "exit_code", "fdpass", "guard", "landlock", "layers", "mountinfo",
    "pty", "report", "seccomp", "signals", "spec", "sync", "sys", "terminal",
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
    edges = {}
    for path in sorted(src.rglob("*.rs")):
        module = module_of(src, path)
        if module == "lib":
            continue
        found = imports(path.read_text()) - {module, "lib"}
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


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--graph"]
    src = pathlib.Path(args[0] if args else "jail/src")
    edges = graph(src)
    if "--graph" in sys.argv:
        for m in sorted(edges):
            print(f"{m} -> {', '.join(sorted(edges[m]))}")
    bad = []
    known = JAIL_SIDE | SUPERVISOR_SIDE | SHARED
    for m in sorted(set(edges) - known):
        bad.append(f"jail-imports: {m}: not classified (add it to a side in this script)")
    for m in sorted(known - set(edges)):
        bad.append(f"jail-imports: {m}: classified but not found in {src}")
    for m in sorted(JAIL_SIDE | SHARED):
        for dep in sorted(edges.get(m, set()) & SUPERVISOR_SIDE):
            bad.append(f"jail-imports: {m} runs in the jail but imports supervisor module {dep}")
    for comp in cycles(edges):
        bad.append(f"jail-imports: import cycle among {', '.join(comp)}")
    for line in bad:
        print(line, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
