//! The cascade, for the few properties the audit reads: for each element of a document, which
//! declaration wins among the browser's defaults, the page's style sheets and its `style`
//! attribute (importance, then origin, then specificity, then order), with the font properties
//! inherited as CSS inherits them.

use std::collections::HashMap;
use std::rc::Rc;

use cssparser::{Parser, ParserInput, Token};
use selectors::context::SelectorCaches;

use super::select::{self, Bucket};
use super::{Declaration, Device, Sheet, families};
use crate::assets::html::Document;

/// The browser's own style sheet, as far as the audit needs it: what is not rendered, which
/// elements are blocks, and the fonts of headings, emphasis and code.
pub(crate) const USER_AGENT_CSS: &str = "
head, script, style, template, title, meta, link, base, noscript, datalist, param, rp, area, map,
[hidden], dialog:not([open]), input[type=hidden] { display: none }
html, body, address, article, aside, blockquote, details, dialog, div, dl, dd, dt, fieldset,
figcaption, figure, footer, form, h1, h2, h3, h4, h5, h6, header, hgroup, hr, main, menu, nav,
ol, p, pre, section, summary, ul, center, legend, optgroup, picture > source { display: block }
li { display: list-item }
table { display: table } tr { display: table-row } td, th { display: table-cell }
thead { display: table-header-group } tbody { display: table-row-group }
h1 { font-size: 2em; font-weight: bold } h2 { font-size: 1.5em; font-weight: bold }
h3 { font-size: 1.17em; font-weight: bold } h4 { font-weight: bold }
h5 { font-size: .83em; font-weight: bold } h6 { font-size: .67em; font-weight: bold }
b, strong, th { font-weight: bold }
i, em, cite, var, dfn, address { font-style: italic }
code, kbd, samp, pre, tt, listing, xmp, plaintext { font-family: monospace }
small { font-size: smaller } big { font-size: larger }
body { margin: 8px } ul, ol { padding-left: 40px } blockquote, figure { margin: 1em 40px }
";

/// The font an element's text is set in.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Font {
    /// `font-family`, in order.
    pub(crate) families: Rc<[String]>,
    /// `font-weight`, 1 to 1000.
    pub(crate) weight: u32,
    /// `font-style` is italic or oblique.
    pub(crate) italic: bool,
    /// `font-size`, CSS pixels.
    pub(crate) size: f64,
}

impl Default for Font {
    fn default() -> Self {
        Font {
            families: Rc::from(vec!["<serif>".to_owned()]),
            weight: 400,
            italic: false,
            size: 16.0,
        }
    }
}

/// A declaration that won, and the style sheet it is written in (an index into the sheets given
/// to [`compute`], or [`INLINE`] for the element's `style` attribute).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Won {
    pub(crate) declaration: Declaration,
    pub(crate) origin: usize,
}

/// The origin of a declaration written in the element's `style` attribute.
pub(crate) const INLINE: usize = usize::MAX;
/// The origin of the browser's own style sheet.
pub(crate) const USER_AGENT: usize = usize::MAX - 1;

/// What the audit knows of an element's style.
#[derive(Debug, Clone, Default)]
pub(crate) struct Computed {
    /// `display: none` on it or an ancestor: not rendered, nothing of it is downloaded.
    pub(crate) hidden: bool,
    /// `display`, lowercased; empty for `inline`, the initial value.
    pub(crate) display: String,
    /// `position`, lowercased; empty for `static`.
    pub(crate) position: String,
    /// `float` is `left` or `right`.
    pub(crate) floats: bool,
    pub(crate) width: Option<Won>,
    pub(crate) height: Option<Won>,
    pub(crate) max_width: Option<Won>,
    pub(crate) min_height: Option<Won>,
    pub(crate) flex_basis: Option<Won>,
    /// `flex-wrap: wrap`.
    pub(crate) flex_wrap: bool,
    /// `flex-direction: column`.
    pub(crate) flex_column: bool,
    /// The columns of `grid-template-columns`, when it says how many (`1fr 1fr`, `repeat(3, 1fr)`).
    pub(crate) grid_columns: usize,
    pub(crate) aspect_ratio: Option<Won>,
    /// `object-fit`, lowercased; empty for `fill`.
    pub(crate) object_fit: String,
    /// The `background-image` (or `background`) that won, with its URLs.
    pub(crate) background: Option<Won>,
    pub(crate) font: Font,
    /// `margin-left`, `margin-right`, `padding-left`, `padding-right`, as written.
    pub(crate) inline_space: [Option<String>; 4],
    /// The text of its `::before` and `::after` (`content` strings), and their font.
    pub(crate) generated: Option<(String, Font)>,
}

