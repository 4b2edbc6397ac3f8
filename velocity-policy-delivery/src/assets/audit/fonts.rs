//! The font rules, for the fonts a page uses: the faces a browser downloads to set the page's
//! text (and the text of its `::before` and `::after`), chosen as CSS font matching chooses
//! them (family by family, then style, then the nearest weight, then the `unicode-range` that
//! covers each character), and the source of each face a browser picks (the first `url()` whose
//! `format()` it reads). A face that no text of the page needs is not downloaded and is not
//! checked or counted.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ops::Range;
use std::path::Path;
use std::rc::Rc;

use velocity_policy_lang::SourceId;

use super::walk::{Target, display, resolve};
use super::{Auditor, Page, label, size};
use crate::assets::media::MediaType;
use crate::assets::report::{PageAssets, Rule};
use crate::assets::style::FontFace;
use crate::assets::style::cascade::Font;

/// The `font-display` values that show text at once: `swap` (a fallback font, swapped when the
/// face arrives) and `optional` (the face only if it is already there). `block` and `auto` hide
/// text for up to three seconds; `fallback` hides it for 100 ms and may never swap; both are
/// reported, as Lighthouse's font-display insight reports them.
pub(crate) const PASSING_FONT_DISPLAY: &[&str] = &["swap", "optional"];

/// Family names that are the reader's own fonts, never a download: the generic keywords
/// (which [`families`](crate::assets::style::families) writes `<serif>`) and the platforms'
/// system-font aliases.
fn is_system_family(family: &str) -> bool {
    family.starts_with('<')
        || family.eq_ignore_ascii_case("-apple-system")
        || family.eq_ignore_ascii_case("BlinkMacSystemFont")
}

/// A font as matching sees it: families, weight, italic.
type FontKey = (Rc<[String]>, u32, bool);

/// An `@font-face` as one document sees it: where it is written, and the directory its URLs are
/// relative to.
#[derive(Debug, Clone)]
struct FaceRef {
    source: SourceId,
    dir: std::path::PathBuf,
    face: FontFace,
}

/// The faces of `faces` a browser would use for character `c` in `font`, as CSS font matching
/// picks them; `None` when a system font sets it.
fn matching_face(faces: &[FaceRef], font: &Font, c: char) -> Option<usize> {
    for family in font.families.iter() {
        if is_system_family(family) {
            return None;
        }
        let of_family: Vec<usize> = faces
            .iter()
            .enumerate()
            .filter(|(_, f)| {
                f.face
                    .family
                    .as_deref()
                    .is_some_and(|name| name.eq_ignore_ascii_case(family))
            })
            .map(|(i, _)| i)
            .collect();
        if of_family.is_empty() {
            // Not a web font: a system font of that name, which we take as not installed.
            continue;
        }
        // Style first: italic faces for italic text if there are any, else the others.
        let styled: Vec<usize> = {
            let wanted: Vec<usize> = of_family
                .iter()
                .copied()
                .filter(|&i| faces[i].face.italic == font.italic)
                .collect();
            if wanted.is_empty() { of_family } else { wanted }
        };
        // Then the nearest weight (CSS Fonts 4, font matching, step 4).
        let weight = font.weight;
        let chosen = nearest_weight(&styled, faces, weight);
        // Then the unicode-range: the faces of that weight that cover the character.
        let covering = chosen.iter().copied().find(|&i| faces[i].face.covers(c));
        if let Some(face) = covering {
            return Some(face);
        }
    }
    None
}

fn nearest_weight(candidates: &[usize], faces: &[FaceRef], weight: u32) -> Vec<usize> {
    let range = |i: usize| faces[i].face.weights();
    let exact: Vec<usize> = candidates
        .iter()
        .copied()
        .filter(|&i| {
            let (lo, hi) = range(i);
            lo <= weight && weight <= hi
        })
        .collect();
    if !exact.is_empty() {
        return exact;
    }
    // Distance in the direction CSS prefers, as a sortable key.
    let key = |i: usize| -> (u32, u32) {
        let (lo, hi) = range(i);
        let below = hi < weight;
        let distance = if below { weight - hi } else { lo - weight };
        let order = if (400..=500).contains(&weight) {
            if !below && lo <= 500 {
                0
            } else if below {
                1
            } else {
                2
            }
        } else if weight < 400 {
            u32::from(!below)
        } else {
            u32::from(below)
        };
        (order, distance)
    };
    let Some(best) = candidates.iter().map(|&i| key(i)).min() else {
        return Vec::new();
    };
    candidates
        .iter()
        .copied()
        .filter(|&i| key(i) == best)
        .collect()
}

