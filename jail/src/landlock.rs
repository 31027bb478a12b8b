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
//! pid 1's start-up path. pid 1's copy of the spec then carries only those
//! jail-side rules ([`jail_side_only`]): the read complement's hundreds of
//! rules would only be parsed there. Not where the guard's mover needs every
//! read rule (Landlock ABI 1).
//!
//! Rule paths are opened with `openat2(O_PATH, RESOLVE_NO_SYMLINKS)`: plan
//! paths are canonical, so a symlink found now is a change since compilation
//! and fails the step. A missing path is skipped (that only narrows access).
//! Directory-only rights are dropped for rules on files (the kernel tells
//! which paths are files: see `add_path_rule`). Paths below an earlier
//! rule's directory are opened beneath its descriptor (see `Opener`).

use crate::error::lower_first;
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};
use oajail_policy::compile::landlock::{FsAccess, FsRule, LandlockPlan, Scope as PlanScope};
use oajail_policy::compile::mounts::{MountPlan, MountStep};
use rustix::fs::{CWD, Mode, OFlags, ResolveFlags};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

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
    /// The landlock crate refused to build the ruleset.
    #[error("{}", lower_first(&.0.to_string()))]
    Ruleset(#[source] landlock::RulesetError),
    /// A Landlock system call failed.
    #[error("{}", lower_first(&.0.to_string()))]
    Os(#[source] std::io::Error),
    /// A set-up step around the ruleset failed (no_new_privs, no descriptor).
    #[error("{0}")]
    Setup(String),
    /// A rule path could not be opened.
    #[error("rule {path}: {}", lower_first(&source.to_string()))]
    Path {
        /// The plan path.
        path: String,
        /// Why it could not be opened.
        #[source]
        source: std::io::Error,
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

/// Restrict the calling process with `plan` at ABI `level` (see the module
/// docs). Sets no_new_privs first, as the kernel requires of a process
/// without `CAP_SYS_ADMIN`.
pub fn restrict(plan: &LandlockPlan, level: u8) -> Result<LandlockStatus, LandlockError> {
    let ruleset = create(plan, level)?;
    add_fs_rules(ruleset.as_fd(), plan.fs_rules.iter(), level)?;
    crate::caps::no_new_privs().map_err(|f| LandlockError::Setup(f.msg))?;
    crate::sys::landlock::restrict_self(ruleset.as_fd()).map_err(LandlockError::Os)?;
    Ok(status_at(plan, level))
}

/// The ruleset of `plan` at ABI `level` with its port rules: every handled
/// right, port rule and scope is a hard requirement of the crate, so a
/// kernel that cannot enforce them all fails here, and the path rules added
/// to the descriptor afterwards carry only rights of that same ABI.
fn create(plan: &LandlockPlan, level: u8) -> Result<OwnedFd, LandlockError> {
    let created = handled(plan, level)?
        .create()
        .map_err(LandlockError::Ruleset)?;
    let created = add_net_rules(created, plan, level)?;
    Option::<OwnedFd>::from(created)
        .ok_or_else(|| LandlockError::Setup("the kernel gave no ruleset descriptor".into()))
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
        let jail = plan.fs_rules.iter().filter(|r| jail_side(&r.path, mounts));
        add_fs_rules(self.fd(), jail, level)?;
        crate::sys::landlock::restrict_self(self.fd()).map_err(LandlockError::Os)?;
        Ok(status_at(plan, level))
    }
}

/// Without a mount view (the container tier) no rule depends on the jail,
/// and the ruleset is built by both sides at once: the supervisor creates
/// it ([`shared`]), hands pid 1 the descriptor with the spec and adds the
/// first half of the path rules ([`Half::First`]) while pid 1 adds the
/// second; the go-ahead comes once the supervisor's half is in, and pid 1
/// enforces the whole ([`Built::restrict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Half {
    /// The supervisor's.
    First,
    /// pid 1's.
    Second,
}

/// The ruleset of `plan` at ABI `level`, with its port rules and no path
/// rule yet (see [`Half`]).
pub(crate) fn shared(plan: &LandlockPlan, level: u8) -> Result<OwnedFd, LandlockError> {
    create(plan, level)
}

/// Add `half` of `plan`'s path rules to `ruleset`.
pub(crate) fn add_half(
    ruleset: BorrowedFd<'_>,
    plan: &LandlockPlan,
    level: u8,
    half: Half,
) -> Result<(), LandlockError> {
    let (first, second) = plan.fs_rules.split_at(plan.fs_rules.len() / 2);
    let rules = if half == Half::First { first } else { second };
    add_fs_rules(ruleset, rules.iter(), level)
}

/// Build the whole ruleset of `plan` at ABI `level` without enforcing it
/// (pid 1 without a mount view, when the supervisor did not share one).
pub(crate) fn build(plan: &LandlockPlan, level: u8) -> Result<Built, LandlockError> {
    let fd = create(plan, level)?;
    add_fs_rules(fd.as_fd(), plan.fs_rules.iter(), level)?;
    Ok(Built(fd))
}

/// A whole ruleset built ahead ([`build`], or [`Half`] by [`Half`]).
#[derive(Debug)]
pub(crate) struct Built(OwnedFd);

impl Built {
    /// pid 1: add the second half of the rules to the ruleset the
    /// supervisor shared (it adds the first meanwhile).
    pub(crate) fn finish_shared(
        ruleset: OwnedFd,
        plan: &LandlockPlan,
        level: u8,
    ) -> Result<Built, LandlockError> {
        add_half(ruleset.as_fd(), plan, level, Half::Second)?;
        Ok(Built(ruleset))
    }

    /// Enforce it on the calling process (no_new_privs is set already).
    pub(crate) fn restrict(
        self,
        plan: &LandlockPlan,
        level: u8,
    ) -> Result<LandlockStatus, LandlockError> {
        crate::sys::landlock::restrict_self(self.0.as_fd()).map_err(LandlockError::Os)?;
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
    let fd = create(plan, level)?;
    let host = plan.fs_rules.iter().filter(|r| !jail_side(&r.path, mounts));
    add_fs_rules(fd.as_fd(), host, level)?;
    Ok(Prebuilt(fd))
}

/// `plan` with only its jail-side path rules: pid 1's copy when the
/// supervisor prebuilds the rest ([`prebuild`]). Leaving rules out only takes
/// grants away, so a copy that ended up used alone would deny more, not less.
pub(crate) fn jail_side_only(plan: &LandlockPlan, mounts: &MountPlan) -> LandlockPlan {
    let LandlockPlan {
        target_abi,
        min_abi,
        fs_rules,
        restrict_tcp,
        tcp_connect,
        tcp_bind,
        scopes,
    } = plan;
    LandlockPlan {
        target_abi: *target_abi,
        min_abi: *min_abi,
        fs_rules: (fs_rules.iter())
            .filter(|r| jail_side(&r.path, mounts))
            .cloned()
            .collect(),
        restrict_tcp: *restrict_tcp,
        tcp_connect: tcp_connect.clone(),
        tcp_bind: tcp_bind.clone(),
        scopes: scopes.clone(),
    }
}

/// Add path rules to a created ruleset's descriptor. The crate's
/// `PathBeneath` would `fstat` every descriptor to tell files from
/// directories; see [`add_path_rule`] for why the kernel is asked instead.
fn add_fs_rules<'a>(
    ruleset: BorrowedFd<'_>,
    rules: impl Iterator<Item = &'a FsRule>,
    level: u8,
) -> Result<(), LandlockError> {
    let mut opener = Opener::default();
    for rule in rules {
        if let Some((fd, access)) = opener.open(rule, level)?
            && add_path_rule(ruleset, fd.as_fd(), access, level)?
        {
            opener.keep(&rule.path, fd);
        }
    }
    Ok(())
}

/// Add one path rule; false when the path turned out not to be a directory.
/// The kernel refuses directory-only rights on anything else with `EINVAL`
/// (Landlock gives files only the rights that make sense for files), and
/// the rule is then added again with its file rights. Asking the kernel
/// replaces an `fstat` per rule, which on a network or shared file system
/// (NFS, 9p: the kernel-matrix VM's root) is a round trip to the server and
/// made most of the start-up time there. The plan already gives the files
/// it listed file rights only, so this is the fallback for the rest (and
/// for a directory that became a file since). The rights are a subset of the
/// ruleset's own (both are ABI `level`'s), so no other `EINVAL` is possible
/// for them, and a retry could only narrow a rule, never widen one.
fn add_path_rule(
    ruleset: BorrowedFd<'_>,
    fd: BorrowedFd<'_>,
    access: BitFlags<AccessFs>,
    level: u8,
) -> Result<bool, LandlockError> {
    if access.is_empty() {
        return Ok(true);
    }
    match crate::sys::landlock::add_path_rule(ruleset, fd, access.bits()) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let file = access & AccessFs::from_file(abi(level));
            if file == access {
                return Err(LandlockError::Os(e));
            }
            if !file.is_empty() {
                crate::sys::landlock::add_path_rule(ruleset, fd, file.bits())
                    .map_err(LandlockError::Os)?;
            }
            Ok(false)
        }
        Err(e) => Err(LandlockError::Os(e)),
    }
}

