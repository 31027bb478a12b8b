//! pid 1, exit statuses, signals, timeouts, process lifetime and hygiene of
//! the real `oajail` binary (runs as root and as an unprivileged user).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

#[test]
fn true_exits_zero_and_status_passes_through() {
    assert_eq!(
        oajail("t1", &["--", "/bin/true"]).status().unwrap().code(),
        Some(0)
    );
    assert_eq!(sh("t2", "exit 7").status.code(), Some(7));
    assert_eq!(
        oajail("t3", &["--", "/bin/false"]).status().unwrap().code(),
        Some(1)
    );
}

#[test]
fn death_by_signal_is_128_plus_n() {
    assert_eq!(sh("sig", "kill -TERM $$").status.code(), Some(143));
    assert_eq!(sh("sig9", "kill -KILL $$").status.code(), Some(137));
}

#[test]
fn missing_and_unexecutable_commands_use_reserved_codes() {
    let o = oajail("nf", &["--", "no-such-command-oajail"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(127), "{}", err(&o));
    assert!(
        err(&o).contains("oajail: exec no-such-command-oajail:"),
        "{}",
        err(&o)
    );
    let o = oajail("nx", &["--", "/etc/hostname"]).output().unwrap();
    assert_eq!(o.status.code(), Some(126), "{}", err(&o));
}

#[test]
fn command_is_pid_2_under_a_non_dumpable_init() {
    let o = ok(sh(
        "pid",
        "echo $$; cat /proc/1/comm; cat /proc/1/environ >/dev/null 2>&1 && echo readable || echo denied",
    ));
    let lines: Vec<&str> = o.lines().collect();
    assert_eq!(lines[0], "2", "{o}");
    assert_eq!(lines[1], "oajail-init", "{o}");
    // Non-dumpable: the command cannot read pid 1's environment.
    assert_eq!(lines[2], "denied", "{o}");
}

#[test]
fn only_jail_processes_are_visible() {
    let o = ok(sh(
        "procs",
        "ls /proc | grep -E '^[0-9]+$' | sort -n | tr '\\n' ' '",
    ));
    let pids: Vec<u32> = o.split_whitespace().map(|p| p.parse().unwrap()).collect();
    assert!(pids.iter().all(|p| *p < 10), "host pids visible: {pids:?}");
    assert!(pids.contains(&1), "{pids:?}");
}

#[test]
fn zombies_are_reaped() {
    // The shell exits before its grandchild; pid 1 must reap the orphan.
    let script = "( sleep 0.1 & ) ; sleep 0.6; \
                  for s in /proc/[0-9]*/stat; do cut -d' ' -f3 $s; done | grep -c Z || true";
    assert_eq!(ok(sh("zombie", script)).trim(), "0");
}

#[test]
fn signals_are_forwarded_to_the_command() {
    for (sig, name) in [
        (libc_sig::TERM, "TERM"),
        (libc_sig::HUP, "HUP"),
        (libc_sig::USR1, "USR1"),
    ] {
        let script = format!("trap 'exit 42' {name}; echo ready; while :; do sleep 0.05; done");
        let mut child = oajail(&format!("fwd{name}"), &["-c", &script])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 6];
        std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
        let kill = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(child.id().to_string())
            .status();
        assert!(kill.unwrap().success());
        assert_eq!(child.wait().unwrap().code(), Some(42), "signal {name}");
    }
}

/// Signal numbers (x86_64/aarch64 generic values) without a libc dependency.
mod libc_sig {
    pub const HUP: i32 = 1;
    pub const USR1: i32 = 10;
    pub const TERM: i32 = 15;
}

