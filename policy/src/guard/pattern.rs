//! How the guard's catalogues name paths: a relative path whose last
//! component may stand for a family of spellings (every name a tool reads
//! under several spellings: `lefthook.yml`, `lefthook-local.toml`,
//! `.lefthook/`…), and an index that finds every entry a path holds at any
//! depth in one pass over its components.
//!
//! Why families: a list of exact names is broken by the next spelling the
//! tool accepts (`lefthook.yml` refused while `lefthook.toml` was not). A
//! family is the rule the tool applies: "a file whose name starts with
//! `lefthook`", "a directory whose name starts with `.devcontainer`".

use std::collections::{HashMap, HashSet};

/// How the last component of an entry matches a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Form {
    /// The name itself.
    Exact,
    /// The name itself, ignoring ASCII case (`NuGet.Config`, `nuget.config`).
    Caseless,
    /// Every name starting with it.
    Prefix,
    /// Every name ending with it (and longer than it).
    Suffix,
}

/// One protected path of a catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// `/`-separated components, relative to where the catalogue anchors
    /// it; only the last one is a family ([`Form`]).
    pub path: &'static str,
    /// How the last component matches.
    pub form: Form,
    /// Everything below a match is protected too (a directory, or a name
    /// that can be a directory).
    pub dir: bool,
    /// The tool that reads or runs it.
    pub tool: &'static str,
    /// What the tool executes because of it, and when (with its class,
    /// `docs/enforcement.md`); shown when a call is refused.
    pub runs: &'static str,
}

impl Entry {
    /// Whether `name` matches the last component.
    pub fn last_matches(&self, name: &str) -> bool {
        let last = self.last();
        match self.form {
            Form::Exact => name == last,
            Form::Caseless => name.eq_ignore_ascii_case(last),
            Form::Prefix => name.starts_with(last),
            Form::Suffix => name.len() > last.len() && name.ends_with(last),
        }
    }

    /// The last component.
    pub fn last(&self) -> &'static str {
        self.path.rsplit('/').next().unwrap_or(self.path)
    }

    /// The components before the last one.
    pub fn leading(&self) -> impl Iterator<Item = &'static str> {
        let n = self.path.split('/').count();
        self.path.split('/').take(n - 1)
    }

    /// Whether the entry holds at `parts[at..]`: its components in order,
    /// ending at the last part or (a directory entry) anywhere before it.
    pub fn holds_at(&self, parts: &[&str], at: usize) -> bool {
        let comps: Vec<&str> = self.path.split('/').collect();
        let end = at + comps.len();
        if end > parts.len() || (!self.dir && end != parts.len()) {
            return false;
        }
        let lead = &comps[..comps.len() - 1];
        lead.iter().zip(&parts[at..]).all(|(c, p)| c == p) && self.last_matches(parts[end - 1])
    }

    /// Names of the family a tool reads, for tests and documentation: the
    /// name itself and other spellings (`lefthook.json`,
    /// `lefthook-local.toml`), and for a directory a file inside.
    pub fn examples(&self) -> Vec<String> {
        let lead: String = self.leading().map(|c| format!("{c}/")).collect();
        let last = self.last();
        let names = match self.form {
            Form::Exact => vec![last.to_owned()],
            Form::Caseless => vec![last.to_owned(), last.to_ascii_uppercase()],
            Form::Prefix => vec![
                last.to_owned(),
                format!("{last}.json"),
                format!("{last}-local.toml"),
            ],
            Form::Suffix => vec![format!("x{last}")],
        };
        let mut out: Vec<String> = names.iter().map(|n| format!("{lead}{n}")).collect();
        if self.dir {
            out.push(format!("{}/x", out[0]));
        }
        out
    }

    /// The path as shown to users (`lefthook*`, `*.code-workspace`, `.vscode/`).
    pub fn shown(&self) -> String {
        let mut s = match self.form {
            Form::Prefix => format!("{}*", self.path),
            Form::Suffix => {
                let lead: Vec<&str> = self.leading().collect();
                let lead = lead.iter().map(|c| format!("{c}/")).collect::<String>();
                format!("{lead}*{}", self.last())
            }
            Form::Exact | Form::Caseless => self.path.to_owned(),
        };
        if self.dir && self.form != Form::Prefix {
            s.push('/');
        }
        s
    }
}

const fn entry(
    path: &'static str,
    form: Form,
    dir: bool,
    tool: &'static str,
    runs: &'static str,
) -> Entry {
    Entry {
        path,
        form,
        dir,
        tool,
        runs,
    }
}

/// A file (or any entry) of that name.
pub const fn file(path: &'static str, tool: &'static str, runs: &'static str) -> Entry {
    entry(path, Form::Exact, false, tool, runs)
}

/// A directory of that name and everything below it.
pub const fn dir(path: &'static str, tool: &'static str, runs: &'static str) -> Entry {
    entry(path, Form::Exact, true, tool, runs)
}

/// Every file whose name starts with the last component.
pub const fn files_from(path: &'static str, tool: &'static str, runs: &'static str) -> Entry {
    entry(path, Form::Prefix, false, tool, runs)
}

/// Every file or directory (and everything below it) whose name starts
/// with the last component.
pub const fn names_from(path: &'static str, tool: &'static str, runs: &'static str) -> Entry {
    entry(path, Form::Prefix, true, tool, runs)
}

/// Every file whose name ends with the last component.
pub const fn ending(path: &'static str, tool: &'static str, runs: &'static str) -> Entry {
    entry(path, Form::Suffix, false, tool, runs)
}

