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
//! guard's tables (`guard::names`) hold configuration and start-up
//! files; this table is the other half, kept apart so the guard can adopt
//! entries from it without this check changing. Each entry names the tool,
//! what it runs and when.
//!
//! Pure path arithmetic on the policy's entries bound to the home and
//! working directory (no file system access): a run pays a few string
//! comparisons per `allowWrite` entry.

use crate::FilesystemPolicy;
use crate::guard::names::{self, ANYWHERE, CLAUDE, HOME};
use std::path::{Component, Path, PathBuf};

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

/// Warnings about the policy's `allowWrite` entries, bound to `home` and
/// `cwd` (both canonical) and `config_home` (`$XDG_CONFIG_HOME`, when set
/// elsewhere than `~/.config`): one line per entry, in the loader's
/// `<json path>: <what>` form.
pub fn write_warnings(
    fs: &FilesystemPolicy,
    home: &Path,
    cwd: &Path,
    config_home: Option<&Path>,
) -> Vec<String> {
    let mut out = Vec::new();
    for entry in fs.allow_write.iter().filter(|e| !e.is_glob()) {
        let path = entry.resolve(home, cwd);
        let field = format!("filesystem.allowWrite: {:?}", entry.path);
        if let Some(why) = always_protected(&path, home, config_home) {
            out.push(format!(
                "{field} has no effect: the guard always protects {why}; the run goes on with that protection"
            ));
            continue;
        }
        let planted = planted(&path, home, config_home);
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

/// Why the guard always refuses writes at `path` itself (its name, or an
/// ancestor's), or `None`.
fn always_protected(path: &Path, home: &Path, config_home: Option<&Path>) -> Option<String> {
    let mut anchors = vec![(home.to_path_buf(), "")];
    anchors.extend(config_home.map(|c| (c.to_path_buf(), names::CONFIG_PREFIX)));
    for (anchor, prefix) in &anchors {
        let Some(rel) = relative(path, anchor) else {
            continue;
        };
        let rel = format!("{prefix}{rel}");
        let hit = HOME
            .iter()
            .find(|e| rel == e.path || (e.dir && rel.starts_with(&format!("{}/", e.path))));
        if let Some(e) = hit {
            return Some(format!("~/{} ({})", e.path, e.why));
        }
    }
    let parts: Vec<&str> = (path.components())
        .filter_map(|c| match c {
            Component::Normal(n) => n.to_str(),
            _ => None,
        })
        .collect();
    let last = parts.len().saturating_sub(1);
    for (i, part) in parts.iter().enumerate() {
        if let Some(e) = names::find(ANYWHERE, part).filter(|e| e.dir || i == last) {
            return Some(format!("every {} ({})", e.path, e.why));
        }
        let next = parts.get(i + 1).copied().unwrap_or("");
        if *part == ".claude"
            && let Some(e) = names::find(CLAUDE, next).filter(|e| e.dir || i + 1 == last)
        {
            return Some(format!(".claude/{} ({})", e.path, e.why));
        }
        if *part == ".git" && matches!(next, "hooks" | "config" | "info" | "commondir" | "gitdir") {
            return Some(format!(
                ".git/{next} (what git runs on the next git command)"
            ));
        }
    }
    None
}

/// The catalogue's places that `path`, when writable, makes writable and
/// the guard does not hold: `path` inside one, or one inside `path`.
fn planted(path: &Path, home: &Path, config_home: Option<&Path>) -> Vec<&'static HostRun> {
    HOST_RUNS
        .iter()
        .filter(|r| {
            let place = home.join(r.path);
            let inside = path.starts_with(&place);
            let covers = place.starts_with(path);
            inside || (covers && always_protected(&place, home, config_home).is_none())
        })
        .collect()
}

/// `path` relative to `base` as a `/`-joined string (`None`: not under it).
fn relative(path: &Path, base: &Path) -> Option<String> {
    let rest: PathBuf = path.strip_prefix(base).ok()?.to_path_buf();
    let text = rest.to_str()?.to_owned();
    (!text.is_empty()).then_some(text)
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
        let home = Path::new(HOME_DIR);
        write_warnings(&fs, home, &home.join("src/app"), None)
    }

    #[test]
    fn entries_the_guard_always_refuses_have_no_effect() {
        for (entry, why) in [
            ("~/.cargo", "the guard always protects ~/.cargo (cargo"),
            ("~/.cargo/registry", "the guard always protects ~/.cargo ("),
            ("~/.bashrc", "every .bashrc (bash start-up file"),
            ("./.vscode", "every .vscode"),
            ("./.git/hooks", ".git/hooks"),
            ("~/.config/systemd/user", "~/.config/systemd ("),
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
    fn places_a_host_tool_runs_are_named_with_the_tool() {
        let w = warn(&["~/.npm"]);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("~/.npm/_npx (npx)") && w[0].contains("~/.npm/_cacache (npm)"),
            "{w:?}"
        );
        let w = warn(&["~/.cache/pip/wheels"]);
        assert!(w[0].contains("~/.cache/pip (pip:"), "{w:?}");
        // A writable home: every place not held by the guard, in one line;
        // ~/.cargo/registry is held (the guard protects all of ~/.cargo).
        let w = warn(&["~"]);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("~/go/pkg/mod (go)"), "{w:?}");
        assert!(!w[0].contains("~/.cargo/registry"), "{w:?}");
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
