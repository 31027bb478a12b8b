//! The lab's listeners: TCP/TLS and UDP sinks on every lab address, the DNS
//! responder, an ICMP logger, and unix-socket stand-ins for ssh-agent,
//! D-Bus, docker, X11, syslog and an abstract socket. Each records every
//! contact as one [`SinkEvent`] JSON line in `logs/events.jsonl`.
//!
//! Sinks never answer with data (except DNS, and the HTTPS sink's `200`
//! acknowledgement), so a jailed process that reaches one learns nothing;
//! the point is the record.

use crate::dns::{Responder, query_name};
use crate::labspec::{SinkEvent, TLS_SINK_CA, TLS_SINK_PORT};
use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Shared append-only event log.
#[derive(Clone)]
pub struct EventLog(Arc<Mutex<File>>);

impl EventLog {
    /// Create (truncate) the log file.
    pub fn create(path: &Path) -> std::io::Result<EventLog> {
        Ok(EventLog(Arc::new(Mutex::new(File::create(path)?))))
    }

    /// Append one event (best effort: a poisoned lock still writes).
    pub fn record(&self, ev: &SinkEvent) {
        let line = serde_json::to_string(ev).unwrap_or_default();
        let mut f = match self.0.lock() {
            Ok(f) => f,
            Err(p) => p.into_inner(),
        };
        let _ = writeln!(f, "{line}");
        let _ = f.flush();
    }
}

/// Parse the SNI host name out of a TLS ClientHello record, if present.
pub fn client_hello_sni(buf: &[u8]) -> Option<String> {
    // record header (5) + handshake header (4) + version (2) + random (32)
    if buf.first() != Some(&0x16) || buf.get(5) != Some(&0x01) {
        return None;
    }
    let mut p = 5 + 4 + 2 + 32;
    let sid = usize::from(*buf.get(p)?);
    p += 1 + sid;
    let cs = usize::from(u16::from_be_bytes([*buf.get(p)?, *buf.get(p + 1)?]));
    p += 2 + cs;
    let cm = usize::from(*buf.get(p)?);
    p += 1 + cm;
    let ext_end = p + 2 + usize::from(u16::from_be_bytes([*buf.get(p)?, *buf.get(p + 1)?]));
    p += 2;
    while p + 4 <= ext_end.min(buf.len()) {
        let ty = u16::from_be_bytes([buf[p], buf[p + 1]]);
        let len = usize::from(u16::from_be_bytes([buf[p + 2], buf[p + 3]]));
        let body = buf.get(p + 4..p + 4 + len)?;
        if ty == 0 {
            // server_name_list: len(2) type(1) name_len(2) name
            let n = usize::from(u16::from_be_bytes([*body.get(3)?, *body.get(4)?]));
            return Some(String::from_utf8_lossy(body.get(5..5 + n)?).into_owned());
        }
        p += 4 + len;
    }
    None
}

fn lossy(buf: &[u8]) -> String {
    String::from_utf8_lossy(&buf[..buf.len().min(4096)]).into_owned()
}

/// What every TCP sink answers to the first bytes it receives.
pub const SINK_ACK: &str = "OAJ-SINK-ACK";

fn ack_for(first: &[u8]) -> &'static [u8] {
    let http = [&b"GET "[..], b"POST ", b"HEAD ", b"PUT ", b"CONNECT "]
        .iter()
        .any(|m| first.starts_with(m));
    if http {
        b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\nConnection: close\r\n\r\nOAJ-SINK-ACK"
    } else {
        b"OAJ-SINK-ACK\n"
    }
}

/// Accept forever on a TCP listener; log peer, bytes and SNI.
pub fn tcp_sink(listener: TcpListener, log: EventLog) {
    for conn in listener.incoming().flatten() {
        let log = log.clone();
        std::thread::spawn(move || {
            let local = conn.local_addr().map(|a| a.to_string()).unwrap_or_default();
            let peer = conn.peer_addr().map(|a| a.to_string()).unwrap_or_default();
            let mut conn = conn;
            let _ = conn.set_read_timeout(Some(Duration::from_millis(500)));
            let mut data = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n) = conn.read(&mut buf) {
                if n == 0 || data.len() > 65536 {
                    break;
                }
                if data.is_empty() {
                    // Tell the client its bytes arrived: the probe reports
                    // an escape only when it reads this back.
                    let _ = conn.write_all(ack_for(&buf[..n]));
                }
                data.extend_from_slice(&buf[..n]);
            }
            let name = client_hello_sni(&data);
            log.record(&SinkEvent {
                sink: "tcp".into(),
                local,
                peer,
                bytes: data.len(),
                data: lossy(&data),
                name,
            });
        });
    }
}

