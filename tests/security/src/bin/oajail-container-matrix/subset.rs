//! The attacks every cell runs, and how their results are judged against
//! the banner of the run they happened in.
//!
//! Why this subset (20 tests, ~40 s per cell and user here): one or two
//! attacks per rule class the brief of the container tier names —
//! secrets, writes, persistence, TCP, UDP and DNS exfiltration, unix and
//! abstract sockets, signals, other processes' `/proc` — plus the two
//! attacks that prove the egress holders (E9: a listener on 127.0.0.2 at
//! the proxy's port; E2: a UDP sink), the proxy's positive control and the
//! lab's own controls (an unjailed probe reaches the sinks, is logged by
//! the DNS responder, the unix sinks and the host canary, so a cell whose
//! lab saw nothing proves nothing). The full suite runs on the host, and
//! in the kernel matrix.
//!
//! No ICMP attack: uid 1000 in a container cannot open the lab's ICMP
//! logger (no `CAP_NET_RAW`), and [`check_subset`] keeps it out.

use oajail_security::cells::AttackOutcome;
use oajail_security::judge::{Judgement, ResultRecord};
use std::collections::BTreeMap;
use std::path::Path;

/// One test of the subset: its test binary, its name, the attack it
/// records (`None` for a control) and the rule class that attack tests
/// (doctor's and the banner's name for it).
pub struct Pick {
    /// Test binary (target name).
    pub binary: &'static str,
    /// Test function.
    pub test: &'static str,
    /// Attack id its record carries.
    pub attack: Option<&'static str>,
    /// Rule class (as doctor names it) whose loss would let it through.
    pub class: &'static str,
}

const fn pick(
    binary: &'static str,
    test: &'static str,
    attack: &'static str,
    class: &'static str,
) -> Pick {
    Pick {
        binary,
        test,
        attack: Some(attack),
        class,
    }
}

const fn control(binary: &'static str, test: &'static str) -> Pick {
    Pick {
        binary,
        test,
        attack: None,
        class: "",
    }
}

const READ: &str = "read deny (denyRead)";
/// No banner line excuses it: a daemon that outlives the run is not what
/// "host processes hidden" (the process list) loses.
const NEVER: &str = "";
const TCP: &str = "tcp egress only through the proxy";
const OTHER_NET: &str = "no udp or other network egress";

/// The subset. A secret in another process's environment or root is a
/// read of a secret, never excused by "host processes hidden".
pub const SUBSET: &[Pick] = &[
    pick("a_secrets", "blocks_ssh_key_read", "A1-ssh-key", READ),
    pick(
        "a_secrets",
        "blocks_proc_root_of_host_process",
        "A7-proc-root-host-process",
        READ,
    ),
    pick(
        "b_persistence",
        "blocks_bashrc_append",
        "B1-bashrc-append",
        "writes only in allowWrite",
    ),
    pick(
        "b_persistence",
        "blocks_git_hook",
        "B2-git-hook",
        "mandatory write denies",
    ),
    pick(
        "b_persistence",
        "blocks_daemon_outliving_the_jail",
        "B7-daemonize",
        NEVER,
    ),
    pick(
        "c_process",
        "blocks_reading_other_processes_environ",
        "C1-proc-environ",
        READ,
    ),
    pick(
        "c_process",
        "blocks_kill_of_host_canary",
        "C3-kill-host-canary",
        "signals stay inside the jail",
    ),
    pick(
        "c_process",
        "blocks_ssh_agent_socket",
        "C4-ssh-agent",
        "host unix sockets",
    ),
    pick(
        "c_process",
        "blocks_abstract_socket",
        "C5-abstract",
        "abstract unix sockets stay inside the jail",
    ),
    pick(
        "e_network",
        "blocks_direct_tcp_to_public_v4",
        "E1-tcp-public-v4",
        TCP,
    ),
    pick(
        "e_network",
        "blocks_host_loopback_services",
        "E7-host-loopback",
        TCP,
    ),
    pick(
        "e_network",
        "blocks_direct_tcp_to_the_proxy_port_on_another_loopback_address",
        "E9-proxy-port-other-address",
        TCP,
    ),
    pick(
        "e_network",
        "blocks_udp_to_public_v4",
        "E2-udp-public",
        OTHER_NET,
    ),
    pick(
        "e_network",
        "blocks_dns_to_host_resolver",
        "E3-dns-lab-resolver",
        OTHER_NET,
    ),
    pick(
        "e_network",
        "blocks_system_resolver",
        "E3-system-resolver",
        OTHER_NET,
    ),
    control("f_proxy", "control_allowed_connect_reaches_allowed_sink"),
    control("control", "control_tcp_exfil_reaches_sink"),
    control("control", "control_dns_query_is_logged"),
    control("control", "control_unix_socket_is_recorded"),
    control("control", "control_kill_of_host_canary_is_noticed"),
];

