#!/usr/bin/env python3
"""Module import rules, checked from the source (cheap: no build).

1. No import circle, in any crate, at any depth. Every crate of the
   workspace (each package's library, binaries and integration tests) is
   read from its root file down through its `mod` declarations (`#[path]`
   and inline `mod x { … }` included). In each module, its child modules
   form a graph: child `a` → child `b` when code in `a` (or below it) names
   something in `b` (or below it). A strongly connected component of more
   than one child is a circle.

   What counts as "names": a path that starts with `crate::`, `self::` or
   `super::` (in code, in `use` trees, and in attribute strings such as
   `#[serde(with = "crate::wire::bpf")]`), and in a `use` tree a path that
   starts with a child module's name. A name brought in by `use` counts only
   where it is used in code, so a re-export (`pub use child::Item`) is
   transparent: whoever names `Item` through it depends on `child`. A glob
   (`use path::*`) counts as a dependency on `path`. Comments and string
   contents (other than those attribute paths) are left out.

   A module's own file is not a node: it declares its children and holds
   what they share (the crate root's types, a folder's common types), so
   children naming it and it naming them is the shape of a module, not a
   circle. `--graph` shows those edges as `<self>`.

2. jail: code that runs inside the jail (pid 1, its init, the command
   process and the steps they run) never imports the supervisor's modules.

Exit 1 with one line per breach.

Usage: python3 .ci/module-imports.py            check
       python3 .ci/module-imports.py --graph    print every module's edges
"""
import pathlib
import re
import sys
import tomllib

# jail: every top-level module is on one side; a new module must be added here.
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

SELF = "<self>"
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
KEYWORDS = {"crate", "self", "super", "Self"}


# ---------------------------------------------------------------- lexing


def lex(text: str):
    """The code with comments removed and every string literal replaced by
    `"N"` (N indexes the returned list of contents); char literals blanked."""
    out, strings = [], []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif m := re.compile(r'b?r(#*)"').match(text, i):
            if i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_"):
                out.append(c)
                i += 1
                continue
            end = '"' + m.group(1)
            j = text.find(end, m.end())
            j = n if j < 0 else j
            strings.append(text[m.end():j])
            out.append(f'"{len(strings) - 1}"')
            i = j + len(end)
        elif c == '"' or (c == "b" and text.startswith('b"', i) and not _word_before(text, i)):
            j = i + (2 if c == "b" else 1)
            start = j
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            strings.append(text[start:j])
            out.append(f'"{len(strings) - 1}"')
            i = j + 1
        elif c == "'":
            # A char literal ('x', '\n', '\u{7f}'), or a lifetime ('a).
            m = re.compile(r"'(\\(u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'])'").match(text, i)
            if m:
                out.append("' '")
                i = m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out), strings


def _word_before(text: str, i: int) -> bool:
    return i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")


def matching_brace(code: str, open_at: int) -> int:
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code)


# ---------------------------------------------------------------- modules


class Module:
    def __init__(self, path: tuple, file: pathlib.Path, child_dir: pathlib.Path):
        self.path = path  # segments from the crate root
        self.file = file
        self.child_dir = child_dir  # where `mod x;` files are looked up
        self.children = {}  # name -> Module
        self.code = ""  # own code, child inline modules cut out
        self.strings = []
        self.uses = []  # (segments, alias, glob)


MOD_DECL = re.compile(
    rf'((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+({IDENT})\s*([;{{])'
)
PATH_ATTR = re.compile(r'#\[\s*path\s*=\s*"(\d+)"\s*\]')


def load(file: pathlib.Path, path: tuple, child_dir: pathlib.Path, errors: list) -> Module:
    code, strings = lex(file.read_text())
    return parse(code, strings, file, path, child_dir, errors)


def parse(code, strings, file, path, child_dir, errors) -> Module:
    m = Module(path, file, child_dir)
    m.strings = strings
    own, pos = [], 0
    while match := MOD_DECL.search(code, pos):
        attrs, name, kind = match.group(1), match.group(2), match.group(3)
        attr = PATH_ATTR.search(attrs)
        if kind == "{":
            close = matching_brace(code, match.end() - 1)
            sub_dir = child_dir / name
            inner = code[match.end():close]
            m.children[name] = parse(inner, strings, file, path + (name,), sub_dir, errors)
            own.append(code[pos:match.start()])
            pos = close + 1
            continue
        if attr:
            target = file.parent / strings[int(attr.group(1))]
            sub_dir = target.parent
        else:
            target = child_dir / f"{name}.rs"
            if not target.exists():
                target = child_dir / name / "mod.rs"
            sub_dir = target.parent if target.name == "mod.rs" else target.parent / name
        if not target.exists():
            errors.append(f"module-imports: {file}: mod {name}: no file {target}")
        else:
            m.children[name] = load(target, path + (name,), sub_dir, errors)
        own.append(code[pos:match.start()])
        pos = match.end()
    own.append(code[pos:])
    m.code = "".join(own)
    return m


