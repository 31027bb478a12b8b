//! What the guard protects in the home directory, as data.
//!
//! Two rules, by how much they yield:
//! - **Mandatory** ([`HOME`]): paths relative to the home directory that a
//!   tool runs or reads as configuration on its own, class A or B (see
//!   [`super::anywhere`] for the classes). Nothing opens them, not even an
//!   `allowWrite` entry naming them: inside an explicitly writable `~/.cargo`
//!   its `config.toml`, `bin/` and registry stay protected. Entries under
//!   `.config/`, `.local/share/` and `.local/state/` are also anchored at
//!   `$XDG_CONFIG_HOME`, `$XDG_DATA_HOME` and `$XDG_STATE_HOME` when those
//!   are set elsewhere ([`XDG`]).
//! - **By default** (`decide.rs`, [`default_area`]): every entry of the
//!   home whose name starts with `.`, and everything under the XDG config,
//!   data and state directories, is the user's configuration — an open set
//!   no list can name (`~/.lesskey`, `~/.gdbinit`, a terminal's `shell`
//!   setting, the next agent's MCP configuration). A writable home, or any
//!   writable root above it, makes the user's visible files writable and
//!   leaves this protected. An `allowWrite` entry at or below one such entry
//!   (`~/.npm`, `~/.config/myapp`) opens what it names; the mandatory
//!   entries inside stay protected.

use super::pattern::{Entry, Index, dir, file, files_from};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

const PKG: &str = "package manager configuration: runs on any later install or build (B)";
const PATHDIR: &str = "a directory on $PATH before the system's: a planted `git` runs instead (A)";
const EDITOR: &str = "the editor's configuration: runs when it starts (A)";
const TERMINAL: &str = "the terminal's configuration: the shell or command it starts (A)";
const SHELL: &str = "a shell start-up file: runs in every new shell (A)";
const GIT_USER: &str = "git configuration: core.fsmonitor, hooksPath, pager… run on git status (B)";
const SESSION: &str = "read when a session starts: its commands and environment apply (A)";
const REPL: &str = "runs when the program starts (A)";

