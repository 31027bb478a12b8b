//! A small assembler for the hand-written programs: instructions with
//! symbolic jump targets, a binary search tree over syscall numbers, and the
//! resolution of targets into BPF's forward, 8-bit relative offsets.
//!
//! Why a tree: installing a filter costs time linear in the instructions an
//! allowed syscall walks, because the kernel runs the program once per
//! syscall number to build its "always allowed" cache. A chain of 360
//! compares took about 1 ms to install on the benchmark machine, a tree of
//! the same keys a few dozen µs (docs/benchmarks.md).

use crate::BpfError;
use crate::arch::{JEQ, JGE};
use seccompiler::{BpfProgram, sock_filter};

/// Keys compared one by one in a leaf of the tree.
const LEAF: usize = 4;

/// Where a jump goes, before offsets are known: the next instruction, an
/// index, or a label the program resolves (its return instructions).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Target<L> {
    Next,
    At(usize),
    To(L),
}

/// One instruction with symbolic targets (ignored unless it is a jump).
pub(crate) struct Ins<L> {
    pub code: u16,
    pub k: u32,
    pub jt: Target<L>,
    pub jf: Target<L>,
}

pub(crate) fn stmt<L>(code: u16, k: u32) -> Ins<L> {
    Ins {
        code,
        k,
        jt: Target::Next,
        jf: Target::Next,
    }
}

pub(crate) fn jump<L>(code: u16, k: u32, jt: Target<L>, jf: Target<L>) -> Ins<L> {
    Ins { code, k, jt, jf }
}

/// Append a search over the accumulator (a syscall number) for the sorted,
/// deduplicated `keys`: a key jumps to `hit(key)`, any other number to
/// `miss`. Inner nodes are one `jge`, leaves a short `jeq` chain.
pub(crate) fn tree<L: Copy>(
    code: &mut Vec<Ins<L>>,
    keys: &[u32],
    hit: &dyn Fn(u32) -> Target<L>,
    miss: Target<L>,
) {
    if keys.len() <= LEAF {
        for (i, &k) in keys.iter().enumerate() {
            let next = if i + 1 == keys.len() {
                miss
            } else {
                Target::Next
            };
            code.push(jump(JEQ, k, hit(k), next));
        }
        if keys.is_empty() {
            code.push(jump(crate::arch::JA, 0, miss, miss));
        }
        return;
    }
    let (low, high) = keys.split_at(keys.len() / 2);
    let split = code.len();
    code.push(jump(JGE, high[0], Target::Next, Target::Next));
    tree(code, low, hit, miss);
    code[split].jt = Target::At(code.len());
    tree(code, high, hit, miss);
}

/// Turn symbolic targets into the relative offsets BPF uses (`label` gives
/// each label's index); fails closed when a jump goes backwards or would not
/// fit in its offset. An unconditional `ja` takes its target in `k`.
pub(crate) fn resolve<L: Copy>(
    code: &[Ins<L>],
    label: impl Fn(L) -> usize,
) -> Result<BpfProgram, BpfError> {
    let index = |from: usize, to: Target<L>| match to {
        Target::Next => from + 1,
        Target::At(i) => i,
        Target::To(l) => label(l),
    };
    let distance = |from: usize, to: usize| {
        to.checked_sub(from + 1)
            .ok_or(BpfError::JumpTooLong { from, to })
    };
    let short = |from: usize, to: Target<L>| {
        let to = index(from, to);
        distance(from, to)
            .and_then(|d| u8::try_from(d).map_err(|_| BpfError::JumpTooLong { from, to }))
    };
    let mut out = Vec::with_capacity(code.len());
    for (i, ins) in code.iter().enumerate() {
        let (jt, jf, k) = match ins.code {
            crate::arch::JA => (0, 0, distance(i, index(i, ins.jt))? as u32),
            c if c & 0x07 == 0x05 => (short(i, ins.jt)?, short(i, ins.jf)?, ins.k),
            _ => (0, 0, ins.k),
        };
        out.push(sock_filter {
            code: ins.code,
            jt,
            jf,
            k,
        });
    }
    Ok(out)
}
