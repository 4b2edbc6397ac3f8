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
use lol_html::{
    DocumentContentHandlers, ElementContentHandlers, HandlerResult, HtmlRewriter, Selector,
    Settings,
};

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
    /// Its node in [`Document::nodes`].
    pub(crate) node: usize,
    /// Index into [`Document::pictures`].
    pub(crate) picture: Option<usize>,
}

/// A style sheet of the document, in the order the cascade reads them.
#[derive(Debug, Clone)]
pub(crate) enum SheetRef {
    /// `<link rel="stylesheet">`: its element.
    Link(Element),
    /// The text of a `<style>` element, as a byte range of the document.
    Inline(Range<usize>),
}

/// An element of the document tree: its start tag, its place in the tree and its own text.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    /// The element's local name, lowercased.
    pub(crate) name: String,
    /// The start tag.
    pub(crate) element: Element,
    /// The parent element, `None` at the top.
    pub(crate) parent: Option<usize>,
    /// Child elements, in order.
    pub(crate) children: Vec<usize>,
    /// Its place among its parent's children.
    pub(crate) position: usize,
    /// The text directly inside it (not in child elements), character references decoded.
    pub(crate) text: String,
    /// Its `class` list.
    pub(crate) classes: Vec<String>,
}

impl Node {
    /// Whether its own text has anything but white space.
    pub(crate) fn has_text(&self) -> bool {
        self.text.chars().any(|c| !c.is_whitespace())
    }
}

/// What the audit reads from one document, in document order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Document {
    /// Every element, in document order (an element's index is smaller than its children's).
    pub(crate) nodes: Vec<Node>,
    pub(crate) imgs: Vec<Img>,
    /// The `<source>` elements of each `<picture>`.
    pub(crate) pictures: Vec<Vec<Element>>,
    /// Elements with `fetchpriority="high"`.
    pub(crate) high_priority: Vec<Element>,
    /// `<link rel="preload">` elements.
    pub(crate) preloads: Vec<Element>,
    /// Style sheets, linked and inline, in document order.
    pub(crate) sheets: Vec<SheetRef>,
    /// `<script>` elements that run (not data blocks such as JSON or templates).
    pub(crate) scripts: usize,
}

/// Elements that never have content (the HTML standard's void elements).
const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr",
];

/// Start tags that close an open `<p>` (the HTML standard's "close a p element").
const CLOSES_P: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "details",
    "dialog",
    "div",
    "dl",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hgroup",
    "hr",
    "main",
    "menu",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "table",
    "ul",
];

/// Elements whose text is not text a reader sees.
const NOT_TEXT: &[&str] = &[
    "script", "style", "template", "noscript", "title", "textarea", "iframe", "noembed",
    "noframes", "xmp",
];

/// Elements that belong in the `<head>`: they do not open an implied `<body>`.
const HEAD_CONTENT: &[&str] = &[
    "head", "title", "meta", "link", "style", "script", "base", "noscript", "template",
];

#[derive(Default)]
struct State {
    document: Document,
    open_picture: Option<usize>,
    /// The open elements, innermost last.
    stack: Vec<usize>,
    /// The `<body>`, written or implied.
    body: Option<usize>,
}

impl State {
    /// Closes the innermost open element named one of `names`, and everything inside it, if it
    /// is open below the first of `boundary`.
    fn close(&mut self, names: &[&str], boundary: &[&str]) {
        for depth in (0..self.stack.len()).rev() {
            let name = self.document.nodes[self.stack[depth]].name.as_str();
            if names.contains(&name) {
                self.stack.truncate(depth);
                return;
            }
            if boundary.contains(&name) {
                return;
            }
        }
    }

    /// The implied end tags of the HTML standard's tree construction that matter for selectors.
    fn imply_end_tags(&mut self, name: &str) {
        if CLOSES_P.contains(&name) {
            self.close(
                &["p"],
                &[
                    "button", "table", "td", "th", "caption", "object", "template",
                ],
            );
        }
        match name {
            "li" => self.close(&["li"], &["ul", "ol", "menu"]),
            "dt" | "dd" => self.close(&["dt", "dd"], &["dl"]),
            "tr" => self.close(&["tr"], &["table", "thead", "tbody", "tfoot"]),
            "td" | "th" => self.close(&["td", "th"], &["tr", "table"]),
            "thead" | "tbody" | "tfoot" => self.close(&["thead", "tbody", "tfoot"], &["table"]),
            "option" => self.close(&["option"], &["select", "datalist"]),
            _ => {}
        }
    }

