//! Configuration that tools look up in ancestor directories, and the rule
//! that keeps it from being planted above a protected directory.
//!
//! A `denyWrite` directory inside a writable root (`allowWrite ["~/src"]`,
//! `denyWrite ["~/src/safe"]`) keeps its own files, but cargo, npm, rustup,
//! go, MSBuild, direnv, mise and others also read configuration from every
//! directory above the one they run in: `~/src/.cargo/config.toml` with a
//! `rustc-wrapper` runs on the next build of `~/src/safe`. So, for each such
//! directory, the entries of [`ABOVE`] may not be made, written, moved or
//! linked in its ancestors inside the writable roots.
//!
//! Decided by what the ancestor file does to the protected directory:
//! - tool configuration (`.npmrc`, `.cargo/config.toml`, `go.work`…) applies
//!   to every directory below, whatever it holds: [`Needs::Any`];
//! - a manifest above (`Cargo.toml`, `package.json`, `pyproject.toml`…)
//!   matters only when it can adopt the directory as a workspace member,
//!   which needs the directory to hold a manifest of the same tool:
//!   [`Needs::Holds`] (so a denyWrite `./secrets/` leaves the workspace's own
//!   `Cargo.toml` writable);
//! - a new `.git` above matters only when git finds no repository for the
//!   directory today (it would adopt it): [`Needs::NoRepository`].
//!
//! Only directories count: tools run in directories, and a `denyWrite` file
//! (`.env`) is read by nobody from above. A directory inside a git
//! directory (`.git/hooks`) is not one any tool runs in.

use super::pattern::{Entry, Index, caseless, dir, file, files_from, names_from};
use super::{FileKind, GuardFs};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

/// When an [`ABOVE`] entry matters to a protected directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Always: the tool reads it for every directory below.
    Any,
    /// When the directory holds one of these (a manifest the entry above
    /// can adopt as a workspace member).
    Holds(&'static [&'static str]),
    /// When git finds no repository for the directory (a new one above
    /// would become its repository).
    NoRepository,
}

/// One entry of the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AboveEntry {
    /// The path, relative to the ancestor.
    pub entry: Entry,
    /// When it matters.
    pub needs: Needs,
}

const fn any(entry: Entry) -> AboveEntry {
    AboveEntry {
        entry,
        needs: Needs::Any,
    }
}

const fn holds(entry: Entry, markers: &'static [&'static str]) -> AboveEntry {
    AboveEntry {
        entry,
        needs: Needs::Holds(markers),
    }
}

const CARGO: &str = "cargo's configuration for every directory below: build.rustc-wrapper, runners and [env] apply to its builds (B)";
const TOOLCHAIN: &str = "the toolchain rustup selects below (a `path` toolchain runs any binaries) for cargo and rustc (B)";
const NPMRC: &str = "npm and pnpm configuration for every directory below: script-shell, node-options, registry (B)";
const YARNRC: &str = "yarn's configuration below: yarnPath names the yarn binary it runs (B)";
const MSBUILD: &str = "imported by every MSBuild project below: its targets run at build (B)";
const MISE: &str =
    "mise configuration for every directory below: [hooks] enter and [env] _.source run on cd (A)";
const WORKSPACE: &str = "a workspace root that can list the directory as a member: its overrides and scripts apply to it (B)";

