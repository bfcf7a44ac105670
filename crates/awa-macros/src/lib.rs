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
//! #[awa(unique(by_args, period = "10m"))]
//! struct SendWelcome { user_id: i64 }
//! ```
//!
//! `timeout = "30s"` (humantime syntax, 1ms to 7days) becomes
//! `Job::TIMEOUT`, the kind's default timeout where a worker registers it.
//!
//! Without `kind`, the kind is the struct's name in snake case
//! (`SendWelcome` -> `send_welcome`); without `queue`, `default`.
//! `unique(...)` becomes `Job::unique()` (an `awa::Unique`): any of
//! `by_queue`, `by_args`, `fields("tenant", ...)`, `period = "10m"`
//! (humantime syntax, whole seconds) and `states("completed", ...)`;
//! `unique` alone is unique by kind. Periods and states are checked here,
//! at compile time, against the same rules `awa_core::Unique` applies.

use proc_macro::TokenStream;
use quote::quote;
use syn::{DeriveInput, LitInt, LitStr, parse_macro_input};

/// Implement `awa::Job` for a serde struct or enum. Attributes, all
/// optional, in `#[awa(...)]`: `kind = "..."`, `queue = "..."`,
/// `priority = N` (1 runs first, 4 last), `max_attempts = N`,
/// `timeout = "30s"` (the kind's default timeout, 1ms to 7days),
/// `unique(by_queue, by_args, fields("..."), period = "10m",
/// states("completed", "failed", "cancelled"))`.
#[proc_macro_derive(Job, attributes(awa))]
pub fn derive_job(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(tokens) => tokens.into(),
        Err(err) => err.to_compile_error().into(),
    }
}

/// The longest job timeout `awa_core::bounds::JOB_TIMEOUT` accepts.
const MAX_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);

/// Longest kind name the database accepts (`awa_core::NewJob::MAX_KIND_LEN`).
const MAX_KIND_LEN: usize = 255;

#[derive(Default)]
struct Attrs {
    kind: Option<LitStr>,
    queue: Option<LitStr>,
    priority: Option<LitInt>,
    max_attempts: Option<LitInt>,
    timeout: Option<LitStr>,
    unique: Option<UniqueAttr>,
}

/// `unique(...)`, checked.
#[derive(Default)]
struct UniqueAttr {
    by_queue: bool,
    by_args: bool,
    fields: Vec<String>,
    /// Whole seconds.
    period: Option<u64>,
    states: Option<Vec<String>>,
}

/// The longest period `awa_core::bounds::UNIQUE_PERIOD` accepts: 366 days.
const MAX_UNIQUE_PERIOD_SECS: u64 = 366 * 86_400;

/// The final states a key spec may keep (`awa_core::Unique::validate`).
const KEPT_STATES: [&str; 3] = ["completed", "failed", "cancelled"];

fn parse_unique(meta: &syn::meta::ParseNestedMeta<'_>) -> syn::Result<UniqueAttr> {
    let mut u = UniqueAttr::default();
    if meta.input.is_empty() || meta.input.peek(syn::Token![,]) {
        return Ok(u); // `unique` alone: by kind
    }
    meta.parse_nested_meta(|inner| {
        let key = inner
            .path
            .get_ident()
            .map(|i| i.to_string())
            .unwrap_or_default();
        match key.as_str() {
            "by_kind" => {}
            "by_queue" => u.by_queue = true,
            "by_args" => u.by_args = true,
            "fields" => {
                for lit in string_list(&inner)? {
                    let field = lit.value();
                    if field.is_empty() || field.len() > 255 {
                        return Err(syn::Error::new(
                            lit.span(),
                            "an args field name is 1 to 255 bytes",
                        ));
                    }
                    u.fields.push(field);
                }
            }
            "period" => {
                let lit: LitStr = inner.value()?.parse()?;
                let d = humantime::parse_duration(&lit.value()).map_err(|e| {
                    syn::Error::new(lit.span(), format!("period is not a duration ({e}): use e.g. \"10m\""))
                })?;
                if d.subsec_nanos() != 0 || d.as_secs() == 0 || d.as_secs() > MAX_UNIQUE_PERIOD_SECS {
                    return Err(syn::Error::new(
                        lit.span(),
                        "a unique period is whole seconds from 1s to 366days",
                    ));
                }
                u.period = Some(d.as_secs());
            }
            "states" => {
                let mut states = Vec::new();
                for lit in string_list(&inner)? {
                    if !KEPT_STATES.contains(&lit.value().as_str()) {
                        return Err(syn::Error::new(
                            lit.span(),
                            "states are final states that keep the key until the period ends: \
                             \"completed\", \"failed\" or \"cancelled\" (unfinished jobs always hold it)",
                        ));
                    }
                    states.push(lit.value());
                }
                u.states = Some(states);
            }
            _ => {
                return Err(inner.error(
                    "unknown unique option: expected by_kind, by_queue, by_args, fields(...), \
                     period = \"...\" or states(...)",
                ));
            }
        }
        Ok(())
    })?;
    if u.period.is_none() && u.states.as_ref().is_some_and(|s| !s.is_empty()) {
        return Err(meta.error(
            "keeping the key after the job finished (states) needs a period, e.g. period = \"10m\"",
        ));
    }
    Ok(u)
}

