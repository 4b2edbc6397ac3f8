//! `policy assets` on a 40-page site: the nine pages of the Lighthouse fixture (an admin theme,
//! a gallery, a documentation site with a web font stack, 3 MiB of images and fonts) copied
//! beside themselves until there are forty, audited end to end (reading every file, parsing
//! every style sheet, the cascade, the layout estimate and every rule). Lighthouse, which users
//! run for the same findings, takes 15 to 70 s for one of these pages in headless Chromium.
//!
//! `cargo bench -p velocity-policy-delivery --features audit --bench assets`
#![allow(
    clippy::expect_used,
    reason = "a benchmark that cannot build its site cannot measure"
)]

use std::path::{Path, PathBuf};

use criterion::{Criterion, criterion_group, criterion_main};
use velocity_policy_delivery::assets::audit;
use velocity_policy_lang::AssetsSpec;

const PAGES: usize = 40;

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("a folder");
    for entry in std::fs::read_dir(from).expect("the fixture") {
        let entry = entry.expect("an entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("a copy");
        }
    }
}

/// The fixture, with each page copied beside itself (`index-2.html`, ...) up to [`PAGES`].
fn site() -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lighthouse");
    let site = std::env::temp_dir().join(format!("policy-assets-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&site);
    copy_tree(&fixture, &site);
    let mut pages: Vec<PathBuf> = ["admin", "docs", "gallery"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(site.join(dir)).expect("a site"))
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "html"))
        .collect();
    pages.sort();
    let originals = pages.len();
    let mut copy = 2;
    while pages.len() < PAGES {
        for original in pages.clone().iter().take(originals) {
            if pages.len() == PAGES {
                break;
            }
            let stem = original.file_stem().expect("a name").to_string_lossy();
            let target = original.with_file_name(format!("{stem}-{copy}.html"));
            std::fs::copy(original, &target).expect("a copy");
            pages.push(target);
        }
        copy += 1;
    }
    site
}

fn bench(c: &mut Criterion) {
    let site = site();
    let spec = AssetsSpec::default();
    let report = audit(&site, &spec).expect("the audit");
    assert_eq!(report.documents, PAGES);
    c.bench_function("audit a 40-page site", |b| {
        b.iter(|| audit(&site, &spec).expect("the audit"));
    });
    let _ = std::fs::remove_dir_all(&site);
}

criterion_group!(benches, bench);
criterion_main!(benches);