/// Whether the jail sees `path` through a filesystem of its own: a mount
/// step other than a clone of the host path (`RootBind`, `Bind`) sits on it
/// or on an ancestor, so its inode exists only after pid 1's mounts.
fn jail_side(path: &str, mounts: &MountPlan) -> bool {
    mounts.steps.iter().any(|step| {
        let fresh = !matches!(step, MountStep::RootBind | MountStep::Bind { .. });
        fresh && under(path, step.path())
    })
}

/// Whether `path` is `dir` or lies below it. Both are canonical absolute
/// plan paths (no `.`, `..`, doubled or trailing slashes), so a byte prefix
/// ending at a separator is the component test `Path::starts_with` makes,
/// without splitting both paths into components for every pair (this runs
/// for every rule against every mount step and every open ancestor).
fn under(path: &str, dir: &str) -> bool {
    let dir = dir.strip_suffix('/').unwrap_or(dir);
    match path.strip_prefix(dir) {
        Some(rest) => rest.is_empty() || rest.starts_with('/'),
        None => false,
    }
}

/// The ruleset with every right, port restriction and scope of the plan
/// that ABI `level` has, each a hard requirement.
fn handled(plan: &LandlockPlan, level: u8) -> Result<Ruleset, LandlockError> {
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi(level)))
        .map_err(LandlockError::Ruleset)?;
    if restricts_tcp(plan, level) {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi(level)))
            .map_err(LandlockError::Ruleset)?;
    }
    let mut scopes = BitFlags::<Scope>::empty();
    for s in &plan.scopes {
        scopes |= match s {
            PlanScope::Signal => Scope::Signal,
            PlanScope::AbstractUnixSocket => Scope::AbstractUnixSocket,
        };
    }
    if !scopes.is_empty() && level >= 6 {
        ruleset = ruleset.scope(scopes).map_err(LandlockError::Ruleset)?;
    }
    Ok(ruleset)
}

