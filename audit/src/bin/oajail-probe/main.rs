//! oajail-probe: performs ONE attack per invocation and prints one JSON
//! verdict line, exiting with a fixed code (0 succeeded, 10 blocked as
//! expected, 11 blocked unexpectedly, 20 not applicable, 2 probe error).
//!
//! Usage: `oajail-probe <attack-id> [args…]`; `oajail-probe list` prints the ids.
//!
//! Syscall-surface attacks run in a re-executed child of the probe so that a
//! seccomp KILL (SIGSYS) is seen and reported instead of taking the probe
//! down silently. The probe never prints a canary: it only says whether
//! canary bytes were reachable.

mod egress;
mod exfil;
mod fs;
mod guard;
mod host;
mod late;
mod lifecycle;
mod limits;
mod net;
mod procs;
mod proxy;
// The probe's raw syscalls: the only unsafe code of this crate (shared with
// oajail-lab, whose keyring calls the probe itself does not use).
#[allow(unsafe_code, dead_code)]
mod raw;
mod report;
mod sys;

use oajail_audit::verdict::{EXIT_PROBE_ERROR, ProbeReport};
use report::Outcome;

/// Marker argument for the re-executed attack child.
const CHILD_FLAG: &str = "--attack-child";

/// Attack ids that run in a child process (they may be killed by seccomp).
const IN_CHILD: &[&str] = &[
    "io-uring-setup",
    "io-uring-enter",
    "io-uring-register",
    "x32-socket",
    "x32-getpid",
    "int80-getpid",
    "int80-socket",
    "unshare-user",
    "unshare-mount",
    "clone3",
    "setns",
    "umount",
    "mount-bind",
    "open-tree",
    "fsopen",
    "bpf",
    "perf-event-open",
    "userfaultfd",
    "kcmp",
    "keyctl",
    "keyctl-read",
    "ptrace-attach",
    "process-vm-read",
    "pidfd-getfd",
    "tiocsti",
    "tiocsti-high",
    "alloc",
    "fill-file",
    "memfd-fill",
    "sysv-fill",
    "tioclinux",
    "socket-family",
    "socket-families",
    "icmp-ping",
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.split_first() {
        Some((flag, rest)) if flag == CHILD_FLAG => match rest.split_first() {
            Some((id, params)) => dispatch(id, params).emit(),
            None => usage(),
        },
        Some((id, _)) if id == "list" => {
            println!("{}", ids().join("\n"));
            0
        }
        Some((id, _)) if id == oajail_audit::BUILD_ID_FLAG => {
            println!("{}", oajail_audit::BUILD_ID);
            0
        }
        Some((id, _)) if id == "sleeper" => lifecycle::sleeper(),
        Some((id, p)) if id == "guarded-sleeper" && p.len() == 1 => guard::guarded_sleeper(&p[0]),
        Some((id, _)) if id == "orphan-parent" => late::orphan_parent(),
        Some((id, _)) if id == "orphan-child" => late::orphan_child(),
        Some((id, _)) if id == "tty-scramble-child" => host::tty_scramble_child(),
        Some((id, params)) if IN_CHILD.contains(&id.as_str()) => in_child(id, params).emit(),
        Some((id, params)) => dispatch(id, params).emit(),
        None => usage(),
    };
    std::process::exit(code);
}

fn usage() -> i32 {
    eprintln!("usage: oajail-probe <attack-id> [args…] (oajail-probe list)");
    EXIT_PROBE_ERROR
}

/// Re-execute the probe for one attack and report how the child ended.
fn in_child(id: &str, params: &[String]) -> Outcome {
    use std::os::unix::process::ExitStatusExt;
    let out = std::process::Command::new("/proc/self/exe")
        .arg(CHILD_FLAG)
        .arg(id)
        .args(params)
        .env("OAJ_PROBE_PARENT", std::process::id().to_string())
        .stdin(std::process::Stdio::inherit())
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            return Outcome::unexpected(id, Some(report::io_errno(&e)), "spawn attack child");
        }
    };
    if id == "sysv-fill" {
        // Its segments outlive the child: free them before anything else
        // is allocated here, so a memory cgroup the child filled does not
        // take this process too.
        raw::sysv_remove_all();
    }
    if let Some(sig) = out.status.signal() {
        return Outcome::killed(id, sig);
    }
    match ProbeReport::find_in(&String::from_utf8_lossy(&out.stdout)) {
        Some(r) => Outcome(r),
        None => Outcome::unexpected(
            id,
            None,
            format!(
                "attack child exited {:?} without a verdict",
                out.status.code()
            ),
        ),
    }
}

