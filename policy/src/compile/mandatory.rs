//! srt's mandatory write denies, at any depth under every writable root.
//!
//! srt scans three levels below the cwd with ripgrep; oajail walks every
//! writable root completely through the [`FsView`] (symlinks are not
//! followed, write-protected subtrees are not entered) within
//! [`WALK_BUDGET`] entries, and refuses to compile past it (fail closed,
//! naming the root) rather than protect only part of the tree.
//!
//! A protected path that does not exist yet cannot be created: its first
//! missing component becomes a placeholder that the supervisor creates on
//! the host before the jail starts (and removes at exit), masked read-only in
//! the jail. Missing names are protected in the cwd, the home directory and
//! every existing repository root (a directory holding `.git`), and missing
//! `hooks`/`config` inside every existing `.git` directory. Names created
//! during the run anywhere else (a new repository's hooks, a new
//! `.claude/agents`…) are refused by the create-guard, which shares these
//! lists ([`super::guard`], docs/enforcement.md). Placeholders are not put
//! in every writable root: a `.bashrc` appearing in `~/.cache` is read by
//! nothing, and dozens of empty files in the user's directories per run
//! would be a nuisance of their own.

use super::rules::Rules;
use super::{CompileError, FileKind, FsView};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The most directory entries the mandatory-deny walk visits, all roots together.
pub const WALK_BUDGET: usize = 250_000;

/// Files protected wherever they appear (srt's list plus the other login-shell
/// startup files).
pub const PROTECTED_FILES: &[&str] = &[
    ".bash_login",
    ".bash_logout",
    ".bash_profile",
    ".bashrc",
    ".gitconfig",
    ".gitmodules",
    ".mcp.json",
    ".profile",
    ".ripgreprc",
    ".zlogin",
    ".zlogout",
    ".zprofile",
    ".zshenv",
    ".zshrc",
];

/// The protected files that matter in a repository (the others are read
/// from the home directory only).
const REPO_FILES: &[&str] = &[".gitmodules", ".mcp.json"];

/// Directories protected wherever they appear.
pub const PROTECTED_DIRS: &[&str] = &[".idea", ".vscode"];

/// Entries protected inside a `.claude` directory (srt's two plus Claude
/// Code's settings files, which can add hooks and permissions).
pub const PROTECTED_CLAUDE: &[(&str, FileKind)] = &[
    ("agents", FileKind::Dir),
    ("commands", FileKind::Dir),
    ("settings.json", FileKind::File),
    ("settings.local.json", FileKind::File),
];

/// Add the mandatory denies (and user `denyWrite` placeholders) to `rules`.
///
/// `anchors` (the cwd, then the home directory last) get every missing name
/// protected, as does every repository root the walk finds.
pub(crate) fn add(
    rules: &mut Rules,
    fs: &dyn FsView,
    anchors: &[&Path],
    allow_git_config: bool,
) -> Result<(), CompileError> {
    let missing_user: Vec<PathBuf> = rules
        .deny_write
        .iter()
        .filter(|p| fs.kind(p).is_none())
        .cloned()
        .collect();
    for path in missing_user {
        rules.deny_write.remove(&path);
        protect_missing(rules, fs, &path, FileKind::File);
    }
    for anchor in anchors {
        if fs.kind(anchor) == Some(FileKind::Dir) && rules.writable(anchor) {
            let home = Some(*anchor) == anchors.last().copied();
            protect_missing_at(rules, fs, anchor, home, allow_git_config);
        }
    }
    let roots: Vec<PathBuf> = rules.allow_write.iter().cloned().collect();
    let mut walked = BTreeSet::new();
    let mut budget = WALK_BUDGET;
    for root in roots {
        // The root's own name counts too: `allowWrite: ["~/.bashrc"]` or
        // `["./.git"]` does not lift a mandatory deny.
        if let (Some(name), Some(kind)) = (root.file_name(), rules.kind(&root)) {
            let name = name.to_string_lossy().into_owned();
            check_entry(rules, fs, &root, &name, kind, allow_git_config);
        }
        if rules.kind(&root) != Some(FileKind::Dir) || !rules.writable(&root) {
            continue;
        }
        walk(rules, fs, &root, allow_git_config, &mut walked, &mut budget)?;
    }
    Ok(())
}

fn walk(
    rules: &mut Rules,
    fs: &dyn FsView,
    root: &Path,
    allow_git_config: bool,
    walked: &mut BTreeSet<PathBuf>,
    budget: &mut usize,
) -> Result<(), CompileError> {
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        if !walked.insert(dir.clone()) {
            continue;
        }
        let entries = match fs.read_dir(&dir) {
            Ok(entries) => entries,
            // As srt does: a directory the scan cannot read is protected
            // whole, since what is inside it is unknown.
            Err(e) if dir != root => {
                rules.warnings.push(format!(
                    "mandatory-deny scan: cannot list {} ({e}); made read-only",
                    dir.display()
                ));
                protect(rules, &dir, FileKind::Dir);
                continue;
            }
            Err(e) => {
                return Err(CompileError::ReadDir {
                    what: "mandatory-deny scan".into(),
                    path: dir.display().to_string(),
                    reason: e.to_string(),
                });
            }
        };
        if entries.len() > *budget {
            return Err(CompileError::WalkBudget {
                what: "the mandatory-deny scan".into(),
                root: root.display().to_string(),
                budget: WALK_BUDGET,
            });
        }
        *budget -= entries.len();
        if is_inner_git_dir(&dir, &entries) {
            // `.git/modules/<name>` and `.git/worktrees/<name>`: git dirs of
            // submodules and linked worktrees, with their own hooks/config.
            protect_git_dir(rules, fs, &dir, allow_git_config);
        }
        for (name, kind) in entries {
            let path = dir.join(&name);
            check_entry(rules, fs, &path, &name, kind, allow_git_config);
            if kind == FileKind::Dir && rules.writable(&path) {
                stack.push(path);
            }
        }
    }
    Ok(())
}

