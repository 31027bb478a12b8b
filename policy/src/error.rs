//! Errors of policy loading, and the JSON path that names the offending field.
//!
//! Every error renders as exactly one line, `<origin>: <where>: <problem>`,
//! lower case and without a trailing period, so that the CLI can print it as
//! is. `<where>` is a JSON path such as `network.allowedDomains[2]` (or
//! `(root)` for the document itself, or `line L column C` for a syntax error).

use std::fmt;

/// A value and where it was written.
pub(crate) type At<T> = (JsonPath, T);

/// A policy could not be loaded or validated.
///
/// Callers branch on the variant only to choose an exit code or a hint; the
/// message itself is always the `Display` line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The file is empty or holds only white space.
    #[error("{origin}: (root): empty file")]
    Empty {
        /// The file (or other source) the text came from.
        origin: String,
    },
    /// The text is not JSON (or repeats a key in one object).
    #[error("{origin}: line {line} column {column}: invalid json: {message}")]
    Syntax {
        /// The file (or other source) the text came from.
        origin: String,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// What the parser found wrong.
        message: String,
    },
    /// The JSON is well formed but a field is wrong.
    #[error("{origin}: {path}: {problem}")]
    Invalid {
        /// The file (or other source) the text came from.
        origin: String,
        /// Where in the document the problem is.
        path: JsonPath,
        /// What is wrong there.
        problem: String,
    },
}

/// One step of a [`JsonPath`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// An object member.
    Key(String),
    /// An array element (0-based).
    Index(usize),
}

/// A location inside a JSON document, rendered like `network.allowedDomains[2]`.
///
/// Keys that are not plain identifiers are rendered quoted in brackets, e.g.
/// `network.deniedDomainReasons["evil.com"]`, so the path is unambiguous.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JsonPath(Vec<Segment>);

impl JsonPath {
    /// The document root.
    pub fn root() -> Self {
        Self(Vec::new())
    }

    /// This path extended by an object key.
    pub fn key(&self, key: &str) -> Self {
        let mut segments = self.0.clone();
        segments.push(Segment::Key(key.to_owned()));
        Self(segments)
    }

    /// This path extended by an array index.
    pub fn index(&self, index: usize) -> Self {
        let mut segments = self.0.clone();
        segments.push(Segment::Index(index));
        Self(segments)
    }

    /// The segments, outermost first.
    pub fn segments(&self) -> &[Segment] {
        &self.0
    }
}

fn is_identifier(key: &str) -> bool {
    let mut chars = key.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("(root)");
        }
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Key(key) if is_identifier(key) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    f.write_str(key)?;
                }
                // serde_json's string escaping keeps odd keys on one line.
                Segment::Key(key) => write!(f, "[{}]", quote(key))?,
                Segment::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// `text` as a JSON string literal: quoted, with control characters escaped,
/// so user text embedded in a message can never break the one-line rule.
pub(crate) fn quote(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

/// A problem found at a path, before the origin is known.
///
/// Validation code works with this and the loader adds the origin once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    pub(crate) path: JsonPath,
    pub(crate) message: String,
}

impl Problem {
    pub(crate) fn new(path: &JsonPath, message: impl Into<String>) -> Self {
        Self {
            path: path.clone(),
            message: message.into(),
        }
    }

    pub(crate) fn with_origin(self, origin: &str) -> PolicyError {
        PolicyError::Invalid {
            origin: origin.to_owned(),
            path: self.path,
            problem: self.message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_render_like_javascript_accessors() {
        let path = JsonPath::root()
            .key("network")
            .key("allowedDomains")
            .index(2);
        assert_eq!(path.to_string(), "network.allowedDomains[2]");
        let odd = JsonPath::root()
            .key("network")
            .key("deniedDomainReasons")
            .key("evil.com");
        assert_eq!(odd.to_string(), "network.deniedDomainReasons[\"evil.com\"]");
        assert_eq!(JsonPath::root().to_string(), "(root)");
        let weird = JsonPath::root().key("a\nb");
        assert_eq!(weird.to_string(), "[\"a\\nb\"]");
    }

    #[test]
    fn errors_are_one_line() {
        let err = Problem::new(&JsonPath::root().key("x"), "bad").with_origin("f.json");
        assert_eq!(err.to_string(), "f.json: x: bad");
        let empty = PolicyError::Empty {
            origin: "f.json".into(),
        };
        assert_eq!(empty.to_string(), "f.json: (root): empty file");
    }
}
