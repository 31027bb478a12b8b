//! The transport settings: stdio, or Streamable HTTP with its OAuth
//! resource server, token exchange and per-caller limits.
//!
//! Fail closed: `--transport http` without `OA_OAUTH_ISSUER` and
//! `OA_OAUTH_RESOURCE` refuses to start naming them (there is no
//! unauthenticated HTTP mode), and so does `OA_API_KEY` with it (there is
//! no shared-key HTTP mode: every caller would act as the server). A
//! setting of the other transport refuses too, so none is ignored
//! silently. Secrets (`OA_TOKEN_EXCHANGE_CLIENT_SECRET`) are read from
//! the environment only, never from argv.

use crate::McpError;
use crate::oauth::{self, exchange};
use std::time::Duration;

/// Command-line and environment options of the transport.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// `stdio`, or `http`: Streamable HTTP at /mcp, OAuth required (docs/mcp.md).
    #[arg(long, env = "OA_TRANSPORT", default_value = "stdio", value_parser = ["stdio", "http"])]
    pub transport: String,
    /// Where --transport http listens: HOST:PORT, or `stdin` (a listening socket given as stdin).
    #[arg(long, env = "OA_HTTP_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Tool calls per minute per caller (token bucket refill; 0: no limit; HTTP default 120).
    #[arg(long, env = "OA_RATE_LIMIT_PER_MIN")]
    pub rate_limit_per_min: Option<u32>,
    /// Tool calls a caller may make at once after a quiet spell (bucket size; HTTP default 20).
    #[arg(long, env = "OA_RATE_LIMIT_BURST")]
    pub rate_limit_burst: Option<u32>,
    /// Executes one caller may have running at once (0: no limit; HTTP default 2).
    #[arg(long, env = "OA_MAX_CONCURRENCY_PER_CALLER")]
    pub max_concurrency_per_caller: Option<usize>,
}

/// Variables that only `--transport http` reads.
pub const HTTP_ONLY: &[&str] = &[
    "OA_HTTP_LISTEN",
    "OA_HTTP_ALLOWED_HOSTS",
    "OA_HTTP_MAX_SESSIONS",
    "OA_HTTP_MAX_SESSIONS_PER_CALLER",
    "OA_HTTP_MAX_CONNECTIONS",
    "OA_HTTP_SESSION_IDLE_SECS",
    "OA_OAUTH_ISSUER",
    "OA_OAUTH_RESOURCE",
    "OA_OAUTH_JWKS_URL",
    "OA_OAUTH_SCOPES",
    "OA_OAUTH_JWKS_REFRESH_SECS",
    "OA_TOKEN_EXCHANGE_URL",
    "OA_TOKEN_EXCHANGE_CLIENT_ID",
    "OA_TOKEN_EXCHANGE_CLIENT_SECRET",
    "OA_TOKEN_EXCHANGE_AUDIENCE",
    "OA_TOKEN_EXCHANGE_SCOPE",
];

/// The HTTP transport's whole configuration.
#[derive(Clone, Debug)]
pub struct Http {
    /// Listener, hosts, sessions.
    pub http: Settings,
    /// The resource server.
    pub oauth: oauth::Settings,
    /// The token exchange, when configured.
    pub exchange: Option<exchange::Settings>,
}

impl Http {
    /// Hosts the server talks to besides the API (for the egress policy).
    pub fn hosts(&self) -> Vec<String> {
        let mut hosts = self.oauth.hosts();
        hosts.extend((self.exchange.iter()).filter_map(|e| e.url.host_str().map(str::to_owned)));
        hosts.sort();
        hosts.dedup();
        hosts
    }
}

impl Http {
    /// Masked variables (name, host that gets the real value): the token
    /// exchange's client secret, to the exchange's host only.
    pub fn masked(&self) -> Vec<(String, String)> {
        (self.exchange.iter())
            .filter_map(|e| e.url.host_str())
            .map(|h| ("OA_TOKEN_EXCHANGE_CLIENT_SECRET".to_owned(), h.to_owned()))
            .collect()
    }

    /// The token endpoint whose issued tokens the wrapper masks: the
    /// exchange's (its query left out, as the proxy matches the path).
    pub fn issuers(&self) -> Vec<String> {
        (self.exchange.iter())
            .map(|x| {
                let mut u = x.url.clone();
                u.set_query(None);
                u.to_string()
            })
            .collect()
    }

    /// The request rules of the server's own OAuth traffic, so that a host
    /// it shares with the API (whose rules govern the whole host) still
    /// answers it, and a governed issuer answers nothing else: any GET on
    /// the issuer's origin (metadata, discovery and, usually, keys) and on
    /// the key set's, one POST to the token exchange.
    pub fn rules(&self) -> Vec<String> {
        let origin = |u: &url::Url| u.origin().ascii_serialization();
        let mut out = vec![format!("GET {}/**", origin(&self.oauth.issuer))];
        if let Some(j) = &self.oauth.jwks_url {
            out.push(format!("GET {}/**", origin(j)));
        }
        if let Some(x) = &self.exchange {
            out.push(format!("POST {}{}", origin(&x.url), x.url.path()));
        }
        out
    }

