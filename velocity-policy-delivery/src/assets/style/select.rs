//! Selector matching against the audit's document tree, with the `selectors` crate (Servo's and
//! Firefox's selector engine): our [`SelectorImpl`] and the [`Element`] trait over
//! [`Document`].
//!
//! A page is audited as loaded, never interacted with: `:hover`, `:focus` and the like never
//! match; `:link` matches `<a href>`; `::before` and `::after` are matched on their originating
//! element (their `content` is text the element shows).

use std::fmt;

use cssparser::{CowRcStr, ParseError, SourceLocation, ToCss};
use selectors::attr::{AttrSelectorOperation, CaseSensitivity, NamespaceConstraint};
use selectors::bloom::BloomFilter;
use selectors::context::{
    MatchingContext, MatchingForInvalidation, MatchingMode, NeedsSelectorFlags, QuirksMode,
    SelectorCaches,
};
use selectors::matching::{ElementSelectorFlags, matches_selector};
use selectors::parser::{Component, Selector, SelectorParseErrorKind};
use selectors::{OpaqueElement, SelectorImpl};

use crate::assets::html::{Document, Node};

/// The selector vocabulary: names and values as strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Simple;

/// A name or value in a selector.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct Text(pub(crate) String);

impl<'a> From<&'a str> for Text {
    fn from(value: &'a str) -> Self {
        Text(value.to_owned())
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl ToCss for Text {
    fn to_css<W: fmt::Write>(&self, dest: &mut W) -> fmt::Result {
        dest.write_str(&self.0)
    }
}

impl precomputed_hash::PrecomputedHash for Text {
    fn precomputed_hash(&self) -> u32 {
        // FNV-1a: only the selector engine's bloom filter uses it, and we give it no filter.
        self.0.bytes().fold(0x811c_9dc5_u32, |hash, b| {
            (hash ^ u32::from(b)).wrapping_mul(0x0100_0193)
        })
    }
}

/// The pseudo-classes a loaded, untouched page can be in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PseudoClass {
    /// `:link`, `:any-link`.
    Link,
    /// `:checked`.
    Checked,
    /// `:disabled`.
    Disabled,
    /// `:enabled`.
    Enabled,
    /// `:hover`, `:focus`, `:active` and the rest that need a user: never match.
    UserAction(String),
    /// Any other (`:visited`, vendor prefixed, `:lang()`): never match.
    Other(String),
}

impl ToCss for PseudoClass {
    fn to_css<W: fmt::Write>(&self, dest: &mut W) -> fmt::Result {
        let name = match self {
            PseudoClass::Link => "link",
            PseudoClass::Checked => "checked",
            PseudoClass::Disabled => "disabled",
            PseudoClass::Enabled => "enabled",
            PseudoClass::UserAction(name) | PseudoClass::Other(name) => name,
        };
        dest.write_char(':')?;
        dest.write_str(name)
    }
}

impl selectors::parser::NonTSPseudoClass for PseudoClass {
    type Impl = Simple;

    fn is_active_or_hover(&self) -> bool {
        matches!(self, PseudoClass::UserAction(name) if name == "hover" || name == "active")
    }

    fn is_user_action_state(&self) -> bool {
        matches!(self, PseudoClass::UserAction(_))
    }
}

/// Pseudo-elements: `::before` and `::after` show text; the others are kept so that their
/// rules parse, and never apply to the element itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PseudoElement {
    /// `::before`, `:before`.
    Before,
    /// `::after`, `:after`.
    After,
    /// `::placeholder`, `::selection`, `::marker`, vendor prefixed ones...
    Other(String),
}

impl ToCss for PseudoElement {
    fn to_css<W: fmt::Write>(&self, dest: &mut W) -> fmt::Result {
        dest.write_str("::")?;
        dest.write_str(match self {
            PseudoElement::Before => "before",
            PseudoElement::After => "after",
            PseudoElement::Other(name) => name,
        })
    }
}

impl selectors::parser::PseudoElement for PseudoElement {
    type Impl = Simple;

    fn accepts_state_pseudo_classes(&self) -> bool {
        true
    }

    fn valid_after_slotted(&self) -> bool {
        true
    }
}

impl SelectorImpl for Simple {
    type ExtraMatchingData<'a> = ();
    type AttrValue = Text;
    type Identifier = Text;
    type LocalName = Text;
    type NamespaceUrl = Text;
    type NamespacePrefix = Text;
    type BorrowedNamespaceUrl = Text;
    type BorrowedLocalName = Text;
    type NonTSPseudoClass = PseudoClass;
    type PseudoElement = PseudoElement;
}

