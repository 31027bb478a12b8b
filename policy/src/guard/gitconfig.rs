//! The few facts the guard needs from a git configuration file: which
//! paths git will later run or read as configuration.
//!
//! Written by hand (a crate such as `gix-config` would bring a large
//! dependency tree into the policy crate for five keys). The reader follows
//! git's syntax closely enough to find keys reliably — sections with and
//! without subsections, case-insensitive section and key names, quoted
//! values with escapes, comments, line continuations — and errs on the side
//! of reporting a path: a value it cannot read is skipped, which only means
//! one fewer protected path, never a wider write.

/// Configuration keys whose value is a command git runs; the first word of
/// the command, when it is a path, is protected like a hook.
const COMMAND_KEYS: &[&str] = &[
    "core.fsmonitor",
    "core.sshcommand",
    "core.pager",
    "core.editor",
    "core.askpass",
    "sequence.editor",
    "diff.external",
    "gpg.program",
    "gpg.ssh.program",
    "credential.helper",
];

/// Per-driver keys (`diff.<driver>.textconv`, `filter.<driver>.clean`…)
/// whose value is a command.
const DRIVER_COMMAND_KEYS: &[(&str, &str)] = &[
    ("diff", "textconv"),
    ("diff", "command"),
    ("filter", "clean"),
    ("filter", "smudge"),
    ("filter", "process"),
    ("merge", "driver"),
    ("submodule", "update"),
];

/// What one configuration file says about paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigFacts {
    /// `core.hooksPath` values, as written.
    pub hooks_paths: Vec<String>,
    /// `include.path` and `includeIf.*.path` values, as written (every
    /// condition is taken as true: the file may be included).
    pub includes: Vec<String>,
    /// The program of each command-valued key, when it is written as a
    /// path (contains `/`), as written.
    pub programs: Vec<String>,
}

/// Read the facts out of the text of a configuration file.
pub fn parse(text: &str) -> ConfigFacts {
    let mut facts = ConfigFacts::default();
    let mut section = String::new();
    for (key, value) in entries(text, &mut section) {
        record(&mut facts, &key, value);
    }
    facts
}

fn record(facts: &mut ConfigFacts, key: &str, value: String) {
    let lower = key.to_ascii_lowercase();
    let (head, last) = lower.rsplit_once('.').unwrap_or(("", &lower));
    let first = head.split('.').next().unwrap_or("");
    if lower == "core.hookspath" {
        facts.hooks_paths.push(value);
    } else if last == "path" && (head == "include" || first == "includeif") {
        facts.includes.push(value);
    } else if (COMMAND_KEYS.contains(&lower.as_str())
        || DRIVER_COMMAND_KEYS
            .iter()
            .any(|(s, k)| first == *s && last == *k && head != *s)
        || (first == "alias" && value.starts_with('!')))
        && let Some(program) = program_path(&value)
    {
        facts.programs.push(program);
    }
}

/// The first word of a command when it names a file by path.
fn program_path(command: &str) -> Option<String> {
    let command = command.trim_start().trim_start_matches('!').trim_start();
    let word: String = if let Some(rest) = command.strip_prefix('"') {
        rest.split('"').next().unwrap_or("").to_owned()
    } else if let Some(rest) = command.strip_prefix('\'') {
        rest.split('\'').next().unwrap_or("").to_owned()
    } else {
        command.split_whitespace().next().unwrap_or("").to_owned()
    };
    word.contains('/').then_some(word)
}

/// `(section.key, value)` pairs in file order. `section` carries the
/// current section between lines (it is the full `name.subsection`).
fn entries(text: &str, section: &mut String) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let mut line = line.trim_start().to_owned();
        if line.starts_with('[') {
            let Some((header, rest)) = read_header(&line) else {
                continue;
            };
            *section = header;
            line = rest.trim_start().to_owned();
        }
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        // A value may continue on the next line after a trailing backslash.
        while line.trim_end().ends_with('\\') && !in_comment_or_quote_end(&line) {
            let trimmed = line.trim_end();
            line = trimmed[..trimmed.len() - 1].to_owned();
            match lines.next() {
                Some(next) => line.push_str(next),
                None => break,
            }
        }
        if let Some((key, value)) = read_entry(&line) {
            out.push((format!("{section}.{key}"), value));
        }
    }
    out
}

