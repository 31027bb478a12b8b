//! Questions to the user on the caller's terminal during an interactive
//! run (`--ask`), which the jailed command can neither read nor answer.
//!
//! The command's terminal is the jail's own pty; the caller's terminal is
//! reached only through the relay (`pty.rs`). While a question is open the
//! relay's input thread hands the keys typed to the question instead of
//! the pty, and the command's output is held back (so the question stays
//! on screen), then shown once it is answered. So the question and its
//! answer pass only through the supervisor: nothing of the jail writes to
//! or reads from the caller's terminal.

use crate::screen::Screen;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One read of keys, with the moment it was read.
type Keys = (Instant, Vec<u8>);

/// Where the relay's input goes: the pty, or an open question.
pub(crate) type Divert = Arc<Mutex<Option<mpsc::Sender<Keys>>>>;

/// Asks the user at the caller's terminal (interactive runs only).
#[derive(Clone, Debug)]
pub struct Prompter {
    screen: Arc<Screen>,
    divert: Divert,
    /// One question at a time.
    turn: Arc<Mutex<()>>,
}

/// Ctrl-C, Ctrl-D and Escape answer "no".
const CANCEL: &[u8] = &[0x03, 0x04, 0x1b];

impl Prompter {
    pub(crate) fn new(screen: Arc<Screen>, divert: Divert) -> Self {
        Prompter {
            screen,
            divert,
            turn: Arc::new(Mutex::new(())),
        }
    }

    /// Show `question` and wait (at most `limit`) for one of `keys`
    /// (lower case); `None` for no answer, Ctrl-C, Ctrl-D or Escape.
    pub fn ask(&self, question: &str, keys: &str, limit: Duration) -> Option<char> {
        let _turn = self.turn.lock().unwrap_or_else(|e| e.into_inner());
        let (tx, rx) = mpsc::channel::<Keys>();
        // Keys are taken from the jail before the question is shown: a key
        // typed at the question, however fast, can never reach the command.
        // A key read before the question started out was typed before it:
        // it is dropped, never taken as the answer. (The mark is taken
        // before the write, not after: a key answering at once may be read
        // before this thread runs again.)
        *self.lock_divert() = Some(tx);
        let shown = Instant::now();
        self.screen.hold(question.as_bytes());
        let deadline = shown + limit;
        let answer = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok((read_at, bytes)) = rx.recv_timeout(left) else {
                break None;
            };
            if read_at < shown {
                continue;
            }
            if bytes.iter().any(|b| CANCEL.contains(b)) {
                break None;
            }
            let pick = (bytes.iter())
                .map(|b| char::from(*b).to_ascii_lowercase())
                .find(|c| keys.contains(*c));
            if pick.is_some() {
                break pick;
            }
        };
        *self.lock_divert() = None;
        let echo = answer.map_or_else(|| "(no answer: refused)".to_owned(), String::from);
        self.screen.release(echo.as_bytes());
        answer
    }

    fn lock_divert(&self) -> std::sync::MutexGuard<'_, Option<mpsc::Sender<Keys>>> {
        self.divert.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The relay's input: keys go to the open question, if any, else to `to`.
pub(crate) fn relay_input(
    mut from: impl std::io::Read,
    mut to: impl std::io::Write,
    divert: &Divert,
) {
    let mut buf = [0u8; 8192];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        let read_at = Instant::now();
        let question = divert.lock().ok().and_then(|d| d.clone());
        match question {
            Some(tx) => {
                let _ = tx.send((read_at, buf[..n].to_vec()));
            }
            None => {
                if to.write_all(&buf[..n]).and_then(|()| to.flush()).is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek};

    fn memfile() -> std::fs::File {
        let fd = nix::sys::memfd::memfd_create(c"prompt-test", nix::sys::memfd::MFdFlags::empty())
            .unwrap();
        std::fs::File::from(fd)
    }

    fn text(mut f: &std::fs::File) -> String {
        let mut s = String::new();
        f.rewind().unwrap();
        f.read_to_string(&mut s).unwrap();
        s
    }

    #[test]
    fn keys_typed_during_a_question_answer_it_and_never_reach_the_jail() {
        let out = memfile();
        let screen = Arc::new(Screen::new(out.try_clone().unwrap()));
        let divert: Divert = Arc::default();
        let prompter = Prompter::new(Arc::clone(&screen), Arc::clone(&divert));
        let (mut keys, keyboard) = std::os::unix::net::UnixStream::pair().unwrap();
        let (jail_side, mut jail_reads) = std::os::unix::net::UnixStream::pair().unwrap();
        let relay = {
            let divert = Arc::clone(&divert);
            std::thread::spawn(move || relay_input(keyboard, jail_side, &divert))
        };
        screen.output(b"$ make\r\nbuilding").unwrap();
        let asked = {
            let p = prompter.clone();
            std::thread::spawn(move || {
                p.ask("oajail: allow x? [o/d] ", "od", Duration::from_secs(60))
            })
        };
        // Output while the question is open is held back.
        while !text(&out).contains("allow x?") {
            std::thread::yield_now();
        }
        screen.output(b" more").unwrap();
        use std::io::Write;
        keys.write_all(b"zo").unwrap();
        assert_eq!(asked.join().unwrap(), Some('o'));
        keys.write_all(b"ls\r").unwrap();
        drop(keys);
        relay.join().unwrap();
        let mut got = String::new();
        jail_reads.read_to_string(&mut got).unwrap();
        assert_eq!(
            got, "ls\r",
            "only keys typed outside the question reach the jail"
        );
        assert_eq!(
            text(&out),
            "$ make\r\nbuilding\r\noajail: allow x? [o/d] o\r\n more"
        );
    }
}
