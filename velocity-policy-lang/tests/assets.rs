//! The `assets` stanza: defaults, every setting, and what a wrong size says.

use velocity_policy_lang::{AssetsSpec, PolicySet};

fn check(text: &str) -> PolicySet {
    let mut set = PolicySet::new();
    set.add_source("assets.policy", text.as_bytes());
    set
}

#[test]
fn absent_settings_take_their_defaults() {
    let set = check("assets web { }\n");
    assert!(set.check().all().is_empty());
    let web = set.spec().assets.get("web").cloned().unwrap_or_default();
    assert_eq!(web.name.value, "web");
    assert_eq!(web.dir, None);
    assert_eq!(web.max_image.value, 200 * 1024);
    assert_eq!(web.large_image.value, 50 * 1024);
    assert_eq!(web.max_font.value, 100 * 1024);
    assert_eq!(web.max_font_files.value, 4);
    assert_eq!(web.max_font_weights.value, 3);
    assert_eq!(web.max_high_priority.value, 2);
    assert_eq!(web.max_preloads.value, 3);

    let defaults = AssetsSpec::default();
    assert_eq!(defaults.max_image.value, AssetsSpec::DEFAULT_MAX_IMAGE);
    assert_eq!(
        defaults.max_preloads.value,
        AssetsSpec::DEFAULT_MAX_PRELOADS
    );
}

#[test]
fn every_setting_is_read() {
    let set = check(
        r#"assets web { dir = "web/dist"; max_image = 1.5mb; large_image = 30kb; max_font = 512b
max_font_files = 0; max_font_weights = 2; max_high_priority = 1; max_preloads = 0 }
"#,
    );
    assert!(set.check().all().is_empty());
    let web = set.spec().assets.get("web").cloned().unwrap_or_default();
    assert_eq!(web.dir.map(|dir| dir.value).as_deref(), Some("web/dist"));
    assert_eq!(web.max_image.value, 1536 * 1024);
    assert_eq!(web.large_image.value, 30 * 1024);
    assert_eq!(web.max_font.value, 512);
    assert_eq!(web.max_font_files.value, 0);
    assert_eq!(web.max_font_weights.value, 2);
    assert_eq!(web.max_high_priority.value, 1);
    assert_eq!(web.max_preloads.value, 0);
}

#[test]
fn wrong_sizes_say_how_to_write_them() {
    let set = check(
        "assets web { max_image = 200; max_font = 100kib; large_image = 50 kb; max_preloads = 2kb }\n",
    );
    let report = set.check();
    let found: Vec<(String, String, String)> = report
        .all()
        .iter()
        .map(|d| (d.code(), d.message(), d.help().unwrap_or_default()))
        .collect();
    let expected = [
        (
            "policy::invalid-value",
            "`max_image` expects a size like `200kb`, found `200`",
            "add a unit: `200kb`, `200mb` or `200b`",
        ),
        (
            "policy::invalid-value",
            "`max_font` expects a size like `200kb`, found `100kib`",
            "did you mean `100kb`?",
        ),
        (
            "policy::invalid-value",
            "`large_image` expects a size like `200kb`, found `50 kb`",
            "write it as `large_image = 200kb`",
        ),
        (
            "policy::invalid-value",
            "`max_preloads` expects a whole number, found `2kb`",
            "remove the unit `kb`: this is a count",
        ),
    ];
    let expected: Vec<(String, String, String)> = expected
        .iter()
        .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
        .collect();
    assert_eq!(found, expected);
    // A stanza with an error is left out, so its defaults are never audited by mistake.
    assert!(set.spec().assets.is_empty());
}

#[test]
fn names_are_required_and_unique() {
    let report = check("assets { }\nassets web { }\nassets web { }\n").check();
    let codes: Vec<String> = report.all().iter().map(|d| d.code()).collect();
    assert_eq!(codes, ["policy::missing-name", "policy::duplicate-name"]);
}
