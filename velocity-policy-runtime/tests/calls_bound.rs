//! The table of observed calls is bounded: past `MAX_EDGES` an edge is counted and logged, never
//! stored. A binary of its own, since it fills the process's table.
#![allow(
    clippy::unwrap_used,
    reason = "tests: a failed unwrap is a failed test"
)]

use velocity_policy_runtime::__macro_support::{Calls, traced};
use velocity_policy_runtime::Registry;
use velocity_policy_runtime::registry::MAX_EDGES;
use velocity_policy_testkit::captured::Captured;

static PARENT: Calls = Calls::new("bound_parent");

#[tokio::test(start_paused = true)]
async fn edges_past_the_bound_are_counted_not_stored() {
    let logs = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::DEBUG)
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);
    // More operations than the table holds, each called once by one parent: as many edges.
    let children: Vec<&'static Calls> = (0..MAX_EDGES + 76)
        .map(|n| {
            let name: &'static str = Box::leak(format!("bound_child_{n}").into_boxed_str());
            &*Box::leak(Box::new(Calls::new(name)))
        })
        .collect();
    traced(&PARENT, tracing::Span::none(), async {
        for child in &children {
            traced(child, tracing::Span::none(), async {
                Ok::<(), std::io::Error>(())
            })
            .await?;
        }
        Ok::<(), std::io::Error>(())
    })
    .await
    .unwrap();
    let calls = Registry::global().snapshot().calls;
    assert_eq!(calls.edges.len(), MAX_EDGES);
    // The parent's own entry edge, then the first children: the rest counted.
    assert_eq!(calls.dropped, 77);
    // Said once at WARN, the rest at DEBUG, with the fields an operator filters on.
    let dropped = logs.lines_with(&["kind=\"edge_dropped\"", "reason=\"table_full\""]);
    assert_eq!(dropped.len(), 77, "{dropped:?}");
    assert_eq!(
        dropped.iter().filter(|l| l.contains(" WARN ")).count(),
        1,
        "{dropped:?}"
    );
    assert!(
        dropped[0].contains("parent=\"bound_parent\""),
        "{}",
        dropped[0]
    );
    assert!(
        dropped[0].contains("operation=\"bound_child_1023\""),
        "{}",
        dropped[0]
    );
}