/// Paths relative to the home directory protected whatever `allowWrite` says.
pub const HOME: &[Entry] = &[
    // Shells other than bash and zsh (those are in `anywhere`).
    file(".tcshrc", "tcsh", SHELL),
    file(".cshrc", "csh", SHELL),
    file(".login", "csh", SHELL),
    file(".logout", "csh", SHELL),
    file(".kshrc", "ksh", SHELL),
    file(".mkshrc", "mksh", SHELL),
    file(".xonshrc", "xonsh", SHELL),
    file(".bash_completion", "bash-completion", SHELL),
    dir(".oh-my-zsh", "zsh", "sourced from .zshrc (A)"),
    dir(
        ".config/fish",
        "fish",
        "config.fish, conf.d and functions run in every shell (A)",
    ),
    dir(".config/nushell", "nushell", SHELL),
    dir(".config/xonsh", "xonsh", SHELL),
    dir(".config/elvish", "elvish", SHELL),
    dir(".elvish", "elvish", SHELL),
    dir(".config/ion", "ion", SHELL),
    dir(
        ".local/share/bash-completion",
        "bash-completion",
        "completions sourced by every shell (A)",
    ),
    // Session and desktop.
    dir(
        ".config/autostart",
        "the desktop session",
        "autostart entries (A)",
    ),
    dir(".config/autostart-scripts", "KDE", "autostart scripts (A)"),
    dir(
        ".config/plasma-workspace",
        "KDE",
        "session environment scripts (A)",
    ),
    dir(
        ".config/systemd",
        "systemd",
        "user units, drop-ins and timers (A)",
    ),
    dir(".local/share/systemd", "systemd", "user units (A)"),
    dir(".config/environment.d", "systemd", SESSION),
    file(
        ".config/mimeapps.list",
        "xdg-open",
        "which program opens a file or URL (A)",
    ),
    dir(
        ".local/share/applications",
        "the desktop session",
        "desktop entries: what a click runs (A)",
    ),
    dir(
        ".config/dconf",
        "dconf",
        "GNOME settings: terminal commands, keybindings, autostart (A)",
    ),
    dir(".local/bin", "the shell", PATHDIR),
    dir("bin", "the shell", PATHDIR),
    // Terminals, pagers, debuggers, interpreters.
    dir(".config/kitty", "kitty", TERMINAL),
    dir(".config/alacritty", "alacritty", TERMINAL),
    file(".alacritty.toml", "alacritty", TERMINAL),
    file(".alacritty.yml", "alacritty", TERMINAL),
    dir(".config/wezterm", "wezterm", TERMINAL),
    file(".wezterm.lua", "wezterm", TERMINAL),
    dir(".config/foot", "foot", TERMINAL),
    dir(".config/ghostty", "ghostty", TERMINAL),
    dir(".config/terminator", "terminator", TERMINAL),
    dir(".local/share/konsole", "konsole", TERMINAL),
    dir(
        ".config/tmux",
        "tmux",
        "run-shell and the default command (A)",
    ),
    file(
        ".tmux.conf",
        "tmux",
        "run-shell and the default command (A)",
    ),
    file(
        ".screenrc",
        "screen",
        "the shell and commands it starts (A)",
    ),
    file(
        ".lesskey",
        "less",
        "LESSOPEN runs on every file paged (git log, man) (A)",
    ),
    file(
        ".config/lesskey",
        "less",
        "LESSOPEN runs on every file paged (git log, man) (A)",
    ),
    file(".lessfilter", "lesspipe", "runs on every file paged (A)"),
    file(".gdbinit", "gdb", REPL),
    dir(".config/gdb", "gdb", REPL),
    file(".lldbinit", "lldb", REPL),
    file(".pdbrc", "pdb", REPL),
    file(
        ".psqlrc",
        "psql",
        "`\\!` runs shell commands when psql starts (A)",
    ),
    file(
        ".sqliterc",
        "sqlite3",
        "`.shell` runs commands when sqlite3 starts (A)",
    ),
    file(".irbrc", "irb", REPL),
    file(".pryrc", "pry", REPL),
    file(".Rprofile", "R", REPL),
    dir(".ipython", "IPython", "startup scripts (A)"),
    dir(
        ".jupyter",
        "Jupyter",
        "configuration files are python, run at start (A)",
    ),
    // Editors.
    dir(".config/nvim", "neovim", EDITOR),
    dir(".vim", "vim", EDITOR),
    file(".emacs", "emacs", EDITOR),
    dir(".emacs.d", "emacs", EDITOR),
    dir(".config/emacs", "emacs", EDITOR),
    dir(".config/doom", "doom emacs", EDITOR),
    dir(
        ".config/Code/User",
        "VS Code",
        "user settings and tasks (A)",
    ),
    dir(
        ".config/Cursor/User",
        "Cursor",
        "user settings and tasks (A)",
    ),
    dir(
        ".config/VSCodium/User",
        "VSCodium",
        "user settings and tasks (A)",
    ),
    dir(
        ".config/zed",
        "Zed",
        "settings: language servers and tasks (A)",
    ),
    // Agents (their project directories are in `anywhere`, at any depth).
    file(
        ".claude.json",
        "Claude Code",
        "user-level MCP servers it starts (A)",
    ),
    dir(
        ".config/opencode",
        "opencode",
        "plugins and MCP servers (A)",
    ),
    dir(
        ".config/crush",
        "crush",
        "MCP servers and language servers (A)",
    ),
    dir(
        ".config/goose",
        "goose",
        "extensions (MCP servers) it starts (A)",
    ),
    // Version control.
    dir(".config/git", "git", GIT_USER),
    dir(".config/jj", "jujutsu", "pager, diff and merge tools (B)"),
    file(
        ".hgrc",
        "mercurial",
        "[hooks] and extensions run on hg commands (B)",
    ),
    dir(
        ".config/hg",
        "mercurial",
        "[hooks] and extensions run on hg commands (B)",
    ),
    dir(".config/gh", "gh", "`!` aliases run shell commands (B)"),
    dir(
        ".local/share/gh/extensions",
        "gh",
        "extensions run as `gh <name>` (B)",
    ),
    dir(
        ".config/direnv",
        "direnv",
        "its whitelist runs .envrc files without `allow` (A)",
    ),
    dir(
        ".local/share/direnv",
        "direnv",
        "the allow list: an allowed .envrc runs on cd (A)",
    ),
    dir(
        ".config/mise",
        "mise",
        "global tools, env and hooks for every directory (A)",
    ),
    file(
        ".tool-versions",
        "asdf",
        "tool versions for every directory (a `path:` version runs any binary) (A)",
    ),
    // Package managers and build tools.
    file(".npmrc", "npm", PKG),
    file(".yarnrc", "yarn", PKG),
    file(".yarnrc.yml", "yarn", PKG),
    dir(
        ".npm/_npx",
        "npx",
        "packages the next `npx <name>` runs without downloading (B)",
    ),
    dir(".config/pip", "pip", PKG),
    dir(".pip", "pip", PKG),
    file(".pydistutils.cfg", "distutils", PKG),
    dir(
        ".local/lib",
        "python",
        "user site-packages: *.pth and usercustomize run at every python start (A)",
    ),
    file(
        ".cargo/config",
        "cargo",
        "build.rustc-wrapper, runners: run by every build (B)",
    ),
    file(
        ".cargo/config.toml",
        "cargo",
        "build.rustc-wrapper, runners: run by every build (B)",
    ),
    dir(".cargo/bin", "cargo", PATHDIR),
    files_from(".cargo/env", "cargo", "sourced by .profile and .bashrc (A)"),
    dir(
        ".cargo/registry",
        "cargo",
        "crate sources built (build.rs run) by the next build of any project; a cached .crate is unpacked without a new checksum check (B)",
    ),
    dir(
        ".cargo/git",
        "cargo",
        "git dependency checkouts built by the next build (B)",
    ),
    dir(
        ".rustup",
        "rustup",
        "toolchain binaries run by every cargo and rustc (B)",
    ),
    file(".m2/settings.xml", "maven", PKG),
    dir(".m2/extensions", "maven", PKG),
    dir(".gradle/init.d", "gradle", PKG),
    file(".gradle/init.gradle", "gradle", PKG),
    file(".gradle/init.gradle.kts", "gradle", PKG),
    file(".gradle/gradle.properties", "gradle", PKG),
    file(
        ".terraformrc",
        "terraform",
        "provider dev_overrides: binaries run by terraform plan (B)",
    ),
    dir(
        ".docker/cli-plugins",
        "docker",
        "CLI plugins run by docker build and docker compose (B)",
    ),
    file(
        ".docker/config.json",
        "docker",
        "credsStore and credHelpers name programs docker runs (B)",
    ),
    // ssh, cloud and keys.
    file(".ssh/rc", "sshd", "runs on every login to this machine (B)"),
    file(
        ".ssh/config",
        "ssh",
        "ProxyCommand, LocalCommand, Match exec (B)",
    ),
    file(
        ".ssh/environment",
        "sshd",
        "the per-user environment of logins (B)",
    ),
    file(
        ".ssh/authorized_keys",
        "sshd",
        "who may log in, and `command=` (B)",
    ),
    file(
        ".ssh/authorized_keys2",
        "sshd",
        "who may log in, and `command=` (B)",
    ),
    file(
        ".aws/config",
        "aws",
        "credential_process runs a command (B)",
    ),
    dir(".kube", "kubectl", "exec credential plugins (B)"),
    file(
        ".gnupg/gpg.conf",
        "gpg",
        "options, including programs it runs (B)",
    ),
    file(".gnupg/gpg-agent.conf", "gpg-agent", "pinentry-program (B)"),
    file(
        ".gnupg/dirmngr.conf",
        "dirmngr",
        "options, including programs it runs (B)",
    ),
];

