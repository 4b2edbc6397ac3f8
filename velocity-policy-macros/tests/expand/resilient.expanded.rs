/// Pushes a document to the search index.
pub async fn push_to_index(id: DocId) -> Result<(), SearchError> {
    const _: &[u8] = ::core::include_bytes!(
        "$CARGO_MANIFEST_DIR/tests/expand/policies/search.policy"
    );
    let carrier = ::velocity_policy::__privateN::carrier::<Result<(), SearchError>>();
    let (breaker, bulkhead, retry, operation) = {
        use ::core::time::Duration;
        use ::velocity_policy::__privateN::Handle;
        use ::velocity_policy::__privateN::config;
        const BY: &str = ::core::concat!(::core::module_path!(), "::", "push_to_index");
        static BREAKER: Handle<::velocity_policy::__privateN::Breaker> = Handle::breaker(
            "search",
            BY,
            config::BreakerConfig::new(
                    config::OpenAfter::failures(5, Duration::from_secs(30)),
                    Duration::from_secs(20),
                )
                .with_sharing(config::Sharing::Openings {
                    quorum: 1,
                }),
        );
        static BULKHEAD: Handle<::velocity_policy::__privateN::Bulkhead> = Handle::bulkhead(
            "search",
            BY,
            config::BulkheadConfig::new(4).with_max_queued(2),
        );
        static RETRY: Handle<::velocity_policy::__privateN::RetryPolicy> = Handle::retry(
            "transient",
            BY,
            config::RetryConfig::new(3)
                .with_backoff(
                    config::Backoff::full_jitter(
                        Duration::from_millis(50),
                        Duration::from_secs(1),
                    ),
                )
                .with_attempt_timeout(Duration::from_millis(500)),
        );
        static OPERATION: Handle<
            ::velocity_policy::__privateN::deadline::OperationDeadline,
        > = Handle::operation(
            ::core::concat!(::core::module_path!(), "::", "push_to_index"),
            BY,
            config::DeadlineConfig::new(Duration::from_secs(2)),
        );
        (&*BREAKER, &*BULKHEAD, &*RETRY, &*OPERATION)
    };
    ::velocity_policy::__privateN::traced(
            {
                static CALLS: ::velocity_policy::__privateN::Calls = ::velocity_policy::__privateN::Calls::new(
                    "push_to_index",
                );
                &CALLS
            },
            ::velocity_policy::__privateN::tracing::info_span!(
                target : "policy", "push_to_index", operation = "push_to_index", class =
                "critical", "otel.status_code" =
                ::velocity_policy::__privateN::tracing::field::Empty, "error.type" =
                ::velocity_policy::__privateN::tracing::field::Empty,
            ),
            carrier
                .body(async move {
                    let deadline = ::velocity_policy::__privateN::Deadline::for_named(
                            operation,
                        )
                        .map_err(carrier.refused)?;
                    let outcome = ::velocity_policy::__privateN::retry::retry_within_self_bounded(
                            &deadline,
                            retry,
                            ::velocity_policy::__privateN::classifier::<
                                Result<(), SearchError>,
                            >(),
                            ::velocity_policy::__privateN::Idempotent::claim(|
                                ::velocity_policy::__privateN::retry::Attempt {
                                    deadline,
                                    ..
                                }|
                            {
                                let id = ::velocity_policy::__privateN::RetryArg::for_attempt(
                                    &id,
                                );
                                carrier
                                    .attempt(async move {
                                        breaker.check()?;
                                        let slot = match bulkhead.acquire(&deadline).decided() {
                                            Ok(decided) => decided,
                                            Err(queued) => queued.await,
                                        }?;
                                        let ran = deadline
                                            .run_in_scope(
                                                carrier
                                                    .body(async move {
                                                        search_client().put(id).await?;
                                                        Ok(())
                                                    }),
                                            )
                                            .await;
                                        breaker.observe(ran)
                                    })
                            }),
                        )
                        .await;
                    carrier.outcome(outcome)
                }),
        )
        .await
}