impl Computed {
    /// Whether it is laid out as a block (not inline content of a line).
    pub(crate) fn is_block(&self) -> bool {
        !self.display.is_empty()
            && !self.display.starts_with("inline")
            && self.display != "contents"
    }
}

/// A style sheet of the document, in cascade order, with the origin its declarations report.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SheetInput<'a> {
    pub(crate) sheet: &'a Sheet,
    pub(crate) origin: usize,
}

#[derive(Debug, Clone, Copy)]
struct RuleRef {
    sheet: usize,
    rule: usize,
    selector: usize,
    order: usize,
}

/// Style rules indexed by the bucket of their selectors.
struct Index<'a> {
    sheets: Vec<SheetInput<'a>>,
    buckets: HashMap<&'a Bucket, Vec<RuleRef>>,
}

impl<'a> Index<'a> {
    fn new(sheets: Vec<SheetInput<'a>>) -> Self {
        let mut buckets: HashMap<&'a Bucket, Vec<RuleRef>> = HashMap::new();
        let mut order = 0;
        for (sheet_index, input) in sheets.iter().enumerate() {
            for (rule_index, rule) in input.sheet.rules.iter().enumerate() {
                for (selector_index, bucket) in rule.buckets.iter().enumerate() {
                    buckets.entry(bucket).or_default().push(RuleRef {
                        sheet: sheet_index,
                        rule: rule_index,
                        selector: selector_index,
                        order,
                    });
                }
                order += 1;
            }
        }
        Index { sheets, buckets }
    }
}

/// A matched declaration, with what orders it in the cascade.
struct Matched<'a> {
    important: bool,
    author: bool,
    specificity: u32,
    order: usize,
    origin: usize,
    pseudo: bool,
    declaration: &'a Declaration,
}

