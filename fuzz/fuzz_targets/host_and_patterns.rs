//! Host canonicalisation and domain patterns: no panic, and the decision is
//! stable: a canonical host re-canonicalises to itself, and an IP-like name
//! never canonicalises to a name (it must become an IP or be refused).
#![no_main]

use libfuzzer_sys::fuzz_target;
use oajail_policy::domain::{DomainPattern, ListKind};
use oajail_policy::host::{Host, canonicalize, split_authority};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = DomainPattern::parse(text, ListKind::Allow);
    let _ = DomainPattern::parse(text, ListKind::Deny);
    let _ = split_authority(text);
    if let Ok(host) = canonicalize(text) {
        let shown = host.authority(443);
        let (h, port) =
            split_authority(&shown).unwrap_or_else(|| panic!("authority {shown:?} does not split"));
        assert_eq!(port, 443);
        let again = canonicalize(h.trim_start_matches('[').trim_end_matches(']'))
            .unwrap_or_else(|e| panic!("canonical host {h:?} is rejected: {e}"));
        assert_eq!(
            host, again,
            "canonicalisation is not idempotent for {text:?}"
        );
        if let Host::Name(name) = &host {
            let last = name.rsplit('.').next().unwrap_or("");
            assert!(
                !last.bytes().all(|b| b.is_ascii_digit()),
                "IP-like name kept as a name: {name}"
            );
        }
    }
});
