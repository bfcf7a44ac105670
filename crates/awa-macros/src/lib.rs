//! `#[derive(Job)]` for Awa's typed jobs.
//!
//! Owns: turning a struct's `#[awa(...)]` attributes into an `awa::Job`
//! implementation (kind name, queue, default priority and max attempts).
//! Does not own: the trait itself, validation of queue names (done by
//! `awa` when a job is inserted or a handler registered, with the same
//! rules as everywhere else), or serialization (the struct derives serde's
//! `Serialize` and `Deserialize` itself).
//!
//! ```ignore
//! #[derive(serde::Serialize, serde::Deserialize, awa::Job)]
//! #[awa(kind = "send_welcome", queue = "email", priority = 1, max_attempts = 5)]
//! struct SendWelcome { user_id: i64 }
//! ```
//!
//! Without `kind`, the kind is the struct's name in snake case
//! (`SendWelcome` -> `send_welcome`); without `queue`, `default`.

use proc_macro::TokenStream;
use quote::quote;
use syn::{DeriveInput, LitInt, LitStr, parse_macro_input};

/// Implement `awa::Job` for a serde struct or enum. Attributes, all
/// optional, in `#[awa(...)]`: `kind = "..."`, `queue = "..."`,
/// `priority = N` (4 runs first, 1 last; default 2), `max_attempts = N`.
#[proc_macro_derive(Job, attributes(awa))]
pub fn derive_job(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(tokens) => tokens.into(),
        Err(err) => err.to_compile_error().into(),
    }
}

/// Longest kind name the database accepts (`awa_core::NewJob::MAX_KIND_LEN`).
const MAX_KIND_LEN: usize = 255;

#[derive(Default)]
struct Attrs {
    kind: Option<LitStr>,
    queue: Option<LitStr>,
    priority: Option<LitInt>,
    max_attempts: Option<LitInt>,
}

fn expand(input: &DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    let mut attrs = Attrs::default();
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("awa")) {
        attr.parse_nested_meta(|meta| {
            let key = meta
                .path
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_default();
            let slot_taken = |taken: bool| {
                if taken {
                    Err(meta.error(format!("`{key}` is given twice")))
                } else {
                    Ok(())
                }
            };
            match key.as_str() {
                "kind" => {
                    slot_taken(attrs.kind.is_some())?;
                    attrs.kind = Some(meta.value()?.parse()?);
                }
                "queue" => {
                    slot_taken(attrs.queue.is_some())?;
                    attrs.queue = Some(meta.value()?.parse()?);
                }
                "priority" => {
                    slot_taken(attrs.priority.is_some())?;
                    attrs.priority = Some(meta.value()?.parse()?);
                }
                "max_attempts" => {
                    slot_taken(attrs.max_attempts.is_some())?;
                    attrs.max_attempts = Some(meta.value()?.parse()?);
                }
                _ => {
                    return Err(meta.error(
                        "unknown awa attribute: expected kind, queue, priority or max_attempts",
                    ));
                }
            }
            Ok(())
        })?;
    }

    let kind = match &attrs.kind {
        Some(lit) => {
            let value = lit.value();
            if value.trim().is_empty() || value.len() > MAX_KIND_LEN {
                return Err(syn::Error::new(
                    lit.span(),
                    format!("a job kind must be 1 to {MAX_KIND_LEN} bytes and not blank"),
                ));
            }
            value
        }
        None => snake_case(&input.ident.to_string()),
    };
    let queue = attrs
        .queue
        .as_ref()
        .map(LitStr::value)
        .unwrap_or_else(|| "default".to_string());
    let priority = match &attrs.priority {
        Some(lit) => {
            let p: i16 = lit.base10_parse()?;
            if !(1..=4).contains(&p) {
                return Err(syn::Error::new(lit.span(), "priority must be 1 to 4"));
            }
            quote! { ::core::option::Option::Some(#p) }
        }
        None => quote! { ::core::option::Option::None },
    };
    let max_attempts = match &attrs.max_attempts {
        Some(lit) => {
            let n: i32 = lit.base10_parse()?;
            if n < 1 {
                return Err(syn::Error::new(
                    lit.span(),
                    "max_attempts must be at least 1",
                ));
            }
            quote! { ::core::option::Option::Some(#n) }
        }
        None => quote! { ::core::option::Option::None },
    };

    let name = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    Ok(quote! {
        impl #impl_generics ::awa::Job for #name #ty_generics #where_clause {
            const KIND: &'static str = #kind;
            const QUEUE: &'static str = #queue;
            const PRIORITY: ::core::option::Option<i16> = #priority;
            const MAX_ATTEMPTS: ::core::option::Option<i32> = #max_attempts;
        }
    })
}

/// `SendWelcome` -> `send_welcome`, `HTTPFetch` -> `http_fetch`.
fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev_lower =
                i > 0 && (chars[i - 1].is_lowercase() || chars[i - 1].is_ascii_digit());
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let prev_upper = i > 0 && chars[i - 1].is_uppercase();
            if i > 0 && (prev_lower || (prev_upper && next_lower)) {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::snake_case;

    #[test]
    fn kinds_default_to_the_snake_case_name() {
        assert_eq!(snake_case("SendWelcome"), "send_welcome");
        assert_eq!(snake_case("HTTPFetch"), "http_fetch");
        assert_eq!(snake_case("Resize2x"), "resize2x");
        assert_eq!(snake_case("V2Import"), "v2_import");
        assert_eq!(snake_case("job"), "job");
    }
}
