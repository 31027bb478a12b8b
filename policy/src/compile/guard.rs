//! The guard's plan, built from the resolved rules: which roots are
//! guarded, the user's `denyWrite` entries, the home directory, and which
//! calls the command's filter sends to pid 1. The decision itself, which
//! pid 1 runs, is `crate::guard`.
//!
//! Which calls go to pid 1, by class (`docs/enforcement.md`, "What reaches
//! pid 1"): every call that makes a name or writes a file; metadata calls
//! only when their effect can make something run or let others change a
//! file (a risky mode, a new owner), never for timestamps; removals only
//! when something could refuse them: a `denyWrite` entry below a guarded
//! root (a removal plants nothing, so the decision allows every other).

use super::rules::{Rules, TMP};
use crate::Policy;
use crate::guard::{FilterShape, FlagsArg, GuardPlan, Ids, ModeArg, OwnerArgs};
use std::path::{Path, PathBuf};

/// The calls always sent to pid 1, on every architecture (kernel names).
const NOTIFY: &[&str] = &[
    "mkdirat",
    "mknodat",
    "linkat",
    "symlinkat",
    "renameat",
    "renameat2",
    "truncate",
    "setxattr",
    "lsetxattr",
    "removexattr",
    "lremovexattr",
];

/// x86_64-only calls always sent to pid 1.
const LEGACY_NOTIFY: &[&str] = &["creat", "mkdir", "mknod", "link", "symlink", "rename"];

/// Removals: sent to pid 1 only when a `denyWrite` entry lies below a
/// guarded root (`unlinkat` on every architecture, then x86_64's own).
const REMOVE: &[&str] = &["unlinkat"];
const LEGACY_REMOVE: &[&str] = &["unlink", "rmdir"];

/// Build the guard plan from the resolved rules.
pub(crate) fn build(
    policy: &Policy,
    rules: &Rules,
    home: &Path,
    config_home: Option<&Path>,
    ids: Ids,
) -> GuardPlan {
    let strings = |it: &mut dyn Iterator<Item = &PathBuf>| {
        it.map(|p| p.display().to_string()).collect::<Vec<_>>()
    };
    let roots: Vec<PathBuf> = (rules.allow_write.iter())
        .filter(|p| rules.writable(p))
        .cloned()
        .collect();
    let mut private = vec!["/dev".to_owned()];
    if rules.private.contains(Path::new(TMP)) {
        private.push(TMP.to_owned());
    }
    let config_home = config_home
        .filter(|c| *c != home.join(".config"))
        .map(|c| c.display().to_string());
    let arg = |syscall: &str, flags_arg: u8, legacy: bool| FlagsArg {
        syscall: syscall.into(),
        flags_arg,
        legacy,
    };
    let deny_write: Vec<PathBuf> = rules.deny_write.iter().cloned().collect();
    let decided_removals = deny_write
        .iter()
        .any(|d| roots.iter().any(|r| d.starts_with(r)));
    let names = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let mut notify = names(NOTIFY);
    let mut legacy = names(LEGACY_NOTIFY);
    if decided_removals {
        notify.extend(names(REMOVE));
        legacy.extend(names(LEGACY_REMOVE));
    }
    let mode = |syscall: &str, mode_arg: u8, legacy: bool| ModeArg {
        syscall: syscall.into(),
        mode_arg,
        legacy,
    };
    let owner = |syscall: &str, uid_arg: u8, legacy: bool| OwnerArgs {
        syscall: syscall.into(),
        uid_arg,
        legacy,
    };
    GuardPlan {
        roots: roots.iter().map(|p| p.display().to_string()).collect(),
        private,
        deny_write: strings(&mut deny_write.iter()),
        home: home.display().to_string(),
        config_home,
        allow_git_config: policy.filesystem.allow_git_config,
        filter: FilterShape {
            notify,
            legacy,
            notify_if_write: vec![arg("openat", 2, false), arg("open", 1, true)],
            notify_if_mode: vec![
                mode("fchmod", 1, false),
                mode("fchmodat", 2, false),
                mode("chmod", 1, true),
            ],
            notify_unless_owner: vec![
                owner("fchownat", 2, false),
                owner("chown", 1, true),
                owner("lchown", 1, true),
            ],
            ids,
            watch: names(&["umask", "chdir", "fchdir"]),
            enosys: names(&["openat2", "fchmodat2", "setxattrat", "removexattrat"]),
        },
    }
}
