//! The expansion, read as code: `prettyplease` output compared with checked-in files.
//! Regenerate with `UPDATE_SNAPSHOTS=1 cargo test -p velocity-policy-macros` and review the diff.
//! The facade's hidden module is written `__privateN` here, so that a patch release (which
//! renames it) does not change every file.

use std::path::Path;

use proc_macro2::TokenStream;
use quote::quote;

use crate::args::AttrKind;
use crate::entry::attribute;

fn expand(kind: AttrKind, args: TokenStream, item: TokenStream) -> String {
    let manifest = env!("CARGO_MANIFEST_DIR");
    // As if written in tests/expand/: its `policies/` directory is the one read.
    let source = Path::new(manifest).join("tests/expand/input.rs");
    let tokens = attribute(kind, args, item, Some(&source));
    let file = syn2::parse2::<syn2::File>(tokens).expect("the expansion parses as items");
    versionless(prettyplease::unparse(&file).replace(manifest, "$CARGO_MANIFEST_DIR"))
}

/// The text without whitespace and trailing commas: where prettyplease breaks a line (and adds
/// a comma) depends on the paths' length.
fn squashed(text: &str) -> String {
    text.split_whitespace()
        .collect::<String>()
        .replace(",)", ")")
}

/// The expansion with the hidden module's patch version taken out: `__privateN`.
fn versionless(expanded: String) -> String {
    expanded.replace(crate::facade::PRIVATE_MODULE, "__privateN")
}

fn check(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/expand")
        .join(format!("{name}.expanded.rs"));
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, actual).expect("write the snapshot");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        expected == actual,
        "the expansion of `{name}` changed; run with UPDATE_SNAPSHOTS=1 and review\n--- expected\n{expected}\n--- actual\n{actual}"
    );
}

#[test]
fn resilient_reads_as_the_documented_sequence_of_calls() {
    let out = expand(
        AttrKind::Resilient,
        quote!(breaker = "search", bulkhead = "search", retry = "transient"),
        quote! {
            #[velocity_policy::idempotent]
            /// Pushes a document to the search index.
            pub async fn push_to_index(id: DocId) -> Result<(), SearchError> {
                search_client().put(id).await?;
                Ok(())
            }
        },
    );
    // The documented order: deadline, then per attempt breaker, bulkhead, run, record.
    let at = |needle: &str| {
        out.find(needle)
            .unwrap_or_else(|| panic!("`{needle}` in\n{out}"))
    };
    assert!(at("Deadline::for_named") < at("retry_within"));
    assert!(at("retry_within") < at("breaker.check()"));
    assert!(at("breaker.check()") < at("bulkhead.acquire"));
    assert!(at("bulkhead.acquire") < at(".run_in_scope("));
    assert!(at(".run_in_scope(") < at("breaker.observe("));
    check("resilient", &out);
}

#[test]
fn queued_background_work_enqueues_its_arguments_and_hands_its_worker_the_same_sequence() {
    let out = expand(
        AttrKind::Background,
        quote!(queue = "embeddings", deadline = "30s"),
        quote! {
            #[velocity_policy::idempotent]
            pub async fn embed_document(id: DocId, text: String) -> Result<(), EmbedError> {
                embedder().embed(id, text).await
            }
        },
    );
    let at = |needle: &str| {
        out.find(needle)
            .unwrap_or_else(|| panic!("`{needle}` in\n{out}"))
    };
    // The call: enqueue when the queue is installed, else the in-process pool as before.
    assert!(at("static QUEUE") < at("\"embeddings\""));
    assert!(at("\"embeddings\"") < at(".enqueue(\"embed_document\", (id, text))"));
    assert!(at(".enqueue(") < at("::velocity_policy::__privateN::background("));
    // The worker's side: the same deadline and sequence, from the decoded arguments.
    assert!(at("pub mod embed_document") < at("queue_handler("));
    assert!(out.matches("Deadline::for_named").count() == 2, "{out}");
    check("queue", &out);
}

#[test]
fn a_rate_limit_is_one_step_after_the_deadline_and_shedding_before_the_breaker() {
    let out = expand(
        AttrKind::Critical,
        quote!(
            ratelimit = "signups",
            breaker = "search",
            expected_cost = "20ms"
        ),
        quote! {
            async fn sign_up(email: Email) -> Result<UserId, AppError> {
                users().insert(email).await
            }
        },
    );
    let at = |needle: &str| {
        out.find(needle)
            .unwrap_or_else(|| panic!("`{needle}` in\n{out}"))
    };
    assert!(at("Deadline::for_named") < at(".admit("));
    assert!(at(".admit(") < at("ratelimit.acquire().await"));
    assert!(at("ratelimit.acquire().await") < at("breaker.check()"));
    // The file's stanza, setting for setting: one registry entry by the stanza's name.
    assert!(
        squashed(&out).contains(&squashed(
            "Handle<::velocity_policy::__privateN::RateLimit> = Handle::ratelimit(\"signups\","
        )),
        "{out}"
    );
    check("ratelimit", &out);
}

