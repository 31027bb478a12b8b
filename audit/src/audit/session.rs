//! Running the audit: one fresh lab per attack, several at once, each
//! command being the real `oajail` with the user's policy around the probe.

use super::abspaths::overlay_plan;
use super::evidence::{Judged, judge};
use super::grant::Grants;
use super::jailinfo::JailInfo;
pub use super::sources::default_base;
use super::sources::secret_sources;
use super::{Case, Finding, Loc, Stage};
use crate::canary;
use crate::lab::{Lab, LabError, RunOptions, Tools};
use crate::labspec::{ALLOWED_V4, DnsMode};
use oajail_policy::Policy;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// Everything an audit run needs besides the cases.
#[derive(Debug, Clone)]
pub struct Setup {
    /// `oajail` (normally the running binary), `oajail-probe`, `oajail-lab`.
    pub tools: Tools,
    /// Directory the labs are made in (not under /tmp: the jail hides it).
    pub base: PathBuf,
    /// Run as this uid/gid (`--as-user`), else as the caller.
    pub owner: Option<(u32, u32)>,
    /// The settings file's text; `None` audits the built-in default.
    pub policy_text: Option<String>,
    /// Extra environment for every command (test switches of a test build).
    pub env: Vec<(String, String)>,
    /// Labs run at the same time.
    pub jobs: usize,
    /// Refuse oajail user namespaces in every lab, as a container's default
    /// seccomp profile does (`--tier container`): the jail then runs its
    /// container tier.
    pub refuse_userns: bool,
}

/// Why the audit could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// A lab could not be built (the step is named).
    #[error("cannot build the lab: {0}")]
    Lab(#[source] LabError),
    /// The lab started but could not run its own namespaces or sinks.
    #[error("cannot build the lab: {0}")]
    LabStep(String),
    /// oajail refused to run the probe under this policy.
    #[error("oajail could not run the probe under this policy: {0}")]
    Jail(String),
}

impl Setup {
    fn lab(&self, name: &str) -> Result<Lab, LabError> {
        let safe: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            // Short: the lab's unix sockets live below its directory.
            .take(12)
            .collect();
        let mut lab = Lab::create(&safe, self.tools.clone(), &self.base, self.owner)?;
        lab.quiet = true;
        Ok(lab)
    }

    fn argv(&self, lab: &Lab, case: &Case) -> Vec<String> {
        let mut argv = vec![self.tools.oajail.display().to_string()];
        if self.policy_text.is_some() {
            argv.extend(["-s".to_owned(), lab.path("policy.json")]);
        }
        let fill = |a: &String| {
            a.replace("@HOME@", &lab.path("home"))
                .replace("@WS@", &lab.path("ws"))
                .replace("@LAB@", &lab.dir.display().to_string())
                .replace("@PID@", &lab.canary_pid().to_string())
                .replace("@ABSTRACT@", &lab.abstract_name)
                .replace("@TOKEN@", &lab.token)
        };
        argv.extend(case.stage.oajail_args.iter().map(fill));
        argv.push("--".into());
        argv.push(self.tools.probe.display().to_string());
        argv.extend(case.probe.iter().map(fill));
        argv
    }

    fn options(&self, lab: &Lab, stage: &Stage, sources: &[(String, Loc)]) -> RunOptions {
        RunOptions {
            overlays: overlay_plan(sources).into_iter().map(|o| o.dir).collect(),
            dns: DnsMode::Sinkhole,
            env: self.env.clone(),
            pty: stage.pty,
            keyring_desc: stage.keyring.then(|| format!("oaj_canary_{}", lab.token)),
            daemon_marker: stage.daemon.then(|| format!("oajail-daemon-{}", lab.token)),
            no_userns: stage.no_userns,
            refuse_userns: self.refuse_userns,
            ..RunOptions::default()
        }
    }

