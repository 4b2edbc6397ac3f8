//! Step 1, too: the annotated function, and what the macro needs to know about it that a `.policy`
//! file cannot say: is it async, what does it return, what does it take.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens as _;
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

/// `#[async_trait]` (the form of tonic-build's service traits) rewrites
/// `async fn f(..) -> T { body }` into
/// `fn f<'life0, 'async_trait>(..) -> Pin<Box<dyn Future<Output = T> + Send + 'async_trait>> {
/// Box::pin(async move { body }) }` before an attribute on the method sees it. This reads that
/// form back into the `async fn` it was (`T` and the async block's body), so the attributes
/// expand as on any `async fn`; [`rewrap`] then puts the expansion back in the form the trait
/// expects. Returns the rewritten return type to put back, `None` for any other function.
pub(crate) fn unwrap_async_trait(item: &mut ItemFn) -> Option<ReturnType> {
    if item.sig.asyncness.is_some() {
        return None;
    }
    let ReturnType::Type(arrow, ty) = &item.sig.output else {
        return None;
    };
    let output = future_output(ty)?;
    let [syn::Stmt::Expr(syn::Expr::Call(call), None)] = item.block.stmts.as_slice() else {
        return None;
    };
    let syn::Expr::Path(callee) = &*call.func else {
        return None;
    };
    let segments: Vec<String> = callee
        .path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    if !segments.ends_with(&["Box".to_owned(), "pin".to_owned()]) || call.args.len() != 1 {
        return None;
    }
    let Some(syn::Expr::Async(body)) = call.args.first() else {
        return None;
    };
    body.capture?;
    let block = body.block.clone();
    let original = item.sig.output.clone();
    item.sig.asyncness = Some(syn::token::Async(item.sig.fn_token.span));
    item.sig.output = ReturnType::Type(*arrow, Box::new(output));
    *item.block = block;
    Some(original)
}

/// `T` of `Pin<Box<dyn Future<Output = T> + ..>>`.
fn future_output(ty: &Type) -> Option<Type> {
    let inner = |ty: &Type, name: &str| -> Option<Type> {
        let Type::Path(path) = ty else { return None };
        let last = path.path.segments.last()?;
        if last.ident != name {
            return None;
        }
        let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
            return None;
        };
        match args.args.first()? {
            syn::GenericArgument::Type(ty) => Some(ty.clone()),
            _ => None,
        }
    };
    let boxed = inner(ty, "Pin")?;
    let Type::TraitObject(object) = inner(&boxed, "Box")? else {
        return None;
    };
    object.bounds.iter().find_map(|bound| {
        let syn::TypeParamBound::Trait(bound) = bound else {
            return None;
        };
        let last = bound.path.segments.last()?;
        if last.ident != "Future" {
            return None;
        }
        let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
            return None;
        };
        args.args.iter().find_map(|arg| match arg {
            syn::GenericArgument::AssocType(assoc) if assoc.ident == "Output" => {
                Some(assoc.ty.clone())
            }
            _ => None,
        })
    })
}

/// The expansion of a function [`unwrap_async_trait`] read, put back in `#[async_trait]`'s
/// form: not `async`, returning `output`, its body boxed and pinned. The expansion's other
/// items (a `compile_error!` beside the function as written) stay as they are.
pub(crate) fn rewrap(expanded: TokenStream, output: &ReturnType) -> TokenStream {
    match syn::parse2::<syn::File>(expanded.clone()) {
        Ok(file) => file
            .items
            .into_iter()
            .map(|item| match item {
                syn::Item::Fn(item) => rewrap_item(item, output).to_token_stream(),
                other => other.to_token_stream(),
            })
            .collect(),
        Err(_) => expanded,
    }
}

/// [`rewrap`] on a parsed function.
fn rewrap_item(mut item: ItemFn, output: &ReturnType) -> ItemFn {
    item.sig.asyncness = None;
    item.sig.output = output.clone();
    let block = &item.block;
    *item.block = syn::parse_quote!({ ::std::boxed::Box::pin(async move #block) });
    item
}