/// Parses selectors as a current browser does: `:is()`, `:where()`, `:has()` and
/// `:nth-child(of S)` included.
#[derive(Debug)]
pub(crate) struct SelectorParser;

impl<'i> selectors::parser::Parser<'i> for SelectorParser {
    type Impl = Simple;
    type Error = SelectorParseErrorKind<'i>;

    fn parse_is_and_where(&self) -> bool {
        true
    }

    fn parse_has(&self) -> bool {
        true
    }

    fn parse_nth_child_of(&self) -> bool {
        true
    }

    fn parse_non_ts_pseudo_class(
        &self,
        _location: SourceLocation,
        name: CowRcStr<'i>,
    ) -> Result<PseudoClass, ParseError<'i, Self::Error>> {
        let name = name.to_ascii_lowercase();
        Ok(match name.as_str() {
            "link" | "any-link" => PseudoClass::Link,
            "checked" => PseudoClass::Checked,
            "disabled" => PseudoClass::Disabled,
            "enabled" => PseudoClass::Enabled,
            "hover" | "active" | "focus" | "focus-visible" | "focus-within" | "target"
            | "target-within" | "user-invalid" | "user-valid" => PseudoClass::UserAction(name),
            _ => PseudoClass::Other(name),
        })
    }

    fn parse_non_ts_functional_pseudo_class<'t>(
        &self,
        name: CowRcStr<'i>,
        parser: &mut cssparser::Parser<'i, 't>,
        _after_part: bool,
    ) -> Result<PseudoClass, ParseError<'i, Self::Error>> {
        // The arguments are not needed to know that it never matches; consume them.
        while parser.next().is_ok() {}
        Ok(PseudoClass::Other(name.to_ascii_lowercase()))
    }

    fn parse_pseudo_element(
        &self,
        _location: SourceLocation,
        name: CowRcStr<'i>,
    ) -> Result<PseudoElement, ParseError<'i, Self::Error>> {
        Ok(match name.to_ascii_lowercase().as_str() {
            "before" => PseudoElement::Before,
            "after" => PseudoElement::After,
            other => PseudoElement::Other(other.to_owned()),
        })
    }

    fn parse_functional_pseudo_element<'t>(
        &self,
        name: CowRcStr<'i>,
        arguments: &mut cssparser::Parser<'i, 't>,
    ) -> Result<PseudoElement, ParseError<'i, Self::Error>> {
        while arguments.next().is_ok() {}
        Ok(PseudoElement::Other(name.to_ascii_lowercase()))
    }
}

/// An element of a [`Document`], as the selector engine sees it.
#[derive(Clone, Copy)]
pub(crate) struct El<'a> {
    pub(crate) document: &'a Document,
    pub(crate) index: usize,
}

impl fmt::Debug for El<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{}> #{}", self.node().name, self.index)
    }
}

impl<'a> El<'a> {
    fn node(&self) -> &'a Node {
        &self.document.nodes[self.index]
    }

    fn at(&self, index: usize) -> Self {
        El {
            document: self.document,
            index,
        }
    }

    fn sibling(&self, offset: isize) -> Option<Self> {
        let node = self.node();
        let parent = node.parent?;
        let position = node.position.checked_add_signed(offset)?;
        self.document.nodes[parent]
            .children
            .get(position)
            .map(|&index| self.at(index))
    }
}