#[test]
fn a_hedge_runs_each_attempt_again_through_the_breaker_and_bulkhead_inside_the_retry() {
    let out = expand(
        AttrKind::Resilient,
        quote!(
            breaker = "search",
            bulkhead = "search",
            retry = "transient",
            hedge = "tail"
        ),
        quote! {
            #[velocity_policy::idempotent]
            pub async fn lookup(id: DocId) -> Result<Doc, SearchError> {
                search_client().get(id).await
            }
        },
    );
    let at = |needle: &str| {
        out.find(needle)
            .unwrap_or_else(|| panic!("`{needle}` in\n{out}"))
    };
    // Retry outside, the hedge per retry attempt (its budget the retry's), then each
    // hedged attempt's own breaker check and bulkhead permit.
    assert!(at("Deadline::for_named") < at("retry_within_self_bounded"));
    assert!(at("retry_within_self_bounded") < at("hedge_within_retry("));
    assert!(at("hedge_within_retry") < at("breaker.check()"));
    assert!(at("breaker.check()") < at("bulkhead.acquire"));
    assert!(
        squashed(&out).contains(&squashed(
            "Handle<::velocity_policy::__privateN::hedge::Hedge> = Handle::hedge(\"tail\", BY, config::HedgeConfig::new("
        )),
        "{out}"
    );
    assert!(
        squashed(&out).contains(&squashed(
            "config::HedgeDelay::Percentile(95.0)).with_max(2)"
        )),
        "{out}"
    );
    check("hedge", &out);
}

#[test]
fn a_chaos_drill_is_drawn_inside_the_attempt_after_the_breaker_and_the_bulkhead() {
    let out = expand(
        AttrKind::Resilient,
        quote!(
            breaker = "search",
            bulkhead = "search",
            chaos = "drill",
            deadline = "1s"
        ),
        quote! {
            pub async fn lookup(id: DocId) -> Result<Doc, SearchError> {
                search_client().get(id).await
            }
        },
    );
    let at = |needle: &str| {
        out.find(needle)
            .unwrap_or_else(|| panic!("`{needle}` in\n{out}"))
    };
    assert!(at("breaker.check()") < at(".acquire(&deadline)"));
    assert!(at(".acquire(&deadline)") < at("let injection = chaos"));
    assert!(at("let injection = chaos") < at(".draw(::core::option::Option::Some(breaker))"));
    assert!(at(".draw(") < at(".run_in_scope("));
    // The body runs through the injection, under the attempt's deadline.
    let inside = &out[at(".run_in_scope(")..];
    let (injection, body) = (inside.find("injection"), inside.find("carrier.body("));
    assert!(injection.is_some() && injection < body, "{out}");
    assert!(at(".run_in_scope(") < at(".observe("));
    // Without a drill, nothing of it is emitted.
    let plain = expand(
        AttrKind::Resilient,
        quote!(breaker = "search", bulkhead = "search", deadline = "1s"),
        quote! {
            pub async fn lookup(id: DocId) -> Result<Doc, SearchError> {
                search_client().get(id).await
            }
        },
    );
    assert!(
        !plain.contains("chaos") && !plain.contains("injection"),
        "{plain}"
    );
}

#[test]
fn an_inline_hedge_without_retry_is_the_whole_attempt() {
    let out = expand(
        AttrKind::Critical,
        quote!(hedge(after = "40ms"), deadline = "1s"),
        quote! {
            #[velocity_policy::idempotent]
            async fn price(sku: u64) -> Result<u64, AppError> {
                pricing().get(sku).await
            }
        },
    );
    assert!(
        out.contains("::velocity_policy::__privateN::hedge::hedge_within("),
        "{out}"
    );
    assert!(
        squashed(&out).contains(&squashed(
            "config::HedgeDelay::After(Duration::from_millis(40))"
        )),
        "{out}"
    );
    assert!(!out.contains("retry_within"), "{out}");
    let out = expand(
        AttrKind::Critical,
        quote!(hedge(after = "p100"), deadline = "1s"),
        quote! {
            #[velocity_policy::idempotent]
            async fn price(sku: u64) -> Result<u64, AppError> { Ok(sku) }
        },
    );
    assert!(out.contains("`p100` is not a percentile"), "{out}");
    let out = expand(
        AttrKind::Critical,
        quote!(hedge(after = "5ms", max = 2), deadline = "1s"),
        quote! {
            async fn charge(card: Card) -> Result<u64, AppError> { Ok(1) }
        },
    );
    assert!(out.contains("policy::hedge-not-idempotent"), "{out}");
}

