//! Applies a [`LandlockPlan`] to the calling process (and its future
//! children): the allow-only second filesystem layer, TCP port pinning and
//! the signal / abstract-socket scopes.
//!
//! `required` (the default) uses the crate's `HardRequirement`: a kernel
//! without every right, scope or TCP restriction the plan handles makes
//! `restrict` fail, and a result short of "fully enforced" is an error, so
//! nothing runs less confined than planned. Without `required` (a degraded
//! run) the best the kernel offers is applied and the status says what.
//!
//! Rule paths are opened with `openat2(O_PATH, RESOLVE_NO_SYMLINKS)`: plan
//! paths are canonical, so a symlink found now is a change since compilation
//! and fails the step. A missing path is skipped (that only narrows access).
//! Directory-only rights are dropped for rules on files.

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};
use oajail_policy::compile::landlock::{FsAccess, LandlockPlan, Scope as PlanScope};
use rustix::fs::{CWD, Mode, OFlags, ResolveFlags};

/// The ABI whose rights and scopes the ruleset handles (the plan's minimum).
const HANDLED_ABI: ABI = ABI::V6;

/// What the kernel enforces after [`restrict`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LandlockStatus {
    /// Every right, port rule and scope of the plan.
    Full,
    /// Some of it (only without `required`).
    Partial,
    /// Nothing: no Landlock in this kernel (only without `required`).
    NotEnforced,
}

/// Landlock could not be applied as required.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LandlockError {
    /// The ruleset could not be built or enforced.
    #[error("{0}")]
    Ruleset(String),
    /// A rule path could not be opened.
    #[error("rule {path}: {reason}")]
    Path {
        /// The plan path.
        path: String,
        /// The OS error text.
        reason: String,
    },
    /// The kernel enforced less than the plan and Landlock is required.
    #[error("kernel enforces the ruleset only partially (needs landlock abi {0})")]
    Partial(u8),
}

impl From<LandlockError> for crate::error::Failure {
    fn from(e: LandlockError) -> Self {
        crate::error::Failure::msg(e.to_string())
    }
}

fn rs_err(e: impl std::fmt::Display) -> LandlockError {
    LandlockError::Ruleset(lower(&e.to_string()))
}

fn lower(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Restrict the calling process with `plan` (see the module docs).
pub fn restrict(plan: &LandlockPlan, required: bool) -> Result<LandlockStatus, LandlockError> {
    let mut created = handled(plan, required)?.create().map_err(rs_err)?;
    created = add_fs_rules(created, plan)?;
    for port in &plan.tcp_connect {
        created = created
            .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
            .map_err(rs_err)?;
    }
    for port in &plan.tcp_bind {
        created = created
            .add_rule(NetPort::new(*port, AccessNet::BindTcp))
            .map_err(rs_err)?;
    }
    let status = created.restrict_self().map_err(rs_err)?;
    match (status.ruleset, required) {
        (RulesetStatus::FullyEnforced, _) => Ok(LandlockStatus::Full),
        (_, true) => Err(LandlockError::Partial(plan.min_abi)),
        (RulesetStatus::PartiallyEnforced, false) => Ok(LandlockStatus::Partial),
        (RulesetStatus::NotEnforced, false) => Ok(LandlockStatus::NotEnforced),
    }
}

/// The ruleset with every right, port restriction and scope the plan handles.
fn handled(plan: &LandlockPlan, required: bool) -> Result<Ruleset, LandlockError> {
    let level = if required {
        CompatLevel::HardRequirement
    } else {
        CompatLevel::BestEffort
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(level)
        .handle_access(AccessFs::from_all(HANDLED_ABI))
        .map_err(rs_err)?;
    if plan.restrict_tcp {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(HANDLED_ABI))
            .map_err(rs_err)?;
    }
    let mut scopes = BitFlags::<Scope>::empty();
    for s in &plan.scopes {
        scopes |= match s {
            PlanScope::Signal => Scope::Signal,
            PlanScope::AbstractUnixSocket => Scope::AbstractUnixSocket,
        };
    }
    if !scopes.is_empty() {
        ruleset = ruleset.scope(scopes).map_err(rs_err)?;
    }
    Ok(ruleset)
}

fn add_fs_rules(
    mut created: RulesetCreated,
    plan: &LandlockPlan,
) -> Result<RulesetCreated, LandlockError> {
    let resolve = ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    for rule in &plan.fs_rules {
        let fd = match rustix::fs::openat2(
            CWD,
            rule.path.as_str(),
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
            resolve,
        ) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => {
                return Err(LandlockError::Path {
                    path: rule.path.clone(),
                    reason: lower(&std::io::Error::from(e).to_string()),
                });
            }
        };
        let is_dir = rustix::fs::fstat(&fd)
            .map(|st| (st.st_mode & libc::S_IFMT) == libc::S_IFDIR)
            .unwrap_or(false);
        let mut access = to_access(rule.access.iter().copied());
        if !is_dir {
            access &= AccessFs::from_file(HANDLED_ABI);
        }
        if access.is_empty() {
            continue;
        }
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(rs_err)?;
    }
    Ok(created)
}

