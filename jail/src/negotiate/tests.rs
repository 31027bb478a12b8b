//! The negotiation as a table: kernel feature sets → decision.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

const NEW: Kernel = Kernel {
    landlock_abi: Some(7),
    seccomp: true,
    user_notif: true,
    mount_api: true,
    user_namespaces: true,
};

const FACTS: PlanFacts = PlanFacts {
    restrict_tcp: true,
    unix_sockets_denied: true,
};

fn abi(v: Option<u8>) -> Kernel {
    Kernel {
        landlock_abi: v,
        ..NEW
    }
}

fn decide(kernel: Kernel) -> Result<Negotiation, NegotiationError> {
    Negotiation::decide(kernel, FACTS, &Request::default())
}

/// The decision in a few lines, for the snapshot.
fn summary(kernel: Kernel, request: &Request) -> String {
    match Negotiation::decide(kernel, FACTS, request) {
        Ok(n) => {
            let mut lines = n.report_lines();
            lines.extend(n.banner().into_iter().map(|l| format!("banner: {l}")));
            lines.join("\n")
        }
        Err(e) => format!("refused: {e}"),
    }
}

#[test]
fn every_landlock_abi_runs_fully_beside_namespaces() {
    for v in [1, 2, 3, 4, 5, 6, 9] {
        let n = decide(abi(Some(v))).unwrap();
        assert!(n.unheld.is_empty(), "abi {v}: {:?}", n.unheld);
        assert!(n.banner().is_empty(), "abi {v}");
        let layers = n.layers();
        assert!(layers.namespaces && layers.mounts && layers.seccomp && layers.guard);
        assert_eq!(n.landlock_abi, v.min(6), "abi {v}");
        assert!(layers.landlock, "abi {v}");
    }
}

/// Without Landlock's read complement the mounts hold a read deny only
/// for the paths as they are at the start: refused without the flag,
/// naming the part they do not hold; with the flag the banner says it.
/// ABI 1 without the guard (nothing would make its moves) is the same.
#[test]
fn no_landlock_needs_the_flag_for_read_denies() {
    let accept = Request {
        accept_unheld: true,
        ..Request::default()
    };
    let err = decide(abi(None)).unwrap_err().to_string();
    assert!(
        err.starts_with("kernel: no layer holds read deny (denyRead) (needs landlock abi 1; here only mounts (not a denied file the host creates, replaces"),
        "{err}"
    );
    let n = Negotiation::decide(abi(None), FACTS, &accept).unwrap();
    assert_eq!(n.unheld, [RuleClass::ReadDeny]);
    assert_eq!((n.landlock_abi, n.layers().landlock), (0, false));
    let banner = n.banner().join("\n");
    assert!(
        banner.contains("NOT ENFORCED in full: read deny (denyRead): only mounts (not"),
        "{banner}"
    );
    let no_guard = Kernel {
        landlock_abi: Some(1),
        user_notif: false,
        ..NEW
    };
    let n = Negotiation::decide(no_guard, FACTS, &accept).unwrap();
    let unheld = [
        RuleClass::ReadDeny,
        RuleClass::WriteDeny,
        RuleClass::MandatoryDenies,
    ];
    assert_eq!(n.unheld, unheld);
    assert!(!n.layers().landlock);
    let err = Negotiation::decide(no_guard, FACTS, &Request::default()).unwrap_err();
    assert!(
        err.to_string().contains(
            "read deny (denyRead) (needs landlock abi 2 (linux 5.19), or abi 1 with the guard"
        ),
        "{err}"
    );
}

#[test]
fn snapshots_of_the_kernels_people_have() {
    let kernels = [
        ("abi6_linux_6_12", abi(Some(6))),
        ("abi2_debian12_linux_6_1", abi(Some(2))),
        ("abi1_ubuntu22_04_linux_5_15", abi(Some(1))),
        ("abi4_ubuntu24_04_linux_6_8", abi(Some(4))),
    ];
    for (name, kernel) in kernels {
        insta::assert_snapshot!(name, summary(kernel, &Request::default()));
    }
    insta::assert_snapshot!("no_landlock", summary(abi(None), &Request::default()));
}

