//! The guard's plan, built from the resolved rules: which roots are
//! guarded, the user's `denyWrite` entries, the home directory, and which
//! calls the command's filter sends to pid 1. The decision itself, which
//! pid 1 runs, is `crate::guard`.

use super::rules::{Rules, TMP};
use crate::Policy;
use crate::guard::{FilterShape, FlagsArg, GuardPlan, ModeArg, PathArg};
use std::path::Path;

/// The calls always sent to pid 1, on every architecture (kernel names).
const NOTIFY: &[&str] = &[
    "mkdirat",
    "mknodat",
    "linkat",
    "symlinkat",
    "renameat",
    "renameat2",
    "unlinkat",
    "truncate",
    "fchmodat",
    "fchownat",
    "setxattr",
    "lsetxattr",
    "removexattr",
    "lremovexattr",
];

/// x86_64-only calls always sent to pid 1.
const LEGACY_NOTIFY: &[&str] = &[
    "creat", "mkdir", "mknod", "link", "symlink", "rename", "unlink", "rmdir", "chmod", "chown",
    "lchown", "utime", "utimes",
];

/// Build the guard plan from the resolved rules.
pub(crate) fn build(
    policy: &Policy,
    rules: &Rules,
    home: &Path,
    config_home: Option<&Path>,
) -> GuardPlan {
    let strings = |it: &mut dyn Iterator<Item = &std::path::PathBuf>| {
        it.map(|p| p.display().to_string()).collect::<Vec<_>>()
    };
    let roots = strings(&mut rules.allow_write.iter().filter(|p| rules.writable(p)));
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
    GuardPlan {
        roots,
        private,
        deny_write: strings(&mut rules.deny_write.iter()),
        home: home.display().to_string(),
        config_home,
        allow_git_config: policy.filesystem.allow_git_config,
        filter: FilterShape {
            notify: NOTIFY.iter().map(|s| (*s).to_owned()).collect(),
            legacy: LEGACY_NOTIFY.iter().map(|s| (*s).to_owned()).collect(),
            notify_if_write: vec![arg("openat", 2, false), arg("open", 1, true)],
            notify_if_path: vec![
                PathArg {
                    syscall: "utimensat".into(),
                    path_arg: 1,
                    legacy: false,
                },
                PathArg {
                    syscall: "futimesat".into(),
                    path_arg: 1,
                    legacy: true,
                },
            ],
            notify_if_mode: vec![ModeArg {
                syscall: "fchmod".into(),
                mode_arg: 1,
            }],
            watch: vec!["umask".into()],
            enosys: ["openat2", "fchmodat2", "setxattrat", "removexattrat"]
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
        },
    }
}
