//! What the user's own tools later run from the home directory, and the
//! warnings `policy check` (and every run) gives about `allowWrite`
//! entries: those that cannot work under the guard's mandatory
//! protections, and those that let the command plant what a host tool
//! runs after the jail has exited.
//!
//! The catalogue ([`HOST_RUNS`]) is about *content*, not configuration:
//! package caches, module stores, tool environments and plugin
//! directories whose files a tool executes or compiles on a later,
//! routine command (`npx x`, `cargo build`, `pip install`, `docker
//! build`) without checking them against what the network served. The
//! guard's catalogues (`guard::anywhere`, `guard::names`) hold
//! configuration and start-up files; this table is the other half, kept
//! apart so the guard can adopt entries from it without this check
//! changing. Each entry names the tool, what it runs and when.
//!
//! Pure path arithmetic on the policy's entries bound to the home and
//! working directory (no file system access): a run pays a few string
//! comparisons per `allowWrite` entry.

use crate::FilesystemPolicy;
use crate::guard::pattern::{Entry, Form};
use crate::guard::{self, held::Anchors, names};
use std::path::{Path, PathBuf};

/// One place under the home whose content a host tool later runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostRun {
    /// Path relative to the home directory.
    pub path: &'static str,
    /// The tool that runs it.
    pub tool: &'static str,
    /// What it runs, and when.
    pub runs: &'static str,
}

const fn run(path: &'static str, tool: &'static str, runs: &'static str) -> HostRun {
    HostRun { path, tool, runs }
}

/// Places under the home whose content a host tool later runs or compiles.
pub const HOST_RUNS: &[HostRun] = &[
    run(
        ".npm/_npx",
        "npx",
        "packages it installed, run by the next `npx <name>`",
    ),
    run(
        ".npm/_cacache",
        "npm",
        "cached tarballs and their index, installed (install scripts included) by `npm install` where no lockfile hash pins them",
    ),
    run(
        ".cache/yarn",
        "yarn",
        "the offline cache `yarn install` unpacks",
    ),
    run(
        ".yarn/berry/cache",
        "yarn",
        "the global cache `yarn install` unpacks",
    ),
    run(
        ".local/share/pnpm",
        "pnpm",
        "the content store linked into projects, and `pnpm dlx` packages",
    ),
    run(
        ".bun/install/cache",
        "bun",
        "the package cache `bun install` and `bunx` run from",
    ),
    run(".deno", "deno", "cached remote modules run by `deno run`"),
    run(
        ".cache/deno",
        "deno",
        "cached remote modules run by `deno run`",
    ),
    run(
        ".nvm",
        "nvm",
        "node binaries on $PATH after `nvm use`, and global packages",
    ),
    run(
        ".cache/pip",
        "pip",
        "wheels it built and cached, installed by the next `pip install` without --require-hashes",
    ),
    run(
        ".cache/uv",
        "uv",
        "cached wheels and builds installed by `uv pip install` and `uv run`",
    ),
    run(
        ".local/share/uv",
        "uv",
        "tool environments `uvx` runs, and managed pythons",
    ),
    run(
        ".local/pipx",
        "pipx",
        "application environments whose commands are on $PATH",
    ),
    run(
        ".cache/pypoetry",
        "poetry",
        "cached distributions and the virtualenvs `poetry run` uses",
    ),
    run(".pyenv", "pyenv", "python builds and the shims on $PATH"),
    run(".conda", "conda", "environments and the package cache"),
    run(
        ".cargo/registry",
        "cargo",
        "unpacked crate sources compiled (build.rs run) by the next `cargo build`; checksums are checked on download only",
    ),
    run(
        ".cargo/git",
        "cargo",
        "git dependency checkouts compiled by the next `cargo build`",
    ),
    run(".cargo/bin", "cargo", "installed commands on $PATH"),
    run(
        ".rustup",
        "rustup",
        "toolchain binaries run by every `cargo` and `rustc`",
    ),
    run(
        "go/pkg/mod",
        "go",
        "module sources compiled by the next `go build`; go.sum is checked on download only",
    ),
    run(
        ".cache/go-build",
        "go",
        "compiled packages linked by the next `go build` without recompiling",
    ),
    run("go/bin", "go", "commands `go install` put on $PATH"),
    run(
        ".m2/repository",
        "maven",
        "plugins and jars run by the next `mvn` build",
    ),
    run(
        ".gradle/caches",
        "gradle",
        "plugins and jars run by the next gradle build",
    ),
    run(
        ".gradle/wrapper",
        "gradle",
        "the gradle distribution `./gradlew` runs",
    ),
    run(".gem", "gem", "installed gems loaded by ruby and bundler"),
    run(
        ".local/share/gem",
        "gem",
        "installed gems loaded by ruby and bundler",
    ),
    run(
        ".cache/pre-commit",
        "pre-commit",
        "hook environments run on every `git commit`",
    ),
    run(
        ".cache/node-gyp",
        "node-gyp",
        "headers and libraries compiled into native addons",
    ),
    run(
        ".cache/ms-playwright",
        "playwright",
        "browser binaries its tests launch",
    ),
    run(
        ".cache/bazel",
        "bazel",
        "external repositories and cached actions used by builds",
    ),
    run(
        ".terraform.d/plugins",
        "terraform",
        "provider binaries run by `terraform init` and `plan`",
    ),
    run(
        ".docker/cli-plugins",
        "docker",
        "CLI plugins run by `docker build`, `docker compose`",
    ),
    run(
        ".vscode/extensions",
        "VS Code",
        "extensions loaded when the editor starts",
    ),
    run(
        ".vscode-server",
        "VS Code",
        "the remote server and its extensions, run on connect",
    ),
    run(
        ".local/share/nvim",
        "neovim",
        "plugins loaded when the editor starts",
    ),
];

