//! Where the decision log goes, and the thread that writes it.
//!
//! `--log-json` names a regular file (appended), a FIFO that has a reader,
//! or the supervisor's stderr (`-`, `/dev/stderr`, `/dev/fd/2`,
//! `/proc/self/fd/2`: the names are recognised, not followed, so the
//! no-symlink rule for files still holds). stdout is refused: it belongs to
//! the jailed command (for an MCP server, its protocol stream).
//!
//! Lines go through a bounded queue to one writer thread, so a slow FIFO
//! reader or a full disk never stalls a proxy thread; lines that do not fit
//! the queue are counted and reported. The writer stops at the size cap
//! after a last `log_capped` line and one stderr line: a jailed program
//! cannot fill the disk through the log.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::Duration;

/// Lines waiting for the writer; more are dropped (and counted).
const QUEUE: usize = 4096;
/// How long the exit flush waits for a slow reader.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// Names that mean the supervisor's stderr.
const STDERR_NAMES: &[&str] = &["-", "/dev/stderr", "/dev/fd/2", "/proc/self/fd/2"];
/// Names that mean stdout, which is the command's.
const STDOUT_NAMES: &[&str] = &["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"];

enum Out {
    Stderr,
    File(File),
}

impl Out {
    fn write_line(&mut self, line: &[u8]) -> std::io::Result<()> {
        match self {
            Out::Stderr => std::io::stderr().lock().write_all(line),
            Out::File(f) => f.write_all(line),
        }
    }
}

/// Open `path` as a log target (see the module docs).
fn open(path: &Path) -> std::io::Result<Out> {
    use nix::fcntl::OFlag;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let text = path.to_string_lossy();
    if STDERR_NAMES.contains(&text.as_ref()) {
        return Ok(Out::Stderr);
    }
    if STDOUT_NAMES.contains(&text.as_ref()) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "stdout belongs to the jailed command; use - or /dev/stderr",
        ));
    }
    // A planted symlink is never followed; O_NONBLOCK makes a FIFO without
    // a reader fail at once (ENXIO) instead of blocking (attack B5).
    let file = File::options()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits())
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(nix::errno::Errno::ENXIO as i32) {
                std::io::Error::new(e.kind(), "a FIFO with no reader")
            } else {
                e
            }
        })?;
    let kind = file.metadata()?.file_type();
    if kind.is_fifo() {
        // The reader exists; blocking writes now only hold up the writer
        // thread, never the proxy.
        let flags = OFlag::from_bits_truncate(nix::fcntl::fcntl(&file, nix::fcntl::F_GETFL)?);
        nix::fcntl::fcntl(&file, nix::fcntl::F_SETFL(flags - OFlag::O_NONBLOCK))?;
    } else if !kind.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file or FIFO",
        ));
    }
    Ok(Out::File(file))
}

enum Msg {
    Line(Vec<u8>),
    Flush(SyncSender<()>),
}

/// The writing end of the log, shared by every connection.
#[derive(Debug)]
pub(crate) struct Sink {
    tx: SyncSender<Msg>,
    dropped: Arc<AtomicU64>,
}

impl Sink {
    /// Open `path` and start the writer; `max_bytes` caps what it writes.
    pub(crate) fn open(path: &Path, max_bytes: u64) -> std::io::Result<Self> {
        let out = open(path)?;
        let (tx, rx) = sync_channel(QUEUE);
        let shown = path.display().to_string();
        std::thread::Builder::new()
            .name("oajail-log".into())
            .spawn(move || writer(out, rx, max_bytes, &shown))?;
        Ok(Sink {
            tx,
            dropped: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Queue one line; never blocks.
    pub(crate) fn send(&self, line: Vec<u8>) {
        if let Err(TrySendError::Full(_)) = self.tx.try_send(Msg::Line(line)) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Lines dropped because the writer was behind.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Wait (boundedly) until every queued line is written.
    pub(crate) fn flush(&self) {
        let (ack, done) = sync_channel(1);
        if self.tx.try_send(Msg::Flush(ack)).is_ok() {
            let _ = done.recv_timeout(FLUSH_WAIT);
        }
    }
}

fn writer(mut out: Out, rx: Receiver<Msg>, max_bytes: u64, shown: &str) {
    let mut written: u64 = 0;
    let mut capped = false;
    for msg in rx {
        let line = match msg {
            Msg::Flush(ack) => {
                if let Out::File(f) = &mut out {
                    let _ = f.flush();
                }
                let _ = ack.send(());
                continue;
            }
            Msg::Line(line) => line,
        };
        if capped {
            continue;
        }
        if written + line.len() as u64 > max_bytes {
            capped = true;
            let note = format!(
                "{{\"event\":\"log_capped\",\"limitBytes\":{max_bytes},\"message\":\"decision log size cap reached; later decisions are only counted in the exit summary\"}}\n"
            );
            let _ = out.write_line(note.as_bytes());
            eprintln!(
                "oajail: the decision log {shown} reached its {max_bytes}-byte cap; later decisions are not written (the exit summary still counts refusals)"
            );
            continue;
        }
        // A full disk or a reader that went away must not stop the proxy.
        if out.write_line(&line).is_ok() {
            written += line.len() as u64;
        }
    }
}