#[test]
fn an_inline_breakers_probation_is_part_of_its_declared_config() {
    let expand_with = |args: TokenStream| {
        expand(
            AttrKind::Critical,
            args,
            quote! {
                async fn call_partner(id: u64) -> Result<u64, AppError> {
                    partner().get(id).await
                }
            },
        )
    };
    let out = expand_with(quote!(
        breaker(
            failures = 3,
            within = "10m",
            cooldown = "20s",
            probation = "5s"
        ),
        deadline = "1s"
    ));
    assert!(!out.contains("compile_error"), "{out}");
    assert!(
        out.contains(".with_probation(Duration::from_secs(5))"),
        "{out}"
    );
    let out = expand_with(quote!(
        breaker(failures = 3, within = "10m", cooldown = "20s"),
        deadline = "1s"
    ));
    assert!(
        !out.contains("with_probation"),
        "one window when not set:\n{out}"
    );
}

/// Every row of a mechanism's settings table is an inline key, written with its example as
/// an attribute writes it (`"5s"` for a duration), and emitted as its builder; a second one is
/// refused at the key.
/// Each mechanism with a settings table written inline in an attribute, its required settings
/// given and `KEY` where a table row goes: breaker, bulkhead, retry, hedge.
const INLINE_WITH_KEY: [&str; 4] = [
    "breaker(failures = 3, within = \"10m\", cooldown = \"20s\", KEY)",
    "bulkhead(max_concurrent = 4, KEY)",
    "retry(attempts = 3, KEY)",
    "hedge(after = \"p95\", KEY)",
];

#[test]
fn every_row_of_every_table_is_an_inline_key_emitted_as_its_builder() {
    use velocity_policy_lang::{
        BreakerConfig, BulkheadConfig, HedgeConfig, RetryConfig, Setting, Unit,
    };

    fn rows<C>(table: &[Setting<C>]) -> Vec<(&'static str, &'static str, String)> {
        table
            .iter()
            .map(|setting| {
                let value = match setting.unit() {
                    Unit::Duration => format!("{:?}", setting.example),
                    Unit::Count | Unit::Share => setting.example.to_owned(),
                };
                (setting.key, setting.builder, value)
            })
            .collect()
    }
    let [breaker, bulkhead, retry, hedge] = INLINE_WITH_KEY;
    let mechanisms = [
        (breaker, rows(BreakerConfig::SETTINGS)),
        (bulkhead, rows(BulkheadConfig::SETTINGS)),
        (retry, rows(RetryConfig::SETTINGS)),
        (hedge, rows(HedgeConfig::SETTINGS)),
    ];
    for (inline, rows) in mechanisms {
        for (key, builder, value) in rows {
            let written = format!("{key} = {value}");
            let args = |written: &str| -> TokenStream {
                format!("{}, deadline = \"1s\"", inline.replace("KEY", written))
                    .parse()
                    .expect("tokens")
            };
            let out = expand(
                AttrKind::Critical,
                args(&written),
                quote! {
                    #[velocity_policy::idempotent]
                    async fn call_partner(id: u64) -> Result<u64, AppError> {
                        partner().get(id).await
                    }
                },
            );
            assert!(!out.contains("compile_error"), "{written}:\n{out}");
            assert!(out.contains(&format!(".{builder}(")), "{written}:\n{out}");
            let twice = expand(
                AttrKind::Critical,
                args(&format!("{written}, {written}")),
                quote! {
                    #[velocity_policy::idempotent]
                    async fn call_partner(id: u64) -> Result<u64, AppError> { Ok(id) }
                },
            );
            assert!(
                twice.contains(&format!("`{key}` is set twice: keep one")),
                "{written} twice:\n{twice}"
            );
        }
    }
}

/// Every row of a mechanism's settings table whose range refuses something, written inline
/// with a value outside it, is a compile error with the row's code (the one validator's, read
/// from the row).
#[test]
fn every_range_of_every_table_is_refused_inline_with_its_code() {
    use velocity_policy_lang::units::{format_duration, format_ratio};
    use velocity_policy_lang::{
        BreakerConfig, BulkheadConfig, HedgeConfig, Number, RetryConfig, Setting,
    };

    /// Each refusing row's key, a value outside its range as an attribute writes it, and
    /// its code.
    fn outside<C>(table: &[Setting<C>]) -> Vec<(&'static str, String, &'static str)> {
        table
            .iter()
            .filter_map(|setting| {
                let value = match setting.range.outside()? {
                    Number::Duration(d) => format!("{:?}", format_duration(d)),
                    Number::Count(n) => n.to_string(),
                    Number::Share(share) => format_ratio(share),
                };
                Some((setting.key, value, setting.range.code()?))
            })
            .collect()
    }
    let [breaker, bulkhead, retry, hedge] = INLINE_WITH_KEY;
    let mechanisms = [
        (breaker, outside(BreakerConfig::SETTINGS)),
        (bulkhead, outside(BulkheadConfig::SETTINGS)),
        (retry, outside(RetryConfig::SETTINGS)),
        (hedge, outside(HedgeConfig::SETTINGS)),
    ];
    let mut checked = 0;
    for (inline, rows) in mechanisms {
        for (key, value, code) in rows {
            checked += 1;
            let written = format!("{key} = {value}");
            let args: TokenStream =
                format!("{}, deadline = \"1s\"", inline.replace("KEY", &written))
                    .parse()
                    .expect("tokens");
            let out = expand(
                AttrKind::Critical,
                args,
                quote! {
                    #[velocity_policy::idempotent]
                    async fn call_partner(id: u64) -> Result<u64, AppError> { Ok(id) }
                },
            );
            assert!(out.contains("compile_error"), "{written}:\n{out}");
            assert!(out.contains(&format!("[{code}]")), "{written}:\n{out}");
        }
    }
    assert!(checked >= 3, "{checked} ranges checked");
}