#[test]
fn timeout_kills_the_whole_jail() {
    let start = Instant::now();
    let o = oajail("timeout", &["--timeout", "1", "--", "sleep", "30"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(124), "{}", err(&o));
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(err(&o).contains("timeout"), "{}", err(&o));
}

/// `oajail` returns once pid 1 reports the command's code, without waiting
/// for the kernel to tear the namespaces down; pid 1 reports only after it
/// has killed and reaped every other process of the jail. So when `oajail`
/// returns, a background writer has stopped writing and a background
/// process with 200 MB to free (which takes milliseconds to exit) is gone
/// from the host's process list: had pid 1 reported before reaping them,
/// the second would still be exiting.
#[test]
fn background_processes_are_gone_when_oajail_returns() {
    let settings = settings_file(
        "bgwriter",
        "settings.json",
        r#"{"network":{"allowedDomains":[],"deniedDomains":[]},
            "filesystem":{"denyRead":[],"allowWrite":["."],"denyWrite":[]}}"#,
    );
    let home = scratch_home("bgwriter");
    std::fs::create_dir_all(home.join("w")).unwrap();
    let log = home.join("w/log");
    // By process name (`comm`): a process keeps it in /proc while it exits
    // and as a zombie, until it is reaped (its argv goes with its memory).
    let marker = format!("oajbg{}", std::process::id() % 1_000_000);
    let script = format!(
        "( while :; do echo x >> w/log; done ) & \
         {PYTHON} -c 'import ctypes, time; ctypes.CDLL(None).prctl(15, b\"{marker}\", 0, 0, 0); \
         b = b\"x\" * (200 << 20); time.sleep(60)' & \
         sleep 0.5; exit 3"
    );
    for round in 0..3 {
        let _ = std::fs::remove_file(&log);
        // No pipes: a pipe's reader would wait for every jailed holder.
        let status = oajail(
            "bgwriter",
            &["-s", settings.to_str().unwrap(), "-c", &script],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
        assert_eq!(status.code(), Some(3));
        let alive = host_has_process_named(&marker);
        let at_return = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
        assert!(!alive, "round {round}: a jailed process outlived oajail");
        assert!(at_return > 0, "round {round}: the writer never wrote");
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            std::fs::metadata(&log).unwrap().len(),
            at_return,
            "round {round}: a jailed writer ran on after oajail returned"
        );
    }
}

/// A settings file `name` with `json` in the scratch home of `tag`.
fn settings_file(tag: &str, name: &str, json: &str) -> std::path::PathBuf {
    let path = scratch_home(tag).join(name);
    std::fs::write(&path, json).unwrap();
    path
}

/// Whether a process (running, exiting or a zombie) has this `comm`.
fn host_has_process_named(name: &str) -> bool {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .any(|e| std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim_end() == name))
}

/// A process with this exact argv must not exist on the host.
fn host_has_process_with_arg(marker: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .map(|c| String::from_utf8_lossy(&c).contains(marker))
            .unwrap_or(false)
    })
}

#[test]
fn background_and_double_forked_processes_die_with_the_jail() {
    let marker = format!("4{}.25", std::process::id());
    let script = format!(
        "sleep {marker} & ( setsid sleep {marker} & ) ; nohup sleep {marker} >/dev/null 2>&1 & exit 0"
    );
    assert_eq!(sh("bg", &script).status.code(), Some(0));
    // pid 1's exit kills the namespace synchronously, but give the kernel a moment.
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !host_has_process_with_arg(&marker),
        "a jailed process outlived the jail"
    );
}

#[test]
fn inherited_descriptors_do_not_reach_the_command() {
    // bash opens fd 7 without close-on-exec and execs oajail with it.
    let script = format!("exec 7</etc/hostname 9</etc/passwd; exec {OAJAIL} -- ls /proc/self/fd");
    let o = Command::new("bash")
        .args(["-c", &script])
        .env("HOME", scratch_home("fds"))
        .current_dir(scratch_home("fds"))
        .output()
        .unwrap();
    let fds: Vec<String> = ok(o).split_whitespace().map(String::from).collect();
    // 0, 1, 2 and the directory ls itself is reading.
    assert!(
        !fds.contains(&"7".to_string()) && !fds.contains(&"9".to_string()),
        "{fds:?}"
    );
    assert!(fds.len() <= 4, "{fds:?}");
}