/// The lab's HTTPS sink: every parsed request is one `https` event (the
/// request line, the headers and the body as text, the SNI as `name`), and
/// every connection one `https-conn` event with the decrypted bytes as the
/// client sent them (so a request hyper refuses is still on record) or the
/// handshake error. Requests are answered `200` with [`SINK_ACK`].
pub struct HttpsSink(pub EventLog);

impl crate::tlssink::Handler for HttpsSink {
    fn request(
        &self,
        conn: &crate::tlssink::ConnInfo,
        head: http::request::Parts,
        body: bytes::Bytes,
    ) -> hyper::Response<http_body_util::Full<bytes::Bytes>> {
        let mut text = crate::tlssink::request_line(&head);
        text.push_str(&format!(
            "\nauthority: {}\n",
            crate::tlssink::request_host(&head)
        ));
        for (name, value) in &head.headers {
            text.push_str(&format!(
                "{name}: {}\n",
                String::from_utf8_lossy(value.as_bytes())
            ));
        }
        text.push('\n');
        text.push_str(&String::from_utf8_lossy(&body));
        self.0.record(&SinkEvent {
            sink: "https".into(),
            local: conn.local.clone(),
            peer: conn.peer.clone(),
            bytes: body.len(),
            data: text,
            name: conn.sni.clone(),
        });
        crate::tlssink::text(200, SINK_ACK)
    }

    fn closed(
        &self,
        conn: &crate::tlssink::ConnInfo,
        raw: &[u8],
        total: usize,
        error: Option<String>,
    ) {
        let data = match error {
            Some(e) => format!("handshake failed: {e}"),
            None => String::from_utf8_lossy(raw).into_owned(),
        };
        self.0.record(&SinkEvent {
            sink: "https-conn".into(),
            local: conn.local.clone(),
            peer: conn.peer.clone(),
            bytes: total,
            data,
            name: conn.sni.clone(),
        });
    }
}

/// Start the HTTPS sink on [`TLS_SINK_PORT`] of every lab address: a fresh
/// CA and a leaf for every lab name (`*.allowed.test`, `*.evil.test`
/// included) and address; the CA's certificate goes to `<dir>/`[`TLS_SINK_CA`].
pub fn start_https_sink(dir: &Path, log: &EventLog) -> std::io::Result<()> {
    let mut names: Vec<String> = crate::dns::TABLE
        .iter()
        .map(|(n, _)| (*n).to_owned())
        .collect();
    names.extend(["*.allowed.test", "*.evil.test"].map(str::to_owned));
    let ips: Vec<std::net::IpAddr> = (crate::labspec::LAB_ADDRESSES.iter())
        .filter_map(|(a, _)| a.parse().ok())
        .collect();
    let id = crate::tlssink::identity(&names, &ips).map_err(std::io::Error::other)?;
    let ca = dir.join(TLS_SINK_CA);
    if let Some(parent) = ca.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&ca, &id.ca_pem)?;
    let listener = TcpListener::bind(("::", TLS_SINK_PORT))?;
    listener.set_nonblocking(true)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let handler: Arc<dyn crate::tlssink::Handler> = Arc::new(HttpsSink(log.clone()));
    std::thread::spawn(move || {
        rt.block_on(async move {
            if let Ok(l) = tokio::net::TcpListener::from_std(listener) {
                crate::tlssink::serve(l, id.config, handler).await;
            }
        });
    });
    Ok(())
}

/// Receive forever on a UDP socket; log every datagram.
pub fn udp_sink(sock: UdpSocket, log: EventLog) {
    let local = sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let mut buf = [0u8; 65536];
    while let Ok((n, peer)) = sock.recv_from(&mut buf) {
        let data = &buf[..n];
        log.record(&SinkEvent {
            sink: "udp".into(),
            local: local.clone(),
            peer: peer.to_string(),
            bytes: n,
            data: lossy(data),
            name: None,
        });
    }
}