/// The XDG base directories' twins: a [`HOME`] entry under the first path
/// is also anchored at the variable's directory when it is set elsewhere.
pub const XDG: &[(&str, &str)] = &[
    (".config/", "XDG_CONFIG_HOME"),
    (".local/share/", "XDG_DATA_HOME"),
    (".local/state/", "XDG_STATE_HOME"),
];

/// The prefix of [`HOME`] entries also anchored at `$XDG_CONFIG_HOME`.
pub const CONFIG_PREFIX: &str = ".config/";

/// The home's configuration directories that are not a dot entry of their
/// own parent's (`~/.config` is one, `$XDG_CONFIG_HOME=/data/cfg` another):
/// the XDG directories as the user set them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct XdgDirs {
    /// `$XDG_CONFIG_HOME` when set elsewhere than `~/.config`.
    pub config: Option<PathBuf>,
    /// `$XDG_DATA_HOME` when set elsewhere than `~/.local/share`.
    pub data: Option<PathBuf>,
    /// `$XDG_STATE_HOME` when set elsewhere than `~/.local/state`.
    pub state: Option<PathBuf>,
}

impl XdgDirs {
    /// The directories given, each kept only when it is elsewhere than its
    /// place in `home` (`~/.config`, `~/.local/share`, `~/.local/state`).
    pub fn elsewhere(
        home: &Path,
        config: Option<PathBuf>,
        data: Option<PathBuf>,
        state: Option<PathBuf>,
    ) -> Self {
        let keep = |d: Option<PathBuf>, usual: &str| {
            d.filter(|d| *d != home.join(usual.trim_end_matches('/')))
        };
        XdgDirs {
            config: keep(config, XDG[0].0),
            data: keep(data, XDG[1].0),
            state: keep(state, XDG[2].0),
        }
    }

