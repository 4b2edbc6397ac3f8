//! The asset audit on the fixture site (`tests/fixtures/assets`): one page per rule with exactly
//! that violation, one page with none; positions checked to the column; truncated, corrupt and
//! mutated files give a finding, never a panic. `policy assets` run as a user would is in
//! `velocity-policy-cli/tests/assets.rs`.
#![cfg(feature = "audit")]
#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a failure should stop the test"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use velocity_policy_delivery::assets::media::{self, MediaType};
use velocity_policy_delivery::assets::{Report, Rule, audit};
use velocity_policy_lang::{AssetsSpec, PolicySet};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/assets")
}

fn site_spec() -> AssetsSpec {
    let mut set = PolicySet::new();
    set.load_file(&fixtures().join("site.policy")).unwrap();
    assert!(set.check().all().is_empty());
    set.spec().assets.get("site").cloned().unwrap()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("policy-assets-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(from, to).unwrap();
}

fn site_file(rel: &str) -> PathBuf {
    fixtures().join("site").join(rel)
}

/// `(rule id, file name, line, column)` of every finding.
fn positions(report: &Report) -> Vec<(String, String, usize, usize)> {
    report
        .findings
        .iter()
        .map(|finding| {
            let position = report.position(finding).unwrap();
            let file = Path::new(position.file)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (
                finding.rule.id().to_owned(),
                file,
                position.line,
                position.column,
            )
        })
        .collect()
}

#[test]
fn each_rule_fires_once_on_its_own_page_and_the_clean_page_passes() {
    let report = audit(&fixtures().join("site"), &site_spec()).unwrap();
    assert_eq!(report.documents, 20);

    let mut by_file: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (rule, file, ..) in positions(&report) {
        by_file.entry(file).or_default().push(rule);
    }
    assert!(!by_file.contains_key("index.html"), "{by_file:?}");
    for rule in Rule::ALL {
        // The font-file count is reported where the excess face is written: the style sheet.
        let file = match rule {
            Rule::TooManyFontFiles => "fonts.css".to_owned(),
            _ => format!("{}.html", rule.id()),
        };
        assert_eq!(
            by_file.get(&file).map(Vec::as_slice),
            Some(&[rule.id().to_owned()][..]),
            "{file}: {by_file:?}"
        );
    }
    assert_eq!(report.findings.len(), Rule::ALL.len());
}

#[test]
fn each_finding_points_at_the_offending_text() {
    let report = audit(&fixtures().join("site"), &site_spec()).unwrap();
    let at = |rule: Rule| {
        let finding = report.findings.iter().find(|f| f.rule == rule).unwrap();
        let label = &finding.labels[0];
        let text = report.sources().snippet(label.loc).unwrap().to_owned();
        let position = report.position(finding).unwrap();
        (position.line, position.column, text, finding.help.clone())
    };
    let (line, column, text, _) = at(Rule::ImageSize);
    assert_eq!((line, column, text.as_str()), (9, 11, "img/big.jpg"));
    let (line, column, text, help) = at(Rule::OptimizedImages);
    assert_eq!((line, column, text.as_str()), (8, 11, "img/detail.jpg"));
    assert!(help.contains("quality 85"), "{help}");
    let (line, column, text, _) = at(Rule::ResponsiveImages);
    assert_eq!((line, column, text.as_str()), (9, 11, "img/photo.jpg"));
    let (line, column, text, _) = at(Rule::LcpFetchPriority);
    assert_eq!((line, column), (8, 1));
    assert!(text.starts_with(r#"<img src="img/photo.jpg""#), "{text}");
    let (line, column, _, help) = at(Rule::OffscreenImages);
    assert_eq!((line, column), (9, 1));
    assert!(help.contains(r#"loading="lazy""#), "{help}");
    let (line, column, text, help) = at(Rule::UnsizedImages);
    assert_eq!((line, column), (9, 1));
    assert_eq!(
        text,
        r#"<img src="img/icon.png" alt="No size" fetchpriority="high">"#
    );
    assert!(help.contains(r#"width="32" height="16""#), "{help}");
    let (.., text, help) = at(Rule::ImageAspectRatio);
    assert_eq!(text, r#"width="32""#);
    assert!(help.contains(r#"height="16""#), "{help}");
    let (line, column, text, _) = at(Rule::LcpLazyLoaded);
    assert_eq!((line, column, text.as_str()), (9, 117, r#"loading="lazy""#));
    let (line, column, text, _) = at(Rule::TooManyHighPriority);
    assert_eq!(
        (line, column, text.as_str()),
        (10, 55, r#"fetchpriority="high""#)
    );
    let (line, column, _, _) = at(Rule::TooManyPreloads);
    assert_eq!((line, column), (8, 1));
    let (line, column, text, _) = at(Rule::FontDisplay);
    assert_eq!((line, column, text.as_str()), (6, 8, "@font-face"));
    let (line, column, text, _) = at(Rule::FontFormat);
    assert_eq!((line, column, text.as_str()), (6, 51, "fonts/sans.ttf"));
    let (line, column, text, _) = at(Rule::TooManyFontFiles);
    assert_eq!((line, column, text.as_str()), (5, 1, "@font-face"));
    let (line, column, _, _) = at(Rule::TooManyFontWeights);
    assert_eq!((line, column), (9, 3));
    let (.., text, _) = at(Rule::UnreadableAsset);
    assert_eq!(text, "img/truncated.png");

    let messages: BTreeMap<&str, &str> = report
        .findings
        .iter()
        .map(|f| (f.rule.id(), f.message.as_str()))
        .collect();
    assert_eq!(
        messages["image-size"],
        "`img/big.jpg` is 44.3kb, over the 32kb ceiling (a well-encoded quality-40 JPEG: make it smaller by resizing it, or by converting it to AVIF or WebP)"
    );
    assert_eq!(
        messages["uses-optimized-images"],
        "`img/detail.jpg` is a quality-97 JPEG with full-resolution colour of 24.3kb: at quality 85 it would be about 7.4kb (16.9kb less)"
    );
    assert_eq!(
        messages["uses-responsive-images"],
        "`img/photo.jpg` is 800×600 but shown 200×150 on a phone (350 device pixels wide): about 9kb of its 11.1kb are wasted"
    );
    assert_eq!(
        messages["image-aspect-ratio"],
        "shown at 32×32 (ratio 1.00) but `img/icon.png` is 32×16 (ratio 2.00)"
    );
    assert_eq!(
        messages["unreadable-asset"],
        "`img/truncated.png` is a damaged PNG: its data ends inside the IDAT chunk (truncated)"
    );
    assert_eq!(
        messages["font-format"],
        "`fonts/sans.ttf` is TrueType, as its `format(\"truetype\")` says, not WOFF2"
    );
    assert!(messages["too-many-font-weights"].ends_with("uses 3 weights of `Sans`, more than 2"));
    assert!(messages["offscreen-images"].contains("(an estimate from the document's order)"));
}

#[test]
fn the_rendered_report_names_the_document_line_column_and_fix() {
    let report = audit(&fixtures().join("site"), &site_spec()).unwrap();
    let finding = report
        .findings
        .iter()
        .find(|f| f.rule == Rule::LcpLazyLoaded)
        .unwrap();
    let rendered = report.render_plain(finding);
    assert!(
        rendered.contains("policy::assets::lcp-lazy-loaded"),
        "{rendered}"
    );
    assert!(
        rendered.contains("lcp-lazy-loaded.html:9:117]"),
        "{rendered}"
    );
    assert!(rendered.contains("waits for layout"), "{rendered}");
    assert!(
        rendered.contains("help: remove `loading=\"lazy\"`"),
        "{rendered}"
    );
}

#[test]
fn a_finding_past_column_65535_of_a_minified_document_is_drawn() {
    // One line of 100,000 characters, as a minifier writes it: the finding is drawn from an
    // excerpt around its label (the language's adapter), not from the whole file, whose width
    // miette's padding could not take.
    let dir = temp_dir("minified");
    copy(&site_file("img/icon.png"), &dir.join("img/icon.png"));
    let before = format!(
        "<!doctype html><html lang=\"en\"><body>{}",
        "<p>x</p>".repeat(12_500)
    );
    std::fs::write(
        dir.join("index.html"),
        format!("{before}<img src=\"img/icon.png\" alt=\"\"></body></html>"),
    )
    .unwrap();
    let report = audit(&dir, &AssetsSpec::default()).unwrap();
    let finding = report
        .findings
        .iter()
        .find(|f| f.rule == Rule::UnsizedImages)
        .unwrap();
    let column = before.len() + 1;
    assert!(column > 65_535);
    let rendered = report.render_plain(finding);
    assert!(
        rendered.contains(&format!("index.html:1:{column}]")),
        "{rendered}"
    );
    assert!(
        rendered.contains("policy::assets::unsized-images"),
        "{rendered}"
    );
    assert!(rendered.contains("<img src=\"img/icon.png\""), "{rendered}");
    assert!(
        rendered.len() < 4_000,
        "an excerpt, not the line: {} bytes",
        rendered.len()
    );
}

#[test]
fn columns_count_characters_not_bytes() {
    let dir = temp_dir("columns");
    copy(&site_file("img/icon.png"), &dir.join("img/icon.png"));
    std::fs::write(
        dir.join("index.html"),
        "<!doctype html>\r\n<p>café ☕ 😀</p>\r\n  <p>naïve ☕ <img src=\"img/icon.png\"></p>\r\n",
    )
    .unwrap();
    let report = audit(&dir, &AssetsSpec::default()).unwrap();
    // 13 characters before `<img` on its line (16 bytes): column 14.
    assert_eq!(
        positions(&report),
        [("unsized-images".to_owned(), "index.html".to_owned(), 3, 14)]
    );
}

#[test]
fn alternatives_are_read_from_bytes_not_names() {
    let dir = temp_dir("alternatives");
    for file in [
        "scan.png",
        "photo.jpg",
        "photo.webp",
        "photo.avif",
        "icon.png",
    ] {
        copy(
            &site_file(&format!("img/{file}")),
            &dir.join("img").join(file),
        );
    }
    // A JPEG named `.webp` is no alternative, and is itself a JPEG (of quality 97).
    copy(&site_file("img/detail.jpg"), &dir.join("img/fake.webp"));
    copy(&site_file("img/scan.png"), &dir.join("img/fake.png"));
    // `<picture>` sources the browser takes instead of the PNG: one AVIF by its bytes, one on
    // another host trusted by its type.
    copy(&site_file("img/scan.png"), &dir.join("img/pic.png"));
    copy(&site_file("img/photo.avif"), &dir.join("img/other.avif"));
    copy(&site_file("img/scan.png"), &dir.join("img/remote.png"));
    std::fs::write(
        dir.join("index.html"),
        r#"<img src="img/fake.png" width="110" height="80">
<img src="img/fake.webp" width="240" height="180">
<picture><source srcset="img/other.avif" type="image/avif"><img src="img/pic.png" width="80" height="60"></picture>
<picture><source srcset="https://cdn.example/remote.webp" type="image/webp"><img src="img/remote.png" width="110" height="80"></picture>
<img src="img/photo.jpg" width="800" height="600" fetchpriority="high">
<img src="img/icon.png" width="32" height="16" srcset="img/icon.png 1x, img/icon.png 32w">
<img src="data:image/png;base64,iVBORw0KGgo=" width="1" height="1">
<img src="https://cdn.example/x.png" width="1" height="1">
<img src="img/icon.png" width="32" height="16" srcset="img/photo-x.jpg 2x">
"#,
    )
    .unwrap();
    let report = audit(&dir, &AssetsSpec::default()).unwrap();
    let found: Vec<(String, usize, String)> = report
        .findings
        .iter()
        .map(|f| {
            (
                f.rule.id().to_owned(),
                report.position(f).unwrap().line,
                f.message.clone(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (
                "modern-image-formats".to_owned(),
                1,
                "`img/fake.png` is a PNG of 17.4kb with no AVIF or WebP alternative: as AVIF it would be about 7.8kb (9.5kb less)".to_owned()
            ),
            (
                "uses-optimized-images".to_owned(),
                2,
                "`img/fake.webp` is a quality-97 JPEG with full-resolution colour of 24.3kb: at quality 85 it would be about 7.4kb (16.9kb less)".to_owned()
            ),
            (
                "modern-image-formats".to_owned(),
                2,
                "`img/fake.webp` is a JPEG (by its bytes, whatever its name says) of 24.3kb with no AVIF or WebP alternative: as AVIF it would be about 10.2kb (14kb less)".to_owned()
            ),
            (
                "srcset-sizes".to_owned(),
                6,
                "`srcset` with width descriptors but no `sizes`: the browser assumes the image fills the viewport".to_owned()
            ),
            (
                "missing-asset".to_owned(),
                9,
                format!(
                    "`img/photo-x.jpg` is not in the folder (looked for `{}`)",
                    dir.join("img/photo-x.jpg").display()
                )
            ),
        ]
    );
}

#[test]
fn the_browser_picks_one_candidate_and_it_is_judged() {
    let dir = temp_dir("one-candidate");
    for file in ["photo.jpg", "photo.avif", "photo-400.jpg"] {
        copy(
            &site_file(&format!("img/{file}")),
            &dir.join("img").join(file),
        );
    }
    // Shown 100 px wide: 175 device pixels. Alone, the 800 px file wastes most of its bytes;
    // with a `srcset`, the phone takes the 400 px one, which wastes too little to report.
    std::fs::write(
        dir.join("index.html"),
        r#"<h1>A heading larger than both images, the likely LCP element</h1>
<img src="img/photo.jpg" width="100" height="75">
<img src="img/photo.jpg" srcset="img/photo-400.jpg 400w, img/photo.jpg 800w" sizes="100px" width="100" height="75">
"#,
    )
    .unwrap();
    let report = audit(&dir, &site_spec()).unwrap();
    assert_eq!(
        positions(&report),
        [(
            "uses-responsive-images".to_owned(),
            "index.html".to_owned(),
            2,
            11
        )]
    );
    assert_eq!(
        report.pages[0].images,
        ["img/photo-400.jpg", "img/photo.jpg"]
            .into_iter()
            .map(str::to_owned)
            .collect::<std::collections::BTreeSet<_>>()
    );
}

#[test]
fn shared_style_sheets_are_reported_once() {
    let dir = temp_dir("shared-css");
    copy(
        &site_file("fonts/sans.woff2"),
        &dir.join("fonts/sans.woff2"),
    );
    std::fs::write(
        dir.join("site.css"),
        "@font-face { font-family: Sans; src: url(fonts/sans.woff2) }\nbody { font-family: Sans }\n",
    )
    .unwrap();
    for page in ["a.html", "b.html", "sub/c.html"] {
        std::fs::create_dir_all(dir.join(page).parent().unwrap()).unwrap();
        std::fs::write(
            dir.join(page),
            r#"<link rel="stylesheet" href="/site.css"><p>Text</p>"#,
        )
        .unwrap();
    }
    let report = audit(&dir, &AssetsSpec::default()).unwrap();
    assert_eq!(report.documents, 3);
    assert_eq!(
        positions(&report),
        [("font-display".to_owned(), "site.css".to_owned(), 1, 1)]
    );
}

/// Every shorter prefix of a fixture file, and the file with bytes changed.
fn damaged(bytes: &[u8]) -> impl Iterator<Item = Vec<u8>> + '_ {
    let prefixes = (0..bytes.len()).map(|len| bytes[..len].to_vec());
    // A small deterministic generator: the same mutations on every run.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mutations = (0..300).map(move |_| {
        let mut copy = bytes.to_vec();
        for _ in 0..1 + next() % 8 {
            let at = usize::try_from(next() % copy.len() as u64).unwrap();
            copy[at] = u8::try_from(next() & 0xff).unwrap();
        }
        copy
    });
    prefixes.chain(mutations)
}

/// What the audit decides about a file, through the same public steps.
fn usable(bytes: &[u8]) -> bool {
    let kind = MediaType::sniff(bytes);
    (kind.is_image() || kind.is_font())
        && media::check_integrity(kind, bytes).is_ok()
        && (!kind.is_raster() || media::dimensions(bytes).is_ok())
}

#[test]
fn every_truncation_is_found_and_no_damage_panics() {
    for file in [
        "img/photo.jpg",
        "img/logo.png",
        "img/photo.webp",
        "img/photo.avif",
        "fonts/sans.woff2",
        "fonts/sans.ttf",
    ] {
        let bytes = std::fs::read(site_file(file)).unwrap();
        assert!(usable(&bytes), "{file} itself is usable");
        let mut unusable_prefixes = 0;
        for (len, damaged) in damaged(&bytes).enumerate() {
            let is_usable = usable(&damaged);
            if len < bytes.len() {
                // TrueType tables are padded to four bytes: the last padding bytes are not data.
                let padding = file.ends_with(".ttf") && len + 4 > bytes.len();
                assert!(!is_usable || padding, "{file} cut to {len} bytes passes");
                unusable_prefixes += usize::from(!is_usable);
            }
        }
        assert!(unusable_prefixes + 3 >= bytes.len());
    }
}

#[test]
fn truncated_and_corrupt_files_are_findings_that_name_the_file() {
    let dir = temp_dir("damaged");
    let mut page = String::new();
    let mut expected = Vec::new();
    for file in [
        "img/photo.jpg",
        "img/logo.png",
        "img/photo.webp",
        "img/photo.avif",
    ] {
        let bytes = std::fs::read(site_file(file)).unwrap();
        let name = Path::new(file).file_name().unwrap().to_string_lossy();
        for (variant, damaged) in [
            ("empty", Vec::new()),
            ("magic", bytes[..12.min(bytes.len())].to_vec()),
            ("half", bytes[..bytes.len() / 2].to_vec()),
            ("one-short", bytes[..bytes.len() - 1].to_vec()),
        ] {
            let rel = format!("img/{variant}-{name}");
            std::fs::create_dir_all(dir.join("img")).unwrap();
            std::fs::write(dir.join(&rel), damaged).unwrap();
            page.push_str(&format!("<img src=\"{rel}\" width=\"10\" height=\"10\">\n"));
            expected.push(rel);
        }
    }
    // A JPEG whose segments are garbage but which ends with the end-of-image marker, and a PNG
    // that declares a zero width.
    std::fs::write(
        dir.join("img/garbage.jpg"),
        [
            &[0xff, 0xd8, 0xff, 0xe0, 0x00, 0x02][..],
            &[0x5a; 64],
            &[0xff, 0xd9],
        ]
        .concat(),
    )
    .unwrap();
    let mut zero_width = std::fs::read(site_file("img/icon.png")).unwrap();
    zero_width[16..20].copy_from_slice(&[0, 0, 0, 0]);
    std::fs::write(dir.join("img/zero.png"), zero_width).unwrap();
    page.push_str("<img src=\"img/garbage.jpg\" width=\"10\" height=\"10\">\n");
    page.push_str("<img src=\"img/zero.png\" width=\"10\" height=\"10\">\n");
    expected.push("img/garbage.jpg".to_owned());
    expected.push("img/zero.png".to_owned());
    // A font cut in half.
    let font = std::fs::read(site_file("fonts/sans.woff2")).unwrap();
    std::fs::create_dir_all(dir.join("fonts")).unwrap();
    std::fs::write(dir.join("fonts/half.woff2"), &font[..font.len() / 2]).unwrap();
    page.push_str(
        "<style>@font-face { font-family: X; src: url(fonts/half.woff2); font-display: swap } p { font-family: X }</style>\n<p>Text in X.</p>\n",
    );
    expected.push("fonts/half.woff2".to_owned());
    std::fs::write(dir.join("index.html"), page).unwrap();

    let report = audit(&dir, &AssetsSpec::default()).unwrap();
    let unreadable: Vec<&str> = report
        .findings
        .iter()
        .filter(|f| f.rule == Rule::UnreadableAsset)
        .map(|f| f.message.as_str())
        .collect();
    assert_eq!(unreadable.len(), expected.len(), "{unreadable:#?}");
    for (message, file) in unreadable.iter().zip(&expected) {
        assert!(message.starts_with(&format!("`{file}` is ")), "{message}");
    }
    assert!(
        report
            .findings
            .iter()
            .all(|f| f.rule == Rule::UnreadableAsset),
        "{:#?}",
        report.findings
    );
}

#[test]
fn the_demo_services_own_page_passes_the_audit() {
    let site = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/demo/static");
    let report = velocity_policy_delivery::assets::audit(
        &site,
        &velocity_policy_lang::AssetsSpec::default(),
    )
    .unwrap();
    assert!(report.documents >= 1);
    assert!(
        report.images >= 2,
        "the page's image and its WebP alternative"
    );
    assert!(
        report.is_clean(),
        "{}",
        report
            .findings
            .iter()
            .map(|f| report.render_plain(f))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn an_image_in_a_hidden_menu_is_downloaded_and_reported_unless_lazy() {
    let dir = temp_dir("hidden-menu");
    copy(&site_file("img/photo-400.jpg"), &dir.join("img/a.jpg"));
    copy(&site_file("img/photo-400.jpg"), &dir.join("img/b.jpg"));
    std::fs::write(
        dir.join("index.html"),
        r#"<style>.menu { display: none }</style>
<h1>A page with a closed menu</h1>
<div class="menu"><img src="img/a.jpg" width="40" height="30" alt=""><img src="img/b.jpg" width="40" height="30" alt="" loading="lazy"></div>
"#,
    )
    .unwrap();
    let report = audit(&dir, &AssetsSpec::default()).unwrap();
    assert_eq!(
        positions(&report),
        [(
            "offscreen-images".to_owned(),
            "index.html".to_owned(),
            3,
            19
        )]
    );
    assert!(report.findings[0].message.contains("not displayed"));
    let images: Vec<&str> = report.pages[0].images.iter().map(String::as_str).collect();
    assert_eq!(images, ["img/a.jpg"]);
}