impl selectors::Element for El<'_> {
    type Impl = Simple;

    fn opaque(&self) -> OpaqueElement {
        OpaqueElement::new(self.node())
    }

    fn parent_element(&self) -> Option<Self> {
        self.node().parent.map(|parent| self.at(parent))
    }

    fn parent_node_is_shadow_root(&self) -> bool {
        false
    }

    fn containing_shadow_host(&self) -> Option<Self> {
        None
    }

    fn is_pseudo_element(&self) -> bool {
        false
    }

    fn prev_sibling_element(&self) -> Option<Self> {
        self.sibling(-1)
    }

    fn next_sibling_element(&self) -> Option<Self> {
        self.sibling(1)
    }

    fn first_element_child(&self) -> Option<Self> {
        self.node().children.first().map(|&child| self.at(child))
    }

    fn is_html_element_in_html_document(&self) -> bool {
        true
    }

    fn has_local_name(&self, local_name: &Text) -> bool {
        self.node().name.eq_ignore_ascii_case(&local_name.0)
    }

    fn has_namespace(&self, _ns: &Text) -> bool {
        true
    }

    fn is_same_type(&self, other: &Self) -> bool {
        self.node().name == other.node().name
    }

    fn attr_matches(
        &self,
        _ns: &NamespaceConstraint<&Text>,
        local_name: &Text,
        operation: &AttrSelectorOperation<&Text>,
    ) -> bool {
        let name = local_name.0.to_ascii_lowercase();
        match self.node().element.attr(&name) {
            Some(attr) => operation.eval_str(attr.value.as_deref().unwrap_or_default()),
            None => false,
        }
    }

    fn match_non_ts_pseudo_class(
        &self,
        pc: &PseudoClass,
        _context: &mut MatchingContext<'_, Simple>,
    ) -> bool {
        let element = &self.node().element;
        match pc {
            PseudoClass::Link => self.is_link(),
            PseudoClass::Checked => element.attr("checked").is_some(),
            PseudoClass::Disabled => element.attr("disabled").is_some(),
            PseudoClass::Enabled => {
                matches!(
                    self.node().name.as_str(),
                    "button" | "input" | "select" | "textarea" | "option" | "fieldset"
                ) && element.attr("disabled").is_none()
            }
            PseudoClass::UserAction(_) | PseudoClass::Other(_) => false,
        }
    }

    fn match_pseudo_element(
        &self,
        _pe: &PseudoElement,
        _context: &mut MatchingContext<'_, Simple>,
    ) -> bool {
        false
    }

    fn apply_selector_flags(&self, _flags: ElementSelectorFlags) {}

    fn is_link(&self) -> bool {
        matches!(self.node().name.as_str(), "a" | "area")
            && self.node().element.attr("href").is_some()
    }

    fn is_html_slot_element(&self) -> bool {
        false
    }

    fn has_id(&self, id: &Text, case_sensitivity: CaseSensitivity) -> bool {
        self.node()
            .element
            .value("id")
            .is_some_and(|own| case_sensitivity.eq(own.as_bytes(), id.0.as_bytes()))
    }

    fn has_class(&self, name: &Text, case_sensitivity: CaseSensitivity) -> bool {
        self.node()
            .classes
            .iter()
            .any(|class| case_sensitivity.eq(class.as_bytes(), name.0.as_bytes()))
    }

    fn has_custom_state(&self, _name: &Text) -> bool {
        false
    }

    fn imported_part(&self, _name: &Text) -> Option<Text> {
        None
    }

    fn is_part(&self, _name: &Text) -> bool {
        false
    }

    fn is_empty(&self) -> bool {
        let node = self.node();
        node.children.is_empty() && node.text.is_empty()
    }

    fn is_root(&self) -> bool {
        let node = self.node();
        node.parent.is_none() && node.name == "html"
    }

    fn add_element_unique_hashes(&self, _filter: &mut BloomFilter) -> bool {
        false
    }
}

/// Where a selector's subject can be found quickly: its id, a class, or its tag name, from the
/// rightmost compound selector (like a browser's rule hash); `Any` when it names none.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Bucket {
    Id(String),
    Class(String),
    Tag(String),
    Any,
}

/// The bucket of `selector` (for `.a::before`, that of `.a`).
pub(crate) fn bucket(selector: &Selector<Simple>) -> Bucket {
    let mut components = selector.iter_raw_match_order().peekable();
    if matches!(components.peek(), Some(Component::PseudoElement(_))) {
        for component in components.by_ref() {
            if matches!(component, Component::Combinator(_)) {
                break;
            }
        }
    }
    let mut found = Bucket::Any;
    for component in components {
        match component {
            Component::Combinator(_) => break,
            Component::ID(id) => return Bucket::Id(id.0.clone()),
            Component::Class(class) if !matches!(found, Bucket::Class(_)) => {
                found = Bucket::Class(class.0.clone());
            }
            Component::LocalName(name) if found == Bucket::Any => {
                found = Bucket::Tag(name.lower_name.0.clone());
            }
            _ => {}
        }
    }
    found
}

/// Whether `selector` matches element `index` of `document`; for a `::before` or `::after`
/// selector, whether it matches their originating element.
pub(crate) fn matches(
    selector: &Selector<Simple>,
    document: &Document,
    index: usize,
    caches: &mut SelectorCaches,
) -> bool {
    let element = El { document, index };
    let pseudo = selector.pseudo_element();
    let mode = if pseudo.is_some() {
        MatchingMode::ForStatelessPseudoElement
    } else {
        MatchingMode::Normal
    };
    let mut context = MatchingContext::new(
        mode,
        None,
        caches,
        QuirksMode::NoQuirks,
        NeedsSelectorFlags::No,
        MatchingForInvalidation::No,
    );
    let before_or_after =
        |pe: &PseudoElement| matches!(pe, PseudoElement::Before | PseudoElement::After);
    if pseudo.is_some() {
        context.pseudo_element_matching_fn = Some(&before_or_after);
    }
    matches_selector(selector, 0, None, &element, &mut context)
}