fn to_access(rights: impl Iterator<Item = FsAccess>) -> BitFlags<AccessFs> {
    let mut out = BitFlags::<AccessFs>::empty();
    for r in rights {
        out |= match r {
            FsAccess::Execute => AccessFs::Execute,
            FsAccess::WriteFile => AccessFs::WriteFile,
            FsAccess::ReadFile => AccessFs::ReadFile,
            FsAccess::ReadDir => AccessFs::ReadDir,
            FsAccess::RemoveDir => AccessFs::RemoveDir,
            FsAccess::RemoveFile => AccessFs::RemoveFile,
            FsAccess::MakeChar => AccessFs::MakeChar,
            FsAccess::MakeDir => AccessFs::MakeDir,
            FsAccess::MakeReg => AccessFs::MakeReg,
            FsAccess::MakeSock => AccessFs::MakeSock,
            FsAccess::MakeFifo => AccessFs::MakeFifo,
            FsAccess::MakeBlock => AccessFs::MakeBlock,
            FsAccess::MakeSym => AccessFs::MakeSym,
            FsAccess::Refer => AccessFs::Refer,
            FsAccess::Truncate => AccessFs::Truncate,
            FsAccess::IoctlDev => AccessFs::IoctlDev,
        };
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use oajail_policy::compile::landlock::{FsRule, READ, WRITE};

    fn plan(rules: Vec<FsRule>) -> LandlockPlan {
        LandlockPlan {
            target_abi: 7,
            min_abi: 6,
            fs_rules: rules,
            restrict_tcp: true,
            tcp_connect: vec![],
            tcp_bind: vec![],
            scopes: vec![PlanScope::Signal, PlanScope::AbstractUnixSocket],
        }
    }

    fn rule(path: &std::path::Path, rights: &[&[FsAccess]]) -> FsRule {
        FsRule {
            path: path.display().to_string(),
            access: rights.iter().flat_map(|r| r.iter().copied()).collect(),
        }
    }

    /// Landlock restricts only the calling thread (no TSYNC), so each test
    /// runs its checks in a thread of its own.
    fn in_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::spawn(f).join().unwrap()
    }

    #[test]
    fn read_only_everywhere_but_one_writable_dir() {
        let dir = std::env::temp_dir().join(format!("oajail-ll-{}", std::process::id()));
        let open = dir.join("open");
        std::fs::create_dir_all(&open).unwrap();
        let (dir2, open2) = (dir.clone(), open.clone());
        let result = in_thread(move || {
            let p = plan(vec![
                rule(std::path::Path::new("/"), &[READ]),
                rule(&open2, &[READ, WRITE]),
            ]);
            let status = restrict(&p, true).unwrap();
            let outside = std::fs::write(dir2.join("no"), "x").map_err(|e| e.raw_os_error());
            let inside = std::fs::write(open2.join("yes"), "x").is_ok();
            let read = std::fs::read_dir("/").is_ok();
            let tcp = std::net::TcpStream::connect("127.0.0.1:9").map_err(|e| e.raw_os_error());
            (status, outside, inside, read, tcp)
        });
        assert_eq!(result.0, LandlockStatus::Full);
        assert_eq!(result.1, Err(Some(libc::EACCES)));
        assert!(result.2 && result.3);
        assert_eq!(result.4.map(drop), Err(Some(libc::EACCES)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_rule_path_is_skipped_and_a_symlink_fails() {
        let dir = std::env::temp_dir().join(format!("oajail-ll-link-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let link = dir.join("link");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/", &link).unwrap();
        let (missing, link2) = (dir.join("missing"), link.clone());
        let ok = in_thread(move || restrict(&plan(vec![rule(&missing, &[READ])]), true).is_ok());
        assert!(ok);
        let err = in_thread(move || restrict(&plan(vec![rule(&link2, &[READ])]), true).err());
        assert!(matches!(err, Some(LandlockError::Path { .. })), "{err:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
