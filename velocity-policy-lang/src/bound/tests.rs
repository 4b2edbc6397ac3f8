use std::time::Duration;

use super::*;
use crate::PolicySet;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn model(text: &str) -> Model {
    let mut set = PolicySet::new();
    set.add_source("test.policy", text.as_bytes());
    let report = set.check();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    Model::from_spec(set.spec())
}

fn codes(composition: &Composition) -> Vec<(String, String)> {
    composition
        .findings
        .iter()
        .map(|f| (f.code(), f.operation.clone()))
        .collect()
}

const SAVE: &str = "request { deadline = 5s; min_budget = 20ms }
operation save_document: critical { deadline = 2s; min_budget = 100ms }
operation authenticate: critical { deadline = 100ms }
operation lookup_session: critical { deadline = 150ms }
operation authorize: critical { deadline = 100ms }
operation validate: critical { deadline = 100ms }
operation write_document: critical, durable { deadline = 1s; min_budget = 20ms }
operation record_analytics: deferred, idempotent { deadline = 1s }
";

fn save_graph() -> Graph {
    let mut graph = Graph::new();
    for (i, child) in [
        "authenticate",
        "lookup_session",
        "authorize",
        "validate",
        "write_document",
        "record_analytics",
    ]
    .into_iter()
    .enumerate()
    {
        graph.add_static("save_document", child, u32::try_from(i).unwrap(), None);
    }
    graph
}

#[test]
fn the_save_runs_five_operations_under_one_two_second_budget() {
    let composed = compose(&model(SAVE), &save_graph());
    let tree = composed.tree("save_document").unwrap();
    assert_eq!(tree.request, Some(ms(5000)));
    assert_eq!(tree.bound, Some(ms(2000)));
    assert_eq!(tree.tightest.as_deref(), Some("save_document"));
    // 2s + 100ms + 150ms + 100ms + 100ms + 1s: the deferred work is not in it.
    assert_eq!(tree.alone, Some(ms(3450)));
    assert_eq!(tree.difference(), Some(ms(1450)));
    assert_eq!(tree.sum, "2s + 100ms + 150ms + 100ms + 100ms + 1s");
    let analytics = tree.find("record_analytics").unwrap();
    assert!(analytics.after_response);
    // Five paths, the deferred hand-off on none of them.
    assert_eq!(tree.paths.len(), 5);
    let write = &tree.paths[4];
    assert_eq!(write.operations, ["save_document", "write_document"]);
    assert_eq!(write.bound, Some(ms(1000)));
    assert_eq!(write.tightest.as_deref(), Some("write_document"));
    assert_eq!(write.alone, Some(ms(3000)));
    assert_eq!(write.difference(), Some(ms(2000)));
    // The deferred work is a tree of its own, on its own deadline.
    let deferred = composed.tree("record_analytics").unwrap();
    assert_eq!(deferred.request, None);
    assert_eq!(deferred.bound, Some(ms(1000)));
    assert_eq!(composed.trees.len(), 2);
    // Every call after the first runs on what the earlier ones left, with no minimum of its
    // own; the first starts within the save's 100ms minimum, the write has 20ms of its own.
    let starved: Vec<(String, String)> = ["lookup_session", "authorize", "validate"]
        .iter()
        .map(|op| {
            (
                "policy::explain::no-min-budget".to_owned(),
                (*op).to_owned(),
            )
        })
        .collect();
    assert_eq!(codes(&composed), starved);
}

#[test]
fn nested_retries_multiply_alone_and_stay_within_the_attempt_with_propagation() {
    let model = model(
        "request { deadline = 5s; min_budget = 20ms }
retry outer { attempts = 3; backoff = full_jitter(base = 100ms, cap = 1s); attempt_timeout = 2s }
retry inner { attempts = 2; backoff = full_jitter(base = 50ms, cap = 1s); attempt_timeout = 200ms }
operation a: critical, idempotent { retry = outer; deadline = 10s; min_budget = 100ms }
operation b: critical, idempotent { retry = inner; deadline = 500ms; min_budget = 10ms }
",
    );
    let mut graph = Graph::new();
    graph.add_static("a", "b", 0, None);
    let composed = compose(&model, &graph);
    let tree = composed.tree("a").unwrap();
    // With propagation: the request's 5s (a's own attempts would take 6.3s).
    assert_eq!(tree.bound, Some(ms(5000)));
    assert_eq!(tree.tightest.as_deref(), Some("request"));
    // b inside one of a's attempts: at most min(2s, b's own 2 × 200ms + 50ms).
    let b = tree.find("b").unwrap();
    assert_eq!(b.bound, Some(ms(450)));
    assert_eq!(b.alone, Some(ms(450)));
    // Alone: 3 × (2s + (2 × 200ms + 50ms)) + 100ms + 200ms.
    assert_eq!(tree.alone, Some(ms(7650)));
    assert_eq!(tree.sum, "3 × (2s + (2 × 200ms + 50ms)) + 300ms");
    assert_eq!(tree.paths[0].difference(), Some(ms(7200)));
    assert_eq!(tree.paths[0].tightest.as_deref(), Some("b"));
}

