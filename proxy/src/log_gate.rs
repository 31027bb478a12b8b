//! Rate limiting and coalescing of repeated log lines.
//!
//! A jailed program can make refused requests as fast as the proxy answers
//! them (~5 MB/s of decision log, unbounded stderr). A [`Gate`] lets a line
//! through when both its key's bucket (the same destination and reason)
//! and the gate's overall bucket have a token; a refused line is counted
//! against its key, and the next line let through for that key carries the
//! count, so nothing is lost silently: the log says "N more like this".
//! Counts left at the end are returned by [`Gate::drain`].
//!
//! Pure arithmetic over an injected clock, so the tests need no sleeping.

use std::collections::HashMap;
use std::time::Instant;

/// Keys tracked at once; more share the overall bucket and one counter.
const MAX_KEYS: usize = 1024;

/// A token bucket: `burst` tokens, refilled at `rate` per second.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rate {
    pub burst: f64,
    pub per_second: f64,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
    suppressed: u64,
}

impl Bucket {
    fn full(rate: Rate, now: Instant) -> Self {
        Bucket {
            tokens: rate.burst,
            at: now,
            suppressed: 0,
        }
    }

    fn refill(&mut self, rate: Rate, now: Instant) {
        let secs = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + secs * rate.per_second).min(rate.burst);
        self.at = now;
    }
}

/// Per-key and overall token buckets with suppression counts.
#[derive(Debug)]
pub(crate) struct Gate {
    per_key: Rate,
    overall: Rate,
    all: Bucket,
    keys: HashMap<String, Bucket>,
}

impl Gate {
    pub(crate) fn new(per_key: Rate, overall: Rate, now: Instant) -> Self {
        Gate {
            per_key,
            overall,
            all: Bucket::full(overall, now),
            keys: HashMap::new(),
        }
    }

    /// `Some(n)`: write the line, noting `n` like it were suppressed since
    /// the last one written for this key; `None`: suppressed (counted).
    pub(crate) fn check(&mut self, key: &str, now: Instant) -> Option<u64> {
        self.all.refill(self.overall, now);
        if !self.keys.contains_key(key) && self.keys.len() >= MAX_KEYS {
            // Too many distinct keys: only the overall bucket applies, and
            // its counter carries what it refuses.
            return self.take_overall();
        }
        let per_key = self.per_key;
        let bucket = self
            .keys
            .entry(key.to_owned())
            .or_insert_with(|| Bucket::full(per_key, now));
        bucket.refill(per_key, now);
        if bucket.tokens < 1.0 || self.all.tokens < 1.0 {
            bucket.suppressed += 1;
            return None;
        }
        bucket.tokens -= 1.0;
        self.all.tokens -= 1.0;
        Some(std::mem::take(&mut bucket.suppressed))
    }

    fn take_overall(&mut self) -> Option<u64> {
        if self.all.tokens < 1.0 {
            self.all.suppressed += 1;
            return None;
        }
        self.all.tokens -= 1.0;
        Some(0)
    }

    /// Suppressed counts not yet reported, by key (`""` for the lines
    /// refused beyond [`MAX_KEYS`]); the counts are reset.
    pub(crate) fn drain(&mut self) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = self
            .keys
            .iter_mut()
            .filter(|(_, b)| b.suppressed > 0)
            .map(|(k, b)| (k.clone(), std::mem::take(&mut b.suppressed)))
            .collect();
        out.sort();
        if self.all.suppressed > 0 {
            out.push((String::new(), std::mem::take(&mut self.all.suppressed)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const KEY: Rate = Rate {
        burst: 2.0,
        per_second: 1.0,
    };
    const ALL: Rate = Rate {
        burst: 3.0,
        per_second: 10.0,
    };

    #[test]
    fn repeats_are_coalesced_and_reported_with_the_next_line() {
        let t0 = Instant::now();
        let mut g = Gate::new(KEY, ALL, t0);
        assert_eq!(g.check("a", t0), Some(0));
        assert_eq!(g.check("a", t0), Some(0));
        for _ in 0..5 {
            assert_eq!(g.check("a", t0), None);
        }
        // One second later the key has a token again and carries the count.
        assert_eq!(g.check("a", t0 + Duration::from_secs(1)), Some(5));
        assert!(g.drain().is_empty());
    }

    #[test]
    fn the_overall_bucket_bounds_distinct_keys() {
        let t0 = Instant::now();
        let mut g = Gate::new(KEY, ALL, t0);
        let passed = (0..100)
            .filter(|i| g.check(&format!("k{i}"), t0).is_some())
            .count();
        assert_eq!(passed, 3);
        let left: u64 = g.drain().iter().map(|(_, n)| n).sum();
        assert_eq!(left, 97);
    }

    #[test]
    fn keys_beyond_the_cap_share_one_counter() {
        let t0 = Instant::now();
        let big = Rate {
            burst: 1e9,
            per_second: 0.0,
        };
        let mut g = Gate::new(KEY, big, t0);
        for i in 0..MAX_KEYS {
            assert_eq!(g.check(&format!("k{i}"), t0), Some(0));
        }
        assert_eq!(g.check("new", t0), Some(0));
        assert_eq!(g.keys.len(), MAX_KEYS);
    }
}