    /// The variables of this configuration that the jailed server must
    /// get although oajail's secret-name rule would drop them (the names
    /// contain `OAUTH` or `TOKEN`, the values are not secret). The client
    /// secret is not among them: it is masked.
    pub fn env_keep(&self) -> Vec<String> {
        let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
        (HTTP_ONLY.iter())
            .filter(|n| {
                (n.starts_with("OA_OAUTH_") || n.starts_with("OA_TOKEN_EXCHANGE_"))
                    && **n != "OA_TOKEN_EXCHANGE_CLIENT_SECRET"
                    && set(n)
            })
            .map(|n| (*n).to_owned())
            .collect()
    }
}

/// Which transport, with its settings.
#[derive(Clone, Debug)]
pub enum Transport {
    /// MCP on stdin/stdout.
    Stdio,
    /// Streamable HTTP.
    Http(Box<Http>),
}

impl Args {
    /// The per-caller limits: over HTTP, the defaults where none is given;
    /// on stdio (one caller, the local user) only those given, and none
    /// at all when none is.
    pub fn limits(&self) -> Option<crate::callers::Limits> {
        let given = self.rate_limit_per_min.is_some()
            || self.rate_limit_burst.is_some()
            || self.max_concurrency_per_caller.is_some();
        if self.transport != "http" && !given {
            return None;
        }
        let (d, stdio) = (crate::callers::Limits::default(), self.transport != "http");
        let or = |v: Option<u32>, http: u32| v.unwrap_or(if stdio { 0 } else { http });
        Some(crate::callers::Limits {
            per_min: or(self.rate_limit_per_min, d.per_min),
            burst: or(self.rate_limit_burst, d.burst),
            max_concurrency: (self.max_concurrency_per_caller).unwrap_or(if stdio {
                0
            } else {
                d.max_concurrency
            }),
        })
    }

    /// The transport, from these options and the environment (`env`).
    pub fn transport(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Transport, McpError> {
        let get = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        if let Some(mode) = get("OA_MCP_MODE")
            && mode.trim().to_ascii_lowercase() != self.transport
        {
            return Err(McpError::Config {
                field: "OA_MCP_MODE",
                message: format!(
                    "{mode:?} disagrees with the transport {:?} (OA_TRANSPORT / --transport)",
                    self.transport
                ),
            });
        }
        if self.transport == "stdio" {
            if let Some(name) = HTTP_ONLY.iter().find(|n| get(n).is_some()) {
                return Err(McpError::Env {
                    name: (*name).to_owned(),
                    message: "is only used with --transport http (OA_TRANSPORT=http)".into(),
                });
            }
            return Ok(Transport::Stdio);
        }
        if get("OA_API_KEY").is_some() {
            return Err(McpError::Config {
                field: "OA_API_KEY",
                message: "is not used over HTTP: a shared key would let every caller act as this server; \
                          unset it, and set OA_TOKEN_EXCHANGE_URL so each caller's executes carry a token of its own"
                    .into(),
            });
        }
        let mut oauth = oauth::Settings::parse(
            get("OA_OAUTH_ISSUER").as_deref(),
            get("OA_OAUTH_RESOURCE").as_deref(),
            get("OA_OAUTH_JWKS_URL").as_deref(),
            get("OA_OAUTH_SCOPES").as_deref(),
        )?
        .ok_or(McpError::Config {
            field: "--transport http",
            message: "needs OA_OAUTH_ISSUER and OA_OAUTH_RESOURCE (the authorization server \
                      and this server's resource identifier): there is no unauthenticated HTTP mode"
                .into(),
        })?;
        if let Some(v) = get("OA_OAUTH_JWKS_REFRESH_SECS") {
            let secs = v.trim().parse::<u64>().ok().filter(|n| *n > 0);
            oauth.jwks_min_refresh = Duration::from_secs(secs.ok_or(McpError::Env {
                name: "OA_OAUTH_JWKS_REFRESH_SECS".into(),
                message: format!("{v:?} is not a positive number of seconds"),
            })?);
        }
        let exchange = exchange::Settings::parse(
            get("OA_TOKEN_EXCHANGE_URL").as_deref(),
            get("OA_TOKEN_EXCHANGE_CLIENT_ID").as_deref(),
            get("OA_TOKEN_EXCHANGE_CLIENT_SECRET").as_deref(),
            get("OA_TOKEN_EXCHANGE_AUDIENCE").as_deref(),
            get("OA_TOKEN_EXCHANGE_SCOPE").as_deref(),
        )?;
        let http = http_settings(&self.listen, &get)?;
        Ok(Transport::Http(Box::new(Http {
            http,
            oauth,
            exchange,
        })))
    }
}

fn http_settings(listen: &str, get: &dyn Fn(&str) -> Option<String>) -> Result<Settings, McpError> {
    let number = |name: &'static str, default: usize| -> Result<usize, McpError> {
        match get(name) {
            None => Ok(default),
            Some(v) => match v.trim().parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(McpError::Env {
                    name: name.to_owned(),
                    message: format!("{v:?} is not a positive integer"),
                }),
            },
        }
    };
    let d = Settings::default();
    Ok(Settings {
        listen: crate::listen::Listen::parse(listen)?,
        allowed_hosts: get("OA_HTTP_ALLOWED_HOSTS")
            .map(|v| {
                v.split(',')
                    .map(|h| h.trim().to_owned())
                    .filter(|h| !h.is_empty())
                    .collect()
            })
            .unwrap_or_default(),
        max_sessions: number("OA_HTTP_MAX_SESSIONS", d.max_sessions)?,
        max_sessions_per_caller: number(
            "OA_HTTP_MAX_SESSIONS_PER_CALLER",
            d.max_sessions_per_caller,
        )?,
        max_connections: number("OA_HTTP_MAX_CONNECTIONS", d.max_connections)?,
        session_idle: Duration::from_secs(number(
            "OA_HTTP_SESSION_IDLE_SECS",
            d.session_idle.as_secs() as usize,
        )? as u64),
    })
}