#[test]
fn hedges_stretch_each_attempt_alone_and_never_with_propagation() {
    let model = model(
        "request { deadline = 5s; min_budget = 20ms }
hedge fixed { after = 100ms; max = 3 }
hedge tail { after = p95 }
operation h: critical, idempotent { hedge = fixed; deadline = 1s; min_budget = 10ms }
operation p: critical, idempotent { hedge = tail; deadline = 1s; min_budget = 10ms }
operation leaf: critical { deadline = 300ms; min_budget = 10ms }
",
    );
    let mut graph = Graph::new();
    graph.add_static("h", "leaf", 0, None);
    graph.add_static("p", "leaf", 0, None);
    let composed = compose(&model, &graph);
    let fixed = composed.tree("h").unwrap();
    // Two hedges 100ms apart after an attempt of 1s + the leaf's 300ms.
    assert_eq!(fixed.alone, Some(ms(1500)));
    assert_eq!(fixed.sum, "(1s + 300ms) + 2 × 100ms hedged");
    assert_eq!(fixed.bound, Some(ms(1000)));
    // A percentile has no fixed value: the hedge counts as the attempt itself.
    let tail = composed.tree("p").unwrap();
    assert_eq!(tail.alone, Some(ms(2600)));
    assert_eq!(tail.bound, Some(ms(1000)));
    assert!(composed.findings.is_empty(), "{:?}", codes(&composed));
}

#[test]
fn a_parent_tighter_than_its_child_bounds_it_and_the_child_never_fits() {
    let text = "request { deadline = 5s; min_budget = 20ms }
operation parent: critical { deadline = 200ms; min_budget = 50ms }
operation child: critical { deadline = 1s; min_budget = 10ms }
operation roomy: critical { deadline = 2s; min_budget = 50ms }
";
    let mut graph = Graph::new();
    graph.add_static("parent", "child", 0, None);
    let composed = compose(&model(text), &graph);
    let tree = composed.tree("parent").unwrap();
    let child = tree.find("child").unwrap();
    assert_eq!(child.bound, Some(ms(200)));
    assert_eq!(tree.paths[0].tightest.as_deref(), Some("parent"));
    assert_eq!(tree.alone, Some(ms(1200)));
    assert_eq!(tree.difference(), Some(ms(1000)));
    assert_eq!(
        codes(&composed),
        [(
            "policy::explain::child-never-fits".to_owned(),
            "child".to_owned()
        )]
    );
    assert_eq!(
        composed.findings[0].message(),
        "`child`'s deadline of 1s never fits in `parent`, which can give it at most 200ms"
    );

    // Another parent that can give it its whole second: it fits somewhere, no finding.
    graph.add_static("roomy", "child", 0, None);
    let composed = compose(&model(text), &graph);
    assert!(composed.findings.is_empty(), "{:?}", codes(&composed));
}

#[test]
fn a_child_whose_attempts_never_fit_is_found() {
    let text = "request { deadline = 5s; min_budget = 20ms }
retry r { attempts = 3; backoff = full_jitter(base = 50ms, cap = 100ms); attempt_timeout = 100ms }
operation parent: critical { deadline = 200ms; min_budget = 50ms }
operation child: critical, idempotent { retry = r; min_budget = 10ms }
";
    let mut graph = Graph::new();
    graph.add_static("parent", "child", 0, None);
    let composed = compose(&model(text), &graph);
    // 3 × 100ms + 50ms + 100ms = 450ms, in a parent of 200ms.
    assert_eq!(
        codes(&composed),
        [(
            "policy::explain::child-never-fits".to_owned(),
            "child".to_owned()
        )]
    );
    assert_eq!(
        composed.findings[0].message(),
        "`child`'s 3 attempts (450ms in all) never fits in `parent`, which can give it at most 200ms"
    );
}