/// The computed style of every element of `document`, in the same order as its nodes. `ua` is
/// the parsed [`USER_AGENT_CSS`]; `sheets` the document's style sheets in document order.
pub(crate) fn compute(
    document: &Document,
    ua: &Sheet,
    sheets: &[SheetInput<'_>],
    html: &str,
) -> Vec<Computed> {
    let mut all = vec![SheetInput {
        sheet: ua,
        origin: USER_AGENT,
    }];
    all.extend_from_slice(sheets);
    let index = Index::new(all);
    let any = Bucket::Any;
    let mut caches = SelectorCaches::default();
    let mut computed: Vec<Computed> = Vec::with_capacity(document.nodes.len());
    let mut candidates: Vec<RuleRef> = Vec::new();
    for (node_index, node) in document.nodes.iter().enumerate() {
        let parent = node.parent.and_then(|p| computed.get(p));
        candidates.clear();
        let mut add = |bucket: &Bucket| {
            if let Some(rules) = index.buckets.get(bucket) {
                candidates.extend_from_slice(rules);
            }
        };
        if let Some(id) = node.element.value("id") {
            add(&Bucket::Id(id.to_owned()));
        }
        for class in &node.classes {
            add(&Bucket::Class(class.clone()));
        }
        add(&Bucket::Tag(node.name.clone()));
        add(&any);
        let mut matched: Vec<Matched<'_>> = Vec::new();
        for candidate in &candidates {
            let input = index.sheets[candidate.sheet];
            let rule = &input.sheet.rules[candidate.rule];
            let Some(selector) = rule.selectors.slice().get(candidate.selector) else {
                continue;
            };
            if !select::matches(selector, document, node_index, &mut caches) {
                continue;
            }
            let pseudo = selector.pseudo_element().is_some();
            for declaration in &rule.declarations {
                matched.push(Matched {
                    important: declaration.important,
                    author: input.origin != USER_AGENT,
                    specificity: selector.specificity(),
                    order: candidate.order,
                    origin: input.origin,
                    pseudo,
                    declaration,
                });
            }
        }
        let inline = node
            .element
            .attr("style")
            .and_then(|attr| {
                let span = attr.value_span.clone()?;
                let text = html.get(span.clone())?;
                Some(super::parse_inline(text, span.start))
            })
            .unwrap_or_default();
        for declaration in &inline {
            matched.push(Matched {
                important: declaration.important,
                author: true,
                specificity: u32::MAX,
                order: usize::MAX,
                origin: INLINE,
                pseudo: false,
                declaration,
            });
        }
        matched.sort_by_key(|m| (m.important, m.author, m.specificity, m.order));

        let mut style = Computed {
            hidden: parent.is_some_and(|p| p.hidden),
            font: parent.map(|p| p.font.clone()).unwrap_or_default(),
            ..Computed::default()
        };
        let parent_font = style.font.clone();
        let mut generated_font = None;
        let mut content = String::new();
        for m in matched.iter().filter(|m| !m.pseudo) {
            apply(&mut style, m, &parent_font);
        }
        for m in matched.iter().filter(|m| m.pseudo) {
            let font = generated_font.get_or_insert_with(|| style.font.clone());
            match m.declaration.name.as_str() {
                "content" => content = m.declaration.strings.concat(),
                _ => apply_font(font, m.declaration, &style.font.clone()),
            }
        }
        if !content.is_empty() {
            style.generated = Some((
                content,
                generated_font.unwrap_or_else(|| style.font.clone()),
            ));
        }
        if style.display == "none" {
            style.hidden = true;
        }
        computed.push(style);
    }
    computed
}

/// The basis of a `flex` shorthand (`1 0 100%`): its length part.
fn flex_basis(m: &Matched<'_>) -> Option<Won> {
    let mut won = won(m)?;
    let part = won
        .declaration
        .value
        .split_ascii_whitespace()
        .find(|part| {
            part.parse::<f64>().is_err()
                && !matches!(Length::parse(part), Length::Other | Length::Auto)
        })?
        .to_owned();
    won.declaration.value = part;
    Some(won)
}

/// How many columns a `grid-template-columns` value makes; 1 when it depends on the width.
fn grid_columns(value: &str) -> usize {
    if let Some(inner) = value.strip_prefix("repeat(") {
        return inner
            .split(',')
            .next()
            .and_then(|count| count.trim().parse().ok())
            .unwrap_or(1);
    }
    let mut depth = 0usize;
    let mut count = 0;
    let mut in_track = false;
    for c in value.chars() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth = depth.saturating_sub(1),
            c if c.is_whitespace() && depth == 0 => in_track = false,
            _ if depth == 0 && !in_track => {
                in_track = true;
                count += 1;
            }
            _ => {}
        }
    }
    count.max(1)
}

fn won(m: &Matched<'_>) -> Option<Won> {
    let keyword = m.declaration.keyword();
    // `initial`, `unset`, `revert`: back to the initial value, which for these is `auto`/none.
    if matches!(
        keyword.as_str(),
        "initial" | "unset" | "revert" | "revert-layer"
    ) {
        return None;
    }
    Some(Won {
        declaration: m.declaration.clone(),
        origin: m.origin,
    })
}

