//! The jail the attacks ran in: its tier, fallbacks, layers and the rule
//! classes no layer holds in full there.
//!
//! Read from `oajail explain --json` run inside the preflight's lab, the
//! environment every attack starts in (in the lab's user namespace when
//! the audit is unprivileged), not from the host the audit starts on: a
//! lab in a container, or with user namespaces taken away, gives the jail
//! another tier, and the report says which one it audited.

use super::Case;
use serde::Serialize;
use serde_json::Value;

/// What the jail holds where the attacks ran.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JailInfo {
    /// `namespaces` (the full jail) or `container` (no namespaces).
    pub tier: String,
    /// Fallbacks taken for refused steps (`noUts`, `containerProc`, `chroot`).
    pub fallbacks: Vec<String>,
    /// Every layer and its status (`full`, or the status and why).
    pub layers: Vec<(String, String)>,
    /// Rule classes no running layer holds in full (the run's named losses).
    pub unheld: Vec<String>,
}

impl JailInfo {
    /// From the text `oajail explain --json` printed.
    pub fn parse(explain: &str) -> Result<JailInfo, String> {
        let v: Value = serde_json::from_str(explain)
            .map_err(|e| format!("oajail explain --json printed no JSON ({e})"))?;
        let n = &v["negotiation"];
        if !n.is_object() {
            let why = n.as_str().unwrap_or("no negotiation in its output");
            return Err(format!("oajail explain: {why}"));
        }
        let tier = (n["tier"].as_str())
            .or(v["tier"].as_str())
            .unwrap_or("namespaces")
            .to_owned();
        let fallbacks = (n["fallbacks"].as_object().into_iter().flatten())
            .filter(|(_, on)| on.as_bool() == Some(true))
            .map(|(name, _)| name.clone())
            .collect();
        let layers = (n["layers"].as_array().into_iter().flatten())
            .filter_map(|pair| Some((pair.get(0)?.as_str()?.to_owned(), status(pair.get(1)?))))
            .collect();
        let unheld = (n["unheld"].as_array().into_iter().flatten())
            .filter_map(|c| c.as_str().map(str::to_owned))
            .collect();
        Ok(JailInfo {
            tier,
            fallbacks,
            layers,
            unheld,
        })
    }

    /// One line: the tier, the layers not at their planned level, the
    /// fallbacks and the rule classes not held in full.
    pub fn summary(&self) -> String {
        let mut out = format!("{} tier", self.tier);
        // Layers off for one reason are named together.
        let mut below: Vec<(Vec<&str>, &str)> = Vec::new();
        // A layer off because this tier has no use for it (the connect
        // hand-off where a network namespace holds egress) is as planned.
        let planned = |s: &str| s == "full" || s.starts_with("off (not needed");
        for (layer, status) in self.layers.iter().filter(|(_, s)| !planned(s)) {
            match below.iter_mut().find(|(_, s)| *s == status) {
                Some((names, _)) => names.push(layer),
                None => below.push((vec![layer], status)),
            }
        }
        let below: Vec<String> = (below.iter())
            .map(|(names, status)| format!("{} {status}", names.join(", ")))
            .collect();
        if below.is_empty() {
            out.push_str("; every layer at its planned level");
        } else {
            out.push_str(&format!("; {}", below.join("; ")));
        }
        if !self.fallbacks.is_empty() {
            out.push_str(&format!("; fallbacks: {}", self.fallbacks.join(", ")));
        }
        if !self.unheld.is_empty() {
            out.push_str(&format!("; not held in full: {}", self.unheld.join(", ")));
        }
        out
    }
}

/// The rule class (as `oajail explain` names them) an attack tests, by
/// its catalogue row: the class whose loss, when the jail names it, makes
/// the attack's success expected rather than an escape.
pub fn rule_class(case: &Case) -> Option<&'static str> {
    let row = case.id.split('-').next().unwrap_or("");
    Some(match row {
        "A1" | "A2" | "A3" | "A6" => "read-deny",
        "A4" | "B1" | "B6" | "B8" => "write-allow",
        "B2" | "B4" => "mandatory-denies",
        "A7" | "B7" | "C1" | "C2" => "processes",
        "C3" => "signals",
        "C4" => "host-sockets",
        "C5" => "abstract-sockets",
        "C7" | "C8" | "C10" => "devices",
        "E1" | "E7" | "X5" => "tcp-egress",
        "E2" | "E3" | "E4" | "E6" | "X6" => "other-egress",
        d if d.starts_with('D') => "syscalls",
        _ => return None,
    })
}

/// A layer's status in words: `full`, else its kind and the first reason
/// the JSON gives (`off: …`, `fallback: …`).
fn status(s: &Value) -> String {
    let kind = s["status"].as_str().unwrap_or("unknown");
    let why = (s.as_object().into_iter().flatten())
        .filter(|(k, _)| *k != "status")
        .find_map(|(_, v)| v.as_str());
    match why {
        Some(why) => format!("{kind} ({why})"),
        None => kind.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn reads_the_tier_layers_and_losses() {
        let explain = r#"{"tier": "container", "negotiation": {
            "tier": "container",
            "fallbacks": {"noUts": false, "containerProc": false, "chroot": false},
            "layers": [["namespaces", {"status": "off", "why": "user namespace refused (EPERM)"}],
                       ["landlock", {"status": "full"}]],
            "unheld": ["other-egress", "processes"]}}"#;
        let info = JailInfo::parse(explain).unwrap();
        assert_eq!(info.tier, "container");
        assert_eq!(
            info.summary(),
            "container tier; namespaces off (user namespace refused (EPERM)); \
             not held in full: other-egress, processes"
        );
        // An oajail before tiers: the full jail, every layer full.
        let old = r#"{"negotiation": {"layers": [["mounts", {"status": "full"}],
            ["connect", {"status": "off", "why": "not needed: the network namespace holds only loopback"}]],
            "unheld": []}}"#;
        let info = JailInfo::parse(old).unwrap();
        assert_eq!(
            info.summary(),
            "namespaces tier; every layer at its planned level"
        );
        assert!(JailInfo::parse(r#"{"negotiation": "kernel: refused"}"#).is_err());
    }
}
