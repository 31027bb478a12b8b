//! What the guard protects, as data: the names and paths that the user's own
//! tools read or run on their own after the jail has exited.
//!
//! Each entry says why it is there. The classes follow
//! `docs/enforcement.md` ("What the guard protects"): **A** runs with no
//! decision of the user (opening a shell, a terminal, an editor or a
//! repository, logging in); **B** runs on a routine action that users do not
//! expect to run project code (`git status`, `git commit`, `ssh host`,
//! `cargo build` of another project). What the user asks the project to run
//! (`make`, `npm test`) is class C and deliberately not protected: writing it
//! is the point of a writable workspace.
//!
//! Three tables:
//! - [`ANYWHERE`]: names protected at any depth under every writable root
//!   (a file with that name, or a directory and everything below it);
//! - [`CLAUDE`]: entries of a `.claude` directory, at any depth;
//! - [`HOME`]: paths relative to the home directory (`.config/…` entries
//!   also relative to `$XDG_CONFIG_HOME` when it is set elsewhere).
//!
//! Git directories are protected by meaning, not by these tables: see
//! `git.rs`.

/// One protected name or path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The name (for [`ANYWHERE`]) or the path relative to its anchor.
    pub path: &'static str,
    /// A directory: everything below it is protected too.
    pub dir: bool,
    /// Who reads or runs it, and when.
    pub why: &'static str,
}

const fn file(path: &'static str, why: &'static str) -> Entry {
    Entry {
        path,
        dir: false,
        why,
    }
}

const fn dir(path: &'static str, why: &'static str) -> Entry {
    Entry {
        path,
        dir: true,
        why,
    }
}

const BASH: &str = "bash start-up file (A: every new shell)";
const ZSH: &str = "zsh start-up file (A: every new shell; also under $ZDOTDIR)";
const SESSION: &str = "read at login or session start (A)";
const GIT_USER: &str = "git configuration (B: core.fsmonitor, hooksPath, pager… run on git status)";
const EDITOR: &str = "editor workspace settings (A: tasks and settings act when the folder opens)";
const HOOKMGR: &str = "hook manager configuration (B: its commands run on git commit)";

/// Names protected wherever they appear under a writable root.
pub const ANYWHERE: &[Entry] = &[
    file(".bashrc", BASH),
    file(".bash_profile", BASH),
    file(".bash_login", BASH),
    file(".bash_logout", BASH),
    file(
        ".bash_aliases",
        "sourced by Debian's and Ubuntu's default .bashrc (A)",
    ),
    dir(".bashrc.d", "sourced by Fedora's default .bashrc (A)"),
    file(".profile", "login shells (A)"),
    file(".zshrc", ZSH),
    file(".zshenv", ZSH),
    file(".zprofile", ZSH),
    file(".zlogin", ZSH),
    file(".zlogout", ZSH),
    file(".inputrc", "readline (A: `$include` of any file)"),
    file(".pam_environment", SESSION),
    file(".xprofile", SESSION),
    file(".xsessionrc", SESSION),
    file(".xinitrc", SESSION),
    file(".gitconfig", GIT_USER),
    file(
        ".gitmodules",
        "submodule URLs and update commands (B: git submodule)",
    ),
    file(
        ".ripgreprc",
        "ripgrep's configuration (srt's list: --pre runs a command)",
    ),
    file(
        ".mcp.json",
        "MCP servers that agent clients launch when the folder opens (A)",
    ),
    dir(".vscode", EDITOR),
    dir(".idea", EDITOR),
    dir(".cursor", "Cursor's MCP servers and rules (A)"),
    dir(
        ".devcontainer",
        "devcontainer lifecycle commands (A: when the folder is reopened)",
    ),
    dir(".husky", HOOKMGR),
    file(".pre-commit-config.yaml", HOOKMGR),
    file("lefthook.yml", HOOKMGR),
    file("lefthook.yaml", HOOKMGR),
    file(".lefthook.yml", HOOKMGR),
    file(".lefthook.yaml", HOOKMGR),
];

/// Entries of any `.claude` directory (Claude Code's project settings):
/// hooks in the settings files run commands, agents, commands and skills
/// change what the agent does, `hooks/` holds the scripts settings name.
pub const CLAUDE: &[Entry] = &[
    dir("agents", "Claude Code subagents (A)"),
    dir("commands", "Claude Code slash commands (A)"),
    dir("skills", "Claude Code skills (A)"),
    dir("hooks", "scripts Claude Code hooks run (A)"),
    file(
        "settings.json",
        "Claude Code settings: hooks run commands (A)",
    ),
    file(
        "settings.local.json",
        "Claude Code settings: hooks run commands (A)",
    ),
];

const PKG: &str = "package manager configuration (B: runs on any later install or build)";
const PATHDIR: &str = "a directory on $PATH before the system's (A: a planted `git` runs instead)";

