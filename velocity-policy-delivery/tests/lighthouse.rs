//! `policy assets` against Lighthouse, on the pages of `tests/fixtures/lighthouse` (an admin
//! theme, a photo gallery, a documentation site with a web font stack): each page's Lighthouse
//! 12.8 findings are stored beside it (`PAGE.lighthouse.json`, made by `run-lighthouse.sh`), and
//! this test compares ours with them per element and rule, for every rule that has a
//! Lighthouse counterpart. `offscreen-images` is compared with what that audit measures on
//! Chromium's layout before its timing filter ([`offscreen_by_geometry`]).
//!
//! A finding is keyed by page, rule and the file it is about (the image, or the font for
//! `font-display`, which is a property of a style sheet shared by the site and so keyed by the
//! site). The test fails on any false positive (a finding of ours that Lighthouse's audit does
//! not make), when fewer than 85% of Lighthouse's findings are ours too, when the fonts and
//! images we say a page downloads are not the ones Chromium downloaded, and when the agreement
//! table in the README, the facade's delivery guide (`src/guide/delivery.rs`) and the module
//! docs is not the one computed here (`UPDATE_AGREEMENT=1` rewrites them).
#![cfg(feature = "audit")]
#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers: a failure should stop the test"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;
use velocity_policy_delivery::assets::{Report, Rule, audit};
use velocity_policy_lang::AssetsSpec;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lighthouse")
}

/// `(page, rule id, file)`; `page` is `*` for a finding about a shared style sheet's font.
type Key = (String, &'static str, String);

/// The stored Lighthouse results, one per page.
fn lighthouse() -> Vec<Value> {
    let mut out = Vec::new();
    for site in ["admin", "docs", "gallery"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(fixture().join(site))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.to_string_lossy().ends_with(".lighthouse.json"))
            .collect();
        files.sort();
        for file in files {
            out.push(serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap());
        }
    }
    out
}

/// The rules compared, with the Lighthouse audit each is read from.
const COMPARED: &[(Rule, &str)] = &[
    (Rule::OptimizedImages, "uses-optimized-images"),
    (Rule::ModernImageFormats, "modern-image-formats"),
    (Rule::ResponsiveImages, "uses-responsive-images"),
    (Rule::UnsizedImages, "unsized-images"),
    (Rule::ImageAspectRatio, "image-aspect-ratio"),
    (Rule::OffscreenImages, "offscreen-images"),
    (Rule::LcpLazyLoaded, "lcp-lazy-loaded"),
    (Rule::LcpFetchPriority, "lcp-discovery-insight"),
    (Rule::FontDisplay, "font-display-insight"),
];

fn lighthouse_keys(results: &[Value]) -> BTreeSet<Key> {
    let mut keys = BTreeSet::new();
    for result in results {
        let page = result["page"].as_str().unwrap().to_owned();
        let audits = &result["audits"];
        let lcp_url = result["lcp_url"].as_str().map(str::to_owned);
        for &(rule, audit) in COMPARED {
            let entry = &audits[audit];
            match rule {
                Rule::LcpLazyLoaded => {
                    if entry["score"].as_f64().is_some_and(|s| s < 1.0)
                        && let Some(url) = &lcp_url
                    {
                        keys.insert((page.clone(), rule.id(), url.clone()));
                    }
                }
                Rule::LcpFetchPriority => {
                    if entry["checklist"]["priorityHinted"] == Value::Bool(false)
                        && let Some(url) = &lcp_url
                    {
                        keys.insert((page.clone(), rule.id(), url.clone()));
                    }
                }
                Rule::OffscreenImages => {
                    keys.extend(
                        offscreen_by_geometry(result)
                            .into_iter()
                            .map(|url| (page.clone(), rule.id(), url)),
                    );
                    for item in entry["items"].as_array().into_iter().flatten() {
                        if let Some(url) = item["url"].as_str() {
                            keys.insert((page.clone(), rule.id(), url.to_owned()));
                        }
                    }
                }
                _ => {
                    for item in entry["items"].as_array().into_iter().flatten() {
                        let Some(url) = item["url"].as_str() else {
                            continue;
                        };
                        let scope = if rule == Rule::FontDisplay {
                            "*".to_owned()
                        } else {
                            page.clone()
                        };
                        keys.insert((scope, rule.id(), url.to_owned()));
                    }
                }
            }
        }
    }
    keys
}

