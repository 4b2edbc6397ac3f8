//! Nothing here: the crate's one test (`tests/grammar.rs`) checks that
//! `velocity-policy-lang/src/parse/grammar.rs` is pest's generated parser for
//! `velocity-policy-lang/src/grammar.pest`. It is a crate of its own so that pest's `std`
//! feature, which the generator turns on, stays out of the language's own tests and benches.
