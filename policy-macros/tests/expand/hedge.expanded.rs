pub async fn lookup(id: DocId) -> Result<Doc, SearchError> {
    const _: &[u8] = ::core::include_bytes!(
        "$CARGO_MANIFEST_DIR/tests/expand/policies/search.policy"
    );
    let carrier = ::policy::__private::carrier::<Result<Doc, SearchError>>();
    let (breaker, bulkhead, retry, hedge, operation) = {
        use ::core::time::Duration;
        use ::policy::__private::Handle;
        use ::policy::__private::config;
        const BY: &str = ::core::concat!(::core::module_path!(), "::", "lookup");
        static BREAKER: Handle<::policy::Breaker> = Handle::breaker(
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
        static BULKHEAD: Handle<::policy::Bulkhead> = Handle::bulkhead(
            "search",
            BY,
            config::BulkheadConfig::new(4).with_max_queued(2),
        );
        static RETRY: Handle<::policy::RetryPolicy> = Handle::retry("transient", BY)
            .attempts(3)
            .backoff(Duration::from_millis(50), Duration::from_secs(1))
            .attempt_timeout(Duration::from_millis(500));
        static HEDGE: Handle<::policy::hedge::Hedge> = Handle::hedge("tail", BY)
            .percentile(95.0)
            .max(2);
        static OPERATION: Handle<::policy::deadline::OperationDeadline> = Handle::operation(
                ::core::concat!(::core::module_path!(), "::", "lookup"),
                BY,
            )
            .deadline(Duration::from_secs(2));
        (&*BREAKER, &*BULKHEAD, &*RETRY, &*HEDGE, &*OPERATION)
    };
    ::policy::__private::traced(
            {
                static CALLS: ::policy::__private::Calls = ::policy::__private::Calls::new(
                    "lookup",
                );
                &CALLS
            },
            ::policy::__private::tracing::info_span!(
                target : "policy", "lookup", operation = "lookup", class = "critical",
                "otel.status_code" = ::policy::__private::tracing::field::Empty,
                "error.type" = ::policy::__private::tracing::field::Empty,
            ),
            carrier
                .body(async move {
                    let deadline = ::policy::Deadline::for_named(operation)
                        .map_err(carrier.refused)?;
                    let outcome = ::policy::retry::retry_within_self_bounded(
                            &deadline,
                            retry,
                            ::policy::__private::classifier::<
                                Result<Doc, SearchError>,
                            >(),
                            ::policy::Idempotent::claim(|
                                ::policy::retry::Attempt { deadline, .. }|
                            {
                                let id = ::policy::__private::RetryArg::for_attempt(&id);
                                carrier
                                    .attempt(async move {
                                        ::policy::hedge::hedge_within_retry(
                                                &deadline,
                                                hedge,
                                                retry,
                                                ::policy::Idempotent::claim(|
                                                    ::policy::retry::Attempt { deadline, .. }|
                                                {
                                                    let id = ::policy::__private::RetryArg::for_attempt(&id);
                                                    carrier
                                                        .attempt(async move {
                                                            breaker.check()?;
                                                            let slot = bulkhead.acquire(&deadline).await?;
                                                            let ran = deadline
                                                                .run_in_scope(
                                                                    carrier.body(async move { search_client().get(id).await }),
                                                                )
                                                                .await;
                                                            breaker.observe(ran)
                                                        })
                                                }),
                                            )
                                            .await
                                    })
                            }),
                        )
                        .await;
                    carrier.outcome(outcome)
                }),
        )
        .await
}