    /// Each directory set, with the [`HOME`] prefix it stands for.
    pub fn anchors(&self) -> Vec<(&Path, &'static str)> {
        [&self.config, &self.data, &self.state]
            .into_iter()
            .zip(XDG)
            .filter_map(|(d, (prefix, _))| d.as_deref().map(|d| (d, *prefix)))
            .collect()
    }
}

static HOME_INDEX: LazyLock<Index> = LazyLock::new(|| Index::new(HOME));

/// The [`HOME`] entry holding `rel` (a path relative to the home, as
/// components), if any.
pub fn home_entry(rel: &[&str]) -> Option<&'static Entry> {
    HOME_INDEX.find_anchored(rel)
}

/// The [`HOME`] entry holding `path`, through the home or an XDG twin.
pub fn mandatory_at(path: &Path, home: &Path, xdg: &XdgDirs) -> Option<&'static Entry> {
    if let Ok(rel) = path.strip_prefix(home)
        && let Some(e) = home_entry(&components(rel)?)
    {
        return Some(e);
    }
    for (anchor, prefix) in xdg.anchors() {
        if let Ok(rel) = path.strip_prefix(anchor) {
            let mut parts: Vec<&str> = prefix.trim_end_matches('/').split('/').collect();
            parts.extend(components(rel)?);
            if let Some(e) = home_entry(&parts) {
                return Some(e);
            }
        }
    }
    None
}

/// Where the default protection of the home's configuration holds `path`:
/// the dot entry of the home it is in (`~/.npm`), or the XDG directory set
/// elsewhere that holds it. `None`: not the home's configuration.
pub fn default_area(path: &Path, home: &Path, xdg: &XdgDirs) -> Option<PathBuf> {
    if let Ok(rel) = path.strip_prefix(home)
        && let Some(first) = rel.iter().next()
        && first.as_encoded_bytes().starts_with(b".")
    {
        return Some(home.join(first));
    }
    xdg.anchors()
        .into_iter()
        .map(|(d, _)| d)
        .find(|d| path.starts_with(d))
        .map(Path::to_path_buf)
}

