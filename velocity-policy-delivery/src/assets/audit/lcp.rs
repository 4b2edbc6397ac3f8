//! The likely largest contentful paint, and the priority rules.
//!
//! Chrome's LCP element is the largest image or text block painted on the first screen. We take
//! the candidates the layout estimate puts on the first screen of the reference phone: `<img>`
//! elements, elements with a CSS background image, and text blocks, each by its visible area
//! (declared or intrinsic size, clipped to the screen). Images that carry almost no
//! information per pixel (under 0.05 bits, a placeholder or a flat fill) are not candidates, as
//! in Chrome. When the largest is an image, the LCP rules apply to it.

use std::path::PathBuf;

use super::images::Choice;
use super::walk::{Target, display, resolve};
use super::{Auditor, Page, label};
use crate::assets::report::Rule;

/// Chrome ignores images with fewer bits per displayed pixel than this as LCP candidates.
const LCP_MIN_BITS_PER_PIXEL: f64 = 0.05;

/// The likely LCP element, when it is an image.
#[derive(Debug, Clone)]
pub(crate) struct LcpImage {
    /// Its node.
    pub(crate) node: usize,
    /// The file (`<img>`'s chosen one, or the background's).
    pub(crate) file: Option<PathBuf>,
    /// Its URL as written.
    pub(crate) url: String,
    /// It is a CSS background.
    pub(crate) background: bool,
}

