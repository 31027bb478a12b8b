//! Applies a [`LandlockPlan`] to the calling process (and its future
//! children): the allow-only second filesystem layer, TCP port pinning and
//! the signal / abstract-socket scopes.
//!
//! The ruleset handles the rights and scopes of one ABI, the level the
//! negotiation (`crate::negotiate`) chose for this kernel: the plan's
//! minimum on a recent kernel, the kernel's own ABI on an older one (rights,
//! port rules and scopes newer than that ABI are left out; other layers hold
//! those rules there). At that level the crate's `HardRequirement` applies:
//! a ruleset the kernel enforces only partly is an error, so nothing runs
//! less confined than negotiated.
//!
//! With the mount plan applied (every normal run), the supervisor builds
//! the ruleset ahead ([`prebuild`]) while pid 1 is still making its
//! namespaces: every port rule and every path rule whose path the jail sees
//! as the very same inode (no fresh filesystem or mask is mounted on it or
//! an ancestor; the root and `Bind` steps are clones of host paths, and
//! Landlock rules belong to inodes). pid 1 receives the descriptor with "go",
//! adds the few jail-side rules (`/proc`, `/dev`, `/tmp`, masks) and restricts
//! itself ([`Prebuilt`]). This takes about a millisecond of path walks off
//! pid 1's start-up path.
//!
//! Rule paths are opened with `openat2(O_PATH, RESOLVE_NO_SYMLINKS)`: plan
//! paths are canonical, so a symlink found now is a change since compilation
//! and fails the step. A missing path is skipped (that only narrows access).
//! Directory-only rights are dropped for rules on files.

use crate::error::lower_first;
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};
use oajail_policy::compile::landlock::{FsAccess, FsRule, LandlockPlan, Scope as PlanScope};
use oajail_policy::compile::mounts::{MountPlan, MountStep};
use rustix::fs::{CWD, Mode, OFlags, ResolveFlags};
use std::os::fd::{AsFd, OwnedFd};

/// What the kernel enforces after [`restrict`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LandlockStatus {
    /// Every right, port rule and scope of the plan.
    Full,
    /// Every right, port rule and scope of an older ABI (the negotiated one).
    Partial,
}

/// The crate's ABI value for a negotiated level (levels above the newest
/// ABI the crate knows use the newest).
fn abi(level: u8) -> ABI {
    match level {
        0 | 1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        5 => ABI::V5,
        _ => ABI::V6,
    }
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
    /// The kernel enforced less than the negotiated ABI.
    #[error("kernel enforces the ruleset only partially (needs landlock abi {0})")]
    Partial(u8),
}

impl From<LandlockError> for crate::error::Failure {
    fn from(e: LandlockError) -> Self {
        crate::error::Failure::msg(e.to_string())
    }
}

fn rs_err(e: impl std::fmt::Display) -> LandlockError {
    LandlockError::Ruleset(lower_first(&e.to_string()))
}

/// Restrict the calling process with `plan` at ABI `level` (see the module docs).
pub fn restrict(plan: &LandlockPlan, level: u8) -> Result<LandlockStatus, LandlockError> {
    let created = handled(plan, level)?.create().map_err(rs_err)?;
    let created = add_fs_rules(created, plan.fs_rules.iter(), level)?;
    let created = add_net_rules(created, plan, level)?;
    let status = created.restrict_self().map_err(rs_err)?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(status_at(plan, level)),
        _ => Err(LandlockError::Partial(level)),
    }
}

fn status_at(plan: &LandlockPlan, level: u8) -> LandlockStatus {
    if level >= plan.min_abi {
        LandlockStatus::Full
    } else {
        LandlockStatus::Partial
    }
}

/// A required ruleset built by the supervisor, still missing its jail-side
/// path rules (see the module docs).
#[derive(Debug)]
pub struct Prebuilt(OwnedFd);

