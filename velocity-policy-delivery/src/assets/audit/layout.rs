//! Where things land on the reference phone, estimated without a browser: a walk of the
//! document in order that stacks blocks, sets text in lines and sizes images from their
//! attributes, the cascade and their files. It knows nothing of margins beyond a paragraph's,
//! floats or line breaking by word, and puts the items of a grid or flex row side by side only
//! as far as the style sheet says how many columns there are: positions further down the page
//! are rough, which is why the rules that use them (the likely LCP element, images far below the
//! fold) keep wide margins and say that they estimate.

use crate::assets::html::{Document, Element};
use crate::assets::style::Device;
use crate::assets::style::cascade::{Computed, Length};
use crate::html::dimension;

/// An eager image is reported as far below the fold from this many screens down (Lighthouse's
/// `offscreen-images` counts what lies past four screens; the fifth absorbs the estimate's
/// error).
pub(crate) const OFFSCREEN_SCREENS: f64 = 5.0;
/// ...and when its file is at least this large (Lighthouse's threshold for a saving).
pub(crate) const OFFSCREEN_MIN_BYTES: u64 = 2048;

/// Text is set at this many character widths per em (a proportional font's average).
const CHARACTER_WIDTH_EM: f64 = 0.5;
/// ...in lines this many ems apart.
const LINE_HEIGHT_EM: f64 = 1.5;
/// Nesting deeper than this is laid out as if flat (hostile input cannot exhaust the stack).
const MAX_DEPTH: usize = 200;

/// An element's box, in CSS pixels from the top of the page.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Shown {
    pub(crate) top: f64,
    pub(crate) width: f64,
    pub(crate) height: f64,
    /// Both sides come from lengths (attributes, CSS pixels), not from the width of a
    /// container we estimate: the size is the browser's, whatever the layout. Otherwise the
    /// width is an upper bound.
    pub(crate) exact: bool,
    /// The height is a length of its own (an attribute or CSS pixels), not the width times a
    /// ratio.
    pub(crate) fixed_height: bool,
}

impl Shown {
    /// Its area on the first screen.
    pub(crate) fn visible_area(&self, device: &Device) -> f64 {
        let visible = (device.height.min(self.top + self.height) - self.top).max(0.0);
        self.width.min(device.width) * visible
    }
}

/// The estimate for one document.
#[derive(Debug, Clone, Default)]
pub(crate) struct Layout {
    /// Per node: its box, for images, text blocks and elements with a background.
    boxes: Vec<Option<Shown>>,
    /// Per node: the text it shows as a block (its own and its inline descendants'), in
    /// characters.
    text: Vec<usize>,
}

impl Layout {
    /// Lays out `document` with `styles` on `device`; `natural` gives an `<img>` node's
    /// natural size in CSS pixels (its file's, divided by the chosen candidate's density).
    pub(crate) fn estimate(
        document: &Document,
        styles: &[Computed],
        device: &Device,
        natural: &dyn Fn(usize) -> Option<(f64, f64)>,
    ) -> Layout {
        let n = document.nodes.len();
        let mut text = vec![0usize; n];
        // Each node's text counts for its nearest block ancestor (itself if it is one).
        for (index, node) in document.nodes.iter().enumerate() {
            let chars = node
                .text
                .split_whitespace()
                .map(|w| w.chars().count() + 1)
                .sum::<usize>()
                + styles[index]
                    .generated
                    .as_ref()
                    .map_or(0, |(t, _)| t.chars().count());
            if chars == 0 || styles[index].hidden {
                continue;
            }
            let mut at = index;
            while !styles[at].is_block() {
                match document.nodes[at].parent {
                    Some(parent) => at = parent,
                    None => break,
                }
            }
            text[at] += chars;
        }
        let mut layout = Layout {
            boxes: vec![None; n],
            text,
        };
        let mut walker = Walker {
            document,
            styles,
            device,
            natural,
            layout: &mut layout,
        };
        let mut y = 0.0;
        for (index, node) in document.nodes.iter().enumerate() {
            if node.parent.is_none() {
                y = walker.place(index, y, device.width, 0);
            }
        }
        layout
    }

    /// The box of node `index`, if it has one.
    pub(crate) fn shown(&self, index: usize) -> Option<Shown> {
        self.boxes.get(index).copied().flatten()
    }

    /// Text blocks with their boxes: `(node, box)`.
    pub(crate) fn text_blocks(&self) -> impl Iterator<Item = (usize, Shown)> + '_ {
        self.boxes
            .iter()
            .enumerate()
            .filter(|(index, _)| self.text[*index] > 0)
            .filter_map(|(index, shown)| shown.map(|s| (index, s)))
    }
}

struct Walker<'a> {
    document: &'a Document,
    styles: &'a [Computed],
    device: &'a Device,
    natural: &'a dyn Fn(usize) -> Option<(f64, f64)>,
    layout: &'a mut Layout,
}

