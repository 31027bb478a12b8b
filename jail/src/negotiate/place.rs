//! Where oajail runs (a host, or a container of some engine, perhaps a CI
//! runner's), and for each step that place refuses: the setting that
//! refuses it and the exact change that lets it through, in that engine's
//! own terms (docker flags, podman options, the Pod's `securityContext`).
//!
//! The table is pure; [`Place::detect`] fills a [`Place`] from the marks
//! engines leave (`/.dockerenv`, `/run/.containerenv`, the service
//! account and `KUBERNETES_SERVICE_HOST`, the runners' variables).

use super::steps::StepName;
use serde::Serialize;
use std::path::Path;

/// The container engine oajail finds itself in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    /// No sign of a container.
    Host,
    /// Docker (`/.dockerenv`).
    Docker,
    /// Podman (`/run/.containerenv`).
    Podman,
    /// A Kubernetes pod (its service account or `KUBERNETES_SERVICE_HOST`).
    Kubernetes,
    /// Some other container (the `container` variable, an overlay root).
    Other,
}

/// The CI service whose runner started the container or host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ci {
    /// GitHub Actions (`GITHUB_ACTIONS=true`).
    GithubActions,
    /// GitLab CI (`GITLAB_CI=true`).
    Gitlab,
    /// Another (`CI=true`).
    Other,
}

/// Where oajail runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Place {
    /// The engine.
    pub engine: Engine,
    /// The container runs in a user namespace of its own (rootless podman,
    /// a pod with `hostUsers: false`): its root is not the host's.
    pub userns: bool,
    /// A CI runner's job.
    pub ci: Option<Ci>,
    /// AppArmor confines this process (a profile other than `unconfined`).
    pub apparmor: bool,
    /// A seccomp filter is installed on this process (`Seccomp: 2`): an
    /// engine's profile may refuse steps.
    pub seccomp_filtered: bool,
    /// Something is mounted over parts of `/proc` (an engine's masks): a
    /// fresh procfs is then refused in a user namespace.
    pub proc_masked: bool,
}

impl Place {
    /// A host with no sign of a container and no AppArmor confinement.
    pub const HOST: Place = Place {
        engine: Engine::Host,
        userns: false,
        ci: None,
        apparmor: false,
        seccomp_filtered: false,
        proc_masked: false,
    };

    /// Whether oajail runs in a container.
    pub fn in_container(&self) -> bool {
        self.engine != Engine::Host
    }

    /// Whether something here may refuse steps of the full jail (a seccomp
    /// filter, AppArmor, masks over `/proc`): a run then tries the steps
    /// before it negotiates. Elsewhere it does not spend a process on it:
    /// a step refused after all (a sysctl) is tried and negotiated then.
    pub fn may_refuse(&self) -> bool {
        self.seccomp_filtered || self.proc_masked || self.apparmor
    }

    /// The place in words: `docker`, `rootless podman`, `a kubernetes pod`,
    /// `a github actions container job`.
    pub fn describe(&self) -> String {
        let ci = match self.ci {
            Some(Ci::GithubActions) => " (a github actions job)",
            Some(Ci::Gitlab) => " (a gitlab ci job)",
            Some(Ci::Other) => " (a ci job)",
            None => "",
        };
        let engine = match (self.engine, self.userns) {
            (Engine::Host, _) => "this host",
            (Engine::Docker, false) => "docker",
            (Engine::Docker, true) => "docker (userns-remap or rootless)",
            (Engine::Podman, false) => "podman",
            (Engine::Podman, true) => "rootless podman",
            (Engine::Kubernetes, false) => "a kubernetes pod",
            (Engine::Kubernetes, true) => "a kubernetes pod (hostUsers: false)",
            (Engine::Other, _) => "this container",
        };
        format!("{engine}{ci}")
    }