#[test]
fn capabilities_are_empty_and_no_new_privs_and_seccomp_are_on() {
    let o = ok(sh(
        "caps",
        "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status",
    ));
    for line in o.lines() {
        let (k, v) = line.split_once(':').unwrap();
        let v = v.trim();
        match k {
            "NoNewPrivs" => assert_eq!(v, "1"),
            "Seccomp" => assert_eq!(v, "2"),
            _ => assert_eq!(v, "0000000000000000", "{k}"),
        }
    }
    assert_eq!(o.lines().count(), 7, "{o}");
}

#[test]
fn network_is_loopback_only() {
    let o = ok(sh(
        "net",
        "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '",
    ));
    assert_eq!(o.trim(), "lo");
    let py = "import socket,errno\ns=socket.socket()\ns.settimeout(2)\n\
              try:\n  s.connect(('192.0.2.1',80)); print('connected')\n\
              except OSError as e: print('refused', e.errno)";
    let o = ok(oajail("net2", &["--", PYTHON, "-c", py]).output().unwrap());
    assert!(o.starts_with("refused"), "{o}");
}

#[test]
fn hostname_is_private() {
    assert_eq!(
        ok(sh("uts", "cat /proc/sys/kernel/hostname")).trim(),
        "oajail"
    );
}

#[test]
fn the_jail_dies_with_the_supervisor() {
    let marker = format!("5{}.75", std::process::id());
    let mut child = oajail("pdeath", &["-c", &format!("echo ready; sleep {marker}")])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 6];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
    assert!(host_has_process_with_arg(&marker));
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while host_has_process_with_arg(&marker) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !host_has_process_with_arg(&marker),
        "the jail outlived its supervisor"
    );
}

#[test]
fn rlimits_come_from_the_policy_and_core_is_zero_by_default() {
    assert_eq!(ok(sh("core", "ulimit -c")).trim(), "0");
    let path = settings_file(
        "rlim",
        "limits.json",
        r#"{"network":{"allowedDomains":[],"deniedDomains":[]},
            "filesystem":{"denyRead":[],"allowWrite":[],"denyWrite":[]},
            "oajail":{"limits":{"openFiles":64}}}"#,
    );
    let o = oajail(
        "rlim",
        &["-s", path.to_str().unwrap(), "-c", "ulimit -n; ulimit -Hn"],
    )
    .output()
    .unwrap();
    assert_eq!(ok(o).split_whitespace().collect::<Vec<_>>(), ["64", "64"]);
}

#[test]
fn the_proxy_answers_on_the_jail_listener() {
    let py = "import socket,os\n\
              print(os.environ['HTTPS_PROXY'])\n\
              s=socket.create_connection(('127.0.0.1',3128),timeout=5)\n\
              s.sendall(b'CONNECT example.com:443 HTTP/1.1\\r\\nHost: example.com:443\\r\\n\\r\\n')\n\
              print(s.recv(64).split(b'\\r\\n')[0].decode())";
    let o = oajail("proxy", &["--", PYTHON, "-c", py]).output().unwrap();
    let text = ok(o);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "http://127.0.0.1:3128", "{text}");
    assert!(lines[1].starts_with("HTTP/1.1 403"), "{text}");
}

#[test]
fn host_unix_sockets_are_unreachable() {
    let home = scratch_home("unix");
    let path = home.join("host.sock");
    let _ = std::fs::remove_file(&path);
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let py = format!(
        "import socket\ntry:\n  s=socket.socket(socket.AF_UNIX); s.connect({:?}); print('connected')\nexcept OSError as e: print('blocked', e.errno)",
        path.to_str().unwrap()
    );
    let o = ok(oajail("unix", &["--", PYTHON, "-c", &py]).output().unwrap());
    assert_eq!(o.trim(), "blocked 1", "{o}");
    assert!(
        listener.accept().is_err(),
        "the host socket saw a connection"
    );
}