/// `("a", "b")` after an option's name.
fn string_list(inner: &syn::meta::ParseNestedMeta<'_>) -> syn::Result<Vec<LitStr>> {
    let content;
    syn::parenthesized!(content in inner.input);
    Ok(content
        .parse_terminated(
            |input: syn::parse::ParseStream<'_>| input.parse::<LitStr>(),
            syn::Token![,],
        )?
        .into_iter()
        .collect())
}

impl UniqueAttr {
    /// The body of `Job::unique()`.
    fn tokens(&self) -> proc_macro2::TokenStream {
        let by_queue = self.by_queue;
        let by_args = self.by_args;
        let fields = &self.fields;
        let period = match self.period {
            Some(secs) => quote! {
                ::core::option::Option::Some(::std::time::Duration::from_secs(#secs))
            },
            None => quote! { ::core::option::Option::None },
        };
        let states = match &self.states {
            Some(names) => {
                let states = names.iter().map(|n| {
                    let variant = match n.as_str() {
                        "completed" => quote! { Completed },
                        "failed" => quote! { Failed },
                        _ => quote! { Cancelled },
                    };
                    quote! { ::awa::JobState::#variant }
                });
                quote! { ::core::option::Option::Some(::std::vec![#(#states),*]) }
            }
            None => quote! { ::core::option::Option::None },
        };
        quote! {
            ::core::option::Option::Some(::awa::Unique {
                by_queue: #by_queue,
                by_args: #by_args,
                fields: ::std::vec![#(::std::string::String::from(#fields)),*],
                period: #period,
                states: #states,
            })
        }
    }
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
                "timeout" => {
                    slot_taken(attrs.timeout.is_some())?;
                    attrs.timeout = Some(meta.value()?.parse()?);
                }
                "unique" => {
                    slot_taken(attrs.unique.is_some())?;
                    attrs.unique = Some(parse_unique(&meta)?);
                }
                _ => {
                    return Err(meta.error(
                        "unknown awa attribute: expected kind, queue, priority, max_attempts, timeout or unique",
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

    let timeout = match &attrs.timeout {
        Some(lit) => {
            let d = humantime::parse_duration(&lit.value()).map_err(|e| {
                syn::Error::new(
                    lit.span(),
                    format!("timeout is not a duration ({e}): use e.g. \"30s\""),
                )
            })?;
            // awa_core::bounds::JOB_TIMEOUT: 1 ms to 7 days.
            if d < std::time::Duration::from_millis(1) || d > MAX_TIMEOUT {
                return Err(syn::Error::new(
                    lit.span(),
                    "a job timeout is from 1ms to 7days",
                ));
            }
            let ms = u64::try_from(d.as_millis()).expect("at most 7 days");
            quote! { ::core::option::Option::Some(::core::time::Duration::from_millis(#ms)) }
        }
        None => quote! { ::core::option::Option::None },
    };

    let unique = attrs.unique.as_ref().map(|u| {
        let body = u.tokens();
        quote! {
            fn unique() -> ::core::option::Option<::awa::Unique> {
                #body
            }
        }
    });

    let name = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    Ok(quote! {
        impl #impl_generics ::awa::Job for #name #ty_generics #where_clause {
            const KIND: &'static str = #kind;
            const QUEUE: &'static str = #queue;
            const PRIORITY: ::core::option::Option<i16> = #priority;
            const MAX_ATTEMPTS: ::core::option::Option<i32> = #max_attempts;
            const TIMEOUT: ::core::option::Option<::core::time::Duration> = #timeout;
            #unique
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
