//! The negotiation as a table: kernels and environments (what each step of
//! a run did there) → decision.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

const NEW: Kernel = Kernel {
    landlock_abi: Some(7),
    seccomp: true,
    user_notif: true,
    mount_api: true,
    steps: Steps::ASSUMED,
    place: Place::HOST,
};

const FACTS: PlanFacts = PlanFacts {
    restrict_tcp: true,
    unix_sockets_denied: true,
};

const EPERM: Outcome = Outcome::Refused { errno: libc::EPERM };

fn abi(v: Option<u8>) -> Kernel {
    Kernel {
        landlock_abi: v,
        ..NEW
    }
}

fn decide(kernel: Kernel) -> Result<Negotiation, NegotiationError> {
    Negotiation::decide(kernel, FACTS, &Request::default())
}

fn accept_container() -> Request {
    Request {
        accept_container: true,
        ..Request::default()
    }
}

fn accept_all() -> Request {
    Request {
        accept_unheld: true,
        ..Request::default()
    }
}

/// Every step tried and working.
fn tried() -> Steps {
    Steps {
        move_chroot: Outcome::Untried,
        ..Steps::ASSUMED.namespace_steps(Outcome::Works)
    }
}

fn place(engine: Engine) -> Place {
    Place {
        engine,
        seccomp_filtered: true,
        proc_masked: true,
        ..Place::HOST
    }
}

/// The environments of the test matrix, as the probe finds them.
fn docker_default() -> Kernel {
    Kernel {
        steps: Steps::without_user_namespace(libc::EPERM),
        place: place(Engine::Docker),
        ..NEW
    }
}

/// `--security-opt seccomp=unconfined`: the masked /proc refuses a fresh one.
fn docker_unconfined() -> Kernel {
    Kernel {
        steps: Steps {
            fresh_proc: EPERM,
            ..tried()
        },
        place: place(Engine::Docker),
        ..NEW
    }
}

/// `--cap-add SYS_ADMIN`: namespaces allowed, `pivot_root` still refused.
fn docker_sys_admin() -> Kernel {
    Kernel {
        steps: Steps {
            fresh_proc: EPERM,
            pivot_root: EPERM,
            move_chroot: Outcome::Works,
            ..tried()
        },
        place: place(Engine::Docker),
        ..NEW
    }
}

/// Rootless podman: `sethostname` refused; with `unmask=ALL` only that.
fn podman_rootless(unmask_all: bool) -> Kernel {
    let fresh_proc = if unmask_all { Outcome::Works } else { EPERM };
    Kernel {
        steps: Steps {
            hostname: EPERM,
            fresh_proc,
            ..tried()
        },
        place: Place {
            userns: true,
            proc_masked: !unmask_all,
            ..place(Engine::Podman)
        },
        ..NEW
    }
}

