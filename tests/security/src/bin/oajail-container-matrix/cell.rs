//! What a cell is made of, as plain data: who runs an exec, what is bound
//! in, and pid 1.

use std::path::{Path, PathBuf};

/// Which user inside runs an exec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// Container root.
    Root,
    /// uid and gid 1000 (the image's `user`).
    User,
}

impl Who {
    /// `root` or `uid 1000`.
    pub fn label(self) -> &'static str {
        match self {
            Who::Root => "root",
            Who::User => "uid 1000",
        }
    }

    /// The results directory's name.
    pub fn dir(self) -> &'static str {
        match self {
            Who::Root => "root",
            Who::User => "user",
        }
    }

    /// uid and gid.
    pub fn ids(self) -> u32 {
        match self {
            Who::Root => 0,
            Who::User => 1000,
        }
    }
}

/// A bind mount into the cell: the same path inside as outside.
pub struct Bind {
    /// The host path (and the path inside).
    pub path: PathBuf,
    /// Writable inside.
    pub writable: bool,
    /// Mounted at another path inside (`/etc/resolv.conf`).
    pub at: Option<PathBuf>,
}

impl Bind {
    /// The path inside.
    pub fn target(&self) -> &Path {
        self.at.as_deref().unwrap_or(&self.path)
    }
}

/// pid 1 of every cell: reaps whatever is left to it, exits on SIGTERM.
pub const INIT: &[&str] = &[
    "python3",
    "-c",
    "import os, signal, time\n\
     signal.signal(signal.SIGTERM, lambda *a: os._exit(0))\n\
     while True:\n\
     \x20   try:\n\
     \x20       os.wait()\n\
     \x20   except ChildProcessError:\n\
     \x20       time.sleep(0.5)\n",
];
