//! srt domain patterns (stub; owned by the proxy work).
use serde::{Deserialize, Serialize};

/// One `allowedDomains`/`deniedDomains` entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DomainPattern(pub String);
