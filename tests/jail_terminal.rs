//! An interactive run on a real terminal (tmux): the command gets a pty of
//! its own, so a shell in the jail has job control, full-screen programs
//! see the window size, and the caller's terminal is back as it was after
//! the run, a `kill -9` of the command included. Runs as root and as the
//! unprivileged user (tmux and ps come with `.ci/install-deps`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use support::*;

/// A tmux server of the test's own (its socket in a scratch dir), running
/// one window with `script` in it.
struct Tmux {
    dir: PathBuf,
}

impl Tmux {
    /// Start `script` (sh) in a detached 100x30 session. The script runs
    /// outside the jail: it records the terminal state around oajail.
    fn start(tag: &str, script: &str) -> Tmux {
        let dir = scratch_home(tag);
        let path = dir.join("run.sh");
        std::fs::write(&path, script).unwrap();
        let t = Tmux { dir };
        let o = t.tmux(&[
            "new-session",
            "-d",
            "-x",
            "100",
            "-y",
            "30",
            "sh",
            path.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "tmux: {}", err(&o));
        t
    }

    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(self.dir.join("sock"))
            .args(args)
            .env("HOME", &self.dir)
            .env_remove("TMUX")
            .output()
            .expect("tmux (installed by .ci/install-deps)")
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend(keys);
        assert!(self.tmux(&args).status.success());
    }

    fn line(&self, text: &str) {
        self.keys(&[text, "Enter"]);
    }

    fn screen(&self) -> String {
        out(&self.tmux(&["capture-pane", "-p", "-t", "0", "-S", "-200"]))
    }

    /// Wait (up to 30 s: the machine is shared) until the screen satisfies
    /// `cond`; the screen when it does, a panic with it when it never does.
    fn wait_for(&self, what: &str, cond: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if cond(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "waiting for {what}; screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Press `key` every half second until the screen satisfies `cond`
    /// (the key may arrive before the job it is meant for has started:
    /// the machine is shared; at the shell's prompt it does no harm).
    fn press_until(&self, key: &str, what: &str, cond: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            self.keys(&[key]);
            std::thread::sleep(Duration::from_millis(500));
            let screen = self.screen();
            if cond(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "waiting for {what}; screen:\n{screen}"
            );
        }
    }

    fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name)).unwrap_or_default()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A script that records `stty -g` before and after `oajail ARGS`, and the
/// exit status, in files of `dir`; then waits so the pane stays readable.
fn around_oajail(dir: &Path, args: &str) -> String {
    let d = dir.display();
    format!(
        "cd {d}\nexport HOME={d}\nunset OAJAIL_SETTINGS\n\
         stty -g > {d}/before\n{OAJAIL} {args}\necho \"EXIT=$?\" > {d}/status\n\
         stty -g > {d}/after\necho DONE\nsleep 600\n"
    )
}

fn start(tag: &str, args: &str) -> Tmux {
    let dir = scratch_home(tag);
    Tmux::start(tag, &around_oajail(&dir, args))
}

fn assert_restored(t: &Tmux) {
    t.wait_for("the run to end", |s| s.contains("DONE"));
    let (before, after) = (t.file("before"), t.file("after"));
    assert!(!before.trim().is_empty(), "no stty -g recorded");
    assert_eq!(before, after, "the terminal was not restored");
}

/// `sleep 100`, Ctrl-Z, `jobs`, `fg`, Ctrl-C, `exit 3` in bash: the stop
/// and the interrupt act on the jail's foreground job only, and the exit
/// status passes through.
#[test]
fn bash_in_the_jail_has_job_control() {
    let t = start("jobs", "-- bash --norc");
    t.line("PS1='jail$ '");
    t.wait_for("the prompt", |s| s.contains("jail$ "));
    // tpgid: the foreground group of the controlling terminal (-1: none).
    t.line("echo pg=$(ps -o pgid= -p $$ | tr -d ' ') fg=$(ps -o tpgid= -p $$ | tr -d ' ')");
    let s = t.wait_for("the terminal line", |s| s.contains("\npg="));
    let line = s.lines().find(|l| l.starts_with("pg=")).unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    // The shell leads the foreground group of a terminal it controls.
    assert_eq!(
        words[0].trim_start_matches("pg="),
        words[1].trim_start_matches("fg="),
        "{line}"
    );
    assert_ne!(words[1], "fg=-1", "no controlling terminal: {line}");
    // The pty lives on the jail's own devpts: ttyname works.
    t.line("echo name=$(tty)");
    t.wait_for("the terminal's name", |s| s.contains("\nname=/dev/pts/0"));
    t.line("sleep 100");
    // Ctrl-Z flushes the terminal's pending input: press it only once the
    // shell has read the line (readline echoes it then).
    t.wait_for("the shell to read the line", |s| {
        s.contains("jail$ sleep 100")
    });
    t.press_until("C-z", "the stopped job", |s| s.contains("Stopped"));
    t.line("jobs");
    t.wait_for("jobs to list it", |s| {
        s.lines().filter(|l| l.contains("sleep 100")).count() >= 3
    });
    let prompts = |s: &str| s.matches("jail$ ").count();
    let before = prompts(&t.screen());
    t.line("fg");
    // fg echoes the job's command line before it continues the job.
    t.wait_for("fg to take the job", |s| {
        s.lines().filter(|l| l.trim() == "sleep 100").count() >= 1
    });
    // A prompt within 30 s: the 100 s job was interrupted, not the shell.
    t.press_until("C-c", "the prompt after the interrupt", |s| {
        prompts(s) > before
    });
    t.line("echo after=$? jobs=$(jobs | wc -l)");
    t.wait_for("the interrupted job's status", |s| {
        s.contains("after=130 jobs=0")
    });
    t.line("exit 3");
    assert_restored(&t);
    assert_eq!(t.file("status").trim(), "EXIT=3");
}

