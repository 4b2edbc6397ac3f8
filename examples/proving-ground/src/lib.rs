//! The proving ground (issue 40): this engine against no policy, a hand-written retry loop,
//! tower 0.5 and tower-resilience 0.13, under real faults, in separate processes on loopback.
//!
//! One binary re-executes itself: `dependency` (a server of limited capacity whose faults are
//! switched at run time), `service` (one contender in front of it), and `load` (an open-loop
//! Poisson generator). `run` (the default) drives every contender through every scenario, one
//! after another, each against a fresh dependency, and writes a table per scenario, a JSON file
//! and an HTML page from the run's own records.

pub mod client;
pub mod contenders;
pub mod dependency;
pub mod fifo;
pub mod load;
pub mod metrics;
pub mod model;
pub mod report;
pub mod run;
