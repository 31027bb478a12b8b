//! Where the decision log goes, and the thread that writes it.
//!
//! `--log-json` names a regular file (appended), a FIFO that has a reader,
//! or the supervisor's stderr (`-`, `/dev/stderr`, `/dev/fd/2`,
//! `/proc/self/fd/2`: the names are recognised, not followed, so the
//! no-symlink rule for files still holds). stdout is refused: it belongs to
//! the jailed command (for an MCP server, its protocol stream).
//!
//! A regular file is written in place; stderr and a FIFO go through a
//! bounded queue to one writer thread, so a slow reader never stalls a
//! proxy thread; lines that do not fit the queue are counted and reported.
//! Writing stops at the size cap after a last `log_capped` line and one
//! stderr line: a jailed program cannot fill the disk through the log.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Lines waiting for the writer; more are dropped (and counted).
const QUEUE: usize = 4096;
/// How long the exit flush waits for a slow reader.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// Names that mean the supervisor's stderr.
const STDERR_NAMES: &[&str] = &["-", "/dev/stderr", "/dev/fd/2", "/proc/self/fd/2"];
/// Names that mean stdout, which is the command's.
const STDOUT_NAMES: &[&str] = &["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"];

#[derive(Debug)]
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
    use std::os::unix::fs::OpenOptionsExt;
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

pub(crate) enum Msg {
    Line(Vec<u8>),
    Flush(SyncSender<()>),
}

/// The writing end of the log, shared by every connection: a regular file
/// is written in place (one `write` per line under a lock, so a reader sees
/// a decision as soon as the client has its answer); stderr and a FIFO,
/// which can block on their reader, go through the writer thread.
#[derive(Debug)]
pub(crate) enum Sink {
    Direct(Mutex<Capped>),
    Queued {
        tx: SyncSender<Msg>,
        dropped: Arc<AtomicU64>,
    },
}

impl Sink {
    /// Open `path` as a log; `max_bytes` caps what is written.
    pub(crate) fn open(path: &Path, max_bytes: u64) -> std::io::Result<Self> {
        let out = open(path)?;
        let queued = match &out {
            Out::Stderr => true,
            Out::File(f) => f.metadata()?.file_type().is_fifo(),
        };
        let capped = Capped {
            out,
            written: 0,
            max_bytes,
            shown: path.display().to_string(),
        };
        if queued {
            Self::queued(capped)
        } else {
            Ok(Sink::Direct(Mutex::new(capped)))
        }
    }

    /// The live refusal lines' sink: stderr through the writer thread.
    pub(crate) fn stderr() -> std::io::Result<Self> {
        Self::queued(Capped {
            out: Out::Stderr,
            written: 0,
            max_bytes: u64::MAX,
            shown: "stderr".into(),
        })
    }

    fn queued(mut capped: Capped) -> std::io::Result<Self> {
        let (tx, rx) = sync_channel::<Msg>(QUEUE);
        std::thread::Builder::new()
            .name("oajail-log".into())
            .spawn(move || {
                for msg in rx {
                    match msg {
                        Msg::Line(line) => capped.write(&line),
                        Msg::Flush(ack) => {
                            let _ = ack.send(());
                        }
                    }
                }
            })?;
        Ok(Sink::Queued {
            tx,
            dropped: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Write or queue one line; never waits on a reader.
    pub(crate) fn send(&self, line: Vec<u8>) {
        match self {
            Sink::Direct(capped) => {
                if let Ok(mut c) = capped.lock() {
                    c.write(&line);
                }
            }
            Sink::Queued { tx, dropped } => {
                if let Err(TrySendError::Full(_)) = tx.try_send(Msg::Line(line)) {
                    dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Lines dropped because the writer was behind.
    pub(crate) fn dropped(&self) -> u64 {
        match self {
            Sink::Direct(_) => 0,
            Sink::Queued { dropped, .. } => dropped.load(Ordering::Relaxed),
        }
    }

    /// Wait (boundedly) until every queued line is written.
    pub(crate) fn flush(&self) {
        let Sink::Queued { tx, .. } = self else {
            return;
        };
        let (ack, done) = sync_channel(1);
        if tx.try_send(Msg::Flush(ack)).is_ok() {
            let _ = done.recv_timeout(FLUSH_WAIT);
        }
    }
}

/// A log output with its size cap.
#[derive(Debug)]
pub(crate) struct Capped {
    out: Out,
    written: u64,
    max_bytes: u64,
    shown: String,
}

impl Capped {
    fn write(&mut self, line: &[u8]) {
        if self.written > self.max_bytes {
            return;
        }
        if self.written + line.len() as u64 > self.max_bytes {
            // Past the cap for good: one last line in the log, one on stderr.
            self.written = self.max_bytes + 1;
            let note = format!(
                "{{\"event\":\"log_capped\",\"limitBytes\":{},\"message\":\"decision log size cap reached; later decisions are only counted in the exit summary\"}}\n",
                self.max_bytes
            );
            let _ = self.out.write_line(note.as_bytes());
            crate::log::say(format_args!(
                "oajail: the decision log {} reached its {}-byte cap; later decisions are not written (the exit summary still counts refusals)",
                self.shown, self.max_bytes
            ));
            return;
        }
        // A full disk or a reader that went away must not stop the proxy.
        if self.out.write_line(line).is_ok() {
            self.written += line.len() as u64;
        }
    }
}