def is_mod_rs(file: pathlib.Path) -> bool:
    return file.name in ("mod.rs", "lib.rs", "main.rs")


def crate_root(file: pathlib.Path, errors: list) -> Module:
    return load(file, (), file.parent, errors)


# ---------------------------------------------------------------- use trees

USE = re.compile(r"\buse\s+")


def use_statements(code: str):
    """(start, end, tree text) of every `use …;` in the code."""
    for match in USE.finditer(code):
        if _word_before(code, match.start()):
            continue
        depth, j = 0, match.end()
        while j < len(code):
            if code[j] == "{":
                depth += 1
            elif code[j] == "}":
                depth -= 1
            elif code[j] == ";" and depth == 0:
                break
            j += 1
        yield match.start(), j + 1, code[match.end():j]


def expand(tree: str, prefix=()):
    """The leaves of a use tree: (segments, alias, glob)."""
    tree = re.sub(r"\s+", "", tree).removeprefix("::")
    out = []
    items, depth, cur = [], 0, ""
    for ch in tree:
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    items.append(cur)
    for item in filter(None, items):
        brace = item.find("{")
        if brace >= 0:
            head = [s for s in item[:brace].split("::") if s]
            out.extend(expand(item[brace + 1:item.rfind("}")], prefix + tuple(head)))
            continue
        alias = None
        if "as" in item and re.search(r"[A-Za-z0-9_]as[A-Za-z_]", item):
            item, alias = re.split(r"(?<=[A-Za-z0-9_])as(?=[A-Za-z_])", item, maxsplit=1)
        segs = prefix + tuple(s for s in item.split("::") if s)
        if segs and segs[-1] == "*":
            out.append((segs[:-1], None, True))
        elif segs and segs[-1] == "self":
            segs = segs[:-1]
            out.append((segs, alias or (segs[-1] if segs else None), False))
        elif segs:
            out.append((segs, alias or segs[-1], False))
    return out


# ---------------------------------------------------------------- resolution


class Crate:
    def __init__(self, name: str, root: Module):
        self.name = name
        self.root = root
        self.modules = {}
        self._index(root)
        for m in self.modules.values():
            m.use_map = {}
            for _, _, tree in use_statements(m.code):
                for segs, alias, glob in expand(tree):
                    m.uses.append((segs, alias, glob))
                    if alias and not glob and alias != "_":
                        m.use_map[alias] = segs

    def _index(self, m: Module):
        self.modules[m.path] = m
        for c in m.children.values():
            self._index(c)

    def absolute(self, here: tuple, segs: tuple, in_use: bool):
        """`segs` written in module `here`, as segments from the crate root
        (None: another crate, or a local name of no module)."""
        if not segs:
            return None
        head = segs[0]
        if head == "crate":
            return segs[1:]
        if head == "self":
            return here + segs[1:]
        if head == "super":
            base = here
            rest = segs
            while rest and rest[0] == "super":
                base, rest = base[:-1], rest[1:]
            return base + rest
        m = self.modules.get(here)
        if m is None:
            return None
        if head in m.children:
            return here + segs
        if head in m.use_map and m.use_map[head] != segs:
            target = self.absolute(here, m.use_map[head], True)
            return None if target is None else target + segs[1:]
        return None

    def target(self, segs: tuple):
        """The module `segs` (from the root) lands in, following `use`
        aliases: (module path, whether it names an item of that module)."""
        for _ in range(16):
            cur = ()
            for i, seg in enumerate(segs):
                m = self.modules[cur]
                if seg in m.children:
                    cur = cur + (seg,)
                    continue
                if seg in m.use_map:
                    again = self.absolute(cur, m.use_map[seg], True)
                    if again is not None and again != segs[: i + 1]:
                        segs = again + segs[i + 1:]
                        break
                return cur, True
            else:
                return cur, False
        return cur, True


CODE_PATH = re.compile(rf"(?<![A-Za-z0-9_:])((?:crate|self|super)(?:::(?:super|{IDENT}))+)")
IDENT_RE = re.compile(IDENT)


