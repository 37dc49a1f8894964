//! The `#[tool]` attribute of portcullis. Use it through the `portcullis` crate, which
//! re-exports it; the generated code refers to `::portcullis::__private` (override the path
//! with `#[tool(crate = "...")]`).

use proc_macro::TokenStream;

mod expand;
mod options;
mod params;

/// Turns a plain function into a gated tool: see the `portcullis` crate's documentation and the
/// README's attribute reference.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item: proc_macro2::TokenStream = item.into();
    let function = match syn::parse2::<syn::Item>(item.clone()) {
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
        .and_then(|options| expand::expand(options, function));
    match expanded {
        Ok(tokens) => tokens.into(),
        // Keep the function so that its own uses do not add errors of their own.
        Err(error) => {
            let mut tokens = error.to_compile_error();
            tokens.extend(item);
            tokens.into()
        }
    }
}