impl Walker<'_> {
    fn length(
        &self,
        index: usize,
        won: Option<&crate::assets::style::cascade::Won>,
        container: f64,
    ) -> Option<f64> {
        let won = won?;
        Length::parse(&won.declaration.value).px(
            self.styles[index].font.size,
            container,
            self.device,
        )
    }

    /// An image's box given the width available: from its attributes, the cascade and its
    /// file, as a browser sizes a replaced element.
    fn image(&mut self, index: usize, top: f64, container: f64) -> Shown {
        let element = &self.document.nodes[index].element;
        let style = &self.styles[index];
        let natural = (self.natural)(index);
        let css_w = style
            .width
            .as_ref()
            .map(|w| Length::parse(&w.declaration.value));
        let css_h = style
            .height
            .as_ref()
            .map(|h| Length::parse(&h.declaration.value));
        let attr_w = attribute_px(element, "width");
        let attr_h = attribute_px(element, "height");
        let ratio = natural
            .filter(|(w, h)| *w > 0.0 && *h > 0.0)
            .map(|(w, h)| h / w)
            .or_else(|| match (attr_w, attr_h) {
                (Some(w), Some(h)) if w > 0.0 => Some(h / w),
                _ => None,
            });
        let mut exact = true;
        let css_width = css_w.and_then(|l| {
            if matches!(l, Length::Percent(_)) {
                exact = false;
            }
            l.px(style.font.size, container, self.device)
        });
        let css_height = css_h.and_then(|l| {
            if matches!(l, Length::Percent(_)) {
                return None;
            }
            l.px(style.font.size, container, self.device)
        });
        let height_auto = matches!(css_h, Some(Length::Auto));
        let mut width = css_width
            .or(attr_w.filter(|_| !matches!(css_w, Some(Length::Auto))))
            .or_else(|| css_height.or(attr_h).zip(ratio).map(|(h, r)| h / r))
            .or(natural.map(|(w, _)| w))
            .unwrap_or(0.0);
        if css_width.is_none() && attr_w.is_none() {
            // From the file: exact only if nothing limits it.
            exact &= natural.is_some();
        }
        if let Some(max) = self.length(index, style.max_width.as_ref(), container)
            && width > max
        {
            width = max;
            exact = false;
        }
        let mut fixed_height = true;
        let height = if let Some(h) = css_height {
            h
        } else if let (Some(h), false) = (attr_h, height_auto || css_h.is_some()) {
            h
        } else {
            fixed_height = false;
            ratio.map_or(0.0, |r| width * r)
        };
        let aspect = style
            .aspect_ratio
            .as_ref()
            .and_then(|a| parse_ratio(&a.declaration.value));
        let height = match (aspect, css_height) {
            (Some(a), None) if a > 0.0 => {
                fixed_height = false;
                width / a
            }
            _ => height,
        };
        Shown {
            top,
            width,
            height,
            exact,
            fixed_height,
        }
    }

    /// Places node `index` at `y` in a container `width` wide; returns the `y` below it.
    fn place(&mut self, index: usize, y: f64, width: f64, depth: usize) -> f64 {
        let style = &self.styles[index];
        if style.hidden {
            return y;
        }
        let node = &self.document.nodes[index];
        let out_of_flow = matches!(style.position.as_str(), "absolute" | "fixed");
        if node.name == "img" || node.name == "svg" || node.name == "video" {
            let shown = if node.name == "img" {
                self.image(index, y, width)
            } else {
                let w = attribute_px(&node.element, "width")
                    .unwrap_or(0.0)
                    .min(width);
                let h = attribute_px(&node.element, "height").unwrap_or(0.0);
                Shown {
                    top: y,
                    width: w,
                    height: h,
                    exact: false,
                    fixed_height: true,
                }
            };
            self.layout.boxes[index] = Some(shown);
            return if out_of_flow { y } else { y + shown.height };
        }
        // The content box: its width (or the container's), less its margins and padding in
        // lengths we know (a percentage or `auto` counts as none, so the width stays an upper
        // bound).
        let space: f64 = style
            .inline_space
            .iter()
            .flatten()
            .filter_map(|value| {
                Length::parse(value)
                    .px(style.font.size, width, self.device)
                    .filter(|_| !matches!(Length::parse(value), Length::Percent(_) | Length::Vw(_)))
            })
            .filter(|px| *px > 0.0)
            .sum();
        let own_width = self
            .length(index, style.width.as_ref(), width)
            .map_or(width, |w| w.min(width).max(0.0));
        let own_width = (own_width - space).max(0.0);
        let font = style.font.size;
        let block = style.is_block();
        let margin = if block
            && matches!(
                node.name.as_str(),
                "p" | "h1"
                    | "h2"
                    | "h3"
                    | "h4"
                    | "h5"
                    | "h6"
                    | "ul"
                    | "ol"
                    | "figure"
                    | "blockquote"
                    | "pre"
                    | "table"
            ) {
            font * 0.75
        } else {
            0.0
        };
        let start = y + margin;
        let chars = self.layout.text[index];
        let mut cursor = start;
        if block && chars > 0 {
            let per_line = (own_width / (font * CHARACTER_WIDTH_EM)).max(1.0);
            let lines = (chars as f64 / per_line).ceil();
            let text_height = lines * font * LINE_HEIGHT_EM;
            let text_width = (chars as f64 * font * CHARACTER_WIDTH_EM).min(own_width);
            self.layout.boxes[index] = Some(Shown {
                top: start,
                width: text_width,
                height: text_height,
                exact: false,
                fixed_height: false,
            });
            cursor += text_height;
        }
        let children = &node.children;
        if depth < MAX_DEPTH {
            let columns = columns(style, own_width, self, index);
            let flex_row = matches!(style.display.as_str(), "flex" | "inline-flex")
                && !style.flex_wrap
                && !style.flex_column;
            if flex_row && children.len() > 1 {
                // One row: items with a width of their own keep it, the others share the rest.
                let fixed: Vec<Option<f64>> = children
                    .iter()
                    .map(|&child| {
                        let child_style = &self.styles[child];
                        let basis = child_style
                            .width
                            .as_ref()
                            .or(child_style.flex_basis.as_ref())?;
                        match Length::parse(&basis.declaration.value) {
                            Length::Percent(_) => None,
                            other => other.px(child_style.font.size, own_width, self.device),
                        }
                    })
                    .collect();
                let taken: f64 = fixed.iter().flatten().sum();
                let flexible = fixed.iter().filter(|w| w.is_none()).count().max(1);
                let share = ((own_width - taken) / flexible as f64).max(0.0);
                let mut bottom = cursor;
                for (&child, width) in children.iter().zip(&fixed) {
                    let child_width = width.unwrap_or(share).min(own_width);
                    bottom = bottom.max(self.place(child, cursor, child_width, depth + 1));
                }
                cursor = bottom;
            } else if columns > 1 {
                // Items side by side: rows as tall as their tallest item.
                let column_width = own_width / columns as f64;
                for row in children.chunks(columns) {
                    let mut bottom = cursor;
                    for &child in row {
                        bottom = bottom.max(self.place(child, cursor, column_width, depth + 1));
                    }
                    cursor = bottom;
                }
            } else {
                for &child in children {
                    cursor = self.place(child, cursor, own_width, depth + 1);
                }
            }
        }
        let mut bottom = cursor;
        let fixed_height = self.length(index, style.height.as_ref(), width);
        let min_height = self.length(index, style.min_height.as_ref(), width);
        if let Some(h) = fixed_height {
            bottom = y + h;
        }
        if let Some(h) = min_height {
            bottom = bottom.max(y + h);
        }
        if style.background.is_some() && self.layout.boxes[index].is_none() {
            self.layout.boxes[index] = Some(Shown {
                top: y,
                width: own_width,
                height: bottom - y,
                exact: false,
                fixed_height: fixed_height.is_some(),
            });
        }
        if out_of_flow || style.floats {
            y
        } else {
            bottom + margin
        }
    }
}

