//! Tokens already verified, remembered by digest until they expire.
//!
//! A client sends the same bearer token with every request of a session,
//! and checking its signature (22–45 µs p50 on the benchmark machine) is
//! most of the request's own handling. A token that passed every check is
//! remembered under its SHA-256, with what the checks found, so its next
//! request costs a hash and a lookup (0.5–0.7 µs).
//!
//! What a hit still checks, so the answer is the one a full verification
//! would give:
//! - the time window: `exp` and `nbf`, with the same leeway, on every hit;
//! - the key: the key set must still hold the very key that verified the
//!   token ([`super::jwks::KeyCache::key_for`] with the token's `kid` and
//!   `alg`, the same object), so a key the issuer withdrew stops its tokens
//!   at the next key set refresh, as it would uncached.
//!
//! Only verified tokens enter, so an attacker cannot fill the cache with
//! made-up tokens; it is bounded anyway ([`MAX_ENTRIES`]): when full,
//! expired entries go first, then the one expiring soonest.

use super::Caller;
use super::jwks::Key;
use jsonwebtoken::Algorithm;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Most tokens remembered.
pub const MAX_ENTRIES: usize = 1024;

/// What a successful verification found.
#[derive(Clone)]
pub struct Entry {
    /// The caller the token names.
    pub caller: Caller,
    /// `nbf`, when the token has one.
    pub not_before: Option<u64>,
    /// The key's `kid` and algorithm, to look the key up again.
    pub kid: Option<String>,
    /// The algorithm.
    pub alg: Algorithm,
    /// The key that verified the signature.
    pub key: Arc<Key>,
}

/// The remembered tokens.
#[derive(Default)]
pub struct Verified {
    entries: Mutex<HashMap<[u8; 32], Entry>>,
}

/// A token's cache key.
pub fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Verified {
    /// The entry for `digest`, if it is still in its time window at `now`
    /// (seconds since the epoch) with `leeway`; an expired one is dropped.
    pub fn get(&self, digest: &[u8; 32], now: u64, leeway: u64) -> Option<Entry> {
        let mut entries = self.lock();
        let entry = entries.get(digest)?;
        if entry.caller.expires_at.saturating_add(leeway) <= now {
            entries.remove(digest);
            return None;
        }
        if entry
            .not_before
            .is_some_and(|nbf| nbf > now.saturating_add(leeway))
        {
            return None;
        }
        Some(entry.clone())
    }

    /// Remembers a verified token.
    pub fn insert(&self, digest: [u8; 32], entry: Entry, now: u64) {
        let mut entries = self.lock();
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(&digest) {
            entries.retain(|_, e| e.caller.expires_at > now);
            if entries.len() >= MAX_ENTRIES
                && let Some(soonest) = (entries.iter())
                    .min_by_key(|(_, e)| e.caller.expires_at)
                    .map(|(d, _)| *d)
            {
                entries.remove(&soonest);
            }
        }
        entries.insert(digest, entry);
    }

    /// Forgets a token (its key is no longer the issuer's).
    pub fn remove(&self, digest: &[u8; 32]) {
        self.lock().remove(digest);
    }

    /// How many tokens are remembered.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Entry>> {
        // A panic while holding the lock leaves a map that is still
        // consistent (every operation is one map call).
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(exp: u64, nbf: Option<u64>) -> Entry {
        let key = Arc::new(Key {
            kid: Some("k".into()),
            alg: Algorithm::EdDSA,
            decoding: jsonwebtoken::DecodingKey::from_ed_der(&[0u8; 32]),
        });
        Entry {
            caller: Caller::new("alice".into(), None, vec![], exp, "t"),
            not_before: nbf,
            kid: Some("k".into()),
            alg: Algorithm::EdDSA,
            key,
        }
    }

    #[test]
    fn a_hit_is_bounded_by_the_time_window() {
        let v = Verified::default();
        let d = digest("token");
        v.insert(d, entry(1000, Some(500)), 600);
        assert!(v.get(&d, 600, 30).is_some());
        assert!(v.get(&d, 1029, 30).is_some(), "within the leeway");
        assert!(v.get(&d, 1030, 30).is_none(), "expired");
        assert!(v.is_empty(), "an expired entry is dropped");
        v.insert(d, entry(1000, Some(500)), 600);
        assert!(v.get(&d, 400, 30).is_none(), "clock went back before nbf");
        assert_eq!(v.len(), 1, "a not-yet-valid entry is kept");
    }

    #[test]
    fn the_cache_is_bounded() {
        let v = Verified::default();
        for i in 0..MAX_ENTRIES as u64 {
            v.insert(digest(&i.to_string()), entry(2000 + i, None), 100);
        }
        v.insert(digest("new"), entry(5000, None), 100);
        assert_eq!(v.len(), MAX_ENTRIES);
        assert!(
            v.get(&digest("0"), 100, 0).is_none(),
            "soonest expiry evicted"
        );
        assert!(v.get(&digest("new"), 100, 0).is_some());
        assert!(v.get(&digest("1"), 100, 0).is_some());
    }
}
