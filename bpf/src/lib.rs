//! oajail-bpf: the hand-written classic-BPF seccomp programs of the
//! workspace, in one pure place that `oajail-jail` and `openagenda-mcp` both
//! use.
//!
//! It owns: the jail's seccomp prefix put in front of seccompiler's deny
//! list ([`prefix`]), the create-guard's USER_NOTIF filter ([`guard`]), the
//! MCP worker's filter ([`worker`]), the architecture constants, opcodes and
//! `seccomp_data` layout they share ([`arch`]), the syscall tables by name
//! ([`syscalls`]) and the interpreter their tests run them through
//! ([`interp`]). Each program is written by hand because seccompiler can
//! express neither USER_NOTIF, nor a second action, nor an x32 check, and
//! its deny chains are four times longer than a search tree.
//!
//! Invariants:
//! - no `unsafe` and no syscalls: programs are plain data
//!   (`seccompiler::sock_filter`); installing them is the callers' job
//!   (jail's `sys` module, the worker through seccompiler);
//! - every program checks the architecture first (any other kills the
//!   process) and, on x86_64, refuses the x32 range;
//! - a jump that does not fit its 8-bit offset, or a call missing from this
//!   architecture's table, is an error, never a silently shorter program.
//!
//! Dependencies: `oajail-policy` (the guard's filter shape) and `libc`
//! (numbers and constants only).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod arch;
mod asm;
pub mod guard;
pub mod interp;
pub mod prefix;
pub mod syscalls;
pub mod worker;

pub use seccompiler::{BpfProgram, sock_filter};

/// Why a program could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BpfError {
    /// The guard's filter shape names a call this architecture does not have.
    #[error("guard: unknown system call {0}")]
    UnknownGuardedCall(String),
    /// A syscall number of the worker's list is out of range.
    #[error("syscall number {0}")]
    SyscallNumber(i64),
    /// A jump of the worker's filter does not fit its 8-bit offset.
    #[error("jump from {from} to {to} does not fit")]
    JumpTooLong {
        /// Index of the jump.
        from: usize,
        /// Index of its target.
        to: usize,
    },
}