/// Whether the default protection yields at `path`: the writable root
/// nearest to it (the longest one holding it) lies inside the area that
/// holds `path` — an `allowWrite` entry that names the configuration
/// explicitly (`~/.npm`, `~/.config/myapp`), not the home or a root above
/// it.
pub fn explicitly_writable(area: &Path, path: &Path, roots: &[PathBuf]) -> bool {
    roots
        .iter()
        .filter(|r| path.starts_with(r))
        .max_by_key(|r| r.as_os_str().len())
        .is_some_and(|r| r.starts_with(area))
}

/// Whether a path component can take part in a protected path: a
/// component of an entry of [`HOME`] or of [`super::anywhere::ANYWHERE`]
/// (a family by its spelling), or a name git gives meaning to. A path
/// without any such component reaches nothing protected under its own
/// spelling (only, possibly, under its real path).
pub fn may_matter(component: &str) -> bool {
    matches!(
        component,
        ".git" | "hooks" | "info" | "config" | "config.worktree" | "commondir" | "gitdir"
    ) || super::anywhere::index().may_hold(component)
        || HOME_INDEX.may_hold(component)
}

/// A relative path's components as strings (`None` when not UTF-8, which
/// no entry names).
pub fn components(rel: &Path) -> Option<Vec<&str>> {
    rel.iter().map(|c| c.to_str()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::pattern::check_table;

    #[test]
    fn table_is_well_formed() {
        check_table(HOME);
    }

    #[test]
    fn mandatory_entries_follow_the_xdg_twins() {
        let home = Path::new("/h");
        let xdg = XdgDirs {
            config: Some("/cfg".into()),
            data: Some("/data".into()),
            state: None,
        };
        for (p, want) in [
            ("/h/.cargo/config.toml", Some(".cargo/config.toml")),
            ("/h/.cargo/env.fish", Some(".cargo/env")),
            ("/h/.cargo/registry/src/x/build.rs", Some(".cargo/registry")),
            ("/h/.cargo/.package-cache", None),
            ("/cfg/git/config", Some(".config/git")),
            (
                "/data/applications/x.desktop",
                Some(".local/share/applications"),
            ),
            ("/h/.npm/_npx/a/b", Some(".npm/_npx")),
            ("/h/.npm/_cacache/x", None),
        ] {
            assert_eq!(
                mandatory_at(Path::new(p), home, &xdg).map(|e| e.path),
                want,
                "{p}"
            );
        }
    }

    #[test]
    fn default_area_and_what_opens_it() {
        let home = Path::new("/h");
        let xdg = XdgDirs {
            config: Some("/h/cfg".into()),
            ..XdgDirs::default()
        };
        let area = |p: &str| default_area(Path::new(p), home, &xdg);
        assert_eq!(area("/h/.lesskey"), Some("/h/.lesskey".into()));
        assert_eq!(area("/h/.docker/cli-plugins/x"), Some("/h/.docker".into()));
        assert_eq!(area("/h/cfg/kitty/kitty.conf"), Some("/h/cfg".into()));
        assert_eq!(area("/h/notes.txt"), None);
        assert_eq!(area("/h/src/.vscode/x"), None);
        let roots = |r: &[&str]| r.iter().map(PathBuf::from).collect::<Vec<_>>();
        let open = |p: &str, r: &[&str]| {
            let p = Path::new(p);
            explicitly_writable(&area(p.to_str().unwrap()).unwrap(), p, &roots(r))
        };
        assert!(!open("/h/.npm/x", &["/h"]));
        assert!(!open("/h/.npm/x", &["/"]));
        assert!(open("/h/.npm/x", &["/h", "/h/.npm"]));
        assert!(open("/h/.npm/_cacache/x", &["/h", "/h/.npm/_cacache"]));
        assert!(!open("/h/.npm/other", &["/h", "/h/.npm/_cacache"]));
        assert!(open("/h/cfg/app/x", &["/h", "/h/cfg/app"]));
    }
}
