//! Server side of the workers: spawning, the warm pool, killing.
//!
//! A worker is spawned with an empty environment (the API key never reaches
//! it), `/` as working directory and piped stdin/stdout, from the pool's
//! own spawn thread ([`crate::lane`]). It is "ready" once
//! it has sent [`ToServer::Ready`], i.e. once its sandbox is in place. The
//! pool keeps up to `size` ready workers; [`Pool::take`] hands one out and
//! [`Pool::refill`] replaces it, so a worker never serves two executes.

use super::frame;
use super::{ToServer, ToWorker, WORKER_ARG};
use crate::lane::Lane;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Mutex;

/// Spawns waiting for the spawn lane; more fail (an execute then answers
/// `js_runtime_error`). The pool refills one worker at a time and each
/// running execute takes at most one, so this is never reached in use.
const SPAWN_QUEUE: usize = 256;
/// How long a fresh worker may take to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(5);

/// One started, sandboxed worker waiting for its code.
pub struct Worker {
    /// The process (killed on drop).
    pub child: Child,
    /// Server → worker pipe (taken by the run's frame writer).
    pub stdin: Option<ChildStdin>,
    /// Worker → server pipe (taken by the run's frame reader).
    pub stdout: Option<ChildStdout>,
}

/// The pool of ready workers.
pub struct Pool {
    exe: PathBuf,
    memory_mb: u64,
    timeout_ms: u64,
    size: usize,
    /// The encoded [`ToWorker::Init`] frame every worker gets at spawn.
    init: Vec<u8>,
    ready: Mutex<Vec<Worker>>,
    starting: AtomicUsize,
    /// The thread every worker is spawned from: workers die with it
    /// (`PR_SET_PDEATHSIG`), and it lives as long as the pool.
    spawner: Lane,
}

impl Pool {
    /// A pool that spawns `exe` (this binary) as workers, each prepared
    /// with `init` (a [`ToWorker::Init`]) before it counts as ready. Must be
    /// called inside the tokio runtime the workers are driven by.
    pub fn new(
        exe: PathBuf,
        memory_mb: u64,
        timeout_ms: u64,
        size: usize,
        init: &ToWorker,
    ) -> Result<Arc<Self>, frame::FrameError> {
        Ok(Arc::new(Self {
            exe,
            memory_mb,
            timeout_ms,
            size,
            init: frame::encode(init)?,
            ready: Mutex::new(Vec::new()),
            starting: AtomicUsize::new(0),
            spawner: Lane::new(
                "spawn",
                SPAWN_QUEUE,
                tokio::runtime::Handle::try_current().ok(),
            ),
        }))
    }

    /// Spawns one worker and waits until it is ready.
    pub async fn spawn_ready(&self) -> Result<Worker, String> {
        let mut cmd = Command::new(&self.exe);
        cmd.arg(WORKER_ARG)
            .arg(self.memory_mb.to_string())
            .arg(self.timeout_ms.to_string())
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        // The spawn is a vfork: the calling thread stops until the child has
        // exec'd. On the spawn lane's thread that stall stays off the event
        // loop, which meanwhile serves the next request, and no search or
        // other blocking job can hold a spawn up.
        let failed = |e: &dyn std::fmt::Display| format!("spawning a worker failed: {e}");
        let mut child = self
            .spawner
            .run(move || cmd.spawn())
            .map_err(|e| failed(&e))?
            .await
            .map_err(|e| failed(&e))?
            .map_err(|e| failed(&e))?;
        let (Some(mut stdin), Some(mut stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("worker pipes missing".into());
        };
        let ready = async {
            stdin.write_all(&self.init).await?;
            stdin.flush().await?;
            frame::read_async::<ToServer>(&mut stdout, 64).await
        };
        match tokio::time::timeout(READY_TIMEOUT, ready).await {
            Ok(Ok(ToServer::Ready)) => Ok(Worker {
                child,
                stdin: Some(stdin),
                stdout: Some(stdout),
            }),
            Ok(Ok(other)) => Err(format!("worker said {other:?} instead of ready")),
            Ok(Err(e)) => Err(format!("worker did not start: {e}")),
            Err(_) => Err("worker did not become ready in time".into()),
        }
    }

    /// Takes a ready worker, or starts one when the pool is empty. The
    /// caller tops the pool up with [`Pool::refill`] once its execute is
    /// over, so replacements do not compete for CPU with the run itself.
    /// A pooled worker that has died meanwhile (killed from outside, OOM) is
    /// dropped, not handed out.
    pub async fn take(self: &Arc<Self>) -> Result<Worker, String> {
        loop {
            let pooled = self.ready.lock().await.pop();
            match pooled {
                Some(mut w) => {
                    if matches!(w.child.try_wait(), Ok(None)) {
                        return Ok(w);
                    }
                }
                None => return self.spawn_ready().await,
            }
        }
    }

    /// Starts workers in the background until the pool is full.
    pub fn refill(self: &Arc<Self>) {
        let pool = self.clone();
        tokio::spawn(async move {
            loop {
                let have = pool.ready.lock().await.len() + pool.starting.load(Ordering::SeqCst);
                if have >= pool.size {
                    return;
                }
                pool.starting.fetch_add(1, Ordering::SeqCst);
                let worker = pool.spawn_ready().await;
                pool.starting.fetch_sub(1, Ordering::SeqCst);
                match worker {
                    Ok(w) => pool.ready.lock().await.push(w),
                    Err(e) => {
                        crate::log::line("error", &format!("worker pool: {e}"));
                        return;
                    }
                }
            }
        });
    }
}
