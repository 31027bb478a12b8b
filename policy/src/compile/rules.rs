//! Policy paths resolved against the host, and the read/write state they give
//! every path (shared by the mount and Landlock plans).
//!
//! Precedence (srt's Linux behaviour, `srt-semantics.md` §2.4):
//! - read: among the rules on a path and its ancestors, the deepest one
//!   decides; `allowRead` and `allowWrite` count as allows, `denyRead`, the
//!   implicit host masks and the private `/tmp` as denies; on the same path
//!   an allow wins. No rule: readable;
//! - write: writable iff visible, some `allowWrite` covers it and no
//!   protected path (`denyWrite`, mandatory denies, the settings file, the
//!   oajail binary) covers it: a deny beats an allow even from an ancestor.
//!
//! Every rule path is canonical (symlinks resolved through the [`FsView`]),
//! except that an `allowWrite` entry with a symlink in any component, and an
//! `allowRead` entry whose last component is a symlink, are dropped with a
//! warning: making writable or re-allowing whatever a link points at is how
//! a planted link widens access (attacks A4, srt's `symlink-write-path`).

use super::fsview::{canonicalize, has_symlink};
use super::{CompileError, FileKind, FsView, HostFacts};
use crate::paths::PathMatcher;
use crate::{PathEntry, Policy};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

/// The private tmpfs every jail gets.
pub(crate) const TMP: &str = "/tmp";

/// Host directories masked by default: they hold unix sockets of host
/// services (D-Bus, the user's runtime dir with ssh/gpg agents, docker,
/// systemd). A read-only bind would not stop `connect()`, so they are hidden.
pub(crate) const HOST_SOCKET_DIRS: &[&str] =
    &["/run", "/var/run", "/var/run/docker.sock", "/var/run/dbus"];

/// Entries of a shared host `/tmp` that are hidden from the jail: agent and
/// multiplexer sockets, X11/ICE sockets, Kerberos credential caches.
const TMP_SECRETS: &[&str] = &[
    ".X11-unix",
    ".ICE-unix",
    ".XIM-unix",
    ".font-unix",
    "ssh-",
    "tmux-",
    "krb5cc",
    "gpg-",
    "systemd-private-",
];

/// The most entries inside denied directories checked for hard links.
const HARDLINK_BUDGET: usize = 256;

/// The most entries a glob expansion may visit.
const GLOB_BUDGET: usize = 100_000;

/// Resolved rule paths and the state they imply.
#[derive(Debug, Default)]
pub(crate) struct Rules {
    /// `denyRead` entries (resolved, globs expanded).
    pub deny_read: BTreeSet<PathBuf>,
    /// Implicit host masks (socket directories that exist).
    pub masks: BTreeSet<PathBuf>,
    /// `allowRead` entries plus implicit re-allows (the cwd under `/tmp`…).
    pub allow_read: BTreeSet<PathBuf>,
    /// `allowWrite` entries that exist and have no symlink component.
    pub allow_write: BTreeSet<PathBuf>,
    /// Write-protected paths: `denyWrite` (existing or not), the settings
    /// file, the oajail binary. The mandatory denies are the guard's.
    pub deny_write: BTreeSet<PathBuf>,
    /// Private tmpfs mounts (`/tmp`): host content below is hidden.
    pub private: BTreeSet<PathBuf>,
    /// Kinds of the rule paths that exist.
    pub kinds: BTreeMap<PathBuf, FileKind>,
    /// Answers of [`Rules::visible`], keyed by the path's bytes: hashing
    /// those is much cheaper than `Path`'s component-wise hash, and two
    /// spellings of one path at worst compute the same answer twice.
    visible_memo: std::cell::RefCell<std::collections::HashMap<std::ffi::OsString, bool>>,
    /// Human-readable notes about entries that were dropped or narrowed.
    pub warnings: Vec<String>,
    /// The home directory, canonical.
    pub home: PathBuf,
}

