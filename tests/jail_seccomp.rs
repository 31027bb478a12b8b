//! Every seccomp denial, checked with raw system calls from python ctypes
//! inside the real jail. Arguments are chosen so that an unfiltered kernel
//! would fail differently (EBADF, EFAULT, EINVAL…) or succeed: EPERM/ENOSYS
//! can then only come from the filter.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod support;

use support::*;

/// Python prelude: `call(nr, *args)` returns 0 or the errno.
const PRELUDE: &str = r#"import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *a):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(x) for x in a])
    return ctypes.get_errno() if r == -1 else 0
"#;

/// Run `body` (python, after the prelude) in the jail; returns stdout.
fn py(tag: &str, body: &str) -> std::process::Output {
    let code = format!("{PRELUDE}{body}");
    oajail(tag, &["--", PYTHON, "-c", &code]).output().unwrap()
}

const EPERM: i32 = 1;
const ENOSYS: i32 = 38;

/// (name, x86_64 number, args) of calls that must give EPERM.
#[cfg(target_arch = "x86_64")]
const DENIED: &[(&str, i64, &[i64])] = &[
    ("socket(AF_UNIX)", 41, &[1, 1, 0]),
    ("socket(AF_VSOCK)", 41, &[40, 1, 0]),
    ("socket(AF_PACKET)", 41, &[17, 3, 0]),
    ("socket(AF_BLUETOOTH)", 41, &[31, 1, 0]),
    ("socket(AF_NETLINK, audit)", 41, &[16, 3, 9]),
    ("io_uring_setup", 425, &[1, 0]),
    ("io_uring_enter", 426, &[-1, 0, 0, 0, 0, 0]),
    ("io_uring_register", 427, &[-1, 0, 0, 0]),
    ("ptrace", 101, &[16, 1, 0, 0]),
    ("process_vm_readv", 310, &[1, 0, 0, 0, 0, 0]),
    ("process_vm_writev", 311, &[1, 0, 0, 0, 0, 0]),
    ("pidfd_getfd", 438, &[-1, 0, 0]),
    ("kcmp", 312, &[1, 1, 0, 0, 0]),
    ("unshare(CLONE_NEWUSER)", 272, &[0x1000_0000]),
    ("unshare(CLONE_NEWNS)", 272, &[0x20000]),
    ("clone(CLONE_NEWUSER)", 56, &[0x1000_0000 | 17, 0, 0, 0, 0]),
    ("setns", 308, &[-1, 0]),
    ("mount", 165, &[0, 0, 0, 0, 0]),
    ("umount2", 166, &[0, 0]),
    ("pivot_root", 155, &[0, 0]),
    ("chroot", 161, &[0]),
    ("open_tree", 428, &[-1, 0, 0]),
    ("move_mount", 429, &[-1, 0, -1, 0, 0]),
    ("fsopen", 430, &[0, 0]),
    ("fsconfig", 431, &[-1, 0, 0, 0, 0]),
    ("fsmount", 432, &[-1, 0, 0]),
    ("fspick", 433, &[-1, 0, 0]),
    ("mount_setattr", 442, &[-1, 0, 0, 0, 0]),
    ("bpf", 321, &[0, 0, 0]),
    ("perf_event_open", 298, &[0, 0, -1, -1, 0]),
    ("userfaultfd", 323, &[0]),
    ("keyctl", 250, &[0, 0, 0, 0, 0]),
    ("add_key", 248, &[0, 0, 0, 0, 0]),
    ("request_key", 249, &[0, 0, 0, 0]),
    ("init_module", 175, &[0, 0, 0]),
    ("finit_module", 313, &[-1, 0, 0]),
    ("delete_module", 176, &[0, 0]),
    ("kexec_load", 246, &[0, 0, 0, 0]),
    ("kexec_file_load", 320, &[-1, -1, 0, 0, 0]),
    ("open_by_handle_at", 304, &[-1, 0, 0]),
    ("ioctl(TIOCSTI)", 16, &[0, 0x5412, 0]),
    ("ioctl(TIOCSTI, high bits set)", 16, &[0, 0x1_0000_5412, 0]),
    ("ioctl(TIOCLINUX)", 16, &[0, 0x541C, 0]),
];

