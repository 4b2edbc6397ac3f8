//! The image rules: which file a browser downloads for each `<img>` (its `<picture>` sources,
//! its `srcset` for the reference phone) and for each CSS background, and what is wrong with it.

use std::collections::HashSet;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use velocity_policy_lang::SourceId;

use super::layout::Shown;
use super::walk::{FileInfo, Target, dir_of, display, resolve};
use super::{ASPECT_RATIO_TOLERANCE_PX, Auditor, MODERN_FORMAT_MIN_BYTES, Page, label, size};
use crate::assets::html::{self, Img};
use crate::assets::media::MediaType;
use crate::assets::media::jpeg;
use crate::assets::report::{PageAssets, Rule};
use crate::assets::style::cascade::Length;
use crate::assets::style::{self, Device};

/// Lighthouse's `uses-optimized-images` reports a JPEG whose quality-92 re-encode is at least
/// this much smaller.
pub(crate) const OPTIMIZED_MIN_SAVING: u64 = 4096;
/// Lighthouse's `uses-responsive-images` reports an image that wastes more than this...
pub(crate) const RESPONSIVE_MIN_WASTE: u64 = 4096;
/// ...or, when it already has a `srcset` or `<picture>`, more than this.
pub(crate) const RESPONSIVE_MIN_WASTE_WITH_SRCSET: u64 = 12 * 1024;
/// Chrome starts loading a `loading="lazy"` image this far below the viewport (on a fast
/// connection); further down, Lighthouse's page load never fetches it. We audit lazy images
/// only within 80% of that distance of the first screen, to stay clear of the estimate's error.
pub(crate) const LAZY_LOAD_DISTANCE_PX: f64 = 1250.0;

/// What a browser downloads for an `<img>`.
#[derive(Debug, Clone)]
pub(crate) struct Choice {
    /// The URL, and where it is written.
    pub(crate) url: String,
    pub(crate) span: Range<usize>,
    /// Device pixels per CSS pixel of the chosen candidate (`2x`, or `800w` for a 400 px slot).
    pub(crate) density: f64,
    /// The element offers several candidates (`srcset`, `<picture>` sources).
    pub(crate) responsive: bool,
    /// The chosen file, when it is one of the folder's.
    pub(crate) file: Option<(PathBuf, Rc<FileInfo>)>,
}

/// A MIME type a current browser decodes (for `<source type>`).
fn supported_type(mime: &str) -> bool {
    matches!(
        mime.trim().to_ascii_lowercase().as_str(),
        "image/avif"
            | "image/webp"
            | "image/jpeg"
            | "image/jpg"
            | "image/png"
            | "image/gif"
            | "image/svg+xml"
            | "image/apng"
            | "image/bmp"
            | "image/x-icon"
    )
}

/// The width the `sizes` attribute gives on `device` (CSS pixels): the first entry whose media
/// condition holds; `100vw` without one.
fn source_size(sizes: Option<&str>, device: &Device) -> f64 {
    let Some(sizes) = sizes else {
        return device.width;
    };
    for entry in sizes.split(',') {
        let entry = entry.trim();
        let (condition, length) = match entry.rfind(')') {
            Some(close) => (Some(&entry[..=close]), entry[close + 1..].trim()),
            None => (None, entry),
        };
        if condition.is_some_and(|c| !style::media_applies(c, device)) {
            continue;
        }
        return match Length::parse(length) {
            Length::Auto => device.width,
            other => other.px(16.0, device.width, device).unwrap_or(device.width),
        };
    }
    device.width
}

