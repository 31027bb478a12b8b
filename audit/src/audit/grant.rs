//! Which policy entry, if any, grants an attack's target.
//!
//! This reads the policy the way srt defines it (a deny list for reads with
//! `allowRead` re-opening a more specific region, an allow list for writes
//! with `denyWrite` carve-outs, an allow list of domains with `deniedDomains`
//! winning). It decides nothing about enforcement: it only names the entry
//! a user would have to change. A target it cannot grant stays `None`, and a
//! success there is an escape.

use super::jailinfo::{JailInfo, rule_class};
use super::{Case, Channel, Grant, Loc, Target};
use crate::canary::SECRET_ENV;
use oajail_policy::guard::held::{Anchors, held};
use oajail_policy::host::canonicalize;
use oajail_policy::{PathEntry, Policy};
use std::path::{Path, PathBuf};

/// The policy plus the lab's home and workspace it is resolved against,
/// and the jail the attacks ran in (whose named losses the run accepted).
pub struct Grants<'a> {
    /// The user's policy.
    pub policy: &'a Policy,
    /// The lab's fake home (`~`).
    pub home: PathBuf,
    /// The lab's workspace (`.`).
    pub ws: PathBuf,
    /// The jail the attacks ran in, when known.
    pub jail: Option<&'a JailInfo>,
}