/// The images Lighthouse's `offscreen-images` measures as wasted, before the filter that keeps
/// only those requested before the last long task of its simulated load (which depends on the
/// network queue and no static reading can know): on Chromium's layout of the page, at least
/// 75% of the image lies outside the first screen and the three below it, and that share of its
/// bytes is at least 2 KiB; `loading="lazy"` and `loading="eager"` ones are skipped.
fn offscreen_by_geometry(result: &Value) -> Vec<String> {
    let viewport = &result["viewport"];
    let (width, height) = (
        viewport["width"].as_f64().unwrap(),
        viewport["height"].as_f64().unwrap(),
    );
    let bytes: BTreeMap<&str, f64> = result["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["url"].as_str().unwrap(),
                i["bytes"].as_f64().unwrap_or(0.0),
            )
        })
        .collect();
    // Per file, the least wasted of its elements: a file shown once in view is not wasted
    // because it is also in a closed dialog (Lighthouse keeps the smallest waste per URL).
    let mut least: BTreeMap<String, f64> = BTreeMap::new();
    for element in result["elements"].as_array().into_iter().flatten() {
        let url = element["url"].as_str().unwrap_or_default();
        if element["css"] == Value::Bool(true)
            || matches!(element["loading"].as_str(), Some("lazy" | "eager"))
        {
            continue;
        }
        let side = |key: &str| element[key].as_f64().unwrap();
        let total =
            element["displayed"][0].as_f64().unwrap() * element["displayed"][1].as_f64().unwrap();
        let top = side("top").max(-100.0);
        let right = side("right").min(width + 100.0);
        let bottom = side("bottom").min(height + 3.0 * height);
        let left = side("left").max(-100.0);
        let visible = (right - left).max(0.0) * (bottom - top).max(0.0);
        let wasted_ratio = if total == 0.0 {
            1.0
        } else {
            1.0 - visible / total
        };
        let entry = least.entry(url.to_owned()).or_insert(wasted_ratio);
        *entry = entry.min(wasted_ratio);
    }
    least
        .into_iter()
        .filter(|(url, ratio)| {
            bytes
                .get(url.as_str())
                .is_some_and(|size| *ratio >= 0.75 && size * ratio >= 2048.0)
        })
        .map(|(url, _)| url)
        .collect()
}

/// Our findings of the compared rules, keyed like Lighthouse's; a finding written in a style
/// sheet (a CSS background) counts on every page that downloads its file.
fn our_keys(report: &Report) -> BTreeSet<Key> {
    let compared: BTreeSet<Rule> = COMPARED.iter().map(|(rule, _)| *rule).collect();
    let mut keys = BTreeSet::new();
    for finding in &report.findings {
        if !compared.contains(&finding.rule) {
            continue;
        }
        let asset = finding
            .asset
            .clone()
            .unwrap_or_else(|| panic!("a compared finding names its file: {finding:?}"));
        if finding.rule == Rule::FontDisplay {
            keys.insert(("*".to_owned(), finding.rule.id(), asset));
            continue;
        }
        let position = report.position(finding).unwrap();
        let file = Path::new(position.file)
            .strip_prefix(fixture())
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if file.ends_with(".html") {
            keys.insert((file, finding.rule.id(), asset));
        } else {
            for page in &report.pages {
                if page.images.contains(&asset) {
                    keys.insert((page.path.clone(), finding.rule.id(), asset.clone()));
                }
            }
        }
    }
    keys
}

/// Per rule: agree, ours only (false positives), Lighthouse only.
fn compare(
    ours: &BTreeSet<Key>,
    theirs: &BTreeSet<Key>,
) -> BTreeMap<&'static str, (usize, usize, usize)> {
    let mut table: BTreeMap<&'static str, (usize, usize, usize)> = COMPARED
        .iter()
        .map(|(rule, _)| (rule.id(), (0, 0, 0)))
        .collect();
    for key in ours.union(theirs) {
        let row = table.get_mut(key.1).unwrap();
        match (ours.contains(key), theirs.contains(key)) {
            (true, true) => row.0 += 1,
            (true, false) => row.1 += 1,
            (false, true) => row.2 += 1,
            (false, false) => {}
        }
    }
    table
}

/// The agreement table, as the README, the delivery guide and the docs show it.
fn table_markdown(
    table: &BTreeMap<&'static str, (usize, usize, usize)>,
    ours_only: &BTreeMap<&'static str, usize>,
    pages: usize,
) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "Measured on the {pages} pages of `velocity-policy-delivery/tests/fixtures/lighthouse` against Lighthouse 12.8 (mobile, headless Chromium), by `tests/lighthouse.rs`:\n\n"
    ));
    out.push_str(
        "| rule | Lighthouse audit | agree | ours only | Lighthouse only | false positives |\n",
    );
    out.push_str("|---|---|---|---|---|---|\n");
    let (mut agree, mut missed, mut wrong) = (0, 0, 0);
    for &(rule, audit) in COMPARED {
        let (a, fp, lh) = table[rule.id()];
        agree += a;
        missed += lh;
        wrong += fp;
        let note = if rule == Rule::OffscreenImages {
            " (its measurement on Chromium's layout, before its timing filter)"
        } else {
            ""
        };
        out.push_str(&format!(
            "| `{}` | `{audit}`{note} | {a} | 0 | {lh} | {fp} |\n",
            rule.id()
        ));
    }
    let ours: usize = ours_only.values().sum();
    let names: Vec<String> = ours_only
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(id, n)| format!("`{id}` {n}"))
        .collect();
    out.push_str(&format!(
        "| our own rules ({}) | none | 0 | {ours} | 0 | 0 |\n",
        names.join(", ")
    ));
    let found = if agree + missed == 0 {
        100.0
    } else {
        100.0 * agree as f64 / (agree + missed) as f64
    };
    out.push_str(&format!(
        "| **all** | | **{agree}** | **{ours}** | **{missed}** | **{wrong}** |\n\n{found:.0}% of Lighthouse's findings in these rules are ours too.\n"
    ));
    out
}