fn ids() -> Vec<&'static str> {
    vec![
        "read-file",
        "read-files",
        "exfil",
        "sendfile-file",
        "read-tree",
        "copy-to-ws",
        "symlink-read",
        "hardlink-read",
        "mountinfo-scan",
        "write-file",
        "rename-over",
        "rename-away",
        "unlink-recreate",
        "symlink-parent",
        "metadata",
        "open-write",
        "daemonize",
        "ptrace-attach",
        "proc-mem",
        "process-vm-read",
        "pidfd-getfd",
        "kill",
        "kill-all",
        "unix-connect",
        "unix-sendto",
        "abstract-connect",
        "fds-inherited",
        "tiocsti",
        "tiocsti-high",
        "tioclinux",
        "env-scan",
        "proc-environ-scan",
        "io-uring-setup",
        "io-uring-enter",
        "io-uring-register",
        "x32-socket",
        "x32-getpid",
        "int80-getpid",
        "int80-socket",
        "unshare-user",
        "unshare-mount",
        "clone3",
        "setns",
        "umount",
        "mount-bind",
        "open-tree",
        "fsopen",
        "bpf",
        "perf-event-open",
        "userfaultfd",
        "kcmp",
        "keyctl",
        "keyctl-read",
        "nnp",
        "caps",
        "tcp-connect",
        "tcp-proxy-port-elsewhere",
        "udp-send",
        "dns-query",
        "resolve",
        "icmp-ping",
        "socket-family",
        "socket-families",
        "daemonize-wait",
        "alloc",
        "fill-file",
        "spin",
        "proxy-connect",
        "proxy-get",
        "proxy-raw",
        "socks",
        "fork-bomb",
        "print-escapes",
        "memfd-exec",
        "reap-orphans",
        "inotify-instances",
        "implicit-git-dir",
        "symlink-rename",
        "link-symlink",
        "opath-reopen",
        "opath-dir-create",
        "deputy-open",
        "race-link-hook",
        "append-text",
        "fd-meta",
    ]
    .into_iter()
    .chain(host::IDS.iter().copied())
    .collect()
}

/// Run one attack in this process.
fn dispatch(id: &str, p: &[String]) -> Outcome {
    let a = |i: usize| p.get(i).map(String::as_str).unwrap_or("");
    if !arity_ok(id, p.len()) {
        return Outcome::unexpected(id, None, format!("wrong number of arguments ({})", p.len()));
    }
    match id {
        "read-file" => fs::read_file(id, a(0)),
        "read-when-created" => fs::read_when_created(id, a(0)),
        "read-when-replaced" => fs::read_when_replaced(id, a(0)),
        "read-files" => fs::read_files(id, p),
        "sendfile-file" => fs::sendfile_file(id, a(0)),
        "read-tree" => fs::read_tree(id, a(0)),
        "copy-to-ws" => fs::copy_to_ws(id, a(0), a(1)),
        "symlink-read" => fs::symlink_read(id, a(0), a(1)),
        "hardlink-read" => fs::hardlink_read(id, a(0), a(1)),
        "mountinfo-scan" => fs::mountinfo_scan(id),
        "write-file" => fs::write_file(id, a(0), a(1)),
        "rename-over" => fs::rename_over(id, a(0), a(1)),
        "rename-away" => fs::rename_away(id, a(0), a(1)),
        "unlink-recreate" => fs::unlink_recreate(id, a(0)),
        "symlink-parent" => fs::symlink_parent(id, a(0), a(1), a(2)),
        "metadata" => fs::metadata(id, a(0), a(1)),
        "open-write" => fs::open_write(id, a(0)),
        "daemonize" => lifecycle::daemonize(id, a(0)),
        "daemonize-wait" => limits::daemonize_wait(id, a(0)),
        "alloc" => limits::alloc(id, a(0)),
        "fill-file" => limits::fill_file(id, a(0), a(1)),
        "spin" => limits::spin(id),
        "exfil" => exfil::exfil(id, p),
        _ => dispatch_proc_sys(id, p),
    }
}

fn dispatch_proc_sys(id: &str, p: &[String]) -> Outcome {
    let a = |i: usize| p.get(i).map(String::as_str).unwrap_or("");
    match id {
        "ptrace-attach" => procs::ptrace_attach(id, a(0)),
        "proc-mem" => procs::proc_mem(id, a(0)),
        "process-vm-read" => procs::process_vm_read(id, a(0)),
        "pidfd-getfd" => procs::pidfd_getfd(id, a(0)),
        "kill" => procs::kill(id, a(0)),
        "kill-all" => procs::kill_all(id),
        "unix-connect" => procs::unix_connect(id, a(0)),
        "unix-sendto" => procs::unix_sendto(id, p),
        "abstract-connect" => procs::abstract_connect(id, a(0)),
        "fds-inherited" => procs::fds_inherited(id),
        "tiocsti" => procs::tiocsti(id, false),
        "tiocsti-high" => procs::tiocsti(id, true),
        "tioclinux" => procs::tioclinux(id),
        "env-scan" => procs::env_scan(id),
        "proc-environ-scan" => procs::proc_environ_scan(id),
        _ => dispatch_sys_net(id, p),
    }
}

