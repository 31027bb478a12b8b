//! Every `unsafe` call of the workspace lives under this module.
//!
//! `jail/src/lib.rs` is the only place with `#[allow(unsafe_code)]`, on
//! `mod sys;`, so `grep -rn unsafe jail/src/sys` lists all of it. Each block
//! carries a `// SAFETY:` comment (enforced by
//! `clippy::undocumented_unsafe_blocks`). Safe crates (nix, caps, seccompiler,
//! landlock) are used wherever they cover a call; raw `libc` appears only where
//! no crate offers a safe wrapper, and each such function says why.

pub(crate) mod fd;
pub(crate) mod landlock;
pub(crate) mod mount;
pub(crate) mod net;
pub(crate) mod notify;
pub(crate) mod probe;
pub(crate) mod process;