impl Rules {
    /// Resolve the policy's filesystem lists for this host.
    pub(crate) fn build(
        policy: &Policy,
        facts: &HostFacts,
        fs: &dyn FsView,
    ) -> Result<Rules, CompileError> {
        let home = canonical_fact(fs, "home", &facts.home)?;
        let cwd = canonical_fact(fs, "cwd", &facts.cwd)?;
        let fsp = &policy.filesystem;
        let mut rules = Rules {
            private: [PathBuf::from(TMP)].into(),
            home: home.clone(),
            ..Rules::default()
        };
        // Each list is collected and then built in bulk (sorted once),
        // rather than inserted path by path; the sets start empty.
        let mut found = Vec::new();
        for entry in &fsp.deny_read {
            found.extend(rules.expand(fs, "denyRead", entry, &home, &cwd)?);
        }
        rules.deny_read = found.drain(..).collect();
        rules.expand_denied_root(fs);
        rules.warn_hard_links(fs);
        for entry in &fsp.allow_read {
            found.extend(rules.expand_allow(fs, "allowRead", entry, &home, &cwd)?);
        }
        rules.allow_read = found.drain(..).collect();
        for entry in &fsp.allow_write {
            found.extend(rules.expand_allow(fs, "allowWrite", entry, &home, &cwd)?);
        }
        rules.allow_write = found.drain(..).collect();
        rules.warn_denied_in_writable();
        rules.host_tmp(fs, &cwd)?;
        if policy.network.allow_all_unix_sockets {
            for socket in super::home_sockets::sockets(fs, &home, &rules.allow_write) {
                rules.note_kind(fs, &socket);
                rules.masks.insert(socket);
            }
        }
        for entry in &fsp.deny_write {
            found.extend(rules.expand(fs, "denyWrite", entry, &home, &cwd)?);
        }
        rules.deny_write = found.drain(..).collect();
        rules.add_implicit(fs, facts, &cwd)?;
        Ok(rules)
    }

    /// The paths one entry of `field` resolves to here, as [`Rules::build`]
    /// resolves it (empty when it cannot be resolved); for naming the entry
    /// behind a refusal (`explain.rs`).
    pub(crate) fn entry_paths(
        fs: &dyn FsView,
        field: &str,
        entry: &PathEntry,
        home: &Path,
        cwd: &Path,
    ) -> Vec<PathBuf> {
        let mut scratch = Rules::default();
        let found = if field.starts_with("allow") {
            scratch.expand_allow(fs, field, entry, home, cwd)
        } else {
            scratch.expand(fs, field, entry, home, cwd)
        };
        found.unwrap_or_default()
    }

