//! Family H: resource exhaustion. Each attack tries to take more than the
//! policy's limits allow; the block is the kernel's answer to the limit
//! (ENOMEM under RLIMIT_AS, ENOSPC on the bounded /tmp, EFBIG or SIGXFSZ
//! under RLIMIT_FSIZE). `spin` is judged by the lab's clock, not the probe.

use crate::report::{Outcome, io_errno};
use nix::errno::Errno;
use std::io::Write;

const MIB: usize = 1024 * 1024;

/// `alloc MIB`: reserve and touch that much memory.
pub fn alloc(attack: &str, mib: &str) -> Outcome {
    let Ok(n) = mib.parse::<usize>() else {
        return Outcome::unexpected(attack, None, format!("bad size {mib}"));
    };
    let mut v: Vec<u8> = Vec::new();
    if v.try_reserve_exact(n * MIB).is_err() {
        return Outcome::failed(attack, "reserve", Errno::ENOMEM, &[Errno::ENOMEM]);
    }
    // Touch every page so the memory is really committed.
    v.resize(n * MIB, 1);
    let sum: usize = v.iter().step_by(4096).map(|b| usize::from(*b)).sum();
    Outcome::succeeded(
        attack,
        format!("allocated and touched {n} MiB ({sum} pages)"),
    )
}

/// `fill-file PATH MIB`: write that many MiB into one file. A leading
/// `$TMPDIR/` is the command's `TMPDIR` (else `/tmp`): the private tmp the
/// jail gives, whichever tier.
pub fn fill_file(attack: &str, path: &str, mib: &str) -> Outcome {
    let Ok(n) = mib.parse::<usize>() else {
        return Outcome::unexpected(attack, None, format!("bad size {mib}"));
    };
    let path = &match path.strip_prefix("$TMPDIR/") {
        Some(rest) => {
            let tmp = std::env::var("TMPDIR").unwrap_or_else(|_| "/tmp".into());
            format!("{}/{rest}", tmp.trim_end_matches('/'))
        }
        None => path.to_owned(),
    };
    let mut f = match std::fs::File::create(path) {
        Ok(f) => f,
        Err(e) => return Outcome::unexpected(attack, Some(io_errno(&e)), "create"),
    };
    let chunk = vec![0x5au8; MIB];
    for i in 0..n {
        if let Err(e) = f.write_all(&chunk) {
            let _ = std::fs::remove_file(path);
            return Outcome::failed(
                attack,
                &format!("write MiB {i}"),
                io_errno(&e),
                &[Errno::ENOSPC, Errno::EFBIG, Errno::EDQUOT],
            );
        }
    }
    let _ = std::fs::remove_file(path);
    Outcome::succeeded(attack, format!("wrote {n} MiB"))
}

/// `spin`: block SIGTERM and burn CPU forever (the wall timeout must end it).
pub fn spin(attack: &str) -> Outcome {
    let mut set = nix::sys::signal::SigSet::empty();
    set.add(nix::sys::signal::Signal::SIGTERM);
    set.add(nix::sys::signal::Signal::SIGINT);
    set.add(nix::sys::signal::Signal::SIGHUP);
    if let Err(e) = set.thread_block() {
        return Outcome::unexpected(attack, Some(e), "block signals");
    }
    let mut x: u64 = 0;
    loop {
        x = std::hint::black_box(x.wrapping_add(1));
        if x == u64::MAX {
            break;
        }
    }
    Outcome::unexpected(attack, None, "spin loop ended")
}

/// `daemonize-wait MARKER`: start a daemon, then stay alive until killed
/// (so the lab can kill oajail while the jail is still running).
pub fn daemonize_wait(attack: &str, marker: &str) -> Outcome {
    let started = crate::lifecycle::daemonize(attack, marker);
    if started.0.verdict != oajail_audit::verdict::Verdict::Succeeded {
        return started;
    }
    println!("{}", started.0.to_line());
    std::thread::sleep(std::time::Duration::from_secs(60));
    Outcome::unexpected(attack, None, "was not killed within 60 s")
}
