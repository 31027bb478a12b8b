//! Per-caller limits, keyed on the caller's `sub` (one key, `local`, on
//! stdio): a token bucket on tool calls (`OA_RATE_LIMIT_PER_MIN`,
//! `OA_RATE_LIMIT_BURST`) and a cap on a caller's executes running at
//! once (`OA_MAX_CONCURRENCY_PER_CALLER`).
//!
//! They sit in front of the server-wide limits (the executor's
//! concurrency and queue, [`crate::executor`]): a caller over its own
//! limit is answered at once with a retryable tool error naming the limit
//! and never takes a queue place from the others. A refused call costs
//! no token. The limits are per server process: with N replicas behind a
//! load balancer a caller can get up to N times them (docs/mcp.md).
//!
//! Memory: one small entry per caller seen; when more than
//! [`MAX_IDLE_KEPT`] are held, entries of idle callers whose bucket has
//! refilled (which carry no state worth keeping) are dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Entries kept before idle, refilled ones are swept.
const MAX_IDLE_KEPT: usize = 10_000;

/// The configured limits; 0 turns one off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Tool calls per minute (the bucket's refill rate).
    pub per_min: u32,
    /// Calls that may come at once after a quiet spell (bucket size).
    pub burst: u32,
    /// Executes of one caller running at once.
    pub max_concurrency: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            per_min: 120,
            burst: 20,
            max_concurrency: 2,
        }
    }
}

/// Why a call was refused.
#[derive(Debug, PartialEq)]
pub enum Over {
    /// The bucket is empty; a token comes back after `retry_after`.
    Rate {
        /// Time until the next call is allowed.
        retry_after: Duration,
    },
    /// The caller's executes running at once.
    Concurrency,
}

#[derive(Debug)]
struct Entry {
    tokens: f64,
    at: Instant,
    running: usize,
}

/// The limiter shared by every request.
#[derive(Debug)]
pub struct Gate {
    limits: Limits,
    callers: Mutex<HashMap<String, Entry>>,
}

/// An admitted call; dropping it ends the caller's running execute.
#[derive(Debug)]
pub struct Pass {
    gate: Arc<Gate>,
    key: String,
    counted: bool,
}

impl Drop for Pass {
    fn drop(&mut self) {
        if !self.counted {
            return;
        }
        if let Ok(mut map) = self.gate.callers.lock()
            && let Some(e) = map.get_mut(&self.key)
        {
            e.running = e.running.saturating_sub(1);
        }
    }
}

impl Gate {
    /// A gate for `limits`.
    pub fn new(limits: Limits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            callers: Mutex::new(HashMap::new()),
        })
    }

    /// The limits.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Admits one tool call of `key`; `execute` calls also count against
    /// the concurrency cap until the [`Pass`] is dropped.
    pub fn admit(self: &Arc<Self>, key: &str, execute: bool) -> Result<Pass, Over> {
        self.admit_at(key, execute, Instant::now())
    }

    fn admit_at(self: &Arc<Self>, key: &str, execute: bool, now: Instant) -> Result<Pass, Over> {
        let l = self.limits;
        let mut map = match self.callers.lock() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        if map.len() >= MAX_IDLE_KEPT && !map.contains_key(key) {
            sweep(&mut map, l, now);
        }
        let burst = f64::from(l.burst.max(1));
        let e = map.entry(key.to_owned()).or_insert(Entry {
            tokens: burst,
            at: now,
            running: 0,
        });
        let rate = f64::from(l.per_min) / 60.0;
        if l.per_min > 0 {
            let elapsed = now.saturating_duration_since(e.at).as_secs_f64();
            e.tokens = (e.tokens + elapsed * rate).min(burst);
            e.at = now;
        }
        let counted = execute && l.max_concurrency > 0;
        if counted && e.running >= l.max_concurrency {
            return Err(Over::Concurrency);
        }
        if l.per_min > 0 {
            if e.tokens < 1.0 {
                let wait = (1.0 - e.tokens) / rate;
                return Err(Over::Rate {
                    retry_after: Duration::from_secs_f64(wait),
                });
            }
            e.tokens -= 1.0;
        }
        if counted {
            e.running += 1;
        }
        Ok(Pass {
            gate: self.clone(),
            key: key.to_owned(),
            counted,
        })
    }

    /// The refusal's text: which limit, its setting, when to retry.
    pub fn message(&self, over: &Over) -> String {
        let l = self.limits;
        match over {
            Over::Rate { retry_after } => format!(
                "rate limit: this caller used its OA_RATE_LIMIT_PER_MIN={} calls per minute (burst OA_RATE_LIMIT_BURST={}); retry in {:.1} s",
                l.per_min,
                l.burst.max(1),
                retry_after.as_secs_f64().max(0.1)
            ),
            Over::Concurrency => format!(
                "concurrency limit: this caller already has OA_MAX_CONCURRENCY_PER_CALLER={} executes running; retry when one has finished",
                l.max_concurrency
            ),
        }
    }
}

fn sweep(map: &mut HashMap<String, Entry>, l: Limits, now: Instant) {
    let burst = f64::from(l.burst.max(1));
    let rate = f64::from(l.per_min) / 60.0;
    map.retain(|_, e| {
        let refilled = l.per_min == 0
            || e.tokens + now.saturating_duration_since(e.at).as_secs_f64() * rate >= burst;
        e.running > 0 || !refilled
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let g = Gate::new(Limits {
            per_min: 60,
            burst: 3,
            max_concurrency: 0,
        });
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(g.admit_at("a", false, t0).is_ok());
        }
        let Err(Over::Rate { retry_after }) = g.admit_at("a", false, t0) else {
            panic!("the fourth call at once must be refused")
        };
        assert!(
            (retry_after.as_secs_f64() - 1.0).abs() < 0.01,
            "{retry_after:?}"
        );
        // Another caller is not affected.
        assert!(g.admit_at("b", false, t0).is_ok());
        // One second later one token is back.
        let t1 = t0 + Duration::from_secs(1);
        assert!(g.admit_at("a", false, t1).is_ok());
        assert!(g.admit_at("a", false, t1).is_err());
    }

    #[test]
    fn running_executes_are_capped_per_caller() {
        let g = Gate::new(Limits {
            per_min: 0,
            burst: 0,
            max_concurrency: 2,
        });
        let a = g.admit("a", true).unwrap();
        let _b = g.admit("a", true).unwrap();
        assert_eq!(g.admit("a", true).unwrap_err(), Over::Concurrency);
        assert!(g.admit("a", false).is_ok(), "a search is not an execute");
        assert!(g.admit("other", true).is_ok());
        drop(a);
        assert!(g.admit("a", true).is_ok());
        assert!(
            g.message(&Over::Concurrency)
                .contains("OA_MAX_CONCURRENCY_PER_CALLER=2")
        );
    }

    #[test]
    fn idle_refilled_callers_are_swept() {
        let g = Gate::new(Limits {
            per_min: 60,
            burst: 1,
            max_concurrency: 1,
        });
        let t0 = Instant::now();
        for i in 0..MAX_IDLE_KEPT {
            drop(g.admit_at(&format!("c{i}"), false, t0));
        }
        let later = t0 + Duration::from_secs(5);
        assert!(g.admit_at("new", false, later).is_ok());
        assert_eq!(g.callers.lock().unwrap().len(), 1);
    }
}
