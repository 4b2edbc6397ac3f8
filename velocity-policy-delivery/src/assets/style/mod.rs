//! Style sheets, read with `cssparser` (the CSS tokenizer and rule parser of Servo and Firefox)
//! and `selectors`: the style rules that apply on the reference device, the `@font-face` rules,
//! `@import`s, and every `url()` with its span, so a finding can point at it.
//!
//! `@media` conditions are evaluated for the device Lighthouse emulates by default (a phone,
//! 412 × 823 CSS pixels at 1.75 device pixels per CSS pixel, [`Device::MOBILE`]): rules for
//! other widths and for print are dropped, as that browser would. `@supports` and `@layer`
//! blocks are read as if they applied; `@container` blocks are not (their condition depends on
//! layout). Invalid rules and declarations are skipped, as browsers skip them.

use std::ops::Range;

use cssparser::{
    AtRuleParser, CowRcStr, DeclarationParser, ParseError, Parser, ParserInput, ParserState,
    QualifiedRuleParser, RuleBodyItemParser, RuleBodyParser, StyleSheetParser, Token, UnicodeRange,
};
use selectors::SelectorList;
use selectors::parser::ParseRelative;

pub(crate) mod cascade;
pub(crate) mod select;

use select::{Bucket, SelectorParser, Simple};

/// The screen a page is laid out for: Lighthouse's default mobile emulation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Device {
    /// Viewport width, CSS pixels.
    pub(crate) width: f64,
    /// Viewport height, CSS pixels.
    pub(crate) height: f64,
    /// Device pixels per CSS pixel.
    pub(crate) density: f64,
}

impl Device {
    /// Lighthouse's default: a Moto G Power, 412 × 823 at 1.75.
    pub(crate) const MOBILE: Device = Device {
        width: 412.0,
        height: 823.0,
        density: 1.75,
    };
}

/// A `url(...)` and where its URL is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UrlRef {
    /// The URL, unquoted and unescaped.
    pub(crate) url: String,
    /// The URL as written (inside the parentheses and quotes), offset by the sheet's base.
    pub(crate) span: Range<usize>,
}

/// A declaration of a style rule.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Declaration {
    /// The property, lowercased.
    pub(crate) name: String,
    /// The value as written, without `!important`, blanks trimmed.
    pub(crate) value: String,
    /// `!important`.
    pub(crate) important: bool,
    /// The value as written.
    pub(crate) span: Range<usize>,
    /// The `url()`s in the value, in order.
    pub(crate) urls: Vec<UrlRef>,
    /// The strings in the value, unquoted, in order (`content: "\f007"`).
    pub(crate) strings: Vec<String>,
}

impl Declaration {
    /// The value lowercased, for comparing keywords.
    pub(crate) fn keyword(&self) -> String {
        self.value.trim().to_ascii_lowercase()
    }
}

/// A style rule: its selectors, each with its bucket, and its declarations.
#[derive(Debug, Clone)]
pub(crate) struct StyleRule {
    pub(crate) selectors: SelectorList<Simple>,
    /// The bucket of each selector of [`StyleRule::selectors`], in order.
    pub(crate) buckets: Vec<Bucket>,
    pub(crate) declarations: Vec<Declaration>,
}

/// A `src` entry of an `@font-face`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FontSource {
    /// The URL, unquoted.
    pub(crate) url: String,
    /// The URL as written, inside the parentheses and quotes.
    pub(crate) span: Range<usize>,
    /// The `format(...)` hint, lowercased and unquoted.
    pub(crate) format: Option<String>,
    /// The `tech(...)` hints, lowercased.
    pub(crate) tech: Vec<String>,
}

impl FontSource {
    /// Whether a current browser downloads this source when it gets to it: no `format()` hint,
    /// or one it reads (WOFF2, WOFF, TrueType, OpenType, and their `-variations`); not
    /// `embedded-opentype` (EOT) nor `svg`, nor a `tech()` it lacks (color fonts other than
    /// COLRv0/v1, incremental loading).
    pub(crate) fn supported(&self) -> bool {
        let format_ok = self.format.as_deref().is_none_or(|format| {
            matches!(
                format,
                "woff2"
                    | "woff"
                    | "truetype"
                    | "opentype"
                    | "woff2-variations"
                    | "woff-variations"
                    | "truetype-variations"
                    | "opentype-variations"
                    | "collection"
            )
        });
        let tech_ok = self.tech.iter().all(|tech| {
            matches!(
                tech.as_str(),
                "variations"
                    | "features-opentype"
                    | "features-aat"
                    | "color-colrv0"
                    | "color-colrv1"
            )
        });
        format_ok && tech_ok
    }
}

