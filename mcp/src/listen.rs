//! Where the HTTP transport listens: an address it binds, or a listening
//! socket it is given as standard input.
//!
//! The second form is how a jailed server is reached: oajail gives the
//! command a network namespace of its own (loopback only), so a port bound
//! inside it is out of every client's reach. `openagenda-mcp --jail
//! --transport http --listen ADDR` therefore binds ADDR itself, on the
//! host, before it replaces itself with oajail, and passes the listening
//! socket as the jailed server's stdin (inetd's and systemd's
//! `StandardInput=socket` convention). A socket keeps the network
//! namespace it was made in, so connections accepted inside the jail come
//! from the host's network, while everything the server dials still goes
//! through the jail's proxy. The jail needs no inbound rule: it never
//! sees a socket it could connect with.

use crate::McpError;
use std::net::SocketAddr;
use std::os::fd::AsFd;

/// The listen setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    /// Bind this address.
    Addr(SocketAddr),
    /// Accept on the listening TCP socket that is standard input.
    Stdin,
}

impl Listen {
    /// Parses `--listen` / `OA_HTTP_LISTEN`: `HOST:PORT` or `stdin`.
    pub fn parse(raw: &str) -> Result<Self, McpError> {
        let raw = raw.trim();
        if raw == "stdin" {
            return Ok(Self::Stdin);
        }
        let addr = std::net::ToSocketAddrs::to_socket_addrs(raw)
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| McpError::Config {
                field: "OA_HTTP_LISTEN",
                message: format!("{raw:?} is not HOST:PORT (or stdin)"),
            })?;
        Ok(Self::Addr(addr))
    }

    /// The listener.
    pub fn open(&self) -> Result<tokio::net::TcpListener, McpError> {
        let std = match self {
            Self::Addr(addr) => bind(*addr)?,
            Self::Stdin => from_stdin()?,
        };
        std.set_nonblocking(true)
            .map_err(|e| io("the listener", e))?;
        tokio::net::TcpListener::from_std(std).map_err(|e| io("the listener", e))
    }
}

fn io(what: &str, e: std::io::Error) -> McpError {
    McpError::Io {
        what: what.to_owned(),
        source: e,
    }
}

/// Binds `addr` (with `SO_REUSEADDR`, as std does).
pub fn bind(addr: SocketAddr) -> Result<std::net::TcpListener, McpError> {
    std::net::TcpListener::bind(addr).map_err(|e| McpError::Config {
        field: "OA_HTTP_LISTEN",
        message: format!("cannot listen on {addr}: {e}"),
    })
}

/// The listening TCP socket that is standard input.
fn from_stdin() -> Result<std::net::TcpListener, McpError> {
    let not = |why: String| McpError::Config {
        field: "OA_HTTP_LISTEN",
        message: format!("stdin: {why} (`stdin` needs a listening TCP socket as standard input)"),
    };
    let stdin = std::io::stdin();
    let fd = stdin.as_fd();
    match nix::sys::socket::getsockopt(&fd, nix::sys::socket::sockopt::AcceptConn) {
        Ok(true) => {}
        Ok(false) => return Err(not("the socket is not listening".into())),
        Err(e) => return Err(not(format!("not a socket ({e})"))),
    }
    let owned = fd.try_clone_to_owned().map_err(|e| io("stdin", e))?;
    let listener = std::net::TcpListener::from(owned);
    match listener.local_addr() {
        Ok(_) => Ok(listener),
        Err(e) => Err(not(format!("not a TCP socket ({e})"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_values() {
        assert_eq!(Listen::parse("stdin").unwrap(), Listen::Stdin);
        assert_eq!(
            Listen::parse("127.0.0.1:0").unwrap(),
            Listen::Addr("127.0.0.1:0".parse().unwrap())
        );
        let e = Listen::parse("nowhere").unwrap_err().to_string();
        assert!(e.starts_with("config OA_HTTP_LISTEN:"), "{e}");
    }
}
