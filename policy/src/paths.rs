//! Filesystem entries: lexical normalisation, resolution and glob matching.
//!
//! A [`PathEntry`] keeps its anchor symbolic (`/…`, `~`/`~/…`, or relative to
//! the working directory) so that the canonical hash of a policy is the same
//! on every machine; [`PathEntry::resolve`] binds it to a real home and cwd
//! when a plan is compiled.
//!
//! Normalisation is lexical and never touches the filesystem:
//! - `//` and `/./` collapse, a trailing `/` goes (`/a/b/` → `/a/b`);
//! - `..` folds into the component before it (`/a/b/../c` → `/a/c`, as srt's
//!   `path.resolve` does for relative entries); at `/` it stays at `/`; a
//!   leading `..` of a home- or cwd-relative entry is kept (`../x`, `~/../x`)
//!   and folded against the real directory by `resolve`. Folding is lexical,
//!   so `/a/link/../b` means `/a/b` even if `link` is a symlink: the entry
//!   means what it says on the page;
//! - `~user/…` is refused (srt would read it as a directory named `~user`
//!   in the cwd, which is never what the writer meant);
//! - NUL characters are refused, and so is a glob spelling that ends in `/`
//!   (it can match no path; srt refuses it for deny lists).
//!
//! Globs follow srt's syntax (`glob-pattern.js`), written by hand here
//! because its rules differ from gitignore/globset in ways that matter for a
//! deny list: no escapes, no negation, `[` that spells no set is text, `*`
//! and `?` never match `/`, `**` matches anything including `/`, and `**/`
//! matches zero or more directories. The matcher is a dynamic programme over
//! (pattern token, path character), so no pattern can make it exponential.

use crate::PathEntry;
use std::path::{Component, Path, PathBuf};

/// Why a filesystem entry was refused; `Display` is the problem text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PathError(pub String);

/// What a [`PathEntry`] is relative to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// An absolute path.
    Root,
    /// `~` or `~/…`: the home directory.
    Home,
    /// Anything else: the working directory.
    Cwd,
}

/// True when `text` contains a character srt treats as glob syntax.
pub fn has_glob_chars(text: &str) -> bool {
    text.contains(['*', '?', '[', ']'])
}

impl PathEntry {
    /// Validates and normalises one entry as written in the settings file.
    pub fn parse(text: &str, literal: bool) -> Result<PathEntry, PathError> {
        if text.is_empty() {
            return Err(PathError("empty path".into()));
        }
        if text.contains('\0') {
            return Err(PathError("path contains a nul character".into()));
        }
        let glob = !literal && has_glob_chars(text);
        if glob && text.ends_with('/') {
            return Err(PathError(format!(
                "glob {} ends in \"/\", so it can match no path; remove the \"/\" or end it with \"**\"",
                crate::error::quote(text)
            )));
        }
        let (anchor, rest) = split_anchor(text)?;
        let path = render(anchor, &fold(anchor, rest));
        // `literal` only changes the meaning of glob characters; without any
        // it is dropped so equal meanings hash equally.
        let literal = literal && has_glob_chars(&path);
        Ok(PathEntry { path, literal })
    }

    /// True when the entry is a glob pattern (not literal, has glob syntax).
    pub fn is_glob(&self) -> bool {
        !self.literal && has_glob_chars(&self.path)
    }

    /// What the entry is relative to.
    pub fn anchor(&self) -> Anchor {
        split_anchor(&self.path).map_or(Anchor::Cwd, |(anchor, _)| anchor)
    }

    /// The entry bound to a home and a working directory, lexically folded.
    /// A glob entry stays a pattern (its glob characters are kept).
    pub fn resolve(&self, home: &Path, cwd: &Path) -> PathBuf {
        let (base, rest) = match split_anchor(&self.path) {
            Ok((Anchor::Root, rest)) => (Path::new("/"), rest),
            Ok((Anchor::Home, rest)) => (home, rest),
            Ok((Anchor::Cwd, rest)) => (cwd, rest),
            // Unreachable for parsed entries; an unparsed `~user` entry is
            // read the way srt reads it, relative to the cwd.
            Err(_) => (cwd, self.path.as_str()),
        };
        lexical_join(base, Path::new(rest))
    }

    /// The longest leading part of the entry without glob syntax, as a
    /// directory, in the entry's own symbolic form: `~/.aws/**/*.pem` →
    /// `~/.aws`, `*.pem` → `.`, `/etc/ssh/ssh_host_*_key` → `/etc/ssh`.
    /// For an entry that is not a glob, the entry itself.
    pub fn glob_base(&self) -> String {
        if !self.is_glob() {
            return self.path.clone();
        }
        let cut = self
            .path
            .find(['*', '?', '[', ']'])
            .unwrap_or(self.path.len());
        let prefix = &self.path[..cut];
        let dir = match prefix.rfind('/') {
            Some(0) => "/",
            Some(slash) => &prefix[..slash],
            None => ".",
        };
        dir.to_owned()
    }