#[cfg(target_arch = "x86_64")]
#[test]
fn each_denied_call_returns_eperm() {
    let mut body = String::new();
    for (name, nr, args) in DENIED {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        body.push_str(&format!(
            "print({name:?}, call({nr}, {}))\n",
            args.join(", ")
        ));
    }
    let out = ok(py("deny", &body));
    let mut failures = Vec::new();
    for (line, (name, _, _)) in out.lines().zip(DENIED) {
        if !line.ends_with(&format!(" {EPERM}")) {
            failures.push(format!("{name}: {line}"));
        }
    }
    assert_eq!(out.lines().count(), DENIED.len(), "{out}");
    assert!(failures.is_empty(), "not EPERM: {failures:#?}");
}

#[cfg(target_arch = "x86_64")]
#[test]
fn clone3_is_enosys_so_libc_falls_back() {
    let out = ok(py("clone3", "print(call(435, 0, 0))"));
    assert_eq!(out.trim(), ENOSYS.to_string());
}

#[test]
fn allowed_socket_families_and_socketpair_work() {
    let body = "import socket\n\
                socket.socket(socket.AF_INET).close()\n\
                socket.socket(socket.AF_INET6).close()\n\
                a, b = socket.socketpair(); a.send(b'x'); print(b.recv(1).decode())\n\
                socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()\n\
                print('ok')";
    assert_eq!(
        ok(py("allowed", body))
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["x", "ok"]
    );
}

#[cfg(target_arch = "x86_64")]
#[test]
fn x32_system_calls_kill_the_process() {
    // getpid (39) with the x32 bit: a deny list keyed on 64-bit numbers would
    // let it through; the filter's prefix kills the process (SIGSYS = 31).
    let o = py("x32", "call(0x40000000 | 39)\nprint('survived')");
    assert_eq!(o.status.code(), Some(128 + 31), "{}", out(&o));
    assert!(!out(&o).contains("survived"));
}

#[cfg(target_arch = "x86_64")]
#[test]
fn i386_int80_is_killed_by_the_arch_check() {
    // mmap a page with `mov eax, 20 (i386 getpid); int 0x80; ret` and call it.
    let body = "import mmap\n\
        code = bytes([0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3])\n\
        m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n\
        m.write(code)\n\
        addr = ctypes.addressof(ctypes.c_char.from_buffer(m))\n\
        f = ctypes.CFUNCTYPE(ctypes.c_int)(addr)\n\
        f()\n\
        print('survived')";
    let o = py("int80", body);
    assert_eq!(o.status.code(), Some(128 + 31), "{}{}", out(&o), err(&o));
}

/// A host datagram socket in plain view (read-only there, outside the
/// writable roots): one end of a datagram `socketpair` could `sendto` it,
/// so such pairs are refused, with a line, while stream and seqpacket
/// pairs work; nothing reaches the host socket.
#[test]
fn a_datagram_pair_cannot_reach_a_host_socket_in_view() {
    use std::os::unix::net::UnixDatagram;
    let dir = std::path::PathBuf::from(format!("/var/tmp/oajail-it-dgram-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("host.sock");
    let _ = std::fs::remove_file(&path);
    let host = UnixDatagram::bind(&path).unwrap();
    host.set_nonblocking(true).unwrap();
    let body = format!(
        "import socket\n\
         a, b = socket.socketpair(); a.send(b'x'); print(b.recv(1).decode())\n\
         a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET); a.send(b'y'); print(b.recv(1).decode())\n\
         try:\n    \
             a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n    \
             a.sendto(b'ESCAPED', {:?}); print('sent')\n\
         except OSError as e: print('errno', e.errno)",
        path.display().to_string()
    );
    let o = py("dgram-pair", &body);
    let mut buf = [0u8; 64];
    let got = host.recv(&mut buf);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        got.is_err(),
        "the host socket received {:?}",
        got.map(|n| buf[..n].to_vec())
    );
    assert_eq!(
        out(&o).split_whitespace().collect::<Vec<_>>(),
        ["x", "y", "errno", "1"],
        "{}",
        err(&o)
    );
    assert!(
        err(&o).contains("oajail: refused unix socket AF_UNIX SOCK_DGRAM|SOCK_CLOEXEC (socketpair): unix sockets are off"),
        "{}",
        err(&o)
    );
}
