//! The contract between the harness (test process, host side) and the
//! `oajail-lab` binary (inside the lab's namespaces): the lab's fixed
//! addresses, the JSON config the harness writes, and the JSON result and
//! event logs the lab writes back.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// "Public" address that `allowed.test` resolves to in the lab.
pub const ALLOWED_V4: &str = "93.184.216.34";
/// "Public" address that `evil.test` resolves to in the lab.
pub const EVIL_V4: &str = "1.2.3.4";
/// A public-looking IPv6 sink.
pub const EVIL_V6: &str = "2606:4700::1111";
/// Cloud metadata.
pub const METADATA_V4: &str = "169.254.169.254";
/// AWS IPv6 metadata.
pub const METADATA_V6: &str = "fd00:ec2::254";
/// The lab's DNS responder (also listens on every other lab address).
pub const DNS_V4: &str = "10.53.0.53";
/// A public-looking address the lab accepts through a `local` route
/// (`5.5.5.0/24 dev lo`), on no interface: the sinks listen on every
/// address, so a connection to it reaches them.
pub const LOCAL_ROUTE_V4: &str = "5.5.5.5";
/// The lab's local route holding [`LOCAL_ROUTE_V4`].
pub const LOCAL_ROUTE_NET: &str = "5.5.5.0/24";
/// A well-known public resolver address, held by the lab.
pub const PUBLIC_DNS_V4: &str = "8.8.8.8";

/// Every address put on the lab's dummy interface, with why it is there.
pub const LAB_ADDRESSES: &[(&str, &str)] = &[
    (ALLOWED_V4, "public: allowed.test"),
    (EVIL_V4, "public: evil.test"),
    (PUBLIC_DNS_V4, "public resolver"),
    (DNS_V4, "lab resolver (RFC 1918)"),
    (METADATA_V4, "cloud metadata (link-local)"),
    ("169.254.170.2", "ECS task metadata"),
    ("100.100.100.200", "Alibaba metadata (CGNAT)"),
    ("100.64.0.1", "CGNAT / Tailscale"),
    ("168.63.129.16", "Azure wireserver (public range)"),
    ("10.0.0.5", "RFC 1918"),
    ("172.16.0.10", "RFC 1918"),
    ("192.168.1.10", "RFC 1918"),
    (EVIL_V6, "public IPv6"),
    (METADATA_V6, "AWS IPv6 metadata (ULA)"),
];

/// TCP ports with a sink on every lab address (TLS ClientHellos are parsed for SNI).
pub const TCP_SINK_PORTS: &[u16] = &[22, 25, 80, 443, 2375, 6379, 8080, 9999];
/// TCP port with an HTTPS sink (HTTP/1.1 and HTTP/2) on every lab address:
/// its leaf names every lab name and address, signed by a CA `oajail-lab`
/// makes in memory per run (its key never leaves the lab process).
pub const TLS_SINK_PORT: u16 = 8443;
/// Where, in the lab directory, `oajail-lab` writes that CA's certificate
/// before the command starts (for `tlsTerminate.extraCaCertPaths`).
pub const TLS_SINK_CA: &str = "tls/sink-ca.pem";
/// A listener the command asks the lab for while it runs (E9: a loopback
/// address other than the proxy's, at the proxy's port, which is known
/// only inside the jail): the command writes `ADDR PORT` to this file in
/// its working directory (the lab's workspace), the lab opens a TCP sink
/// there and answers in [`LISTEN_REPLY`] with `ok` or `error: …`.
pub const LISTEN_REQUEST: &str = ".oaj-lab-listen";
/// See [`LISTEN_REQUEST`].
pub const LISTEN_REPLY: &str = ".oaj-lab-listening";
/// UDP ports with a sink on every lab address (53 is the DNS responder).
pub const UDP_SINK_PORTS: &[u16] = &[123, 443, 9999];