/// Serve DNS over UDP forever; every query is logged before it is answered.
pub fn dns_server(sock: UdpSocket, responder: Arc<Responder>, log: EventLog) {
    let local = sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let mut buf = [0u8; 4096];
    while let Ok((n, peer)) = sock.recv_from(&mut buf) {
        let q = &buf[..n];
        log.record(&SinkEvent {
            sink: "dns".into(),
            local: local.clone(),
            peer: peer.to_string(),
            bytes: n,
            data: lossy(q),
            name: query_name(q),
        });
        if let Some(resp) = responder.respond(q) {
            let _ = sock.send_to(&resp, peer);
        }
    }
}

/// Accept forever on a unix stream listener standing in for `name`.
pub fn unix_sink(listener: UnixListener, name: String, local: String, log: EventLog) {
    for conn in listener.incoming().flatten() {
        let mut conn = conn;
        let _ = conn.set_read_timeout(Some(Duration::from_millis(300)));
        let mut buf = [0u8; 4096];
        let n = conn.read(&mut buf).unwrap_or(0);
        log.record(&SinkEvent {
            sink: format!("unix:{name}"),
            local: local.clone(),
            peer: String::new(),
            bytes: n,
            data: lossy(&buf[..n]),
            name: None,
        });
    }
}

/// Receive forever on a unix datagram socket (a `/dev/log` stand-in).
pub fn unix_dgram_sink(sock: UnixDatagram, name: String, local: String, log: EventLog) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = sock.recv(&mut buf) {
        log.record(&SinkEvent {
            sink: format!("unix:{name}"),
            local: local.clone(),
            peer: String::new(),
            bytes: n,
            data: lossy(&buf[..n]),
            name: None,
        });
    }
}

/// A running copy of what a pty master reads into a file (an interactive
/// lab run's `cmd.stdout`).
pub struct PtyCopy {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl PtyCopy {
    /// Start copying `master`'s output to `out`.
    pub fn start(master: std::os::fd::OwnedFd, out: File) -> PtyCopy {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || pty_output(master, out, &flag));
        PtyCopy { stop, thread }
    }

    /// Copy what is still readable, then stop.
    pub fn finish(self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.thread.join();
    }
}

/// Copy until `stop` is set, then what is still readable (the lab keeps
/// the slave open, so the master never reads end-of-file; polling lets the
/// copy stop once the run is over).
fn pty_output(master: std::os::fd::OwnedFd, mut out: File, stop: &AtomicBool) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let mut master = File::from(master);
    let mut buf = [0u8; 4096];
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        let mut fds = [PollFd::new(master.as_fd(), PollFlags::POLLIN)];
        let wait = if stopping { 0u16 } else { 50 };
        match poll(&mut fds, PollTimeout::from(wait)) {
            Ok(0) if stopping => return,
            Ok(0) => continue,
            Ok(_) => {}
            Err(_) => return,
        }
        match master.read(&mut buf) {
            Ok(n) if n > 0 => {
                let _ = out.write_all(&buf[..n]);
            }
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ClientHello with only an SNI extension, built by hand.
    fn hello(host: &str) -> Vec<u8> {
        let name = host.as_bytes();
        let mut sni = vec![0, 0];
        let list_len = (name.len() + 3) as u16;
        let ext_len = list_len + 2;
        sni.extend_from_slice(&ext_len.to_be_bytes());
        sni.extend_from_slice(&list_len.to_be_bytes());
        sni.push(0);
        sni.extend_from_slice(&(name.len() as u16).to_be_bytes());
        sni.extend_from_slice(name);
        let mut body = vec![3, 3];
        body.extend_from_slice(&[7u8; 32]);
        body.extend_from_slice(&[0, 0, 2, 0x13, 0x01, 1, 0]);
        body.extend_from_slice(&(sni.len() as u16).to_be_bytes());
        body.extend_from_slice(&sni);
        let mut hs = vec![1, 0];
        hs.extend_from_slice(&(body.len() as u16).to_be_bytes());
        hs.extend_from_slice(&body);
        let mut rec = vec![0x16, 3, 1];
        rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
        rec.extend_from_slice(&hs);
        rec
    }

    #[test]
    fn sni_is_extracted() {
        assert_eq!(
            client_hello_sni(&hello("evil.test")).as_deref(),
            Some("evil.test")
        );
        assert_eq!(client_hello_sni(b"GET / HTTP/1.1\r\n"), None);
        assert_eq!(client_hello_sni(&hello("x")[..20]), None);
    }
}
