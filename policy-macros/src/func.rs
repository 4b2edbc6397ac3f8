//! Step 1, too: the annotated function, and what the macro needs to know about it that a `.policy`
//! file cannot say: is it async, what does it return, what does it take.

use proc_macro2::{Span, TokenStream};
use syn::spanned::Spanned as _;
use syn::{FnArg, ItemFn, Pat, ReturnType, Type};

/// One parameter, as the function declares it.
pub(crate) enum Param {
    /// `self`, `&self`, `&mut self`, `mut self`.
    Receiver(syn::Receiver),
    /// `pattern: Type`.
    Typed(Box<Pat>, Box<Type>),
}

/// The parsed function.
pub(crate) struct Func {
    pub(crate) item: ItemFn,
}

impl Func {
    /// Parses the item the attribute is on; anything but a function with a body is an error.
    pub(crate) fn parse(item: TokenStream) -> syn::Result<Self> {
        match syn::parse2::<ItemFn>(item.clone()) {
            Ok(item) => Ok(Self { item }),
            Err(_) => Err(syn::Error::new(
                item.clone()
                    .into_iter()
                    .next()
                    .map_or(Span::call_site(), |t| t.span()),
                "policy attributes go on a function with a body: `async fn name(..) -> Result<T, E> { .. }`",
            )),
        }
    }

    pub(crate) fn name(&self) -> String {
        self.item.sig.ident.to_string()
    }

    pub(crate) fn ident_span(&self) -> Span {
        self.item.sig.ident.span()
    }

    pub(crate) fn is_async(&self) -> bool {
        self.item.sig.asyncness.is_some()
    }

    /// The `fn` token, where "not async" errors point.
    pub(crate) fn fn_span(&self) -> Span {
        self.item.sig.fn_token.span
    }

    /// The declared return type, `None` for `()`.
    pub(crate) fn output(&self) -> Option<&Type> {
        match &self.item.sig.output {
            ReturnType::Default => None,
            ReturnType::Type(_, ty) => match &**ty {
                Type::Tuple(tuple) if tuple.elems.is_empty() => None,
                ty => Some(ty),
            },
        }
    }

    /// Where return-type errors point: the type, or the signature when there is none.
    pub(crate) fn output_span(&self) -> Span {
        match &self.item.sig.output {
            ReturnType::Default => self.item.sig.paren_token.span.close(),
            ReturnType::Type(_, ty) => ty.span(),
        }
    }

    pub(crate) fn params(&self) -> Vec<Param> {
        self.item
            .sig
            .inputs
            .iter()
            .map(|arg| match arg {
                FnArg::Receiver(receiver) => Param::Receiver(receiver.clone()),
                FnArg::Typed(typed) => Param::Typed(typed.pat.clone(), typed.ty.clone()),
            })
            .collect()
    }

    pub(crate) fn receiver(&self) -> Option<&syn::Receiver> {
        self.item.sig.inputs.iter().find_map(|arg| match arg {
            FnArg::Receiver(receiver) => Some(receiver),
            FnArg::Typed(_) => None,
        })
    }
}

/// Whether `ty` is `Result<(), _>` (by its last path segment, so `io::Result<()>` counts).
pub(crate) fn is_unit_result(ty: &Type) -> bool {
    let Type::Path(path) = ty else {
        return false;
    };
    let Some(last) = path.path.segments.last() else {
        return false;
    };
    if last.ident != "Result" {
        return false;
    }
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return false;
    };
    matches!(
        args.args.first(),
        Some(syn::GenericArgument::Type(Type::Tuple(t))) if t.elems.is_empty()
    )
}
