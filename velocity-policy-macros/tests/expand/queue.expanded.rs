pub fn embed_document(id: DocId, text: String) {
    const _: &[u8] = ::core::include_bytes!(
        "$CARGO_MANIFEST_DIR/tests/expand/policies/search.policy"
    );
    static QUEUE: ::velocity_policy::__privateN::QueueSlot = ::velocity_policy::__privateN::QueueSlot::new(
        "embeddings",
    );
    let Some(args) = QUEUE.enqueue("embed_document", (id, text)) else {
        return;
    };
    let (id, text) = args;
    let work = ::velocity_policy::__privateN::typed::<
        ::velocity_policy::__privateN::ScheduledResult<Result<(), EmbedError>>,
        _,
    >(async move {
        let operation = {
            use ::core::time::Duration;
            use ::velocity_policy::__privateN::Handle;
            use ::velocity_policy::__privateN::config;
            const BY: &str = ::core::concat!(
                ::core::module_path!(), "::", "embed_document"
            );
            static OPERATION: Handle<
                ::velocity_policy::__privateN::deadline::OperationDeadline,
            > = Handle::operation(
                ::core::concat!(::core::module_path!(), "::", "embed_document"),
                BY,
                config::DeadlineConfig::new(Duration::from_secs(30)),
            );
            &*OPERATION
        };
        let deadline = ::velocity_policy::__privateN::Deadline::for_named(operation)?;
        let ran = deadline
            .run_in_scope(
                ::velocity_policy::__privateN::typed::<
                    Result<(), EmbedError>,
                    _,
                >(async move { embedder().embed(id, text).await }),
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
    let _ = ::velocity_policy::__privateN::background(
        ::core::concat!(::core::module_path!(), "::", "embed_document"),
        work,
    );
}
///The worker's side of [`embed_document`] on queue `embeddings`: give `embed_document::task()` to the queue's worker.
pub mod embed_document {
    #[allow(unused_imports, reason = "the arguments' types, as the function names them")]
    use super::*;
    ///The numbers of queue `embeddings`: no `queue embeddings { ... }` stanza declares it, so each is the runtime's default.
    pub fn queue_settings() -> ::velocity_policy::__privateN::queue::QueueSettings {
        ::velocity_policy::__privateN::queue::QueueSettings::new("embeddings")
    }
    ///What a worker of queue `embeddings` runs for a task of `embed_document`: its arguments decoded, then the same sequence as a call on the in-process pool. It carries `queue_settings()`, for the worker to start from.
    pub fn task() -> ::velocity_policy::__privateN::queue::Handler {
        ::velocity_policy::__privateN::queue_handler(
                "embed_document",
                |(id, text): (DocId, String)| {
                    let work = ::velocity_policy::__privateN::typed::<
                        ::velocity_policy::__privateN::ScheduledResult<
                            Result<(), EmbedError>,
                        >,
                        _,
                    >(async move {
                        let operation = {
                            use ::core::time::Duration;
                            use ::velocity_policy::__privateN::Handle;
                            use ::velocity_policy::__privateN::config;
                            const BY: &str = ::core::concat!(
                                ::core::module_path!(), "::", "embed_document"
                            );
                            static OPERATION: Handle<
                                ::velocity_policy::__privateN::deadline::OperationDeadline,
                            > = Handle::operation(
                                ::core::concat!(
                                    ::core::module_path!(), "::", "embed_document"
                                ),
                                BY,
                                config::DeadlineConfig::new(Duration::from_secs(30)),
                            );
                            &*OPERATION
                        };
                        let deadline = ::velocity_policy::__privateN::Deadline::for_named(
                            operation,
                        )?;
                        let ran = deadline
                            .run_in_scope(
                                ::velocity_policy::__privateN::typed::<
                                    Result<(), EmbedError>,
                                    _,
                                >(async move { embedder().embed(id, text).await }),
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
                    work
                },
            )
            .with_settings(queue_settings())
    }
}