    /// Adds an element the markup leaves out (`<html>`, `<body>`), as a browser does.
    fn implied(&mut self, name: &str) -> usize {
        let element = Element {
            span: 0..0,
            attrs: Vec::new(),
        };
        self.push(name.to_owned(), element, false)
    }

    fn open(&mut self, name: String, element: Element, void: bool) -> usize {
        if name != "html" && self.document.nodes.is_empty() {
            self.implied("html");
        }
        if name == "body" {
            let index = self.push(name, element, void);
            self.body = Some(index);
            return index;
        }
        if self.body.is_none() && name != "html" && !HEAD_CONTENT.contains(&name.as_str()) {
            // Body content closes an open `<head>` and opens the `<body>` it implies.
            self.close(&["head"], &[]);
            let body = self.implied("body");
            self.body = Some(body);
        }
        self.imply_end_tags(&name);
        self.push(name, element, void)
    }

    fn push(&mut self, name: String, element: Element, void: bool) -> usize {
        let parent = self.stack.last().copied();
        let index = self.document.nodes.len();
        let position = parent.map_or(0, |p| self.document.nodes[p].children.len());
        let classes = element
            .value("class")
            .map(|c| c.split_ascii_whitespace().map(str::to_owned).collect())
            .unwrap_or_default();
        self.document.nodes.push(Node {
            name,
            element,
            parent,
            children: Vec::new(),
            position,
            text: String::new(),
            classes,
        });
        if let Some(parent) = parent {
            self.document.nodes[parent].children.push(index);
        }
        if !void {
            self.stack.push(index);
        }
        index
    }

    /// The end tag of `node`: it and everything still open inside it close.
    fn end(&mut self, node: usize) {
        if let Some(depth) = self.stack.iter().rposition(|&open| open == node) {
            self.stack.truncate(depth);
        }
    }

    fn text(&mut self, text: &str) {
        let Some(&top) = self.stack.last() else {
            return;
        };
        let node = &mut self.document.nodes[top];
        if !NOT_TEXT.contains(&node.name.as_str()) {
            node.text.push_str(&decode_references(text));
        }
    }
}

type Shared = Rc<RefCell<State>>;

/// Reads the document tree and the elements the audit needs from `text`. The error is
/// `lol_html`'s, which the settings used here leave no cause for; it is still reported rather
/// than unwrapped.
pub(crate) fn scan(text: &str) -> Result<Document, String> {
    let state: Shared = Rc::default();
    let shared_text: Rc<str> = Rc::from(text);
    let on_element = {
        let (state, text) = (Rc::clone(&state), Rc::clone(&shared_text));
        move |el: &mut HtmlElement<'_, '_>| -> HandlerResult {
            let element = Element::read(&text, el.source_location().bytes());
            let name = el.tag_name().to_ascii_lowercase();
            let void = VOID.contains(&name.as_str()) || !el.can_have_content();
            let node = state.borrow_mut().open(name.clone(), element.clone(), void);
            if !void {
                let (state, start) = (Rc::clone(&state), element.span.end);
                let _ = el.on_end_tag(Box::new(move |end: &mut EndTag<'_>| {
                    let mut state = state.borrow_mut();
                    if name == "style" {
                        let end = end.source_location().bytes().start;
                        if end >= start {
                            state.document.sheets.push(SheetRef::Inline(start..end));
                        }
                    }
                    if name == "picture" {
                        state.open_picture = None;
                    }
                    state.end(node);
                    Ok(())
                }));
            }
            let mut state = state.borrow_mut();
            state.record(&el.tag_name().to_ascii_lowercase(), node, element);
            Ok(())
        }
    };
    let on_text = {
        let state = Rc::clone(&state);
        move |chunk: &mut lol_html::html_content::TextChunk<'_>| -> HandlerResult {
            state.borrow_mut().text(chunk.as_str());
            Ok(())
        }
    };
    let selector: Selector = "*"
        .parse()
        .map_err(|error| format!("selector `*`: {error}"))?;
    // Never give up on markup a tree builder would need to disambiguate: the audit reads start
    // tags, and builds the little of the tree it needs itself.
    let settings = Settings::new()
        .with_strict(false)
        .append_element_content_handler((
            std::borrow::Cow::Owned(selector),
            ElementContentHandlers::default().element(on_element),
        ))
        .append_document_content_handler(DocumentContentHandlers::default().text(on_text));
    let mut rewriter = HtmlRewriter::new(settings, |_: &[u8]| {});
    rewriter
        .write(text.as_bytes())
        .and_then(|()| rewriter.end())
        .map_err(|error| error.to_string())?;
    let document = std::mem::take(&mut state.borrow_mut().document);
    Ok(document)
}