/// The candidate a browser picks from `srcset` (and `src` as `1x`), as Chrome does: the
/// smallest whose density reaches the device's, else the densest.
fn pick(
    text: &str,
    srcset: Option<&html::Attr>,
    sizes: Option<&str>,
    src: Option<&html::Attr>,
    device: &Device,
) -> Option<(String, Range<usize>, f64, usize)> {
    let mut candidates: Vec<(String, Range<usize>, f64)> = Vec::new();
    let slot = source_size(sizes, device);
    if let Some(attr) = srcset
        && let Some(span) = attr.value_span.clone()
    {
        let raw = text.get(span.clone()).unwrap_or_default();
        for candidate in html::srcset(raw, span.start) {
            let descriptor = candidate.descriptor.trim().to_ascii_lowercase();
            let density = if let Some(w) = descriptor.strip_suffix('w') {
                w.parse::<f64>().ok().map(|w| w / slot)
            } else if let Some(x) = descriptor.strip_suffix('x') {
                x.parse::<f64>().ok()
            } else if descriptor.is_empty() {
                Some(1.0)
            } else {
                None
            };
            if let Some(density) = density.filter(|d| *d > 0.0 && d.is_finite()) {
                candidates.push((candidate.url, candidate.span, density));
            }
        }
    }
    let count = candidates.len();
    if let Some(attr) = src
        && let (Some(url), Some(span)) = (attr.value.clone(), attr.value_span.clone())
        && !candidates.iter().any(|c| (c.2 - 1.0).abs() < f64::EPSILON)
        && !url.trim().is_empty()
    {
        // `src` is the `1x` candidate, unless `srcset` has width descriptors.
        let has_widths = srcset.and_then(|a| a.value.as_deref()).is_some_and(|v| {
            html::srcset(v, 0)
                .iter()
                .any(|c| c.descriptor.trim().ends_with('w'))
        });
        if !has_widths || candidates.is_empty() {
            candidates.push((url, span, 1.0));
        }
    }
    let best = candidates
        .iter()
        .filter(|c| c.2 >= device.density - 1e-9)
        .min_by(|a, b| a.2.total_cmp(&b.2))
        .or_else(|| candidates.iter().max_by(|a, b| a.2.total_cmp(&b.2)))?
        .clone();
    Some((best.0, best.1, best.2, count.max(1)))
}

