//! Legacy (2025-11-25) sessions belong to the caller that opened them.
//!
//! rmcp hands out a random `Mcp-Session-Id` on `initialize` and serves
//! whoever presents it. Here each id is bound to the `sub` whose verified
//! token opened it: another caller presenting it gets `404` as for an
//! unknown session (it learns nothing), so a leaked or guessed id is no
//! way into someone else's session. Opening is capped per caller and in
//! total; bindings of sessions rmcp has closed (idle, deleted) are pruned
//! whenever a session is opened.

use std::collections::HashMap;
use std::sync::Mutex;

/// The bindings.
#[derive(Default)]
pub struct Bindings {
    map: Mutex<HashMap<String, String>>,
}

/// Why a session could not be opened.
#[derive(Debug, PartialEq, Eq)]
pub enum Full {
    /// The caller holds its maximum.
    Caller(usize),
    /// The server holds its maximum.
    Server(usize),
}

impl Bindings {
    /// Whether `session` belongs to `sub`.
    pub fn owned_by(&self, session: &str, sub: &str) -> bool {
        self.map
            .lock()
            .map(|m| m.get(session).is_some_and(|s| s == sub))
            .unwrap_or(false)
    }

    /// Whether `sub` may open one more session, given the sessions rmcp
    /// still has open (stale bindings are dropped first).
    pub fn may_open(
        &self,
        sub: &str,
        open: &[String],
        per_caller: usize,
        total: usize,
    ) -> Result<(), Full> {
        let Ok(mut map) = self.map.lock() else {
            return Err(Full::Server(total));
        };
        map.retain(|id, _| open.contains(id));
        if open.len() >= total {
            return Err(Full::Server(total));
        }
        if map.values().filter(|s| *s == sub).count() >= per_caller {
            return Err(Full::Caller(per_caller));
        }
        Ok(())
    }

    /// Records that `sub` opened `session`.
    pub fn bind(&self, session: &str, sub: &str) {
        if let Ok(mut map) = self.map.lock() {
            map.insert(session.to_owned(), sub.to_owned());
        }
    }

    /// Forgets `session` (deleted).
    pub fn unbind(&self, session: &str) {
        if let Ok(mut map) = self.map.lock() {
            map.remove(session);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_answers_its_owner_only() {
        let b = Bindings::default();
        b.bind("s1", "alice");
        assert!(b.owned_by("s1", "alice"));
        assert!(!b.owned_by("s1", "bob"));
        assert!(!b.owned_by("nope", "alice"));
        b.unbind("s1");
        assert!(!b.owned_by("s1", "alice"));
    }

    #[test]
    fn opening_is_capped_and_closed_sessions_pruned() {
        let b = Bindings::default();
        b.bind("s1", "alice");
        b.bind("s2", "alice");
        let open = vec!["s1".to_owned(), "s2".to_owned()];
        assert_eq!(b.may_open("alice", &open, 2, 10), Err(Full::Caller(2)));
        assert_eq!(b.may_open("bob", &open, 2, 2), Err(Full::Server(2)));
        // s2 was closed by rmcp: alice may open another.
        assert_eq!(b.may_open("alice", &open[..1], 2, 10), Ok(()));
        assert!(!b.owned_by("s2", "alice"));
    }
}