/// The subset's invariants: every attack in the catalogue, no ICMP attack
/// (see the module's comment), every class one doctor lists.
pub fn check_subset(doctor_classes: &[String]) -> Result<(), String> {
    for p in SUBSET {
        let Some(id) = p.attack else { continue };
        if oajail_security::catalog::attack(id).is_none() {
            return Err(format!("subset: {id} is not in the catalogue"));
        }
        if id.starts_with("E4") {
            return Err(format!(
                "subset: {id} needs an ICMP logger uid 1000 cannot open"
            ));
        }
        if p.class != NEVER && !doctor_classes.iter().any(|c| c == p.class) {
            return Err(format!(
                "subset: doctor lists no rule class {:?} (for {id}); doctor's: {doctor_classes:?}",
                p.class
            ));
        }
    }
    Ok(())
}

/// The binaries of the subset, each with its tests.
pub fn by_binary() -> BTreeMap<&'static str, Vec<&'static str>> {
    let mut out: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for p in SUBSET {
        out.entry(p.binary).or_default().push(p.test);
    }
    out
}

/// `test NAME ... ok|FAILED` lines of libtest's output: name → passed.
pub fn test_results(stdout: &str) -> BTreeMap<String, bool> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("test "))
        .filter_map(|l| l.split_once(" ... "))
        .map(|(name, res)| (name.trim().to_owned(), res.trim() == "ok"))
        .collect()
}

/// Judge one test of the subset from its libtest result and its record
/// (in `results`): an escape is a named loss only when a banner line of
/// the run it happened in names the attack's rule class.
pub fn judge(p: &Pick, passed: Option<bool>, results: &Path, failure: &str) -> AttackOutcome {
    let Some(id) = p.attack else {
        let (outcome, detail) = match passed {
            Some(true) => ("passed", String::new()),
            Some(false) => ("failed", failure.to_owned()),
            None => ("failed", "the test did not run".to_owned()),
        };
        return outcome_of(p.test, outcome, detail);
    };
    let record: Option<ResultRecord> = std::fs::read(results.join(format!("{id}.json")))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let Some(rec) = record else {
        let why = if passed.is_none() {
            "did not run"
        } else {
            "wrote no record"
        };
        return outcome_of(id, "failed", format!("the test {why}: {failure}"));
    };
    let named = p.class != NEVER
        && (rec.oajail_lines.iter())
            .any(|l| crate::verdicts::is_banner_line(l) && l.contains(p.class));
    let outcome = match (rec.judgement, passed) {
        (Judgement::Blocked, Some(true)) => "blocked",
        (Judgement::Residual, Some(true)) => "residual",
        (Judgement::NotApplicable, Some(true)) => "not_applicable",
        (Judgement::Escaped, _) if named => "named_loss",
        (Judgement::Escaped, _) => "escaped",
        _ => "failed",
    };
    outcome_of(id, outcome, rec.detail)
}

fn outcome_of(id: &str, outcome: &str, detail: String) -> AttackOutcome {
    AttackOutcome {
        id: id.to_owned(),
        outcome: outcome.to_owned(),
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_libtest_lines() {
        let out = "running 2 tests\ntest blocks_a ... ok\ntest blocks_b ... FAILED\n\nfailures:\n";
        let r = test_results(out);
        assert_eq!(r.get("blocks_a"), Some(&true));
        assert_eq!(r.get("blocks_b"), Some(&false));
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn an_escape_is_a_named_loss_only_under_its_own_class() {
        let dir = std::env::temp_dir().join(format!("oaj-subset-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let rec = |lines: &[&str]| {
            let r = serde_json::json!({"id": "E2-udp-public", "judgement": "escaped",
                "detail": "datagram sent", "errno": null, "signal": null, "uid": 0,
                "kernel": "k", "recorded_at": 1, "oajail_lines": lines});
            std::fs::write(dir.join("E2-udp-public.json"), r.to_string()).unwrap();
        };
        let p = SUBSET
            .iter()
            .find(|p| p.attack == Some("E2-udp-public"))
            .unwrap();
        rec(&["oajail: NOT ENFORCED: no udp or other network egress"]);
        assert_eq!(judge(p, Some(false), &dir, "").outcome, "named_loss");
        rec(&["oajail: NOT ENFORCED: private /tmp"]);
        assert_eq!(judge(p, Some(false), &dir, "").outcome, "escaped");
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(judge(p, Some(true), &dir, "").outcome, "failed");
    }
}
