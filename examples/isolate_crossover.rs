//! Where isolating CPU work starts to pay, measured on this machine with this code:
//! `cargo run --release --example isolate_crossover`.
//!
//! For each input size: the median time of the work inline, the median through an
//! `IsolatedPool` (input moved in, result moved out), the hand-off's cost, and whether
//! isolation pays (the work blocks a worker past a 2 ms poll budget, and the hand-off adds at
//! most 10% to it).

use std::time::Duration;

use velocity_policy::isolate::{IsolatedPool, measure_crossover};

fn checksum(input: Vec<u8>) -> u64 {
    input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() {
    let pool = IsolatedPool::builder("crossover").max_concurrent(1).build();
    let sizes: Vec<usize> = (10..=24).step_by(2).map(|p| 1usize << p).collect();
    let budget = Duration::from_millis(2);
    let rows = measure_crossover(
        &pool,
        &sizes,
        31,
        |n| (0..n).map(|i| i as u8).collect(),
        checksum,
    )
    .await;
    println!(
        "| input | inline | isolated | hand-off | hand-off / work | pays (> {} work, ≤ 10% hand-off) |",
        human(budget)
    );
    println!("|---:|---:|---:|---:|---:|:---:|");
    for m in &rows {
        let share = m.hand_off().as_secs_f64() / m.inline.as_secs_f64().max(1e-9);
        println!(
            "| {} KiB | {} | {} | {} | {:.0}% | {} |",
            m.size / 1024,
            human(m.inline),
            human(m.isolated),
            human(m.hand_off()),
            share * 100.0,
            if m.pays(budget, 0.10) { "yes" } else { "no" }
        );
    }
    match rows.iter().find(|m| m.pays(budget, 0.10)) {
        Some(m) => println!(
            "\nisolation starts to pay at about {} KiB of input here",
            m.size / 1024
        ),
        None => println!("\nisolation did not pay at any measured size here"),
    }
}

/// A duration as people read it (`1.2ms`).
fn human(duration: Duration) -> String {
    format!("{duration:.1?}")
}
