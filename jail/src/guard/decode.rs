//! Guarded system calls, decoded from their number and raw arguments.
//! Timestamps never reach pid 1 (the filter lets them through), so the
//! `utime` family is not here.

/// `AT_FDCWD` as a raw 64-bit argument.
const CWD: u64 = -100i64 as u64;
/// `AT_REMOVEDIR` (unlinkat).
const REMOVEDIR: u64 = 0x200;
/// `AT_SYMLINK_NOFOLLOW`.
const NOFOLLOW: u64 = 0x100;
/// `AT_EMPTY_PATH`.
const EMPTY_PATH: u64 = 0x1000;

/// What a metadata call acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Obj {
    /// A path (relative to `dir`); `follow`: a final symlink is followed;
    /// `empty`: an empty path means `dir` itself (`AT_EMPTY_PATH`).
    Path {
        dir: u64,
        path: u64,
        follow: bool,
        empty: bool,
    },
    /// A descriptor of the caller.
    Fd(u64),
}

/// A guarded call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    Open {
        dir: u64,
        path: u64,
        flags: u64,
        mode: u64,
    },
    Mkdir {
        dir: u64,
        path: u64,
        mode: u64,
    },
    Mknod {
        dir: u64,
        path: u64,
        mode: u64,
        dev: u64,
    },
    Symlink {
        target: u64,
        dir: u64,
        path: u64,
    },
    Link {
        old: (u64, u64),
        new: (u64, u64),
        flags: u64,
    },
    Rename {
        old: (u64, u64),
        new: (u64, u64),
        flags: u64,
    },
    Unlink {
        dir: u64,
        path: u64,
        flags: u64,
    },
    Truncate {
        path: u64,
        len: u64,
    },
    Chmod {
        obj: Obj,
        mode: u64,
    },
    Chown {
        obj: Obj,
        uid: u64,
        gid: u64,
    },
    SetXattr {
        obj: Obj,
        name: u64,
        value: u64,
        size: u64,
        flags: u64,
    },
    RemoveXattr {
        obj: Obj,
        name: u64,
    },
    /// `umask`: watched, then let through.
    Umask {
        mask: u64,
    },
    /// `socket(AF_UNIX, …)`: refused by pid 1 and reported, when the run
    /// moved that refusal here from the deny filter.
    Socket {
        domain: u64,
        kind: u64,
    },
    /// `socketpair(AF_UNIX, …)`: stream and seqpacket pairs go on, the
    /// others (datagram pairs) are refused by pid 1 and reported, when
    /// the run moved that refusal here from the deny filter.
    SocketPair {
        domain: u64,
        kind: u64,
    },
    /// `chdir`, `fchdir`: watched, then let through.
    Chdir,
}

/// Decode a call from its number and arguments (`None`: not guarded).
pub(crate) fn decode(nr: i64, a: [u64; 6]) -> Option<Call> {
    #[cfg(target_arch = "x86_64")]
    if let Some(call) = legacy(nr, a) {
        return Some(call);
    }
    Some(match nr {
        libc::SYS_socket => Call::Socket {
            domain: a[0],
            kind: a[1],
        },
        libc::SYS_socketpair => Call::SocketPair {
            domain: a[0],
            kind: a[1],
        },
        libc::SYS_openat => Call::Open {
            dir: a[0],
            path: a[1],
            flags: a[2],
            mode: a[3],
        },
        libc::SYS_mkdirat => Call::Mkdir {
            dir: a[0],
            path: a[1],
            mode: a[2],
        },
        libc::SYS_mknodat => Call::Mknod {
            dir: a[0],
            path: a[1],
            mode: a[2],
            dev: a[3],
        },
        libc::SYS_symlinkat => Call::Symlink {
            target: a[0],
            dir: a[1],
            path: a[2],
        },
        libc::SYS_linkat => Call::Link {
            old: (a[0], a[1]),
            new: (a[2], a[3]),
            flags: a[4],
        },
        libc::SYS_renameat => Call::Rename {
            old: (a[0], a[1]),
            new: (a[2], a[3]),
            flags: 0,
        },
        libc::SYS_renameat2 => Call::Rename {
            old: (a[0], a[1]),
            new: (a[2], a[3]),
            flags: a[4],
        },
        libc::SYS_unlinkat => Call::Unlink {
            dir: a[0],
            path: a[1],
            flags: a[2],
        },
        libc::SYS_truncate => Call::Truncate {
            path: a[0],
            len: a[1],
        },
        libc::SYS_umask => Call::Umask { mask: a[0] },
        libc::SYS_chdir | libc::SYS_fchdir => Call::Chdir,
        _ => return metadata(nr, a),
    })
}

/// The metadata calls that exist on every architecture.
fn metadata(nr: i64, a: [u64; 6]) -> Option<Call> {
    let at = |dir, path, flags: u64| Obj::Path {
        dir,
        path,
        follow: flags & NOFOLLOW == 0,
        empty: flags & EMPTY_PATH != 0,
    };
    let follow = |path| at(CWD, path, 0);
    let nofollow = |path| at(CWD, path, NOFOLLOW);
    Some(match nr {
        libc::SYS_fchmodat => Call::Chmod {
            obj: at(a[0], a[1], 0),
            mode: a[2],
        },
        libc::SYS_fchmod => Call::Chmod {
            obj: Obj::Fd(a[0]),
            mode: a[1],
        },
        libc::SYS_fchownat => Call::Chown {
            obj: at(a[0], a[1], a[4]),
            uid: a[2],
            gid: a[3],
        },
        libc::SYS_fchown => Call::Chown {
            obj: Obj::Fd(a[0]),
            uid: a[1],
            gid: a[2],
        },
        libc::SYS_setxattr => set_xattr(follow(a[0]), a),
        libc::SYS_lsetxattr => set_xattr(nofollow(a[0]), a),
        libc::SYS_fsetxattr => set_xattr(Obj::Fd(a[0]), a),
        libc::SYS_removexattr => Call::RemoveXattr {
            obj: follow(a[0]),
            name: a[1],
        },
        libc::SYS_lremovexattr => Call::RemoveXattr {
            obj: nofollow(a[0]),
            name: a[1],
        },
        libc::SYS_fremovexattr => Call::RemoveXattr {
            obj: Obj::Fd(a[0]),
            name: a[1],
        },
        _ => return None,
    })
}