/// An `@font-face` rule.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FontFace {
    /// The `@font-face` keyword.
    pub(crate) span: Range<usize>,
    /// `font-family`, unquoted (families compare without regard to ASCII case).
    pub(crate) family: Option<String>,
    /// `font-weight`, with `normal` and `bold` as 400 and 700 (`100 900` for a range).
    pub(crate) weight: Option<String>,
    /// `font-style` is `italic` or `oblique`.
    pub(crate) italic: bool,
    /// `font-display`: its keyword, lowercased, and where it is written.
    pub(crate) display: Option<(String, Range<usize>)>,
    /// The `url()` sources of the last `src` descriptor, in order (`local()` ones left out).
    pub(crate) sources: Vec<FontSource>,
    /// `unicode-range`, inclusive ranges; empty for all of Unicode.
    pub(crate) unicode_range: Vec<(u32, u32)>,
}

impl FontFace {
    /// The face's weight range (CSS's default is 400).
    pub(crate) fn weights(&self) -> (u32, u32) {
        let mut numbers = self
            .weight
            .as_deref()
            .unwrap_or("400")
            .split(' ')
            .filter_map(|w| w.parse::<f64>().ok())
            .map(|w| w.clamp(1.0, 1000.0) as u32);
        let low = numbers.next().unwrap_or(400);
        let high = numbers.next().unwrap_or(low);
        (low.min(high), low.max(high))
    }

    /// Whether the face covers character `c`.
    pub(crate) fn covers(&self, c: char) -> bool {
        let c = u32::from(c);
        self.unicode_range.is_empty()
            || self
                .unicode_range
                .iter()
                .any(|&(start, end)| start <= c && c <= end)
    }

    /// The source a browser downloads first: the first one whose format it reads.
    pub(crate) fn chosen_sources(&self) -> impl Iterator<Item = &FontSource> {
        self.sources.iter().filter(|source| source.supported())
    }
}

/// A parsed style sheet.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sheet {
    /// Style rules that apply on the device, in order.
    pub(crate) rules: Vec<StyleRule>,
    /// `@font-face` rules, in order (wherever they are nested).
    pub(crate) faces: Vec<FontFace>,
    /// `@import`s whose media apply.
    pub(crate) imports: Vec<UrlRef>,
}

/// Parses `css`, with spans offset by `base` (where the text starts in its file).
pub(crate) fn parse(css: &str, base: usize) -> Sheet {
    let mut input = ParserInput::new(css);
    let mut parser = Parser::new(&mut input);
    let mut sheet = Sheet::default();
    let mut rules = Rules {
        base,
        css,
        sheet: &mut sheet,
    };
    let items = StyleSheetParser::new(&mut parser, &mut rules);
    // Errors are rules a browser skips too.
    items.for_each(drop);
    sheet
}

/// Parses the declarations of a `style` attribute.
pub(crate) fn parse_inline(css: &str, base: usize) -> Vec<Declaration> {
    let mut input = ParserInput::new(css);
    let mut parser = Parser::new(&mut input);
    let mut declarations = Declarations { base, css };
    RuleBodyParser::new(&mut parser, &mut declarations)
        .filter_map(Result::ok)
        .collect()
}

struct Rules<'a> {
    base: usize,
    css: &'a str,
    sheet: &'a mut Sheet,
}

enum Prelude {
    Block,
    Skip,
    FontFace(Range<usize>),
    Import(Option<UrlRef>),
}