#[test]
fn strict_refuses_every_layer_below_the_plan() {
    let strict = Request {
        strict: true,
        ..Request::default()
    };
    assert!(Negotiation::decide(abi(Some(6)), FACTS, &strict).is_ok());
    for kernel in [
        abi(Some(2)),
        abi(None),
        Kernel {
            user_notif: false,
            ..NEW
        },
    ] {
        let err = Negotiation::decide(kernel, FACTS, &strict).unwrap_err();
        assert!(matches!(err, NegotiationError::Strict { .. }), "{err}");
    }
    let err = Negotiation::decide(abi(Some(2)), FACTS, &strict).unwrap_err();
    assert_eq!(
        err.to_string(),
        "strict: landlock runs at abi 2, the plan is written for abi 6 (no truncate (abi 3), \
         tcp port rules (abi 4), device ioctls (abi 5), signal and abstract-socket scopes \
         (abi 6)); refusing to run (strict demands every layer as planned)"
    );
}

#[test]
fn a_rule_without_holder_is_refused_naming_rule_and_feature() {
    let no_guard = Kernel {
        user_notif: false,
        ..NEW
    };
    let err = decide(no_guard).unwrap_err().to_string();
    assert!(
        err.contains("mandatory write denies (needs seccomp user notification"),
        "{err}"
    );
    assert!(!err.contains("read deny"), "{err}");
    let no_mount_api = Kernel {
        mount_api: false,
        ..NEW
    };
    let err = decide(no_mount_api).unwrap_err().to_string();
    assert!(
        err.contains("private /tmp (needs the mount api (linux 5.12))"),
        "{err}"
    );
    let no_seccomp = Kernel {
        seccomp: false,
        ..NEW
    };
    let err = decide(no_seccomp).unwrap_err().to_string();
    assert!(
        err.contains("syscall deny list (needs seccomp filters)"),
        "{err}"
    );
}

#[test]
fn without_namespaces_landlock_and_seccomp_hold_what_they_can() {
    let flat = Kernel {
        user_namespaces: false,
        ..NEW
    };
    insta::assert_snapshot!("no_userns_refused", summary(flat, &Request::default()));
    let accept = Request {
        accept_unheld: true,
        ..Request::default()
    };
    insta::assert_snapshot!("no_userns_accepted", summary(flat, &accept));
    // Without the mount layer even ABI 1 is applied: it is then the only
    // holder of the filesystem rules.
    let old = Kernel {
        landlock_abi: Some(1),
        ..flat
    };
    let n = Negotiation::decide(old, FACTS, &accept).unwrap();
    assert_eq!(n.landlock_abi, 1);
    assert!(n.layers().landlock && !n.layers().mounts);
    assert!(!n.unheld.contains(&RuleClass::ReadDeny));
    assert!(n.unheld.contains(&RuleClass::Signals));
}

#[test]
fn allow_local_binding_leaves_tcp_to_the_network_namespace() {
    let local = PlanFacts {
        restrict_tcp: false,
        ..FACTS
    };
    let n = Negotiation::decide(NEW, local, &Request::default()).unwrap();
    let tcp = n
        .rules
        .iter()
        .find(|r| r.class == RuleClass::TcpEgress)
        .unwrap();
    assert_eq!(tcp.holders.len(), 1);
    assert_eq!(tcp.holders[0].layer, LayerName::NetNamespace);
}

#[test]
fn test_switches_never_refuse_and_list_what_they_leave_unheld() {
    let request = Request {
        test_disabled: vec!["mounts".into(), "caps".into()],
        ..Request::default()
    };
    let n = Negotiation::decide(NEW, FACTS, &request).unwrap();
    let layers = n.layers();
    assert!(!layers.mounts && !layers.caps && layers.landlock);
    assert!(n.unheld.contains(&RuleClass::PrivateTmp));
    assert!(!n.unheld.contains(&RuleClass::ReadDeny));
}