impl Prebuilt {
    /// The descriptor, to hand to pid 1.
    pub(crate) fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.0.as_fd()
    }

    /// Adopt a descriptor received from the supervisor.
    pub(crate) fn from_fd(fd: OwnedFd) -> Self {
        Prebuilt(fd)
    }

    /// pid 1: add the jail-side rules of `plan` (opened in the jail's view)
    /// and restrict the calling process. The crate's hard requirement already
    /// refused, in the supervisor, anything the kernel cannot fully enforce.
    pub(crate) fn restrict(
        self,
        plan: &LandlockPlan,
        mounts: &MountPlan,
        level: u8,
    ) -> Result<LandlockStatus, LandlockError> {
        let raw = |e: std::io::Error| LandlockError::Ruleset(lower_first(&e.to_string()));
        for rule in plan.fs_rules.iter().filter(|r| jail_side(&r.path, mounts)) {
            if let Some((fd, access)) = open_rule(rule, level)? {
                crate::sys::landlock::add_path_rule(self.fd(), fd.as_fd(), access.bits())
                    .map_err(raw)?;
            }
        }
        crate::sys::landlock::restrict_self(self.fd()).map_err(raw)?;
        Ok(status_at(plan, level))
    }
}

/// Build the ruleset of `plan` at ABI `level` with every rule that does not
/// depend on the jail's mounts `mounts` (supervisor side; see the module docs).
pub fn prebuild(
    plan: &LandlockPlan,
    mounts: &MountPlan,
    level: u8,
) -> Result<Prebuilt, LandlockError> {
    let created = handled(plan, level)?.create().map_err(rs_err)?;
    let host = plan.fs_rules.iter().filter(|r| !jail_side(&r.path, mounts));
    let created = add_net_rules(add_fs_rules(created, host, level)?, plan, level)?;
    Option::<OwnedFd>::from(created)
        .map(Prebuilt)
        .ok_or_else(|| LandlockError::Ruleset("the kernel gave no ruleset descriptor".into()))
}

/// Whether the jail sees `path` through a filesystem of its own: a mount
/// step other than a clone of the host path (`RootBind`, `Bind`) sits on it
/// or on an ancestor, so its inode exists only after pid 1's mounts.
fn jail_side(path: &str, mounts: &MountPlan) -> bool {
    mounts.steps.iter().any(|step| {
        let fresh = !matches!(step, MountStep::RootBind | MountStep::Bind { .. });
        fresh && std::path::Path::new(path).starts_with(step.path())
    })
}

/// The ruleset with every right, port restriction and scope of the plan
/// that ABI `level` has, each a hard requirement.
fn handled(plan: &LandlockPlan, level: u8) -> Result<Ruleset, LandlockError> {
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi(level)))
        .map_err(rs_err)?;
    if restricts_tcp(plan, level) {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi(level)))
            .map_err(rs_err)?;
    }
    let mut scopes = BitFlags::<Scope>::empty();
    for s in &plan.scopes {
        scopes |= match s {
            PlanScope::Signal => Scope::Signal,
            PlanScope::AbstractUnixSocket => Scope::AbstractUnixSocket,
        };
    }
    if !scopes.is_empty() && level >= 6 {
        ruleset = ruleset.scope(scopes).map_err(rs_err)?;
    }
    Ok(ruleset)
}

/// TCP port rules exist from ABI 4.
fn restricts_tcp(plan: &LandlockPlan, level: u8) -> bool {
    plan.restrict_tcp && level >= 4
}

fn add_fs_rules<'a>(
    mut created: RulesetCreated,
    rules: impl Iterator<Item = &'a FsRule>,
    level: u8,
) -> Result<RulesetCreated, LandlockError> {
    for rule in rules {
        if let Some((fd, access)) = open_rule(rule, level)? {
            created = created
                .add_rule(PathBeneath::new(fd, access))
                .map_err(rs_err)?;
        }
    }
    Ok(created)
}

fn add_net_rules(
    mut created: RulesetCreated,
    plan: &LandlockPlan,
    level: u8,
) -> Result<RulesetCreated, LandlockError> {
    if !restricts_tcp(plan, level) {
        return Ok(created);
    }
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
    Ok(created)
}

