//! The caller's terminal during an interactive run: the jail's output and
//! oajail's own lines (refusals, warnings, the proxy's lines) through one
//! writer, so that a line of oajail's never lands inside a line of the
//! command's.
//!
//! The terminal is in raw mode while the relay runs (`pty.rs`), so a bare
//! `\n` would not return the cursor: every line of oajail's ends in
//! `\r\n`. A line waits for the command's output to reach a line start;
//! when the command leaves a line open longer than [`HOLD`] (a prompt, a
//! progress bar), the line goes out after a `\r\n` of its own. While the
//! command shows its alternate screen (a full-screen program), lines wait
//! until it leaves it, or until the relay ends.
//!
//! The supervisor's stderr is moved into a pipe for the relay's duration
//! ([`Capture`]): whatever writes it (the proxy's refusal lines, the
//! refusals pid 1 reports, warnings) goes through here, and the
//! supervisor's descriptor 2 is put back after the terminal leaves raw
//! mode, so a line written in between is never a bare `\n` on a raw
//! terminal. Lines are written whole ([`say`]).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a line of oajail's waits for the command to finish its line.
const HOLD: Duration = Duration::from_millis(250);

/// Escape sequences that switch the alternate screen on and off (xterm's
/// 1049, 1047 and 47).
const ALT_ON: &[&[u8]] = &[b"\x1b[?1049h", b"\x1b[?1047h", b"\x1b[?47h"];
const ALT_OFF: &[&[u8]] = &[b"\x1b[?1049l", b"\x1b[?1047l", b"\x1b[?47l"];

/// The terminal's output, shared by the relay and oajail's own lines.
#[derive(Debug)]
pub(crate) struct Screen {
    state: Mutex<State>,
    /// [`HOLD`], except in tests.
    hold: Duration,
}

#[derive(Debug)]
struct State {
    out: File,
    /// The last byte the command wrote ended a line (or nothing was written).
    at_line_start: bool,
    /// The command shows its alternate screen.
    alt: bool,
    /// oajail's lines not written yet, each ending in `\r\n`.
    pending: Vec<u8>,
    /// When the oldest of them arrived.
    since: Option<Instant>,
    /// The last bytes of the command's output, to find an escape sequence
    /// cut between two reads.
    tail: Vec<u8>,
    /// The command's output held back while a question is open
    /// (`prompt.rs`).
    held: Option<Vec<u8>>,
}

/// The most output held back during a question; more is shown anyway.
const HELD_MAX: usize = 4 << 20;

impl Screen {
    pub(crate) fn new(out: File) -> Self {
        Self::holding(out, HOLD)
    }

    fn holding(out: File, hold: Duration) -> Self {
        Screen {
            hold,
            state: Mutex::new(State {
                out,
                at_line_start: true,
                alt: false,
                pending: Vec::new(),
                since: None,
                tail: Vec::new(),
                held: None,
            }),
        }
    }

    /// The command's output: written as it comes (held back while a
    /// question is open), with waiting lines of oajail's put after its
    /// first line end.
    pub(crate) fn output(&self, chunk: &[u8]) -> io::Result<()> {
        let mut s = self.lock();
        if let Some(held) = s.held.as_mut()
            && held.len() + chunk.len() <= HELD_MAX
        {
            held.extend_from_slice(chunk);
            return Ok(());
        }
        s.show(chunk)
    }

    /// A question: on a line of its own, with the command's output held
    /// back until [`Screen::release`].
    pub(crate) fn hold(&self, question: &[u8]) {
        let mut s = self.lock();
        let _ = s.write_pending();
        let lead: &[u8] = if s.at_line_start { b"" } else { b"\r\n" };
        let _ = (s.out.write_all(lead))
            .and_then(|()| s.out.write_all(question))
            .and_then(|()| s.out.flush());
        s.at_line_start = false;
        s.held.get_or_insert_with(Vec::new);
    }

    /// The question's answer (echoed), then the output held back.
    pub(crate) fn release(&self, echo: &[u8]) {
        let mut s = self.lock();
        let _ = s
            .out
            .write_all(echo)
            .and_then(|()| s.out.write_all(b"\r\n"));
        s.at_line_start = true;
        if let Some(held) = s.held.take() {
            let _ = s.show(&held);
        }
        let _ = s.out.flush();
    }