impl Auditor<'_> {
    /// The font rules of one document.
    pub(super) fn fonts_of(&mut self, page: &Page<'_>, assets: &mut PageAssets) {
        let mut faces: Vec<FaceRef> = Vec::new();
        for (sheet, origin) in &page.sheets {
            let origin = page.origin(*origin);
            faces.extend(sheet.faces.iter().map(|face| FaceRef {
                source: origin.source,
                dir: origin.dir.clone(),
                face: face.clone(),
            }));
        }
        for preload in &page.document.preloads {
            let is_font = preload
                .value("as")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("font"));
            if let (true, Some(href)) = (is_font, preload.attr("href"))
                && let (Some(url), Some(span)) = (href.value.clone(), href.value_span.clone())
                && let Some(rel) = self.font(page.source, &page.dir, &url, &span, None)
            {
                assets.fonts.insert(display(&rel));
            }
        }
        // The faces the page's text needs.
        let mut used: BTreeSet<usize> = BTreeSet::new();
        if !faces.is_empty() {
            let mut seen: HashMap<FontKey, HashSet<char>> = HashMap::new();
            let mut check = |font: &Font, text: &str, used: &mut BTreeSet<usize>| {
                let key = (Rc::clone(&font.families), font.weight, font.italic);
                let chars = seen.entry(key).or_default();
                for c in text.chars().filter(|c| !c.is_whitespace()) {
                    if chars.insert(c)
                        && let Some(face) = matching_face(&faces, font, c)
                    {
                        used.insert(face);
                    }
                }
            };
            for (node, style) in page.document.nodes.iter().zip(&page.styles) {
                if style.hidden {
                    continue;
                }
                if node.has_text() {
                    check(&style.font, &node.text, &mut used);
                }
                if let Some((text, font)) = &style.generated {
                    check(font, text, &mut used);
                }
            }
        }
        let used: Vec<FaceRef> = used.into_iter().map(|i| faces[i].clone()).collect();
        for face in &used {
            let downloaded = self.face(face);
            if let Some(rel) = downloaded {
                assets.fonts.insert(display(&rel));
            }
        }
        self.font_counts(page, &used);
    }

    /// The checks of one `@font-face` a page uses, wherever it is written: its `font-display`
    /// (once) and the file a browser downloads for it. Returns that file.
    fn face(&mut self, face: &FaceRef) -> Option<std::path::PathBuf> {
        let first_time = self
            .checked_faces
            .insert((face.source, face.face.span.start));
        let family = face.face.family.clone().unwrap_or_default();
        // The source a browser downloads: the first whose format it reads; when that file is
        // missing, the browser tries the next.
        let mut downloaded = None;
        for source in face.face.chosen_sources() {
            let source = source.clone();
            match resolve(&face.dir, &source.url) {
                None => break,
                Some(Target::Local(rel)) if self.info(&rel).is_none() => {
                    if first_time {
                        let _ = self.referenced(face.source, &face.dir, &source.url, &source.span);
                    }
                    continue;
                }
                Some(_) => {
                    downloaded = if first_time {
                        self.font(
                            face.source,
                            &face.dir,
                            &source.url,
                            &source.span,
                            source.format.as_deref(),
                        )
                    } else {
                        match resolve(&face.dir, &source.url) {
                            Some(Target::Local(rel)) => Some(rel),
                            _ => None,
                        }
                    };
                    break;
                }
            }
        }
        if !first_time {
            return downloaded;
        }
        let display_value = face.face.display.clone();
        let shown = |value: &str| PASSING_FONT_DISPLAY.contains(&value);
        let asset = downloaded.clone();
        match display_value {
            Some((value, _)) if shown(&value) => {}
            Some((value, span)) if value != "auto" => {
                let what = if value == "fallback" {
                    "hides text for up to 100 ms, and keeps the fallback font if the face arrives after 3 s"
                } else {
                    "hides text for up to 3 s while the font loads"
                };
                self.push_about(
                    Rule::FontDisplay,
                    asset.as_deref(),
                    format!("`font-display: {value}` for `{family}` {what}"),
                    "use `font-display: swap` (text shows at once in a fallback font) or `optional` (the font is used only if it is already there)".to_owned(),
                    vec![label(face.source, &span, "text waits for the font")],
                );
            }
            display_value => {
                let span = display_value.map_or_else(|| face.face.span.clone(), |(_, span)| span);
                self.push_about(
                    Rule::FontDisplay,
                    asset.as_deref(),
                    format!(
                        "`@font-face` for `{family}` has no `font-display`: text is invisible for up to 3 s while the font loads"
                    ),
                    "add `font-display: swap` (text shows at once in a fallback font) or `optional` (the font is used only if it is already there)".to_owned(),
                    vec![label(face.source, &span, "no `font-display`")],
                );
            }
        }
        downloaded
    }

    /// A font file a browser downloads: missing, unreadable, format and size. Returns it when
    /// it is a readable font of the folder.
    fn font(
        &mut self,
        source: SourceId,
        dir: &Path,
        url: &str,
        span: &Range<usize>,
        format_hint: Option<&str>,
    ) -> Option<std::path::PathBuf> {
        let (rel, info) = self.referenced(source, dir, url, span)?;
        let name = display(&rel);
        if let Some(problem) = &info.problem {
            self.push_about(
                Rule::UnreadableAsset,
                Some(&rel),
                format!("`{name}` is a damaged {}: {problem}", info.kind),
                "rebuild or re-export the font; a browser falls back to the next font".to_owned(),
                vec![label(source, span, "cannot be read")],
            );
            return None;
        }
        if !info.kind.is_font() {
            self.push_about(
                Rule::UnreadableAsset,
                Some(&rel),
                format!("`{name}` is {} by its bytes, not a font", info.kind),
                "point at a WOFF2 file".to_owned(),
                vec![label(source, span, "not a font")],
            );
            return None;
        }
        self.fonts.insert(rel.clone());
        if info.kind != MediaType::Woff2 {
            let hint = match format_hint {
                Some(hint) if hint != "woff2" => format!(", as its `format(\"{hint}\")` says"),
                Some(_) => " (its `format(\"woff2\")` hint is wrong)".to_owned(),
                None => String::new(),
            };
            self.push_about(
                Rule::FontFormat,
                Some(&rel),
                format!("`{name}` is {}{hint}, not WOFF2", info.kind),
                "convert it to WOFF2 (`woff2_compress`, or fonttools with `flavor=\"woff2\"`) and list it first: it is the smallest font format and every current browser reads it".to_owned(),
                vec![label(source, span, info.kind.name())],
            );
        }
        if info.len > self.spec.max_font.value {
            self.push_about(
                Rule::FontSize,
                Some(&rel),
                format!(
                    "`{name}` is {}, over the {} ceiling",
                    size(info.len),
                    size(self.spec.max_font.value)
                ),
                "subset it to the characters the site uses (`pyftsubset --unicodes=...`), or drop axes and weights it does not need".to_owned(),
                vec![label(source, span, format!("{} font", size(info.len)))],
            );
        }
        Some(rel)
    }

    /// Font files and weights per family, as one document uses them.
    fn font_counts(&mut self, page: &Page<'_>, used: &[FaceRef]) {
        let name = display(page.rel);
        let downloadable: Vec<&FaceRef> = used
            .iter()
            .filter(|face| !face.face.sources.is_empty())
            .collect();
        let max = self.spec.max_font_files.value as usize;
        if let Some(excess) = downloadable.get(max) {
            self.push(
                Rule::TooManyFontFiles,
                format!(
                    "`{name}` uses {} font files, more than {max}",
                    downloadable.len()
                ),
                "every face is a request that can delay text: use fewer families and weights, or one variable font".to_owned(),
                vec![label(
                    excess.source,
                    &excess.face.span,
                    format!("font file {} of {}", max + 1, downloadable.len()),
                )],
            );
        }
        let max = self.spec.max_font_weights.value as usize;
        let mut weights: Vec<(String, Vec<String>)> = Vec::new();
        for face in &downloadable {
            let family = face.face.family.clone().unwrap_or_default();
            let weight = face.face.weight.clone().unwrap_or_else(|| "400".to_owned());
            let index = match weights
                .iter()
                .position(|(f, _)| f.eq_ignore_ascii_case(&family))
            {
                Some(index) => index,
                None => {
                    weights.push((family.clone(), Vec::new()));
                    weights.len() - 1
                }
            };
            let Some((_, seen)) = weights.get_mut(index) else {
                continue;
            };
            if seen.contains(&weight) {
                continue;
            }
            seen.push(weight.clone());
            if seen.len() == max + 1 {
                let count = downloadable
                    .iter()
                    .filter(|f| {
                        f.face
                            .family
                            .as_deref()
                            .unwrap_or_default()
                            .eq_ignore_ascii_case(&family)
                    })
                    .filter_map(|f| f.face.weight.clone().or_else(|| Some("400".to_owned())))
                    .collect::<BTreeSet<_>>()
                    .len();
                self.push(
                    Rule::TooManyFontWeights,
                    format!("`{name}` uses {count} weights of `{family}`, more than {max}"),
                    "each weight is another file: keep regular and bold, let the browser synthesise the rest, or use one variable font (`font-weight: 100 900`)".to_owned(),
                    vec![label(
                        face.source,
                        &face.face.span,
                        format!("weight {weight}, one too many"),
                    )],
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assets::style;

    fn faces(css: &str) -> Vec<FaceRef> {
        style::parse(css, 0)
            .faces
            .into_iter()
            .map(|face| FaceRef {
                source: velocity_policy_lang::Sources::new().add("x.css", ""),
                dir: std::path::PathBuf::new(),
                face,
            })
            .collect()
    }

    fn font(families: &[&str], weight: u32, italic: bool) -> Font {
        Font {
            families: Rc::from(families.iter().map(|f| (*f).to_owned()).collect::<Vec<_>>()),
            weight,
            italic,
            size: 16.0,
        }
    }

    #[test]
    fn font_matching_picks_style_weight_and_range() {
        let faces = faces(
            "@font-face { font-family: T; font-weight: 400; src: url(a.woff2); unicode-range: U+0-FF }
             @font-face { font-family: T; font-weight: 400; src: url(c.woff2); unicode-range: U+400-45F }
             @font-face { font-family: T; font-weight: 600; src: url(b.woff2) }
             @font-face { font-family: T; font-weight: 300; src: url(l.woff2) }
             @font-face { font-family: T; font-style: italic; src: url(i.woff2) }",
        );
        let t = |weight, italic, c| {
            matching_face(&faces, &font(&["T", "<sans-serif>"], weight, italic), c)
        };
        assert_eq!(t(400, false, 'a'), Some(0));
        assert_eq!(t(400, false, 'Ж'), Some(1));
        // Bold (700) takes the nearest heavier face, 600.
        assert_eq!(t(700, false, 'a'), Some(2));
        // 500 looks up to 500 first, then down: 400.
        assert_eq!(t(500, false, 'a'), Some(0));
        assert_eq!(t(200, false, 'a'), Some(3));
        assert_eq!(t(400, true, 'a'), Some(4));
        // A character no face covers falls through to the system font.
        assert_eq!(t(400, false, '∀'), None);
        assert_eq!(
            matching_face(&faces, &font(&["Other", "<serif>"], 400, false), 'a'),
            None
        );
        assert_eq!(
            matching_face(&faces, &font(&["Other", "T"], 400, false), 'a'),
            Some(0)
        );
    }
}