/// How many items of a grid or flex container sit side by side.
fn columns(style: &Computed, width: f64, walker: &Walker<'_>, index: usize) -> usize {
    let display = style.display.as_str();
    if display == "grid" || display == "inline-grid" {
        return style.grid_columns.max(1);
    }
    if (display == "flex" || display == "inline-flex") && !style.flex_column {
        if !style.flex_wrap {
            return walker.document.nodes[index].children.len().max(1);
        }
        // Wrapping: as many as fit, when the items say how wide they are.
        let child = walker.document.nodes[index].children.first().copied();
        let child_width = child.and_then(|c| {
            let basis = walker.styles[c]
                .flex_basis
                .as_ref()
                .or(walker.styles[c].width.as_ref())?;
            Length::parse(&basis.declaration.value).px(
                walker.styles[c].font.size,
                width,
                walker.device,
            )
        });
        return match child_width {
            Some(w) if w > 0.0 => ((width / w).floor() as usize).max(1),
            _ => 1,
        };
    }
    1
}

/// `16 / 9`, `1.5`, `auto 4 / 3`.
fn parse_ratio(value: &str) -> Option<f64> {
    let value = value.trim().trim_start_matches("auto").trim();
    let mut parts = value.split('/');
    let a: f64 = parts.next()?.trim().parse().ok()?;
    let b: f64 = match parts.next() {
        Some(b) => b.trim().parse().ok()?,
        None => 1.0,
    };
    (b > 0.0).then_some(a / b)
}

/// The element's attribute as a length in CSS pixels.
pub(crate) fn attribute_px(element: &Element, name: &str) -> Option<f64> {
    element.value(name).and_then(dimension)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios() {
        assert_eq!(parse_ratio("16 / 9"), Some(16.0 / 9.0));
        assert_eq!(parse_ratio("1.5"), Some(1.5));
        assert_eq!(parse_ratio("auto 4/3"), Some(4.0 / 3.0));
        assert_eq!(parse_ratio("auto"), None);
    }
}
