//! Where oajail runs, and what each step of a run does there: `oajail
//! doctor` is the run, tried in throw-away children.
//!
//! [`steps`] takes every step a run
//! takes, in the order pid 1 takes them, in a child cloned into new user
//! and pid namespaces (id maps, mount, network with `lo` up, ipc and uts
//! namespaces, `sethostname`, the mount API, a fresh `/proc`, `pivot_root`
//! and, where that is refused, its fallback) and in a plain child
//! (`landlock_restrict_self`, a seccomp filter with a listener); each child
//! reports what every step did through a pipe and exits. Nothing is left
//! behind: the children's namespaces and mounts die with them.

use crate::negotiate::{Outcome, Steps};
use crate::sys::process::{Forked, clone_fork, exit_now};
use rustix::fs::{CWD, Mode, OFlags};
use rustix::mount::{FsMountFlags, FsOpenFlags, MountAttrFlags, MoveMountFlags, OpenTreeFlags};
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};

/// Try every step in throw-away children (what `doctor` does). The caller
/// must be single-threaded (the children are forked copies of it).
pub fn steps() -> Steps {
    let ns = namespace_steps();
    let (landlock, seccomp_listener) = layer_steps();
    Steps {
        landlock,
        seccomp_listener,
        ..ns
    }
}

/// The namespace and mount steps only, in one child (what a run does
/// before it negotiates: Landlock and the seccomp listener are assumed, as
/// the cheap probes found them offered, and a refusal there stops the run
/// at that step).
pub fn run_steps() -> Steps {
    namespace_steps()
}

/// How an [`Outcome`] crosses the pipe.
fn encode(o: Outcome) -> i32 {
    match o {
        Outcome::Works | Outcome::Assumed => 0,
        Outcome::Refused { errno } => errno.max(1),
        Outcome::Untried => -1,
    }
}

fn decode(v: i32) -> Outcome {
    match v {
        0 => Outcome::Works,
        v if v > 0 => Outcome::Refused { errno: v },
        _ => Outcome::Untried,
    }
}

/// Run `child` in a process cloned with `flags` and collect the outcomes
/// it writes; `N` of them, [`Outcome::Untried`] for any it did not.
fn in_child<const N: usize>(
    flags: libc::c_int,
    child: impl FnOnce() -> [Outcome; N],
) -> std::io::Result<[Outcome; N]> {
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    match clone_fork(flags)? {
        Forked::Child => {
            drop(read);
            let bytes: Vec<u8> = child()
                .iter()
                .flat_map(|o| encode(*o).to_ne_bytes())
                .collect();
            let ok = std::fs::File::from(write).write_all(&bytes).is_ok();
            exit_now(if ok { 0 } else { 1 })
        }
        Forked::Parent(pid) => {
            drop(write);
            let mut bytes = Vec::new();
            let _ = std::fs::File::from(read).read_to_end(&mut bytes);
            let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
            let mut out = [Outcome::Untried; N];
            for (slot, chunk) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                let v = i32::from_ne_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
                *slot = decode(v);
            }
            Ok(out)
        }
    }
}

/// The namespace and mount steps, as pid 1 takes them.
fn namespace_steps() -> Steps {
    let (uid, gid) = crate::caller_ids();
    let run = in_child(libc::CLONE_NEWUSER | libc::CLONE_NEWPID, || {
        let mut t = Trial {
            out: [Outcome::Untried; 11],
        };
        t.run(uid, gid);
        t.out
    });
    let o = match run {
        Ok(o) => o,
        Err(e) => {
            let errno = e.raw_os_error().unwrap_or(libc::EPERM);
            return Steps::without_user_namespace(errno);
        }
    };
    Steps {
        user_namespace: Outcome::Works,
        id_maps: o[0],
        mount_namespace: o[1],
        net_namespace: o[2],
        loopback: o[3],
        ipc_namespace: o[4],
        uts_namespace: o[5],
        hostname: o[6],
        mount_api: o[7],
        fresh_proc: o[8],
        pivot_root: o[9],
        move_chroot: o[10],
        ..Steps::ASSUMED
    }
}

/// The outcomes of one child's steps, in [`namespace_steps`]'s order.
struct Trial {
    out: [Outcome; 11],
}

impl Trial {
    /// Set step `i` from `r`; whether it worked.
    fn set<T, E: Into<std::io::Error>>(&mut self, i: usize, r: Result<T, E>) -> Option<T> {
        match r {
            Ok(v) => {
                self.out[i] = Outcome::Works;
                Some(v)
            }
            Err(e) => {
                self.out[i] = Outcome::of::<(), _>(Err(e));
                None
            }
        }
    }

