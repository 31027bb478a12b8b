//! The run's certificate authority, the leaf certificates it mints per host
//! (cached), and the TLS configurations of both sides of a terminated
//! tunnel.
//!
//! The CA is either loaded from `tlsTerminate.caCertPath`/`caKeyPath` by the
//! supervisor or made in memory when the proxy starts; its private key only
//! ever lives in this process. Leaves are ECDSA P-256 (cheap to make and to
//! handshake with), valid from a day ago for at most 99 days and never past
//! the CA, with the host as the only subject alternative name.
use crate::ProxyError;
use oajail_policy::host::Host;
use oajail_policy::l7::TlsTerminate;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Leaves kept at once; the cache is emptied when it is full.
const LEAF_CACHE: usize = 1024;

/// Everything a terminated tunnel needs, built once per run.
pub(crate) struct Mitm {
    issuer: Issuer<'static, KeyPair>,
    ca_der: CertificateDer<'static>,
    ca_pem: String,
    leaves: Mutex<HashMap<String, Arc<ServerConfig>>>,
    /// The host's roots as read once at start: the upstream verifies with
    /// them and the jail's trust bundle repeats them.
    native: HostRoots,
    /// Upstream TLS: the host's roots plus `extraCaCertPaths`, ALPN h2 and
    /// http/1.1.
    pub upstream: Arc<ClientConfig>,
    /// Terminated tunnels open at once (`maxTunnels`).
    pub tunnels: Arc<tokio::sync::Semaphore>,
    /// Deadline of each TLS handshake (`handshakeTimeoutMs`).
    pub handshake_timeout: Duration,
}

