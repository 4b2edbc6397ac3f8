//! Compile errors, seen through trybuild: each unsafe combination is an error that points at
//! the right token and says how to fix it; each supported function shape compiles and runs.
//!
//! The cases read `tests/ui/policies/` (and `tests/ui/fail-file/policies/`, which holds a
//! broken file). Regenerate snapshots with `TRYBUILD=overwrite cargo test --test ui` and
//! review them like code.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    cases.compile_fail("tests/ui/fail/*.rs");
    cases.compile_fail("tests/ui/fail-file/*.rs");
}