/// Warnings about the policy's `allowWrite` entries, bound to `at` (the
/// canonical home and the XDG directories set elsewhere) and `cwd`: one
/// line per entry, in the loader's `<json path>: <what>` form, for an
/// entry that has no effect (a mandatory protection holds it), one inside
/// which mandatory protections stay (a tool there cannot do its work), a
/// writable home whose configuration stays protected by default, and one
/// that lets the command plant what a host tool runs later.
pub fn write_warnings(fs: &FilesystemPolicy, at: &Anchors, cwd: &Path) -> Vec<String> {
    let home = at.home.as_path();
    let literal = fs.allow_write.iter().filter(|e| !e.is_glob());
    let entries: Vec<(String, PathBuf)> = literal
        .map(|e| (e.path.clone(), e.resolve(home, cwd)))
        .collect();
    let roots: Vec<PathBuf> = entries.iter().map(|(_, p)| p.clone()).collect();
    let mut out = Vec::new();
    for (raw, path) in &entries {
        let field = format!("filesystem.allowWrite: {raw:?}");
        if let Some(held) = guard::held::mandatory(path, at, fs.allow_git_config) {
            out.push(format!(
                "{field} has no effect: the guard always protects {}; the run goes on with that protection",
                held.describe(home)
            ));
            continue;
        }
        if home.starts_with(path) {
            out.push(format!(
                "{field} makes the home's visible files writable; its configuration (every ~/.* entry and the XDG config, data and state directories) stays protected unless allowWrite names it"
            ));
        } else if names::default_area(path, home, &at.xdg).is_some() {
            let kept = guard::held::home_entries_inside(path, at);
            if !kept.is_empty() {
                out.push(format!(
                    "{field}: inside it the guard still protects {}; the run goes on with those protections",
                    listed(&kept, home)
                ));
            }
        }
        let planted = planted(path, at, &roots, fs.allow_git_config);
        if planted.is_empty() {
            continue;
        }
        // One place: what it runs; several (a writable home): their names.
        let list: Vec<String> = match planted.as_slice() {
            [one] => vec![format!("~/{} ({}: {})", one.path, one.tool, one.runs)],
            many => many
                .iter()
                .map(|r| format!("~/{} ({})", r.path, r.tool))
                .collect(),
        };
        out.push(format!(
            "{field} lets the command plant what a host tool runs later: {}",
            list.join("; ")
        ));
    }
    out
}

