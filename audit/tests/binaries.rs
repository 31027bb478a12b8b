//! The two binaries `oajail audit` and the security suite run from disk
//! answer with this library's build id. Being an integration test of this
//! package also makes `cargo test --workspace` build them, so the suite
//! never finds a probe or lab left from an older tree (or none at all on a
//! clean clone).
use std::process::Command;

fn build_id_of(exe: &str) -> String {
    let out = Command::new(exe)
        .arg(oajail_audit::BUILD_ID_FLAG)
        .output()
        .unwrap_or_else(|e| panic!("{exe}: {e}"));
    assert!(out.status.success(), "{exe} --build-id: {:?}", out.status);
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn probe_and_lab_carry_the_library_build_id() {
    for exe in [
        env!("CARGO_BIN_EXE_oajail-probe"),
        env!("CARGO_BIN_EXE_oajail-lab"),
    ] {
        assert_eq!(build_id_of(exe), oajail_audit::BUILD_ID, "{exe}");
    }
}