/// A file of that name in any ASCII case.
pub const fn caseless(path: &'static str, tool: &'static str, runs: &'static str) -> Entry {
    entry(path, Form::Caseless, false, tool, runs)
}

/// Checks every catalogue makes of its entries (for its tests): unique
/// paths, text present.
#[cfg(test)]
pub(crate) fn check_table(table: &[Entry]) {
    let mut seen = std::collections::BTreeSet::new();
    for e in table {
        assert!(seen.insert((e.path, e.form)), "{} twice", e.path);
        assert!(!e.path.is_empty() && !e.path.ends_with('/') && !e.path.starts_with('/'));
        assert!(!e.tool.is_empty() && !e.runs.is_empty(), "{}", e.path);
        assert!(!e.runs.ends_with('.'), "{}: no full stop", e.path);
        assert!(!e.path.contains("//"), "{}", e.path);
    }
}

/// A catalogue indexed for matching at any depth: entries whose first
/// component is a plain name by that name, the rest (single-component
/// families) in a short list tested against every component.
#[derive(Debug)]
pub struct Index {
    by_first: HashMap<&'static str, Vec<&'static Entry>>,
    families: Vec<&'static Entry>,
    /// Every plain component of every entry.
    names: HashSet<&'static str>,
    /// Every entry whose last component is a family.
    any_family: Vec<&'static Entry>,
}

impl Index {
    /// Index `table`. A family may only be an entry's sole component
    /// (checked by the catalogues' tests).
    pub fn new(table: &'static [Entry]) -> Self {
        let mut by_first: HashMap<&'static str, Vec<&'static Entry>> = HashMap::new();
        let mut families = Vec::new();
        let mut names = HashSet::new();
        let mut any_family = Vec::new();
        for e in table {
            names.extend(e.leading());
            match e.form {
                Form::Exact => {
                    names.insert(e.last());
                }
                _ => any_family.push(e),
            }
            let single = !e.path.contains('/');
            if single && e.form != Form::Exact {
                families.push(e);
            } else {
                let first = e.path.split('/').next().unwrap_or(e.path);
                by_first.entry(first).or_default().push(e);
            }
        }
        Index {
            by_first,
            families,
            names,
            any_family,
        }
    }

    /// The first entry that holds somewhere in `parts` (at any depth), with
    /// the index of the part it starts at.
    pub fn find(&self, parts: &[&str]) -> Option<(&'static Entry, usize)> {
        self.all(parts).next()
    }

    /// Every entry that holds somewhere in `parts`, with where it starts.
    pub fn all<'a>(
        &'a self,
        parts: &'a [&'a str],
    ) -> impl Iterator<Item = (&'static Entry, usize)> + 'a {
        (0..parts.len()).flat_map(move |i| {
            let exact = self.by_first.get(parts[i]).into_iter().flatten();
            exact
                .chain(self.families.iter())
                .filter(move |e| e.holds_at(parts, i))
                .map(move |e| (*e, i))
        })
    }

    /// The entry that holds from the first part on (an anchored catalogue).
    pub fn find_anchored(&self, parts: &[&str]) -> Option<&'static Entry> {
        let first = parts.first()?;
        let exact = self.by_first.get(first).into_iter().flatten();
        exact
            .chain(self.families.iter())
            .find(|e| e.holds_at(parts, 0))
            .copied()
    }

    /// Whether `name` could be a component of some entry (a leading
    /// component, or a last one by its family).
    pub fn may_hold(&self, name: &str) -> bool {
        self.names.contains(name) || self.any_family.iter().any(|e| e.last_matches(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &[Entry] = &[
        Entry {
            path: "lefthook",
            form: Form::Prefix,
            dir: false,
            tool: "lefthook",
            runs: "x",
        },
        Entry {
            path: ".devcontainer",
            form: Form::Prefix,
            dir: true,
            tool: "devcontainer",
            runs: "x",
        },
        Entry {
            path: ".hg/hgrc",
            form: Form::Exact,
            dir: false,
            tool: "hg",
            runs: "x",
        },
        Entry {
            path: ".code-workspace",
            form: Form::Suffix,
            dir: false,
            tool: "code",
            runs: "x",
        },
    ];

    fn parts(p: &str) -> Vec<&str> {
        p.split('/').filter(|c| !c.is_empty()).collect()
    }

    #[test]
    fn families_match_every_spelling_at_any_depth() {
        let idx = Index::new(T);
        for p in [
            "lefthook.yml",
            "a/b/lefthook-local.toml",
            "x/.config/lefthook.json",
            ".devcontainer.json",
            "a/.devcontainer/devcontainer.json",
            "a/b/.hg/hgrc",
            "p/x.code-workspace",
        ] {
            assert!(idx.find(&parts(p)).is_some(), "{p}");
        }
        for p in [
            "lefthook/x",
            "a/.hg/store",
            "hgrc",
            ".code-workspace",
            "a/src/main.rs",
        ] {
            assert!(idx.find(&parts(p)).is_none(), "{p}");
        }
        assert_eq!(idx.find(&parts("a/b/.hg/hgrc")).map(|m| m.1), Some(2));
    }

    #[test]
    fn shown_and_example() {
        assert_eq!(T[0].shown(), "lefthook*");
        assert_eq!(
            T[0].examples(),
            ["lefthook", "lefthook.json", "lefthook-local.toml"]
        );
        assert_eq!(T[3].shown(), "*.code-workspace");
        assert_eq!(T[2].examples(), [".hg/hgrc"]);
        assert_eq!(T[1].examples()[3], ".devcontainer/x");
    }
}
