//! A lane: one thread of its own with a bounded queue, for work that must
//! stay off the event loop and must not compete with other work for a
//! shared pool.
//!
//! The server has two: worker spawns (each a vfork that stalls the calling
//! thread until the child has exec'd) and searches. Before lanes both ran
//! on tokio's two blocking threads, so a burst of searches delayed every
//! spawn behind it and with it every execute (issue 32). A lane answers
//! [`Full`] at once when its queue is full, which a caller turns into
//! `busy`, instead of queueing without end.
//!
//! The thread starts with the first job (an idle server pays no stack or
//! allocator arena for a lane it never uses), enters the runtime given at
//! construction when there is one (tokio's process type needs it), and
//! ends when the lane is dropped. A worker spawned from a lane dies with that thread
//! (`PR_SET_PDEATHSIG` follows the thread that forked), so the spawn lane
//! must live as long as the pool of workers it starts, which it does: the
//! pool owns it.

use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::sync::{Mutex, OnceLock};
use tokio::sync::oneshot;

/// The lane's queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the {0} lane is full")]
pub struct Full(pub &'static str);

type Job = Box<dyn FnOnce() + Send>;

/// One thread and its bounded queue.
pub struct Lane {
    name: &'static str,
    depth: usize,
    runtime: Option<tokio::runtime::Handle>,
    tx: OnceLock<Mutex<SyncSender<Job>>>,
}

impl Lane {
    /// A lane named `name` whose queue holds `depth` jobs besides the one
    /// running; its thread enters `runtime` when given.
    pub fn new(name: &'static str, depth: usize, runtime: Option<tokio::runtime::Handle>) -> Self {
        Self {
            name,
            depth,
            runtime,
            tx: OnceLock::new(),
        }
    }

    /// Queues `job`; its result arrives through the returned receiver (an
    /// error there means the lane went away first). [`Full`] when the
    /// queue is full or the thread could not be started.
    pub fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Result<oneshot::Receiver<T>, Full> {
        let (reply, answer) = oneshot::channel();
        let boxed: Job = Box::new(move || {
            let _ = reply.send(job());
        });
        let tx = self.sender().ok_or(Full(self.name))?;
        let sent = tx.lock().map_err(|_| Full(self.name))?.try_send(boxed);
        match sent {
            Ok(()) => Ok(answer),
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => Err(Full(self.name)),
        }
    }

    fn sender(&self) -> Option<&Mutex<SyncSender<Job>>> {
        if let Some(tx) = self.tx.get() {
            return Some(tx);
        }
        let (tx, rx) = sync_channel::<Job>(self.depth);
        let runtime = self.runtime.clone();
        let started = std::thread::Builder::new()
            .name(format!("oa-{}", self.name))
            .spawn(move || {
                let _entered = runtime.as_ref().map(tokio::runtime::Handle::enter);
                while let Ok(job) = rx.recv() {
                    job();
                }
            });
        if let Err(e) = started {
            crate::log::line("error", &format!("{} lane: {e}", self.name));
            return None;
        }
        // Only the event loop queues jobs, so two first calls cannot race;
        // if they did, the loser's thread would just end with its channel.
        let _ = self.tx.set(Mutex::new(tx));
        self.tx.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_lane_answers_at_once_and_jobs_run_in_order() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let lane = Lane::new("test", 1, Some(rt.handle().clone()));
        let (hold, gate) = std::sync::mpsc::channel::<()>();
        let (started, running) = std::sync::mpsc::channel::<()>();
        let first = lane
            .run(move || {
                started.send(()).ok();
                gate.recv().ok();
                1
            })
            .unwrap();
        running.recv().unwrap();
        // The thread holds the first job: one more fits in the queue, the
        // next is refused at once.
        let second = lane.run(|| 2).unwrap();
        assert_eq!(lane.run(|| 3).err(), Some(Full("test")));
        hold.send(()).unwrap();
        assert_eq!(rt.block_on(first).unwrap(), 1);
        assert_eq!(rt.block_on(second).unwrap(), 2);
    }
}
