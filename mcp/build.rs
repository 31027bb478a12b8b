//! Converts the built-in OpenAPI document (`src/spec/openagenda-v3/
//! openapi.yaml`, kept verbatim) to compact JSON at build time, read exactly
//! as the runtime loader reads YAML (`serde_yaml_ng` into a
//! `serde_json::Value`).
//!
//! Why: the server loads the catalogue on every start, twice under
//! `--jail` (the outer process derives the policy's request rules from it,
//! the jailed one serves it). Reading 196 KB of YAML costs about 6 ms and a
//! 3 MiB heap peak (libyaml's event list plus the tree), and glibc keeps
//! most of that peak resident for the server's whole life; the same
//! document as JSON is read several times faster with a peak of one tree.
use std::error::Error;
use std::path::PathBuf;

const SOURCE: &str = "src/spec/openagenda-v3/openapi.yaml";

fn main() -> Result<(), Box<dyn Error>> {
    println!("cargo:rerun-if-changed={SOURCE}");
    let text = std::fs::read_to_string(SOURCE)?;
    let value: serde_json::Value = serde_yaml_ng::from_str(&text)?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?).join("openagenda-v3.json");
    std::fs::write(out, serde_json::to_string(&value)?)?;
    Ok(())
}