fn set_xattr(obj: Obj, a: [u64; 6]) -> Call {
    Call::SetXattr {
        obj,
        name: a[1],
        value: a[2],
        size: a[3],
        flags: a[4],
    }
}

/// The x86_64 calls without a directory argument: relative to the cwd.
#[cfg(target_arch = "x86_64")]
fn legacy(nr: i64, a: [u64; 6]) -> Option<Call> {
    let creat = (libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as u64;
    let follow = |path| Obj::Path {
        dir: CWD,
        path,
        follow: true,
        empty: false,
    };
    Some(match nr {
        libc::SYS_open => Call::Open {
            dir: CWD,
            path: a[0],
            flags: a[1],
            mode: a[2],
        },
        libc::SYS_creat => Call::Open {
            dir: CWD,
            path: a[0],
            flags: creat,
            mode: a[1],
        },
        libc::SYS_mkdir => Call::Mkdir {
            dir: CWD,
            path: a[0],
            mode: a[1],
        },
        libc::SYS_mknod => Call::Mknod {
            dir: CWD,
            path: a[0],
            mode: a[1],
            dev: a[2],
        },
        libc::SYS_symlink => Call::Symlink {
            target: a[0],
            dir: CWD,
            path: a[1],
        },
        libc::SYS_link => Call::Link {
            old: (CWD, a[0]),
            new: (CWD, a[1]),
            flags: 0,
        },
        libc::SYS_rename => Call::Rename {
            old: (CWD, a[0]),
            new: (CWD, a[1]),
            flags: 0,
        },
        libc::SYS_unlink => Call::Unlink {
            dir: CWD,
            path: a[0],
            flags: 0,
        },
        libc::SYS_rmdir => Call::Unlink {
            dir: CWD,
            path: a[0],
            flags: REMOVEDIR,
        },
        libc::SYS_chmod => Call::Chmod {
            obj: follow(a[0]),
            mode: a[1],
        },
        libc::SYS_chown => Call::Chown {
            obj: follow(a[0]),
            uid: a[1],
            gid: a[2],
        },
        libc::SYS_lchown => Call::Chown {
            obj: Obj::Path {
                dir: CWD,
                path: a[0],
                follow: false,
                empty: false,
            },
            uid: a[1],
            gid: a[2],
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_decode_to_their_arguments() {
        let a = [1, 2, 3, 4, 5, 6];
        assert_eq!(
            decode(libc::SYS_openat, a),
            Some(Call::Open {
                dir: 1,
                path: 2,
                flags: 3,
                mode: 4
            })
        );
        assert_eq!(
            decode(libc::SYS_renameat2, a),
            Some(Call::Rename {
                old: (1, 2),
                new: (3, 4),
                flags: 5
            })
        );
        assert_eq!(
            decode(libc::SYS_renameat, a),
            Some(Call::Rename {
                old: (1, 2),
                new: (3, 4),
                flags: 0
            })
        );
        assert_eq!(
            decode(libc::SYS_unlinkat, a),
            Some(Call::Unlink {
                dir: 1,
                path: 2,
                flags: 3
            })
        );
        assert_eq!(
            decode(libc::SYS_fchownat, [1, 2, 3, 4, NOFOLLOW, 0]),
            Some(Call::Chown {
                obj: Obj::Path {
                    dir: 1,
                    path: 2,
                    follow: false,
                    empty: false
                },
                uid: 3,
                gid: 4
            })
        );
        assert_eq!(
            decode(libc::SYS_fchmod, a),
            Some(Call::Chmod {
                obj: Obj::Fd(1),
                mode: 2
            })
        );
        assert_eq!(
            decode(libc::SYS_fsetxattr, a),
            Some(Call::SetXattr {
                obj: Obj::Fd(1),
                name: 2,
                value: 3,
                size: 4,
                flags: 5
            })
        );
        assert_eq!(
            decode(libc::SYS_fremovexattr, a),
            Some(Call::RemoveXattr {
                obj: Obj::Fd(1),
                name: 2
            })
        );
        assert_eq!(
            decode(libc::SYS_fchown, a),
            Some(Call::Chown {
                obj: Obj::Fd(1),
                uid: 2,
                gid: 3
            })
        );
        assert!(decode(libc::SYS_read, a).is_none());
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn legacy_calls_use_the_cwd() {
        let a = [1, 2, 3, 4, 5, 6];
        let creat = (libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as u64;
        assert_eq!(
            decode(libc::SYS_creat, a),
            Some(Call::Open {
                dir: CWD,
                path: 1,
                flags: creat,
                mode: 2
            })
        );
        assert_eq!(
            decode(libc::SYS_rmdir, a),
            Some(Call::Unlink {
                dir: CWD,
                path: 1,
                flags: REMOVEDIR
            })
        );
        assert_eq!(
            decode(libc::SYS_lchown, a),
            Some(Call::Chown {
                obj: Obj::Path {
                    dir: CWD,
                    path: 1,
                    follow: false,
                    empty: false
                },
                uid: 2,
                gid: 3
            })
        );
    }
}