impl Auditor<'_> {
    /// What the browser downloads for `img` on the reference phone.
    pub(super) fn choose(
        &mut self,
        text: &str,
        dir: &Path,
        document: &html::Document,
        img: &Img,
    ) -> Option<Choice> {
        let sources = img
            .picture
            .and_then(|i| document.pictures.get(i))
            .map_or(&[][..], Vec::as_slice);
        let mut responsive = !sources.is_empty();
        let mut chosen = None;
        for source in sources {
            if source
                .value("media")
                .is_some_and(|media| !style::media_applies(media, &self.device))
                || source.value("type").is_some_and(|t| !supported_type(t))
            {
                continue;
            }
            if let Some(found) = pick(
                text,
                source.attr("srcset"),
                source.value("sizes"),
                None,
                &self.device,
            ) {
                chosen = Some(found);
                break;
            }
        }
        let element = &img.element;
        let chosen = match chosen {
            Some(found) => found,
            None => {
                let found = pick(
                    text,
                    element.attr("srcset"),
                    element.value("sizes"),
                    element.attr("src"),
                    &self.device,
                )?;
                responsive |= found.3 > 1;
                found
            }
        };
        let (url, span, density, _) = chosen;
        let file = match resolve(dir, &url) {
            Some(Target::Local(rel)) => self.info(&rel).map(|info| (rel, info)),
            _ => None,
        };
        Some(Choice {
            url,
            span,
            density,
            responsive,
            file,
        })
    }

    /// A downloaded image file: reports it missing, unreadable, not an image or over the
    /// ceiling. Returns it when it is a readable image.
    fn image(
        &mut self,
        source: SourceId,
        dir: &Path,
        url: &str,
        span: &Range<usize>,
    ) -> Option<(PathBuf, Rc<FileInfo>)> {
        let (rel, info) = self.referenced(source, dir, url, span)?;
        let name = display(&rel);
        if let Some(problem) = &info.problem {
            self.push_about(
                Rule::UnreadableAsset,
                Some(&rel),
                format!("`{name}` is a damaged {}: {problem}", info.kind),
                "rebuild or re-export the file; a browser shows a broken image or nothing"
                    .to_owned(),
                vec![label(source, span, "cannot be read")],
            );
            return None;
        }
        if !info.kind.is_image() {
            self.push_about(
                Rule::UnreadableAsset,
                Some(&rel),
                format!("`{name}` is {} by its bytes, not an image", info.kind),
                "point at a PNG, JPEG, GIF, WebP, AVIF or SVG file".to_owned(),
                vec![label(source, span, "not an image")],
            );
            return None;
        }
        self.images.insert(rel.clone());
        if info.len > self.spec.max_image.value {
            let how = match info.jpeg.as_ref() {
                Some(encoding) if encoding.quality <= 86.0 => format!(
                    " (a well-encoded quality-{:.0} JPEG: make it smaller by resizing it, or by converting it to AVIF or WebP)",
                    encoding.quality
                ),
                _ => String::new(),
            };
            self.push_about(
                Rule::ImageSize,
                Some(&rel),
                format!(
                    "`{name}` is {}, over the {} ceiling{how}",
                    size(info.len),
                    size(self.spec.max_image.value)
                ),
                "compress it (AVIF or WebP at a lower quality), or resize it to the largest size it is displayed at".to_owned(),
                vec![label(source, span, format!("{} image", size(info.len)))],
            );
        }
        Some((rel, info))
    }

    /// Every image rule of one document.
    pub(super) fn images_of(
        &mut self,
        page: &Page<'_>,
        choices: &[Option<Choice>],
        assets: &mut PageAssets,
    ) {
        let source = page.source;
        // Files an `<img>` shows within the first screens: another element loading the same file
        // far below, or hidden, wastes nothing (the file is downloaded once). As in Lighthouse,
        // only elements without a `loading` attribute count.
        let far = super::layout::OFFSCREEN_SCREENS * self.device.height;
        let in_view: HashSet<PathBuf> = page
            .document
            .imgs
            .iter()
            .zip(choices)
            .filter(|(img, _)| {
                !page.styles[img.node].hidden
                    && img.element.attr("loading").is_none()
                    && page.layout.shown(img.node).is_some_and(|s| s.top < far)
            })
            .filter_map(|(_, choice)| choice.as_ref()?.file.as_ref().map(|(rel, _)| rel.clone()))
            .collect();
        for (img, choice) in page.document.imgs.iter().zip(choices) {
            let element = &img.element;
            let style = &page.styles[img.node];
            // Every candidate that is a file of the folder must be there and whole.
            self.candidates(page, img);
            let shown = page.layout.shown(img.node);
            if style.hidden {
                // A browser still downloads an `<img>` it does not display, unless it is lazy.
                self.hidden_image(page, img, choice.as_ref(), &in_view, assets);
                continue;
            }
            self.intrinsic_size(page, img, choice.as_ref());
            let Some(choice) = choice else {
                continue;
            };
            let lazy = element
                .value("loading")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("lazy"));
            let loaded = !lazy
                || shown.is_some_and(|s| s.top < self.device.height + LAZY_LOAD_DISTANCE_PX * 0.8);
            let Some((rel, info)) = choice.file.clone() else {
                continue;
            };
            if info.problem.is_some() || !info.kind.is_image() {
                continue;
            }
            if loaded {
                assets.images.insert(display(&rel));
            } else {
                continue;
            }
            if let Some(shown) = shown {
                self.aspect_ratio(page, img, &rel, &info, &shown);
                self.responsive(page, choice, &rel, &info, &shown);
            }
            if !in_view.contains(&rel) {
                self.offscreen(page, img, &rel, &info, shown.as_ref(), lazy);
            }
            let at = choice.span.clone();
            self.optimized(source, &at, &rel, &info, shown.as_ref().map(|s| s.width));
            self.modern(source, &at, &rel, &info);
        }
        self.backgrounds(page, assets);
    }

    /// Missing, damaged and oversized files among all the candidates of an `<img>` (each is
    /// downloaded on some screen), and its `srcset` with widths but no `sizes`.
    fn candidates(&mut self, page: &Page<'_>, img: &Img) {
        let source = page.source;
        let element = &img.element;
        let sources = img
            .picture
            .and_then(|i| page.document.pictures.get(i))
            .map_or(&[][..], Vec::as_slice);
        let mut seen: Vec<PathBuf> = Vec::new();
        let mut check = |auditor: &mut Self, url: &str, span: &Range<usize>| {
            if let Some(Target::Local(rel)) = resolve(&page.dir, url) {
                if seen.contains(&rel) {
                    return;
                }
                seen.push(rel);
            }
            let _ = auditor.image(source, &page.dir, url, span);
        };
        if let Some(src) = element.attr("src")
            && let Some(url) = src.value.clone()
        {
            let span = src.value_span.clone().unwrap_or_else(|| src.span.clone());
            check(self, &url, &span);
        }
        for candidate_element in sources.iter().chain(std::iter::once(element)) {
            let Some(srcset) = candidate_element.attr("srcset") else {
                continue;
            };
            let Some(raw_span) = srcset.value_span.clone() else {
                continue;
            };
            let raw = page.text.get(raw_span.clone()).unwrap_or_default();
            let candidates = html::srcset(raw, raw_span.start);
            for candidate in &candidates {
                check(self, &candidate.url, &candidate.span);
            }
            if candidates.iter().any(|c| c.descriptor.ends_with('w'))
                && candidate_element.attr("sizes").is_none()
                && element.attr("sizes").is_none()
            {
                self.push(
                    Rule::SrcsetSizes,
                    "`srcset` with width descriptors but no `sizes`: the browser assumes the image fills the viewport".to_owned(),
                    "add `sizes` with the width the image is shown at, e.g. `sizes=\"(max-width: 640px) 100vw, 50vw\"`".to_owned(),
                    vec![label(source, &srcset.span, "no `sizes` for these widths")],
                );
            }
        }
    }

    /// Lighthouse's `unsized-images`: an `<img>` whose box the browser cannot reserve before
    /// the file arrives.
    fn intrinsic_size(&mut self, page: &Page<'_>, img: &Img, choice: Option<&Choice>) {
        let element = &img.element;
        let style = &page.styles[img.node];
        // Out of the flow: it shifts nothing.
        let picture_position = img
            .picture
            .and_then(|_| page.document.nodes[img.node].parent)
            .map(|parent| page.styles[parent].position.clone())
            .unwrap_or_default();
        if matches!(style.position.as_str(), "absolute" | "fixed")
            || matches!(picture_position.as_str(), "absolute" | "fixed")
        {
            return;
        }
        // An SVG written into the page (`data:`) is not a download.
        if element.value("src").is_some_and(|src| {
            src.trim_start()
                .to_ascii_lowercase()
                .starts_with("data:image/svg")
        }) {
            return;
        }
        let explicit_css = |won: &Option<crate::assets::style::cascade::Won>| {
            won.as_ref().is_some_and(|won| {
                !matches!(
                    won.declaration.keyword().as_str(),
                    "auto" | "initial" | "unset" | "inherit"
                )
            })
        };
        let width = explicit_attribute(element.value("width")) || explicit_css(&style.width);
        let height = explicit_attribute(element.value("height")) || explicit_css(&style.height);
        let ratio = explicit_css(&style.aspect_ratio);
        if (width && height) || (ratio && (width || height)) {
            return;
        }
        let missing = match (width, height) {
            (false, false) => "`width` and `height`",
            (true, false) => "`height`",
            _ => "`width`",
        };
        let help = match choice.and_then(|c| c.file.as_ref()).and_then(|(_, info)| info.dimensions) {
            Some((w, h)) => format!(
                "add `width=\"{w}\" height=\"{h}\"` (the file's size; any pair with the same ratio reserves the space, and CSS may still scale it)"
            ),
            None => "add `width` and `height` attributes with the image's size in pixels, so the browser reserves its space before it loads".to_owned(),
        };
        self.push_about(
            Rule::UnsizedImages,
            choice
                .and_then(|c| c.file.as_ref())
                .map(|(rel, _)| rel.as_path()),
            format!("`<img>` without {missing}: the page shifts when it loads"),
            help,
            vec![label(page.source, &element.span, "no intrinsic size")],
        );
    }

    /// Lighthouse's `image-aspect-ratio`: the box the image is drawn in has another shape than
    /// the file, and `object-fit` does not crop it. Only where both sides of the box are known
    /// lengths (attributes or CSS pixels, no percentage, no `max-width` that could bite).
    fn aspect_ratio(
        &mut self,
        page: &Page<'_>,
        img: &Img,
        rel: &Path,
        info: &FileInfo,
        shown: &Shown,
    ) {
        let style = &page.styles[img.node];
        let (Some((natural_w, natural_h)), true) = (
            info.dimensions,
            style.object_fit.is_empty() || style.object_fit == "fill",
        ) else {
            return;
        };
        if natural_w <= 5 || natural_h <= 5 || info.kind == MediaType::Svg {
            return;
        }
        let (width, height) = (shown.width, shown.height);
        if width <= 0.0 || height <= 0.0 {
            return;
        }
        let ratio = f64::from(natural_w) / f64::from(natural_h);
        let target_height = width / ratio;
        let target_width = height * ratio;
        let mismatch = if target_height < target_width {
            (target_height - height).abs() >= ASPECT_RATIO_TOLERANCE_PX
        } else {
            (target_width - width).abs() >= ASPECT_RATIO_TOLERANCE_PX
        };
        // Where the width is only an upper bound (a container we estimate), the image is
        // certainly stretched only if it is too tall even at that width: it can only get
        // narrower, its height staying.
        let certain = shown.exact
            || (shown.fixed_height && height - target_height >= ASPECT_RATIO_TOLERANCE_PX);
        if !mismatch || !certain {
            return;
        }
        let (width, height) = (width.round(), height.round());
        let element = &img.element;
        let mut labels = vec![label(
            page.source,
            &element.span_of("width"),
            format!("{width}×{height} shown"),
        )];
        if let Some(attr) = element.attr("height") {
            labels.push(label(page.source, &attr.span, ""));
        }
        self.push_about(
            Rule::ImageAspectRatio,
            Some(rel),
            format!(
                "shown at {width}×{height} (ratio {:.2}) but `{}` is {natural_w}×{natural_h} (ratio {ratio:.2})",
                width / height,
                display(rel)
            ),
            format!(
                "the image is stretched: for a width of {width} write `height=\"{}\"` (or `height: auto` in CSS), crop the file to the shape it is shown at, or set `object-fit: cover`",
                target_height.round()
            ),
            labels,
        );
    }

    /// Lighthouse's `uses-responsive-images`: the file has many more pixels than the box it is
    /// shown in needs on the reference phone.
    fn responsive(
        &mut self,
        page: &Page<'_>,
        choice: &Choice,
        rel: &Path,
        info: &FileInfo,
        shown: &Shown,
    ) {
        let (Some((natural_w, natural_h)), true) = (info.dimensions, info.kind.is_raster()) else {
            return;
        };
        let density = self.device.density;
        let used = (shown.width * density) * (shown.height * density);
        let actual = f64::from(natural_w) * f64::from(natural_h);
        if actual <= 0.0 || used >= actual {
            return;
        }
        let wasted = (info.len as f64 * (1.0 - used / actual)).round() as u64;
        let allowed = if choice.responsive {
            RESPONSIVE_MIN_WASTE_WITH_SRCSET
        } else {
            RESPONSIVE_MIN_WASTE
        };
        if wasted <= allowed {
            return;
        }
        let needed = (shown.width * density).ceil();
        let how = if choice.responsive {
            format!(
                "its `srcset` has nothing near {needed:.0} px wide for this screen: add that width, and check `sizes`"
            )
        } else {
            format!(
                "add a {needed:.0} px wide version with `srcset` and `sizes` (and keep the large one for wide screens), e.g. `srcset=\"{stem}-{needed:.0}.jpg {needed:.0}w, {name} {natural_w}w\" sizes=\"{:.0}px\"`",
                shown.width,
                stem = rel
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                name = rel
                    .file_name()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            )
        };
        let bound = if shown.exact { "" } else { " at most" };
        self.push_about(
            Rule::ResponsiveImages,
            Some(rel),
            format!(
                "`{}` is {natural_w}×{natural_h} but shown{bound} {:.0}×{:.0} on a phone ({needed:.0} device pixels wide): about {} of its {} are wasted",
                display(rel),
                shown.width,
                shown.height,
                size(wasted),
                size(info.len)
            ),
            how,
            vec![label(page.source, &choice.span, "more pixels than shown")],
        );
    }

    /// Lighthouse's `offscreen-images`, estimated: an eager image so far down the page that it
    /// competes with what the first screen needs.
    fn offscreen(
        &mut self,
        page: &Page<'_>,
        img: &Img,
        rel: &Path,
        info: &FileInfo,
        shown: Option<&Shown>,
        lazy: bool,
    ) {
        let Some(shown) = shown else {
            return;
        };
        // `loading="eager"` says the author wants it now (Lighthouse skips it too).
        if lazy
            || img.element.attr("loading").is_some()
            || info.len < super::layout::OFFSCREEN_MIN_BYTES
        {
            return;
        }
        let screens = shown.top / self.device.height;
        if shown.top < super::layout::OFFSCREEN_SCREENS * self.device.height {
            return;
        }
        self.push_about(
            Rule::OffscreenImages,
            Some(rel),
            format!(
                "`{}` loads with the page but sits about {screens:.0} screens down (an estimate from the document's order): it competes with what the first screen needs",
                display(rel)
            ),
            "add `loading=\"lazy\"`: the browser fetches it when the reader scrolls near it".to_owned(),
            vec![label(page.source, &img.element.span, "far below the fold")],
        );
    }

    /// An `<img>` inside an element that is not displayed (a closed menu, a hidden tab): it is
    /// downloaded with the page all the same, which Lighthouse's `offscreen-images` counts as
    /// wholly offscreen.
    fn hidden_image(
        &mut self,
        page: &Page<'_>,
        img: &Img,
        choice: Option<&Choice>,
        in_view: &HashSet<PathBuf>,
        assets: &mut PageAssets,
    ) {
        let Some((rel, info)) = choice.and_then(|c| c.file.clone()) else {
            return;
        };
        if info.problem.is_some() || !info.kind.is_image() {
            return;
        }
        let loading = img
            .element
            .value("loading")
            .map(|v| v.trim().to_ascii_lowercase());
        if loading.as_deref() == Some("lazy") {
            return;
        }
        assets.images.insert(display(&rel));
        if loading.is_some()
            || info.len < super::layout::OFFSCREEN_MIN_BYTES
            || in_view.contains(&rel)
        {
            return;
        }
        self.push_about(
            Rule::OffscreenImages,
            Some(&rel),
            format!(
                "`{}` loads with the page but is inside an element that is not displayed (`display: none`)",
                display(&rel)
            ),
            "add `loading=\"lazy\"`: the browser then fetches it only when it is shown".to_owned(),
            vec![label(page.source, &img.element.span, "hidden, loaded anyway")],
        );
    }

    /// Lighthouse's `uses-optimized-images`: a JPEG encoded at a higher quality than the web
    /// needs (its quality read from its quantisation tables).
    fn optimized(
        &mut self,
        source: SourceId,
        at: &Range<usize>,
        rel: &Path,
        info: &FileInfo,
        shown_width: Option<f64>,
    ) {
        let (Some(encoding), MediaType::Jpeg) = (info.jpeg.as_ref(), info.kind) else {
            return;
        };
        let Some(estimate) = jpeg::reencoded(encoding) else {
            return;
        };
        if info.len < estimate.jpeg_92 + OPTIMIZED_MIN_SAVING {
            return;
        }
        let saved = info.len.saturating_sub(estimate.jpeg_85);
        let subsampling = match encoding.subsampling {
            jpeg::Subsampling::Full => " with full-resolution colour",
            _ => "",
        };
        let metadata = if encoding.metadata_bytes >= 1024 {
            format!(", {} of it metadata", size(encoding.metadata_bytes))
        } else {
            String::new()
        };
        let resize = match (shown_width, info.dimensions) {
            (Some(shown), Some((w, _))) if shown * self.device.density * 1.5 < f64::from(w) => {
                format!(
                    "; it is also far wider than it is shown ({w} px for about {:.0}): resizing saves more than re-encoding",
                    shown * self.device.density
                )
            }
            _ => String::new(),
        };
        self.push_about(
            Rule::OptimizedImages,
            Some(rel),
            format!(
                "`{}` is a quality-{:.0} JPEG{subsampling} of {}{metadata}: at quality 85 it would be about {} ({} less)",
                display(rel),
                encoding.quality,
                size(info.len),
                size(estimate.jpeg_85),
                size(saved)
            ),
            format!(
                "re-encode it at quality 85 with 4:2:0 colour and no metadata (`cjpeg -quality 85 -optimize`, or your image pipeline's `quality: 85`){resize}"
            ),
            vec![label(source, at, format!("quality {:.0}", encoding.quality))],
        );
    }

    /// Lighthouse's `modern-image-formats`: a PNG or JPEG whose AVIF would be at least 8 KiB
    /// smaller, estimated as Lighthouse does from the JPEG and WebP sizes (ours from the JPEG's
    /// headers; for a PNG, from its size and pixel count).
    fn modern(&mut self, source: SourceId, at: &Range<usize>, rel: &Path, info: &FileInfo) {
        if !matches!(info.kind, MediaType::Png | MediaType::Jpeg)
            || info.len < MODERN_FORMAT_MIN_BYTES
        {
            return;
        }
        let Some(avif) = avif_estimate(info) else {
            return;
        };
        let saved = info.len.saturating_sub(avif);
        if saved < MODERN_FORMAT_MIN_BYTES {
            return;
        }
        // A sibling with the same stem that is AVIF or WebP by its bytes is an alternative the
        // server can negotiate.
        let stem = rel.file_stem().map(|s| s.to_os_string());
        for sibling in self.listing(&dir_of(rel)) {
            if sibling.as_path() == rel || sibling.file_stem().map(|s| s.to_os_string()) != stem {
                continue;
            }
            if self
                .info(&sibling)
                .is_some_and(|sibling| sibling.problem.is_none() && sibling.kind.is_modern_image())
            {
                return;
            }
        }
        let named_modern = rel.extension().is_some_and(|ext| {
            ext.eq_ignore_ascii_case("webp") || ext.eq_ignore_ascii_case("avif")
        });
        let note = if named_modern {
            " (by its bytes, whatever its name says)"
        } else {
            ""
        };
        let stem = rel
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.push_about(
            Rule::ModernImageFormats,
            Some(rel),
            format!(
                "`{}` is a {}{note} of {} with no AVIF or WebP alternative: as AVIF it would be about {} ({} less)",
                display(rel),
                info.kind,
                size(info.len),
                size(avif),
                size(saved)
            ),
            format!(
                "serve `{stem}.avif` or `{stem}.webp` next to it, or wrap it in `<picture>` with a `<source type=\"image/avif\">`"
            ),
            vec![label(source, at, format!("{} only", info.kind))],
        );
    }

    /// CSS background images of the elements a browser renders: the same file rules as an
    /// `<img>` (they are downloads like any other), pointing at the `url()` in the style sheet
    /// or `style` attribute.
    fn backgrounds(&mut self, page: &Page<'_>, assets: &mut PageAssets) {
        for style in &page.styles {
            if style.hidden {
                continue;
            }
            let Some(won) = style.background.as_ref() else {
                continue;
            };
            let origin = page.origin(won.origin);
            for url in &won.declaration.urls {
                let Some((rel, info)) = self.image(origin.source, &origin.dir, &url.url, &url.span)
                else {
                    continue;
                };
                assets.images.insert(display(&rel));
                self.optimized(origin.source, &url.span, &rel, &info, None);
                self.modern(origin.source, &url.span, &rel, &info);
            }
        }
    }
}

