//! The catalogue of names protected at any depth under every writable root:
//! shell and session start-up files (a project directory can be a
//! `$ZDOTDIR`, a dotfiles checkout is linked into the home), and the
//! project-level files and directories that editors, agents, hook managers
//! and version control read when a folder is opened or a routine command
//! runs in it.
//!
//! Each entry names the tool, and what the tool executes because of the
//! entry and when, with its class (`docs/enforcement.md`, "What the guard
//! protects"): **A** runs with no decision of the user (opening a shell, a
//! terminal, an editor, an agent or a folder), **B** runs on a routine
//! action users do not expect to run project code (`git commit`, `hg
//! status`). Class C — what the user asks the project to run (`make`, `npm
//! test`, an `.envrc` direnv asks about) — is deliberately absent.
//!
//! Families, not names ([`super::pattern`]): where a tool reads several
//! spellings the entry is the rule it applies (`lefthook*`, `.devcontainer*`,
//! `*.code-workspace`). Each editor's and agent's per-project directory is
//! protected whole: what inside it runs (tasks, MCP servers, hooks, plugins)
//! changes from release to release; what stays is that the tool acts on it
//! when the folder is opened.
//!
//! What is not here, and why (also in the docs): prompt files (`AGENTS.md`,
//! `CLAUDE.md`, `.cursorrules`) instruct an agent but run nothing; the
//! configuration of tools that the user's own hooks call (`eslint.config.js`
//! run by a pre-commit hook) is project code the user chose to run.

use super::pattern::{Entry, Index, dir, ending, file, files_from, names_from};
use std::sync::LazyLock;

const BASH: &str = "bash";
const ZSH: &str = "zsh";
const SESSION: &str = "the login session";
const A_SHELL: &str = "a shell start-up file: runs in every new shell (A)";
const A_ZSH: &str = "a zsh start-up file: runs in every new shell, here too under $ZDOTDIR (A)";
const A_LOGIN: &str = "read when a session starts: its commands and environment apply (A)";
const A_MCP: &str = "the agent's project configuration: MCP servers, hooks and commands it starts when the folder is opened (A)";
const A_EDITOR: &str = "the editor's project settings: tasks, language servers and interpreters it starts when the folder is opened (A)";
const A_EXRC: &str = "sourced by vim and neovim in this directory when `exrc` is set (neovim asks to trust it once) (A)";
const B_HOOKS: &str =
    "the hook manager's configuration: the commands it names run on git commit (B)";