    /// A matcher for this entry against absolute paths under `home`/`cwd`.
    pub fn matcher(&self, home: &Path, cwd: &Path) -> PathMatcher {
        let resolved = self.resolve(home, cwd);
        if !self.is_glob() {
            return PathMatcher::Exact(resolved);
        }
        let pattern = resolved.to_string_lossy().into_owned();
        let base = PathEntry {
            path: self.glob_base(),
            literal: false,
        }
        .resolve(home, cwd);
        PathMatcher::Glob {
            base,
            tokens: tokenize(&pattern),
            pattern,
        }
    }
}

fn split_anchor(text: &str) -> Result<(Anchor, &str), PathError> {
    if text == "~" {
        Ok((Anchor::Home, ""))
    } else if let Some(rest) = text.strip_prefix("~/") {
        Ok((Anchor::Home, rest))
    } else if text.starts_with('~') {
        Err(PathError(format!(
            "{} names another user's home, which is not supported; write the path out",
            crate::error::quote(text)
        )))
    } else if text.starts_with('/') {
        Ok((Anchor::Root, text))
    } else {
        Ok((Anchor::Cwd, text))
    }
}

/// Components of `rest` with `.` and empty ones dropped and `..` folded.
fn fold(anchor: Anchor, rest: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for part in rest.split('/') {
        match part {
            "" | "." => {}
            ".." => match out.last() {
                Some(&last) if last != ".." => {
                    out.pop();
                }
                // `/..` is `/`; above `~` or the cwd it stays symbolic.
                _ if anchor == Anchor::Root => {}
                _ => out.push(".."),
            },
            _ => out.push(part),
        }
    }
    out
}

fn render(anchor: Anchor, parts: &[&str]) -> String {
    let joined = parts.join("/");
    match (anchor, joined.is_empty()) {
        (Anchor::Root, _) => format!("/{joined}"),
        (Anchor::Home, true) => "~".to_owned(),
        (Anchor::Home, false) => format!("~/{joined}"),
        (Anchor::Cwd, true) => ".".to_owned(),
        // `./~x` must not turn into `~x`, which would read as a home path.
        (Anchor::Cwd, false) if joined.starts_with('~') => format!("./{joined}"),
        (Anchor::Cwd, false) => joined,
    }
}

/// `base` joined with `rel` (`rel` itself when absolute), `.` and `..`
/// folded without looking at the filesystem: the one lexical join of the
/// workspace (policy paths, git's configured paths, the guard's spelled
/// paths). With an absolute `base` the result is absolute and `..` stops
/// at `/`.
pub fn lexical_join(base: &Path, rel: &Path) -> PathBuf {
    lexical_clean(&base.join(rel))
}

/// Folds `.` and `..` in a path without looking at the filesystem (a `..`
/// above the start of a relative path is kept).
pub fn lexical_clean(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if matches!(out.components().next_back(), Some(Component::Normal(_))) {
                    out.pop();
                } else if !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// Matches resolved absolute paths against one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathMatcher {
    /// A plain or literal entry: equal paths only.
    Exact(PathBuf),
    /// A glob entry.
    Glob {
        /// The directory below which every match lies (walk from here).
        base: PathBuf,
        /// The resolved pattern text.
        pattern: String,
        /// The parsed pattern.
        tokens: Vec<GlobToken>,
    },
}

impl PathMatcher {
    /// The directory to start a walk from: the path itself for an exact entry.
    pub fn base(&self) -> &Path {
        match self {
            PathMatcher::Exact(path) => path,
            PathMatcher::Glob { base, .. } => base,
        }
    }

    /// True when `path` itself matches.
    ///
    /// Paths that are not UTF-8 are compared with their invalid bytes read
    /// as U+FFFD, which `*` and `?` still match: a deny glob like `*.pem`
    /// keeps covering a file whose name has invalid bytes.
    pub fn matches(&self, path: &Path) -> bool {
        match self {
            PathMatcher::Exact(exact) => lexical_clean(path) == *exact,
            PathMatcher::Glob { tokens, .. } => {
                let text: Vec<char> = path.to_string_lossy().chars().collect();
                glob_match(tokens, &text)
            }
        }
    }

    /// True when `path` or one of its ancestors matches (a deny of a
    /// directory covers everything below it).
    pub fn covers(&self, path: &Path) -> bool {
        path.ancestors()
            .any(|p| !p.as_os_str().is_empty() && self.matches(p))
    }
}

/// One piece of a glob pattern, in srt's reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GlobToken {
    /// Characters that stand for themselves (never `/`).
    Text(Vec<char>),
    /// `/`.
    Separator,
    /// `?`: one character other than `/`.
    AnyChar,
    /// `*`: any run of characters other than `/`.
    Star,
    /// `**`: any run of characters, `/` included.
    Globstar,
    /// `**/`: zero or more whole directories.
    GlobstarSlash,
    /// `[…]`: one character in one of the inclusive ranges.
    Set(Vec<(char, char)>),
}

