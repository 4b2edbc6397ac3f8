//! Reading an HTML document: the elements the audit looks at, each with the byte spans of its
//! start tag and of every attribute, so a finding can point at `loading="lazy"` itself.
//!
//! `lol_html` finds the elements (it tokenizes like a browser: comments, `<script>` and
//! `<template>` text are not mistaken for tags) and gives each start tag's byte range; a small
//! scanner then reads the attributes inside that range with their offsets.

use std::cell::RefCell;
use std::ops::Range;
use std::rc::Rc;

use lol_html::html_content::{Element as HtmlElement, EndTag};
use lol_html::{ElementContentHandlers, HandlerResult, HtmlRewriter, Selector, Settings};

/// An attribute of a start tag, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Attr {
    /// The name, lowercased.
    pub(crate) name: String,
    /// The value with character references decoded; `None` for a bare attribute.
    pub(crate) value: Option<String>,
    /// The whole attribute, `name="value"`, in the document.
    pub(crate) span: Range<usize>,
    /// The value without its quotes, in the document.
    pub(crate) value_span: Option<Range<usize>>,
}

/// A start tag and its attributes.
#[derive(Debug, Clone)]
pub(crate) struct Element {
    /// The start tag in the document.
    pub(crate) span: Range<usize>,
    /// Its attributes, first occurrence of each name only (as browsers read them).
    pub(crate) attrs: Vec<Attr>,
}

impl Element {
    fn read(text: &str, span: Range<usize>) -> Self {
        let attrs = text
            .get(span.clone())
            .map(|tag| attributes(tag, span.start))
            .unwrap_or_default();
        Element { span, attrs }
    }

    /// The attribute called `name`.
    pub(crate) fn attr(&self, name: &str) -> Option<&Attr> {
        self.attrs.iter().find(|attr| attr.name == name)
    }

    /// The value of `name`, if it is present with a value.
    pub(crate) fn value(&self, name: &str) -> Option<&str> {
        self.attr(name).and_then(|attr| attr.value.as_deref())
    }

    /// The span of attribute `name`, or of the whole tag when it is absent.
    pub(crate) fn span_of(&self, name: &str) -> Range<usize> {
        self.attr(name)
            .map_or_else(|| self.span.clone(), |attr| attr.span.clone())
    }

    /// Whether `name` holds `token` in its space-separated list (`rel="preload stylesheet"`).
    pub(crate) fn has_token(&self, name: &str, token: &str) -> bool {
        self.value(name).is_some_and(|value| {
            value
                .split_ascii_whitespace()
                .any(|t| t.eq_ignore_ascii_case(token))
        })
    }
}

/// An `<img>`, and the `<picture>` it is the fallback of.
#[derive(Debug, Clone)]
pub(crate) struct Img {
    pub(crate) element: Element,
    /// Index into [`Document::pictures`].
    pub(crate) picture: Option<usize>,
}

/// What the audit reads from one document, in document order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Document {
    pub(crate) imgs: Vec<Img>,
    /// The `<source>` elements of each `<picture>`.
    pub(crate) pictures: Vec<Vec<Element>>,
    /// Elements with `fetchpriority="high"`.
    pub(crate) high_priority: Vec<Element>,
    /// `<link rel="preload">` elements.
    pub(crate) preloads: Vec<Element>,
    /// `<link rel="stylesheet">` elements.
    pub(crate) stylesheets: Vec<Element>,
    /// The text of each `<style>` element, as a byte range of the document.
    pub(crate) styles: Vec<Range<usize>>,
}

#[derive(Default)]
struct State {
    document: Document,
    open_picture: Option<usize>,
}

type Shared = Rc<RefCell<State>>;

fn handler(
    selector: &str,
    state: &Shared,
    text: &Rc<str>,
    on: fn(&mut State, Element, &mut HtmlElement<'_, '_>, &Shared),
) -> Result<
    (
        std::borrow::Cow<'static, Selector>,
        ElementContentHandlers<'static>,
    ),
    String,
> {
    let selector: Selector = selector
        .parse()
        .map_err(|error| format!("selector `{selector}`: {error}"))?;
    let (state, text) = (Rc::clone(state), Rc::clone(text));
    let handlers = ElementContentHandlers::default().element(
        move |el: &mut HtmlElement<'_, '_>| -> HandlerResult {
            let element = Element::read(&text, el.source_location().bytes());
            let shared = Rc::clone(&state);
            on(&mut state.borrow_mut(), element, el, &shared);
            Ok(())
        },
    );
    Ok((std::borrow::Cow::Owned(selector), handlers))
}