impl<'i> AtRuleParser<'i> for Rules<'_> {
    type Prelude = Prelude;
    type AtRule = ();
    type Error = ();

    fn parse_prelude<'t>(
        &mut self,
        name: CowRcStr<'i>,
        input: &mut Parser<'i, 't>,
    ) -> Result<Prelude, ParseError<'i, ()>> {
        let name = name.to_ascii_lowercase();
        Ok(match name.as_str() {
            "media" => {
                if media_matches(input, &Device::MOBILE) {
                    Prelude::Block
                } else {
                    Prelude::Skip
                }
            }
            "supports" | "layer" | "document" | "-moz-document" | "scope" | "starting-style" => {
                while input.next().is_ok() {}
                Prelude::Block
            }
            "font-face" => {
                // The keyword is just before the prelude: `@font-face` is ten bytes.
                let end = input.position().byte_index();
                let start = end.saturating_sub("@font-face".len());
                let start = self
                    .css
                    .get(..end)
                    .and_then(|text| text.rfind('@'))
                    .unwrap_or(start);
                let keyword_end = start + 1 + "font-face".len();
                while input.next().is_ok() {}
                Prelude::FontFace(self.base + start..self.base + keyword_end)
            }
            "import" => {
                let url = read_url(input, self.css, self.base);
                let media_ok = media_matches(input, &Device::MOBILE);
                Prelude::Import(url.filter(|_| media_ok))
            }
            _ => {
                while input.next().is_ok() {}
                Prelude::Skip
            }
        })
    }

    fn rule_without_block(&mut self, prelude: Prelude, _start: &ParserState) -> Result<(), ()> {
        if let Prelude::Import(Some(url)) = prelude {
            self.sheet.imports.push(url);
        }
        Ok(())
    }

    fn parse_block<'t>(
        &mut self,
        prelude: Prelude,
        _start: &ParserState,
        input: &mut Parser<'i, 't>,
    ) -> Result<(), ParseError<'i, ()>> {
        match prelude {
            Prelude::Block => {
                let mut nested = Rules {
                    base: self.base,
                    css: self.css,
                    sheet: self.sheet,
                };
                RuleBodyParser::new(input, &mut nested).for_each(drop);
            }
            Prelude::FontFace(span) => {
                let mut declarations = Declarations {
                    base: self.base,
                    css: self.css,
                };
                let descriptors: Vec<Declaration> = RuleBodyParser::new(input, &mut declarations)
                    .filter_map(Result::ok)
                    .collect();
                self.sheet
                    .faces
                    .push(font_face(span, &descriptors, self.css, self.base));
            }
            Prelude::Skip | Prelude::Import(_) => while input.next().is_ok() {},
        }
        Ok(())
    }
}

impl<'i> QualifiedRuleParser<'i> for Rules<'_> {
    type Prelude = SelectorList<Simple>;
    type QualifiedRule = ();
    type Error = ();

    fn parse_prelude<'t>(
        &mut self,
        input: &mut Parser<'i, 't>,
    ) -> Result<SelectorList<Simple>, ParseError<'i, ()>> {
        SelectorList::parse(&SelectorParser, input, ParseRelative::No)
            .map_err(|error| error.location.new_custom_error(()))
    }

    fn parse_block<'t>(
        &mut self,
        selectors: SelectorList<Simple>,
        _start: &ParserState,
        input: &mut Parser<'i, 't>,
    ) -> Result<(), ParseError<'i, ()>> {
        let mut declarations = Declarations {
            base: self.base,
            css: self.css,
        };
        let declarations: Vec<Declaration> = RuleBodyParser::new(input, &mut declarations)
            .filter_map(Result::ok)
            .collect();
        let buckets = selectors.slice().iter().map(select::bucket).collect();
        self.sheet.rules.push(StyleRule {
            selectors,
            buckets,
            declarations,
        });
        Ok(())
    }
}

impl<'i> DeclarationParser<'i> for Rules<'_> {
    type Declaration = ();
    type Error = ();
}

impl<'i> RuleBodyItemParser<'i, (), ()> for Rules<'_> {
    fn parse_declarations(&self) -> bool {
        false
    }

    fn parse_qualified(&self) -> bool {
        true
    }
}

/// Reads declarations (of a style rule, an `@font-face`, a `style` attribute).
struct Declarations<'a> {
    base: usize,
    css: &'a str,
}

impl<'i> DeclarationParser<'i> for Declarations<'_> {
    type Declaration = Declaration;
    type Error = ();

    fn parse_value<'t>(
        &mut self,
        name: CowRcStr<'i>,
        input: &mut Parser<'i, 't>,
        _start: &ParserState,
    ) -> Result<Declaration, ParseError<'i, ()>> {
        let start = input.position();
        let mut urls = Vec::new();
        let mut strings = Vec::new();
        let mut important_at = None;
        collect(
            input,
            self.css,
            self.base,
            &mut urls,
            &mut strings,
            &mut important_at,
        );
        let end = important_at.unwrap_or_else(|| input.position().byte_index());
        let raw = self.css.get(start.byte_index()..end).unwrap_or_default();
        let trimmed_start = start.byte_index() + (raw.len() - raw.trim_start().len());
        let trimmed_end = start.byte_index() + raw.trim_end().len();
        Ok(Declaration {
            name: name.to_ascii_lowercase(),
            value: raw.trim().to_owned(),
            important: important_at.is_some(),
            span: self.base + trimmed_start..self.base + trimmed_end.max(trimmed_start),
            urls,
            strings,
        })
    }
}

impl<'i> AtRuleParser<'i> for Declarations<'_> {
    type Prelude = ();
    type AtRule = Declaration;
    type Error = ();
}