fn apply(style: &mut Computed, m: &Matched<'_>, parent: &Font) {
    let declaration = m.declaration;
    let keyword = || declaration.keyword();
    match declaration.name.as_str() {
        "display" => style.display = keyword(),
        "position" => style.position = keyword(),
        "float" => {
            style.floats = matches!(
                keyword().as_str(),
                "left" | "right" | "inline-start" | "inline-end"
            )
        }
        "width" => style.width = won(m),
        "height" => style.height = won(m),
        "max-width" => style.max_width = won(m),
        "min-height" => style.min_height = won(m),
        "flex-basis" => style.flex_basis = won(m),
        "flex" => style.flex_basis = flex_basis(m),
        "flex-wrap" => style.flex_wrap = keyword().starts_with("wrap"),
        "flex-direction" => style.flex_column = keyword().starts_with("column"),
        "flex-flow" => {
            let value = keyword();
            style.flex_wrap = value
                .split_ascii_whitespace()
                .any(|v| v.starts_with("wrap"));
            style.flex_column = value
                .split_ascii_whitespace()
                .any(|v| v.starts_with("column"));
        }
        "grid-template-columns" => style.grid_columns = grid_columns(&keyword()),
        "margin" | "padding" | "margin-inline" | "padding-inline" => {
            let parts: Vec<&str> = declaration.value.split_ascii_whitespace().collect();
            let (left, right) = if declaration.name.ends_with("inline") {
                (parts.first(), parts.get(1).or(parts.first()))
            } else {
                // top right bottom left: right is the second (or the first), left the fourth
                // (or the right).
                let right = parts.get(1).or(parts.first());
                (parts.get(3).or(right), right)
            };
            let at = if declaration.name.starts_with("margin") {
                0
            } else {
                2
            };
            style.inline_space[at] = left.map(|v| (*v).to_owned());
            style.inline_space[at + 1] = right.map(|v| (*v).to_owned());
        }
        "margin-left" | "margin-inline-start" => {
            style.inline_space[0] = Some(declaration.value.clone())
        }
        "margin-right" | "margin-inline-end" => {
            style.inline_space[1] = Some(declaration.value.clone())
        }
        "padding-left" | "padding-inline-start" => {
            style.inline_space[2] = Some(declaration.value.clone())
        }
        "padding-right" | "padding-inline-end" => {
            style.inline_space[3] = Some(declaration.value.clone())
        }
        "aspect-ratio" => style.aspect_ratio = won(m),
        "object-fit" => style.object_fit = keyword(),
        "background-image" => style.background = won(m),
        "background" => {
            // The shorthand resets the image: to none, unless it names one.
            style.background = won(m).filter(|w| !w.declaration.urls.is_empty());
        }
        _ => apply_font(&mut style.font, declaration, parent),
    }
}

/// The font properties of `declaration`, relative to the `parent`'s font.
fn apply_font(font: &mut Font, declaration: &Declaration, parent: &Font) {
    match declaration.name.as_str() {
        "font-family" => {
            let list = families(&declaration.value);
            if !list.is_empty() && !is_global(&declaration.keyword()) {
                font.families = Rc::from(list);
            }
        }
        "font-weight" => {
            if let Some(weight) = weight(&declaration.keyword(), parent.weight) {
                font.weight = weight;
            }
        }
        "font-style" => {
            let style = declaration.keyword();
            if !is_global(&style) {
                font.italic = style.starts_with("italic") || style.starts_with("oblique");
            }
        }
        "font-size" => {
            if let Some(size) = font_size(&declaration.keyword(), parent.size) {
                font.size = size;
            }
        }
        "font" => shorthand(font, &declaration.value, parent),
        _ => {}
    }
}

fn is_global(keyword: &str) -> bool {
    matches!(
        keyword,
        "inherit" | "initial" | "unset" | "revert" | "revert-layer"
    )
}

fn weight(keyword: &str, parent: u32) -> Option<u32> {
    Some(match keyword {
        "normal" => 400,
        "bold" => 700,
        "bolder" if parent < 350 => 400,
        "bolder" if parent < 550 => 700,
        "bolder" => 900,
        "lighter" if parent < 550 => 100,
        "lighter" if parent < 750 => 400,
        "lighter" => 700,
        number => number
            .parse::<f64>()
            .ok()
            .filter(|n| (1.0..=1000.0).contains(n))? as u32,
    })
}