/// The configuration tools read from ancestor directories.
pub const ABOVE: &[AboveEntry] = &[
    any(file(".cargo/config.toml", "cargo", CARGO)),
    any(file(".cargo/config", "cargo", CARGO)),
    holds(file("Cargo.toml", "cargo", WORKSPACE), &["Cargo.toml"]),
    any(file("rust-toolchain", "rustup", TOOLCHAIN)),
    any(file("rust-toolchain.toml", "rustup", TOOLCHAIN)),
    any(file(".npmrc", "npm", NPMRC)),
    any(file(".yarnrc", "yarn", YARNRC)),
    any(file(".yarnrc.yml", "yarn", YARNRC)),
    holds(file("package.json", "npm", WORKSPACE), &["package.json"]),
    holds(
        file("pnpm-workspace.yaml", "pnpm", WORKSPACE),
        &["package.json"],
    ),
    holds(
        files_from("deno.json", "deno", WORKSPACE),
        &["deno.json", "deno.jsonc"],
    ),
    any(file(
        "go.work",
        "go",
        "the go workspace for every module below: it replaces their dependencies with other directories (B)",
    )),
    any(files_from("Directory.Build.", "MSBuild", MSBUILD)),
    any(file("Directory.Packages.props", "MSBuild", MSBUILD)),
    any(caseless(
        "nuget.config",
        "NuGet",
        "package sources for every project below (B)",
    )),
    any(file(
        "global.json",
        "dotnet",
        "the .NET SDK selected for every project below (B)",
    )),
    any(file(
        ".envrc",
        "direnv",
        "loaded on cd into any directory below, once allowed (C until then)",
    )),
    any(names_from("mise", "mise", MISE)),
    any(names_from(".mise", "mise", MISE)),
    any(names_from(".config/mise", "mise", MISE)),
    any(names_from(".rtx", "mise", MISE)),
    any(file(
        ".tool-versions",
        "asdf",
        "tool versions for every directory below (a `path:` version runs any binary) (A)",
    )),
    any(file(
        ".python-version",
        "pyenv",
        "the python interpreter pyenv and uv select below (uv accepts a path) (B)",
    )),
    any(file(
        "uv.toml",
        "uv",
        "uv's configuration below: indexes and python (B)",
    )),
    holds(file("pyproject.toml", "uv", WORKSPACE), &["pyproject.toml"]),
    holds(
        files_from("settings.gradle", "gradle", WORKSPACE),
        &["build.gradle", "build.gradle.kts"],
    ),
    holds(file("pom.xml", "maven", WORKSPACE), &["pom.xml"]),
    any(dir(
        ".mvn",
        "maven",
        "build extensions and options of the multi-module root found above (B)",
    )),
    any(file(
        ".bazelrc",
        "bazel",
        "options of every build below (B)",
    )),
    any(file(
        ".bazelversion",
        "bazelisk",
        "the bazel binary bazelisk downloads and runs below (B)",
    )),
    AboveEntry {
        entry: file(
            ".git",
            "git",
            "a new repository above: git run below would use its configuration and hooks (B)",
        ),
        needs: Needs::NoRepository,
    },
];

static ENTRIES: LazyLock<Vec<Entry>> = LazyLock::new(|| ABOVE.iter().map(|a| a.entry).collect());
static INDEX: LazyLock<Index> = LazyLock::new(|| Index::new(entries()));

fn entries() -> &'static [Entry] {
    &ENTRIES
}

fn needs_of(e: &Entry) -> Needs {
    ABOVE
        .iter()
        .find(|a| a.entry == *e)
        .map_or(Needs::Any, |a| a.needs)
}

/// The rule, with what it knows about the protected directories.
#[derive(Debug)]
pub(super) struct Above {
    /// `denyWrite` entries strictly below a writable root and not inside a
    /// git directory: the candidates (files among them drop out when seen).
    dirs: Vec<PathBuf>,
    /// Which candidates are directories, and which markers they hold.
    seen: HashMap<(usize, &'static str), bool>,
}

/// The key of [`Above::seen`] that says whether the candidate is a directory.
const IS_DIR: &str = "";

impl Above {
    pub(super) fn new(deny_write: &[PathBuf], roots: &[PathBuf]) -> Self {
        let in_git_dir = |d: &Path| d.iter().any(|c| c == ".git");
        let dirs = deny_write
            .iter()
            .filter(|d| roots.iter().any(|r| d.starts_with(r) && *d != r))
            .filter(|d| !in_git_dir(d))
            .cloned()
            .collect();
        Above {
            dirs,
            seen: HashMap::new(),
        }
    }