impl<'i> QualifiedRuleParser<'i> for Declarations<'_> {
    type Prelude = ();
    type QualifiedRule = Declaration;
    type Error = ();
}

impl<'i> RuleBodyItemParser<'i, Declaration, ()> for Declarations<'_> {
    fn parse_declarations(&self) -> bool {
        true
    }

    fn parse_qualified(&self) -> bool {
        false
    }
}

/// Walks a value's tokens (nested blocks included), collecting `url()`s, strings and where
/// `!important` starts.
fn collect<'i>(
    input: &mut Parser<'i, '_>,
    css: &str,
    base: usize,
    urls: &mut Vec<UrlRef>,
    strings: &mut Vec<String>,
    important_at: &mut Option<usize>,
) {
    loop {
        let before = input.position().byte_index();
        let token = match input.next() {
            Ok(token) => token.clone(),
            Err(_) => return,
        };
        match token {
            Token::UnquotedUrl(url) => {
                let after = input.position().byte_index();
                urls.push(url_ref(css, base, before..after, &url));
            }
            Token::QuotedString(text) => strings.push(text.to_string()),
            Token::Function(name) if name.eq_ignore_ascii_case("url") => {
                let _ = input.parse_nested_block(|inner| -> Result<(), ParseError<'i, ()>> {
                    let url = inner.expect_string()?.clone();
                    let after = inner.position().byte_index();
                    urls.push(url_ref(css, base, before..after, &url));
                    Ok(())
                });
            }
            Token::Function(_)
            | Token::ParenthesisBlock
            | Token::SquareBracketBlock
            | Token::CurlyBracketBlock => {
                let _ = input.parse_nested_block(|inner| -> Result<(), ParseError<'i, ()>> {
                    let mut ignored = None;
                    collect(inner, css, base, urls, strings, &mut ignored);
                    Ok(())
                });
            }
            Token::Delim('!')
                if input
                    .try_parse(|i| i.expect_ident_matching("important"))
                    .is_ok() =>
            {
                *important_at = Some(before);
            }
            _ => {}
        }
    }
}

/// The URL's span inside `url( "..." )`.
fn url_ref(css: &str, base: usize, token: Range<usize>, url: &str) -> UrlRef {
    let text = css.get(token.clone()).unwrap_or_default();
    let span = match text.get(4..).and_then(|inside| inside.find(url)) {
        Some(at) if !url.is_empty() => token.start + 4 + at..token.start + 4 + at + url.len(),
        _ => token,
    };
    UrlRef {
        url: url.to_owned(),
        span: base + span.start..base + span.end,
    }
}

/// `url(x)` or `"x"` at the start of `input` (an `@import` prelude).
fn read_url(input: &mut Parser<'_, '_>, css: &str, base: usize) -> Option<UrlRef> {
    let before = input.position().byte_index();
    let token = input.next().ok()?.clone();
    match token {
        Token::UnquotedUrl(url) | Token::QuotedString(url) => {
            let after = input.position().byte_index();
            Some(url_ref_any(css, base, before..after, &url))
        }
        Token::Function(name) if name.eq_ignore_ascii_case("url") => input
            .parse_nested_block(|inner| -> Result<UrlRef, ParseError<'_, ()>> {
                let url = inner.expect_string()?.clone();
                let after = inner.position().byte_index();
                Ok(url_ref_any(css, base, before..after, &url))
            })
            .ok(),
        _ => None,
    }
}

fn url_ref_any(css: &str, base: usize, token: Range<usize>, url: &str) -> UrlRef {
    let text = css.get(token.clone()).unwrap_or_default();
    let span = match text.find(url) {
        Some(at) if !url.is_empty() => token.start + at..token.start + at + url.len(),
        _ => token,
    };
    UrlRef {
        url: url.to_owned(),
        span: base + span.start..base + span.end,
    }
}

