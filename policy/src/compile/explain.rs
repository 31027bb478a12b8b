//! Why the jail refused a path, and which settings entry would allow it.
//!
//! The jail's pid 1 reports what it saw (a write the read-only mounts or
//! Landlock refused, a write the guard refused, an open of a hidden path);
//! it knows the call and the path, not the policy. The supervisor asks an
//! [`Explainer`], built from the same policy and host as the plans, which
//! rule decided and what to add to the settings file, or why nothing can
//! be added: a mandatory protection, a secret store, a path the user denied
//! by name. `oajail learn` proposes exactly these fixes, so a live line and
//! a learnt file never disagree.
//!
//! Built on demand (most runs refuse nothing): it resolves the policy's
//! lists again, as [`super::compile`] does, plus each entry on its own so a
//! refusal can name the entry as the user wrote it.

use super::rules::{Rules, covers};
use super::suggest::{self, Protections};
use super::{CompileError, FsView, HostFacts};
use crate::{PathEntry, Policy};
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What explains one refusal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// Whether the policy refused it at all (false: the file's own
    /// permissions, an existing name…; nothing to report).
    pub by_policy: bool,
    /// Machine-readable reason: `outside_allow_write`, `hidden`,
    /// `deny_write`, `mandatory`, `deny_read`, `host_mask`.
    pub reason: &'static str,
    /// The rule in words, naming the entry as written
    /// (`filesystem.denyRead "~/.ssh"`).
    pub rule: String,
    /// What would allow it.
    pub fix: Fix,
}

/// The settings entry that would allow a refused access, or why none can.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Fix {
    /// Add `value` to the list `field` (`filesystem.allowWrite` …).
    Add {
        /// The settings list.
        field: &'static str,
        /// The entry, `~/`-relative under the home directory.
        value: String,
        /// The path exists on the host now (oajail ignores an entry that
        /// does not: it must be made first).
        exists: bool,
        /// It is, or would be made as, a directory.
        dir: bool,
    },
    /// Nothing can be added; `why`.
    None {
        /// Why no entry is proposed.
        why: String,
    },
}

impl Fix {
    /// The fix in words, for a refusal line.
    pub fn text(&self) -> String {
        match self {
            Fix::Add {
                field,
                value,
                exists: true,
                ..
            } => format!("add \"{value}\" to {field}"),
            Fix::Add {
                field,
                value,
                exists: false,
                ..
            } => format!("create {value} and add \"{value}\" to {field}"),
            Fix::None { why } => format!("no entry is proposed: {why}"),
        }
    }
}

