//! The decision with its bookkeeping, as pid 1 runs it for each call: the
//! pure decision ([`Guard`], `oajail_policy::guard`) asked on pid 1's view
//! of the filesystem ([`Probe`]), once under the real path and once under
//! the caller's spelling when it goes through a link; the denial count and
//! its messages; the memo's lifetime; pid 1's umask; the mover.

use super::mover::Mover;
use super::probe::Probe;
use super::resolve::At;
use oajail_policy::guard::{Guard, GuardPlan, Op, Request, Verdict};
use rustix::io::Errno;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How many denials are printed one by one before only counting.
pub(crate) const LOUD_DENIALS: u32 = 5;

/// How long the decision's memo may trust what it saw: changes made
/// outside the jail (a repository created by the user meanwhile) are seen
/// after this.
const MEMO_LIFETIME: Duration = Duration::from_secs(1);

/// The decision with its bookkeeping: the denial count, pid 1's umask.
pub(crate) struct Decider {
    guard: Guard,
    denied: u32,
    memo_since: Instant,
    primed: Option<Vec<PathBuf>>,
    umask: Option<u32>,
    /// Landlock ABI 1 only: the process that makes moves across directories.
    mover: Option<Mover>,
}

impl Decider {
    /// `prime`: directories whose repositories are learnt first (the
    /// command's working directory and the writable roots).
    pub(crate) fn new(plan: GuardPlan, prime: Vec<PathBuf>, mover: Option<Mover>) -> Self {
        Decider {
            guard: Guard::new(plan),
            denied: 0,
            memo_since: Instant::now(),
            primed: Some(prime),
            umask: None,
            mover,
        }
    }

    /// How many calls were denied.
    pub(crate) fn denied(&self) -> u32 {
        self.denied
    }

    /// Decide `req`, saying why on stderr when it is refused.
    pub(crate) fn check(&mut self, verb: &str, req: &Request<'_>) -> Result<(), Errno> {
        self.refresh();
        match self.guard.decide(&Probe, req) {
            Verdict::Allow => Ok(()),
            Verdict::Deny(d) => {
                self.denied += 1;
                if self.denied <= LOUD_DENIALS {
                    eprintln!(
                        "oajail: guard: denied {verb} {} ({})",
                        req.path.display(),
                        d.rule
                    );
                }
                Err(Errno::ACCESS)
            }
        }
    }

    /// Forget what the decision kept once it is too old; learn the primed
    /// directories before the first decision.
    fn refresh(&mut self) {
        if self.memo_since.elapsed() > MEMO_LIFETIME {
            self.guard.forget();
            self.memo_since = Instant::now();
        }
        if let Some(dirs) = self.primed.take() {
            self.guard.prime(&Probe, &dirs);
        }
    }

    /// Decide `op` on the name `at` resolved to, under its real path and,
    /// when it differs, under the caller's spelling (through a link).
    pub(crate) fn check_at(&mut self, verb: &str, at: &At, op: Op<'_>) -> Result<(), Errno> {
        let path = at.path();
        self.check(
            verb,
            &Request {
                path: &path,
                op,
                existing: at.stat,
            },
        )?;
        match &at.lexical {
            Some(lexical) => self.check(
                verb,
                &Request {
                    path: lexical,
                    op,
                    existing: at.stat,
                },
            ),
            None => Ok(()),
        }
    }

    /// Whether [`Decider::check_at`] would allow `op`, without a word or
    /// a count when it would not.
    pub(crate) fn allows_at(&mut self, at: &At, op: Op<'_>) -> bool {
        self.refresh();
        let path = at.path();
        let mut paths = vec![path.as_path()];
        paths.extend(at.lexical.as_deref());
        paths.iter().all(|p| {
            let req = Request {
                path: p,
                op,
                existing: at.stat,
            };
            self.guard.decide(&Probe, &req) == Verdict::Allow
        })
    }

    /// The mover, on Landlock ABI 1 beside the mount view.
    pub(crate) fn mover(&self) -> Option<&Mover> {
        self.mover.as_ref()
    }

    /// The call behind `req` was performed.
    pub(crate) fn done(&mut self, req: &Request<'_>) {
        self.guard.performed(&Probe, req);
    }

    /// Set pid 1's umask to the caller's (pid 1 is single-threaded, so its
    /// own umask per call is race-free); only a change costs a call.
    pub(crate) fn umask(&mut self, umask: u32) {
        let umask = umask & 0o777;
        if self.umask != Some(umask) {
            rustix::process::umask(rustix::fs::Mode::from_raw_mode(umask));
            self.umask = Some(umask);
        }
    }
}
