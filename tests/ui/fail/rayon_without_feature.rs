// These cases build the facade with `tower` only: a rayon pool without the `rayon` feature is
// one error at the literal that asks for it, saying how to turn the feature on.

#[velocity_policy::isolate(pool = "rayon")]
fn crunch(n: u64) -> u64 {
    n * 2
}

fn main() {}
