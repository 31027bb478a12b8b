//! srt 0.0.83's settings schema as data, and the walker that checks a
//! document against it.
//!
//! The tables mirror `SandboxRuntimeConfigSchema` in srt's
//! `dist/sandbox/sandbox-config.js` key by key: the same types, required keys,
//! ranges, and strict objects (`credentials`, its `awsPairs`/`sigv4`, and
//! `{path, literal}` entries refuse unknown keys; every other srt object
//! ignores them). What srt does silently, oajail reports: each key it accepts
//! but does not implement gives one warning naming the key, and so does an
//! unknown key. The `"oajail"` object is oajail's own and strict throughout.
//!
//! The walker (`check.rs`) only checks; `srt.rs` then reads the implemented keys out of
//! the (now well-typed) document and normalises them.

use crate::domain::ListKind;

/// Largest integer a JSON number keeps exactly in JavaScript (2^53 - 1).
pub(crate) const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

const MACOS: &str = "accepted but not implemented on linux (ignored)";
const L7: &str = "http request filtering is not implemented (ignored)";
const PLAINTEXT_INJECT: &str =
    "oajail swaps a masked value only inside terminated tls, never over plain http (ignored)";

/// The type of a value.
pub(crate) enum Ty {
    Bool,
    Str,
    NonEmpty,
    /// A string of `min..=max` characters.
    StrLen(usize, usize),
    Int(i64, i64),
    /// `null` or the inner type.
    Nullable(&'static Ty),
    List(&'static Ty),
    /// A list of at least one element.
    List1(&'static Ty),
    /// An object with free keys and values of one type.
    Record(&'static Ty),
    Object(&'static Obj),
    OneOf(&'static [&'static str]),
    /// An absolute path (srt `binaryPathSchema`).
    AbsPath,
    Domain(ListKind),
    /// An IP literal or CIDR range.
    Address,
    Url,
    Uuid,
    EnvName,
    /// An environment variable name, optionally ending in `*`.
    EnvPattern,
    /// A macOS XPC name: `*` only as the last character.
    MachName,
    /// A filesystem entry: a path, or `{"path": …, "literal": true}`.
    Entry,
    /// `[low, high]` ports, `high - low <= 64`.
    PortRange,
    /// No JSON value is valid (srt wants a JavaScript function).
    Never(&'static str),
}

/// What oajail does with a key.
pub(crate) enum Use {
    /// Read into the policy.
    Used,
    /// Checked, then ignored with this warning.
    Ignored(&'static str),
}

pub(crate) struct Field {
    pub(crate) name: &'static str,
    pub(crate) ty: Ty,
    pub(crate) required: bool,
    pub(crate) using: Use,
}

pub(crate) struct Obj {
    pub(crate) fields: &'static [Field],
    /// Unknown keys are errors (srt `.strict()`), not warnings.
    pub(crate) strict: bool,
}

const fn req(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        required: true,
        using: Use::Used,
    }
}

const fn opt(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        required: false,
        using: Use::Used,
    }
}

const fn ign(name: &'static str, ty: Ty, why: &'static str) -> Field {
    Field {
        name,
        ty,
        required: false,
        using: Use::Ignored(why),
    }
}

/// The whole settings document.
pub(crate) static ROOT: Obj = Obj {
    strict: false,
    fields: &[
        req("network", Ty::Object(&NETWORK)),
        req("filesystem", Ty::Object(&FILESYSTEM)),
        opt("credentials", Ty::Object(&CREDENTIALS)),
        ign(
            "ignoreViolations",
            Ty::Record(&Ty::List(&Ty::Str)),
            "violation reports are not filtered; enforcement is unchanged (ignored)",
        ),
        opt("enableWeakerNestedSandbox", Ty::Bool),
        opt("allowNestedUserNamespaces", Ty::Bool),
        ign("enableWeakerNetworkIsolation", Ty::Bool, MACOS),
        ign("allowAppleEvents", Ty::Bool, MACOS),
        ign(
            "ripgrep",
            Ty::Object(&RIPGREP),
            "oajail does not use ripgrep to find protected files (ignored)",
        ),
        ign(
            "mandatoryDenySearchDepth",
            Ty::Int(1, 10),
            "oajail protects the mandatory-deny names at any depth (ignored)",
        ),
        ign("allowPty", Ty::Bool, MACOS),
        ign(
            "seccomp",
            Ty::Object(&SECCOMP),
            "oajail installs its own seccomp filter, not srt's apply-seccomp (ignored)",
        ),
        ign(
            "bwrapPath",
            Ty::AbsPath,
            "oajail does not use bubblewrap (ignored)",
        ),
        ign(
            "socatPath",
            Ty::AbsPath,
            "oajail does not use socat (ignored)",
        ),
        ign(
            "javaAgentJarPath",
            Ty::AbsPath,
            "no jvm proxy agent is injected; java reads the proxy variables only if told to (ignored)",
        ),
        ign("windows", Ty::Object(&WINDOWS), "windows only (ignored)"),
        opt("git", Ty::Object(&GIT)),
        opt("oajail", Ty::Object(&OAJAIL)),
        // Editors add a schema reference; srt strips it like any unknown key.
        opt("$schema", Ty::Str),
    ],
};

static NETWORK: Obj = Obj {
    strict: false,
    fields: &[
        req("allowedDomains", Ty::List(&Ty::Domain(ListKind::Allow))),
        req("deniedDomains", Ty::List(&Ty::Domain(ListKind::Deny))),
        opt("deniedDomainReasons", Ty::Record(&Ty::NonEmpty)),
        // oajail has no ask callback, so it is always strict: nothing to do.
        opt("strictAllowlist", Ty::Bool),
        opt("deniedResolvedAddresses", Ty::List(&Ty::Address)),
        ign(
            "allowUnixSockets",
            Ty::List(&Ty::Str),
            "macos only (srt ignores it on linux too); use allowAllUnixSockets (ignored)",
        ),
        opt("allowAllUnixSockets", Ty::Bool),
        opt("allowLocalBinding", Ty::Bool),
        ign("allowMachLookup", Ty::List(&Ty::MachName), MACOS),
        opt("httpProxyPort", Ty::Int(1, 65535)),
        opt("socksProxyPort", Ty::Int(1, 65535)),
        ign(
            "mitmProxy",
            Ty::Object(&MITM),
            "routing to a mitm proxy is not implemented; the domains are still decided by the lists (ignored)",
        ),
        ign(
            "filterRequest",
            Ty::Never("filterRequest must be a function, which json cannot hold"),
            L7,
        ),
        ign("allowPlaintextHeaderSet", Ty::Bool, L7),
        ign("stripResponseHeaders", Ty::List(&Ty::NonEmpty), L7),
        ign("refuseOpaqueTunnels", Ty::Bool, L7),
        ign(
            "requireHostMatch",
            Ty::Bool,
            "oajail always requires a tunnel's tls server name to match its connect host (ignored)",
        ),
        ign(
            "ambiguousRequestTarget",
            Ty::OneOf(&["refuse", "asSpelled", "normalize"]),
            L7,
        ),
        opt("tlsTerminate", Ty::Object(&TLS_TERMINATE)),
        ign(
            "parentProxy",
            Ty::Object(&PARENT_PROXY),
            "chaining to a parent proxy is not implemented; destinations are dialled directly (ignored)",
        ),
    ],
};

static FILESYSTEM: Obj = Obj {
    strict: false,
    fields: &[
        ign(
            "disabled",
            Ty::Bool,
            "oajail always enforces the filesystem rules (ignored)",
        ),
        req("denyRead", Ty::List(&Ty::Entry)),
        opt("allowRead", Ty::List(&Ty::Entry)),
        req("allowWrite", Ty::List(&Ty::Entry)),
        req("denyWrite", Ty::List(&Ty::Entry)),
        opt("allowGitConfig", Ty::Bool),
    ],
};

static CREDENTIALS: Obj = Obj {
    strict: true,
    fields: &[
        opt("files", Ty::List(&Ty::Object(&CREDENTIAL_FILE))),
        opt("envVars", Ty::List(&Ty::Object(&CREDENTIAL_ENV))),
        ign("allowPlaintextInject", Ty::Bool, PLAINTEXT_INJECT),
        ign(
            "awsPairs",
            Ty::List(&Ty::Object(&AWS_PAIR)),
            "masking aws key pairs is not implemented (ignored)",
        ),
        ign(
            "sigv4",
            Ty::Object(&SIGV4),
            "sigv4 re-signing is not implemented (ignored)",
        ),
    ],
};

static CREDENTIAL_FILE: Obj = Obj {
    strict: false,
    fields: &[
        req("path", Ty::NonEmpty),
        req("mode", Ty::OneOf(&["deny", "mask"])),
        opt("extract", Ty::Str),
        opt("onExtractNoMatch", Ty::OneOf(&["warn", "deny", "error"])),
        opt("decode", Ty::OneOf(&["jwt"])),
        opt("maskClaims", Ty::List(&Ty::NonEmpty)),
        opt("maskDuplicates", Ty::Bool),
        opt("injectHosts", Ty::List(&Ty::Domain(ListKind::Allow))),
    ],
};

static CREDENTIAL_ENV: Obj = Obj {
    strict: false,
    fields: &[
        req("name", Ty::EnvName),
        req("mode", Ty::OneOf(&["deny", "mask"])),
        opt("extract", Ty::Str),
        opt("onExtractNoMatch", Ty::OneOf(&["warn", "deny", "error"])),
        opt("decode", Ty::OneOf(&["jwt"])),
        opt("maskClaims", Ty::List(&Ty::NonEmpty)),
        opt("injectHosts", Ty::List(&Ty::Domain(ListKind::Allow))),
    ],
};

static AWS_PAIR: Obj = Obj {
    strict: true,
    fields: &[
        req("accessKeyIdVar", Ty::EnvName),
        req("secretAccessKeyVar", Ty::EnvName),
        opt("sessionTokenVar", Ty::EnvName),
    ],
};

static SIGV4: Obj = Obj {
    strict: true,
    fields: &[
        opt("streaming", Ty::OneOf(&["deny", "passthrough"])),
        opt("presigned", Ty::OneOf(&["deny", "passthrough"])),
        opt("sigv4a", Ty::OneOf(&["deny", "passthrough"])),
    ],
};

static MITM: Obj = Obj {
    strict: false,
    fields: &[
        req("socketPath", Ty::NonEmpty),
        req("domains", Ty::List1(&Ty::Domain(ListKind::Allow))),
    ],
};

static PARENT_PROXY: Obj = Obj {
    strict: false,
    fields: &[
        opt("http", Ty::Url),
        opt("https", Ty::Url),
        opt("noProxy", Ty::Str),
    ],
};

static TLS_TERMINATE: Obj = Obj {
    strict: false,
    fields: &[
        opt("caCertPath", Ty::NonEmpty),
        opt("caKeyPath", Ty::NonEmpty),
        opt("excludeDomains", Ty::List(&Ty::Domain(ListKind::Allow))),
        opt("extraCaCertPaths", Ty::List(&Ty::NonEmpty)),
        opt("maxTunnels", Ty::Int(1, 65536)),
        opt("handshakeTimeoutMs", Ty::Int(100, 600_000)),
    ],
};

static RIPGREP: Obj = Obj {
    strict: false,
    fields: &[
        req("command", Ty::Str),
        opt("args", Ty::List(&Ty::Str)),
        opt("argv0", Ty::Str),
    ],
};

static SECCOMP: Obj = Obj {
    strict: false,
    fields: &[opt("applyPath", Ty::Str), opt("argv0", Ty::Str)],
};

static GIT: Obj = Obj {
    strict: false,
    fields: &[opt("safeDirectories", Ty::List(&Ty::Str))],
};

static WINDOWS: Obj = Obj {
    strict: false,
    fields: &[
        opt("backend", Ty::OneOf(&["mxc", "srt-win"])),
        opt("sandboxUser", Ty::StrLen(1, 20)),
        opt("sublayerGuid", Ty::Uuid),
        opt("wfpSublayerGuid", Ty::Uuid),
        opt("proxyPortRange", Ty::PortRange),
        opt("srtWin", Ty::Object(&SRT_WIN)),
    ],
};

static SRT_WIN: Obj = Obj {
    strict: false,
    fields: &[req("path", Ty::NonEmpty)],
};

/// oajail's own object; strict at every level because it is our format.
static OAJAIL: Obj = Obj {
    strict: true,
    fields: &[
        opt("limits", Ty::Object(&LIMITS)),
        opt("envKeep", Ty::List(&Ty::EnvPattern)),
        opt("envDeny", Ty::List(&Ty::EnvName)),
        opt("allowDegraded", Ty::Bool),
        opt("allowPrivateDestinations", Ty::List(&Ty::Address)),
        opt("strict", Ty::Bool),
        opt("ask", Ty::Bool),
        opt("httpRules", Ty::Object(&HTTP_RULES)),
        opt("issuedTokens", Ty::List(&Ty::Object(&ISSUED_TOKENS))),
    ],
};

/// `oajail.issuedTokens[i]`: checked by `issued.rs` during validation.
static ISSUED_TOKENS: Obj = Obj {
    strict: true,
    fields: &[
        req("tokenUrl", Ty::NonEmpty),
        opt("injectHosts", Ty::List(&Ty::NonEmpty)),
    ],
};

/// `oajail.httpRules`: each string is checked by `l7.rs` during validation.
static HTTP_RULES: Obj = Obj {
    strict: true,
    fields: &[
        opt("allow", Ty::List(&Ty::NonEmpty)),
        opt("deny", Ty::List(&Ty::NonEmpty)),
    ],
};

const BYTES: Ty = Ty::Nullable(&Ty::Int(0, MAX_SAFE_INTEGER));
const COUNT: Ty = Ty::Nullable(&Ty::Int(1, MAX_SAFE_INTEGER));

static LIMITS: Obj = Obj {
    strict: true,
    fields: &[
        opt("coreBytes", BYTES),
        opt("openFiles", COUNT),
        opt("processes", COUNT),
        opt("addressSpaceBytes", COUNT),
        opt("fileSizeBytes", BYTES),
        opt("cpuSeconds", COUNT),
        opt("tmpSizeBytes", COUNT),
        opt("wallSeconds", COUNT),
    ],
};
