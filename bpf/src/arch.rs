//! The running architecture as seccomp sees it (`seccomp_data.arch`, the
//! x32 bit), the BPF opcodes the programs use (linux/bpf_common.h) and the
//! `seccomp_data` layout (linux/seccomp.h).

/// The audit value of the architecture this binary runs as.
#[cfg(target_arch = "x86_64")]
pub const AUDIT_ARCH: u32 = 62 | 0x8000_0000 | 0x4000_0000;
/// The audit value of the architecture this binary runs as.
#[cfg(target_arch = "aarch64")]
pub const AUDIT_ARCH: u32 = 183 | 0x8000_0000 | 0x4000_0000;
/// The audit value of the architecture this binary runs as.
#[cfg(target_arch = "riscv64")]
pub const AUDIT_ARCH: u32 = 243 | 0x8000_0000 | 0x4000_0000;
/// Numbers at or above this are x32 syscalls on x86_64 (or negative numbers):
/// `__X32_SYSCALL_BIT` reaches the same kernel entry points as the 64-bit
/// call of the same low number.
pub const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// `BPF_LD | BPF_W | BPF_ABS` (BPF_LD and BPF_W are 0): load a 32-bit word
/// of `seccomp_data`.
pub const LD_W_ABS: u16 = 0x20;
/// `BPF_JMP | BPF_JEQ | BPF_K`.
pub const JEQ: u16 = 0x05 | 0x10;
/// `BPF_JMP | BPF_JGE | BPF_K`.
pub const JGE: u16 = 0x05 | 0x30;
/// `BPF_JMP | BPF_JSET | BPF_K`.
pub const JSET: u16 = 0x05 | 0x40;
/// `BPF_JMP | BPF_JA`.
pub const JA: u16 = 0x05;
/// `BPF_RET | BPF_K`.
pub const RET: u16 = 0x06;

/// Offset of `seccomp_data.nr`.
pub const OFFSET_NR: u32 = 0;
/// Offset of `seccomp_data.arch`.
pub const OFFSET_ARCH: u32 = 4;
/// Offset of `seccomp_data.args[0]`.
pub const OFFSET_ARGS: u32 = 16;
/// Offset of the low 32 bits of the first argument.
#[cfg(target_endian = "little")]
pub const OFFSET_ARG0_LO: u32 = OFFSET_ARGS;
/// Offset of the low 32 bits of the first argument.
#[cfg(target_endian = "big")]
pub const OFFSET_ARG0_LO: u32 = OFFSET_ARGS + 4;
