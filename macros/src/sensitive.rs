//! `#[derive(Sensitive)]`: the `#[sensitive]` fields of a type the arguments hold, as JSON
//! pointers, found through every type and container down to them.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{DeriveInput, Meta};

use crate::wire_fields::{pointer, wire_fields};

pub(crate) fn derive(input: DeriveInput) -> syn::Result<TokenStream> {
    let mut pointers = Vec::new();
    for wire_field in wire_fields(&input, "Sensitive", "sensitive values")? {
        let field = wire_field.field;
        let marked = field
            .attrs
            .iter()
            .filter(|attr| attr.path().is_ident("sensitive"))
            .map(|attr| match attr.meta {
                Meta::Path(_) => Ok(()),
                _ => Err(syn::Error::new_spanned(
                    attr,
                    "`#[sensitive]` takes no value",
                )),
            })
            .collect::<syn::Result<Vec<()>>>()?;
        // The name the model sends and the name the canonical arguments write, where they
        // differ: a refusal speaks of the one, the audit and the ticket show the other.
        for wire_name in wire_field.names() {
            let pointer = pointer(wire_name);
            let ty = &field.ty;
            pointers.push(if marked.is_empty() {
                quote! {
                    for inner in {
                        use ::portcullis::__private::{HasSensitiveFields as _, NoSensitiveFields as _};
                        (&::portcullis::__private::SensitiveProbe::<#ty>::new()).pointers()
                    } {
                        pointers.push(::std::format!("{}{}", #pointer, inner));
                    }
                }
            } else {
                quote!(pointers.push(::std::string::String::from(#pointer));)
            });
        }
    }
    let name = &input.ident;
    Ok(quote! {
        impl ::portcullis::__private::SensitiveFields for #name {
            fn sensitive_pointers() -> ::std::vec::Vec<::std::string::String> {
                let mut pointers = ::std::vec::Vec::new();
                #(#pointers)*
                pointers
            }
        }
    })
}
