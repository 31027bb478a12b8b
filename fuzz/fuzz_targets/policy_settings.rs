//! The settings parser must never panic, and a policy it accepts must
//! survive a round trip through its canonical JSON with the same hash
//! (the hash is what `OAJAIL_POLICY_SHA256` and `oajail policy hash` show).
#![no_main]

use libfuzzer_sys::fuzz_target;
use oajail_policy::Policy;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(loaded) = Policy::from_settings_json(text, "fuzz") else {
        return;
    };
    let canonical = loaded.policy.canonical_json();
    let again = Policy::from_settings_json(&canonical, "fuzz-canonical").unwrap_or_else(|e| {
        panic!("canonical JSON of an accepted policy is rejected: {e}\n{canonical}")
    });
    assert_eq!(
        loaded.policy.sha256(),
        again.policy.sha256(),
        "hash changed on round trip"
    );
    // srt output must load back to the same policy as well.
    let srt = loaded.policy.to_srt_json().to_string();
    let from_srt = Policy::from_settings_json(&srt, "fuzz-srt")
        .unwrap_or_else(|e| panic!("srt JSON of an accepted policy is rejected: {e}\n{srt}"));
    assert_eq!(
        loaded.policy.sha256(),
        from_srt.policy.sha256(),
        "hash changed through srt JSON"
    );
});
