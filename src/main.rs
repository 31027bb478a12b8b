//! oajail: thin glue between the policy, the jail and the proxy.
fn main() {}