#[test]
fn an_inline_hedges_min_delay_is_part_of_its_declared_config() {
    let out = expand(
        AttrKind::Critical,
        quote!(hedge(after = "p95", min_delay = "20ms"), deadline = "1s"),
        quote! {
            #[velocity_policy::idempotent]
            async fn price(sku: u64) -> Result<u64, AppError> {
                pricing().get(sku).await
            }
        },
    );
    assert!(!out.contains("compile_error"), "{out}");
    assert!(
        squashed(&out).contains(&squashed(
            "config::HedgeConfig::new(config::HedgeDelay::Percentile(95.0)).with_min_delay(Duration::from_millis(20))"
        )),
        "{out}"
    );
}

#[test]
fn an_adaptive_bulkhead_declares_its_bounds_instead_of_a_slot_count() {
    let out = expand(
        AttrKind::Critical,
        quote!(
            bulkhead(adaptive(min = 4, max = 64), max_queued = 2),
            deadline = "1s"
        ),
        quote! {
            async fn call_partner(id: u64) -> Result<u64, AppError> {
                partner().get(id).await
            }
        },
    );
    assert!(out.contains("AdaptiveLimit::new(4, 64)"), "{out}");
    assert!(out.contains(".with_max_queued(2)"), "{out}");
    assert!(!out.contains("BulkheadConfig::new("), "{out}");
    assert!(out.contains(".acquire(&deadline)"), "{out}");
}