fn font_size(keyword: &str, parent: f64) -> Option<f64> {
    Some(match keyword {
        "xx-small" => 9.0,
        "x-small" => 10.0,
        "small" => 13.0,
        "medium" => 16.0,
        "large" => 18.0,
        "x-large" => 24.0,
        "xx-large" => 32.0,
        "xxx-large" => 48.0,
        "smaller" => parent / 1.2,
        "larger" => parent * 1.2,
        other => match Length::parse(other) {
            Length::Px(px) => px,
            Length::Em(em) => em * parent,
            Length::Rem(rem) => rem * 16.0,
            Length::Percent(p) => p / 100.0 * parent,
            _ => return None,
        },
    })
}

/// `font: italic bold 1rem/1.5 "Harbor UI", sans-serif`.
fn shorthand(font: &mut Font, value: &str, parent: &Font) {
    let mut input = ParserInput::new(value);
    let mut parser = Parser::new(&mut input);
    let mut italic = false;
    let mut bold = 400;
    let mut size = None;
    let mut families_at = None;
    loop {
        let before = parser.position().byte_index();
        let Ok(token) = parser.next() else {
            break;
        };
        match token.clone() {
            Token::Ident(word) if size.is_none() => {
                let word = word.to_ascii_lowercase();
                match word.as_str() {
                    "italic" | "oblique" => italic = true,
                    "bold" | "bolder" | "lighter" => {
                        bold = weight(&word, parent.weight).unwrap_or(400)
                    }
                    "normal" | "small-caps" => {}
                    keyword => {
                        if let Some(px) = font_size(keyword, parent.size) {
                            size = Some(px);
                        } else {
                            // A system font (`font: menu`): nothing we can read.
                            return;
                        }
                    }
                }
            }
            Token::Number { value, .. } if size.is_none() => bold = value as u32,
            Token::Dimension { .. } | Token::Percentage { .. } if size.is_none() => {
                let text = value
                    .get(before..parser.position().byte_index())
                    .unwrap_or_default();
                size = font_size(&text.to_ascii_lowercase(), parent.size);
            }
            Token::Delim('/') => {
                let _ = parser.next();
            }
            _ if size.is_some() => {
                families_at = Some(before);
                break;
            }
            _ => {}
        }
    }
    let (Some(size), Some(at)) = (size, families_at) else {
        return;
    };
    let list = families(value.get(at..).unwrap_or_default());
    if list.is_empty() {
        return;
    }
    font.families = Rc::from(list);
    font.weight = bold;
    font.italic = italic;
    font.size = size;
}

/// A CSS length, as far as the audit reads one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Length {
    Px(f64),
    Em(f64),
    Rem(f64),
    Percent(f64),
    Vw(f64),
    Vh(f64),
    /// `auto`, `initial` and the like.
    Auto,
    /// Set, but not to a length we evaluate (`calc()`, `fit-content`).
    Other,
}

impl Length {
    /// Parses a value such as `2rem`, `96px`, `100%`, `70vh`, `0`, `auto`.
    pub(crate) fn parse(value: &str) -> Length {
        let value = value.trim().to_ascii_lowercase();
        if matches!(
            value.as_str(),
            "auto" | "initial" | "unset" | "inherit" | "revert" | "none"
        ) {
            return Length::Auto;
        }
        let split = value
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
            .unwrap_or(value.len());
        let (number, unit) = value.split_at(split);
        let Ok(number) = number.parse::<f64>() else {
            return Length::Other;
        };
        match unit {
            "px" => Length::Px(number),
            "" if number == 0.0 => Length::Px(0.0),
            "em" => Length::Em(number),
            "rem" => Length::Rem(number),
            "%" => Length::Percent(number),
            "vw" | "svw" | "lvw" | "dvw" => Length::Vw(number),
            "vh" | "svh" | "lvh" | "dvh" => Length::Vh(number),
            "pt" => Length::Px(number * 96.0 / 72.0),
            "cm" => Length::Px(number * 96.0 / 2.54),
            "mm" => Length::Px(number * 96.0 / 25.4),
            "in" => Length::Px(number * 96.0),
            _ => Length::Other,
        }
    }