/// How the lab's DNS responder answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DnsMode {
    /// Fixed answers from the lab table, NXDOMAIN otherwise.
    #[default]
    Fixed,
    /// `rebind.test` alternates between a public address and 127.0.0.1.
    Rebind,
    /// Fixed answers from the lab table; every other name resolves to the
    /// `allowed.test` sink (`oajail audit`: whatever domain a user's policy
    /// allows, the lab's sink answers it and records what it receives).
    Sinkhole,
}

/// What the harness asks the lab to do for one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabConfig {
    /// The lab directory (home, workspace, logs, sockets).
    pub dir: PathBuf,
    /// The command to run inside the lab (usually `oajail … -- oajail-probe …`).
    pub command: Vec<String>,
    /// The complete environment of the command.
    pub env: Vec<(String, String)>,
    /// Working directory of the command.
    pub cwd: PathBuf,
    /// The caller's uid/gid; when non-zero the command runs as that uid.
    pub uid: u32,
    /// See `uid`.
    pub gid: u32,
    /// Give the command a pty (raw mode) as stdin and controlling terminal.
    pub pty: bool,
    /// With `pty`: stdout on the pty too (an interactive run, where oajail
    /// gives the command a pty of the jail's own); the lab copies what the
    /// master reads to `cmd.stdout`.
    #[serde(default)]
    pub pty_output: bool,
    /// Leak extra descriptors (dirfd to the fake home, a socket) into oajail.
    pub leak_fds: bool,
    /// Plant a `user` key `(description, payload)` in the session keyring.
    pub keyring_canary: Option<(String, String)>,
    /// Text a daemonised process carries in argv; checked after the run.
    pub daemon_marker: Option<String>,
    /// Forbid user namespaces for the command (fail-closed test).
    pub no_userns: bool,
    /// A seccomp filter refuses the command user namespaces (`EPERM`), as
    /// a container's default profile does (`oajail audit --tier container`).
    #[serde(default)]
    pub refuse_userns: bool,
    /// Bind the fake home a second time at `<lab>/home-alias` (in the lab's
    /// mount namespace) before the run.
    #[serde(default)]
    pub alias_home: bool,
    /// Abstract unix socket name the lab listens on.
    pub abstract_name: String,
    /// DNS answering mode.
    pub dns: DnsMode,
    /// Kill the command after this long.
    pub timeout_ms: u64,
    /// SIGKILL the command (oajail itself) after this long: the jail must die with it.
    #[serde(default)]
    pub kill_after_ms: Option<u64>,
    /// Feed this file to the command's stdin, then keep stdin open for
    /// `stdin_hold_ms` before closing it (for servers that exit on EOF).
    #[serde(default)]
    pub stdin_file: Option<PathBuf>,
    /// See `stdin_file`.
    #[serde(default)]
    pub stdin_hold_ms: u64,
    /// Host directories the lab overlays, in its own mount namespace, with
    /// `<dir>/abs/<i>/upper` (the i-th entry): the fake files a policy's
    /// absolute paths name, never written on the host.
    #[serde(default)]
    pub overlays: Vec<PathBuf>,
    /// Run in the namespaces `oajail-lab` starts in, which the caller has
    /// prepared as [`LabNetwork::Prepared`] describes, instead of making
    /// its own (inside a container, where no namespace can be made).
    #[serde(default)]
    pub network: LabNetwork,
}

/// Where the lab's network comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LabNetwork {
    /// `oajail-lab` makes a network and a mount namespace of its own (plus
    /// a user namespace when not root) and configures them.
    #[default]
    Own,
    /// The namespaces `oajail-lab` starts in were prepared from outside
    /// (`oajail-container-matrix`, from the host, in a container's network
    /// namespace): loopback up, the lab interface with every
    /// [`LAB_ADDRESSES`] entry and [`network_batch`]'s routes, no other
    /// route, `/etc/resolv.conf` naming [`DNS_V4`], ping and low ports
    /// open to every group and user. The lab checks the addresses and the
    /// resolver and refuses what needs namespaces of its own (overlays, a
    /// second mount of the home, no user namespaces).
    Prepared,
}

