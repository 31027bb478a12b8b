//! srt domain patterns (stub; owned by the proxy work — keep these signatures).
use serde::{Deserialize, Serialize};

/// Which list a pattern comes from: `*` is only valid in the deny list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// `network.allowedDomains`.
    Allow,
    /// `network.deniedDomains`.
    Deny,
}

/// Why a pattern was refused. Display is the part after the JSON path,
/// e.g. `"*.com" is too broad`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DomainError(pub String);

/// One `allowedDomains`/`deniedDomains` entry, canonical.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DomainPattern(String);

impl DomainPattern {
    /// Parse and canonicalise one entry.
    pub fn parse(text: &str, _kind: ListKind) -> Result<Self, DomainError> {
        Ok(Self(text.to_ascii_lowercase()))
    }

    /// The canonical text of the pattern (what srt JSON output contains).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}
