//! The `#[tool]` attribute of portcullis. Use it through the `portcullis` crate, which
//! re-exports it; the generated code refers to `::portcullis::__private` (override the path
//! with `#[tool(crate = "...")]`).

use proc_macro::TokenStream;

mod expand;
mod options;
mod params;
mod sensitive;
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
/// Parameters: `&CallContext` (injected, at most once), arguments with `///` docs,
/// `#[validate(...)]`, `#[serde(default)]`, `#[serde(rename = "...")]`, `#[sensitive]`,
/// `#[tenant]`, `#[environment]` and `#[one_of(path)]` (allowed values from a
/// `fn(&CallContext) -> Vec<T>`), or one `#[args]` parameter of your own type.
///
/// ```text
/// /// Delete one record from a table.
/// #[tool(risk = "high", role = "admin", rollback = restore_record)]
/// async fn delete_record(ctx: &CallContext, table: String, #[validate(range(min = 1))] id: u64)
///     -> Result<Deleted, ToolError> { ... }
/// ```
///
/// The `portcullis` crate's documentation has a runnable example, and its README the full
/// reference.
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
