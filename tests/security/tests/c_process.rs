//! Family C: processes, IPC and the terminal. Host-side stand-ins for
//! ssh-agent, D-Bus, docker, X11 and syslog listen in the lab and record any
//! connection; a host canary process must survive every run.
mod common;
use common::*;

#[test]
fn blocks_reading_other_processes_environ() {
    expect_blocked("C1-proc-environ", DENY_HOME, |_| argv!["proc-environ-scan"]);
}

#[test]
fn blocks_ptrace_of_visible_processes() {
    expect_blocked("C2-ptrace-visible", DENY_HOME, |_| {
        argv!["ptrace-attach", "all"]
    });
}

#[test]
fn blocks_ptrace_of_host_canary() {
    expect_blocked("C2-ptrace-host-canary", DENY_HOME, |l| {
        argv!["ptrace-attach", l.canary_pid()]
    });
}

#[test]
fn blocks_proc_mem_write_open() {
    expect_blocked("C2-proc-mem", DENY_HOME, |_| argv!["proc-mem", "all"]);
}

#[test]
fn blocks_process_vm_readv() {
    expect_blocked("C2-process-vm-readv", DENY_HOME, |_| {
        argv!["process-vm-read", "all"]
    });
}

#[test]
fn blocks_pidfd_getfd() {
    expect_blocked("C2-pidfd-getfd", DENY_HOME, |_| argv!["pidfd-getfd", "all"]);
}

#[test]
fn blocks_kcmp() {
    expect_blocked("C2-kcmp", DENY_HOME, |_| argv!["kcmp"]);
}

#[test]
fn blocks_kill_of_host_canary() {
    expect_blocked("C3-kill-host-canary", DENY_HOME, |l| {
        argv!["kill", l.canary_pid()]
    });
}

#[test]
fn blocks_kill_all() {
    expect_blocked("C3-kill-all", DENY_HOME, |_| argv!["kill-all"]);
}

#[test]
fn blocks_ssh_agent_socket() {
    expect_blocked("C4-ssh-agent", DENY_HOME, |l| {
        argv!["unix-connect", l.path("run/ssh-agent.sock")]
    });
}

#[test]
fn blocks_dbus_socket() {
    expect_blocked("C4-dbus", DENY_HOME, |l| {
        argv!["unix-connect", l.path("run/bus")]
    });
}

#[test]
fn blocks_docker_socket() {
    expect_blocked("C4-docker", DENY_HOME, |l| {
        argv!["unix-connect", l.path("run/docker.sock")]
    });
}

#[test]
fn blocks_x11_socket() {
    expect_blocked("C4-x11", DENY_HOME, |l| {
        argv!["unix-connect", l.path("run/X0")]
    });
}

/// A datagram to the lab's syslog stand-ins: the one in the runtime
/// directory (hidden by the mounts) and one in plain view outside the
/// writable roots (held by seccomp alone: no `socket(AF_UNIX)`, no
/// datagram `socketpair`, whose end `sendto` any path).
#[test]
fn blocks_syslog_datagram() {
    expect_blocked("C4-syslog-dgram", DENY_HOME, |l| {
        argv!["unix-sendto", l.path("run/log"), l.path("share/log")]
    });
}

#[test]
fn blocks_unix_socket_creation() {
    expect_blocked("C4-unix-socket-create", DENY_HOME, |_| {
        argv!["socket-family", libc::AF_UNIX]
    });
}

#[test]
fn blocks_abstract_socket() {
    expect_blocked("C5-abstract", DENY_HOME, |l| {
        argv!["abstract-connect", l.abstract_name]
    });
}

#[test]
fn blocks_inherited_fds() {
    let opts = RunOptions {
        leak_fds: true,
        ..RunOptions::default()
    };
    expect_blocked_with("C6-inherited-fds", DENY_HOME, &opts, |_| {
        argv!["fds-inherited"]
    });
}

#[test]
fn blocks_tiocsti() {
    let opts = RunOptions {
        pty: true,
        ..RunOptions::default()
    };
    expect_blocked_with("C7-tiocsti", DENY_HOME, &opts, |_| argv!["tiocsti"]);
}

#[test]
fn blocks_tiocsti_with_high_bits() {
    let opts = RunOptions {
        pty: true,
        ..RunOptions::default()
    };
    expect_blocked_with("C7-tiocsti-high-bits", DENY_HOME, &opts, |_| {
        argv!["tiocsti-high"]
    });
}

#[test]
fn blocks_tioclinux() {
    expect_blocked("C8-tioclinux", DENY_HOME, |_| argv!["tioclinux"]);
}

