//! How two kinds of spec field cross to pid 1 in the spec's JSON
//! (`sync::SpecFile`): serde's defaults write a byte string and a BPF
//! program as arrays of numbers, which made most of the spec's 16 KB and
//! most of pid 1's parse of it, on its path to the command (issue 11's
//! start-up work, docs/benchmarks.md).
//!
//! - [`cstrings`]: each C string as a JSON string when it is UTF-8 (always,
//!   in practice), else as its bytes; lossless either way.
//! - [`bpf`]: a program as one hex string, 16 digits per instruction
//!   (`code`, `jt`, `jf`, `k`, big-endian each).

/// `Vec<CString>` (argv, the environment).
pub(crate) mod cstrings {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::ffi::CString;

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Text {
        Utf8(String),
        Bytes(Vec<u8>),
    }

    pub(crate) fn serialize<S: Serializer>(v: &[CString], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|c| match c.to_str() {
            Ok(text) => Text::Utf8(text.to_owned()),
            Err(_) => Text::Bytes(c.as_bytes().to_vec()),
        }))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<CString>, D::Error> {
        Vec::<Text>::deserialize(d)?
            .into_iter()
            .map(|t| {
                let bytes = match t {
                    Text::Utf8(s) => s.into_bytes(),
                    Text::Bytes(b) => b,
                };
                CString::new(bytes).map_err(serde::de::Error::custom)
            })
            .collect()
    }
}

/// A BPF program as `(code, jt, jf, k)` quadruples.
pub(crate) mod bpf {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::fmt::Write as _;

    pub(crate) type Insn = (u16, u8, u8, u32);

    pub(crate) fn to_hex(program: &[Insn]) -> String {
        let mut out = String::with_capacity(program.len() * 16);
        for (code, jt, jf, k) in program {
            // Writing to a String cannot fail.
            let _ = write!(out, "{code:04x}{jt:02x}{jf:02x}{k:08x}");
        }
        out
    }

    pub(crate) fn from_hex(text: &str) -> Result<Vec<Insn>, String> {
        let bad = || format!("bpf program: not 16 hex digits per instruction: {text:.32}");
        if !text.len().is_multiple_of(16) || !text.is_ascii() {
            return Err(bad());
        }
        let field = |s: &str| u32::from_str_radix(s, 16).map_err(|_| bad());
        (0..text.len() / 16)
            .map(|i| {
                let ins = &text[i * 16..i * 16 + 16];
                Ok((
                    field(&ins[..4])? as u16,
                    field(&ins[4..6])? as u8,
                    field(&ins[6..8])? as u8,
                    field(&ins[8..])?,
                ))
            })
            .collect()
    }

    pub(crate) fn serialize<S: Serializer>(v: &[Insn], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&to_hex(v))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Insn>, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        from_hex(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Both {
        #[serde(with = "cstrings")]
        env: Vec<CString>,
        #[serde(with = "bpf")]
        program: Vec<bpf::Insn>,
    }

    #[test]
    fn round_trips_text_bytes_and_programs() {
        let value = Both {
            env: vec![
                CString::new("PATH=/usr/bin").unwrap(),
                CString::new(vec![b'X', b'=', 0xff, 0xfe]).unwrap(),
                CString::new("").unwrap(),
            ],
            program: vec![
                (0x20, 0, 0, 4),
                (0x15, 1, 255, 0xc000_003e),
                (6, 0, 0, u32::MAX),
            ],
        };
        let json = serde_json::to_string(&value).unwrap();
        assert!(json.contains(r#""PATH=/usr/bin""#), "{json}");
        assert!(json.contains("[88,61,255,254]"), "{json}");
        assert!(json.contains(r#""0020000000000004"#), "{json}");
        assert_eq!(serde_json::from_str::<Both>(&json).unwrap(), value);
    }

    #[test]
    fn a_malformed_program_or_a_nul_is_refused() {
        for program in [
            r#""0020""#,
            r#""zz20000000000004""#,
            r#""0020000000000004é""#,
        ] {
            let json = format!(r#"{{"env":[],"program":{program}}}"#);
            assert!(serde_json::from_str::<Both>(&json).is_err(), "{json}");
        }
        let json = r#"{"env":["A\u0000B"],"program":""}"#;
        assert!(serde_json::from_str::<Both>(json).is_err());
    }
}
