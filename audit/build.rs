//! Stamps the crate with a digest of its own sources (`OAJAIL_AUDIT_BUILD`).
//!
//! `oajail` (and the security suite) link this crate's library but run its
//! two binaries, `oajail-probe` and `oajail-lab`, from disk. Cargo does not
//! rebuild those when only the library's user is built, so a stale probe
//! from an older tree would answer a newer catalogue (an attack it does not
//! know reads as inconclusive, a changed one as a wrong verdict). Library
//! and binaries carry the same digest; the caller compares them before any
//! attack runs.
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=src");
    let mut files = Vec::new();
    collect(Path::new("src"), &mut files);
    files.sort();
    let mut digest = Sha256::new();
    for file in &files {
        digest.update(file.to_string_lossy().as_bytes());
        digest.update([0]);
        digest.update(std::fs::read(file).unwrap_or_default());
        digest.update([0]);
    }
    let hex: String = (digest.finalize().iter().take(8))
        .map(|b| format!("{b:02x}"))
        .collect();
    println!("cargo:rustc-env=OAJAIL_AUDIT_BUILD={hex}");
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else {
            out.push(path);
        }
    }
}