    /// Plant the policy's extra canaries and the settings file, then hand
    /// the lab to its owner and take the home's reference snapshot.
    fn prepare(
        &self,
        lab: &mut Lab,
        sources: &[(String, Loc)],
        stage: &Stage,
    ) -> Result<(), LabError> {
        plant_overlays(lab, sources)?;
        for (slug, loc) in sources {
            let path = match loc {
                Loc::Home(r) => lab.dir.join("home").join(r),
                Loc::Ws(r) => lab.dir.join("ws").join(r),
                Loc::Abs(_) => continue,
            };
            if !path.exists() {
                let text = format!("secret={}\n", canary::canary(&lab.token, slug));
                canary::plant(&path, &text)
                    .map_err(|e| LabError::new(format!("plant {}", loc.shown()), e))?;
            }
        }
        if let Some(rel) = &stage.symlink_to_home {
            let link = lab.dir.join("ws").join(rel);
            if let Some(parent) = link.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| LabError::new(format!("mkdir for ./{rel}"), e))?;
            }
            std::os::unix::fs::symlink(lab.dir.join("home"), &link)
                .map_err(|e| LabError::new(format!("plant ./{rel} -> home"), e))?;
        }
        let project = stage.project.as_ref().and_then(|loc| match loc {
            Loc::Home(r) => Some((loc, lab.dir.join("home").join(r))),
            Loc::Ws(r) => Some((loc, lab.dir.join("ws").join(r))),
            Loc::Abs(_) => None,
        });
        if let Some((loc, dir)) = project {
            for (file, text) in [("Cargo.toml", "[package]\n"), ("package.json", "{}\n")] {
                canary::plant(&dir.join(file), text)
                    .map_err(|e| LabError::new(format!("plant the project {}", loc.shown()), e))?;
            }
        }
        self.write_policy(lab)?;
        lab.give_to_owner()?;
        lab.rebaseline_home();
        Ok(())
    }

    /// The lab's copy of the settings file. One change: the sink that
    /// answers every allowed domain sits on an address of the lab's own
    /// interface, which the proxy refuses as a local destination; the copy
    /// adds exactly that address to `oajail.allowPrivateDestinations` so an
    /// allowed domain is as reachable as it is on the real network. Nothing
    /// else reaches it: direct connections stay the jail's to refuse.
    fn write_policy(&self, lab: &Lab) -> Result<(), LabError> {
        let Some(text) = &self.policy_text else {
            return Ok(());
        };
        let text = match serde_json::from_str::<serde_json::Value>(text) {
            Ok(mut doc) => {
                let oajail = doc
                    .as_object_mut()
                    .map(|o| o.entry("oajail").or_insert_with(|| serde_json::json!({})));
                if let Some(serde_json::Value::Object(o)) = oajail {
                    let list = o
                        .entry("allowPrivateDestinations")
                        .or_insert_with(|| serde_json::json!([]));
                    if let Some(a) = list.as_array_mut() {
                        a.push(serde_json::json!(ALLOWED_V4));
                    }
                }
                keep_sink_tunnels_opaque(&mut doc);
                serde_json::to_string_pretty(&doc).unwrap_or_else(|_| text.clone())
            }
            // Not plain JSON: oajail reports it in the preflight, as it would.
            Err(_) => text.clone(),
        };
        std::fs::write(lab.dir.join("policy.json"), text)
            .map_err(|e| LabError::new("copy the settings file into the lab", e))
    }

    /// Prove the lab and the jail work before any verdict is trusted: the
    /// probe must run under oajail with this policy inside a lab planted
    /// as every attack's lab is (the overlays for absolute paths included).
    /// Then ask oajail, in the same lab, which jail it builds there.
    pub fn preflight(&self, policy: &Policy) -> Result<JailInfo, AuditError> {
        let mut lab = self.lab("preflight").map_err(AuditError::Lab)?;
        let sources = secret_sources(policy);
        self.prepare(&mut lab, &sources, &Stage::default())
            .map_err(AuditError::Lab)?;
        let list = Case {
            id: "preflight".into(),
            family: 'A',
            title: "list the probe's attacks".into(),
            kind: super::Kind::Isolation,
            target: super::Target::Never,
            probe: vec!["list".into()],
            stage: Stage::default(),
        };
        let run = lab
            .try_run(
                self.argv(&lab, &list),
                &self.options(&lab, &list.stage, &sources),
            )
            .map_err(AuditError::Lab)?;
        if let Some(e) = run.lab.lab_error {
            return Err(AuditError::LabStep(e));
        }
        if !run.stdout.lines().any(|l| l == "read-file") {
            let why = super::lines::refusal(&run.stderr)
                .or_else(|| run.stderr.lines().last())
                .unwrap_or("no output")
                .trim()
                .to_owned();
            return Err(AuditError::Jail(format!(
                "exit {:?}: {why}",
                run.lab.exit_code
            )));
        }
        self.jail_info(&lab, &sources)
    }

    /// `oajail explain --json` with this policy, run where the attacks run.
    fn jail_info(&self, lab: &Lab, sources: &[(String, Loc)]) -> Result<JailInfo, AuditError> {
        let mut argv = vec![self.tools.oajail.display().to_string()];
        if self.policy_text.is_some() {
            argv.extend(["-s".to_owned(), lab.path("policy.json")]);
        }
        argv.extend(["explain".to_owned(), "--json".to_owned()]);
        let run = lab
            .try_run(argv, &self.options(lab, &Stage::default(), sources))
            .map_err(AuditError::Lab)?;
        if let Some(e) = run.lab.lab_error {
            return Err(AuditError::LabStep(e));
        }
        JailInfo::parse(&run.stdout).map_err(AuditError::Jail)
    }

    /// Run one case in a fresh lab.
    pub fn run_case(&self, policy: &Policy, jail: &JailInfo, case: &Case) -> Finding {
        let start = Instant::now();
        let sources = secret_sources(policy);
        let judged = self.lab(&case.id).and_then(|mut lab| {
            self.prepare(&mut lab, &sources, &case.stage)?;
            let opts = self.options(&lab, &case.stage, &sources);
            let run = lab.try_run(self.argv(&lab, case), &opts)?;
            let grants = Grants {
                policy,
                home: lab.dir.join("home"),
                ws: lab.dir.join("ws"),
                jail: Some(jail),
            };
            Ok(judge(case, &mut lab, &run, &grants, &sources))
        });
        let judged = judged.unwrap_or_else(|e| Judged::inconclusive(format!("lab: {e}")));
        Finding {
            case: case.clone(),
            verdict: judged.verdict,
            grants: judged.grants,
            detail: judged.detail,
            reason: judged.reason,
            elapsed_ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// Run every case, `jobs` at a time, in the jail `jail` describes (the
    /// preflight's); `progress` sees each finding as it lands. The findings
    /// come back in the order of `cases`.
    pub fn run_all(
        &self,
        policy: &Policy,
        jail: &JailInfo,
        cases: &[Case],
        progress: &(dyn Fn(&Finding) + Sync),
    ) -> Vec<Finding> {
        let next = AtomicUsize::new(0);
        let slots: Mutex<Vec<Option<Finding>>> = Mutex::new(vec![None; cases.len()]);
        std::thread::scope(|s| {
            for _ in 0..self.jobs.max(1) {
                s.spawn(|| {
                    loop {
                        if crate::interrupt::stopped().is_some() {
                            break;
                        }
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        let Some(case) = cases.get(i) else { break };
                        let f = self.run_case(policy, jail, case);
                        progress(&f);
                        if let Ok(mut slots) = slots.lock() {
                            slots[i] = Some(f);
                        }
                    }
                });
            }
        });
        slots
            .into_inner()
            .unwrap_or_default()
            .into_iter()
            .flatten()
            .collect()
    }
}

/// The upper layers of the lab's overlays (`<lab>/abs/<i>/upper`), holding
/// the canaries for the policy's absolute paths; the lab mounts them.
fn plant_overlays(lab: &Lab, sources: &[(String, Loc)]) -> Result<(), LabError> {
    for (i, overlay) in overlay_plan(sources).iter().enumerate() {
        let upper = lab.dir.join(format!("abs/{i}/upper"));
        std::fs::create_dir_all(lab.dir.join(format!("abs/{i}/work")))
            .map_err(|e| LabError::new("make the overlay work directory", e))?;
        for (slug, rel) in &overlay.files {
            let text = format!("secret={}\n", canary::canary(&lab.token, slug));
            canary::plant(&upper.join(rel), &text).map_err(|e| {
                LabError::new(format!("plant {}", overlay.dir.join(rel).display()), e)
            })?;
        }
    }
    Ok(())
}

/// The uid and primary gid of user `name` (`--as-user`).
pub fn lookup_user(name: &str) -> Option<(u32, u32)> {
    nix::unistd::User::from_name(name)
        .ok()
        .flatten()
        .map(|u| (u.uid.as_raw(), u.gid.as_raw()))
}

/// True when this process runs as root.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The lab's sinks do not speak TLS, so under `tlsTerminate` the proxy's
/// upstream handshake to them fails and an HTTPS exfiltration to an allowed
/// domain would look blocked, though on the real network termination lets it
/// through. When no `oajail.httpRules` governs a host (those decide by
/// method and path, which the lab cannot stand in for), the copy lists the
/// allowed domains in `tlsTerminate.excludeDomains`: the tunnel stays
/// opaque, as reachable as it really is.
fn keep_sink_tunnels_opaque(doc: &mut serde_json::Value) {
    let governed = doc
        .pointer("/oajail/httpRules")
        .is_some_and(|r| r.as_object().is_some_and(|o| !o.is_empty()));
    let allowed = doc.pointer("/network/allowedDomains").cloned();
    let Some(tls) = doc.pointer_mut("/network/tlsTerminate") else {
        return;
    };
    let (false, Some(serde_json::Value::Array(allowed)), Some(tls)) =
        (governed, allowed, tls.as_object_mut())
    else {
        return;
    };
    let exclude = tls
        .entry("excludeDomains")
        .or_insert_with(|| serde_json::json!([]));
    if let Some(list) = exclude.as_array_mut() {
        list.extend(
            allowed
                .into_iter()
                .filter(|d| !list.contains(d))
                .collect::<Vec<_>>(),
        );
    }
}