/// A continuation backslash inside a comment does not continue.
fn in_comment_or_quote_end(line: &str) -> bool {
    let mut quoted = false;
    let mut escaped = false;
    for c in line.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => quoted = !quoted,
            '#' | ';' if !quoted => return true,
            _ => {}
        }
    }
    false
}

/// `[name]`, `[name "sub"]` or `[name.sub]`: the section as `name.sub`
/// (name lower-cased, subsection as written), and what follows `]`.
fn read_header(line: &str) -> Option<(String, &str)> {
    let body = &line[1..];
    if let Some(q) = body.find('"') {
        let name = body[..q].trim().to_ascii_lowercase();
        let mut sub = String::new();
        let mut chars = body[q + 1..].char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => sub.extend(chars.next().map(|(_, c)| c)),
                '"' => {
                    let after = &body[q + 1 + i + 1..];
                    let close = after.find(']')?;
                    return Some((format!("{name}.{sub}"), &after[close + 1..]));
                }
                _ => sub.push(c),
            }
        }
        return None;
    }
    let close = body.find(']')?;
    let raw = body[..close].trim();
    // `[name.sub]` (deprecated): the name is case-insensitive, the sub too.
    Some((raw.to_ascii_lowercase(), &body[close + 1..]))
}

/// `key = value` (or a bare `key`, meaning true), with git's value rules:
/// quotes group, `\"` `\\` `\n` `\t` `\b` escape, comments end the value.
fn read_entry(line: &str) -> Option<(String, String)> {
    let (key, rest) = match line.find('=') {
        Some(eq) => (line[..eq].trim(), Some(&line[eq + 1..])),
        None => (line.trim(), None),
    };
    let key_ok = !key.is_empty()
        && key.starts_with(|c: char| c.is_ascii_alphabetic())
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if !key_ok {
        return None;
    }
    let value = rest.map_or_else(|| "true".to_owned(), read_value);
    Some((key.to_ascii_lowercase(), value))
}

fn read_value(raw: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    let mut pending_space = String::new();
    let mut chars = raw.trim_start().chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '#' | ';' if !quoted => break,
            '\\' => {
                out.push_str(&pending_space);
                pending_space.clear();
                match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some('b') => {
                        out.pop();
                    }
                    Some(other) => out.push(other),
                    None => {}
                }
            }
            c if c.is_whitespace() && !quoted => pending_space.push(c),
            c => {
                out.push_str(&pending_space);
                pending_space.clear();
                out.push(c);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_path_includes_and_programs() {
        let text = r#"
[core]
	repositoryformatversion = 0
	hooksPath = .husky/_ ; husky
	fsmonitor = "\"./tools/fs monitor.sh\" --flag"
	pager = less
[include]
	path = ../shared.gitconfig
[includeIf "gitdir:~/work/"]
	path = ~/.gitconfig-work
[diff "exif"]
	textconv = ./bin/exif-dump
[filter "lfs"]
	clean = git-lfs clean -- %f
[alias]
	st = status
	x = !./scripts/x.sh arg
[Core]
	sshCommand = /opt/ssh-wrap \
		-v
"#;
        let f = parse(text);
        assert_eq!(f.hooks_paths, vec![".husky/_"]);
        assert_eq!(f.includes, vec!["../shared.gitconfig", "~/.gitconfig-work"]);
        assert_eq!(
            f.programs,
            vec![
                "./tools/fs monitor.sh",
                "./bin/exif-dump",
                "./scripts/x.sh",
                "/opt/ssh-wrap"
            ]
        );
    }

    #[test]
    fn subsections_keys_and_odd_syntax() {
        let f = parse("[CORE]\nHOOKSPATH=\"a\\\"b\"\n[core.x]\nhookspath = no\n");
        assert_eq!(f.hooks_paths, vec!["a\"b"]);
        let f = parse("[include] path = inline.cfg\n# [core] hooksPath = x\n");
        assert_eq!(f.includes, vec!["inline.cfg"]);
        assert!(f.hooks_paths.is_empty());
        // A subsection named like a key is not that key.
        let f = parse("[diff]\ntextconv = ./x\n");
        assert!(f.programs.is_empty());
        let f = parse("[submodule \"m\"]\nupdate = !./evil.sh\n");
        assert_eq!(f.programs, vec!["./evil.sh"]);
        assert_eq!(parse("garbage [[[\n=\n").hooks_paths.len(), 0);
    }
}