    /// Forget what was seen (with the rest of the memo).
    pub(super) fn forget(&mut self) {
        self.seen.clear();
    }

    /// The entry protecting `p` as configuration a protected directory
    /// below reads, if any. `no_repo` says whether git finds no repository
    /// for a directory.
    pub(super) fn hit(
        &mut self,
        fs: &dyn GuardFs,
        p: &Path,
        no_repo: &mut dyn FnMut(&Path) -> bool,
    ) -> Option<&'static Entry> {
        if self.dirs.is_empty() {
            return None;
        }
        let parts: Vec<&str> = p.iter().skip(1).map(|c| c.to_str().unwrap_or("")).collect();
        let found: Vec<(&'static Entry, usize)> = INDEX.all(&parts).collect();
        for (e, at) in found {
            let ancestor: PathBuf = Path::new("/").join(parts[..at].join("/"));
            if self.protects_below(fs, &ancestor, needs_of(e), no_repo) {
                return Some(e);
            }
        }
        None
    }

    /// Whether replacing `p` (by a symlink or a moved directory) would
    /// change what an entry below it resolves to: `p` is a leading
    /// component of an entry (`.cargo`, `.config`) in an ancestor of a
    /// protected directory.
    pub(super) fn shields(&mut self, fs: &dyn GuardFs, p: &Path) -> bool {
        if self.dirs.is_empty() {
            return false;
        }
        for e in entries() {
            let lead: Vec<&str> = e.leading().collect();
            for j in 1..=lead.len() {
                let tail = Path::new(&lead[..j].join("/")).to_path_buf();
                let Some(ancestor) = strip_tail(p, &tail) else {
                    continue;
                };
                if self.protects_below(fs, &ancestor, Needs::Any, &mut |_| false) {
                    return true;
                }
            }
        }
        false
    }

    /// Whether a protected directory strictly below `ancestor` needs what
    /// an entry there does.
    fn protects_below(
        &mut self,
        fs: &dyn GuardFs,
        ancestor: &Path,
        needs: Needs,
        no_repo: &mut dyn FnMut(&Path) -> bool,
    ) -> bool {
        for i in 0..self.dirs.len() {
            let d = self.dirs[i].clone();
            if d == ancestor || !d.starts_with(ancestor) || !self.has(fs, i, IS_DIR) {
                continue;
            }
            let wanted = match needs {
                Needs::Any => true,
                Needs::Holds(markers) => markers.iter().any(|m| self.has(fs, i, m)),
                Needs::NoRepository => no_repo(&d),
            };
            if wanted {
                return true;
            }
        }
        false
    }

    /// Whether candidate `i` is a directory ([`IS_DIR`]) or holds `name`.
    fn has(&mut self, fs: &dyn GuardFs, i: usize, name: &'static str) -> bool {
        if let Some(v) = self.seen.get(&(i, name)) {
            return *v;
        }
        let d = &self.dirs[i];
        let v = match name {
            IS_DIR => fs.lstat(d).is_some_and(|s| s.kind == FileKind::Dir),
            _ => fs.lstat(&d.join(name)).is_some(),
        };
        self.seen.insert((i, name), v);
        v
    }
}

/// `p` without `tail` at its end, when it ends with it.
fn strip_tail(p: &Path, tail: &Path) -> Option<PathBuf> {
    let n = tail.iter().count();
    let comps: Vec<_> = p.iter().collect();
    if comps.len() <= n || !p.ends_with(tail) {
        return None;
    }
    Some(comps[..comps.len() - n].iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::pattern::check_table;

    #[test]
    fn catalogue_is_well_formed() {
        check_table(entries());
    }

    #[test]
    fn strip_tail_works() {
        assert_eq!(
            strip_tail(Path::new("/a/b/.config/mise"), Path::new(".config/mise")),
            Some(PathBuf::from("/a/b"))
        );
        assert_eq!(strip_tail(Path::new("/a/b"), Path::new("c")), None);
    }
}