fn unquote(text: &str) -> String {
    let text = text.trim();
    let inner = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .or_else(|| text.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')))
        .unwrap_or(text);
    inner.to_owned()
}

/// The generic family keywords (CSS Fonts 4): unquoted, they name the reader's own fonts.
const GENERIC: &[&str] = &[
    "serif",
    "sans-serif",
    "monospace",
    "cursive",
    "fantasy",
    "system-ui",
    "math",
    "emoji",
    "fangsong",
    "ui-serif",
    "ui-sans-serif",
    "ui-monospace",
    "ui-rounded",
];

/// The families of a `font-family` value, unquoted, in order. A generic keyword written
/// without quotes comes back in angle brackets (`<serif>`), so that it cannot be confused with
/// a family named `"serif"`.
pub(crate) fn families(value: &str) -> Vec<String> {
    let mut input = ParserInput::new(value);
    let mut parser = Parser::new(&mut input);
    parser.parse_comma_separated_ignoring_errors(|item| -> Result<String, ParseError<'_, ()>> {
        let mut words = Vec::new();
        let mut quoted = false;
        while let Ok(token) = item.next() {
            match token {
                Token::QuotedString(text) => {
                    quoted = true;
                    words.push(text.to_string());
                }
                Token::Ident(text) => words.push(text.to_string()),
                _ => return Err(item.new_custom_error(())),
            }
        }
        match words.as_slice() {
            [] => Err(item.new_custom_error(())),
            [word] if !quoted && GENERIC.contains(&word.to_ascii_lowercase().as_str()) => {
                Ok(format!("<{}>", word.to_ascii_lowercase()))
            }
            _ => Ok(words.join(" ")),
        }
    })
}

fn font_face(span: Range<usize>, descriptors: &[Declaration], css: &str, base: usize) -> FontFace {
    let mut face = FontFace {
        span,
        family: None,
        weight: None,
        italic: false,
        display: None,
        sources: Vec::new(),
        unicode_range: Vec::new(),
    };
    for descriptor in descriptors {
        match descriptor.name.as_str() {
            "font-family" => {
                face.family = families(&descriptor.value)
                    .into_iter()
                    .next()
                    .map(|name| {
                        name.trim_start_matches('<')
                            .trim_end_matches('>')
                            .to_owned()
                    })
                    .or_else(|| Some(unquote(&descriptor.value)));
            }
            "font-weight" => {
                let weight = descriptor
                    .keyword()
                    .split_ascii_whitespace()
                    .map(|w| match w {
                        "normal" => "400",
                        "bold" => "700",
                        other => other,
                    })
                    .collect::<Vec<_>>()
                    .join(" ");
                face.weight = Some(weight);
            }
            "font-style" => {
                let style = descriptor.keyword();
                face.italic = style.starts_with("italic") || style.starts_with("oblique");
            }
            "font-display" => {
                face.display = Some((descriptor.keyword(), descriptor.span.clone()));
            }
            // The last `src` wins: icon kits write an EOT-only one first for old browsers.
            "src" => face.sources = font_sources(descriptor, css, base),
            "unicode-range" => {
                let local = descriptor.span.start.saturating_sub(base)
                    ..descriptor.span.end.saturating_sub(base);
                let text = css.get(local).unwrap_or(&descriptor.value);
                face.unicode_range = unicode_ranges(text);
            }
            _ => {}
        }
    }
    face
}

/// The `url()` entries of a `src` descriptor, with their `format()` and `tech()` hints.
fn font_sources(descriptor: &Declaration, css: &str, base: usize) -> Vec<FontSource> {
    let local =
        descriptor.span.start.saturating_sub(base)..descriptor.span.end.saturating_sub(base);
    let Some(text) = css.get(local.clone()) else {
        return Vec::new();
    };
    let mut input = ParserInput::new(text);
    let mut parser = Parser::new(&mut input);
    let offset = base + local.start;
    parser.parse_comma_separated_ignoring_errors(|item| -> Result<FontSource, ParseError<'_, ()>> {
        let mut source: Option<FontSource> = None;
        let mut format = None;
        let mut tech = Vec::new();
        loop {
            let before = item.position().byte_index();
            let Ok(token) = item.next() else {
                break;
            };
            match token.clone() {
                Token::UnquotedUrl(url) => {
                    let after = item.position().byte_index();
                    let found = url_ref(text, offset, before..after, &url);
                    source = Some(FontSource {
                        url: found.url,
                        span: found.span,
                        format: None,
                        tech: Vec::new(),
                    });
                }
                Token::Function(name) => {
                    let name = name.to_ascii_lowercase();
                    let words = item.parse_nested_block(
                        |inner| -> Result<Vec<String>, ParseError<'_, ()>> {
                            let mut words = Vec::new();
                            while let Ok(token) = inner.next() {
                                match token {
                                    Token::QuotedString(text) | Token::Ident(text) => {
                                        words.push(text.to_ascii_lowercase());
                                    }
                                    _ => {}
                                }
                            }
                            Ok(words)
                        },
                    );
                    let words = words.unwrap_or_default();
                    match name.as_str() {
                        "url" => {
                            let after = item.position().byte_index();
                            // The URL keeps its case: read it again from the text.
                            let raw = text.get(before..after).unwrap_or_default();
                            let url = raw
                                .get(4..raw.len().saturating_sub(1))
                                .map(unquote)
                                .unwrap_or_default();
                            let found = url_ref(text, offset, before..after, &url);
                            source = Some(FontSource {
                                url: found.url,
                                span: found.span,
                                format: None,
                                tech: Vec::new(),
                            });
                        }
                        "format" => format = words.into_iter().next(),
                        "tech" => tech = words,
                        // `local(...)`: a font installed on the reader's system.
                        _ => return Err(item.new_custom_error(())),
                    }
                }
                _ => {}
            }
        }
        let mut source = source.ok_or_else(|| item.new_custom_error(()))?;
        source.format = format;
        source.tech = tech;
        Ok(source)
    })
}