    /// What refuses `step` here (it failed with `errno`), as a clause.
    pub fn blocked_by(&self, step: StepName, errno: i32) -> String {
        if step == StepName::FreshProc {
            return "the container masks parts of /proc (kcore, keys, timer_list …), and the \
                    kernel then refuses a new procfs in a user namespace"
                .into();
        }
        if errno == libc::ENOSPC {
            return "user.max_user_namespaces is 0 (a sysctl of the host)".into();
        }
        let profile = match (self.engine, step) {
            (Engine::Host, StepName::IdMaps) if self.apparmor => {
                return "apparmor restricts unprivileged user namespaces \
                        (kernel.apparmor_restrict_unprivileged_userns)"
                    .into();
            }
            (Engine::Host, _) => {
                return "the host refuses it (kernel.unprivileged_userns_clone, \
                        user.max_user_namespaces, or a seccomp filter oajail runs under)"
                    .into();
            }
            (Engine::Docker, StepName::PivotRoot) => {
                "docker's default seccomp profile never allows pivot_root"
            }
            (Engine::Docker, _) => {
                "docker's default seccomp profile allows namespaces, mounts and sethostname \
                 only with CAP_SYS_ADMIN"
            }
            (Engine::Podman, _) => {
                "podman's seccomp profile (containers-common) refuses sethostname without \
                 CAP_SYS_ADMIN"
            }
            (Engine::Kubernetes, StepName::PivotRoot) => {
                "the pod's RuntimeDefault seccomp profile never allows pivot_root"
            }
            (Engine::Kubernetes, _) => {
                "the pod's RuntimeDefault seccomp profile allows namespaces and mounts only \
                 with CAP_SYS_ADMIN"
            }
            (Engine::Other, _) => "the container's seccomp profile refuses it",
        };
        if self.apparmor {
            format!("{profile}, or the container's apparmor profile refuses it")
        } else {
            profile.to_owned()
        }
    }

    /// The change that lets `step` through here.
    pub fn fix(&self, step: StepName, errno: i32) -> String {
        if errno == libc::ENOSPC {
            return "on the host: `sysctl -w user.max_user_namespaces=15000`".into();
        }
        match (self.engine, step) {
            (Engine::Host, _) => "see `oajail doctor`'s sysctl and apparmor lines".into(),
            (Engine::Kubernetes, StepName::FreshProc) => {
                "the container's `securityContext.procMount: Unmasked` (it needs the pod's \
                 `hostUsers: false`)"
                    .into()
            }
            (Engine::Kubernetes, _) => self.k8s_seccomp(),
            (_, StepName::FreshProc) => self.options(&[self.unmask_proc()]),
            (_, _) => self.options(&["seccomp=unconfined"]),
        }
    }

    /// The changes that let the `refused` steps through here, in one
    /// phrase; steps whose fallback loses nothing (`sethostname`, and
    /// `pivot_root` where move-mount and chroot work) are left out.
    pub fn full_jail(&self, refused: &[(StepName, i32)], chroot_works: bool) -> String {
        let needed: Vec<(StepName, i32)> = (refused.iter().copied())
            .filter(|(step, _)| match step {
                StepName::Hostname | StepName::UtsNamespace | StepName::MoveChroot => false,
                StepName::PivotRoot => !chroot_works,
                _ => true,
            })
            .collect();
        if let Some((_, errno)) = needed.iter().find(|(_, e)| *e == libc::ENOSPC) {
            return self.fix(StepName::UserNamespace, *errno);
        }
        let seccomp = needed.iter().any(|(s, _)| *s != StepName::FreshProc);
        // Behind a refused namespace step the fresh /proc was not tried:
        // masks over /proc would refuse it next.
        let proc =
            needed.iter().any(|(s, _)| *s == StepName::FreshProc) || (seccomp && self.proc_masked);
        match (self.engine, self.ci) {
            (Engine::Host, _) => "allow unprivileged user namespaces (see `oajail doctor`)".into(),
            (Engine::Kubernetes, _) => {
                let mut parts = Vec::new();
                if proc {
                    parts.push(
                        "the pod's `hostUsers: false` and the container's \
                         `securityContext.procMount: Unmasked`"
                            .to_owned(),
                    );
                }
                if seccomp {
                    parts.push(self.k8s_seccomp());
                }
                if self.apparmor {
                    parts.push("`securityContext.appArmorProfile: {type: Unconfined}`".into());
                }
                parts.join(", and ")
            }
            (Engine::Docker, Some(Ci::Gitlab)) if proc => format!(
                "{} and an unmasked /proc (the docker executor has no option for it but \
                 `privileged = true`)",
                self.options(&["seccomp=unconfined"])
            ),
            _ => {
                let mut opts = Vec::new();
                if seccomp {
                    opts.push("seccomp=unconfined");
                }
                if proc {
                    opts.push(self.unmask_proc());
                }
                self.options(&opts)
            }
        }
    }