/// TCP port rules exist from ABI 4.
fn restricts_tcp(plan: &LandlockPlan, level: u8) -> bool {
    plan.restrict_tcp && level >= 4
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
            .map_err(LandlockError::Ruleset)?;
    }
    for port in &plan.tcp_bind {
        created = created
            .add_rule(NetPort::new(*port, AccessNet::BindTcp))
            .map_err(LandlockError::Ruleset)?;
    }
    Ok(created)
}

/// Opens rule paths relative to the nearest directory opened for an earlier
/// rule. Plans list rules in path order, so the read complement's many
/// siblings (every entry of `/etc` beside `/etc/shadow`, say) each cost one
/// path component to resolve instead of the whole path: the supervisor's
/// share of the start-up path is mostly these lookups. `RESOLVE_BENEATH`
/// keeps every open under its ancestor's inode, the very inode that
/// ancestor's rule was given to; symlinks still fail the step as before.
#[derive(Default)]
struct Opener {
    /// Open directories, each below the one before it.
    dirs: Vec<(String, OwnedFd)>,
}

impl Opener {
    /// Open `rule`'s path, with the rights of ABI `level` its rule asks
    /// for: `None` when it is missing (that only narrows access).
    fn open(
        &mut self,
        rule: &FsRule,
        level: u8,
    ) -> Result<Option<(OwnedFd, BitFlags<AccessFs>)>, LandlockError> {
        let path = rule.path.as_str();
        while self.dirs.last().is_some_and(|(dir, _)| !under(path, dir)) {
            self.dirs.pop();
        }
        let opened = match self.dirs.last() {
            Some((dir, fd)) if dir.len() < path.len() => {
                let rel = path[dir.len()..].trim_start_matches('/');
                open_at(fd.as_fd(), rel, ResolveFlags::BENEATH)
            }
            _ => open_at(CWD, path, ResolveFlags::empty()),
        };
        let fd = match opened {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(e) => {
                return Err(LandlockError::Path {
                    path: rule.path.clone(),
                    source: std::io::Error::from(e),
                });
            }
        };
        let access = to_access(rule.access.iter().copied()) & AccessFs::from_all(abi(level));
        Ok(Some((fd, access)))
    }