/// The command turns the terminal raw, switches to the alternate screen and
/// is killed with SIGKILL: the caller's terminal is as before.
#[test]
fn terminal_is_restored_after_kill_9_of_the_command() {
    let t = start("kill9", "-- bash --norc");
    t.line("stty raw -echo -isig; printf '\\033[?1049h'; kill -9 $$");
    assert_restored(&t);
    assert_eq!(t.file("status").trim(), "EXIT=137");
}

/// A full-screen program sees the terminal's size, and a resize of the
/// caller's window reaches it (SIGWINCH through the pty); Ctrl-D is the
/// end of input.
#[test]
fn window_size_and_end_of_input_reach_the_command() {
    let probe = "import signal,shutil,sys,termios\n\
                 def show(*_):\n    print('size=%dx%d' % tuple(shutil.get_terminal_size()), flush=True)\n\
                 signal.signal(signal.SIGWINCH, show)\nshow()\n\
                 print('got=%r' % sys.stdin.read(), flush=True)\n";
    let dir = scratch_home("winch");
    std::fs::write(dir.join("probe.py"), probe).unwrap();
    let t = Tmux::start(
        "winch",
        &around_oajail(&dir, &format!("-- {PYTHON} {}/probe.py", dir.display())),
    );
    t.wait_for("the first size", |s| s.contains("size=100x30"));
    assert!(
        t.tmux(&["resize-window", "-x", "80", "-y", "20"])
            .status
            .success()
    );
    t.wait_for("the new size", |s| s.contains("size=80x20"));
    // The first Ctrl-D hands over the pending "abc", the second is EOF.
    t.keys(&["abc"]);
    t.keys(&["C-d"]);
    t.keys(&["C-d"]);
    t.wait_for("end of input", |s| s.contains("got='abc'"));
    assert_restored(&t);
    assert_eq!(t.file("status").trim(), "EXIT=0");
}

/// stdout is a pipe: no pty; the command runs in a session of its own
/// without a controlling terminal, as before.
#[test]
fn a_piped_run_keeps_the_shared_terminal_without_a_session_terminal() {
    let t = start(
        "piped",
        "-- sh -c 'echo fg=$(ps -o tpgid= -p $$ | tr -d \" \")' | cat",
    );
    let s = t.wait_for("the line", |s| s.contains("fg="));
    assert!(s.contains("fg=-1"), "{s}");
    assert_restored(&t);
}

/// `--timeout` on an interactive run: the jail is killed, the terminal is
/// out of raw mode before oajail's own line (which starts its line), and
/// the status is 124.
#[test]
fn timeout_of_an_interactive_run_restores_the_terminal_first() {
    let t = start("timeout", "--timeout 1 -- sleep 30");
    assert_restored(&t);
    let s = t.screen();
    assert!(
        s.lines()
            .any(|l| l.starts_with("oajail: timeout: killed the jail after 1s")),
        "{s}"
    );
    assert_eq!(t.file("status").trim(), "EXIT=124");
}

/// Two interactive runs overlap on one terminal (`make -j` with a recipe
/// in oajail): the second starts while the first holds the terminal in
/// raw mode and ends after it. The terminal ends as it was before both.
#[test]
fn overlapping_interactive_runs_leave_the_terminal_as_it_was() {
    let dir = scratch_home("overlap");
    let d = dir.display();
    let script = format!(
        "cd {d}\nexport HOME={d}\nunset OAJAIL_SETTINGS\nstty -g > {d}/before\n\
         {OAJAIL} -- sleep 1 < /dev/tty &\nsleep 0.5\n{OAJAIL} -- sleep 2 < /dev/tty &\nwait\n\
         stty -g > {d}/after\necho DONE\nsleep 600\n"
    );
    let t = Tmux::start("overlap", &script);
    assert_restored(&t);
}
