//! The guard's plan, built from the resolved rules: which roots are
//! guarded, the user's `denyWrite` entries, the home directory, and which
//! calls the command's filter sends to pid 1. The decision itself, which
//! pid 1 runs, is `crate::guard`.
//!
//! Which calls go to pid 1, by class (`docs/enforcement.md`, "What reaches
//! pid 1"): every call that makes a name or writes a file; metadata calls
//! only when their effect can make something run or let others change a
//! file (a risky mode, a new owner), never for timestamps; removals
//! always when a `denyWrite` entry below a guarded root could refuse one,
//! else those named by path (for the report of the kernel's refusal
//! outside the roots: `REMOVE`).

use super::rules::{Rules, TMP};
use crate::Policy;
use crate::guard::names::XdgDirs;
use crate::guard::{
    ArgEq, FilterShape, FlagsArg, GuardPlan, Ids, ModeArg, OwnerArgs, removals_decided,
};
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
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
];

/// x86_64-only calls always sent to pid 1.
const LEGACY_NOTIFY: &[&str] = &["creat", "mkdir", "mknod", "link", "symlink", "rename"];

/// Removals (`unlinkat` on every architecture, then x86_64's own). With a
/// `denyWrite` entry below a root, every one reaches pid 1, which decides
/// and performs it. Without one the guard refuses none, but the kernel
/// refuses those outside the roots (`EROFS` from the read-only root,
/// `EACCES` from Landlock), and only pid 1 can turn that into the line
/// naming the entry to add (issue 29). Then only `unlinkat` from the
/// working directory or by absolute path reaches it (`AT_FDCWD`: how `rm`
/// names what the user typed); pid 1 lets one spelled inside a root go on
/// and performs the rest (`jail/src/guard/serve.rs`). Not the removals
/// relative to a directory descriptor (each entry of an `rm -rf`), nor
/// x86_64's `unlink` and `rmdir` (what `git checkout` makes for each
/// changed file): a round trip each costs more than the removal (measured:
/// `docs/benchmarks-history.md`, "Refusals the user never saw").
const REMOVE: &[&str] = &["unlinkat"];
const LEGACY_REMOVE: &[&str] = &["unlink", "rmdir"];

/// `AT_FDCWD`, as the filter reads the low word of an `int` argument.
const AT_FDCWD: i32 = -100;

/// Build the guard plan from the resolved rules.
pub(crate) fn build(
    policy: &Policy,
    rules: &Rules,
    home: &Path,
    xdg: &XdgDirs,
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
    // Each XDG directory only when set elsewhere than its place in the home.
    let xdg = XdgDirs::elsewhere(
        home,
        xdg.config.clone(),
        xdg.data.clone(),
        xdg.state.clone(),
    );
    let shown = |d: &Option<PathBuf>| d.as_ref().map(|d| d.display().to_string());
    let arg = |syscall: &str, flags_arg: u8, legacy: bool| FlagsArg {
        syscall: syscall.into(),
        flags_arg,
        legacy,
    };
    let deny_write: Vec<PathBuf> = rules.deny_write.iter().cloned().collect();
    let decided_removals = removals_decided(&roots, &deny_write);
    let names = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let mut notify = names(NOTIFY);
    let mut legacy = names(LEGACY_NOTIFY);
    let mut notify_if_eq = Vec::new();
    if decided_removals {
        notify.extend(names(REMOVE));
        legacy.extend(names(LEGACY_REMOVE));
    } else {
        notify_if_eq.push(ArgEq {
            syscall: "unlinkat".into(),
            arg: 0,
            value: AT_FDCWD as u32,
        });
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
        config_home: shown(&xdg.config),
        data_home: shown(&xdg.data),
        state_home: shown(&xdg.state),
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
                owner("fchown", 1, false),
                owner("chown", 1, true),
                owner("lchown", 1, true),
            ],
            ids,
            notify_if_eq,
            watch: names(&["umask", "chdir", "fchdir"]),
            enosys: names(&["openat2", "fchmodat2", "setxattrat", "removexattrat"]),
        },
    }
}
