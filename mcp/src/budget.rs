//! The server's own budget per call: what one `execute` may make the server
//! hold, whatever its script does (docs/mcp.md, "Limits").
//!
//! Every number here bounds memory the server itself spends on a script's
//! behalf; the worker's heap and address space are bounded in the worker.
//! - An API call's arguments: at most [`MAX_CALL_ARGS`] bytes of JSON; the
//!   calls one execute has queued or in flight: at most
//!   [`MAX_QUEUED_REQUEST_BYTES`]. Over either, the execute ends with
//!   `request_limit`. Queued arguments are kept as the text the worker sent
//!   (never as a parsed tree, which can be 30 times larger) and parsed one
//!   at a time when their request is built.
//! - API responses held at once, all executes together:
//!   [`RESPONSE_BUDGET`] bytes ([`ResponseBudget`]); a response that does
//!   not fit fails that one API call (`status` 0, retryable) instead of
//!   growing the server.
//! - The reply as sent: at most [`REPLY_CAP`] bytes of JSON for the
//!   structured result and its text rendering together ([`sent_len`]).

use serde::Serialize;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Largest JSON text of one API call's arguments.
pub const MAX_CALL_ARGS: usize = 1024 * 1024;
/// Largest sum of argument bytes of the API calls one execute has queued or
/// in flight.
pub const MAX_QUEUED_REQUEST_BYTES: usize = 4 * 1024 * 1024;
/// API response bytes the server holds at once, all executes together.
pub const RESPONSE_BUDGET: usize = 32 * 1024 * 1024;
/// Largest reply of one tool call as sent (structured content and text).
pub const REPLY_CAP: usize = 3 * 1024 * 1024;

/// Response bytes held by the API client, shared by every execute.
#[derive(Clone)]
pub struct ResponseBudget {
    bytes: Arc<Semaphore>,
}

/// Bytes taken from a [`ResponseBudget`], given back on drop.
pub struct Held(Option<OwnedSemaphorePermit>);

impl Held {
    /// Nothing held.
    pub fn none() -> Self {
        Self(None)
    }
}

impl ResponseBudget {
    /// A budget of `total` bytes.
    pub fn new(total: usize) -> Self {
        Self {
            bytes: Arc::new(Semaphore::new(total)),
        }
    }

    /// Takes `n` more bytes into `held`, or `false` at once when they are
    /// not free: a response never waits for another's bytes, so two
    /// half-read responses can never wait for each other.
    pub fn take(&self, held: &mut Held, n: usize) -> bool {
        if n == 0 {
            return true;
        }
        let Ok(n) = u32::try_from(n) else {
            return false;
        };
        match self.bytes.clone().try_acquire_many_owned(n) {
            Ok(permit) => {
                match &mut held.0 {
                    Some(p) => p.merge(permit),
                    None => held.0 = Some(permit),
                }
                true
            }
            Err(_) => false,
        }
    }

    /// Bytes free now (for tests and logs).
    pub fn available(&self) -> usize {
        self.bytes.available_permits()
    }
}

/// A writer that only counts, and fails once past its cap (so measuring a
/// huge value stops early instead of walking all of it).
struct Counter {
    n: usize,
    cap: usize,
}

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.n += buf.len();
        if self.n > self.cap {
            return Err(std::io::Error::other("over the cap"));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Bytes of `value` as compact JSON on the wire, or `None` over `cap`.
pub fn sent_len<T: Serialize + ?Sized>(value: &T, cap: usize) -> Option<usize> {
    let mut c = Counter { n: 0, cap };
    serde_json::to_writer(&mut c, value).ok()?;
    Some(c.n)
}

/// A `Vec` writer that refuses to grow past `cap` bytes.
pub struct Capped {
    /// What was written.
    pub buf: Vec<u8>,
    cap: usize,
}

impl Capped {
    /// An empty buffer for at most `cap` bytes.
    pub fn new(cap: usize) -> Self {
        Self {
            buf: Vec::new(),
            cap,
        }
    }
}

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.buf.len() + buf.len() > self.cap {
            return Err(std::io::Error::other("over the cap"));
        }
        self.buf.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_response_budget_never_waits_and_gives_back_on_drop() {
        let b = ResponseBudget::new(100);
        let mut one = Held::none();
        assert!(b.take(&mut one, 60));
        assert!(b.take(&mut one, 30));
        let mut two = Held::none();
        assert!(!b.take(&mut two, 20), "only 10 left");
        assert!(b.take(&mut two, 10));
        drop(one);
        assert_eq!(b.available(), 90);
    }

    #[test]
    fn lengths_are_measured_as_sent_and_stop_at_the_cap() {
        let v = json!({"a": "x\"\u{1}"});
        assert_eq!(sent_len(&v, 100), Some(v.to_string().len()));
        assert_eq!(sent_len(&v, 5), None);
        let mut w = Capped::new(4);
        assert!(serde_json::to_writer(&mut w, &json!([1, 2, 3])).is_err());
    }
}

