//! Family A (reading secrets) and B (persistence) attacks on the filesystem.
//!
//! Reads succeed only when canary bytes come back; a mask that turns a
//! secret into an empty file is a block. Writes succeed when the kernel
//! accepted the write; the harness separately checks the host file is
//! unchanged (a write into a throw-away tmpfs must not count as an escape
//! either, but it must not be reported as blocked by the probe).

use crate::report::{Outcome, READ_DENIED, WRITE_DENIED, has_canary, io_errno};
use nix::errno::Errno;
use oajail_audit::verdict::Verdict;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt, symlink};
use std::path::Path;

/// Text the write attacks plant; the harness looks for it on the host.
pub const PERSIST_MARK: &[u8] = b"OAJ-PERSIST-MARK\n";

/// `read-file PATH`: open and read a secret.
pub fn read_file(attack: &str, path: &str) -> Outcome {
    match fs::read(path) {
        Ok(bytes) if has_canary(&bytes) => Outcome::succeeded(
            attack,
            format!("read {} bytes holding a canary", bytes.len()),
        ),
        Ok(bytes) => Outcome::blocked_plain(
            attack,
            format!("read {} bytes, no canary (masked)", bytes.len()),
        ),
        Err(e) => Outcome::failed(attack, "read", io_errno(&e), READ_DENIED),
    }
}

/// `read-when-created PATH`: wait up to 20 s for PATH to appear (`stat`
/// needs no read right), then read it as `read-file` does. The host creates
/// PATH once it sees this process (its command line) running in the jail.
pub fn read_when_created(attack: &str, path: &str) -> Outcome {
    let missing = || fs::symlink_metadata(path).is_err();
    read_after(attack, path, 20, missing, "never appeared")
}

/// `read-when-replaced PATH`: note what PATH is now (device and inode, as
/// `lstat` shows it: `stat` needs no read right), wait up to 15 s (less
/// than the lab's run timeout, so the verdict says why) for
/// another file to be at PATH, then read it as `read-file` does. The host
/// renames a new file over PATH once it sees this process running; a
/// mount that masked the old file is then detached by the kernel.
pub fn read_when_replaced(attack: &str, path: &str) -> Outcome {
    use std::os::unix::fs::MetadataExt;
    let id = || fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino()));
    let before = id();
    read_after(attack, path, 15, || id() == before, "was never replaced")
}

/// The name this process takes (`PR_SET_NAME`) once it has looked at PATH, so the host
/// acts only after that look (`/proc/<pid>/comm` is readable by anyone;
/// `tests/a_during_run.rs` waits for it).
const WAITING_COMM: &std::ffi::CStr = c"oajail-waiting";

