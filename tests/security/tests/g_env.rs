//! Family G: secrets in the environment. Every lab run gives oajail fifteen
//! secret-named variables holding canaries (see `canary::SECRET_ENV`).
mod common;
use common::*;

#[test]
fn blocks_secret_environment_variables() {
    expect_blocked("G1-secret-env", DENY_HOME, |_| argv!["env-scan"]);
}