/// Reads the elements the audit needs from `text`. The error is `lol_html`'s, which the
/// settings used here leave no cause for; it is still reported rather than unwrapped.
pub(crate) fn scan(text: &str) -> Result<Document, String> {
    let state: Shared = Rc::default();
    let shared_text: Rc<str> = Rc::from(text);
    let handlers = [
        handler("picture", &state, &shared_text, |state, _, el, shared| {
            state.document.pictures.push(Vec::new());
            state.open_picture = Some(state.document.pictures.len() - 1);
            let shared = Rc::clone(shared);
            let _ = el.on_end_tag(Box::new(move |_: &mut EndTag<'_>| {
                shared.borrow_mut().open_picture = None;
                Ok(())
            }));
        })?,
        handler("source", &state, &shared_text, |state, element, _, _| {
            if let Some(sources) = state
                .open_picture
                .and_then(|i| state.document.pictures.get_mut(i))
            {
                sources.push(element);
            }
        })?,
        handler("img", &state, &shared_text, |state, element, _, _| {
            // The `<img>` is a picture's last child: sources after it do not belong to it.
            let picture = state.open_picture.take();
            state.document.imgs.push(Img { element, picture });
        })?,
        handler("link", &state, &shared_text, |state, element, _, _| {
            if element.has_token("rel", "preload") {
                state.document.preloads.push(element.clone());
            }
            if element.has_token("rel", "stylesheet") {
                state.document.stylesheets.push(element);
            }
        })?,
        handler(
            "[fetchpriority]",
            &state,
            &shared_text,
            |state, element, _, _| {
                if element
                    .value("fetchpriority")
                    .is_some_and(|v| v.trim().eq_ignore_ascii_case("high"))
                {
                    state.document.high_priority.push(element);
                }
            },
        )?,
        handler("style", &state, &shared_text, |_, element, el, shared| {
            let start = element.span.end;
            let shared = Rc::clone(shared);
            let _ = el.on_end_tag(Box::new(move |end: &mut EndTag<'_>| {
                let end = end.source_location().bytes().start;
                if end >= start {
                    shared.borrow_mut().document.styles.push(start..end);
                }
                Ok(())
            }));
        })?,
    ];
    // Never give up on markup a tree builder would need to disambiguate: the audit reads start
    // tags, which do not depend on it.
    let settings = handlers
        .into_iter()
        .fold(Settings::new().with_strict(false), |settings, handler| {
            settings.append_element_content_handler(handler)
        });
    let mut rewriter = HtmlRewriter::new(settings, |_: &[u8]| {});
    rewriter
        .write(text.as_bytes())
        .and_then(|()| rewriter.end())
        .map_err(|error| error.to_string())?;
    let document = std::mem::take(&mut state.borrow_mut().document);
    Ok(document)
}

/// The attributes of one start tag (`tag` starts at `<`), with spans offset by `base`.
pub(crate) fn attributes(tag: &str, base: usize) -> Vec<Attr> {
    let bytes = tag.as_bytes();
    let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0c);
    // Skip `<` and the tag name.
    let mut i = 1;
    while i < bytes.len() && !is_space(bytes[i]) && bytes[i] != b'/' && bytes[i] != b'>' {
        i += 1;
    }
    let mut attrs: Vec<Attr> = Vec::new();
    loop {
        while i < bytes.len() && (is_space(bytes[i]) || bytes[i] == b'/') {
            i += 1;
        }
        if i >= bytes.len() || bytes[i] == b'>' {
            break;
        }
        let name_start = i;
        // The first character may be `=` (it is then part of the name), never after that.
        i += 1;
        while i < bytes.len() && !is_space(bytes[i]) && !matches!(bytes[i], b'/' | b'>' | b'=') {
            i += 1;
        }
        let name = tag
            .get(name_start..i)
            .unwrap_or_default()
            .to_ascii_lowercase();
        let mut end = i;
        let mut j = i;
        while j < bytes.len() && is_space(bytes[j]) {
            j += 1;
        }
        let mut value = None;
        let mut value_span = None;
        if j < bytes.len() && bytes[j] == b'=' {
            j += 1;
            while j < bytes.len() && is_space(bytes[j]) {
                j += 1;
            }
            let (start, stop, next) = match bytes.get(j) {
                Some(&quote @ (b'"' | b'\'')) => {
                    let close = bytes[j + 1..]
                        .iter()
                        .position(|&b| b == quote)
                        .map_or(bytes.len(), |p| j + 1 + p);
                    (j + 1, close, (close + 1).min(bytes.len()))
                }
                _ => {
                    let mut k = j;
                    while k < bytes.len() && !is_space(bytes[k]) && bytes[k] != b'>' {
                        k += 1;
                    }
                    (j, k, k)
                }
            };
            value = Some(decode_references(tag.get(start..stop).unwrap_or_default()));
            value_span = Some(base + start..base + stop);
            end = next;
            i = next;
        }
        if !attrs.iter().any(|attr| attr.name == name) {
            attrs.push(Attr {
                name,
                value,
                span: base + name_start..base + end,
                value_span,
            });
        }
    }
    attrs
}

/// Decodes the character references that appear in attribute values in practice: named ones
/// for markup characters, and numeric ones.
pub(crate) fn decode_references(raw: &str) -> String {
    if !raw.contains('&') {
        return raw.to_owned();
    }
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let reference = rest
            .find(';')
            .filter(|&end| end <= 10)
            .and_then(|end| Some((decode_one(rest.get(1..end)?)?, end)));
        match reference {
            Some((c, end)) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn decode_one(name: &str) -> Option<char> {
    match name {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        "nbsp" => Some('\u{a0}'),
        _ => {
            let number = name.strip_prefix('#')?;
            let code = match number.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => number.parse().ok()?,
            };
            char::from_u32(code)
        }
    }
}

/// One candidate of a `srcset`: its URL, its descriptor (`640w`, `2x`), and where the URL is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub(crate) url: String,
    pub(crate) descriptor: String,
    pub(crate) span: Range<usize>,
}

