//! A classic-BPF interpreter over hand-made `seccomp_data`, for tests: the
//! programs' decisions (jump offsets included) are checked without a
//! kernel. It runs exactly the instructions seccomp programs here and
//! seccompiler's use and panics on any other, on a load outside
//! `seccomp_data` or a misaligned one, or on a jump past the end.

use seccompiler::sock_filter;

/// `struct seccomp_data` as the kernel lays it out (native byte order,
/// instruction pointer 0).
pub fn data(arch: u32, nr: u32, args: [u64; 6]) -> Vec<u8> {
    let mut d = Vec::with_capacity(64);
    d.extend(nr.to_ne_bytes());
    d.extend(arch.to_ne_bytes());
    d.extend(0u64.to_ne_bytes());
    for a in args {
        d.extend(a.to_ne_bytes());
    }
    d
}

/// Run `prog` on `data` and return the action it answers.
pub fn run(prog: &[sock_filter], data: &[u8]) -> u32 {
    let (mut acc, mut pc) = (0u32, 0usize);
    loop {
        let i = &prog[pc];
        pc += 1;
        let jump = |cond: bool| {
            if cond {
                usize::from(i.jt)
            } else {
                usize::from(i.jf)
            }
        };
        match i.code {
            0x20 => {
                let k = i.k as usize;
                assert!(k.is_multiple_of(4) && k + 4 <= data.len(), "load at {k}");
                let mut word = [0u8; 4];
                word.copy_from_slice(&data[k..k + 4]);
                acc = u32::from_ne_bytes(word);
            }
            0x54 => acc &= i.k,
            0x05 => pc += i.k as usize,
            0x15 => pc += jump(acc == i.k),
            0x25 => pc += jump(acc > i.k),
            0x35 => pc += jump(acc >= i.k),
            0x45 => pc += jump(acc & i.k != 0),
            0x06 => return i.k,
            other => panic!("unexpected BPF opcode {other:#x} at {}", pc - 1),
        }
    }
}