/// The HTTP transport's settings ([`crate::http`]).
#[derive(Clone, Debug)]
pub struct Settings {
    /// Where to listen.
    pub listen: crate::listen::Listen,
    /// `Host` values accepted besides loopback and the resource's host;
    /// `*` accepts any.
    pub allowed_hosts: Vec<String>,
    /// Legacy sessions open at once, all callers together.
    pub max_sessions: usize,
    /// Legacy sessions one caller may hold.
    pub max_sessions_per_caller: usize,
    /// Connections served at once (more wait in the listen backlog).
    pub max_connections: usize,
    /// Idle time after which a legacy session is closed.
    pub session_idle: std::time::Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            listen: crate::listen::Listen::Addr(
                "127.0.0.1:8080"
                    .parse()
                    .unwrap_or(std::net::SocketAddr::from(([127, 0, 0, 1], 8080))),
            ),
            allowed_hosts: Vec::new(),
            max_sessions: 1000,
            max_sessions_per_caller: 32,
            max_connections: 1024,
            session_idle: std::time::Duration::from_secs(600),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn args(transport: &str) -> Args {
        Args {
            transport: transport.into(),
            listen: "127.0.0.1:0".into(),
            rate_limit_per_min: None,
            rate_limit_burst: None,
            max_concurrency_per_caller: None,
        }
    }

    fn run(transport: &str, vars: &[(&str, &str)]) -> Result<Transport, McpError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        args(transport).transport(&|k| map.get(k).cloned())
    }

    #[test]
    fn http_without_oauth_refuses_naming_the_settings() {
        let e = run("http", &[]).unwrap_err().to_string();
        assert!(
            e.contains("OA_OAUTH_ISSUER") && e.contains("OA_OAUTH_RESOURCE"),
            "{e}"
        );
        let e = run(
            "http",
            &[
                ("OA_OAUTH_ISSUER", "https://as.example"),
                ("OA_OAUTH_RESOURCE", "https://mcp.example/mcp"),
                ("OA_API_KEY", "k"),
            ],
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("config OA_API_KEY:"), "{e}");
    }

    #[test]
    fn settings_of_the_other_transport_refuse() {
        let e = run("stdio", &[("OA_OAUTH_ISSUER", "https://as.example")])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("config OA_OAUTH_ISSUER:"), "{e}");
        let e = run("stdio", &[("OA_MCP_MODE", "http")])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("config OA_MCP_MODE:"), "{e}");
        assert!(matches!(
            run("stdio", &[("OA_MCP_MODE", "stdio")]),
            Ok(Transport::Stdio)
        ));
    }

    #[test]
    fn a_complete_http_configuration() {
        let t = run(
            "http",
            &[
                ("OA_OAUTH_ISSUER", "https://as.example"),
                ("OA_OAUTH_RESOURCE", "https://mcp.example/mcp"),
                ("OA_TOKEN_EXCHANGE_URL", "https://sts.example/token"),
                ("OA_TOKEN_EXCHANGE_CLIENT_ID", "mcp"),
                ("OA_TOKEN_EXCHANGE_CLIENT_SECRET", "s"),
                ("OA_HTTP_MAX_SESSIONS", "5"),
            ],
        )
        .unwrap();
        let Transport::Http(h) = t else { panic!() };
        assert_eq!(h.http.max_sessions, 5);
        assert_eq!(h.hosts(), vec!["as.example", "sts.example"]);
    }
}