fn dispatch_sys_net(id: &str, p: &[String]) -> Outcome {
    let a = |i: usize| p.get(i).map(String::as_str).unwrap_or("");
    match id {
        "io-uring-setup" => sys::io_uring_setup(id),
        "io-uring-enter" => sys::io_uring_enter(id),
        "io-uring-register" => sys::io_uring_register(id),
        "x32-socket" => sys::x32_socket(id),
        "x32-getpid" => sys::x32_getpid(id),
        "int80-getpid" => sys::int80_getpid(id),
        "int80-socket" => sys::int80_socket(id),
        "unshare-user" => sys::unshare_user(id),
        "unshare-mount" => sys::unshare_mount(id),
        "clone3" => sys::clone3(id),
        "setns" => sys::setns(id),
        "umount" => sys::umount(id, a(0)),
        "mount-bind" => sys::mount_bind(id, a(0), a(1)),
        "open-tree" => sys::open_tree(id, a(0)),
        "fsopen" => sys::fsopen(id),
        "bpf" => sys::bpf(id),
        "perf-event-open" => sys::perf_event_open(id),
        "userfaultfd" => sys::userfaultfd(id),
        "kcmp" => sys::kcmp(id),
        "keyctl" => sys::keyctl(id),
        "keyctl-read" => sys::keyctl_read(id, a(0)),
        "nnp" => sys::nnp(id),
        "caps" => sys::caps(id),
        "tcp-connect" => net::tcp_connect(id, a(0), a(1)),
        "tcp-proxy-port-elsewhere" => egress::proxy_port_elsewhere(id, a(0)),
        "udp-send" => net::udp_send(id, a(0), a(1)),
        "dns-query" => net::dns_query(id, a(0), a(1)),
        "resolve" => net::resolve(id, a(0)),
        "icmp-ping" => net::icmp_ping(id, a(0)),
        "socket-family" => net::socket_family(id, a(0)),
        "socket-families" => net::socket_families(id),
        "proxy-connect" => proxy::connect(id, a(0), a(1)),
        "proxy-get" => proxy::get(id, a(0), a(1)),
        "proxy-raw" => proxy::raw(id, a(0)),
        "socks" => proxy::socks(id, a(0), a(1)),
        "fork-bomb" => late::fork_bomb(id, a(0), a(1)),
        "print-escapes" => late::print_escapes(id, a(0)),
        "memfd-exec" => late::memfd_exec(id),
        "reap-orphans" => late::reap_orphans(id, a(0)),
        "inotify-instances" => late::inotify_instances(id, a(0)),
        _ => dispatch_guard(id, p),
    }
}

fn dispatch_guard(id: &str, p: &[String]) -> Outcome {
    let a = |i: usize| p.get(i).map(String::as_str).unwrap_or("");
    match id {
        "implicit-git-dir" => guard::implicit_git_dir(id, a(0), a(1), a(2), a(3)),
        "symlink-rename" => guard::symlink_rename(id, a(0), a(1), a(2)),
        "link-symlink" => guard::link_symlink(id, a(0), a(1), a(2)),
        "opath-reopen" => guard::opath_reopen(id, a(0)),
        "opath-dir-create" => guard::opath_dir_create(id, a(0), a(1)),
        "deputy-open" => guard::deputy_open(id, a(0), a(1)),
        "race-link-hook" => guard::race_link_hook(id, a(0), a(1), a(2), a(3)),
        "append-text" => guard::append_text(id, a(0), a(1)),
        "fd-meta" => guard::fd_meta(id, a(0), a(1)),
        other => host::dispatch(other, p).unwrap_or_else(|| {
            Outcome::unexpected(other, None, "unknown attack id (oajail-probe list)")
        }),
    }
}

/// Number of arguments each attack takes.
fn arity_ok(id: &str, n: usize) -> bool {
    let want = match id {
        "copy-to-ws" | "symlink-read" | "hardlink-read" | "write-file" | "rename-over"
        | "rename-away" | "metadata" | "mount-bind" | "tcp-connect" | "udp-send" | "dns-query" => 2,
        "symlink-parent" | "symlink-rename" | "link-symlink" => 3,
        "implicit-git-dir" | "race-link-hook" => 4,
        "opath-dir-create" | "deputy-open" | "append-text" | "fd-meta" => 2,
        "opath-reopen" => 1,
        "proxy-connect" | "proxy-get" | "socks" | "fill-file" => 2,
        "alloc" | "daemonize-wait" | "tty-ioctl" | "proc-keys" | "memfd-fill" | "sysv-fill" => 1,
        "fill-inodes" => 2,
        "fork-bomb" => 2,
        "print-escapes" | "reap-orphans" | "inotify-instances" => 1,
        "proxy-raw" => 1,
        "read-file"
        | "read-when-created"
        | "read-when-replaced"
        | "sendfile-file"
        | "read-tree"
        | "unlink-recreate"
        | "open-write"
        | "daemonize"
        | "ptrace-attach"
        | "proc-mem"
        | "process-vm-read"
        | "pidfd-getfd"
        | "kill"
        | "unix-connect"
        | "abstract-connect"
        | "umount"
        | "open-tree"
        | "keyctl-read"
        | "resolve"
        | "icmp-ping"
        | "socket-family"
        | "tcp-proxy-port-elsewhere" => 1,
        // Variadic: at least one path.
        "read-files" | "read-any" | "unix-sendto" => return n >= 1,
        // Channel, target, then at least one source.
        "exfil" => return n >= 3,
        _ => 0,
    };
    n == want
}