/// Poll every 10 ms, for up to `secs`, while `waiting` holds; then read
/// PATH as `read-file` does (or report that it `never` changed). The
/// caller has taken its first look; the new name tells the host so.
fn read_after(
    attack: &str,
    path: &str,
    secs: u64,
    waiting: impl Fn() -> bool,
    never: &str,
) -> Outcome {
    if let Err(e) = nix::sys::prctl::set_name(WAITING_COMM) {
        return Outcome::unexpected(attack, None, format!("set the process name: {e}"));
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while waiting() {
        if std::time::Instant::now() > deadline {
            return Outcome::unexpected(attack, None, format!("{path} {never}"));
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // As an attacker would, keep reading for a moment: the kernel detaches
    // a mask from a replaced name just after the new name is in place, so
    // a read right then can still meet the mask.
    let settle = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        let outcome = read_file(attack, path);
        if outcome.0.verdict == Verdict::Succeeded || std::time::Instant::now() > settle {
            return outcome;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `read-files PATH…`: read every path; any canary is an escape.
pub fn read_files(attack: &str, paths: &[String]) -> Outcome {
    let mut hits = Vec::new();
    let mut first_error = None;
    for path in paths {
        match fs::read(path) {
            Ok(bytes) if has_canary(&bytes) => hits.push(path.clone()),
            Ok(_) => {}
            Err(e) => {
                first_error.get_or_insert(io_errno(&e));
            }
        }
    }
    if !hits.is_empty() {
        return Outcome::succeeded(attack, format!("canary read from: {}", hits.join(", ")));
    }
    match first_error {
        Some(e) => Outcome::failed(
            attack,
            &format!("read {} files", paths.len()),
            e,
            READ_DENIED,
        ),
        None => Outcome::blocked_plain(
            attack,
            format!("{} files read, no canary (masked)", paths.len()),
        ),
    }
}

/// `sendfile-file PATH`: copy a secret in the kernel (sendfile into a pipe).
pub fn sendfile_file(attack: &str, path: &str) -> Outcome {
    let file = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) => return Outcome::failed(attack, "open", io_errno(&e), READ_DENIED),
    };
    let (rd, wr) = match nix::unistd::pipe() {
        Ok(p) => p,
        Err(e) => return Outcome::unexpected(attack, Some(e), "pipe"),
    };
    match nix::sys::sendfile::sendfile(&wr, &file, None, 4096) {
        Ok(_) => {}
        Err(e) => return Outcome::failed(attack, "sendfile", e, READ_DENIED),
    }
    drop(wr);
    let mut buf = Vec::new();
    if let Err(e) = fs::File::from(rd).read_to_end(&mut buf) {
        return Outcome::unexpected(attack, Some(io_errno(&e)), "read pipe");
    }
    if has_canary(&buf) {
        Outcome::succeeded(attack, "sendfile copied a canary")
    } else {
        Outcome::blocked_plain(
            attack,
            format!("sendfile copied {} bytes, no canary", buf.len()),
        )
    }
}

/// `read-tree DIR`: the generic "grep -r" payload over a directory.
pub fn read_tree(attack: &str, dir: &str) -> Outcome {
    let mut stats = TreeStats::default();
    walk(Path::new(dir), 0, &mut stats);
    if !stats.hits.is_empty() {
        return Outcome::succeeded(
            attack,
            format!(
                "{} of {} files held a canary: {}",
                stats.hits.len(),
                stats.files,
                stats.hits.join(", ")
            ),
        );
    }
    match stats.first_error {
        Some(e) if stats.files == 0 => Outcome::failed(attack, "walk", e, READ_DENIED),
        _ => Outcome::blocked_plain(
            attack,
            format!(
                "{} files read, {} denied, no canary",
                stats.files, stats.denied
            ),
        ),
    }
}

#[derive(Default)]
struct TreeStats {
    files: usize,
    /// Paths (not contents) of files that held a canary.
    hits: Vec<String>,
    denied: usize,
    first_error: Option<Errno>,
}

fn walk(dir: &Path, depth: usize, stats: &mut TreeStats) {
    if depth > 12 {
        return;
    }
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            stats.denied += 1;
            stats.first_error.get_or_insert(io_errno(&e));
            return;
        }
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => walk(&path, depth + 1, stats),
            Ok(t) if t.is_file() => match fs::read(&path) {
                Ok(bytes) => {
                    stats.files += 1;
                    if has_canary(&bytes) {
                        stats.hits.push(path.display().to_string());
                    }
                }
                Err(e) => {
                    stats.denied += 1;
                    stats.first_error.get_or_insert(io_errno(&e));
                }
            },
            _ => {}
        }
    }
}

/// `copy-to-ws SRC DST`: copy a secret into the workspace (the result channel).
pub fn copy_to_ws(attack: &str, src: &str, dst: &str) -> Outcome {
    match fs::copy(src, dst) {
        Ok(_) => read_file(attack, dst),
        Err(e) => Outcome::failed(attack, "copy", io_errno(&e), READ_DENIED),
    }
}

/// `symlink-read TARGET LINK`: plant a symlink to a secret, read through it.
pub fn symlink_read(attack: &str, target: &str, link: &str) -> Outcome {
    if let Err(e) = symlink(target, link) {
        return Outcome::failed(attack, "symlink", io_errno(&e), WRITE_DENIED);
    }
    read_file(attack, link)
}

/// `hardlink-read TARGET LINK`: hardlink a secret into the workspace, read it.
pub fn hardlink_read(attack: &str, target: &str, link: &str) -> Outcome {
    if let Err(e) = fs::hard_link(target, link) {
        let mut allowed = READ_DENIED.to_vec();
        allowed.extend_from_slice(WRITE_DENIED);
        return Outcome::failed(attack, "link", io_errno(&e), &allowed);
    }
    read_file(attack, link)
}

/// `write-file MODE PATH`: create, append, truncate or create-with-parents.
pub fn write_file(attack: &str, mode: &str, path: &str) -> Outcome {
    let mut opts = fs::OpenOptions::new();
    opts.write(true);
    match mode {
        "create" => opts.create(true),
        "append" => opts.append(true),
        "truncate" => opts.truncate(true),
        "mkdirs" => {
            if let Some(parent) = Path::new(path).parent()
                && let Err(e) = fs::create_dir_all(parent)
            {
                return Outcome::failed(attack, "mkdir -p", io_errno(&e), WRITE_DENIED);
            }
            opts.create(true)
        }
        other => return Outcome::unexpected(attack, None, format!("unknown write mode {other}")),
    };
    let result = opts
        .mode(0o644)
        .open(path)
        .and_then(|mut f| f.write_all(PERSIST_MARK));
    match result {
        Ok(()) => Outcome::succeeded(attack, format!("{mode} write accepted")),
        Err(e) => Outcome::failed(attack, mode, io_errno(&e), WRITE_DENIED),
    }
}