#[test]
fn a_cycle_seen_at_run_time_has_a_bound_with_propagation_and_none_alone() {
    let model = model(
        "request { deadline = 5s; min_budget = 20ms }
operation a: critical { deadline = 1s; min_budget = 10ms }
operation b: critical { deadline = 500ms; min_budget = 10ms }
",
    );
    let mut graph = Graph::new();
    graph.add_entry("a", true);
    graph.add_observed("a", "b");
    graph.add_observed("b", "a");
    let composed = compose(&model, &graph);
    assert_eq!(composed.trees.len(), 1);
    let tree = composed.tree("a").unwrap();
    assert_eq!(tree.under_deadline, Some(true));
    assert_eq!(tree.bound, Some(ms(1000)));
    assert_eq!(tree.alone, None);
    let again = &tree.root.children[0].children[0];
    assert!(again.cycle);
    assert_eq!(again.bound, Some(ms(500)));
    assert_eq!(tree.paths[0].operations, ["a", "b", "a"]);
    assert_eq!(tree.paths[0].bound, Some(ms(500)));
    assert_eq!(tree.paths[0].alone, None);
    assert_eq!(tree.root.children[0].seen, Some(Seen::Observed));
    assert_eq!(
        codes(&composed),
        [("policy::explain::call-cycle".to_owned(), "a".to_owned())]
    );
    assert_eq!(
        composed.findings[0].message(),
        "`a` calls itself through `b`"
    );
}

#[test]
fn a_call_seen_both_ways_is_marked_both() {
    let mut graph = save_graph();
    graph.add_observed("save_document", "lookup_session");
    let composed = compose(&model(SAVE), &graph);
    let tree = composed.tree("save_document").unwrap();
    assert_eq!(tree.find("lookup_session").unwrap().seen, Some(Seen::Both));
    assert_eq!(tree.find("authorize").unwrap().seen, Some(Seen::Static));
}

#[test]
fn a_retry_whose_attempts_exceed_its_deadline_is_found() {
    let text = |deadline: &str| {
        format!(
            "retry r {{ attempts = 3; backoff = full_jitter(base = 10ms, cap = 10ms); attempt_timeout = 1s }}
operation op: deferred, idempotent {{ retry = r; deadline = {deadline} }}
"
        )
    };
    let composed = compose(&model(&text("2s")), &Graph::new());
    assert_eq!(
        codes(&composed),
        [(
            "policy::explain::attempts-exceed-deadline".to_owned(),
            "op".to_owned()
        )]
    );
    assert_eq!(
        composed.findings[0].message(),
        "retry `r` makes 3 attempts of up to 1s (3s), more than `op`'s deadline of 2s"
    );
    // 3 × 1s fits in 4s.
    let composed = compose(&model(&text("4s")), &Graph::new());
    assert!(composed.findings.is_empty());
}

#[test]
fn an_operation_with_no_min_budget_that_its_parent_can_starve_is_found() {
    let text = "request { deadline = 5s; min_budget = 20ms }
operation parent: critical { deadline = 1s; min_budget = 50ms }
operation first: critical { deadline = 100ms }
operation second: critical { deadline = 100ms }
operation guarded: critical { deadline = 100ms; min_budget = 10ms }
";
    let mut graph = Graph::new();
    graph.add_static("parent", "first", 0, None);
    graph.add_static("parent", "second", 1, None);
    graph.add_static("parent", "guarded", 2, None);
    let composed = compose(&model(text), &graph);
    // The first call runs on what the parent started with (at least 50ms); the second on
    // what the first left; the third has a minimum of its own.
    assert_eq!(
        codes(&composed),
        [(
            "policy::explain::no-min-budget".to_owned(),
            "second".to_owned()
        )]
    );
    assert_eq!(
        composed.findings[0].message(),
        "`second` has no minimum useful budget, and `parent` can leave it a fraction of a millisecond: `parent` calls `first` before it, on the same budget"
    );
}

#[test]
fn a_retrying_parent_can_starve_even_its_first_call() {
    let text = "request { deadline = 5s; min_budget = 20ms }
retry r { attempts = 2; backoff = full_jitter(base = 10ms, cap = 10ms); attempt_timeout = 400ms }
operation parent: critical, idempotent { retry = r; deadline = 1s; min_budget = 50ms }
operation only: critical { deadline = 100ms }
";
    let mut graph = Graph::new();
    graph.add_static("parent", "only", 0, None);
    let composed = compose(&model(text), &graph);
    assert_eq!(
        codes(&composed),
        [(
            "policy::explain::no-min-budget".to_owned(),
            "only".to_owned()
        )]
    );
}

#[test]
fn the_request_without_a_min_budget_can_starve_an_entry_point() {
    let composed = compose(
        &model(
            "request { deadline = 5s }
operation entry: critical { deadline = 1s }
",
        ),
        &{
            let mut graph = Graph::new();
            graph.add_operation("entry");
            graph
        },
    );
    assert_eq!(
        codes(&composed),
        [(
            "policy::explain::no-min-budget".to_owned(),
            "entry".to_owned()
        )]
    );
    assert!(
        composed.findings[0]
            .message()
            .contains("the request can leave it")
    );
}

