/// Pushes a document to the search index.
pub async fn push_to_index(id: DocId) -> Result<(), SearchError> {
    const _: &[u8] = ::core::include_bytes!(
        "$CARGO_MANIFEST_DIR/tests/expand/policies/search.policy"
    );
    let carrier = ::policy::__private::carrier::<Result<(), SearchError>>();
    let breaker: &'static ::policy::Breaker = {
        static BREAKER: ::policy::__private::LazyLock<::policy::Breaker> = ::policy::__private::LazyLock::new(||
        {
            ::policy::Registry::global()
                .breaker(
                    "search",
                    |breaker| {
                        breaker
                            .open_after_failures(
                                5u32,
                                ::core::time::Duration::from_nanos(30000000000u64),
                            )
                            .cooldown(::core::time::Duration::from_nanos(20000000000u64))
                            .sharing(::policy::Sharing::Openings {
                                quorum: 1u32,
                            })
                    },
                )
        });
        &*BREAKER
    };
    let bulkhead: &'static ::policy::Bulkhead = {
        static BULKHEAD: ::policy::__private::LazyLock<::policy::Bulkhead> = ::policy::__private::LazyLock::new(||
        {
            ::policy::Registry::global()
                .bulkhead(
                    "search",
                    |bulkhead| { bulkhead.max_concurrent(4u32).max_queued(2u32) },
                )
        });
        &*BULKHEAD
    };
    let retry: &'static ::policy::RetryPolicy = {
        static RETRY: ::policy::__private::LazyLock<
            ::policy::__private::Arc<::policy::RetryPolicy>,
        > = ::policy::__private::LazyLock::new(|| {
            ::policy::Registry::global()
                .retry(
                    "transient",
                    |retry| {
                        retry
                            .attempts(3u32)
                            .backoff(
                                ::core::time::Duration::from_nanos(50000000u64),
                                ::core::time::Duration::from_nanos(1000000000u64),
                            )
                            .attempt_timeout(
                                ::core::time::Duration::from_nanos(500000000u64),
                            )
                    },
                )
        });
        &**RETRY
    };
    let deadline = ::policy::Deadline::leaf(
            "push_to_index",
            ::core::time::Duration::from_nanos(2000000000u64),
            ::core::time::Duration::from_nanos(0u64),
        )
        .map_err(carrier.refused)?;
    let is_transient = ::policy::__private::classifier::<Result<(), SearchError>>();
    ::policy::retry_within_self_bounded(
            &deadline,
            retry,
            is_transient,
            ::policy::Idempotent::claim(|attempt: ::policy::retry::Attempt| {
                let id = ::policy::__private::RetryArg::for_attempt(&id);
                ::policy::__private::typed::<
                    ::policy::__private::Attempted<Result<(), SearchError>>,
                    _,
                >(async move {
                    breaker.check()?;
                    let slot = bulkhead.acquire(&attempt.deadline).await?;
                    match attempt
                        .deadline
                        .run(
                            attempt
                                .deadline
                                .scope(
                                    ::policy::__private::typed::<
                                        Result<(), SearchError>,
                                        _,
                                    >(async move {
                                        search_client().put(id).await?;
                                        Ok(())
                                    }),
                                ),
                        )
                        .await
                    {
                        ::core::result::Result::Ok(
                            ::core::result::Result::Ok(value),
                        ) => {
                            breaker.record_success();
                            ::core::result::Result::Ok(value)
                        }
                        ::core::result::Result::Ok(
                            ::core::result::Result::Err(error),
                        ) => {
                            breaker.record_failure();
                            ::core::result::Result::Err(
                                ::policy::CallError::Failed(error),
                            )
                        }
                        ::core::result::Result::Err(expired) => {
                            breaker.record_failure();
                            ::core::result::Result::Err(
                                ::policy::CallError::DeadlineExceeded(expired),
                            )
                        }
                    }
                })
            }),
        )
        .await
        .map_err(|error| carrier.flatten(error))
}