    /// One line of oajail's (without its line end).
    pub(crate) fn note(&self, line: &[u8]) {
        let mut s = self.lock();
        s.pending.extend_from_slice(line);
        s.pending.extend_from_slice(b"\r\n");
        s.since.get_or_insert_with(Instant::now);
        if s.at_line_start && !s.alt {
            let _ = s.write_pending();
        }
    }

    /// Write the lines that waited long enough for a line end.
    pub(crate) fn tick(&self) {
        let mut s = self.lock();
        let due = s.since.is_some_and(|t| t.elapsed() >= self.hold);
        if due && !s.alt {
            let _ = s.write_pending();
        }
    }

    /// The relay ends: write whatever waits.
    pub(crate) fn finish(&self) {
        let _ = self.lock().write_pending();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panicking writer leaves plain bytes behind, nothing to repair.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl State {
    /// Write the command's output, with waiting lines of oajail's put
    /// after its first line end.
    fn show(&mut self, chunk: &[u8]) -> io::Result<()> {
        self.track_alt(chunk);
        let cut = (!self.pending.is_empty() && !self.alt)
            .then(|| chunk.iter().position(|b| *b == b'\n'))
            .flatten();
        match cut {
            Some(i) => {
                self.out.write_all(&chunk[..=i])?;
                self.at_line_start = true;
                self.write_pending()?;
                self.out.write_all(&chunk[i + 1..])?;
            }
            None => self.out.write_all(chunk)?,
        }
        if let Some(last) = chunk.last() {
            self.at_line_start = *last == b'\n';
        }
        self.out.flush()
    }

    /// Waiting lines, on a line of their own.
    fn write_pending(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        if !self.at_line_start {
            self.out.write_all(b"\r\n")?;
        }
        let lines = std::mem::take(&mut self.pending);
        self.since = None;
        self.out.write_all(&lines)?;
        self.at_line_start = true;
        self.out.flush()
    }

    /// Follow the alternate screen through the last switch in `chunk`.
    fn track_alt(&mut self, chunk: &[u8]) {
        let mut seen = std::mem::take(&mut self.tail);
        seen.extend_from_slice(chunk);
        let last = |seqs: &[&[u8]]| {
            seqs.iter()
                .filter_map(|q| seen.windows(q.len()).rposition(|w| w == *q))
                .max()
        };
        match (last(ALT_ON), last(ALT_OFF)) {
            (Some(on), Some(off)) => self.alt = on > off,
            (Some(_), None) => self.alt = true,
            (None, Some(_)) => self.alt = false,
            (None, None) => {}
        }
        let keep = seen.len().saturating_sub(8);
        self.tail = seen.split_off(keep);
    }
}

/// One line of oajail's on stderr, in one write. `eprintln!` writes a line
/// in pieces (the prefix, each argument, the line end), and a line cut
/// between two writes can straddle the moment [`Capture::stop`] puts the
/// terminal back: its first piece then ends the relay as a line of its own
/// (`oajail: ` alone) and the rest lands below it. A line of at most
/// `PIPE_BUF` bytes in one write also never mixes with another process's.
pub fn say(line: std::fmt::Arguments<'_>) {
    let mut text = line.to_string();
    text.push('\n');
    let _ = io::stderr().lock().write_all(text.as_bytes());
}

/// The supervisor's stderr, moved into a pipe whose lines go to the
/// [`Screen`] while the relay runs.
#[derive(Debug)]
pub(crate) struct Capture {
    /// The supervisor's descriptor 2 as it was.
    saved: OwnedFd,
    done: mpsc::Receiver<()>,
}

impl Capture {
    /// Move descriptor 2 into a pipe read by a thread of its own.
    pub(crate) fn start(screen: Arc<Screen>) -> io::Result<Capture> {
        let stderr = rustix::stdio::stderr();
        let saved = rustix::io::fcntl_dupfd_cloexec(stderr, 3)?;
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let (done_tx, done) = mpsc::channel();
        std::thread::Builder::new()
            .name("oajail-tty-notes".into())
            .spawn(move || {
                relay_lines(File::from(read), &screen);
                screen.finish();
                let _ = done_tx.send(());
            })?;
        // The pipe's own write end closes when `write` drops: descriptor 2
        // is then its only writer.
        nix::unistd::dup2_stderr(write.as_fd())?;
        Ok(Capture { saved, done })
    }

    /// Put descriptor 2 back; the pipe then has no writer, and the thread
    /// writes what is left before it ends (waited for at most `limit`).
    pub(crate) fn stop(self, limit: Duration) {
        let _ = nix::unistd::dup2_stderr(self.saved.as_fd());
        let _ = self.done.recv_timeout(limit);
    }
}

/// Lines from `pipe` to the screen; a tick every [`HOLD`] / 2 while idle.
fn relay_lines(mut pipe: File, screen: &Screen) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut partial = Vec::new();
    let mut buf = [0u8; 4096];
    let tick = PollTimeout::try_from(HOLD.as_millis() as i32 / 2).unwrap_or(PollTimeout::MAX);
    loop {
        let mut fds = [PollFd::new(pipe.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, tick) {
            Ok(0) => {
                screen.tick();
                continue;
            }
            Ok(_) | Err(nix::Error::EINTR) => {}
            Err(_) => break,
        }
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                partial.extend_from_slice(&buf[..n]);
                while let Some(i) = partial.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = partial.drain(..=i).collect();
                    screen.note(line.strip_suffix(b"\n").unwrap_or(&line));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
        screen.tick();
    }
    if !partial.is_empty() {
        screen.note(&partial);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Seek;

    /// A screen whose open lines are never broken by a tick.
    fn screen() -> (Screen, File) {
        let file = tempfile();
        let hour = Duration::from_secs(3600);
        (Screen::holding(file.try_clone().unwrap(), hour), file)
    }

    fn tempfile() -> File {
        // An anonymous file: nothing is left on disk.
        let fd = nix::sys::memfd::memfd_create(c"screen-test", nix::sys::memfd::MFdFlags::empty())
            .unwrap();
        File::from(fd)
    }

    fn text(mut f: &File) -> String {
        let mut s = String::new();
        f.rewind().unwrap();
        f.read_to_string(&mut s).unwrap();
        s
    }

    #[test]
    fn a_note_waits_for_the_end_of_the_commands_line() {
        let (s, f) = screen();
        s.output(b"response 4").unwrap();
        s.note(b"oajail: refused x");
        s.output(b"03\r\nnext").unwrap();
        assert_eq!(text(&f), "response 403\r\noajail: refused x\r\nnext");
    }

    #[test]
    fn at_a_line_start_a_note_goes_out_at_once() {
        let (s, f) = screen();
        s.output(b"done\r\n").unwrap();
        s.note(b"one");
        s.note(b"two");
        assert_eq!(text(&f), "done\r\none\r\ntwo\r\n");
    }

    #[test]
    fn an_open_line_is_broken_after_the_hold() {
        let (s, f) = screen();
        s.output(b"$ ").unwrap();
        s.note(b"late");
        s.tick();
        assert_eq!(text(&f), "$ ");
        let file = tempfile();
        let s = Screen::holding(file.try_clone().unwrap(), Duration::ZERO);
        s.output(b"$ ").unwrap();
        s.note(b"late");
        s.tick();
        assert_eq!(text(&file), "$ \r\nlate\r\n");
    }

    #[test]
    fn notes_wait_while_the_alternate_screen_shows() {
        let f = tempfile();
        let s = Screen::holding(f.try_clone().unwrap(), Duration::ZERO);
        s.output(b"\x1b[?10").unwrap();
        s.output(b"49h full screen\r\n").unwrap();
        s.note(b"held");
        s.output(b"more\r\n").unwrap();
        s.tick();
        assert!(!text(&f).contains("held"), "{:?}", text(&f));
        s.output(b"\x1b[?1049l").unwrap();
        s.tick();
        assert!(
            text(&f).ends_with("\x1b[?1049l\r\nheld\r\n"),
            "{:?}",
            text(&f)
        );
    }

    #[test]
    fn finish_writes_what_waits() {
        let (s, f) = screen();
        s.output(b"partial").unwrap();
        s.note(b"last");
        s.finish();
        assert_eq!(text(&f), "partial\r\nlast\r\n");
    }
}