/// Lighthouse's AVIF estimate: the mean of half the quality-92 JPEG and 80% of the quality-85
/// WebP. Ours errs high, so that a saving is never overstated: for a JPEG, from its headers
/// ([`jpeg::reencoded`]); for a true-colour PNG, 45% of the file (Lighthouse measured 7–30% on the
/// fixture's photographs, charts, diagrams and screenshots; a noisy or tiny image compresses
/// worse, and 45% keeps it unreported). Palette and greyscale PNGs are not estimated (a lossy
/// encode can be larger than them).
fn avif_estimate(info: &FileInfo) -> Option<u64> {
    match info.kind {
        MediaType::Jpeg => {
            let estimate = jpeg::reencoded(info.jpeg.as_ref()?)?;
            Some((estimate.jpeg_92 as f64 * 0.25 + estimate.webp_85 as f64 * 0.4).round() as u64)
        }
        MediaType::Png => {
            if !info.png_truecolor {
                return None;
            }
            Some((info.len as f64 * 0.45).round() as u64)
        }
        _ => None,
    }
}

/// An HTML `width`/`height` attribute that gives a size, as Lighthouse reads one: it starts
/// with digits (`640`, `640px`, `50%`); not `auto`, empty, or `+640`.
fn explicit_attribute(value: Option<&str>) -> bool {
    value.is_some_and(|value| {
        let value = value.trim_start();
        !value.starts_with('+')
            && value
                .trim_start_matches('-')
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit())
            && !value.starts_with('-')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_attributes_as_lighthouse_reads_them() {
        assert!(explicit_attribute(Some("640")));
        assert!(explicit_attribute(Some("50%")));
        assert!(explicit_attribute(Some("0")));
        assert!(!explicit_attribute(Some("auto")));
        assert!(!explicit_attribute(Some("+5")));
        assert!(!explicit_attribute(Some("")));
        assert!(!explicit_attribute(None));
    }

    #[test]
    fn the_browser_picks_the_smallest_candidate_dense_enough() {
        let device = Device::MOBILE;
        let text = r#"a-400.jpg 400w, a-800.jpg 800w, a-1600.jpg 1600w"#;
        let srcset = html::Attr {
            name: "srcset".to_owned(),
            value: Some(text.to_owned()),
            span: 0..text.len(),
            value_span: Some(0..text.len()),
        };
        // Half of a 412 px screen is 206 px; 1.75 × 206 = 360.5 device pixels: 400w does.
        let (url, _, density, count) = pick(
            text,
            Some(&srcset),
            Some("(min-width: 768px) 33vw, 50vw"),
            None,
            &device,
        )
        .unwrap();
        assert_eq!((url.as_str(), count), ("a-400.jpg", 3));
        assert!((density - 400.0 / 206.0).abs() < 1e-9);
        // The full width needs 721 device pixels: 800w.
        let (url, ..) = pick(text, Some(&srcset), None, None, &device).unwrap();
        assert_eq!(url, "a-800.jpg");
        assert_eq!(
            source_size(Some("(max-width: 600px) 480px, 800px"), &device),
            480.0
        );
    }
}