fn ca_error(what: impl std::fmt::Display) -> ProxyError {
    ProxyError::Ca(what.to_string())
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl Mitm {
    /// Load or make the CA and build the upstream configuration.
    pub(crate) fn new(tls: Option<&TlsTerminate>) -> Result<Self, ProxyError> {
        let (issuer, ca_der) =
            match tls.and_then(|t| t.ca_cert_path.as_ref().zip(t.ca_key_path.as_ref())) {
                Some((cert, key)) => load_ca(cert, key)?,
                None => ephemeral_ca()?,
            };
        let ca_pem = pem_of(&ca_der);
        let native = HostRoots::read();
        let extra = tls
            .map(|t| t.extra_ca_cert_paths.as_slice())
            .unwrap_or_default();
        let defaults = oajail_policy::l7::DEFAULT_MAX_TUNNELS;
        let max = tls.map_or(defaults, |t| t.max_tunnels);
        let ms = tls.map_or(oajail_policy::l7::DEFAULT_HANDSHAKE_TIMEOUT_MS, |t| {
            t.handshake_timeout_ms
        });
        Ok(Self {
            issuer,
            ca_der,
            ca_pem,
            leaves: Mutex::new(HashMap::new()),
            upstream: Arc::new(upstream_config(&native.certs, extra)?),
            native,
            tunnels: Arc::new(tokio::sync::Semaphore::new(max as usize)),
            handshake_timeout: Duration::from_millis(u64::from(ms)),
        })
    }

    /// The CA certificate (PEM) for the jail's trust bundle.
    pub(crate) fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// How many of the host's roots were found.
    pub(crate) fn host_roots(&self) -> usize {
        self.native.certs.len()
    }

    /// The jail's trust bundle: the host's roots (the blocks the upstream
    /// side parsed) followed by the CA certificate. Clients inside the jail
    /// reach real hosts only through this proxy, so these roots are what a
    /// non-terminated (opaque) tunnel needs, and the CA is what a terminated
    /// one needs. Both parts end with a newline.
    pub(crate) fn trust_bundle(&self) -> String {
        [self.native.pem.as_str(), &self.ca_pem].concat()
    }

    /// The server configuration presenting a leaf for `host` (cached).
    pub(crate) fn server_config(&self, host: &Host) -> Result<Arc<ServerConfig>, String> {
        let key = host.to_string();
        if let Some(found) = self.cache().get(&key) {
            return Ok(found.clone());
        }
        let made = Arc::new(self.mint(host)?);
        let mut cache = self.cache();
        if cache.len() >= LEAF_CACHE {
            cache.clear();
        }
        cache.insert(key, made.clone());
        Ok(made)
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<ServerConfig>>> {
        // A panic while holding the lock cannot leave the map inconsistent.
        self.leaves.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn mint(&self, host: &Host) -> Result<ServerConfig, String> {
        let mut params = CertificateParams::default();
        params.subject_alt_names = vec![match host.ip() {
            Some(ip) => SanType::IpAddress(ip),
            None => SanType::DnsName(host.to_string().try_into().map_err(|e| format!("{e}"))?),
        }];
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, host.to_string());
        params.distinguished_name = dn;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::days(1);
        params.not_after = now + time::Duration::days(99);
        let key = KeyPair::generate().map_err(|e| format!("leaf key: {e}"))?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| format!("leaf certificate: {e}"))?;
        let chain = vec![cert.der().clone(), self.ca_der.clone()];
        let key_der = PrivateKeyDer::try_from(key.serialize_der()).map_err(|e| e.to_string())?;
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(chain, key_der)
            .map_err(|e| e.to_string())?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// The host's roots, read once per run.
struct HostRoots {
    /// PEM text, each block ending with a newline: the certificate blocks
    /// of the system bundle file as written, or the certificates re-encoded
    /// where the directories had to be read.
    pem: String,
    certs: Vec<CertificateDer<'static>>,
}

impl HostRoots {
    /// Read the bundle file OpenSSL itself would read (`SSL_CERT_FILE`, else
    /// the distribution's file) and keep its certificate blocks as written:
    /// re-encoding what `rustls-native-certs` parses from the file *and* the
    /// hashed directory (the same certificates twice:
    /// `update-ca-certificates` and its kin write both) cost 7–11 ms of
    /// every start. A host with no bundle file, or an `SSL_CERT_DIR` naming
    /// a directory of its own, takes that slower path so no root the host
    /// trusts is left out.
    fn read() -> Self {
        let file = openssl_probe::probe().cert_file;
        if only_distribution_dirs(std::env::var_os("SSL_CERT_DIR").as_deref())
            && let Some(text) = file.and_then(|f| std::fs::read_to_string(f).ok())
        {
            let certs: Vec<_> = CertificateDer::pem_slice_iter(text.as_bytes())
                .filter_map(Result::ok)
                .collect();
            if let Some(pem) = certificate_blocks(&text, certs.len())
                && !certs.is_empty()
            {
                return Self { pem, certs };
            }
        }
        let certs = rustls_native_certs::load_native_certs().certs;
        let pem = certs.iter().map(pem_of).collect();
        Self { pem, certs }
    }
}

/// The `CERTIFICATE` blocks of `text`, each as written; `None` unless there
/// are exactly `parsed` of them, each holding no other block. Nothing else
/// of the file crosses into the jail: not its comments, not a `TRUSTED
/// CERTIFICATE`, and not a private key someone concatenated into the bundle
/// that `SSL_CERT_FILE` names (the parsed-and-re-encoded path is taken
/// whenever the text is anything but plain certificate blocks).
fn certificate_blocks(text: &str, parsed: usize) -> Option<String> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut count = 0;
    while let Some(start) = rest.find(BEGIN) {
        let block = &rest[start..];
        let end = block.find(END)? + END.len();
        if block[BEGIN.len()..end].contains("-----BEGIN") {
            return None;
        }
        out.push_str(&block[..end]);
        out.push('\n');
        count += 1;
        rest = &block[end..];
    }
    (count == parsed).then_some(out)
}

/// Whether `SSL_CERT_DIR` (unset, or a `:`-separated list) names only the
/// distribution's own certificate directories, which hold what its bundle
/// file holds.
fn only_distribution_dirs(var: Option<&std::ffi::OsStr>) -> bool {
    let Some(var) = var else { return true };
    std::env::split_paths(var).all(|dir| {
        dir.as_os_str().is_empty() || openssl_probe::candidate_cert_dirs().any(|c| c == dir)
    })
}

fn pem_of(der: &CertificateDer<'_>) -> String {
    let body = pem::encode(&pem::Pem::new("CERTIFICATE", der.to_vec()));
    body.replace("\r\n", "\n")
}

fn ephemeral_ca() -> Result<(Issuer<'static, KeyPair>, CertificateDer<'static>), ProxyError> {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "oajail per-run TLS termination CA");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(1);
    params.not_after = now + time::Duration::days(100);
    let key = KeyPair::generate().map_err(ca_error)?;
    let cert = params.self_signed(&key).map_err(ca_error)?;
    Ok((Issuer::new(params, key), cert.der().clone()))
}

fn load_ca(
    cert_path: &str,
    key_path: &str,
) -> Result<(Issuer<'static, KeyPair>, CertificateDer<'static>), ProxyError> {
    let read = |path: &str, what: &str| {
        std::fs::read_to_string(path).map_err(|e| {
            ca_error(format!(
                "network.tlsTerminate.{what}: cannot read {path}: {e}"
            ))
        })
    };
    let cert_pem = read(cert_path, "caCertPath")?;
    let key = KeyPair::from_pem(&read(key_path, "caKeyPath")?)
        .map_err(|e| ca_error(format!("network.tlsTerminate.caKeyPath: {key_path}: {e}")))?;
    let der = CertificateDer::from_pem_slice(cert_pem.as_bytes())
        .map_err(|e| ca_error(format!("network.tlsTerminate.caCertPath: {cert_path}: {e}")))?;
    let issuer = Issuer::from_ca_cert_der(&der, key)
        .map_err(|e| ca_error(format!("network.tlsTerminate.caCertPath: {cert_path}: {e}")))?;
    Ok((issuer, der.into_owned()))
}

/// The host's roots (as `SSL_CERT_FILE`/`SSL_CERT_DIR` or the system store
/// name them) plus every certificate of `extraCaCertPaths`.
fn upstream_config(
    native: &[CertificateDer<'static>],
    extra: &[String],
) -> Result<ClientConfig, ProxyError> {
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(native.iter().cloned());
    for path in extra {
        let text = std::fs::read(path).map_err(|e| {
            ca_error(format!(
                "network.tlsTerminate.extraCaCertPaths: cannot read {path}: {e}"
            ))
        })?;
        let certs: Vec<_> = CertificateDer::pem_slice_iter(&text)
            .filter_map(Result::ok)
            .collect();
        if certs.is_empty() {
            return Err(ca_error(format!(
                "network.tlsTerminate.extraCaCertPaths: {path} holds no PEM certificate"
            )));
        }
        roots.add_parsable_certificates(certs);
    }
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(ca_error)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;
    use std::path::Path;

    #[test]
    fn a_cert_dir_of_its_own_takes_the_slow_path() {
        assert!(only_distribution_dirs(None));
        let system = openssl_probe::candidate_cert_dirs()
            .next()
            .map(Path::to_owned);
        let system = system.expect("this host has a certificate directory");
        assert!(only_distribution_dirs(Some(system.as_os_str())));
        let mixed = format!("{}:/var/tmp/own-certs", system.display());
        assert!(!only_distribution_dirs(Some(OsStr::new(&mixed))));
        assert!(!only_distribution_dirs(Some(OsStr::new(
            "/var/tmp/own-certs"
        ))));
    }

    #[test]
    fn only_certificate_blocks_cross_into_the_bundle() {
        let cert = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----";
        let key = "-----BEGIN PRIVATE KEY-----\nBBBB\n-----END PRIVATE KEY-----";
        let text = format!("# a root\n{cert}\n{key}\n# another\n{cert}\n");
        let got = certificate_blocks(&text, 2).expect("two plain blocks");
        assert_eq!(got, format!("{cert}\n{cert}\n"));
        assert!(certificate_blocks(&text, 3).is_none(), "a count mismatch");
        let nested = format!("-----BEGIN CERTIFICATE-----\n{key}\n-----END CERTIFICATE-----\n");
        assert!(
            certificate_blocks(&nested, 1).is_none(),
            "a block inside a block"
        );
        let open = "-----BEGIN CERTIFICATE-----\nAAAA\n";
        assert!(
            certificate_blocks(open, 1).is_none(),
            "an unterminated block"
        );
    }

    #[test]
    fn the_bundle_is_the_host_text_then_the_ca() {
        let mitm = Mitm::new(None).expect("an ephemeral CA");
        let bundle = mitm.trust_bundle();
        assert!(bundle.ends_with(mitm.ca_pem()));
        assert!(!bundle.contains("-----END CERTIFICATE----------BEGIN"));
        let roots = CertificateDer::pem_slice_iter(bundle.as_bytes()).count();
        assert_eq!(roots, mitm.host_roots() + 1);
    }
}
