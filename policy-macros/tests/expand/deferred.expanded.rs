fn index_document(id: DocId) {
    const _: &[u8] = ::core::include_bytes!(
        "$CARGO_MANIFEST_DIR/tests/expand/policies/search.policy"
    );
    let work = ::policy::__private::typed::<
        ::policy::__private::ScheduledResult<Result<(), SearchError>>,
        _,
    >(async move {
        let deadline = ::policy::Deadline::leaf(
            "index_document",
            ::policy::Deadline::MAX_BUDGET,
            ::core::time::Duration::from_nanos(0u64),
        )?;
        match deadline
            .run(
                deadline
                    .scope(
                        ::policy::__private::typed::<
                            Result<(), SearchError>,
                            _,
                        >(async move { search().index(id).await }),
                    ),
            )
            .await
        {
            ::core::result::Result::Ok(result) => {
                result.map_err(|error| ::policy::CallError::Failed(error))
            }
            ::core::result::Result::Err(expired) => {
                ::core::result::Result::Err(
                    ::policy::CallError::DeadlineExceeded(expired),
                )
            }
        }
    });
    let work = ::policy::__private::deferrable(::policy::__private::scheduled(work));
    ::policy::defer(
        ::core::concat!(::core::module_path!(), "::", "index_document"),
        work,
    );
}