#[test]
fn the_policy_wall_clock_limit_kills_the_jail() {
    let path = settings_file(
        "wall",
        "wall.json",
        r#"{"network":{"allowedDomains":[],"deniedDomains":[]},
            "filesystem":{"denyRead":[],"allowWrite":[],"denyWrite":[]},
            "oajail":{"limits":{"wallSeconds":1}}}"#,
    );
    let start = Instant::now();
    let o = oajail("wall", &["-s", path.to_str().unwrap(), "--", "sleep", "30"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(124), "{}", err(&o));
    assert!(start.elapsed() < Duration::from_secs(10));
}

/// `doctor` and `explain` say in one line how memory and the task count
/// are bounded for this caller: for the whole jail (cgroups) as root, per
/// process only otherwise (issue 13, "memory outside RLIMIT_AS").
#[test]
fn doctor_and_explain_say_how_memory_and_pids_are_bounded() {
    let path = settings_file(
        "bounds",
        "bounds.json",
        r#"{"network":{"allowedDomains":[],"deniedDomains":[]},
            "filesystem":{"denyRead":[],"allowWrite":[],"denyWrite":[]},
            "oajail":{"limits":{"addressSpaceBytes":268435456,"processes":256}}}"#,
    );
    // /proc/self belongs to the effective uid.
    let root = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap()) == 0;
    // An unprivileged caller inside a delegated cgroup v2 subtree (a systemd
    // user session, not the CI machine) is bounded as a whole too.
    let delegated =
        !root && std::fs::read_to_string("/proc/self/cgroup").is_ok_and(|c| c.contains("/user@"));
    let expected = if root {
        "memory and pids: bounded for the whole jail (addressSpaceBytes 268435456, processes 256; memory cgroup"
    } else if delegated {
        "memory and pids: bounded for the whole jail (addressSpaceBytes 268435456, processes 256; a cgroup below the delegated"
    } else {
        "memory and pids: bounded per process only (addressSpaceBytes 268435456, processes 256; RLIMIT_AS, RLIMIT_NPROC)"
    };
    for sub in ["doctor", "explain"] {
        let o = oajail("bounds", &["-s", path.to_str().unwrap(), sub])
            .output()
            .unwrap();
        let text = out(&o);
        assert_eq!(
            text.lines().filter(|l| l.contains(expected)).count(),
            1,
            "{sub}: {text}"
        );
    }
    let o = oajail("bounds", &["doctor"]).output().unwrap();
    assert!(
        out(&o).contains("memory and pids: not limited"),
        "{}",
        out(&o)
    );
}

/// `Cpus_allowed_list` of a process, from its `/proc/PID/status` text.
fn cpus_allowed(status: &str) -> &str {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no Cpus_allowed_list in {status}"))
}

#[test]
fn the_command_and_pid_1_run_on_the_callers_cpus() {
    // The supervisor keeps pid 1 off its own CPU during set-up (cpus.rs);
    // both must end on exactly the caller's mask, neither narrower (the
    // hint left in place) nor wider (a restrictive taskset undone).
    let script = "cat /proc/self/status; echo ====; cat /proc/1/status";
    let mine = std::fs::read_to_string("/proc/self/status").unwrap();
    let first = cpus_allowed(&mine)
        .split([',', '-'])
        .next()
        .unwrap()
        .to_owned();
    let narrowed = format!("taskset -c {first} ");
    for (prefix, expected) in [
        ("", cpus_allowed(&mine)),
        (narrowed.as_str(), first.as_str()),
    ] {
        let home = scratch_home("cpus");
        let o = Command::new("sh")
            .arg("-c")
            .arg(format!("{prefix}\"$0\" -c \"$1\""))
            .args([OAJAIL, script])
            .env("HOME", &home)
            .env_remove("OAJAIL_SETTINGS")
            .current_dir(&home)
            .output()
            .unwrap();
        let text = ok(o);
        let (command, pid1) = text.split_once("====").unwrap();
        assert_eq!(cpus_allowed(command), expected, "{prefix}command");
        assert_eq!(cpus_allowed(pid1), expected, "{prefix}pid 1");
    }
}