const BEGIN: &str =
    "<!-- agreement: computed by velocity-policy-delivery/tests/lighthouse.rs -->\n";
const END: &str = "<!-- end of agreement -->";

/// Checks (or, with `UPDATE_AGREEMENT=1`, writes) the table between the markers of `file`.
fn check_table(file: &Path, table: &str, prefix: &str) {
    let text = std::fs::read_to_string(file).unwrap();
    let start = text.find(BEGIN).map(|at| at + BEGIN.len());
    let end = text
        .find(END)
        .map(|at| text[..at].rfind('\n').map_or(at, |nl| nl + 1));
    let (Some(start), Some(end)) = (start, end) else {
        panic!("{} has no agreement markers", file.display());
    };
    let expected: String = table
        .lines()
        .map(|line| {
            if line.is_empty() {
                prefix.trim_end().to_owned()
            } else {
                format!("{prefix}{line}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    if text[start..end] == expected {
        return;
    }
    if std::env::var_os("UPDATE_AGREEMENT").is_some() {
        let updated = format!("{}{expected}{}", &text[..start], &text[end..]);
        std::fs::write(file, updated).unwrap();
        return;
    }
    panic!(
        "the agreement table in {} is not the measured one; run with UPDATE_AGREEMENT=1:\n{expected}",
        file.display()
    );
}

#[test]
fn our_findings_agree_with_lighthouse() {
    let results = lighthouse();
    assert!(results.len() >= 9, "{} stored results", results.len());
    for result in &results {
        assert_eq!(result["lighthouse"].as_str().map(|v| &v[..4]), Some("12.8"));
        assert_eq!(result["device"], "mobile");
    }
    let report = audit(&fixture(), &AssetsSpec::default()).unwrap();
    let ours = our_keys(&report);
    let theirs = lighthouse_keys(&results);
    let table = compare(&ours, &theirs);

    let false_positives: Vec<&Key> = ours.difference(&theirs).collect();
    let missed: Vec<&Key> = theirs.difference(&ours).collect();
    let agree = ours.intersection(&theirs).count();
    let found = agree as f64 / theirs.len() as f64;
    let detail =
        format!("false positives: {false_positives:#?}\nmissed: {missed:#?}\ntable: {table:?}");
    // Shown with `--nocapture`: what is left to find.
    eprintln!("{detail}");
    assert!(false_positives.is_empty(), "{detail}");
    assert!(found >= 0.85, "{:.1}% found\n{detail}", found * 100.0);

    let compared: BTreeSet<Rule> = COMPARED.iter().map(|(rule, _)| *rule).collect();
    let mut ours_only: BTreeMap<&'static str, usize> = BTreeMap::new();
    for finding in &report.findings {
        if !compared.contains(&finding.rule) {
            *ours_only.entry(finding.rule.id()).or_default() += 1;
        }
    }
    let markdown = table_markdown(&table, &ours_only, results.len());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    check_table(&root.join("../README.md"), &markdown, "");
    check_table(&root.join("../src/guide/delivery.rs"), &markdown, "//! ");
    check_table(&root.join("src/assets/mod.rs"), &markdown, "//! ");
}

#[test]
fn the_fonts_and_images_we_say_a_page_downloads_are_chromiums() {
    let results = lighthouse();
    let report = audit(&fixture(), &AssetsSpec::default()).unwrap();
    let mut wrong = Vec::new();
    for result in &results {
        let page = result["page"].as_str().unwrap();
        let ours = report
            .pages
            .iter()
            .find(|p| p.path == page)
            .unwrap_or_else(|| panic!("{page} audited"));
        let fonts: BTreeSet<String> = result["fonts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap().to_owned())
            .collect();
        let images: BTreeSet<String> = result["images"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["url"].as_str().unwrap().to_owned())
            .collect();
        if ours.fonts != fonts {
            wrong.push(format!(
                "{page} fonts: ours {:?}, Chromium {fonts:?}",
                ours.fonts
            ));
        }
        if ours.images != images {
            wrong.push(format!(
                "{page} images: ours {:?}, Chromium {images:?}",
                ours.images
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