    /// Resolve one entry: globs expanded through `fs`, plain entries canonicalised.
    fn expand(
        &mut self,
        fs: &dyn FsView,
        field: &str,
        entry: &PathEntry,
        home: &Path,
        cwd: &Path,
    ) -> Result<Vec<PathBuf>, CompileError> {
        let mut out = Vec::new();
        for path in lexical_matches(fs, field, entry, home, cwd)? {
            let real = canonicalize(fs, &path).map_err(|e| CompileError::Path {
                field: field.to_owned(),
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
            self.note_kind(fs, &real);
            out.push(real);
        }
        Ok(out)
    }

    /// Like `expand`, but an allow entry with a symlink component is dropped.
    fn expand_allow(
        &mut self,
        fs: &dyn FsView,
        field: &str,
        entry: &PathEntry,
        home: &Path,
        cwd: &Path,
    ) -> Result<Vec<PathBuf>, CompileError> {
        let mut out = Vec::new();
        if field == "allowWrite" && write_glob_ignored(fs, entry, home, cwd) {
            self.warnings.push(format!(
                "filesystem.allowWrite: {}: globs grant no write on Linux (srt skips them too); ignored (name the directories)",
                entry.path
            ));
            return Ok(out);
        }
        for lexical in lexical_matches(fs, field, entry, home, cwd)? {
            // Writes: no symlink anywhere (a planted `build -> ~` must not
            // make home writable, nor `build/out` under it). Reads: only the
            // last component matters (srt re-allows a link's name, never its
            // target); links above it (`/lib -> usr/lib`) are resolved.
            let linked = if field == "allowWrite" {
                has_symlink(fs, &lexical)
            } else {
                fs.kind(&lexical) == Some(FileKind::Symlink)
            };
            let path = if linked {
                lexical.clone()
            } else {
                canonicalize(fs, &lexical).unwrap_or_else(|_| lexical.clone())
            };
            if linked {
                self.warnings.push(format!(
                    "filesystem.{field}: {} is or goes through a symlink; ignored (write the real path)",
                    lexical.display()
                ));
            } else if fs.kind(&path).is_none() {
                self.warnings.push(format!(
                    "filesystem.{field}: {} does not exist; ignored",
                    path.display()
                ));
            } else {
                self.note_kind(fs, &path);
                out.push(path);
            }
        }
        Ok(out)
    }

    /// `/tmp` is private to the jail unless `allowWrite` names the host's
    /// `/tmp` itself (srt's README example): then it is shared, with the
    /// host's socket and credential-cache entries in it hidden. A working
    /// directory that the private `/tmp` would hide is bound in (see
    /// `add_implicit`); `/tmp` itself as the working directory is refused,
    /// since the command would find an empty directory there.
    fn host_tmp(&mut self, fs: &dyn FsView, cwd: &Path) -> Result<(), CompileError> {
        let tmp = Path::new(TMP);
        if self.allow_write.contains(tmp) {
            self.private.remove(tmp);
            self.warnings.push(
                "filesystem.allowWrite: /tmp: the host's /tmp is shared with the jail (no private /tmp); its sockets and credential caches are hidden"
                    .into(),
            );
            for (name, _) in fs.read_dir(tmp).unwrap_or_default() {
                if TMP_SECRETS.iter().any(|p| name.starts_with(p)) {
                    let path = tmp.join(&name);
                    self.note_kind(fs, &path);
                    self.masks.insert(path);
                }
            }
            return Ok(());
        }
        if self.allow_read.remove(tmp) {
            self.warnings.push(
                "filesystem.allowRead: /tmp: the jail's /tmp stays private (the host's is not shown); name subdirectories instead"
                    .into(),
            );
        }
        if cwd == tmp {
            return Err(CompileError::Path {
                field: "cwd".into(),
                path: TMP.into(),
                reason: "the jail's /tmp is private, so the command would start in an empty directory; run from a subdirectory (the host's /tmp/<dir> is bound in) or add \"/tmp\" to filesystem.allowWrite to share the host's /tmp".into(),
            });
        }
        Ok(())
    }

    /// srt: `denyRead: ["/"]` means every top-level directory except the
    /// kernel filesystems; a tmpfs over `/` itself would leave nothing to run.
    fn expand_denied_root(&mut self, fs: &dyn FsView) {
        if !self.deny_read.remove(Path::new("/")) {
            return;
        }
        for (name, kind) in fs.read_dir(Path::new("/")).unwrap_or_default() {
            // Links such as `/bin -> usr/bin` are not masked: their targets
            // are top-level directories with their own entries.
            if kind != FileKind::Symlink && !matches!(name.as_str(), "proc" | "dev" | "sys") {
                let path = Path::new("/").join(name);
                self.note_kind(fs, &path);
                self.deny_read.insert(path);
            }
        }
    }

    /// A denied path inside a writable root is hidden by its mount mask
    /// alone: Landlock grants read on the whole writable root (files made
    /// there must stay readable), and the kernel detaches the mask when the
    /// host replaces or removes the path during the run (an editor's save of
    /// `.env`). Path-based layers cannot hold that, so say so.
    fn warn_denied_in_writable(&mut self) {
        for denied in &self.deny_read {
            let root = (self.allow_write.iter()).find(|w| denied.starts_with(w) && denied != *w);
            if let Some(root) = root {
                self.warnings.push(format!(
                    "filesystem.denyRead: {} is inside the writable root {}: it is hidden as it is at the start; a file the host puts there during the run (an editor's save) is readable in the jail",
                    denied.display(),
                    root.display()
                ));
            }
        }
    }

    /// A denied file with other hard links stays readable under those names
    /// (attack A6b): path-based denies cannot see them, so say so. Denied
    /// directories are walked breadth first (a secret sits near the top:
    /// `~/.netrc`, `~/.ssh/id_ed25519`) for at most [`HARDLINK_BUDGET`]
    /// entries, because this runs on every start.
    fn warn_hard_links(&mut self, fs: &dyn FsView) {
        let mut found = Vec::new();
        let mut budget = HARDLINK_BUDGET;
        let mut queue: VecDeque<PathBuf> = self.deny_read.iter().cloned().collect();
        while let Some(path) = queue.pop_front() {
            match fs.kind(&path) {
                Some(FileKind::File) if fs.link_count(&path).is_some_and(|n| n > 1) => {
                    found.push(path);
                }
                Some(FileKind::Dir) => {
                    for (name, _) in fs.read_dir(&path).unwrap_or_default() {
                        if budget == 0 {
                            break;
                        }
                        budget -= 1;
                        queue.push_back(path.join(name));
                    }
                }
                _ => {}
            }
        }
        for path in found {
            self.warnings.push(format!(
                "filesystem.denyRead: {} has other hard links; the file stays readable under those names",
                path.display()
            ));
        }
    }

    /// Host socket masks, the oajail binary and settings file, and re-allows
    /// that keep the cwd and DNS configuration usable.
    fn add_implicit(
        &mut self,
        fs: &dyn FsView,
        facts: &HostFacts,
        cwd: &Path,
    ) -> Result<(), CompileError> {
        let mut dirs: Vec<PathBuf> = HOST_SOCKET_DIRS.iter().map(PathBuf::from).collect();
        if let Some(sock) = &facts.ssh_auth_sock {
            dirs.extend(sock.parent().map(Path::to_path_buf));
        }
        for dir in dirs {
            if let Ok(real) = canonicalize(fs, &dir)
                && fs.kind(&real).is_some()
                && real != Path::new("/")
            {
                self.note_kind(fs, &real);
                self.masks.insert(real);
            }
        }
        for file in [Some(&facts.exe), facts.settings_path.as_ref()]
            .into_iter()
            .flatten()
        {
            if let Ok(real) = canonicalize(fs, file)
                && fs.kind(&real).is_some()
            {
                self.note_kind(fs, &real);
                self.deny_write.insert(real);
            }
        }
        // The cwd and /etc/resolv.conf's target stay readable when only the
        // implicit masks (not the policy) would hide them.
        let resolv = canonicalize(fs, Path::new("/etc/resolv.conf")).ok();
        for path in [Some(cwd.to_path_buf()), resolv].into_iter().flatten() {
            let hidden_by_implicit =
                path.starts_with(TMP) || self.masks.iter().any(|m| path.starts_with(m));
            if hidden_by_implicit && fs.kind(&path).is_some() && self.policy_visible(&path) {
                self.note_kind(fs, &path);
                self.allow_read.insert(path);
            }
        }
        Ok(())
    }

    pub(crate) fn note_kind(&mut self, fs: &dyn FsView, path: &Path) {
        if let Some(kind) = fs.kind(path) {
            self.kinds.insert(path.to_path_buf(), kind);
        }
    }

    /// The kind of a rule path (`None` when missing).
    pub(crate) fn kind(&self, path: &Path) -> Option<FileKind> {
        self.kinds.get(path).copied()
    }

    /// Whether the policy's own lists (not the implicit masks) leave `path` readable.
    fn policy_visible(&self, path: &Path) -> bool {
        decide(
            path,
            &[&self.deny_read],
            &[&self.allow_read, &self.allow_write],
        )
    }

    /// Whether host content at `path` is visible in the jail.
    ///
    /// Memoised: the read lists are complete before anything asks (the
    /// mandatory-deny walk only adds write denies), and the plans ask about
    /// the same paths many times.
    pub(crate) fn visible(&self, path: &Path) -> bool {
        if let Some(v) = self.visible_memo.borrow().get(path.as_os_str()) {
            return *v;
        }
        let v = decide(
            path,
            &[&self.deny_read, &self.masks, &self.private],
            &[&self.allow_read, &self.allow_write],
        );
        self.visible_memo
            .borrow_mut()
            .insert(path.as_os_str().to_owned(), v);
        v
    }

    /// Whether host content at `path` is writable from the jail.
    pub(crate) fn writable(&self, path: &Path) -> bool {
        self.visible(path) && covers(&self.allow_write, path) && !covers(&self.deny_write, path)
    }

    /// Every path any rule names, for plans that need all of them.
    pub(crate) fn read_points(&self) -> BTreeSet<PathBuf> {
        // Collected, not inserted one by one: `BTreeSet::from_iter` sorts
        // (the chained sets are already sorted runs, which the merge sort
        // detects) and builds the tree in bulk, instead of a root-to-leaf
        // path comparison per element.
        self.deny_read
            .iter()
            .chain(&self.masks)
            .chain(&self.allow_read)
            .chain(&self.allow_write)
            .chain(&self.private)
            .cloned()
            .collect()
    }
}

/// The paths an entry names, lexically (home and cwd canonical, the rest as
/// written): a plain entry is itself, a glob is expanded through `fs`.
///
/// An entry with glob characters that names an existing path as written
/// (`~/[private]`, `./notes[1].txt`) is read literally, as srt does: for
/// an allow list that path alone (never more than srt grants), for a deny
/// list that path and whatever the glob matches.
fn lexical_matches(
    fs: &dyn FsView,
    field: &str,
    entry: &PathEntry,
    home: &Path,
    cwd: &Path,
) -> Result<Vec<PathBuf>, CompileError> {
    let matcher = whole_dir_matcher(entry, home, cwd);
    let base = match &matcher {
        PathMatcher::Exact(path) => return Ok(vec![path.clone()]),
        PathMatcher::Glob { base, .. } => base,
    };
    let literal = entry.resolve(home, cwd);
    if fs.kind(&literal).is_none() {
        return glob_walk(fs, field, &matcher, base);
    }
    if field.starts_with("allow") {
        return Ok(vec![literal]);
    }
    let mut out = glob_walk(fs, field, &matcher, base)?;
    if !out.contains(&literal) {
        out.push(literal);
    }
    Ok(out)
}

/// srt on Linux skips every `allowWrite` glob except a trailing `/**` on a
/// literal directory, so oajail never grants a write through one either (it
/// would grant more than srt). A bracket name that exists as written is
/// read literally, as srt reads it.
fn write_glob_ignored(fs: &dyn FsView, entry: &PathEntry, home: &Path, cwd: &Path) -> bool {
    matches!(
        whole_dir_matcher(entry, home, cwd),
        PathMatcher::Glob { .. }
    ) && fs.kind(&entry.resolve(home, cwd)).is_none()
}

/// `dir/**` (with a literal `dir`) means the directory itself, as in srt: one
/// mask that also covers files created later. Other globs match as written.
fn whole_dir_matcher(entry: &PathEntry, home: &Path, cwd: &Path) -> PathMatcher {
    if entry.is_glob()
        && let Some(dir) = entry.path.strip_suffix("/**")
        && !crate::paths::has_glob_chars(dir)
    {
        let literal = PathEntry {
            path: dir.to_owned(),
            literal: false,
        };
        return PathMatcher::Exact(literal.resolve(home, cwd));
    }
    entry.matcher(home, cwd)
}

/// The deepest rule covering `path` decides; allows win ties; none: allowed.
fn decide(path: &Path, denies: &[&BTreeSet<PathBuf>], allows: &[&BTreeSet<PathBuf>]) -> bool {
    // Ancestors deepest first: the first one any rule names decides, and an
    // allow on the same path wins. O(depth · log n), not O(rules).
    for ancestor in path.ancestors() {
        if allows.iter().any(|s| s.contains(ancestor)) {
            return true;
        }
        if denies.iter().any(|s| s.contains(ancestor)) {
            return false;
        }
    }
    true
}

/// Whether `set` holds `path` or one of its ancestors.
pub(crate) fn covers(set: &BTreeSet<PathBuf>, path: &Path) -> bool {
    path.ancestors().any(|a| set.contains(a))
}

fn canonical_fact(fs: &dyn FsView, name: &str, path: &Path) -> Result<PathBuf, CompileError> {
    let err = |reason: String| CompileError::Path {
        field: name.to_owned(),
        path: path.display().to_string(),
        reason,
    };
    if !path.is_absolute() {
        return Err(err("not an absolute path".into()));
    }
    canonicalize(fs, path).map_err(|e| err(e.to_string()))
}

/// Every existing path under `base` that `matcher` matches (symlinks are
/// matched but not descended). A glob is a snapshot: paths created after
/// compilation are not covered.
fn glob_walk(
    fs: &dyn FsView,
    field: &str,
    matcher: &PathMatcher,
    base: &Path,
) -> Result<Vec<PathBuf>, CompileError> {
    let mut out = Vec::new();
    let mut stack = vec![base.to_path_buf()];
    let mut visited = 0usize;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs.read_dir(&dir) else {
            continue;
        };
        for (name, kind) in entries {
            visited += 1;
            if visited > GLOB_BUDGET {
                return Err(CompileError::WalkBudget {
                    what: format!("glob expansion of filesystem.{field}"),
                    root: base.display().to_string(),
                    budget: GLOB_BUDGET,
                });
            }
            let path = dir.join(&name);
            if matcher.matches(&path) {
                // A match covers everything below it: do not descend.
                out.push(path);
            } else if kind == FileKind::Dir {
                stack.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}