impl Grants<'_> {
    /// The entries granting `target`, or `None` when the policy does not.
    pub fn of(&self, target: &Target) -> Option<Vec<Grant>> {
        match target {
            Target::Read(loc) => self.read(loc).map(|g| vec![g]),
            Target::Write(loc) => self.write(loc).map(|g| vec![g]),
            Target::Domain(name) => self.domain(name, 443).map(|g| vec![g]),
            Target::Env => self.env().map(|g| vec![g]),
            Target::UnixSockets => self.policy.network.allow_all_unix_sockets.then(|| {
                vec![grant(
                    "network.allowAllUnixSockets",
                    Some("true"),
                    "network.allowAllUnixSockets is true",
                )]
            }),
            Target::NestedUserNamespaces => {
                self.policy.process.allow_nested_user_namespaces.then(|| {
                    vec![grant(
                        "allowNestedUserNamespaces",
                        Some("true"),
                        "allowNestedUserNamespaces is true",
                    )]
                })
            }
            Target::Limit(name, amount) => self.limit(name, *amount).map(|g| vec![g]),
            Target::ContainerTier => self.policy.process.enable_weaker_nested_sandbox.then(|| {
                vec![grant(
                    "enableWeakerNestedSandbox",
                    Some("true"),
                    "enableWeakerNestedSandbox accepts the container tier, and the losses its banner names, where user namespaces are refused",
                )]
            }),
            Target::Exfil(_) | Target::Never => None,
        }
    }

    /// The grants for an exfiltration that carried the secrets `read`
    /// (their targets) out through `channel`: every secret's read must be
    /// granted and so must the channel.
    pub fn exfil(&self, channel: &Channel, read: &[Target]) -> Result<Vec<Grant>, String> {
        let mut out = Vec::new();
        for t in read {
            match self.of(t) {
                Some(g) => out.extend(g),
                None => return Err(format!("the policy denies reading {}", shown(t))),
            }
        }
        let (name, port) = match channel {
            Channel::Stdout => {
                out.push(grant(
                    "output channel",
                    None,
                    "the command's stdout always reaches its caller",
                ));
                return Ok(out);
            }
            Channel::Https(d) | Channel::DnsName(d) => (d.clone(), 443),
            Channel::Http(d) => (d.clone(), 80),
            Channel::Direct => return Err("direct egress is never granted".into()),
        };
        let probe_name = match channel {
            Channel::DnsName(d) => format!("oaj-canary.{d}"),
            _ => name,
        };
        match self.domain(&probe_name, port) {
            Some(g) => out.push(g),
            None => return Err(format!("the policy does not allow {probe_name}:{port}")),
        }
        Ok(out)
    }

    /// When the jail the attacks ran in does not hold `case`'s rule class
    /// in full (a loss its banner names and the run accepted, with
    /// `enableWeakerNestedSandbox` or `--allow-degraded`), that loss.
    pub fn tier_loss(&self, case: &Case) -> Option<Grant> {
        let jail = self.jail?;
        let class = rule_class(case)?;
        jail.unheld.iter().any(|c| c == class).then(|| {
            grant(
                "tier",
                Some(&jail.tier),
                &format!(
                    "the {} tier does not hold {class} in full here (a loss the run names and accepts)",
                    jail.tier
                ),
            )
        })
    }

    /// Why the policy does not grant `target`: the rule a blocked attack
    /// met (the covering deny entry, the allow entry that is missing, or a
    /// protection no entry lifts), or, when it does grant it, that the
    /// jail was stricter than the policy.
    pub fn denial(&self, target: &Target) -> String {
        if let Some(g) = self.of(target).and_then(|g| g.into_iter().next()) {
            return format!("stricter than the policy, which allows it: {}", g.why);
        }
        match target {
            Target::Read(loc) => self.read_denial(loc),
            Target::Write(loc) => self.write_denial(loc),
            Target::Domain(name) => self.domain_denial(name, 443),
            Target::Env => "no oajail.envKeep entry passes secret-named variables".into(),
            Target::UnixSockets => "network.allowAllUnixSockets is false".into(),
            Target::NestedUserNamespaces => "allowNestedUserNamespaces is false".into(),
            Target::Limit(name, amount) => format!("oajail.limits.{name} is below {amount} bytes"),
            Target::ContainerTier => {
                "without enableWeakerNestedSandbox, oajail must refuse to run here".into()
            }
            Target::Exfil(Channel::Stdout) => {
                "the command's stdout is always open: only the read rules stand".into()
            }
            Target::Exfil(Channel::Https(d)) => self.channel_denial(d, 443),
            Target::Exfil(Channel::DnsName(d)) => {
                self.channel_denial(&format!("oaj-canary.{d}"), 443)
            }
            Target::Exfil(Channel::Http(d)) => self.channel_denial(d, 80),
            Target::Exfil(Channel::Direct) => "direct egress is never allowed".into(),
            Target::Never => "no policy entry can allow it".into(),
        }
    }

    fn read_denial(&self, loc: &Loc) -> String {
        let path = self.resolve(loc);
        match self.covering(&self.policy.filesystem.deny_read, &path) {
            Some(deny) => format!("filesystem.denyRead {:?} covers {}", deny.path, loc.shown()),
            None => format!("no filesystem.denyRead entry covers {}", loc.shown()),
        }
    }

    fn write_denial(&self, loc: &Loc) -> String {
        let fs = &self.policy.filesystem;
        let path = self.resolve(loc);
        if let Some(deny) = self.covering(&fs.deny_write, &path) {
            return format!(
                "filesystem.denyWrite {:?} covers {}",
                deny.path,
                loc.shown()
            );
        }
        if self.covering(&fs.allow_write, &path).is_none() {
            return format!("no filesystem.allowWrite entry covers {}", loc.shown());
        }
        if path.ends_with(".git/config") && !fs.allow_git_config {
            return format!(
                "{} stays read-only without filesystem.allowGitConfig",
                loc.shown()
            );
        }
        format!(
            "{} is a mandatory protection (no entry opens it)",
            loc.shown()
        )
    }

    fn domain_denial(&self, name: &str, port: u16) -> String {
        let Ok(host) = canonicalize(name) else {
            return format!("{name} is not a host name the proxy accepts");
        };
        let net = &self.policy.network;
        match net.denied_domains.iter().find(|d| d.matches(&host, port)) {
            Some(d) => format!("network.deniedDomains {:?} covers {name}", d.as_str()),
            None => format!("no network.allowedDomains entry covers {name}:{port}"),
        }
    }

    /// An exfiltration channel to `name`: its denial, or (the domain being
    /// allowed) that the read rules left nothing to send.
    fn channel_denial(&self, name: &str, port: u16) -> String {
        match self.domain(name, port) {
            Some(g) => format!("{}, but only the read rules stand", g.why),
            None => self.domain_denial(name, port),
        }
    }

    fn resolve(&self, loc: &Loc) -> PathBuf {
        match loc {
            Loc::Home(r) => self.home.join(r),
            Loc::Ws(r) => self.ws.join(r),
            Loc::Abs(p) => PathBuf::from(p),
        }
    }

    /// The most specific entry of `list` covering `path` (longest base).
    fn covering<'e>(&self, list: &'e [PathEntry], path: &Path) -> Option<&'e PathEntry> {
        list.iter()
            .map(|e| (e, e.matcher(&self.home, &self.ws)))
            .filter(|(_, m)| m.covers(path))
            .max_by_key(|(_, m)| m.base().as_os_str().len())
            .map(|(e, _)| e)
    }

    fn base_len(&self, e: &PathEntry) -> usize {
        e.matcher(&self.home, &self.ws).base().as_os_str().len()
    }

    fn read(&self, loc: &Loc) -> Option<Grant> {
        let fs = &self.policy.filesystem;
        let path = self.resolve(loc);
        let Some(deny) = self.covering(&fs.deny_read, &path) else {
            return Some(
                grant(
                    "filesystem.denyRead",
                    None,
                    &format!(
                        "no filesystem.denyRead entry covers {} (reads are open unless denied)",
                        loc.shown()
                    ),
                )
                .covering(loc.shown()),
            );
        };
        // The jail's precedence (`policy/src/compile/rules.rs`): the deepest
        // rule decides, `allowWrite` counts as an allow, and on the same
        // path an allow wins, except over a pattern deny (srt §2.4: a
        // `**/.env` deny keeps its mask under an allow of its region).
        let (field, allow) = [
            ("allowRead", &fs.allow_read),
            ("allowWrite", &fs.allow_write),
        ]
        .into_iter()
        .filter_map(|(f, list)| Some((f, self.covering(list, &path)?)))
        .max_by_key(|(_, e)| self.base_len(e))?;
        let (a, d) = (self.base_len(allow), self.base_len(deny));
        (a > d || (a == d && !deny.is_glob())).then(|| {
            grant(
                &format!("filesystem.{field}"),
                Some(&allow.path),
                &format!(
                    "filesystem.{field} {:?} re-opens {} inside denyRead {:?}",
                    allow.path,
                    loc.shown(),
                    deny.path
                ),
            )
        })
    }

    fn write(&self, loc: &Loc) -> Option<Grant> {
        let fs = &self.policy.filesystem;
        let path = self.resolve(loc);
        let allow = self.covering(&fs.allow_write, &path)?;
        if self.covering(&fs.deny_write, &path).is_some() {
            return None;
        }
        if self.protected(&path) {
            return None;
        }
        Some(grant(
            "filesystem.allowWrite",
            Some(&allow.path),
            &format!(
                "filesystem.allowWrite {:?} covers {}",
                allow.path,
                loc.shown()
            ),
        ))
    }

    /// True when the guard protects `path` under this policy: srt's
    /// mandatory denies and the guard's catalogues (names at any depth, the
    /// home's tool files, git's), and the home's configuration unless an
    /// `allowWrite` entry names it (`oajail_policy::guard::held`, the rules
    /// the guard decides with).
    fn protected(&self, path: &Path) -> bool {
        let fs = &self.policy.filesystem;
        let at = Anchors {
            home: self.home.clone(),
            xdg: Default::default(),
        };
        let roots: Vec<PathBuf> = (fs.allow_write.iter())
            .map(|e| e.matcher(&self.home, &self.ws).base().to_path_buf())
            .collect();
        held(path, &at, &roots, fs.allow_git_config).is_some()
    }

    fn domain(&self, name: &str, port: u16) -> Option<Grant> {
        let host = canonicalize(name).ok()?;
        let net = &self.policy.network;
        if net.denied_domains.iter().any(|d| d.matches(&host, port)) {
            return None;
        }
        let entry = net
            .allowed_domains
            .iter()
            .find(|d| d.matches(&host, port))?;
        Some(grant(
            "network.allowedDomains",
            Some(entry.as_str()),
            &format!(
                "network.allowedDomains {:?} lets the proxy reach {name}:{port}",
                entry.as_str()
            ),
        ))
    }

    fn env(&self) -> Option<Grant> {
        let keep = &self.policy.oajail.env_keep;
        let hit = keep.iter().find(|k| {
            SECRET_ENV.iter().any(|n| match k.strip_suffix('*') {
                Some(prefix) => n.starts_with(prefix),
                None => *n == k.as_str(),
            })
        })?;
        Some(grant(
            "oajail.envKeep",
            Some(hit),
            &format!("oajail.envKeep {hit:?} passes secret-named variables into the jail"),
        ))
    }

    fn limit(&self, name: &str, amount: u64) -> Option<Grant> {
        let l = &self.policy.oajail.limits;
        let set = match name {
            "addressSpaceBytes" => l.address_space_bytes,
            "tmpSizeBytes" => l.tmp_size_bytes,
            "fileSizeBytes" => l.file_size_bytes,
            _ => return None,
        };
        let field = format!("oajail.limits.{name}");
        match set {
            None => Some(grant(&field, None, &format!("no {field} is set"))),
            Some(v) if v > amount => Some(grant(
                &field,
                Some(&v.to_string()),
                &format!("{field} {v} allows {amount} bytes"),
            )),
            Some(_) => None,
        }
    }
}