/// A pod with RuntimeDefault: the clone refused, with or without its own
/// user namespace.
fn k8s_runtime_default(host_users: bool) -> Kernel {
    Kernel {
        place: Place {
            userns: !host_users,
            ..place(Engine::Kubernetes)
        },
        ..docker_default()
    }
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
        assert!(layers.uts && layers.fresh_proc && layers.pivot && !layers.connect);
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
    let err = decide(abi(None)).unwrap_err().to_string();
    assert!(
        err.starts_with("kernel: no layer holds read deny (denyRead) (needs landlock abi 1; here only mounts (not a denied file the host creates, replaces"),
        "{err}"
    );
    let n = Negotiation::decide(abi(None), FACTS, &accept_all()).unwrap();
    assert_eq!(n.unheld, [RuleClass::ReadDeny]);
    assert_eq!((n.landlock_abi, n.layers().landlock), (0, false));
    let banner = n.banner().join("\n");
    assert!(
        banner.contains("NOT ENFORCED in full: read deny (denyRead): a denied file the host"),
        "{banner}"
    );
    let no_guard = Kernel {
        landlock_abi: Some(1),
        user_notif: false,
        ..NEW
    };
    let n = Negotiation::decide(no_guard, FACTS, &accept_all()).unwrap();
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

/// Each environment of the container matrix: the decision without the
/// key, with srt's `enableWeakerNestedSandbox`, and on Debian 12's kernel
/// (Landlock ABI 2) with it.
#[test]
fn snapshots_of_the_container_matrix() {
    let environments = [
        ("docker_default", docker_default()),
        ("docker_seccomp_unconfined", docker_unconfined()),
        ("docker_sys_admin", docker_sys_admin()),
        ("podman_rootless", podman_rootless(false)),
        ("podman_rootless_unmask_all", podman_rootless(true)),
        ("k8s_runtime_default", k8s_runtime_default(true)),
        (
            "k8s_runtime_default_host_users_false",
            k8s_runtime_default(false),
        ),
    ];
    for (name, kernel) in environments {
        let text = [
            summary(kernel, &Request::default()),
            "--- with enableWeakerNestedSandbox".into(),
            summary(kernel, &accept_container()),
            "--- with it, on landlock abi 2".into(),
            summary(
                Kernel {
                    landlock_abi: Some(2),
                    ..kernel
                },
                &accept_container(),
            ),
        ];
        insta::assert_snapshot!(name, text.join("\n"));
    }
}

/// Docker's defaults: the container tier, refused in one line naming the
/// key and Docker's settings for the full jail; with the key it runs and
/// only the process list is lost (on a kernel with Landlock ABI 6).
#[test]
fn docker_defaults_give_the_container_tier() {
    let err = decide(docker_default()).unwrap_err().to_string();
    assert!(!err.contains('\n'), "{err}");
    for part in [
        "container: docker refuses user and pid namespaces (clone) (EPERM: docker's default",
        "\"enableWeakerNestedSandbox\": true",
        "`docker run --security-opt seccomp=unconfined --security-opt systempaths=unconfined`",
        "host processes hidden",
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    let n = Negotiation::decide(docker_default(), FACTS, &accept_container()).unwrap();
    assert_eq!(n.tier, Tier::Container);
    assert_eq!(n.unheld, [RuleClass::Processes]);
    let layers = n.layers();
    assert!(!layers.namespaces && !layers.mounts && !layers.netns);
    assert!(layers.landlock && layers.seccomp && layers.guard && layers.connect);
    let tcp = n
        .rules
        .iter()
        .find(|r| r.class == RuleClass::TcpEgress)
        .unwrap();
    assert!(tcp.held());
    assert!(
        tcp.line().contains("connect (every connect made by pid 1"),
        "{}",
        tcp.line()
    );
}

/// Landlock's TCP rule names a port, not an address: it never holds "tcp
/// only through the proxy" alone. Without the network namespace and the
/// connect hand-off the class is unheld, and the banner names the loss.
#[test]
fn landlock_port_rule_is_only_a_partial_tcp_holder() {
    let netns_off = Request {
        test_disabled: vec!["netns".into()],
        ..Request::default()
    };
    let n = Negotiation::decide(NEW, FACTS, &netns_off).unwrap();
    assert!(n.unheld.contains(&RuleClass::TcpEgress), "{:?}", n.unheld);
    let no_guard = Kernel {
        user_notif: false,
        ..docker_default()
    };
    let n = Negotiation::decide(no_guard, FACTS, &accept_all()).unwrap();
    let tcp = n
        .rules
        .iter()
        .find(|r| r.class == RuleClass::TcpEgress)
        .unwrap();
    assert_eq!(
        tcp.partly().as_deref(),
        Some("landlock (the proxy's port, but on every address)")
    );
    let banner = n.banner().join("\n");
    assert!(
        banner.contains(
            "NOT ENFORCED in full: tcp egress only through the proxy: tcp to the proxy's port \
             on any other address skips the proxy"
        ),
        "{banner}"
    );
    assert!(
        !banner.contains("no udp or other network egress"),
        "{banner}"
    );
}

/// Fallbacks: `sethostname` refused loses nothing (rootless podman with
/// `unmask=ALL` runs the full jail without the key); the container's
/// `/proc` loses the process list (the key accepts it); move-mount and
/// chroot lose nothing beside Landlock, and without Landlock next to the
/// container's /proc the container tier is chosen instead.
#[test]
fn each_fallback_is_negotiated_with_its_loss() {
    let n = decide(podman_rootless(true)).unwrap();
    assert_eq!(n.tier, Tier::Namespaces);
    assert!(n.unheld.is_empty());
    assert!(!n.layers().uts && n.layers().namespaces);
    assert!(
        n.banner()
            .iter()
            .any(|l| l.starts_with("fallback: namespaces: no uts"))
    );
    let err = decide(podman_rootless(false)).unwrap_err().to_string();
    assert!(
        err.contains("`podman run --security-opt unmask=ALL`"),
        "{err}"
    );
    let n = Negotiation::decide(docker_sys_admin(), FACTS, &accept_container()).unwrap();
    assert_eq!(
        (n.tier, n.fallbacks.container_proc, n.fallbacks.chroot),
        (Tier::Namespaces, true, true)
    );
    assert_eq!(n.unheld, [RuleClass::Processes]);
    assert!(!n.layers().fresh_proc && !n.layers().pivot);
    let bare = Kernel {
        landlock_abi: None,
        ..docker_sys_admin()
    };
    let n = Negotiation::decide(bare, FACTS, &accept_all()).unwrap();
    assert_eq!(n.tier, Tier::Container);
    let chroot_only = Kernel {
        steps: Steps {
            pivot_root: EPERM,
            move_chroot: Outcome::Works,
            ..tried()
        },
        ..NEW
    };
    let n = decide(chroot_only).unwrap();
    assert!(n.unheld.is_empty() && !n.layers().pivot && n.layers().fresh_proc);
}

/// The key only accepts losses: where the full jail runs, it runs.
#[test]
fn the_key_never_asks_for_losses() {
    for kernel in [
        NEW,
        Kernel {
            steps: tried(),
            ..NEW
        },
    ] {
        let n = Negotiation::decide(kernel, FACTS, &accept_container()).unwrap();
        assert_eq!(n.tier, Tier::Namespaces);
        assert_eq!(n.fallbacks, Fallbacks::default());
        assert!(n.unheld.is_empty() && n.banner().is_empty());
    }
}

/// A loss the environment's tier does not explain (a kernel feature
/// missing) still needs `--allow-degraded`, key or not.
#[test]
fn the_key_does_not_accept_what_the_kernel_lacks() {
    let no_landlock = Kernel {
        landlock_abi: None,
        ..docker_default()
    };
    let err = Negotiation::decide(no_landlock, FACTS, &accept_container()).unwrap_err();
    assert!(matches!(err, NegotiationError::Unheld(_)), "{err}");
    assert!(err.to_string().contains("read deny (denyRead)"), "{err}");
}

/// The engine's own terms in the fixes: CI jobs and pods.
#[test]
fn fixes_speak_the_engines_language() {
    let gh = Kernel {
        place: Place {
            ci: Some(Ci::GithubActions),
            ..place(Engine::Docker)
        },
        ..docker_default()
    };
    let err = decide(gh).unwrap_err().to_string();
    assert!(
        err.contains("the job's `container.options: --security-opt seccomp=unconfined --security-opt systempaths=unconfined`"),
        "{err}"
    );
    let gitlab = Kernel {
        place: Place {
            ci: Some(Ci::Gitlab),
            ..place(Engine::Docker)
        },
        ..docker_default()
    };
    let err = decide(gitlab).unwrap_err().to_string();
    assert!(
        err.contains("security_opt = [\"seccomp:unconfined\"]"),
        "{err}"
    );
    let err = decide(k8s_runtime_default(false)).unwrap_err().to_string();
    for part in [
        "hostUsers: false",
        "procMount: Unmasked",
        "seccompProfile: {type: Unconfined}",
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    let p = place(Engine::Kubernetes);
    assert!(
        p.fix(StepName::FreshProc, libc::EPERM)
            .contains("procMount: Unmasked")
    );
    assert!(
        p.fix(StepName::PivotRoot, libc::EPERM)
            .contains("Localhost")
    );
    let aa = Place {
        apparmor: true,
        ..place(Engine::Docker)
    };
    let clone = [(StepName::UserNamespace, libc::EPERM)];
    assert!(
        aa.full_jail(&clone, true)
            .contains("--security-opt apparmor=unconfined")
    );
    let host = Place {
        apparmor: true,
        ..Place::HOST
    };
    assert!(
        host.blocked_by(StepName::IdMaps, libc::EPERM)
            .contains("apparmor")
    );
    assert!(
        host.fix(StepName::UserNamespace, libc::ENOSPC)
            .contains("max_user_namespaces")
    );
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
        podman_rootless(true),
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
        err.contains("private /tmp (needs the mount api (linux 5.12)"),
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
        steps: Steps::without_user_namespace(libc::EPERM),
        ..NEW
    };
    insta::assert_snapshot!("no_userns_refused", summary(flat, &Request::default()));
    insta::assert_snapshot!("no_userns_accepted", summary(flat, &accept_all()));
    // Without the mount layer even ABI 1 is applied: it is then the only
    // holder of the filesystem rules.
    let old = Kernel {
        landlock_abi: Some(1),
        ..flat
    };
    let n = Negotiation::decide(old, FACTS, &accept_all()).unwrap();
    assert_eq!(n.landlock_abi, 1);
    assert!(n.layers().landlock && !n.layers().mounts);
    assert!(!n.unheld.contains(&RuleClass::ReadDeny));
    assert!(!n.unheld.contains(&RuleClass::CrossDirectoryRename));
    assert!(n.unheld.contains(&RuleClass::Signals));
}

#[test]
fn allow_local_binding_leaves_tcp_to_the_network_namespace_or_the_hand_off() {
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
    let n = Negotiation::decide(docker_default(), local, &accept_container()).unwrap();
    let tcp = n
        .rules
        .iter()
        .find(|r| r.class == RuleClass::TcpEgress)
        .unwrap();
    assert!(tcp.held() && tcp.holders[0].layer == LayerName::Connect);
}

/// With `allowAllUnixSockets` nothing holds the container's unix sockets
/// in the container tier: a loss the key accepts, and the banner names.
#[test]
fn unix_sockets_in_the_container_tier() {
    let unix = PlanFacts {
        unix_sockets_denied: false,
        ..FACTS
    };
    let n = Negotiation::decide(docker_default(), unix, &accept_container()).unwrap();
    assert!(n.unheld.contains(&RuleClass::HostSockets));
    let banner = n.banner().join("\n");
    assert!(banner.contains("unix sockets outside the jail"), "{banner}");
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
    let guard_off = Request {
        test_disabled: vec!["guard".into()],
        ..accept_container()
    };
    let n = Negotiation::decide(docker_default(), FACTS, &guard_off).unwrap();
    assert!(!n.layers().connect && n.unheld.contains(&RuleClass::TcpEgress));
}