impl Auditor<'_> {
    /// The likely LCP element of `page`, if it is an image.
    pub(super) fn lcp(&mut self, page: &Page<'_>, choices: &[Option<Choice>]) -> Option<LcpImage> {
        let device = self.device;
        let mut best: Option<(f64, Option<LcpImage>)> = None;
        let mut consider = |area: f64, image: Option<LcpImage>| {
            if area > best.as_ref().map_or(0.0, |(a, _)| *a) {
                best = Some((area, image));
            }
        };
        for (_, shown) in page.layout.text_blocks() {
            if shown.top < device.height {
                consider(shown.visible_area(&device), None);
            }
        }
        for (img, choice) in page.document.imgs.iter().zip(choices) {
            let (Some(shown), Some(choice)) = (page.layout.shown(img.node), choice) else {
                continue;
            };
            if page.styles[img.node].hidden || shown.top >= device.height {
                continue;
            }
            let area = shown.visible_area(&device);
            let file = choice.file.as_ref();
            // A missing or broken file paints nothing.
            if choice.file.is_none() && resolve(&page.dir, &choice.url).is_some() {
                continue;
            }
            if file.is_some_and(|(_, info)| info.problem.is_some() || !info.kind.is_image()) {
                continue;
            }
            if let Some((_, info)) = file
                && info.kind.is_raster()
                && shown.width > 0.0
                && (info.len as f64 * 8.0) / (shown.width * shown.height.max(1.0))
                    < LCP_MIN_BITS_PER_PIXEL
            {
                continue;
            }
            consider(
                area,
                Some(LcpImage {
                    node: img.node,
                    file: file.map(|(rel, _)| rel.clone()),
                    url: choice.url.clone(),
                    background: false,
                }),
            );
        }
        for (node, style) in page.styles.iter().enumerate() {
            let (Some(won), Some(shown)) = (style.background.as_ref(), page.layout.shown(node))
            else {
                continue;
            };
            if style.hidden || shown.top >= device.height || page.document.nodes[node].name == "img"
            {
                continue;
            }
            let Some(url) = won.declaration.urls.first() else {
                continue;
            };
            let origin = page.origin(won.origin);
            let Some(Target::Local(rel)) = resolve(&origin.dir, &url.url) else {
                continue;
            };
            let Some(info) = self.info(&rel) else {
                continue;
            };
            // A background the size of the whole screen is a backdrop, not content (Chrome).
            if shown.width >= device.width && shown.height >= device.height {
                continue;
            }
            if (info.len as f64 * 8.0) / (shown.width * shown.height).max(1.0)
                < LCP_MIN_BITS_PER_PIXEL
            {
                continue;
            }
            consider(
                shown.visible_area(&device),
                Some(LcpImage {
                    node,
                    file: Some(rel),
                    url: url.url.clone(),
                    background: true,
                }),
            );
        }
        best.and_then(|(_, image)| image)
    }

    /// The LCP rules: the likely LCP image is not lazy, and has `fetchpriority="high"` (or, for
    /// a CSS background, a `<link rel="preload" as="image" fetchpriority="high">`).
    pub(super) fn lcp_rules(&mut self, page: &Page<'_>, lcp: &LcpImage) {
        let node = &page.document.nodes[lcp.node];
        let element = &node.element;
        let name = lcp.file.as_deref().map_or_else(|| lcp.url.clone(), display);
        if lcp.background {
            let url = &lcp.url;
            let wanted = lcp.file.clone().map(Target::Local);
            let preloaded = page.document.preloads.iter().any(|preload| {
                preload
                    .value("fetchpriority")
                    .is_some_and(|p| p.trim().eq_ignore_ascii_case("high"))
                    && preload
                        .value("href")
                        .is_some_and(|href| wanted.is_some() && resolve(&page.dir, href) == wanted)
            });
            if !preloaded {
                self.push_about(
                    Rule::LcpFetchPriority,
                    lcp.file.as_deref(),
                    format!(
                        "`{name}`, a CSS background, is likely the largest contentful paint, and the browser finds it only once the style sheet is applied"
                    ),
                    format!(
                        "preload it at high priority in the `<head>`: `<link rel=\"preload\" as=\"image\" href=\"{url}\" fetchpriority=\"high\">`, or make it an `<img fetchpriority=\"high\">`"
                    ),
                    vec![label(page.source, &element.span, "likely LCP, found late")],
                );
            }
            return;
        }
        let lazy = element
            .value("loading")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("lazy"));
        if lazy {
            self.push_about(
                Rule::LcpLazyLoaded,
                lcp.file.as_deref(),
                format!(
                    "`{name}` is likely the largest contentful paint (the largest image on the first screen), and it is lazy-loaded"
                ),
                "remove `loading=\"lazy\"` from it (and add `fetchpriority=\"high\"`); lazy-load the images further down instead".to_owned(),
                vec![label(page.source, &element.span_of("loading"), "waits for layout")],
            );
        }
        let high = element
            .value("fetchpriority")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("high"));
        if !high {
            self.push_about(
                Rule::LcpFetchPriority,
                lcp.file.as_deref(),
                format!(
                    "`{name}` is likely the largest contentful paint (the largest image on the first screen), and it is fetched at the default priority"
                ),
                "add `fetchpriority=\"high\"` to it: the browser then requests it before the images it finds later and the scripts that do not block".to_owned(),
                vec![label(page.source, &element.span, "likely LCP, default priority")],
            );
        }
    }

    pub(super) fn priorities(&mut self, page: &Page<'_>) {
        let source = page.source;
        let document = page.document;
        let max = self.spec.max_high_priority.value as usize;
        if document.high_priority.len() > max {
            let mut labels: Vec<velocity_policy_lang::Label> = document
                .high_priority
                .iter()
                .skip(max)
                .map(|element| label(source, &element.span_of("fetchpriority"), "high"))
                .collect();
            if let Some(first) = labels.first_mut() {
                first.text = format!("one more than the {max} allowed");
            }
            labels.extend(
                document
                    .high_priority
                    .iter()
                    .take(max)
                    .map(|element| label(source, &element.span_of("fetchpriority"), "high")),
            );
            self.push(
                Rule::TooManyHighPriority,
                format!(
                    "{} elements with `fetchpriority=\"high\"`, more than {max}",
                    document.high_priority.len()
                ),
                "marking everything priority is the same as marking nothing: keep `fetchpriority=\"high\"` on the likely largest contentful paint image, remove it from the rest".to_owned(),
                labels,
            );
        }
        let max = self.spec.max_preloads.value as usize;
        if document.preloads.len() > max {
            let labels = document
                .preloads
                .iter()
                .skip(max)
                .enumerate()
                .map(|(i, element)| {
                    let text = if i == 0 {
                        format!("one more than the {max} allowed")
                    } else {
                        "preload".to_owned()
                    };
                    label(source, &element.span, text)
                })
                .collect();
            self.push(
                Rule::TooManyPreloads,
                format!(
                    "{} `<link rel=\"preload\">`, more than {max}",
                    document.preloads.len()
                ),
                "each preload competes with the page's critical requests: preload only what the first paint needs and is discovered late (the hero image, one font)".to_owned(),
                labels,
            );
        }
    }
}
