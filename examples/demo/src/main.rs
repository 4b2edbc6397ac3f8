//! The main demo: what the policy engine does when a dependency misbehaves.
//!
//! Runs on embedded, in-process defaults; nothing to set up. Three scenes:
//! a deadline that bounds a slow call, a breaker that opens after failures (and a trip from a
//! 429), and a bulkhead that refuses instead of queueing.

use std::time::{Duration, Instant};

use policy::error::Human;
use policy::{Deadline, RefusalKind, Registry};

fn ms(d: Duration) -> Human {
    Human(d)
}

async fn slow_dependency(delay: Duration) -> &'static str {
    tokio::time::sleep(delay).await;
    "answer"
}

async fn deadline_scene() {
    println!("1. A deadline bounds the wait");
    let request = Deadline::after(Duration::from_millis(300));
    let started = Instant::now();
    // The lookup asks for 2 s, but the request has 300 ms, 50 of them held back for the reply.
    let lookup = request.child_reserving(Duration::from_secs(2), Duration::from_millis(50));
    let outcome = lookup.run(slow_dependency(Duration::from_secs(2))).await;
    match outcome {
        Ok(answer) => println!("   the dependency answered {answer:?}"),
        Err(expired) => println!(
            "   gave up after {} ({expired}); {} left to write the response",
            ms(started.elapsed()),
            ms(request.remaining())
        ),
    }
    match request.require(Duration::from_millis(100), "render_page") {
        Ok(()) => println!("   enough budget left to render"),
        Err(refusal) => println!("   not started: {refusal}"),
    }
}

async fn breaker_scene() {
    println!("\n2. A breaker stops paying the timeout to learn the same answer");
    let search = Registry::global().breaker("search", |b| {
        b.open_after_failures(3, Duration::from_secs(10))
            .cooldown(Duration::from_millis(500))
    });
    let mut calls_reaching_search = 0;
    for request in 1..=6 {
        match search.check() {
            Ok(()) => {
                calls_reaching_search += 1;
                // The search provider is down: every call fails after 100 ms.
                let result = Deadline::after(Duration::from_millis(100))
                    .run(std::future::pending::<()>())
                    .await;
                if result.is_err() {
                    search.record_failure();
                }
                println!("   request {request}: called search, it timed out after 100 ms");
            }
            Err(refusal) => println!("   request {request}: refused at once: {refusal}"),
        }
    }
    println!("   {calls_reaching_search} of 6 requests reached the sick provider");
    tokio::time::sleep(Duration::from_millis(500)).await;
    println!(
        "   after the 500 ms cooldown the breaker admits the next caller as a probe: {}",
        if search.check().is_ok() {
            "admitted"
        } else {
            "refused"
        }
    );
    search.trip(
        Duration::from_secs(2),
        "429 Too Many Requests, Retry-After: 2",
    );
    if let Err(refusal) = search.check() {
        println!("   a 429 with Retry-After trips it at once: {refusal}");
    }
}

async fn bulkhead_scene() {
    println!("\n3. A bulkhead refuses rather than queues");
    let search = Registry::global().bulkhead("search", |b| b.max_concurrent(2).max_queued(1));
    let deadline = Deadline::after(Duration::from_millis(200));
    let mut slow_calls = Vec::new();
    for _ in 0..2 {
        let slot = search.try_acquire_owned();
        slow_calls.push(tokio::spawn(async move {
            let _slot = slot;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }));
    }
    println!(
        "   two slow calls hold both slots (load {:.1})",
        search.load()
    );
    let started = Instant::now();
    let queued = search.acquire(&deadline).await;
    if let Err(refusal) = queued {
        println!(
            "   a third caller queued, then was refused at its deadline after {}: {refusal}",
            ms(started.elapsed())
        );
    }
    let held_queue = {
        let search = search.clone();
        let deadline = Deadline::after(Duration::from_millis(200));
        tokio::spawn(async move { search.acquire(&deadline).await.map(|_| ()) })
    };
    while search.queued() == 0 {
        tokio::task::yield_now().await;
    }
    let started = Instant::now();
    match search.try_acquire() {
        Err(refusal) if refusal.kind() == RefusalKind::BulkheadFull => println!(
            "   with slots and queue full a fourth caller is refused in {}: {refusal}",
            ms(started.elapsed())
        ),
        other => println!("   unexpected: {other:?}"),
    }
    let _ = held_queue.await;
    for call in slow_calls {
        call.abort();
    }
}

#[tokio::main]
async fn main() {
    println!("policy demo: deadlines, a breaker and a bulkhead on in-process defaults\n");
    deadline_scene().await;
    breaker_scene().await;
    bulkhead_scene().await;
    println!("\nWhat a dashboard sees (Registry::global().snapshot()):");
    let snapshot = Registry::global().snapshot();
    for b in &snapshot.breakers {
        println!(
            "   breaker {:<8} {:?}, {} openings, {} refusals, {} failures recorded",
            b.name, b.state, b.openings, b.refusals, b.failures
        );
    }
    for b in &snapshot.bulkheads {
        println!(
            "   bulkhead {:<7} {} of {} slots busy, {} refused full, {} refused at the deadline in the queue",
            b.name, b.running, b.max_concurrent, b.refused_full, b.refused_queue_timeout
        );
    }
}