/// C9, documented residual (docs/threat-model.md): oajail passes the
/// command's output through untouched; it has no terminal sanitiser. The
/// probe prints OSC 52 (clipboard write), OSC 0 (window title) and SGR 8
/// (hidden text); the test asserts the bytes arrive on stdout unchanged,
/// so adding a sanitiser (or losing output) shows up here.
#[test]
fn residual_terminal_escapes_pass_through() {
    let id = "C9-terminal-escapes";
    let mut lab = Lab::new(id);
    let tag = format!("T0FKLUM5{}", lab.token);
    let run = lab.jailed(DENY_HOME, &["print-escapes", &tag], &RunOptions::default());
    let printed = format!("\x1b]52;c;{tag}\x07\x1b]0;{tag}\x07\x1b[8m{tag}\x1b[0m\n");
    let holds = run.stdout.contains(&printed);
    oajail_security::judge::assert_residual(
        &mut lab,
        id,
        &run,
        holds,
        "OSC 52, OSC 0 and SGR 8 reach stdout byte for byte",
    );
}

// C10: the caller's terminal after the run (issue 13). The command shares
// the user's terminal; whatever it does to it must not outlive the jail.

fn on_pty() -> RunOptions {
    RunOptions {
        pty: true,
        ..RunOptions::default()
    }
}

/// TIOCEXCL: exclusive mode outlives the command; sudo, ssh and pinentry
/// then fail to open the terminal. Refused by seccomp.
#[test]
fn blocks_terminal_exclusive_mode() {
    expect_blocked_with("C10-tty-exclusive", DENY_HOME, &on_pty(), |_| {
        argv!["tty-ioctl", "excl"]
    });
}

/// TIOCSETD: a new line discipline outlives the command. Refused by seccomp.
#[test]
fn blocks_terminal_line_discipline() {
    expect_blocked_with("C10-tty-line-discipline", DENY_HOME, &on_pty(), |_| {
        argv!["tty-ioctl", "setd"]
    });
}

/// A process of the command turns echo, canonical mode and the signal
/// keys around and is killed with SIGKILL: the supervisor must put the
/// terminal back. The lab compares the pty's termios before and after the
/// run (a global post-condition), so the row fails if it was not restored.
#[test]
fn restores_the_terminal_after_a_killed_command() {
    expect_blocked_with("C10-tty-restored-after-kill", DENY_HOME, &on_pty(), |_| {
        argv!["tty-scramble"]
    });
}

/// An interactive run (stdin and stdout on the caller's terminal) gets a
/// pty of the jail's own: no descriptor of the jail, and not `/dev/tty`,
/// is the caller's terminal any more, so TIOCSTI (refused by seccomp
/// anyway) could only reach the jail's own input.
#[test]
fn interactive_run_cannot_reach_the_callers_terminal() {
    let opts = RunOptions {
        pty: true,
        pty_output: true,
        ..RunOptions::default()
    };
    let id = "C10-tty-own-pty";
    let mut lab = Lab::new(id);
    // The control: without the jail the probe finds the lab's terminal.
    let control = lab.unjailed(&["host-tty-reach"], &opts);
    assert_eq!(
        control.report.as_ref().map(|r| r.verdict),
        Some(oajail_security::verdict::Verdict::Succeeded),
        "control: {} {}",
        control.stdout,
        control.stderr
    );
    let run = lab.jailed(DENY_HOME, &["host-tty-reach"], &opts);
    assert_blocked(&mut lab, id, &run);
}

/// C11: with `allowAllUnixSockets` the command may create unix sockets, and
/// a readable home holds sockets to host services: Docker Desktop, colima,
/// gpg-agent. The test listens on each in the fake home (the control:
/// without the jail the probe connects); in the jail each is masked.
#[test]
fn blocks_home_sockets_with_allow_all_unix_sockets() {
    let id = "C11-home-sockets";
    let mut lab = Lab::new(id);
    let rels = [
        ".docker/run/docker.sock",
        ".colima/default/docker.sock",
        ".gnupg/S.gpg-agent",
    ];
    let mut listeners = Vec::new();
    for rel in rels {
        let path = lab.home(rel);
        if let Some(parent) = std::path::Path::new(&path).parent() {
            std::fs::create_dir_all(parent).expect("socket directory");
        }
        listeners.push(std::os::unix::net::UnixListener::bind(&path).expect("listen"));
        let control = lab.unjailed(&["unix-connect", &path], &RunOptions::default());
        assert_eq!(
            control.report.as_ref().map(|r| r.verdict),
            Some(oajail_security::verdict::Verdict::Succeeded),
            "control: {rel} unreachable without the jail: {}",
            control.stdout
        );
    }
    // The sockets are the test's own plants, not changes made by the jail.
    lab.rebaseline_home();
    for rel in rels {
        let run = lab.jailed(
            "attack-unix-sockets.json",
            &["unix-connect", &lab.home(rel)],
            &RunOptions::default(),
        );
        let blocked = run
            .report
            .as_ref()
            .is_some_and(|r| r.verdict == oajail_security::verdict::Verdict::Blocked);
        if !blocked || rel == rels[rels.len() - 1] {
            assert_blocked(&mut lab, id, &run);
        }
    }
    drop(listeners);
}