    /// Keep a path that may be a directory as the ancestor of the rules
    /// that follow it (a file kept is dropped at the next rule, which
    /// cannot lie below it).
    fn keep(&mut self, path: &str, fd: OwnedFd) {
        self.dirs.push((path.to_owned(), fd));
    }
}

/// `openat2(O_PATH)` without following any symlink or magic link.
fn open_at(dir: impl AsFd, path: &str, extra: ResolveFlags) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat2(
        dir,
        path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS | extra,
    )
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

/// Whether `landlock_restrict_self` works here (a container's seccomp
/// profile may refuse the Landlock calls): restricts the calling process,
/// a throw-away child of the environment probe (`envprobe.rs`).
pub(crate) fn probe_restrict() -> std::io::Result<()> {
    let restricted = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::ReadFile)
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self());
    restricted.map(|_| ()).map_err(|e| {
        // The errno of the refused call, when the chain carries one.
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(err) = source {
            if let Some(io) = err.downcast_ref::<std::io::Error>()
                && let Some(n) = io.raw_os_error()
            {
                return std::io::Error::from_raw_os_error(n);
            }
            source = err.source();
        }
        std::io::Error::other(lower_first(&e.to_string()))
    })
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
            shm_size_bytes: None,
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

    #[test]
    fn pid1_copy_keeps_only_jail_side_rules() {
        let p = std::path::Path::new;
        let full = plan(vec![
            rule(p("/"), &[READ]),
            rule(p("/etc/hosts"), &[READ]),
            rule(p("/tmp"), &[READ, WRITE]),
            rule(p("/dev/null"), &[READ]),
            rule(p("/work"), &[READ, WRITE]),
        ]);
        let copy = jail_side_only(&full, &mounts());
        let kept: Vec<&str> = copy.fs_rules.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(kept, ["/tmp", "/dev/null"]);
        assert_eq!(copy.fs_rules[0], full.fs_rules[2]);
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
        // The OS error is kept as the source, its text lower-cased in the message.
        let err = err.unwrap();
        let source = std::error::Error::source(&err).map(ToString::to_string);
        assert_eq!(
            source.as_deref(),
            Some("Too many levels of symbolic links (os error 40)")
        );
        assert!(
            err.to_string()
                .ends_with(": too many levels of symbolic links (os error 40)")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The supervisor's path: rules below an earlier rule's directory are
    /// opened beneath it and the ancestors unwind for a sibling, and each
    /// rule still gets exactly its own rights; a symlink below a kept
    /// ancestor still fails the step.
    #[test]
    fn prebuilt_nested_rules_keep_their_rights() {
        let dir = std::env::temp_dir().join(format!("oajail-ll-nest-{}", std::process::id()));
        let (ro, rw, other) = (dir.join("ro"), dir.join("ro/rw"), dir.join("other"));
        std::fs::create_dir_all(&rw).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(rw.join("f"), "x").unwrap();
        let _ = std::fs::remove_file(ro.join("link"));
        std::os::unix::fs::symlink("/", ro.join("link")).unwrap();
        let none = MountPlan {
            steps: vec![],
            warnings: vec![],
            shm_size_bytes: None,
        };
        let rules = vec![
            rule(&dir, &[READ]),
            rule(&ro, &[READ]),
            rule(&ro.join("missing"), &[READ, WRITE]),
            rule(&rw, &[READ, WRITE]),
            rule(&rw.join("f"), &[READ]),
            rule(&other, &[READ, WRITE]),
        ];
        let (d, m) = (dir.clone(), none.clone());
        let writes = in_thread(move || {
            let built = prebuild(&plan(rules), &m, 6).unwrap();
            // As pid 1 does before restricting (unprivileged, it must).
            crate::caps::no_new_privs().unwrap();
            built.restrict(&plan(vec![]), &m, 6).unwrap();
            let w = |p: &str| std::fs::write(d.join(p), "y").map_err(|e| e.raw_os_error());
            [w("top"), w("ro/x"), w("ro/rw/y"), w("other/z")]
        });
        let denied = Err(Some(libc::EACCES));
        assert_eq!(writes, [denied, denied, Ok(()), Ok(())]);
        let linked = vec![rule(&ro, &[READ]), rule(&ro.join("link"), &[READ])];
        let err = in_thread(move || prebuild(&plan(linked), &none, 6).err());
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