/// Largest tree the server builds of one script's result, as estimated by
/// [`parse_tree`] (the reply's `structuredContent` has to be a
/// `serde_json::Value`, rmcp's type).
pub const RESULT_TREE_BYTES: usize = 32 * 1024 * 1024;

/// The tree is over its budget.
#[derive(Debug, thiserror::Error)]
#[error("the result takes more than {0} bytes as a tree")]
pub struct TreeTooLarge(pub usize);

/// Parses `text` into a [`serde_json::Value`], counting what the tree costs
/// in memory as it is built and giving up past `budget` bytes. A value
/// costs far more as a tree than as text: 32 bytes per slot, an
/// allocation per array, a B-tree node (about 640 bytes) per object, so
/// 1 MiB of `[[[[…]]]]` or `{"a":{"a":…}}` would take 50 to 130 MiB.
/// Arrays are built to their exact length. JSON nested deeper than 128
/// levels (serde_json's limit) is handed on as its text.
pub fn parse_tree(text: &str, budget: usize) -> Result<serde_json::Value, TreeTooLarge> {
    use serde::de::DeserializeSeed;
    let mut cost = Cost {
        spent: 0,
        budget,
        scratch: Vec::new(),
        scratch_peak: 0,
    };
    let mut de = serde_json::Deserializer::from_str(text);
    match Tree(&mut cost)
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
    {
        Ok(v) => Ok(v),
        Err(_) if cost.spent > cost.budget => Err(TreeTooLarge(budget)),
        Err(_) => Ok(serde_json::Value::String(text.to_owned())),
    }
}

/// Estimated heap cost of the tree built so far, and the stack every
/// array's elements wait on until the array is complete (so that each
/// array is allocated once, at its exact length).
struct Cost {
    spent: usize,
    budget: usize,
    scratch: Vec<serde_json::Value>,
    scratch_peak: usize,
}

/// Sizes the estimate uses (x86_64 and aarch64, glibc malloc): a value's
/// slot, an allocation's overhead, a B-tree node of an object (11 entries).
const SLOT: usize = 32;
const ALLOC: usize = 16;
const MAP_NODE: usize = 640;

impl Cost {
    fn spend<E: serde::de::Error>(&mut self, n: usize) -> Result<(), E> {
        self.spent += n;
        if self.spent > self.budget {
            return Err(E::custom("over the tree budget"));
        }
        Ok(())
    }

    /// Puts one element on the scratch stack, counting its high-water mark.
    fn stack<E: serde::de::Error>(&mut self, v: serde_json::Value) -> Result<(), E> {
        self.scratch.push(v);
        if self.scratch.len() > self.scratch_peak {
            self.scratch_peak = self.scratch.len();
            self.spend(SLOT)?;
        }
        Ok(())
    }
}

struct Tree<'c>(&'c mut Cost);

impl<'de> serde::de::DeserializeSeed<'de> for Tree<'_> {
    type Value = serde_json::Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Tree<'_> {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, Into::into))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        self.0.spend(v.len() + ALLOC)?;
        Ok(v.into())
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
        self.0.spend(v.len() + ALLOC)?;
        Ok(v.into())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let start = self.0.scratch.len();
        while let Some(v) = seq.next_element_seed(Tree(&mut *self.0))? {
            self.0.stack(v)?;
        }
        let len = self.0.scratch.len() - start;
        self.0.spend(ALLOC + SLOT * len)?;
        // `drain` knows its length: the array is allocated exactly once.
        let items: Vec<serde_json::Value> = self.0.scratch.drain(start..).collect();
        Ok(serde_json::Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.len().is_multiple_of(11) {
                self.0.spend(MAP_NODE)?;
            }
            self.0.spend(key.len() + ALLOC)?;
            let value = map.next_value_seed(Tree(&mut *self.0))?;
            out.insert(key, value);
        }
        Ok(serde_json::Value::Object(out))
    }
}

#[cfg(test)]
mod tree_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn trees_are_built_within_their_budget() {
        let v = json!({"a": [1, "two", null, true, 2.5, {"b": []}], "c": "é"});
        assert_eq!(parse_tree(&v.to_string(), 4096).unwrap(), v);
        let nested = format!("{}0{}", "[".repeat(100), "]".repeat(100));
        assert!(parse_tree(&nested, 1024).is_err());
        assert!(parse_tree(&nested, 64 * 1024).is_ok());
        // Deeper than serde_json reads: handed on as text.
        let deep = format!("{}0{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(parse_tree(&deep, 1 << 20).unwrap(), json!(deep));
        // A 1 MiB list of small records fits; 1 MiB of one-key objects
        // nested in each other does not.
        let records: Vec<_> = (0..30_000)
            .map(|i| json!({"uid": i, "title": "x"}))
            .collect();
        let text = json!(records).to_string();
        assert!(text.len() > 700_000);
        assert!(parse_tree(&text, RESULT_TREE_BYTES).is_ok());
        let chain = format!("{}1{}", "{\"a\":".repeat(120), "}".repeat(120));
        let many = format!("[{}]", vec![chain; 1500].join(","));
        assert!(parse_tree(&many, RESULT_TREE_BYTES).is_err());
    }
}
