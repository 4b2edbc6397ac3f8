fn index_document(id: DocId) {
    const _: &[u8] = ::core::include_bytes!(
        "$CARGO_MANIFEST_DIR/tests/expand/policies/search.policy"
    );
    let work = ::velocity_policy::__privateN::typed::<
        ::velocity_policy::__privateN::ScheduledResult<Result<(), SearchError>>,
        _,
    >(async move {
        let operation = {
            use ::velocity_policy::__privateN::Handle;
            use ::velocity_policy::__privateN::config;
            const BY: &str = ::core::concat!(
                ::core::module_path!(), "::", "index_document"
            );
            static OPERATION: Handle<
                ::velocity_policy::__privateN::deadline::OperationDeadline,
            > = Handle::operation(
                ::core::concat!(::core::module_path!(), "::", "index_document"),
                BY,
                config::DeadlineConfig::DEFAULT,
            );
            &*OPERATION
        };
        let deadline = ::velocity_policy::__privateN::Deadline::for_named(operation)?;
        let ran = deadline
            .run_in_scope(
                ::velocity_policy::__privateN::typed::<
                    Result<(), SearchError>,
                    _,
                >(async move { search().index(id).await }),
            )
            .await;
        ::velocity_policy::__privateN::CallError::from_run(ran)
    });
    let work = ::velocity_policy::__privateN::deferrable(
        ::velocity_policy::__privateN::scheduled(
            work,
            ::velocity_policy::__privateN::logged(),
        ),
    );
    ::velocity_policy::__privateN::defer(
        ::core::concat!(::core::module_path!(), "::", "index_document"),
        work,
    );
}