/// Splits a `srcset` value into candidates, as the HTML standard's parsing algorithm does (a
/// URL runs to the next space; commas at its end separate candidates), with spans offset by
/// `base` (the value's position in the document, `raw` being the text as written there).
pub(crate) fn srcset(raw: &str, base: usize) -> Vec<Candidate> {
    let bytes = raw.as_bytes();
    let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0c);
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        while i < bytes.len() && (is_space(bytes[i]) || bytes[i] == b',') {
            i += 1;
        }
        if i >= bytes.len() {
            break;
        }
        let start = i;
        while i < bytes.len() && !is_space(bytes[i]) {
            i += 1;
        }
        let mut end = i;
        let mut descriptor = String::new();
        if bytes[start..end].ends_with(b",") {
            while end > start && bytes[end - 1] == b',' {
                end -= 1;
            }
        } else {
            let mut depth = 0usize;
            let descriptor_start = i;
            while i < bytes.len() {
                match bytes[i] {
                    b'(' => depth += 1,
                    b')' => depth = depth.saturating_sub(1),
                    b',' if depth == 0 => break,
                    _ => {}
                }
                i += 1;
            }
            descriptor = raw
                .get(descriptor_start..i)
                .unwrap_or_default()
                .trim()
                .to_owned();
        }
        if end > start {
            out.push(Candidate {
                url: decode_references(raw.get(start..end).unwrap_or_default()),
                descriptor,
                span: base + start..base + end,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_with_their_spans() {
        let tag = r#"<img SRC="a.png" alt='a &amp; b' width=640 hidden data-x = "y" src="dup">"#;
        let attrs = attributes(tag, 100);
        let names: Vec<&str> = attrs.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["src", "alt", "width", "hidden", "data-x"]);
        let text = |range: &Range<usize>| &tag[range.start - 100..range.end - 100];
        assert_eq!(text(&attrs[0].span), r#"SRC="a.png""#);
        assert_eq!(text(attrs[0].value_span.as_ref().unwrap()), "a.png");
        assert_eq!(attrs[1].value.as_deref(), Some("a & b"));
        assert_eq!(text(&attrs[2].span), "width=640");
        assert_eq!(attrs[3].value, None);
        assert_eq!(text(&attrs[3].span), "hidden");
        assert_eq!(text(&attrs[4].span), r#"data-x = "y""#);
        assert_eq!(attributes("<img/>", 0), []);
        assert_eq!(attributes("<img src=\"unterminated", 0).len(), 1);
    }

    #[test]
    fn references_decode() {
        assert_eq!(
            decode_references("a&amp;b&#39;c&#x41;&unknown;&"),
            "a&b'cA&unknown;&"
        );
    }

    #[test]
    fn srcset_candidates() {
        let raw = "a.png 1x, b.png 2x,c.png, d(1).png 640w";
        let found: Vec<(String, String, &str)> = srcset(raw, 10)
            .into_iter()
            .map(|c| {
                let url = &raw[c.span.start - 10..c.span.end - 10];
                (c.url, c.descriptor, url)
            })
            .collect();
        assert_eq!(
            found,
            [
                ("a.png".to_owned(), "1x".to_owned(), "a.png"),
                ("b.png".to_owned(), "2x".to_owned(), "b.png"),
                ("c.png".to_owned(), String::new(), "c.png"),
                ("d(1).png".to_owned(), "640w".to_owned(), "d(1).png"),
            ]
        );
        assert_eq!(srcset(" , ", 0), []);
    }

    #[test]
    fn scan_finds_elements_not_text_that_looks_like_them() {
        let html = r#"<!doctype html>
<!-- <img src="commented.png"> -->
<script>let s = '<img src="script.png">';</script>
<style>@font-face { font-family: X }</style>
<picture><source srcset="a.avif" type="image/avif"><img src="a.jpg"></picture>
<img src="b.png" fetchpriority=HIGH>
<link rel="preload stylesheet" href="s.css">
"#;
        let document = scan(html).unwrap();
        let srcs: Vec<&str> = document
            .imgs
            .iter()
            .filter_map(|img| img.element.value("src"))
            .collect();
        assert_eq!(srcs, ["a.jpg", "b.png"]);
        assert_eq!(document.imgs[0].picture, Some(0));
        assert_eq!(document.imgs[1].picture, None);
        assert_eq!(document.pictures[0].len(), 1);
        assert_eq!(document.high_priority.len(), 1);
        assert_eq!(document.preloads.len(), 1);
        assert_eq!(document.stylesheets.len(), 1);
        assert_eq!(
            &html[document.styles[0].clone()],
            "@font-face { font-family: X }"
        );
        assert_eq!(&html[document.imgs[1].element.span.clone()], {
            r#"<img src="b.png" fetchpriority=HIGH>"#
        });
    }
}