    fn run(&mut self, uid: u32, gid: u32) {
        use nix::sched::{CloneFlags, unshare};
        if self.set(0, crate::ns::write_id_maps(uid, gid)).is_none() {
            return;
        }
        let mounts = unshare(CloneFlags::CLONE_NEWNS)
            .map_err(std::io::Error::from)
            .and_then(|()| {
                rustix::mount::mount_change(
                    "/",
                    rustix::mount::MountPropagationFlags::PRIVATE
                        | rustix::mount::MountPropagationFlags::REC,
                )
                .map_err(std::io::Error::from)
            });
        let mounts = self.set(1, mounts).is_some();
        if self.set(2, unshare(CloneFlags::CLONE_NEWNET)).is_some() {
            self.set(3, crate::net::loopback_up());
        }
        self.set(4, unshare(CloneFlags::CLONE_NEWIPC));
        if self.set(5, unshare(CloneFlags::CLONE_NEWUTS)).is_some() {
            self.set(6, nix::unistd::sethostname("oajail-probe"));
        }
        if !mounts {
            return;
        }
        let Some(root) = self.set(7, staged_root()) else {
            return;
        };
        self.set(8, fresh_proc());
        let pivot =
            rustix::process::fchdir(&root).and_then(|()| rustix::process::pivot_root(".", "."));
        if self.set(9, pivot).is_none() {
            let moved = rustix::mount::move_mount(
                &root,
                "",
                CWD,
                "/",
                MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
            )
            .and_then(|()| rustix::process::chroot("."));
            self.set(10, moved);
        }
    }
}

/// The mount API as the mount layer uses it: a recursive read-only clone
/// of `/`, a tmpfs from `fsmount` attached on a directory with
/// `move_mount`. Returns the tmpfs (the new root of the pivot test).
fn staged_root() -> std::io::Result<OwnedFd> {
    use crate::sys::mount::{ATTR_NODEV, ATTR_NOSUID, ATTR_RDONLY, mount_setattr};
    let flags = OpenTreeFlags::OPEN_TREE_CLONE
        | OpenTreeFlags::OPEN_TREE_CLOEXEC
        | OpenTreeFlags::AT_RECURSIVE;
    let clone = rustix::mount::open_tree(CWD, "/", flags)?;
    mount_setattr(&clone, true, ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV)?;
    let fs = rustix::mount::fsopen("tmpfs", FsOpenFlags::FSOPEN_CLOEXEC)?;
    rustix::mount::fsconfig_set_string(&fs, "size", "65536")?;
    rustix::mount::fsconfig_create(&fs)?;
    let tmpfs =
        rustix::mount::fsmount(&fs, FsMountFlags::FSMOUNT_CLOEXEC, MountAttrFlags::empty())?;
    let base = ["/tmp", "/mnt", "/var/tmp", "/opt", "/srv", "/home", "/root"]
        .into_iter()
        .find(|d| std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir()))
        .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOENT))?;
    rustix::mount::move_mount(
        &tmpfs,
        "",
        CWD,
        base,
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )?;
    let root = rustix::fs::open(
        base,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    Ok(root)
}

/// A procfs for this (new) pid namespace, as the mount layer makes it.
fn fresh_proc() -> std::io::Result<OwnedFd> {
    let fs = rustix::mount::fsopen("proc", FsOpenFlags::FSOPEN_CLOEXEC)?;
    rustix::mount::fsconfig_create(&fs)?;
    Ok(rustix::mount::fsmount(
        fs.as_fd(),
        FsMountFlags::FSMOUNT_CLOEXEC,
        MountAttrFlags::empty(),
    )?)
}

/// Landlock and the seccomp listener, in a plain child (as the container
/// tier takes them: without any namespace).
fn layer_steps() -> (Outcome, Outcome) {
    let run = in_child(0, || {
        let nnp = crate::caps::no_new_privs().is_ok();
        let landlock = Outcome::of(crate::landlock::probe_restrict());
        let listener = if nnp {
            Outcome::of(crate::sys::notify::install_with_listener(&[
                libc::sock_filter {
                    code: (libc::BPF_RET | libc::BPF_K) as u16,
                    jt: 0,
                    jf: 0,
                    k: libc::SECCOMP_RET_ALLOW,
                },
            ]))
        } else {
            Outcome::Refused { errno: libc::EPERM }
        };
        [landlock, listener]
    });
    match run {
        Ok([l, s]) => (l, s),
        Err(e) => {
            let o = Outcome::of::<(), _>(Err(e));
            (o, o)
        }
    }
}