    /// The engine's `--security-opt` value that unmasks `/proc`.
    fn unmask_proc(&self) -> &'static str {
        match self.engine {
            Engine::Podman => "unmask=ALL",
            _ => "systempaths=unconfined",
        }
    }

    /// `opts` as `--security-opt` options in the engine's own form (the
    /// command line, a GitHub Actions job's `container.options`, a GitLab
    /// runner's `security_opt`), AppArmor's added where it confines.
    fn options(&self, opts: &[&str]) -> String {
        let mut opts: Vec<&str> = opts.to_vec();
        if self.apparmor {
            opts.push("apparmor=unconfined");
        }
        let flags = |opts: &[&str]| {
            (opts.iter())
                .map(|o| format!("--security-opt {o}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        match (self.engine, self.ci) {
            (Engine::Docker, Some(Ci::GithubActions)) => {
                format!("the job's `container.options: {}`", flags(&opts))
            }
            (Engine::Docker, Some(Ci::Gitlab)) => {
                let list: Vec<String> = (opts.iter())
                    .filter(|o| !o.starts_with("systempaths"))
                    .map(|o| format!("\"{}\"", o.replacen('=', ":", 1)))
                    .collect();
                format!(
                    "the runner's config.toml `[runners.docker] security_opt = [{}]`",
                    list.join(", ")
                )
            }
            (Engine::Podman, _) => format!("`podman run {}`", flags(&opts)),
            _ => format!("`docker run {}`", flags(&opts)),
        }
    }

    fn k8s_seccomp(&self) -> String {
        "the container's `securityContext.seccompProfile: {type: Unconfined}` (or a Localhost \
         profile that allows unshare, clone's namespace flags, mount, pivot_root, the mount api \
         and sethostname)"
            .into()
    }
}

impl Place {
    /// Where oajail runs, from the marks engines and runners leave (a
    /// few `stat`s and reads; no process).
    pub fn detect() -> Place {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let exists = |p: &str| Path::new(p).exists();
        let engine = if var("KUBERNETES_SERVICE_HOST").is_some()
            || exists("/var/run/secrets/kubernetes.io/serviceaccount")
        {
            Engine::Kubernetes
        } else if exists("/run/.containerenv") {
            Engine::Podman
        } else if exists("/.dockerenv") {
            Engine::Docker
        } else if var("container").is_some() {
            Engine::Other
        } else {
            Engine::Host
        };
        let ci = if var("GITHUB_ACTIONS").as_deref() == Some("true") {
            Some(Ci::GithubActions)
        } else if var("GITLAB_CI").as_deref() == Some("true") {
            Some(Ci::Gitlab)
        } else if var("CI").is_some_and(|v| v == "true" || v == "1") {
            Some(Ci::Other)
        } else {
            None
        };
        Place {
            engine,
            userns: in_user_namespace(),
            ci,
            apparmor: apparmor_confined(),
            seccomp_filtered: seccomp_filtered(),
            proc_masked: proc_masked(),
        }
    }
}

/// Whether a seccomp filter is installed on this process.
fn seccomp_filtered() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Seccomp:"))
            .is_some_and(|v| v.trim() == "2")
    })
}

/// Whether a mount covers part of `/proc` (other than `binfmt_misc`, an
/// empty directory the kernel lets a new procfs show).
fn proc_masked() -> bool {
    std::fs::read_to_string("/proc/self/mountinfo").is_ok_and(|m| {
        m.lines().any(|line| {
            let point = line.split(' ').nth(4).unwrap_or("");
            point.starts_with("/proc/") && !point.starts_with("/proc/sys/fs/binfmt_misc")
        })
    })
}

/// Whether this process is in a user namespace other than the initial one
/// (its uid map is not the identity over the whole range).
fn in_user_namespace() -> bool {
    std::fs::read_to_string("/proc/self/uid_map").is_ok_and(|m| {
        let words: Vec<&str> = m.split_whitespace().collect();
        words != ["0", "0", "4294967295"]
    })
}

/// Whether AppArmor confines this process.
fn apparmor_confined() -> bool {
    let enabled = std::fs::read_to_string("/sys/module/apparmor/parameters/enabled")
        .is_ok_and(|v| v.trim() == "Y");
    let label = std::fs::read_to_string("/proc/self/attr/apparmor/current")
        .or_else(|_| std::fs::read_to_string("/proc/self/attr/current"))
        .unwrap_or_default();
    let label = label.trim().trim_end_matches('\0');
    enabled && !label.is_empty() && label != "unconfined"
}
