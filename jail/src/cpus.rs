//! Where pid 1 runs while the jail is being set up.
//!
//! The supervisor and pid 1 work at the same time during set-up: pid 1
//! builds its namespaces and mounts while the supervisor compiles the plans
//! and builds the Landlock ruleset. The scheduler does not see that. A new
//! child is queued on its parent's CPU, and the spec byte is a socket write,
//! a "sync" wake-up that tells the scheduler the waker is about to sleep,
//! so pid 1 is woken on the supervisor's CPU. The supervisor does not sleep
//! there; it goes on compiling. The two then share one CPU while the others
//! idle. Measured on a 2-vCPU guest: pid 1 first ran a median 1.1 ms after
//! its clone (0.13 ms with the hint below), and `oajail -- /bin/true` went
//! from 1.73–1.84× bwrap to 1.50–1.72× (docs/benchmarks.md, "pid 1 on a
//! CPU of its own").
//!
//! So right after the clone, the supervisor takes its own CPU out of pid
//! 1's affinity mask, and pid 1 puts the caller's mask back once set-up is
//! over, before the command is forked: the command runs on exactly the
//! CPUs the caller may use (`taskset` and cpusets are kept). This is a
//! scheduling hint, not a security layer. When it cannot be given (a
//! single allowed CPU, a failing call), nothing else changes.

use nix::sched::{CpuSet, sched_getaffinity, sched_getcpu, sched_setaffinity};
use nix::unistd::Pid;

/// The CPUs this process may run on, read before the clone so pid 1 knows
/// the caller's mask without asking the supervisor.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Affinity(Option<CpuSet>);

impl Affinity {
    /// The calling process's mask (`None` inside if it cannot be read:
    /// then [`Affinity::separate`] and [`Affinity::restore`] do nothing).
    pub(crate) fn of_caller() -> Affinity {
        Affinity(sched_getaffinity(Pid::from_raw(0)).ok())
    }

    /// Supervisor, right after the clone: let `child` run anywhere the
    /// caller may, except on the CPU this process is on now.
    pub(crate) fn separate(&self, child: Pid) {
        let (Some(mask), Ok(here)) = (self.0, sched_getcpu()) else {
            return;
        };
        let mut elsewhere = mask;
        if elsewhere.unset(here).is_err() || elsewhere == CpuSet::new() {
            return;
        }
        // Best effort: pid 1 only starts later if this fails.
        let _ = sched_setaffinity(child, &elsewhere);
    }

    /// pid 1, before forking the command: the caller's mask again.
    pub(crate) fn restore(&self) {
        if let Some(mask) = &self.0 {
            let _ = sched_setaffinity(Pid::from_raw(0), mask);
        }
    }
}
