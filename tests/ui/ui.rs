//! Compile errors, seen through trybuild: each unsafe combination is an error that points at
//! the right token and says how to fix it; each supported function shape compiles and runs.
//!
//! The cases read `tests/ui/policies/` (and `tests/ui/fail-file/policies/`, which holds a
//! broken file). Regenerate snapshots with `TRYBUILD=overwrite cargo test -p policy-ui-tests`
//! and review them like code.
//!
//! This is a package of its own (`tests/ui/Cargo.toml`) so that trybuild, which builds every
//! dev-dependency of the package it runs in, builds only the facade and tokio.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("pass/*.rs");
    cases.compile_fail("fail/*.rs");
    cases.compile_fail("fail-file/*.rs");
}