    /// In CSS pixels, given the font size, the containing block's width (for `%`) and the
    /// device; `None` for `auto` and what we do not evaluate.
    pub(crate) fn px(self, font_size: f64, container: f64, device: &Device) -> Option<f64> {
        match self {
            Length::Px(px) => Some(px),
            Length::Em(em) => Some(em * font_size),
            Length::Rem(rem) => Some(rem * 16.0),
            Length::Percent(p) => Some(p / 100.0 * container),
            Length::Vw(v) => Some(v / 100.0 * device.width),
            Length::Vh(v) => Some(v / 100.0 * device.height),
            Length::Auto | Length::Other => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assets::html;
    use crate::assets::style::parse;

    fn styles(page: &str, css: &str) -> (Document, Vec<Computed>) {
        let document = html::scan(page).unwrap();
        let ua = parse(USER_AGENT_CSS, 0);
        let sheet = parse(css, 0);
        let computed = compute(
            &document,
            &ua,
            &[SheetInput {
                sheet: &sheet,
                origin: 0,
            }],
            page,
        );
        (document, computed)
    }

    fn of<'a>(document: &Document, computed: &'a [Computed], name: &str) -> &'a Computed {
        let index = document.nodes.iter().position(|n| n.name == name).unwrap();
        &computed[index]
    }

    #[test]
    fn the_winning_declaration_by_specificity_order_and_importance() {
        let (document, computed) = styles(
            r#"<div class="card"><img class="img-profile" id="me" style="height: 3rem"></div>"#,
            ".img-profile { width: 2rem; height: 2rem } img { width: 10px !important } \
             .card img { height: 5px } #me { width: 7px }",
        );
        let img = of(&document, &computed, "img");
        assert_eq!(img.width.as_ref().unwrap().declaration.value, "10px");
        assert_eq!(img.height.as_ref().unwrap().declaration.value, "3rem");
        assert_eq!(img.height.as_ref().unwrap().origin, INLINE);
    }

    #[test]
    fn hidden_is_inherited_and_fonts_cascade() {
        let (document, computed) = styles(
            r#"<html><body><main><h1>Title</h1><p class="d-none"><strong>x</strong></p><em>e</em></main><i class="ki ki-user"></i></body></html>"#,
            r#"body { font: 16px/1.5 "Harbor UI", sans-serif } .d-none { display: none }
               .ki { font-family: "Icons"; font-weight: 900 } .ki-user:before { content: "\263A" }"#,
        );
        let h1 = of(&document, &computed, "h1");
        assert_eq!(h1.font.weight, 700);
        assert_eq!(h1.font.size, 32.0);
        assert_eq!(&*h1.font.families, ["Harbor UI", "<sans-serif>"]);
        assert!(of(&document, &computed, "strong").hidden);
        assert!(of(&document, &computed, "em").font.italic);
        let icon = of(&document, &computed, "i");
        let (text, font) = icon.generated.as_ref().unwrap();
        assert_eq!(text, "\u{263a}");
        assert_eq!(&*font.families, ["Icons"]);
        assert_eq!(font.weight, 900);
    }

    #[test]
    fn lengths() {
        let device = Device::MOBILE;
        assert_eq!(Length::parse("2rem").px(16.0, 0.0, &device), Some(32.0));
        assert_eq!(Length::parse("50%").px(16.0, 400.0, &device), Some(200.0));
        assert_eq!(
            Length::parse("70vh").px(16.0, 0.0, &device),
            Some(0.7 * 823.0)
        );
        assert_eq!(Length::parse("auto"), Length::Auto);
        assert_eq!(Length::parse("calc(100% - 2rem)"), Length::Other);
    }
}
