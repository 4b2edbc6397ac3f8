//! The main demo.
fn main() {}