impl State {
    /// Files the element under the lists the rules read.
    fn record(&mut self, name: &str, node: usize, element: Element) {
        if element
            .value("fetchpriority")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("high"))
        {
            self.document.high_priority.push(element.clone());
        }
        match name {
            "picture" => {
                self.document.pictures.push(Vec::new());
                self.open_picture = Some(self.document.pictures.len() - 1);
            }
            "source" => {
                if let Some(sources) = self
                    .open_picture
                    .and_then(|i| self.document.pictures.get_mut(i))
                {
                    sources.push(element);
                }
            }
            "img" => {
                // The `<img>` is a picture's last child: sources after it do not belong to it.
                let picture = self.open_picture.take();
                self.document.imgs.push(Img {
                    element,
                    node,
                    picture,
                });
            }
            "link" => {
                if element.has_token("rel", "preload") {
                    self.document.preloads.push(element.clone());
                }
                if element.has_token("rel", "stylesheet") && !element.has_token("rel", "alternate")
                {
                    self.document.sheets.push(SheetRef::Link(element));
                }
            }
            "script" => {
                let kind = element
                    .value("type")
                    .map(|t| t.trim().to_ascii_lowercase())
                    .unwrap_or_default();
                if matches!(
                    kind.as_str(),
                    "" | "module" | "text/javascript" | "application/javascript"
                ) {
                    self.document.scripts += 1;
                }
            }
            _ => {}
        }
    }
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
    fn the_tree_closes_what_html_closes_implicitly() {
        let html = "<ul><li>one<li>two <b>bold</b></ul><p>para<div>block</div><table><tr><td>a<td>b</table>";
        let document = scan(html).unwrap();
        let name = |i: usize| document.nodes[i].name.as_str();
        let parent = |i: usize| document.nodes[i].parent.map(name);
        let find = |n: &str, k: usize| {
            document
                .nodes
                .iter()
                .enumerate()
                .filter(|(_, node)| node.name == n)
                .nth(k)
                .map(|(i, _)| i)
                .unwrap()
        };
        assert_eq!(parent(find("li", 1)), Some("ul"));
        assert_eq!(parent(find("b", 0)), Some("li"));
        assert_eq!(document.nodes[find("li", 1)].text, "two ");
        // `<div>` closes the open `<p>`.
        assert_eq!(parent(find("div", 0)), Some("body"));
        assert_eq!(parent(find("ul", 0)), Some("body"));
        assert_eq!(parent(find("td", 1)), Some("tr"));
        assert!(document.nodes[find("p", 0)].has_text());
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
        assert_eq!(document.sheets.len(), 2);
        assert!(matches!(document.sheets[0], SheetRef::Inline(_)));
        let SheetRef::Inline(style) = &document.sheets[0] else {
            unreachable!()
        };
        assert_eq!(&html[style.clone()], "@font-face { font-family: X }");
        assert!(matches!(document.sheets[1], SheetRef::Link(_)));
        assert_eq!(&html[document.imgs[1].element.span.clone()], {
            r#"<img src="b.png" fetchpriority=HIGH>"#
        });
    }
}