/// A directory below a `.git` that holds a `HEAD` file is a git dir itself.
fn is_inner_git_dir(dir: &Path, entries: &[(String, FileKind)]) -> bool {
    let below_git = dir
        .parent()
        .is_some_and(|p| p.components().any(|c| c.as_os_str() == ".git"));
    below_git
        && entries
            .iter()
            .any(|(n, k)| n == "HEAD" && *k == FileKind::File)
}

/// Protect `path` if its name is on the lists.
fn check_entry(
    rules: &mut Rules,
    fs: &dyn FsView,
    path: &Path,
    name: &str,
    kind: FileKind,
    allow_git_config: bool,
) {
    if kind == FileKind::Symlink && (is_protected_name(name) || name == ".git") {
        // The link itself is masked, and what it points at (a dotfiles
        // checkout, a separate git dir) is protected too when writable.
        protect(rules, path, kind);
        protect_link_target(rules, fs, path);
    } else if is_protected_name(name) {
        protect(rules, path, kind);
    } else if name == ".claude" && kind == FileKind::Dir {
        // Missing ones get placeholders only in anchors (protect_missing_at).
        for (child, _) in PROTECTED_CLAUDE {
            let p = path.join(child);
            if let Some(k) = fs.kind(&p) {
                protect(rules, &p, k);
            }
        }
    } else if name == ".git" {
        if kind == FileKind::Dir {
            protect_git_dir(rules, fs, path, allow_git_config);
            if let Some(repo) = path.parent() {
                protect_missing_at(rules, fs, repo, false, allow_git_config);
            }
        } else {
            // A worktree or submodule `.git` file names the real git dir.
            protect(rules, path, kind);
        }
    }
}

/// `.git/hooks` always, `.git/config` unless allowed; missing ones too.
fn protect_git_dir(rules: &mut Rules, fs: &dyn FsView, git: &Path, allow_git_config: bool) {
    let mut wanted = vec![("hooks", FileKind::Dir)];
    if !allow_git_config {
        wanted.push(("config", FileKind::File));
    }
    for (child, child_kind) in wanted {
        let p = git.join(child);
        match fs.kind(&p) {
            Some(k) => protect(rules, &p, k),
            None => protect_missing(rules, fs, &p, child_kind),
        }
    }
}

/// In an anchor directory every protected name is protected whether or not
/// it exists (srt does so in the cwd). Shell and user-level files
/// (`.bashrc`, `.gitconfig`, `.ripgreprc`…) only matter in the home
/// directory, so elsewhere only the repository-level names are (`.gitmodules`,
/// `.mcp.json`, editor and `.claude` directories, `.git/hooks`, `.git/config`).
fn protect_missing_at(
    rules: &mut Rules,
    fs: &dyn FsView,
    root: &Path,
    home: bool,
    allow_git_config: bool,
) {
    let mut wanted: Vec<(PathBuf, FileKind)> = Vec::new();
    wanted.extend(
        PROTECTED_FILES
            .iter()
            .filter(|n| home || REPO_FILES.contains(n))
            .map(|n| (root.join(n), FileKind::File)),
    );
    wanted.extend(PROTECTED_DIRS.iter().map(|n| (root.join(n), FileKind::Dir)));
    wanted.extend(
        PROTECTED_CLAUDE
            .iter()
            .map(|(n, k)| (root.join(".claude").join(n), *k)),
    );
    wanted.push((root.join(".git/hooks"), FileKind::Dir));
    if !allow_git_config {
        wanted.push((root.join(".git/config"), FileKind::File));
    }
    for (path, kind) in wanted {
        if fs.kind(&path).is_none() {
            protect_missing(rules, fs, &path, kind);
        }
    }
}

fn is_protected_name(name: &str) -> bool {
    PROTECTED_FILES.contains(&name) || PROTECTED_DIRS.contains(&name)
}

fn protect_link_target(rules: &mut Rules, fs: &dyn FsView, link: &Path) {
    if let Ok(target) = super::fsview::canonicalize(fs, link)
        && let Some(kind) = fs.kind(&target)
    {
        protect(rules, &target, kind);
    }
}

fn protect(rules: &mut Rules, path: &Path, kind: FileKind) {
    if rules.writable(path) {
        rules.kinds.insert(path.to_path_buf(), kind);
        rules.deny_write.insert(path.to_path_buf());
    }
}

/// Protect a missing `path` by a placeholder at its first missing component.
fn protect_missing(rules: &mut Rules, fs: &dyn FsView, path: &Path, leaf_kind: FileKind) {
    let mut first = path.to_path_buf();
    for ancestor in path.ancestors().skip(1) {
        if fs.kind(ancestor).is_some() {
            break;
        }
        first = ancestor.to_path_buf();
    }
    let parent_ok = first
        .parent()
        .is_some_and(|p| fs.kind(p) == Some(FileKind::Dir) && rules.writable(p));
    if !parent_ok || super::rules::covers(&rules.deny_write, &first) {
        // Nothing in the jail can create it (or it is already protected).
        return;
    }
    let kind = if first == path {
        leaf_kind
    } else {
        FileKind::Dir
    };
    rules.kinds.insert(first.clone(), kind);
    rules.placeholders.insert(first.clone(), kind);
    rules.deny_write.insert(first);
}