/// `rename-over STAGING DST`: write a file where writes are allowed, rename it over DST.
pub fn rename_over(attack: &str, staging: &str, dst: &str) -> Outcome {
    if let Err(e) = fs::write(staging, PERSIST_MARK) {
        return Outcome::unexpected(attack, Some(io_errno(&e)), "write staging file");
    }
    match fs::rename(staging, dst) {
        Ok(()) => Outcome::succeeded(attack, "rename over the target accepted"),
        Err(e) => Outcome::failed(attack, "rename", io_errno(&e), WRITE_DENIED),
    }
}

/// `rename-away PATH NEW`: move a protected path (or its parent) out of the way.
pub fn rename_away(attack: &str, path: &str, new: &str) -> Outcome {
    match fs::rename(path, new) {
        Ok(()) => Outcome::succeeded(attack, "protected path renamed"),
        Err(e) => Outcome::failed(attack, "rename", io_errno(&e), WRITE_DENIED),
    }
}

/// `unlink-recreate PATH`: delete a protected file, then create it again.
pub fn unlink_recreate(attack: &str, path: &str) -> Outcome {
    // A directory is removed as a tree; any other refusal is the verdict.
    let removed = match fs::remove_file(path) {
        Err(e) if io_errno(&e) == Errno::EISDIR => fs::remove_dir_all(path),
        other => other,
    };
    if let Err(e) = removed {
        return Outcome::failed(attack, "unlink", io_errno(&e), WRITE_DENIED);
    }
    write_file(attack, "create", path)
}

/// `symlink-parent DIR TARGET NAME`: replace DIR by a symlink to TARGET, write DIR/NAME.
pub fn symlink_parent(attack: &str, dir: &str, target: &str, name: &str) -> Outcome {
    let gone = fs::remove_dir_all(dir).or_else(|_| fs::remove_file(dir));
    match gone {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Outcome::failed(attack, "remove parent", io_errno(&e), WRITE_DENIED),
    }
    if let Err(e) = symlink(target, dir) {
        return Outcome::failed(attack, "symlink parent", io_errno(&e), WRITE_DENIED);
    }
    write_file(attack, "create", &format!("{dir}/{name}"))
}

/// `metadata OP PATH`: chmod, utime, truncate or set an xattr outside the roots.
pub fn metadata(attack: &str, op: &str, path: &str) -> Outcome {
    let res: Result<(), Errno> = match op {
        "chmod" => {
            fs::set_permissions(path, fs::Permissions::from_mode(0o777)).map_err(|e| io_errno(&e))
        }
        "utime" => nix::sys::stat::utimensat(
            nix::fcntl::AT_FDCWD,
            path,
            &nix::sys::time::TimeSpec::new(1, 0),
            &nix::sys::time::TimeSpec::new(1, 0),
            nix::sys::stat::UtimensatFlags::FollowSymlink,
        ),
        "truncate" => nix::unistd::truncate(path, 0),
        other => return Outcome::unexpected(attack, None, format!("unknown metadata op {other}")),
    };
    match res {
        Ok(()) => Outcome::succeeded(attack, format!("{op} accepted")),
        Err(e) => Outcome::failed(attack, op, e, WRITE_DENIED),
    }
}

/// `open-write PATH`: open for writing (e.g. `/proc/1/exe`, the policy file).
pub fn open_write(attack: &str, path: &str) -> Outcome {
    match fs::OpenOptions::new().write(true).open(path) {
        Ok(_) => Outcome::succeeded(attack, "opened for writing"),
        Err(e) => Outcome::failed(attack, "open O_WRONLY", io_errno(&e), WRITE_DENIED),
    }
}

/// `mountinfo-scan`: look for canary content in mount tables (A8, informational).
pub fn mountinfo_scan(attack: &str) -> Outcome {
    let mut seen = 0;
    for path in ["/proc/self/mountinfo", "/proc/mounts", "/proc/self/mounts"] {
        if let Ok(bytes) = fs::read(path) {
            seen += 1;
            if has_canary(&bytes) {
                return Outcome::succeeded(attack, format!("{path} holds a canary"));
            }
        }
    }
    Outcome::blocked_plain(attack, format!("{seen} mount tables read, no canary"))
}