/// `U+0000-00FF, U+0131, U+4??` as inclusive ranges.
fn unicode_ranges(text: &str) -> Vec<(u32, u32)> {
    let mut input = ParserInput::new(text);
    let mut parser = Parser::new(&mut input);
    parser.parse_comma_separated_ignoring_errors(|item| -> Result<(u32, u32), ParseError<'_, ()>> {
        let range = UnicodeRange::parse(item).map_err(ParseError::from)?;
        Ok((range.start, range.end))
    })
}

/// Whether the media query list `text` (a `media` or `sizes` condition) applies on `device`.
pub(crate) fn media_applies(text: &str, device: &Device) -> bool {
    let mut input = ParserInput::new(text);
    let mut parser = Parser::new(&mut input);
    media_matches(&mut parser, device)
}

/// Whether a media query list (`screen and (min-width: 768px), print`) applies on `device`.
/// An empty list applies; a query with a feature we do not know does not (as a browser treats
/// one it does not support).
fn media_matches(input: &mut Parser<'_, '_>, device: &Device) -> bool {
    let results =
        input.parse_comma_separated_ignoring_errors(|query| -> Result<bool, ParseError<'_, ()>> {
            Ok(media_query(query, device))
        });
    results.is_empty() || results.into_iter().any(|matched| matched)
}

fn media_query(query: &mut Parser<'_, '_>, device: &Device) -> bool {
    let mut negate = false;
    let mut result = true;
    let mut first = true;
    while let Ok(token) = query.next() {
        match token.clone() {
            Token::Ident(word) => {
                let word = word.to_ascii_lowercase();
                match word.as_str() {
                    "not" if first => negate = true,
                    "only" | "and" => {}
                    "all" | "screen" => {}
                    "print" | "speech" | "tv" | "projection" | "handheld" | "braille"
                    | "embossed" | "aural" | "tty" => result = false,
                    // `or` between conditions: not in the queries pages use; be strict.
                    _ => result = false,
                }
            }
            Token::ParenthesisBlock => {
                let matched = query
                    .parse_nested_block(|inner| -> Result<bool, ParseError<'_, ()>> {
                        Ok(media_feature(inner, device))
                    })
                    .unwrap_or(false);
                result &= matched;
            }
            _ => result = false,
        }
        first = false;
    }
    result != negate
}

/// A length in CSS pixels, from a media feature's value (`768px`, `48em`, `48rem`).
fn media_length(token: &Token<'_>) -> Option<f64> {
    match token {
        Token::Dimension { value, unit, .. } => {
            let value = f64::from(*value);
            match unit.to_ascii_lowercase().as_str() {
                "px" => Some(value),
                "em" | "rem" => Some(value * 16.0),
                _ => None,
            }
        }
        Token::Number { value, .. } if *value == 0.0 => Some(0.0),
        _ => None,
    }
}

fn media_feature(input: &mut Parser<'_, '_>, device: &Device) -> bool {
    let mut tokens = Vec::new();
    while let Ok(token) = input.next() {
        tokens.push(token.clone());
    }
    // `(not (...))`, nested conditions: not worth guessing.
    let name_of = |token: &Token<'_>| match token {
        Token::Ident(name) => Some(name.to_ascii_lowercase()),
        _ => None,
    };
    // `name: value`
    if let [name, Token::Colon, value @ ..] = tokens.as_slice()
        && let Some(name) = name_of(name)
    {
        return feature_value(&name, value, device);
    }
    // `name` alone (a boolean context).
    if let [name] = tokens.as_slice()
        && let Some(name) = name_of(name)
    {
        return matches!(name.as_str(), "color" | "width" | "height" | "orientation");
    }
    // Ranges: `width >= 768px`, `400px <= width <= 700px`.
    range_feature(&tokens, device).unwrap_or(false)
}