/// The mandatory entries an open directory keeps, grouped by tool:
/// `~/.cargo/bin/, ~/.cargo/config.toml (cargo)`; at most [`LISTED`]
/// places, then how many more.
fn listed(kept: &[(&'static Entry, PathBuf)], home: &Path) -> String {
    let mut tools: Vec<&str> = Vec::new();
    for (e, _) in kept {
        if !tools.contains(&e.tool) {
            tools.push(e.tool);
        }
    }
    let mut shown = 0;
    let mut groups = Vec::new();
    for tool in tools {
        let places: Vec<String> = (kept.iter().filter(|(e, _)| e.tool == tool))
            .map(|(e, p)| {
                let mark = match (e.form, e.dir) {
                    (Form::Prefix, _) => "*",
                    (_, true) => "/",
                    _ => "",
                };
                format!("{}{mark}", guard::held::shown_in_home(p, home))
            })
            .collect();
        if shown >= LISTED {
            continue;
        }
        shown += places.len();
        groups.push(format!("{} ({tool})", places.join(", ")));
    }
    let more = kept.len().saturating_sub(shown);
    let mut text = groups.join("; ");
    if more > 0 {
        text.push_str(&format!("; and {more} more (`oajail explain` lists them)"));
    }
    text
}

/// How many places [`listed`] names before counting.
const LISTED: usize = 8;

/// The catalogue's places that `path`, when writable, makes writable and
/// the guard does not hold (mandatorily, or by default given `roots`):
/// `path` inside one, or one inside `path`.
fn planted(
    path: &Path,
    at: &Anchors,
    roots: &[PathBuf],
    allow_git_config: bool,
) -> Vec<&'static HostRun> {
    HOST_RUNS
        .iter()
        .filter(|r| {
            let place = at.home.join(r.path);
            let inside = path.starts_with(&place);
            let covers = place.starts_with(path);
            let held = || guard::held::held(&place, at, roots, allow_git_config).is_some();
            inside || (covers && !held())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PathEntry;

    const HOME_DIR: &str = "/home/u";

    fn warn(allow_write: &[&str]) -> Vec<String> {
        let fs = FilesystemPolicy {
            deny_read: Vec::new(),
            allow_read: Vec::new(),
            allow_write: (allow_write.iter())
                .map(|p| PathEntry::parse(p, false).unwrap())
                .collect(),
            deny_write: Vec::new(),
            allow_git_config: false,
        };
        let at = Anchors {
            home: HOME_DIR.into(),
            xdg: Default::default(),
        };
        write_warnings(&fs, &at, &Path::new(HOME_DIR).join("src/app"))
    }

    #[test]
    fn entries_the_guard_always_refuses_have_no_effect() {
        for (entry, why) in [
            ("~/.rustup", "the guard always protects ~/.rustup/ (rustup"),
            (
                "~/.cargo/registry",
                "the guard always protects ~/.cargo/registry/ (cargo",
            ),
            ("~/.bashrc", "every .bashrc (bash: a shell start-up file"),
            ("./.vscode", "every .vscode/ (VS Code"),
            ("./lefthook-local.yml", "every lefthook* (lefthook"),
            ("./.git/hooks", ".git/hooks"),
            ("~/.config/systemd/user", "~/.config/systemd/ (systemd"),
            ("~/.npm/_npx", "~/.npm/_npx/ (npx"),
        ] {
            let w = warn(&[entry]);
            assert_eq!(w.len(), 1, "{entry}: {w:?}");
            assert!(
                w[0].contains("has no effect") && w[0].contains(why),
                "{w:?}"
            );
        }
    }

    #[test]
    fn an_open_tool_directory_names_what_stays_protected() {
        let w = warn(&["~/.cargo"]);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("inside it the guard still protects")
                && w[0].contains("~/.cargo/config.toml")
                && w[0].contains("~/.cargo/registry/")
                && w[0].contains("~/.cargo/env*")
                && w[0].contains("(cargo)"),
            "{w:?}"
        );
        // ~/.npm: _npx stays protected, and _cacache is a persistence path.
        let w = warn(&["~/.npm"]);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("~/.npm/_npx/ (npx)"), "{w:?}");
        assert!(w[1].contains("~/.npm/_cacache (npm:"), "{w:?}");
    }

    #[test]
    fn places_a_host_tool_runs_are_named_with_the_tool() {
        let w = warn(&["~/.cache/pip/wheels"]);
        assert!(w[0].contains("~/.cache/pip (pip:"), "{w:?}");
        // A writable home: its configuration stays protected by default,
        // so only the places outside it are named.
        let w = warn(&["~"]);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].contains("stays protected unless allowWrite names it"),
            "{w:?}"
        );
        assert!(w[1].contains("~/go/pkg/mod (go)"), "{w:?}");
        assert!(
            !w[1].contains("~/.npm") && !w[1].contains("~/.cargo"),
            "{w:?}"
        );
        // Named next to the home, a cache is open again.
        let w = warn(&["~", "~/.cache/pip"]);
        assert!(w.iter().any(|l| l.contains("~/.cache/pip (pip:")), "{w:?}");
    }

    #[test]
    fn ordinary_entries_do_not_warn() {
        assert!(warn(&[".", "./build", "~/src/app", "/var/tmp/x", "~/.npm/_logs"]).is_empty());
    }

    #[test]
    fn catalogue_is_well_formed() {
        let mut seen = std::collections::BTreeSet::new();
        for r in HOST_RUNS {
            assert!(seen.insert(r.path), "{} twice", r.path);
            assert!(!r.path.starts_with('/') && !r.path.ends_with('/'));
            assert!(!r.tool.is_empty() && !r.runs.is_empty() && !r.runs.ends_with('.'));
        }
    }
}
