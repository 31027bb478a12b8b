//! One message with descriptors attached (`SCM_RIGHTS`) on a unix socket:
//! the supervisor/jail channel (`sync.rs`) and the create-guard's hand-off
//! of its listener (`guard`) both send and receive this way.

use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};

/// One `sendmsg` of `body` on a unix socket, with `fds` attached
/// (SCM_RIGHTS) when there are any. Seqpacket sockets send a message whole
/// or not at all; anything shorter is an error all the same.
pub(crate) fn send_with_fds(sock: BorrowedFd<'_>, body: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let iov = [IoSlice::new(body)];
    let rights = [ControlMessage::ScmRights(fds)];
    let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &rights };
    match sendmsg::<()>(sock.as_raw_fd(), &iov, cmsgs, MsgFlags::empty(), None)? {
        n if n == body.len() => Ok(()),
        _ => Err(io::Error::other("short write")),
    }
}

/// One `recvmsg` on a unix socket into `buf`, with the descriptors that
/// came along (SCM_RIGHTS, received close-on-exec): (bytes, descriptors).
pub(crate) fn recv_with_fds(
    sock: BorrowedFd<'_>,
    buf: &mut [u8],
) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut cmsg_buf = nix::cmsg_space!([RawFd; 4]);
    let mut iov = [IoSliceMut::new(buf)];
    let msg = recvmsg::<()>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg_buf),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for cmsg in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(raw) = cmsg {
            fds.extend(raw.into_iter().map(crate::sys::fd::own_received));
        }
    }
    Ok((msg.bytes, fds))
}