/// Names protected wherever they appear under a writable root.
pub const ANYWHERE: &[Entry] = &[
    // Shells and sessions.
    file(".bashrc", BASH, A_SHELL),
    file(".bash_profile", BASH, A_SHELL),
    file(".bash_login", BASH, A_SHELL),
    file(".bash_logout", BASH, "runs when a login shell exits (A)"),
    file(
        ".bash_aliases",
        BASH,
        "sourced by Debian's and Ubuntu's default .bashrc (A)",
    ),
    dir(".bashrc.d", BASH, "sourced by Fedora's default .bashrc (A)"),
    file(".profile", "sh", "read by every login shell (A)"),
    file(".zshrc", ZSH, A_ZSH),
    file(".zshenv", ZSH, A_ZSH),
    file(".zprofile", ZSH, A_ZSH),
    file(".zlogin", ZSH, A_ZSH),
    file(".zlogout", ZSH, A_ZSH),
    file(
        ".inputrc",
        "readline",
        "`$include` of any file, key bindings running commands (A)",
    ),
    file(".pam_environment", SESSION, A_LOGIN),
    file(".xprofile", SESSION, A_LOGIN),
    file(".xsessionrc", SESSION, A_LOGIN),
    file(".xinitrc", SESSION, A_LOGIN),
    // Version control.
    file(
        ".gitconfig",
        "git",
        "git configuration: core.fsmonitor, hooksPath, pager… run on git status (B)",
    ),
    file(
        ".gitmodules",
        "git",
        "submodule URLs and update commands: run on git submodule update (B)",
    ),
    file(
        ".hg/hgrc",
        "mercurial",
        "a repository's configuration: [hooks] and extensions run on hg commands (B)",
    ),
    file(
        ".jj/repo/config.toml",
        "jujutsu",
        "a repository's configuration: pager, diff and merge tools run on jj log and jj diff (B)",
    ),
    // Hook managers.
    dir(
        ".husky",
        "husky",
        "the hooks git runs through core.hooksPath (B)",
    ),
    files_from(".huskyrc", "husky", B_HOOKS),
    files_from(".pre-commit-config", "pre-commit", B_HOOKS),
    files_from("lefthook", "lefthook", B_HOOKS),
    names_from(".lefthook", "lefthook", B_HOOKS),
    files_from(".overcommit", "overcommit", B_HOOKS),
    // Agents.
    file(".mcp.json", "Claude Code", A_MCP),
    file(
        ".claude/settings.json",
        "Claude Code",
        "hooks in it run commands (A)",
    ),
    file(
        ".claude/settings.local.json",
        "Claude Code",
        "hooks in it run commands (A)",
    ),
    dir(
        ".claude/hooks",
        "Claude Code",
        "the scripts its hooks run (A)",
    ),
    dir(".claude/agents", "Claude Code", "subagents it loads (A)"),
    dir(
        ".claude/commands",
        "Claude Code",
        "slash commands it loads (A)",
    ),
    dir(
        ".claude/skills",
        "Claude Code",
        "skills and their scripts (A)",
    ),
    dir(".cursor", "Cursor", A_MCP),
    dir(".gemini", "Gemini CLI", A_MCP),
    dir(".qwen", "Qwen Code", A_MCP),
    dir(".codex", "Codex CLI", A_MCP),
    dir(".continue", "Continue", A_MCP),
    dir(".roo", "Roo Code", A_MCP),
    dir(".kilocode", "Kilo Code", A_MCP),
    dir(
        ".kiro",
        "Kiro",
        "agent hooks that run on file events, and MCP servers (A)",
    ),
    dir(".amazonq", "Amazon Q Developer", A_MCP),
    dir(".junie", "Junie", A_MCP),
    dir(".windsurf", "Windsurf", A_MCP),
    dir(".trae", "Trae", A_MCP),
    dir(
        ".opencode",
        "opencode",
        "plugins it loads as code at start, and commands (A)",
    ),
    files_from("opencode.json", "opencode", A_MCP),
    file("crush.json", "crush", A_MCP),
    file(".crush.json", "crush", A_MCP),
    files_from(
        ".aider.conf",
        "aider",
        "lint-cmd and test-cmd run after every edit it makes (A)",
    ),
    // Editors.
    dir(".vscode", "VS Code", A_EDITOR),
    ending(".code-workspace", "VS Code", A_EDITOR),
    dir(".idea", "JetBrains IDEs", A_EDITOR),
    dir(".fleet", "Fleet", A_EDITOR),
    dir(".zed", "Zed", A_EDITOR),
    dir(".theia", "Theia", A_EDITOR),
    names_from(
        ".devcontainer",
        "Dev Containers",
        "initializeCommand runs on the host, the other lifecycle commands in the container, when the folder is reopened (A)",
    ),
    file(".exrc", "vim", A_EXRC),
    file(".nvimrc", "neovim", A_EXRC),
    file(".nvim.lua", "neovim", A_EXRC),
    file(".vimrc", "vim", A_EXRC),
    file(".gvimrc", "vim", A_EXRC),
    file(
        ".lvimrc",
        "vim (localvimrc)",
        "sourced when a file below is opened (A)",
    ),
    files_from(
        ".dir-locals",
        "emacs",
        "eval forms run when a file below is opened (emacs asks unless marked safe) (A)",
    ),
    file(
        ".ripgreprc",
        "ripgrep",
        "srt's list: --pre runs a command on every file searched (A)",
    ),
];

static INDEX: LazyLock<Index> = LazyLock::new(|| Index::new(ANYWHERE));

/// [`ANYWHERE`], indexed.
pub fn index() -> &'static Index {
    &INDEX
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::pattern::{Index, check_table};

    #[test]
    fn catalogue_is_well_formed() {
        check_table(ANYWHERE);
    }

    #[test]
    fn every_entry_matches_its_examples_at_depth_one_and_nine() {
        let idx = Index::new(ANYWHERE);
        for e in ANYWHERE {
            for ex in e.examples() {
                for depth in [1, 9] {
                    let mut parts: Vec<String> =
                        (1..depth).map(|i| format!("d{i}")).collect::<Vec<_>>();
                    parts.extend(ex.split('/').map(str::to_owned));
                    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
                    assert!(idx.find(&parts).is_some(), "{ex} at depth {depth}");
                }
            }
        }
    }
}
