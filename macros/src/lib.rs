//! The `#[tool]` attribute of portcullis. Use it through the `portcullis` crate, which
//! re-exports it; the generated code refers to `::portcullis::__private` (override the path
//! with `#[tool(crate = "...")]`).

#![deny(missing_docs)]

use proc_macro::TokenStream;

mod expand;
mod options;
mod params;
mod sensitive;
mod sourced;
mod wire_fields;

/// Turns a plain function into a gated tool.
///
/// On `fn name(...) -> Result<T, E>` (sync or async; `T: Serialize`, `E: Into<ToolError>`) it
/// keeps the function as written and generates `NameArgs` (the arguments struct: serde with
/// unknown fields refused, JSON Schema, validator constraints) and the unit type `Name`, which
/// implements `Tool` and is what you register.
///
/// Keys: `name = "..."`, `description = "..."` (default: the doc comment), `risk = "low" |
/// "medium" | "high" | "critical"`, `role = "x"` or `roles = ["x", "y"]`, `rollback = path`
/// (an `async fn(&CallContext, &NameArgs, &T) -> Result<(), ToolError>`), `irreversible =
/// "reason"`, `approval = "never" | "required" | path` (a `fn(&CallContext, &NameArgs) ->
/// bool`), `approver = "role"` (the role a reviewer must hold), `caller_confirms` (the caller
/// may confirm its own calls, which then wait for that confirmation; not on a critical tool),
/// `audit_required = true | false`
/// (record the call as about to run before it runs; default: medium risk and above unless
/// `read_only`), `idempotent`, `open_world = false`, `read_only`, `cost = N`, `timeout_ms = N`
/// (async tools), `crate = "path"`.
///
/// Provenance keys: `output = "trusted"` (the tool's output is a trusted source of later
/// calls' values: data the user owns and no third party can write; `"untrusted"`, the default,
/// may be written too) or `trusted_output = ["/*/recipient", "/id"]` (only the values at these
/// JSON pointers into the output are trusted; `*` stands for every element of a list or value
/// of a map); a trusted output vouches for the whole values it returns, not for the words
/// inside them. `trusted_prose = ["/notes"]` trusts the text at these pointers word for word,
/// as the user's own words, and `output = "trusted_prose"` all of it: for prose no third
/// party can write a word of. `on_untrusted = "refuse" | "approve"` (a call with a value
/// found only in untrusted sources is refused with `untrusted_value`, the default, or waits
/// for a human; only on a tool with an argument that may declare `#[from]`),
/// `after_untrusted = "approve" | "refuse"` (once the task has read untrusted content, every
/// call of the tool waits for a human, or is refused with `untrusted_task`).
///
/// Parameters: `&CallContext` (injected, at most once), arguments with `///` docs,
/// `#[validate(...)]`, `#[serde(default)]`, `#[serde(rename = "...")]`, `#[sensitive]`,
/// `#[tenant]`, `#[environment]`, `#[one_of(path)]` (allowed values from a
/// `fn(&CallContext) -> Vec<T>`) and `#[from(...)]` (where the value must come from:
/// `#[from(user)]`, `#[from(user, trusted)]` for the user or a trusted tool's output, with
/// `entities` added to require it of the links, e-mail addresses, IBANs and phone numbers
/// inside a text rather than of the whole text; the words in any order), or one `#[args]`
/// parameter of your own type. An argument whose type has `#[derive(Sourced)]`
/// carries its fields' `#[from]` declarations. `#[from]` refuses types whose values cannot be
/// found in a source: floats, `bool`, maps and `serde_json::Value`, and `entities` on anything
/// but a text.
///
/// ```text
/// /// Delete one record from a table.
/// #[tool(risk = "high", role = "admin", rollback = restore_record)]
/// async fn delete_record(ctx: &CallContext, table: String, #[validate(range(min = 1))] id: u64)
///     -> Result<Deleted, ToolError> { ... }
/// ```
///
/// The `portcullis` crate's documentation has a runnable example, and its guide page
/// `portcullis::guide::attribute` the full reference.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item: proc_macro2::TokenStream = item.into();
    let function = match syn::parse2::<syn::Item>(item) {
        Ok(syn::Item::Fn(function)) => function,
        Ok(other) => {
            return syn::Error::new_spanned(
                other,
                "`#[tool]` goes on a free function (`fn` or `async fn`)",
            )
            .to_compile_error()
            .into();
        }
        Err(error) => return error.to_compile_error().into(),
    };
    let expanded = options::ToolOptions::parse(attr.into())
        .and_then(|options| expand::expand(options, function.clone()));
    match expanded {
        Ok(tokens) => tokens.into(),
        // Keep the function, without our attributes, so that its callers and the attributes
        // rustc does not know add no errors of their own.
        Err(error) => {
            let mut function = function;
            params::strip_attributes(&mut function.sig);
            let mut tokens = error.to_compile_error();
            tokens.extend(quote::quote!(#function));
            tokens.into()
        }
    }
}

/// Finds the `#[sensitive]` fields of a struct the arguments hold, so that their values are
/// redacted in audit records and tickets and never repeated in a refusal, wherever the
/// arguments hold the struct (an `#[args]` struct, a parameter's type, inside lists, maps and
/// options).
///
/// ```text
/// #[derive(Deserialize, Serialize, JsonSchema, Validate, Sensitive)]
/// #[serde(deny_unknown_fields)]
/// struct Login {
///     user: String,
///     #[sensitive]
///     password: String,
/// }
/// ```
#[proc_macro_derive(Sensitive, attributes(sensitive))]
pub fn derive_sensitive(item: TokenStream) -> TokenStream {
    match syn::parse::<syn::DeriveInput>(item).and_then(sensitive::derive) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}

/// Finds the `#[from(...)]` fields of a struct the arguments hold, so that each value's
/// declared sources hold wherever the arguments hold the struct (an `#[args]` struct, a
/// parameter's type, inside lists, maps and options): the contract lists `/payee/iban`,
/// `/payees/*/iban`. Field names follow serde's `rename` and `rename_all` as the canonical
/// arguments write them.
///
/// ```text
/// #[derive(Deserialize, Serialize, JsonSchema, Validate, Sourced)]
/// #[serde(deny_unknown_fields)]
/// struct Payee {
///     #[from(user, trusted)]
///     iban: String,
///     #[from(user, trusted, entities)]
///     note: String,
/// }
/// ```
#[proc_macro_derive(Sourced, attributes(from))]
pub fn derive_sourced(item: TokenStream) -> TokenStream {
    match syn::parse::<syn::DeriveInput>(item).and_then(sourced::derive) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}
