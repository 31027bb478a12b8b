//! `oajail ssh-proxy %h %p`: a blocking CONNECT client for ssh's
//! `ProxyCommand`, so `git` over ssh works in the jail without nc or socat.
use crate::ProxyError;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::thread;

const MAX_ANSWER: usize = 16 * 1024;

/// Send `CONNECT host:port` to the proxy, check for `200`, then relay
/// stdin → proxy and proxy → stdout until both sides are done.
pub fn ssh_connect_helper(proxy: SocketAddr, host: &str, port: u16) -> Result<(), ProxyError> {
    let fail = |what: &str, e: std::io::Error| ProxyError::Helper(format!("{what}: {e}"));
    if host.is_empty()
        || host
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return Err(ProxyError::Helper(format!("invalid host {host:?}")));
    }
    let authority = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let mut stream = TcpStream::connect(proxy).map_err(|e| fail("cannot reach the proxy", e))?;
    let request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .map_err(|e| fail("cannot send CONNECT", e))?;
    let leftover = read_answer(&mut stream)?;
    let mut to_proxy = stream.try_clone().map_err(|e| fail("socket", e))?;
    let upload = thread::spawn(move || {
        let r = std::io::copy(&mut std::io::stdin().lock(), &mut to_proxy);
        let _ = to_proxy.shutdown(Shutdown::Write);
        r
    });
    let mut out = std::io::stdout().lock();
    out.write_all(&leftover).map_err(|e| fail("stdout", e))?;
    std::io::copy(&mut stream, &mut out).map_err(|e| fail("relay", e))?;
    out.flush().map_err(|e| fail("stdout", e))?;
    drop(upload);
    Ok(())
}

/// Read the proxy's answer head; anything but 200 is an error carrying the
/// proxy's explanation. Returns bytes read past the head.
fn read_answer(stream: &mut TcpStream) -> Result<Vec<u8>, ProxyError> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        if buf.len() > MAX_ANSWER {
            return Err(ProxyError::Helper("the proxy answer is too long".into()));
        }
        let n = stream
            .read(&mut chunk)
            .map_err(|e| ProxyError::Helper(format!("reading the proxy answer: {e}")))?;
        if n == 0 {
            return Err(ProxyError::Helper("the proxy closed the connection".into()));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let status = head.lines().next().unwrap_or("");
    if status.split_whitespace().nth(1) == Some("200") {
        return Ok(buf[end..].to_vec());
    }
    // A refusal carries its reason in a short body; show it to the user.
    let mut rest = buf[end..].to_vec();
    let _ = stream.take(4096).read_to_end(&mut rest);
    let reason = String::from_utf8_lossy(&rest).trim().to_owned();
    Err(ProxyError::Helper(format!("{status}: {reason}")))
}