/// Paths relative to the home directory (entries starting `.config/` are
/// also relative to `$XDG_CONFIG_HOME`).
pub const HOME: &[Entry] = &[
    dir(".config/git", GIT_USER),
    dir(".config/fish", "fish: config.fish, conf.d, functions (A)"),
    dir(".config/autostart", "desktop autostart entries (A)"),
    dir(".config/autostart-scripts", "KDE autostart scripts (A)"),
    dir(
        ".config/plasma-workspace",
        "KDE session environment scripts (A)",
    ),
    dir(".config/systemd", "systemd user units and timers (A)"),
    dir(".config/environment.d", SESSION),
    file(
        ".config/mimeapps.list",
        "which program opens a file or URL (A)",
    ),
    dir(
        ".config/direnv",
        "direnv's whitelist runs .envrc files without `allow` (A)",
    ),
    dir(".config/nvim", EDITOR),
    dir(".config/Code/User", EDITOR),
    dir(".config/pip", PKG),
    dir(".config/tmux", "tmux configuration (A: run-shell)"),
    dir(".local/share/applications", "desktop entries (A)"),
    dir(".local/share/systemd", "systemd user units (A)"),
    dir(
        ".local/share/direnv",
        "direnv's allow list (A: an allowed .envrc runs on cd)",
    ),
    dir(".local/bin", PATHDIR),
    dir("bin", PATHDIR),
    dir(
        ".local/lib",
        "user site-packages: *.pth and usercustomize run at every python start (A)",
    ),
    dir(
        ".cargo",
        "cargo: config, bin, env (sourced by .profile), unpacked crates (B)",
    ),
    dir(
        ".rustup",
        "toolchain binaries run by every cargo invocation (B)",
    ),
    dir(".oh-my-zsh", "sourced from .zshrc (A)"),
    dir(".vim", EDITOR),
    file(".vimrc", EDITOR),
    file(".emacs", EDITOR),
    dir(".emacs.d", EDITOR),
    file(".tmux.conf", "tmux configuration (A: run-shell)"),
    dir(".ipython", "IPython startup scripts (A)"),
    file(".claude.json", "Claude Code's user-level MCP servers (A)"),
    file(".npmrc", PKG),
    file(".yarnrc", PKG),
    file(".yarnrc.yml", PKG),
    file(".pydistutils.cfg", PKG),
    dir(".pip", PKG),
    file(".m2/settings.xml", PKG),
    dir(".gradle/init.d", PKG),
    file(".gradle/init.gradle", PKG),
    file(".gradle/gradle.properties", PKG),
    file(".ssh/rc", "run by sshd on every login to this machine (B)"),
    file(
        ".ssh/config",
        "ssh ProxyCommand, LocalCommand, Match exec (B)",
    ),
    file(".ssh/environment", "sshd's per-user environment (B)"),
    file(".ssh/authorized_keys", "who may log in, and `command=` (B)"),
    file(
        ".ssh/authorized_keys2",
        "who may log in, and `command=` (B)",
    ),
    file(".aws/config", "credential_process runs a command (B)"),
    dir(".kube", "kubectl exec credential plugins (B)"),
    file(".gnupg/gpg.conf", "gpg options (B)"),
    file(".gnupg/gpg-agent.conf", "pinentry-program (B)"),
    file(".gnupg/dirmngr.conf", "gpg options (B)"),
];

/// The prefix of [`HOME`] entries that is also anchored at `$XDG_CONFIG_HOME`.
pub const CONFIG_PREFIX: &str = ".config/";

/// Whether a path component can take part in a protected path: a name of
/// [`ANYWHERE`], a component of a [`HOME`] path, or a name git or Claude
/// Code give meaning to. A path without any such component reaches nothing
/// protected under its own spelling (only, possibly, under its real path).
pub fn may_matter(component: &str) -> bool {
    matches!(
        component,
        ".git"
            | ".claude"
            | "hooks"
            | "info"
            | "config"
            | "config.worktree"
            | "commondir"
            | "gitdir"
    ) || ANYWHERE.iter().any(|e| e.path == component)
        || HOME
            .iter()
            .any(|e| e.path.split('/').any(|c| c == component))
}

/// Look a name up in a table.
pub fn find(table: &'static [Entry], name: &str) -> Option<&'static Entry> {
    table.iter().find(|e| e.path == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_well_formed() {
        for table in [ANYWHERE, CLAUDE] {
            for e in table {
                assert!(!e.path.contains('/'), "{} is a name", e.path);
            }
        }
        for table in [ANYWHERE, CLAUDE, HOME] {
            let mut seen = std::collections::BTreeSet::new();
            for e in table {
                assert!(seen.insert(e.path), "{} twice", e.path);
                assert!(!e.path.is_empty() && !e.path.ends_with('/'));
                assert!(!e.why.is_empty());
            }
        }
    }
}
