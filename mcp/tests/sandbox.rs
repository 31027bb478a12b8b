//! The worker's own confinement, checked from the inside: the binary's
//! hidden `__sandbox-selftest` applies exactly the worker's rlimits and
//! seccomp filter to itself and then tries to open a file, bind a socket,
//! run a program and signal its parent.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod support;

use serde_json::{Value, json};
use std::process::Stdio;

#[test]
fn the_worker_filter_blocks_files_sockets_exec_and_signals() {
    let out = support::command(&[], &["__sandbox-selftest"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The filter's own answer (ENOSYS), not another layer's.
    let refused = format!("errno {}", v["refused"]);
    assert_eq!(refused, format!("errno {}", libc::ENOSYS));
    for what in ["open", "socket", "exec", "signal_parent", "read_status"] {
        assert_eq!(v[what], json!(refused), "{what} was not blocked: {v}");
    }
}