/// Selected by `OAJAIL_SECURITY_LAB=prepared` in the harness's environment.
pub const LAB_NETWORK_ENV: &str = "OAJAIL_SECURITY_LAB";

impl LabNetwork {
    /// From the environment: [`LabNetwork::Prepared`] when
    /// `OAJAIL_SECURITY_LAB=prepared`. Any other value fails the run, not
    /// the lab silently made another way.
    pub fn from_env() -> Result<LabNetwork, String> {
        match std::env::var(LAB_NETWORK_ENV).as_deref() {
            Err(_) | Ok("" | "own") => Ok(LabNetwork::Own),
            Ok("prepared") => Ok(LabNetwork::Prepared),
            Ok(other) => Err(format!(
                "{LAB_NETWORK_ENV}={other}: expected own or prepared"
            )),
        }
    }
}

/// The `ip -batch` lines that give a network namespace the lab's network
/// once loopback is up and `dev` exists: every lab address on `dev`, the
/// default routes through it, and the local route of [`LOCAL_ROUTE_NET`].
pub fn network_batch(dev: &str) -> String {
    let mut batch = String::new();
    for (addr, _) in LAB_ADDRESSES {
        if addr.contains(':') {
            batch.push_str(&format!("addr add {addr}/128 dev {dev} nodad\n"));
        } else {
            batch.push_str(&format!("addr add {addr}/32 dev {dev}\n"));
        }
    }
    batch.push_str(&format!(
        "route add default dev {dev}\nroute add ::/0 dev {dev}\n"
    ));
    // F19: addresses the lab accepts through a local route, on no interface.
    batch.push_str(&format!("route add local {LOCAL_ROUTE_NET} dev lo\n"));
    batch
}

/// The lab's `/etc/resolv.conf`. The search domain is for E8: an allowed
/// name that does not exist must not be retried as `<name>.corp.test`.
pub fn resolv_conf() -> String {
    format!("nameserver {DNS_V4}\nsearch corp.test\noptions timeout:1 attempts:1\n")
}

/// What the lab saw, written to `lab-result.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LabResult {
    /// The command's exit code, if it exited.
    pub exit_code: Option<i32>,
    /// The signal that killed the command, if any.
    pub signal: Option<i32>,
    /// The lab killed the command at its timeout.
    pub timed_out: bool,
    /// Wall time of the command, in milliseconds.
    #[serde(default)]
    pub elapsed_ms: u64,
    /// Bytes found in the pty's input queue after the run (TIOCSTI), if a pty was used.
    pub pty_injected: Option<usize>,
    /// How the pty's terminal state differs after the run from before it
    /// (termios flags, control characters), if a pty was used and it does.
    #[serde(default)]
    pub pty_state_changed: Option<String>,
    /// Processes carrying the daemon marker still alive 1 s after the run.
    pub leftover_daemons: usize,
    /// Set when the lab itself failed; the run then proves nothing.
    pub lab_error: Option<String>,
    /// Sinks a prepared lab could not open, and why (the ICMP logger needs
    /// `CAP_NET_RAW`, which uid 1000 in a container lacks): an attack over
    /// them is seen only by the probe's own verdict.
    #[serde(default)]
    pub unwatched: Vec<String>,
}

/// One thing a sink or listener saw. Any event in a jailed run is an escape
/// unless the test expected traffic to that sink.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkEvent {
    /// `tcp`, `udp`, `dns`, `icmp`, `unix:<name>`, `abstract`, `leak`,
    /// `https` (one parsed request), `https-conn` (one TLS connection).
    pub sink: String,
    /// Local address (or socket path) that was reached.
    pub local: String,
    /// Peer address, if known.
    pub peer: String,
    /// Bytes received (first 4 KiB only are kept in `data`).
    pub bytes: usize,
    /// Received data, lossy UTF-8, for canary scanning.
    pub data: String,
    /// TLS SNI, or the DNS query name.
    pub name: Option<String>,
}
