//! `#[derive(Sensitive)]`: the `#[sensitive]` fields of a type the arguments hold, as JSON
//! pointers, found through every type and container down to them.

use proc_macro2::TokenStream;
use quote::quote;
use syn::punctuated::Punctuated;
use syn::{Data, DeriveInput, Expr, ExprLit, Fields, Lit, LitStr, Meta, Token};

pub(crate) fn derive(input: DeriveInput) -> syn::Result<TokenStream> {
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "`#[derive(Sensitive)]` reads the fields of a struct: keep sensitive values in a struct with named fields",
        ));
    };
    let Fields::Named(fields) = &data.fields else {
        return Err(syn::Error::new_spanned(
            &data.fields,
            "`#[derive(Sensitive)]` needs named fields: they are the names the model sends",
        ));
    };
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            "`#[derive(Sensitive)]` takes no generic type: the arguments a model sends have concrete types",
        ));
    }
    let mut pointers = Vec::new();
    for field in &fields.named {
        if let Some(flatten) = serde_metas(&field.attrs)
            .into_iter()
            .find(|meta| meta.path().is_ident("flatten"))
        {
            return Err(syn::Error::new_spanned(
                flatten,
                "a flattened field hides where its sensitive values are: keep it a field of its own",
            ));
        }
        let ident = field.ident.as_ref().expect("named fields have names");
        let rust_name = ident.to_string().trim_start_matches("r#").to_owned();
        // The name the model sends and the name the canonical arguments write, where they
        // differ: a refusal speaks of the one, the audit and the ticket show the other.
        let mut names = Vec::new();
        for side in ["deserialize", "serialize"] {
            let name = match field_rename(&field.attrs, side) {
                Some(rename) => rename,
                None => match container_rename_all(&input.attrs, side)? {
                    Some(rule) => apply_rename_all(&rule, &rust_name),
                    None => rust_name.clone(),
                },
            };
            if !names.contains(&name) {
                names.push(name);
            }
        }
        for wire_name in names {
            let pointer = format!("/{}", wire_name.replace('~', "~0").replace('/', "~1"));
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

fn serde_metas(attrs: &[syn::Attribute]) -> Vec<Meta> {
    attrs
        .iter()
        .filter(|attr| attr.path().is_ident("serde"))
        .filter_map(|attr| {
            attr.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
                .ok()
        })
        .flatten()
        .collect()
}

/// The name a `rename = "..."` or `rename(deserialize = "...")` gives to `side` (`serialize`
/// or `deserialize`).
fn renamed(meta: &Meta, key: &str, side: &str) -> Option<LitStr> {
    if !meta.path().is_ident(key) {
        return None;
    }
    let text = |expr: &Expr| match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(text),
            ..
        }) => Some(text.clone()),
        _ => None,
    };
    match meta {
        Meta::NameValue(name_value) => text(&name_value.value),
        Meta::List(list) => list
            .parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
            .ok()?
            .into_iter()
            .find_map(|inner| match inner {
                Meta::NameValue(name_value) if name_value.path.is_ident(side) => {
                    text(&name_value.value)
                }
                _ => None,
            }),
        Meta::Path(_) => None,
    }
}

fn field_rename(attrs: &[syn::Attribute], side: &str) -> Option<String> {
    serde_metas(attrs)
        .iter()
        .find_map(|meta| renamed(meta, "rename", side))
        .map(|text| text.value())
}

const RULES: &[&str] = &[
    "lowercase",
    "UPPERCASE",
    "PascalCase",
    "camelCase",
    "snake_case",
    "SCREAMING_SNAKE_CASE",
    "kebab-case",
    "SCREAMING-KEBAB-CASE",
];

fn container_rename_all(attrs: &[syn::Attribute], side: &str) -> syn::Result<Option<String>> {
    let Some(rule) = serde_metas(attrs)
        .iter()
        .find_map(|meta| renamed(meta, "rename_all", side))
    else {
        return Ok(None);
    };
    if !RULES.contains(&rule.value().as_str()) {
        return Err(syn::Error::new_spanned(
            &rule,
            format!("unknown `rename_all` rule: use one of {}", RULES.join(", ")),
        ));
    }
    Ok(Some(rule.value()))
}

/// A snake_case field name under a serde `rename_all` rule.
fn apply_rename_all(rule: &str, field: &str) -> String {
    let words: Vec<&str> = field.split('_').filter(|word| !word.is_empty()).collect();
    let capitalized = |word: &str| {
        let mut chars = word.chars();
        chars
            .next()
            .map(|first| first.to_uppercase().chain(chars).collect::<String>())
            .unwrap_or_default()
    };
    match rule {
        "lowercase" => field.to_lowercase(),
        "UPPERCASE" => field.to_uppercase(),
        "PascalCase" => words.iter().map(|word| capitalized(word)).collect(),
        "camelCase" => words
            .iter()
            .enumerate()
            .map(|(index, word)| {
                if index == 0 {
                    (*word).to_owned()
                } else {
                    capitalized(word)
                }
            })
            .collect(),
        "SCREAMING_SNAKE_CASE" => field.to_uppercase(),
        "kebab-case" => field.replace('_', "-"),
        "SCREAMING-KEBAB-CASE" => field.replace('_', "-").to_uppercase(),
        _ => field.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rename_all_rules_follow_serde() {
        assert_eq!(apply_rename_all("camelCase", "card_number"), "cardNumber");
        assert_eq!(apply_rename_all("PascalCase", "card_number"), "CardNumber");
        assert_eq!(apply_rename_all("kebab-case", "card_number"), "card-number");
        assert_eq!(
            apply_rename_all("SCREAMING_SNAKE_CASE", "card_number"),
            "CARD_NUMBER"
        );
        assert_eq!(apply_rename_all("snake_case", "card_number"), "card_number");
    }
}