#[test]
fn operation_layer_is_a_builder_chain_over_the_attributes_handles() {
    let manifest = env!("CARGO_MANIFEST_DIR");
    let source = Path::new(manifest).join("tests/expand/input.rs");
    let tokens = crate::layer::operation_layer(quote!("reindex_all"), Some(&source));
    let expr = syn::parse2::<syn::Expr>(tokens).expect("the expansion parses as an expression");
    // As a `let`, so prettyplease prints it as code.
    let file: syn2::File = syn2::parse_quote!(fn layer() { let layer = #expr; });
    let out = versionless(prettyplease::unparse(&file).replace(manifest, "$CARGO_MANIFEST_DIR"));
    // The same statics an attribute naming these mechanisms declares.
    for handle in [
        "Handle::breaker(\"search\", BY, config::BreakerConfig::new(",
        "Handle::bulkhead(\"search\", BY, config::BulkheadConfig::new(4)",
        "Handle::retry(\"transient\", BY, config::RetryConfig::new(3)",
    ] {
        assert!(
            squashed(&out).contains(&squashed(handle)),
            "{handle} in\n{out}"
        );
    }
    assert!(
        out.contains("include_bytes!"),
        "the files are tracked:\n{out}"
    );
    check("operation_layer", &out);
}

#[test]
fn operation_layer_refuses_what_it_cannot_be_with_the_fix() {
    let manifest = env!("CARGO_MANIFEST_DIR");
    let source = Path::new(manifest).join("tests/expand/input.rs");
    let out = crate::layer::operation_layer(quote!("reindex_al"), Some(&source)).to_string();
    assert!(out.contains("unknown operation `reindex_al`"), "{out}");
    assert!(out.contains("searched `search.policy`"), "{out}");
    assert!(out.contains("did you mean `reindex_all`?"), "{out}");
    let out = crate::layer::operation_layer(quote!("warm_cache"), Some(&source)).to_string();
    assert!(
        out.contains("operation `warm_cache` is deferred work"),
        "{out}"
    );
    assert!(out.contains("search.policy:"), "where it says so: {out}");
    let out = crate::layer::operation_layer(quote!("hedged_reindex"), Some(&source)).to_string();
    assert!(
        out.contains("sets `hedge = tail`") && out.contains("HedgeLayer::new"),
        "a hedge is refused, not dropped: {out}"
    );
    let out = crate::layer::operation_layer(quote!(NAME), Some(&source)).to_string();
    assert!(
        out.contains("expected the operation's name as a string literal"),
        "{out}"
    );
}

#[test]
fn critical_takes_a_child_deadline_and_runs_the_body_in_its_scope() {
    let out = expand(
        AttrKind::Critical,
        quote!(deadline = "3s", min_budget = "200ms"),
        quote! {
            async fn save_document(doc: Doc) -> Result<DocId, AppError> {
                db().insert(doc).await
            }
        },
    );
    check("critical", &out);
}

#[test]
fn a_binding_by_name_is_said_in_the_functions_docs() {
    let out = expand(
        AttrKind::Critical,
        quote!(deadline = "2s"),
        quote! {
            /// The price, from the pricing service.
            async fn fetch_price(sku: u64) -> Result<u64, AppError> {
                pricing().get(sku).await
            }
        },
    );
    // Bound to the file's operation of the same name: its breaker applies, and the docs
    // say where it was declared.
    assert!(out.contains("breaker.check()"), "{out}");
    assert!(
        out.contains(
            "/// Policy: bound to the operation `fetch_price` declared at `tests/expand/policies/search.policy:23:11`"
        ),
        "{out}"
    );
    assert!(
        out.starts_with("/// The price, from the pricing service.\n///\n/// Policy:"),
        "{out}"
    );
}

#[test]
fn deferred_schedules_and_returns_unit() {
    let out = expand(
        AttrKind::Deferred,
        quote!(),
        quote! {
            #[velocity_policy::idempotent]
            async fn index_document(id: DocId) -> Result<(), SearchError> {
                search().index(id).await
            }
        },
    );
    assert!(out.contains("fn index_document(id: DocId) {"), "{out}");
    check("deferred", &out);
}

#[test]
fn errors_keep_the_function_and_report_every_mistake_at_once() {
    let out = expand(
        AttrKind::Resilient,
        quote!(retry = "transent", deadlin = "3s", bulkhead = "search"),
        quote! {
            async fn push(id: u64) -> Result<(), SearchError> { Ok(()) }
        },
    );
    assert!(out.contains("async fn push(id: u64)"), "{out}");
    assert!(out.contains("did you mean `deadline`"), "{out}");
    assert!(out.contains("did you mean `transient`"), "{out}");
    assert!(
        !out.contains("retry_within"),
        "no expansion on errors:\n{out}"
    );
}

#[test]
fn rules_about_the_functions_shape_are_reported_with_the_others() {
    // Before the rules were one step, the first of these stopped the macro and the others
    // waited for the next build.
    let out = expand(
        AttrKind::Critical,
        quote!(
            deadline = "1s",
            retry = "transient",
            stale_if_error = "30s",
            fallback = "not a path!"
        ),
        quote! {
            async fn lookup<T>((a, b): (u8, u8), key: &str) -> Result<T, AppError> {
                todo!()
            }
        },
    );
    for message in [
        "operation `lookup` is retried but not marked `idempotent`",
        "a fallback needs plain parameter names",
        "`stale_if_error` keeps results in a cache built once per function",
        "`stale_if_error` keys its cache on the arguments, so they must be owned",
        "`not a path!` is not a function's name",
    ] {
        assert!(out.contains(message), "{message:?} in\n{out}");
    }
    assert!(out.contains("async fn lookup<T>"), "{out}");
}

#[test]
fn a_broken_policy_file_is_reported_by_every_expansion_in_one_process() {
    // As rust-analyzer's proc-macro server does: one process expands function after
    // function (and the same one again after each edit). Each expansion that reads the
    // broken file shows its error, the second from the files' cache.
    let root = std::env::temp_dir().join(format!("policy-macros-broken-{}", std::process::id()));
    std::fs::create_dir_all(root.join("policies")).expect("a temporary directory");
    std::fs::write(
        root.join("policies/broken.policy"),
        "bulkhead search { max_concurent = 4 }\n",
    )
    .expect("write the policy file");
    let source = root.join("src/lib.rs");
    for function in ["save", "load", "save"] {
        let ident = syn::Ident::new(function, proc_macro2::Span::call_site());
        let tokens = attribute(
            AttrKind::Critical,
            quote!(deadline = "1s"),
            quote!(async fn #ident(id: u64) -> Result<(), AppError> { Ok(()) }),
            Some(&source),
        )
        .to_string();
        assert!(
            tokens.contains("unknown setting `max_concurent` in `bulkhead`"),
            "{function}: {tokens}"
        );
        assert!(
            tokens.contains("broken.policy:1:19"),
            "{function}: {tokens}"
        );
        assert!(tokens.contains(&format!("async fn {function}")), "{tokens}");
    }
    std::fs::remove_dir_all(&root).expect("remove the temporary directory");
}

/// How the expansion shows that it uses a setting of the language.
enum Used {
    /// The expansion of `fn sample` under `attribute`, bound to the file's operation
    /// `sample`, contains every needle.
    Expanded(AttrKind, &'static [&'static str]),
    /// Checked at compile time by the validator: the sample is refused with this code.
    Refused(&'static str),
    /// Read by the `policy` command, never by the expansion (the build side).
    Command(&'static str),
}

/// What one setting or stanza needs besides itself, and how its use shows.
struct Sample {
    setting: &'static str,
    policy: &'static str,
    used: Used,
}

/// No dead paths: every stanza and every operation setting the language accepts is used,
/// each by the expansion of a sample that sets it (or, for what is a check rather than a
/// step, by the validator; for the build side, by the `policy` command). A setting the
/// language learns without an entry here fails this test.
#[test]
fn every_stanza_and_operation_setting_the_language_accepts_is_used() {
    use Used::{Command, Expanded, Refused};
    const MECHANISMS: &str = "breaker b { open_after = 5 failures within 30s; cooldown = 20s }\n\
         bulkhead k { max_concurrent = 3; max_queued = 1 }\n\
         retry r { attempts = 3; backoff = full_jitter(base = 50ms, cap = 1s) }\n\
         ratelimit l { 7 per 1s; on_timeout = open; on_error = closed }\n";
    let samples = [
        Sample {
            setting: "breaker",
            policy: "operation sample: critical { breaker = b; deadline = 1s }",
            used: Expanded(
                AttrKind::Critical,
                &[
                    "Handle::breaker(\"b\", BY, config::BreakerConfig::new(config::OpenAfter::failures(5, Duration::from_secs(30)), Duration::from_secs(20),",
                    "breaker.check()",
                    "breaker.observe(ran)",
                ],
            ),
        },
        Sample {
            setting: "bulkhead",
            policy: "operation sample: critical { bulkhead = k; deadline = 1s }",
            used: Expanded(
                AttrKind::Critical,
                &[
                    "config::BulkheadConfig::new(3).with_max_queued(1)",
                    "bulkhead.acquire(&deadline)",
                ],
            ),
        },
        Sample {
            setting: "retry",
            policy: "operation sample: critical, idempotent { retry = r; deadline = 1s }",
            used: Expanded(
                AttrKind::Critical,
                &[
                    "config::RetryConfig::new(3).with_backoff(config::Backoff::full_jitter(",
                    "retry_within_self_bounded",
                ],
            ),
        },
        Sample {
            setting: "hedge",
            policy: "hedge h { after = 25ms; max = 3 }\noperation sample: critical, idempotent { hedge = h; deadline = 1s }",
            used: Expanded(
                AttrKind::Critical,
                &[
                    "config::HedgeConfig::new(config::HedgeDelay::After(Duration::from_millis(25))).with_max(3)",
                    "hedge_within(",
                ],
            ),
        },
        Sample {
            setting: "ratelimit",
            policy: "operation sample: critical { ratelimit = l; deadline = 1s }",
            used: Expanded(
                AttrKind::Critical,
                &[
                    "config::RateLimitConfig::new(7, Duration::from_secs(1))",
                    ".with_on_error(config::FailMode::Closed)",
                    "ratelimit.acquire().await",
                ],
            ),
        },
        Sample {
            setting: "deadline",
            policy: "operation sample: critical { deadline = 7s }",
            used: Expanded(
                AttrKind::Critical,
                &[
                    "config::DeadlineConfig::new(Duration::from_secs(7))",
                    "Deadline::for_named(operation)",
                ],
            ),
        },
        Sample {
            setting: "min_budget",
            policy: "operation sample: critical { deadline = 1s; min_budget = 13ms }",
            used: Expanded(
                AttrKind::Critical,
                &[".with_min_budget(Duration::from_millis(13))"],
            ),
        },
        Sample {
            setting: "expected_cost",
            policy: "operation sample: critical { deadline = 1s; expected_cost = 17ms }",
            used: Expanded(
                AttrKind::Critical,
                &["::core::time::Duration::from_millis(17)", ".admit("],
            ),
        },
        Sample {
            setting: "shed_at",
            policy: "operation sample: deferred, idempotent { bulkhead = k; shed_at = 0.3 }",
            used: Expanded(
                AttrKind::Deferred,
                &["config::SheddingConfig::new(0.3, 0.25)", "bulkhead.load()"],
            ),
        },
        Sample {
            setting: "fallback",
            policy: "operation sample: critical { deadline = 1s; fallback = \"cached_sample\" }",
            used: Expanded(
                AttrKind::Critical,
                &["= cached_sample;", ".answered_by(\"cached_sample\")"],
            ),
        },
        Sample {
            setting: "fallback_on_failure",
            policy: "operation sample: critical { deadline = 1s; fallback = \"cached_sample\"; fallback_on_failure }",
            used: Expanded(AttrKind::Critical, &[".covers(&reason, true)"]),
        },
        Sample {
            setting: "stale_if_error",
            policy: "operation sample: critical { deadline = 1s; stale_if_error = 30s }",
            used: Expanded(
                AttrKind::Critical,
                &["stale_cache", "::core::time::Duration::from_secs(30)"],
            ),
        },
        // `queue` is both an operation setting and a stanza (one concept, one name): the
        // sample sets both, and the stanza's every number must reach the expansion.
        Sample {
            setting: "queue",
            policy: "queue embeddings { max_len = 3; visibility_timeout = 7s; max_deliveries = 2; task_deadline = 5s; concurrency = 9 }\n\
                     operation sample: background, idempotent { queue = embeddings }",
            used: Expanded(
                AttrKind::Background,
                &[
                    "static QUEUE",
                    "\"embeddings\"",
                    "mod sample {",
                    "queue_handler(",
                    "pub fn queue_settings() -> ::velocity_policy::__privateN::queue::QueueSettings",
                    "settings.max_len = ::core::option::Option::Some(3u64);",
                    "settings.visibility_timeout = ::core::option::Option::Some(",
                    "::core::time::Duration::from_secs(7)",
                    "settings.max_deliveries = ::core::option::Option::Some(2u32);",
                    "settings.task_deadline = ::core::option::Option::Some(",
                    "::core::time::Duration::from_secs(5)",
                    "settings.concurrency = ::core::option::Option::Some(9u32);",
                    ".with_settings(queue_settings())",
                ],
            ),
        },
        Sample {
            setting: "poll_budget",
            policy: "operation sample: critical { deadline = 1s; poll_budget = 10ms }",
            used: Expanded(
                AttrKind::Critical,
                &["Handle::poll_monitor(", "monitor.watch("],
            ),
        },
        Sample {
            setting: "isolate",
            policy: "operation sample: critical { isolate = blocking(max_concurrent = 2) }",
            used: Expanded(AttrKind::Isolate, &["Handle::pool(", ".max_concurrent(2)"]),
        },
        Sample {
            setting: "idempotent",
            policy: "operation sample: critical, idempotent { retry = r; deadline = 1s }",
            used: Expanded(
                AttrKind::Critical,
                &["::velocity_policy::__privateN::Idempotent::claim("],
            ),
        },
        Sample {
            setting: "durable",
            policy: "operation sample: deferred, idempotent, durable {}",
            used: Refused("policy::durable-not-critical"),
        },
        Sample {
            setting: "request",
            policy: "request { deadline = 9s }\noperation sample: critical {}",
            used: Expanded(
                AttrKind::Critical,
                &["config::DeadlineConfig::new(Duration::from_secs(9))"],
            ),
        },
        Sample {
            setting: "shedding",
            policy: "shedding { deferred at load 0.4; background at load 0.2 }\noperation sample: deferred, idempotent { bulkhead = k }",
            used: Expanded(
                AttrKind::Deferred,
                &["config::SheddingConfig::new(0.4, 0.2)"],
            ),
        },
        Sample {
            setting: "chaos",
            policy: "chaos c { latency = uniform(200ms, 800ms) at 10%; error at 5%; refuse at 1%; status 429 retry_after 5s at 2%; during = 1m to 2m; instances = 30%; enabled = false }\noperation sample: critical { chaos = c; deadline = 1s }",
            used: Expanded(
                AttrKind::Critical,
                &[
                    "Handle::chaos(\"c\", BY)",
                    ".latency_uniform(Duration::from_millis(200), Duration::from_millis(800), 0.1)",
                    ".error(0.05)",
                    ".refuse(0.01)",
                    ".too_many_requests(Duration::from_secs(5), 0.02)",
                    ".during(Duration::from_secs(60), Duration::from_secs(120))",
                    ".instances(0.3)",
                    ".enabled(false)",
                    "let injection = chaos",
                    ".draw(::core::option::Option::None)",
                    ".run_in_scope(injection.run(",
                ],
            ),
        },
        Sample {
            setting: "assets",
            policy: "",
            used: Command("policy assets"),
        },
        Sample {
            setting: "locality",
            policy: "",
            used: Command("policy locality"),
        },
        Sample {
            setting: "ceilings",
            policy: "",
            used: Command("policy gate"),
        },
        Sample {
            setting: "quarantine",
            policy: "",
            used: Command("policy gate"),
        },
        // How far a run-time override may move a number: read by the runtime's overrides
        // and by `policy check --against`, never by an expansion.
        Sample {
            setting: "envelope",
            policy: "",
            used: Command("policy check --against"),
        },
    ];
    // The mechanism stanzas (`breaker`, `bulkhead`, `retry`, `ratelimit`) are used through
    // the operation setting of the same name, and `operation` by every sample.
    let accepted: std::collections::BTreeSet<&str> = velocity_policy_lang::OPERATION_STATEMENTS
        .iter()
        .chain(velocity_policy_lang::OPERATION_FLAGS)
        .copied()
        .chain(velocity_policy_lang::stanza_keywords().filter(|k| *k != "operation"))
        .collect();
    let sampled: std::collections::BTreeSet<&str> = samples.iter().map(|s| s.setting).collect();
    // A name that is both a stanza and an operation setting has one sample: it declares
    // the stanza too (here or among the mechanisms above), so neither is sampled through
    // the other alone.
    for both in velocity_policy_lang::stanza_keywords()
        .filter(|k| velocity_policy_lang::OPERATION_STATEMENTS.contains(k))
    {
        let sample = samples.iter().find(|s| s.setting == both);
        assert!(
            sample.is_some_and(|s| {
                let stanza = format!("{both} ");
                format!("{MECHANISMS}{}", s.policy)
                    .lines()
                    .any(|line| line.trim_start().starts_with(&stanza))
                    && s.policy.contains(&format!("{both} = "))
            }),
            "the sample of `{both}` declares the stanza and sets the operation's `{both}`"
        );
    }
    assert_eq!(
        accepted, sampled,
        "every setting and stanza of the language has a sample"
    );

    let root = std::env::temp_dir().join(format!("policy-macros-used-{}", std::process::id()));
    for sample in &samples {
        let (kind, needles, code) = match &sample.used {
            Expanded(kind, needles) => (*kind, *needles, None),
            Refused(code) => (AttrKind::Operation, &[][..], Some(*code)),
            Command(command) => {
                assert!(command.starts_with("policy "), "{}", sample.setting);
                continue;
            }
        };
        let dir = root.join(sample.setting);
        std::fs::create_dir_all(dir.join("policies")).expect("a temporary directory");
        std::fs::write(
            dir.join("policies/sample.policy"),
            format!("{MECHANISMS}{}\n", sample.policy),
        )
        .expect("write the policy file");
        let (args, item) = match kind {
            AttrKind::Isolate => (
                quote!(),
                quote!(
                    fn sample(n: u64) -> u64 {
                        n
                    }
                ),
            ),
            AttrKind::Deferred | AttrKind::Background => (
                quote!(),
                quote!(
                    async fn sample(n: u64) -> Result<(), AppError> {
                        Ok(())
                    }
                ),
            ),
            AttrKind::Operation => (
                quote!("sample"),
                quote!(
                    async fn sample(n: u64) -> Result<(), AppError> {
                        Ok(())
                    }
                ),
            ),
            _ => (
                quote!(),
                quote!(
                    async fn sample(n: u64) -> Result<u64, AppError> {
                        Ok(n)
                    }
                ),
            ),
        };
        let tokens = attribute(kind, args, item, Some(&dir.join("src/lib.rs")));
        match code {
            Some(code) => {
                let text = versionless(tokens.to_string());
                assert!(text.contains(code), "{}: {code} in {text}", sample.setting);
            }
            None => {
                let file = syn2::parse2::<syn2::File>(tokens.clone()).unwrap_or_else(|_| {
                    panic!("{}: the expansion parses: {tokens}", sample.setting)
                });
                let out = versionless(prettyplease::unparse(&file));
                assert!(
                    !out.contains("compile_error"),
                    "{}: expands without errors:\n{out}",
                    sample.setting
                );
                // Whitespace aside: prettyplease breaks long lines where it likes (and adds a
                // trailing comma where it breaks an argument list).
                let with_commas: String = out.split_whitespace().collect();
                let without = squashed(&out);
                for needle in needles {
                    let needle_squashed: String = needle.split_whitespace().collect();
                    assert!(
                        with_commas.contains(&needle_squashed)
                            || without.contains(&squashed(needle)),
                        "{}: `{needle}` in\n{out}",
                        sample.setting
                    );
                }
            }
        }
    }
    std::fs::remove_dir_all(&root).expect("remove the temporary directory");
}

#[test]
fn durations_are_written_in_their_exact_unit() {
    use std::time::Duration;
    let written = |d: Duration| crate::expand::duration(d).to_string().replace(' ', "");
    assert_eq!(written(Duration::ZERO), "::core::time::Duration::ZERO");
    assert_eq!(
        written(Duration::from_secs(30)),
        "::core::time::Duration::from_secs(30)"
    );
    assert_eq!(
        written(Duration::from_millis(1500)),
        "::core::time::Duration::from_millis(1500)"
    );
    assert_eq!(
        written(Duration::from_micros(250)),
        "::core::time::Duration::from_micros(250)"
    );
    assert_eq!(
        written(Duration::from_nanos(7)),
        "::core::time::Duration::from_nanos(7)"
    );
}