#[test]
fn an_entry_point_with_no_request_deadline_above_it_is_found() {
    let text = "operation checkout: critical { deadline = 2s; min_budget = 10ms }
operation charge: critical { deadline = 1s; min_budget = 10ms }
";
    let mut graph = Graph::new();
    graph.add_static("checkout", "charge", 0, None);
    let composed = compose(&model(text), &graph);
    assert_eq!(
        codes(&composed),
        [(
            "policy::explain::no-request-deadline".to_owned(),
            "checkout".to_owned()
        )]
    );
    assert_eq!(
        composed.findings[0].message(),
        "no request deadline above `checkout`: no `request` stanza declares one"
    );

    // With one, nothing; observed with no deadline in scope, found again.
    let with_request = format!("request {{ deadline = 5s; min_budget = 20ms }}\n{text}");
    let composed = compose(&model(&with_request), &graph);
    assert!(composed.findings.is_empty(), "{:?}", codes(&composed));
    graph.add_entry("checkout", false);
    let composed = compose(&model(&with_request), &graph);
    assert_eq!(
        codes(&composed),
        [(
            "policy::explain::no-request-deadline".to_owned(),
            "checkout".to_owned()
        )]
    );
    assert!(
        composed.findings[0]
            .message()
            .contains("called it with no deadline in scope")
    );
}

#[test]
fn a_policy_alone_has_no_trees_and_no_tree_findings() {
    let composed = compose(
        &model("operation lone: critical { deadline = 1s }\n"),
        &Graph::new(),
    );
    assert!(composed.trees.is_empty());
    assert!(composed.findings.is_empty());
}

#[test]
fn operations_the_model_does_not_know_are_unbounded_alone_and_clamped_with_propagation() {
    let mut graph = save_graph();
    graph.add_observed("write_document", "mystery");
    let composed = compose(&model(SAVE), &graph);
    let tree = composed.tree("save_document").unwrap();
    let mystery = tree.find("mystery").unwrap();
    assert!(mystery.unknown);
    assert_eq!(mystery.bound, Some(ms(1000)));
    assert_eq!(tree.alone, None);
    assert_eq!(tree.bound, Some(ms(2000)));
}

#[test]
fn a_diamond_that_multiplies_past_the_node_limit_is_cut_not_expanded_forever() {
    // Each level calls the next twice: 2^20 paths if expanded whole.
    let mut text = String::from("request { deadline = 5s; min_budget = 20ms }\n");
    let mut graph = Graph::new();
    for level in 0..20 {
        text.push_str(&format!(
            "operation l{level}a: critical {{ deadline = 1s; min_budget = 1ms }}\noperation l{level}b: critical {{ deadline = 1s; min_budget = 1ms }}\n"
        ));
    }
    for level in 0..19 {
        for from in ["a", "b"] {
            for (i, to) in ["a", "b"].into_iter().enumerate() {
                graph.add_static(
                    &format!("l{level}{from}"),
                    &format!("l{}{to}", level + 1),
                    u32::try_from(i).unwrap(),
                    None,
                );
            }
        }
    }
    let composed = compose(&model(&text), &graph);
    let tree = composed.tree("l0a").unwrap();
    fn count(node: &Node) -> usize {
        1 + node.children.iter().map(count).sum::<usize>()
    }
    assert!(count(&tree.root) <= MAX_TREE_NODES);
    assert_eq!(tree.paths.len(), MAX_PATHS);
    assert!(tree.paths_left_out > 0);
    assert_eq!(tree.alone, None);
}

#[test]
fn a_tree_reads_as_text() {
    let composed = compose(&model(SAVE), &save_graph());
    let text = composed.tree("save_document").unwrap().to_string();
    assert_eq!(
        text,
        "tree save_document: critical, within the request's 5s
  save_document: deadline 2s, bound 2s
  ├─ authenticate: deadline 100ms, bound 100ms [static]
  ├─ lookup_session: deadline 150ms, bound 150ms [static]
  ├─ authorize: deadline 100ms, bound 100ms [static]
  ├─ validate: deadline 100ms, bound 100ms [static]
  ├─ write_document: deadline 1s, bound 1s [static]
  └─ record_analytics: deferred, after the response: outside this bound (a tree of its own)
  worst case with deadline propagation:    2s (`save_document`'s own)
  worst case if each timeout stood alone:  3.45s (2s + 100ms + 150ms + 100ms + 100ms + 1s)
  what propagation saves:                  1.45s
  per path:
    save_document > authenticate: 100ms with propagation (`authenticate`), 2.1s alone (2s + 100ms), 2s saved
    save_document > lookup_session: 150ms with propagation (`lookup_session`), 2.15s alone (2s + 150ms), 2s saved
    save_document > authorize: 100ms with propagation (`authorize`), 2.1s alone (2s + 100ms), 2s saved
    save_document > validate: 100ms with propagation (`validate`), 2.1s alone (2s + 100ms), 2s saved
    save_document > write_document: 1s with propagation (`write_document`), 3s alone (2s + 1s), 2s saved
"
    );
}