fn grant(field: &str, entry: Option<&str>, why: &str) -> Grant {
    Grant {
        field: field.to_owned(),
        entry: entry.map(str::to_owned),
        why: why.to_owned(),
        covers: String::new(),
    }
}

impl Grant {
    fn covering(mut self, what: String) -> Grant {
        self.covers = what;
        self
    }
}

fn shown(t: &Target) -> String {
    match t {
        Target::Read(l) | Target::Write(l) => l.shown(),
        Target::Env => "the secret-named environment".into(),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::audit::{Kind, Stage};

    fn case(id: &str, target: Target) -> Case {
        Case {
            id: id.into(),
            family: id.chars().next().unwrap(),
            title: String::new(),
            kind: Kind::Isolation,
            target,
            probe: vec![],
            stage: Stage::default(),
        }
    }

    #[test]
    fn a_loss_the_jail_names_allows_only_its_own_rows() {
        let policy = Policy::builtin_default();
        let jail = JailInfo {
            tier: "container".into(),
            unheld: vec!["other-egress".into()],
            ..JailInfo::default()
        };
        let grants = Grants {
            policy: &policy,
            home: PathBuf::from("/lab/home"),
            ws: PathBuf::from("/lab/ws"),
            jail: Some(&jail),
        };
        let udp = grants
            .tier_loss(&case("E2-udp-public", Target::Never))
            .unwrap();
        assert_eq!(
            (udp.field.as_str(), udp.entry.as_deref()),
            ("tier", Some("container"))
        );
        assert_eq!(
            udp.why,
            "the container tier does not hold other-egress in full here (a loss the run names and accepts)"
        );
        // TCP egress is held: a direct TCP success stays an escape.
        assert!(
            grants
                .tier_loss(&case("E1-tcp-public-v4", Target::Never))
                .is_none()
        );
        assert!(
            grants
                .tier_loss(&case("G1-secret-env", Target::Env))
                .is_none()
        );
        let none = Grants {
            jail: None,
            ..grants
        };
        assert!(
            none.tier_loss(&case("E2-udp-public", Target::Never))
                .is_none()
        );
    }

    fn grants_for<'a>(policy: &'a Policy) -> Grants<'a> {
        Grants {
            policy,
            home: PathBuf::from("/lab/home"),
            ws: PathBuf::from("/lab/ws"),
            jail: None,
        }
    }

    fn entries(l: &[&str]) -> Vec<PathEntry> {
        l.iter()
            .map(|p| PathEntry::parse(p, false).unwrap())
            .collect()
    }

    #[test]
    fn reads_follow_the_jails_precedence() {
        let mut policy = Policy::builtin_default();
        let fs = &mut policy.filesystem;
        fs.deny_read = entries(&["~/.aws", "~/.ssh", "**/.env"]);
        fs.allow_read = entries(&["~/.aws", "~", "."]);
        fs.allow_write = entries(&["~/.ssh"]);
        let g = grants_for(&policy);
        let read = |r: &str| g.of(&Target::Read(Loc::Home(r.into())));
        // An allow on the denied path itself lifts it.
        let aws = read(".aws/credentials").unwrap();
        assert_eq!(aws[0].field, "filesystem.allowRead");
        // allowWrite is an allow for reads too.
        let ssh = read(".ssh/id_rsa").unwrap();
        assert_eq!(ssh[0].field, "filesystem.allowWrite");
        // A pattern deny keeps its mask under an allow of its region.
        assert!(g.of(&Target::Read(Loc::Ws(".env".into()))).is_none());
        // An ancestor's allow does not beat a deeper deny.
        policy.filesystem.allow_read = entries(&["~"]);
        policy.filesystem.allow_write.clear();
        let g = grants_for(&policy);
        assert!(
            g.of(&Target::Read(Loc::Home(".aws/credentials".into())))
                .is_none()
        );
    }
}
