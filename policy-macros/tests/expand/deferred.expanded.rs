fn index_document(id: DocId) {
    const _: &[u8] = ::core::include_bytes!(
        "$CARGO_MANIFEST_DIR/tests/expand/policies/search.policy"
    );
    let work = ::policy::__private::typed::<
        ::policy::__private::ScheduledResult<Result<(), SearchError>>,
        _,
    >(async move {
        let operation = {
            use ::policy::__private::Handle;
            const BY: &str = ::core::concat!(
                ::core::module_path!(), "::", "index_document"
            );
            static OPERATION: Handle<::policy::deadline::OperationDeadline> = Handle::operation(
                ::core::concat!(::core::module_path!(), "::", "index_document"),
                BY,
            );
            &*OPERATION
        };
        let deadline = ::policy::Deadline::for_named(operation)?;
        let ran = deadline
            .run_in_scope(
                ::policy::__private::typed::<
                    Result<(), SearchError>,
                    _,
                >(async move { search().index(id).await }),
            )
            .await;
        ::policy::CallError::from_run(ran)
    });
    let work = ::policy::__private::deferrable(
        ::policy::__private::scheduled(work, ::policy::__private::logged()),
    );
    ::policy::defer(
        ::core::concat!(::core::module_path!(), "::", "index_document"),
        work,
    );
}
