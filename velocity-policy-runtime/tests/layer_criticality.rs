//! The request's criticality through tower layers: from the route and, within its ceiling, the
//! caller's header; carried on by the propagation layer; what a bulkhead layer admits by it.
//! Feature `http`.
#![cfg(feature = "http")]
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::convert::Infallible;

use http::{HeaderName, HeaderValue, Request};
use tower::{ServiceBuilder, ServiceExt, service_fn};
use velocity_policy_runtime::criticality::{self, Criticality};
use velocity_policy_runtime::layer::deadline::HeaderTrust;
use velocity_policy_runtime::layer::{
    BoxError, BulkheadLayer, CriticalityLayer, PropagateDeadlineLayer,
};
use velocity_policy_runtime::shedding::ShedReason;
use velocity_policy_runtime::{Bulkhead, RefusalKind, RefusalReason, ResilienceError};

/// The level a handler behind `layer` sees for a request carrying `header`.
async fn level_seen(layer: CriticalityLayer, header: Option<&str>) -> Criticality {
    let service = ServiceBuilder::new()
        .layer(layer)
        .service(service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(criticality::current())
        }));
    let mut request = Request::new(());
    if let Some(value) = header {
        request
            .headers_mut()
            .insert("x-criticality", HeaderValue::from_str(value).unwrap());
    }
    service.oneshot(request).await.unwrap()
}

#[tokio::test]
async fn a_route_sets_the_level_and_a_caller_may_lower_it_but_never_raise_it_past_the_ceiling() {
    let route = || CriticalityLayer::new(Criticality::Critical);
    assert_eq!(level_seen(route(), None).await, Criticality::Critical);
    assert_eq!(
        level_seen(route(), Some("sheddable")).await,
        Criticality::Sheddable
    );
    // A public client claiming more than the route allows gets the route's ceiling.
    assert_eq!(
        level_seen(route(), Some("critical_plus")).await,
        Criticality::Critical
    );
    assert_eq!(
        level_seen(
            route().at_most(Criticality::CriticalPlus),
            Some("CRITICAL_PLUS")
        )
        .await,
        Criticality::CriticalPlus
    );
    // A header naming no level is ignored.
    assert_eq!(
        level_seen(route(), Some("urgent!")).await,
        Criticality::Critical
    );
    // A sheddable route stays sheddable, whatever the header says.
    assert_eq!(
        level_seen(
            CriticalityLayer::new(Criticality::Sheddable),
            Some("critical")
        )
        .await,
        Criticality::Sheddable
    );
    // A ceiling below the route's level is raised to it.
    assert_eq!(
        level_seen(route().at_most(Criticality::Sheddable), None).await,
        Criticality::Critical
    );
}

#[tokio::test]
async fn an_untrusted_callers_header_is_ignored() {
    let marked =
        CriticalityLayer::new(Criticality::Critical).trust_headers(HeaderTrust::InternalHeader {
            name: HeaderName::from_static("x-internal"),
            value: HeaderValue::from_static("mesh"),
        });
    assert_eq!(
        level_seen(marked.clone(), Some("sheddable")).await,
        Criticality::Critical
    );
    let service = ServiceBuilder::new()
        .layer(marked)
        .service(service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(criticality::current())
        }));
    let request = Request::builder()
        .header("x-criticality", "sheddable")
        .header("x-internal", "mesh")
        .body(())
        .unwrap();
    assert_eq!(
        service.oneshot(request).await.unwrap(),
        Criticality::Sheddable
    );
    let none = CriticalityLayer::new(Criticality::Critical).trust_headers(HeaderTrust::None);
    assert_eq!(
        level_seen(none, Some("sheddable")).await,
        Criticality::Critical
    );
}

#[tokio::test]
async fn the_level_in_scope_travels_on_outgoing_requests() {
    let client = ServiceBuilder::new()
        .layer(PropagateDeadlineLayer::new())
        .service(service_fn(|request: Request<()>| async move {
            Ok::<_, Infallible>(
                request
                    .headers()
                    .get("x-criticality")
                    .map(|v| v.to_str().unwrap().to_owned()),
            )
        }));
    let sent = criticality::scope(
        Criticality::SheddablePlus,
        client.clone().oneshot(Request::new(())),
    )
    .await
    .unwrap();
    assert_eq!(sent.as_deref(), Some("sheddable_plus"));
    // Outside every scope (and with no deadline) the request goes as it is.
    assert_eq!(client.oneshot(Request::new(())).await.unwrap(), None);
}

#[tokio::test(start_paused = true)]
async fn a_full_bulkhead_turns_away_the_sheddable_route_and_keeps_room_for_the_critical_one() {
    let bulkhead = Bulkhead::builder("kept").max_concurrent(4).build();
    let route = |level| {
        ServiceBuilder::new()
            .layer(CriticalityLayer::new(level))
            .layer(BulkheadLayer::new(bulkhead.clone()))
            .service(service_fn(|_: Request<()>| async { Ok::<_, BoxError>(()) }))
    };
    // A bulkhead counts levels from its first call that is not `critical` on.
    drop(criticality::sync_scope(Criticality::Sheddable, || bulkhead.try_acquire()).unwrap());
    // Three critical calls in flight, then done: critical's recent peak is 3.
    let held: Vec<_> = (0..3)
        .map(|_| bulkhead.try_acquire_owned().unwrap())
        .collect();
    drop(held);
    // One slot of four is left for sheddable work while critical's three are kept.
    let held =
        criticality::sync_scope(Criticality::Sheddable, || bulkhead.try_acquire_owned()).unwrap();
    let error = route(Criticality::Sheddable)
        .oneshot(Request::new(()))
        .await
        .unwrap_err();
    let refusal = error.downcast_ref::<ResilienceError>().unwrap();
    assert_eq!(refusal.kind(), RefusalKind::Shed);
    assert!(matches!(
        refusal.reason(),
        RefusalReason::Shed(ShedReason::Criticality {
            level: Criticality::Sheddable,
            free: 3,
            kept: 3
        })
    ));
    // The critical route still gets in.
    route(Criticality::Critical)
        .oneshot(Request::new(()))
        .await
        .unwrap();
    drop(held);
}