fn feature_value(name: &str, value: &[Token<'_>], device: &Device) -> bool {
    let length = value.first().and_then(media_length);
    let ident = value.first().and_then(|token| match token {
        Token::Ident(word) => Some(word.to_ascii_lowercase()),
        _ => None,
    });
    let number = value.first().and_then(|token| match token {
        Token::Number { value, .. } => Some(f64::from(*value)),
        Token::Dimension { value, unit, .. }
            if unit.eq_ignore_ascii_case("dppx") || unit.eq_ignore_ascii_case("x") =>
        {
            Some(f64::from(*value))
        }
        Token::Dimension { value, unit, .. } if unit.eq_ignore_ascii_case("dpi") => {
            Some(f64::from(*value) / 96.0)
        }
        _ => None,
    });
    match (name, length, ident.as_deref(), number) {
        ("min-width", Some(l), ..) => device.width >= l,
        ("max-width", Some(l), ..) => device.width <= l,
        ("width", Some(l), ..) => (device.width - l).abs() < 0.5,
        ("min-height", Some(l), ..) => device.height >= l,
        ("max-height", Some(l), ..) => device.height <= l,
        ("min-device-width", Some(l), ..) => device.width >= l,
        ("max-device-width", Some(l), ..) => device.width <= l,
        ("orientation", _, Some(o), _) => (o == "portrait") == (device.height >= device.width),
        ("prefers-color-scheme", _, Some(scheme), _) => scheme == "light",
        ("prefers-reduced-motion" | "prefers-contrast" | "forced-colors", _, Some(v), _) => {
            v == "no-preference" || v == "none"
        }
        ("hover" | "any-hover", _, Some(v), _) => v == "none",
        ("pointer" | "any-pointer", _, Some(v), _) => v == "coarse",
        ("display-mode", _, Some(v), _) => v == "browser",
        (
            "min-resolution" | "-webkit-min-device-pixel-ratio" | "min--moz-device-pixel-ratio",
            ..,
            Some(n),
        ) => device.density >= n,
        (
            "max-resolution" | "-webkit-max-device-pixel-ratio" | "max--moz-device-pixel-ratio",
            ..,
            Some(n),
        ) => device.density <= n,
        _ => false,
    }
}

fn range_feature(tokens: &[Token<'_>], device: &Device) -> Option<bool> {
    // Split into operands and comparison operators.
    let mut parts: Vec<Result<&Token<'_>, String>> = Vec::new();
    let mut iter = tokens.iter().peekable();
    while let Some(token) = iter.next() {
        match token {
            Token::Delim(c @ ('<' | '>' | '=')) => {
                let mut op = c.to_string();
                if *c != '=' && matches!(iter.peek(), Some(Token::Delim('='))) {
                    iter.next();
                    op.push('=');
                }
                parts.push(Err(op));
            }
            other => parts.push(Ok(other)),
        }
    }
    let value_of = |token: &Token<'_>| -> Option<f64> {
        match token {
            Token::Ident(name) => match name.to_ascii_lowercase().as_str() {
                "width" => Some(device.width),
                "height" => Some(device.height),
                _ => None,
            },
            other => media_length(other),
        }
    };
    let mut result = true;
    let mut index = 0;
    while index + 2 < parts.len() {
        let (Some(Ok(left)), Some(Err(op)), Some(Ok(right))) =
            (parts.get(index), parts.get(index + 1), parts.get(index + 2))
        else {
            break;
        };
        let (left, right) = (value_of(left)?, value_of(right)?);
        result &= match op.as_str() {
            "<" => left < right,
            "<=" => left <= right,
            ">" => left > right,
            ">=" => left >= right,
            "=" => (left - right).abs() < 0.5,
            _ => return None,
        };
        index += 2;
    }
    (index > 0).then_some(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sheet(css: &str) -> Sheet {
        parse(css, 1000)
    }

    #[test]
    fn reads_font_faces_with_spans() {
        let css = r#"/* @font-face { font-family: commented } */
body { content: "@font-face {" }
@media (min-width: 1px) {
  @FONT-FACE {
    font-family: "Inter Var";
    src: local("Inter"), url('/fonts/inter.woff2') format("woff2"),
         url(/fonts/inter.woff) format('woff');
    font-weight: 100 900;
    font-display: SWAP !important; /* a comment */
    unicode-range: U+0000-00FF, U+0131;
  }
}
@font-face{font-family:Mono;src:url( mono.ttf );font-weight:bold}
"#;
        let faces = sheet(css).faces;
        assert_eq!(faces.len(), 2);
        let text = |range: &Range<usize>| &css[range.start - 1000..range.end - 1000];
        let inter = &faces[0];
        assert_eq!(text(&inter.span), "@FONT-FACE");
        assert_eq!(inter.family.as_deref(), Some("Inter Var"));
        assert_eq!(inter.weights(), (100, 900));
        let (display, span) = inter.display.as_ref().unwrap();
        assert_eq!(display, "swap");
        assert_eq!(text(span), "SWAP");
        let urls: Vec<(&str, Option<&str>)> = inter
            .sources
            .iter()
            .map(|s| (text(&s.span), s.format.as_deref()))
            .collect();
        assert_eq!(
            urls,
            [
                ("/fonts/inter.woff2", Some("woff2")),
                ("/fonts/inter.woff", Some("woff"))
            ]
        );
        assert_eq!(inter.unicode_range, [(0, 0xff), (0x131, 0x131)]);
        assert!(inter.covers('é') && !inter.covers('Ж'));
        let mono = &faces[1];
        assert_eq!(mono.family.as_deref(), Some("Mono"));
        assert_eq!(mono.weights(), (700, 700));
        assert_eq!(mono.display, None);
        assert_eq!(mono.sources[0].url, "mono.ttf");
        assert_eq!(text(&mono.sources[0].span), "mono.ttf");
    }

    #[test]
    fn the_last_src_wins_and_unsupported_formats_are_skipped() {
        let css = r#"@font-face { font-family: Icons;
  src: url(icons.eot);
  src: url("icons.eot?#iefix") format("embedded-opentype"), url(icons.woff2) format("woff2"),
       url(icons.svg#icons) format("svg"); }"#;
        let face = &sheet(css).faces[0];
        let chosen: Vec<&str> = face.chosen_sources().map(|s| s.url.as_str()).collect();
        assert_eq!(chosen, ["icons.woff2"]);
        assert_eq!(face.sources.len(), 3);
    }

    #[test]
    fn media_rules_apply_to_the_phone_only() {
        let css = "a { width: 1px } @media (min-width: 768px) { b { width: 2px } } \
                   @media screen and (max-width: 600px) { i { width: 3px } } @media print { u { x: y } } \
                   @media (width >= 400px) and (width < 500px) { em { x: y } } @supports (display: grid) { s { x: y } }";
        let rules = sheet(css).rules;
        let names: Vec<String> = rules
            .iter()
            .map(|r| format!("{:?}", r.buckets[0]))
            .collect();
        assert_eq!(
            names,
            ["Tag(\"a\")", "Tag(\"i\")", "Tag(\"em\")", "Tag(\"s\")"]
        );
    }

    #[test]
    fn declarations_keep_urls_strings_and_importance() {
        let css = r#".hero { background: #000 url( "img/a b.jpg" ) no-repeat !important; content: "\f007"; }"#;
        let rules = sheet(css).rules;
        let decls = &rules[0].declarations;
        assert_eq!(decls[0].name, "background");
        assert!(decls[0].important);
        assert_eq!(decls[0].value, r#"#000 url( "img/a b.jpg" ) no-repeat"#);
        let url = &decls[0].urls[0];
        assert_eq!(url.url, "img/a b.jpg");
        assert_eq!(
            &css[url.span.start - 1000..url.span.end - 1000],
            "img/a b.jpg"
        );
        assert_eq!(decls[1].strings, ["\u{f007}"]);
        let inline = parse_inline("width: 2rem; background-image:url(x.png)", 0);
        assert_eq!(inline.len(), 2);
        assert_eq!(inline[1].urls[0].url, "x.png");
    }

    #[test]
    fn families_are_unquoted() {
        assert_eq!(
            families(r#""Harbor UI", -apple-system, Segoe UI, sans-serif, "serif""#),
            [
                "Harbor UI",
                "-apple-system",
                "Segoe UI",
                "<sans-serif>",
                "serif"
            ]
        );
    }

    #[test]
    fn broken_sheets_do_not_panic() {
        for css in [
            "@font-face",
            "@font-face {",
            "@font-face { src: url(",
            "@font-face { src: url('x",
            "@font-face { font-display: }",
            "/* unterminated",
            "\"unterminated",
            "@font-face { src: url(\"é\") format(\"wöff2\"); font-family: ü }",
            "@",
            "\\",
            "a { b: c",
            "@media (min-width: ) { a { } }",
            "@media ((( { a { width: 1px } }",
            ":::: { }",
        ] {
            let _ = parse(css, 0);
        }
        assert_eq!(parse("@font-face {", 0).faces.len(), 1);
    }
}