def dependencies(crate: Crate, m: Module):
    """Every (module path, names an item) the module's own code depends on."""
    found = []
    code = m.code
    spans = list(use_statements(code))
    plain = code
    for start, end, _ in reversed(spans):
        plain = plain[:start] + " " * (end - start) + plain[end:]
    for match in CODE_PATH.finditer(plain):
        segs = tuple(match.group(1).split("::"))
        found.append(crate.absolute(m.path, segs, False))
    for s in m.strings:
        if re.fullmatch(rf"(crate|self|super)(::{IDENT})+", s):
            found.append(crate.absolute(m.path, tuple(s.split("::")), False))
    # Paths in code that start with a child module's name or an imported name.
    used = set(IDENT_RE.findall(plain))
    for name in m.children:
        if re.search(rf"(?<![A-Za-z0-9_:]){name}::", plain):
            found.append(m.path + (name,))
    for segs, alias, glob in m.uses:
        if glob:
            found.append(crate.absolute(m.path, segs, True))
        elif alias in used:
            found.append(crate.absolute(m.path, segs, True))
    out = []
    for segs in found:
        if segs is None or not segs:
            continue
        out.append(crate.target(segs))
    return out


def graphs(crate: Crate) -> dict:
    """Module path -> {node: set(nodes)} over its children and SELF."""
    g = {p: {} for p, m in crate.modules.items() if m.children}
    for src, m in crate.modules.items():
        for tgt, item in dependencies(crate, m):
            common = 0
            while common < min(len(src), len(tgt)) and src[common] == tgt[common]:
                common += 1
            parent = src[:common]
            if parent not in g:
                continue
            a = src[common] if len(src) > common else SELF
            b = tgt[common] if len(tgt) > common else (SELF if item else None)
            if b is None or a == b:
                continue
            g[parent].setdefault(a, set()).add(b)
            g[parent].setdefault(b, set())
    return g


def cycles(edges: dict) -> list:
    """Strongly connected components with more than one node (Tarjan)."""
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


# ---------------------------------------------------------------- crates


def roots(package: pathlib.Path) -> list:
    """(crate name, root file) of a package: its library, binaries, tests."""
    manifest = tomllib.loads((package / "Cargo.toml").read_text())
    name = manifest["package"]["name"]
    found = {}
    lib = manifest.get("lib", {}).get("path", "src/lib.rs")
    if (package / lib).exists():
        found[f"{name} (lib)"] = package / lib
    bins = [(b["name"], package / b["path"]) for b in manifest.get("bin", []) if "path" in b]
    if (package / "src/main.rs").exists() and not any(p == package / "src/main.rs" for _, p in bins):
        bins.append((name, package / "src/main.rs"))
    for auto in sorted((package / "src/bin").glob("*.rs")) + sorted((package / "src/bin").glob("*/main.rs")):
        if not any(p == auto for _, p in bins):
            bins.append((auto.stem if auto.name != "main.rs" else auto.parent.name, auto))
    for b, p in bins:
        found[f"{name} (bin {b})"] = p
    for t in sorted((package / "tests").glob("*.rs")) + sorted((package / "tests").glob("*/main.rs")):
        found[f"{name} (test {t.stem if t.name != 'main.rs' else t.parent.name})"] = t
    return sorted(found.items())


def check_sides(crate: Crate, g: dict) -> list:
    bad = []
    edges = g.get((), {})
    top = set(crate.root.children)
    known = JAIL_SIDE | SUPERVISOR_SIDE | SHARED
    for m in sorted(top - known):
        bad.append(f"module-imports: jail/src: {m}: not classified (add it to a side in .ci/module-imports.py)")
    for m in sorted(known - top):
        bad.append(f"module-imports: jail/src: {m}: classified but not found")
    for m in sorted(JAIL_SIDE | SHARED):
        for dep in sorted(edges.get(m, set()) & SUPERVISOR_SIDE):
            bad.append(f"module-imports: jail/src: {m} runs in the jail but imports supervisor module {dep}")
    return bad


def main() -> int:
    workspace = tomllib.loads(pathlib.Path("Cargo.toml").read_text())["workspace"]
    bad, seen = [], set()
    for member in workspace["members"]:
        for name, file in roots(pathlib.Path(member)):
            errors = []
            crate = Crate(name, crate_root(file, errors))
            bad.extend(errors)
            g = graphs(crate)
            if name == "oajail-jail (lib)":
                bad.extend(check_sides(crate, g))
            for path, edges in sorted(g.items()):
                where = "::".join(("crate",) + path)
                key = (crate.modules[path].file, path)
                if "--graph" in sys.argv and key not in seen:
                    for node in sorted(edges):
                        print(f"{name}: {where}: {node} -> {', '.join(sorted(edges[node]))}")
                siblings = {a: bs - {SELF} for a, bs in edges.items() if a != SELF}
                for comp in cycles(siblings):
                    if key in seen:
                        continue
                    bad.append(f"module-imports: {name}: {where} ({crate.modules[path].file}): import circle among {', '.join(comp)}")
                seen.add(key)
    for line in bad:
        print(line, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