/// Splits a pattern into tokens following srt's `parseGlob`.
fn tokenize(pattern: &str) -> Vec<GlobToken> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut tokens = Vec::new();
    let mut text = Vec::new();
    let mut brackets_are_text_until = 0;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let special = match c {
            '/' | '?' | '*' => true,
            '[' => i >= brackets_are_text_until,
            _ => false,
        };
        if !special {
            text.push(c);
            i += 1;
            continue;
        }
        if !text.is_empty() && c != '[' {
            tokens.push(GlobToken::Text(std::mem::take(&mut text)));
        }
        i = match c {
            '/' => push_and_next(&mut tokens, GlobToken::Separator, i),
            '?' => push_and_next(&mut tokens, GlobToken::AnyChar, i),
            '*' => stars(&chars, i, &mut tokens),
            _ => bracket(
                &chars,
                i,
                &mut tokens,
                &mut text,
                &mut brackets_are_text_until,
            ),
        };
    }
    if !text.is_empty() {
        tokens.push(GlobToken::Text(text));
    }
    tokens
}

fn push_and_next(tokens: &mut Vec<GlobToken>, token: GlobToken, i: usize) -> usize {
    tokens.push(token);
    i + 1
}

/// A run of `*` starting at `start`: the last two go with a following `/`,
/// two or more of the rest are a `**`, one is a `*`.
fn stars(chars: &[char], start: usize, tokens: &mut Vec<GlobToken>) -> usize {
    let mut i = start;
    while chars.get(i) == Some(&'*') {
        i += 1;
    }
    let run = i - start;
    let with_separator = run >= 2 && chars.get(i) == Some(&'/');
    let rest = run - if with_separator { 2 } else { 0 };
    if rest >= 2 {
        tokens.push(GlobToken::Globstar);
    } else if rest == 1 {
        tokens.push(GlobToken::Star);
    }
    if with_separator {
        tokens.push(GlobToken::GlobstarSlash);
        i += 1;
    }
    i
}

/// A `[` at `open`: a set up to the first `]`, or text when it spells none.
fn bracket(
    chars: &[char],
    open: usize,
    tokens: &mut Vec<GlobToken>,
    text: &mut Vec<char>,
    brackets_are_text_until: &mut usize,
) -> usize {
    let close = chars[open + 1..]
        .iter()
        .position(|&c| c == ']')
        .map(|p| p + open + 1);
    let Some(close) = close else {
        *brackets_are_text_until = chars.len();
        text.push('[');
        return open + 1;
    };
    match set_ranges(&chars[open + 1..close]) {
        Some(ranges) => {
            if !text.is_empty() {
                tokens.push(GlobToken::Text(std::mem::take(text)));
            }
            tokens.push(GlobToken::Set(ranges));
            close + 1
        }
        None => {
            *brackets_are_text_until = close + 1;
            text.push('[');
            open + 1
        }
    }
}

/// The ranges a set's members spell, or `None` when they spell no set
/// (empty, or a range that runs backwards such as `[user-id]`).
fn set_ranges(members: &[char]) -> Option<Vec<(char, char)>> {
    if members.is_empty() {
        return None;
    }
    let mut ranges = Vec::new();
    let mut i = 0;
    while i < members.len() {
        let from = members[i];
        if members.get(i + 1) == Some(&'-') && i + 2 < members.len() {
            i += 2;
        }
        let to = members[i];
        if to < from {
            return None;
        }
        ranges.push((from, to));
        i += 1;
    }
    Some(ranges)
}

/// Whole-string match of `tokens` against `text`.
fn glob_match(tokens: &[GlobToken], text: &[char]) -> bool {
    let width = text.len() + 1;
    // ok[t * width + p]: tokens[t..] match text[p..]. Filled from the end.
    let mut ok = vec![false; (tokens.len() + 1) * width];
    ok[tokens.len() * width + text.len()] = true;
    for t in (0..tokens.len()).rev() {
        for p in (0..=text.len()).rev() {
            ok[t * width + p] = step(&tokens[t], text, p, |q| ok[(t + 1) * width + q]);
        }
    }
    ok[0]
}

/// Whether `token` can consume `text[p..q]` for some `q` with `rest(q)`.
fn step(token: &GlobToken, text: &[char], p: usize, rest: impl Fn(usize) -> bool) -> bool {
    let next = text.get(p).copied();
    match token {
        GlobToken::Text(t) => text[p..].starts_with(t) && rest(p + t.len()),
        GlobToken::Separator => next == Some('/') && rest(p + 1),
        GlobToken::AnyChar => next.is_some_and(|c| c != '/') && rest(p + 1),
        GlobToken::Set(ranges) => {
            next.is_some_and(|c| ranges.iter().any(|&(a, b)| a <= c && c <= b)) && rest(p + 1)
        }
        GlobToken::Star => {
            let run = text[p..].iter().take_while(|&&c| c != '/').count();
            (p..=p + run).any(rest)
        }
        GlobToken::Globstar => (p..=text.len()).any(rest),
        GlobToken::GlobstarSlash => {
            rest(p) || (p + 1..=text.len()).any(|q| text[q - 1] == '/' && rest(q))
        }
    }
}

#[cfg(test)]
#[path = "paths_tests.rs"]
mod tests;