/// The policy's rules on this host, for explaining refusals.
#[derive(Debug)]
pub struct Explainer {
    rules: Rules,
    /// Each list entry as written, with the paths it resolves to.
    entries: Vec<(&'static str, String, Vec<PathBuf>)>,
    protections: Protections,
}

impl Explainer {
    /// Resolve `policy` for the host `facts` and `fs` describe.
    pub fn new(policy: &Policy, facts: &HostFacts, fs: &dyn FsView) -> Result<Self, CompileError> {
        let rules = Rules::build(policy, facts, fs)?;
        let fsp = &policy.filesystem;
        let lists: [(&'static str, &Vec<PathEntry>); 4] = [
            ("denyRead", &fsp.deny_read),
            ("allowRead", &fsp.allow_read),
            ("allowWrite", &fsp.allow_write),
            ("denyWrite", &fsp.deny_write),
        ];
        let mut entries = Vec::new();
        for (field, list) in lists {
            for entry in list {
                let paths = Rules::entry_paths(fs, field, entry, &rules.home, &facts.cwd);
                entries.push((field, entry.path.clone(), paths));
            }
        }
        let protections = Protections::new(policy, facts, fs, &rules);
        Ok(Explainer {
            rules,
            entries,
            protections,
        })
    }

    /// A write-like call the kernel refused (read-only mount, Landlock);
    /// `dir`: the call made a directory. `fs` is the host, as at [`Explainer::new`].
    pub fn write(&self, fs: &dyn FsView, path: &Path, dir: bool) -> Explanation {
        if !self.rules.visible(path) {
            let (reason, rule) = self.hidden_by(path);
            let why = format!("the policy hides {} ({rule})", path.display());
            return explained(reason, rule, Fix::None { why });
        }
        if covers(&self.rules.deny_write, path) {
            return self.denied_write(path);
        }
        if self.rules.writable(path) {
            return not_the_policy();
        }
        let fix = match suggest::write(&self.protections, fs, &self.rules.home, path, dir) {
            Ok(s) => Fix::Add {
                field: "filesystem.allowWrite",
                value: s.value,
                exists: s.exists,
                dir: s.dir,
            },
            Err(why) => Fix::None { why },
        };
        let rule = "no filesystem.allowWrite entry covers it".to_owned();
        explained("outside_allow_write", rule, fix)
    }

    /// A write-like call the guard refused, with the guard's rule. The
    /// default protection of the home's configuration yields to an
    /// `allowWrite` entry that names the configuration, so that one gets a
    /// proposal like any write outside the writable roots.
    pub fn guard(&self, fs: &dyn FsView, path: &Path, rule: &str, dir: bool) -> Explanation {
        if rule == "denyWrite" || rule == "moves a denyWrite path" {
            return self.denied_write(path);
        }
        if rule == crate::guard::DEFAULT_RULE {
            let fix = match suggest::write(&self.protections, fs, &self.rules.home, path, dir) {
                Ok(s) => Fix::Add {
                    field: "filesystem.allowWrite",
                    value: s.value,
                    exists: s.exists,
                    dir: s.dir,
                },
                Err(why) => Fix::None { why },
            };
            return explained("home_configuration", rule.to_owned(), fix);
        }
        let why = "the guard holds it whatever the settings say".to_owned();
        let rule = format!("a mandatory protection: {rule}");
        explained("mandatory", rule, Fix::None { why })
    }

    /// A unix socket refused because the policy allows none.
    pub fn unix_socket(&self) -> Explanation {
        let why = "only network.allowAllUnixSockets: true allows it, and that allows every unix \
                   socket the jail can see (host service sockets stay hidden); set it yourself if \
                   the command needs local sockets"
            .to_owned();
        let rule = "unix sockets are off (network.allowAllUnixSockets is false)".to_owned();
        explained("unix_socket", rule, Fix::None { why })
    }

    /// An open of a path the policy hides.
    pub fn read(&self, fs: &dyn FsView, path: &Path) -> Explanation {
        if self.rules.visible(path) {
            return not_the_policy();
        }
        let (reason, rule) = self.hidden_by(path);
        let fix = match self.deciding(path) {
            Some(denied) if reason == "deny_read" => {
                match suggest::read(&self.protections, fs, &self.rules.home, path, &denied) {
                    Ok(s) => Fix::Add {
                        field: "filesystem.allowRead",
                        value: s.value,
                        exists: true,
                        dir: s.dir,
                    },
                    Err(why) => Fix::None { why },
                }
            }
            _ => Fix::None {
                why: format!("{rule} is always hidden"),
            },
        };
        explained(reason, rule, fix)
    }

    /// The protections a proposal must keep clear of (`learn`).
    pub fn protections(&self) -> &Protections {
        &self.protections
    }

    /// The home directory, canonical.
    pub fn home(&self) -> &Path {
        &self.rules.home
    }

    fn denied_write(&self, path: &Path) -> Explanation {
        let entry = self.entry_covering("denyWrite", path);
        let (rule, why) = match entry {
            Some(text) => (
                format!("filesystem.denyWrite \"{text}\""),
                format!("the settings file denies it by filesystem.denyWrite \"{text}\""),
            ),
            None => (
                "the settings file and the oajail binary are never writable".to_owned(),
                "oajail never lets the jail change its own settings file or binary".to_owned(),
            ),
        };
        explained("deny_write", rule, Fix::None { why })
    }

    /// Which rule hides `path`: the deepest deny above it.
    fn hidden_by(&self, path: &Path) -> (&'static str, String) {
        let Some(denied) = self.deciding(path) else {
            return ("hidden", "hidden".to_owned());
        };
        if self.rules.deny_read.contains(&denied) {
            let text = self
                .entry_covering("denyRead", &denied)
                .unwrap_or_else(|| denied.display().to_string());
            return ("deny_read", format!("filesystem.denyRead \"{text}\""));
        }
        if self.rules.private.contains(&denied) {
            return ("private_tmp", "the jail's private /tmp".to_owned());
        }
        (
            "host_mask",
            format!("the host-service mask on {}", denied.display()),
        )
    }

    /// The deny that decides `path`'s visibility (the deepest rule above
    /// it, when that rule is a deny).
    fn deciding(&self, path: &Path) -> Option<PathBuf> {
        let denies: [&BTreeSet<PathBuf>; 3] = [
            &self.rules.deny_read,
            &self.rules.masks,
            &self.rules.private,
        ];
        let allows = [&self.rules.allow_read, &self.rules.allow_write];
        for ancestor in path.ancestors() {
            if allows.iter().any(|s| s.contains(ancestor)) {
                return None;
            }
            if denies.iter().any(|s| s.contains(ancestor)) {
                return Some(ancestor.to_path_buf());
            }
        }
        None
    }

    /// The entry of `field` whose paths cover `path` most closely.
    fn entry_covering(&self, field: &str, path: &Path) -> Option<String> {
        (self.entries.iter())
            .filter(|(f, _, _)| *f == field)
            .filter_map(|(_, text, paths)| {
                let depth = (paths.iter())
                    .filter(|p| path.starts_with(p))
                    .map(|p| p.components().count())
                    .max()?;
                Some((depth, text))
            })
            .max_by_key(|(depth, _)| *depth)
            .map(|(_, text)| text.clone())
    }
}

fn explained(reason: &'static str, rule: String, fix: Fix) -> Explanation {
    Explanation {
        by_policy: true,
        reason,
        rule,
        fix,
    }
}

fn not_the_policy() -> Explanation {
    Explanation {
        by_policy: false,
        reason: "not_policy",
        rule: String::new(),
        fix: Fix::None {
            why: "the policy allows it".to_owned(),
        },
    }
}

#[cfg(test)]
#[path = "explain_tests.rs"]
mod tests;