/// Open one rule's path and work out its rights: `None` when the path is
/// missing (that only narrows access) or no right of ABI `level` applies to it.
fn open_rule(
    rule: &FsRule,
    level: u8,
) -> Result<Option<(OwnedFd, BitFlags<AccessFs>)>, LandlockError> {
    let resolve = ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    let fd = match rustix::fs::openat2(
        CWD,
        rule.path.as_str(),
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        resolve,
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => {
            return Err(LandlockError::Path {
                path: rule.path.clone(),
                reason: lower_first(&std::io::Error::from(e).to_string()),
            });
        }
    };
    let is_dir = rustix::fs::fstat(&fd)
        .map(|st| (st.st_mode & libc::S_IFMT) == libc::S_IFDIR)
        .unwrap_or(false);
    let mut access = to_access(rule.access.iter().copied()) & AccessFs::from_all(abi(level));
    if !is_dir {
        access &= AccessFs::from_file(abi(level));
    }
    Ok((!access.is_empty()).then_some((fd, access)))
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

    fn mounts() -> MountPlan {
        MountPlan {
            steps: vec![
                MountStep::RootBind,
                MountStep::Proc,
                MountStep::Dev,
                MountStep::Tmpfs {
                    path: "/tmp".into(),
                    size_bytes: 1 << 20,
                    skeleton: vec![],
                },
                MountStep::MaskFile {
                    path: "/etc/shadow".into(),
                    why: "denyRead".into(),
                },
                MountStep::MaskDir {
                    path: "/home/u".into(),
                    skeleton: vec![],
                    why: "denyRead".into(),
                },
                MountStep::Bind {
                    path: "/work".into(),
                    writable: true,
                    why: "allowWrite".into(),
                },
            ],
            warnings: vec![],
        }
    }

    #[test]
    fn fresh_filesystems_and_masks_are_jail_side() {
        let m = mounts();
        for p in [
            "/proc",
            "/proc/self",
            "/dev/null",
            "/tmp",
            "/tmp/x",
            "/etc/shadow",
        ] {
            assert!(jail_side(p, &m), "{p}");
        }
        // Below a mask the jail sees the mask's own (empty) inodes, and a
        // host path re-bound inside it only exists after the mounts.
        assert!(jail_side("/home/u/proj", &m));
    }

    #[test]
    fn host_clones_are_host_side() {
        let m = mounts();
        for p in [
            "/",
            "/etc",
            "/etc/shadow2",
            "/etc/shadowx/y",
            "/work",
            "/work/a",
            "/tmpx",
            "/home/uu",
        ] {
            assert!(!jail_side(p, &m), "{p}");
        }
    }

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
            let status = restrict(&p, 6).unwrap();
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
        let ok = in_thread(move || restrict(&plan(vec![rule(&missing, &[READ])]), 6).is_ok());
        assert!(ok);
        let err = in_thread(move || restrict(&plan(vec![rule(&link2, &[READ])]), 6).err());
        assert!(matches!(err, Some(LandlockError::Path { .. })), "{err:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Why the negotiation keeps Landlock off at ABI 1 beside the mounts: a
    /// ruleset without the `refer` right refuses every cross-directory
    /// rename, even inside a writable rule; from ABI 2 it is granted.
    #[test]
    fn abi_1_refuses_cross_directory_renames_abi_2_allows_them() {
        let renamed = |level: u8| {
            let dir =
                std::env::temp_dir().join(format!("oajail-ll-mv{level}-{}", std::process::id()));
            std::fs::create_dir_all(dir.join("a")).unwrap();
            std::fs::create_dir_all(dir.join("b")).unwrap();
            std::fs::write(dir.join("a/f"), "x").unwrap();
            let d = dir.clone();
            let result = in_thread(move || {
                let p = plan(vec![
                    rule(std::path::Path::new("/"), &[READ]),
                    rule(&d, &[READ, WRITE]),
                ]);
                assert_eq!(
                    restrict(&p, level).unwrap(),
                    if level >= 6 {
                        LandlockStatus::Full
                    } else {
                        LandlockStatus::Partial
                    }
                );
                std::fs::rename(d.join("a/f"), d.join("b/f")).map_err(|e| e.raw_os_error())
            });
            std::fs::remove_dir_all(&dir).unwrap();
            result
        };
        assert_eq!(renamed(1), Err(Some(libc::EXDEV)));
        assert_eq!(renamed(2), Ok(()));
    }
}
