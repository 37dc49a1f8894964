//! Where a value must come from: `#[from(...)]` on a tool's parameter or on a struct's field,
//! the types it can judge, and `#[derive(Sourced)]`, which finds the `#[from]` fields of a type
//! the arguments hold through every type and container down to them.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, DeriveInput, Expr, ExprLit, Ident, Lit, Meta, Token, Type};

use crate::wire_fields::{pointer, serde_metas, wire_fields};

/// What `#[from(...)]` declared.
pub(crate) struct FromSources {
    /// `trusted`: a trusted tool's output is a source too, besides the user.
    trusted: bool,
    /// `entities`: the entities inside the text must be found, not the whole text.
    entities: bool,
}

impl FromSources {
    /// The `Sources` it names, under `private`.
    pub(crate) fn sources(&self, private: &TokenStream) -> TokenStream {
        if self.trusted {
            quote!(#private::Sources::UserOrTrusted)
        } else {
            quote!(#private::Sources::User)
        }
    }

    /// The `Matching` it names, under `private`.
    pub(crate) fn matching(&self, private: &TokenStream) -> TokenStream {
        if self.entities {
            quote!(#private::Matching::Entities)
        } else {
            quote!(#private::Matching::Whole)
        }
    }
}

const FORMS: &str = "write `#[from(user)]`, or `#[from(user, trusted)]` to accept the output of a tool declared `output = \"trusted\"` too, and add `entities` to judge the links, e-mail addresses, IBANs and phone numbers inside a text instead of the whole text";

/// Reads `#[from(...)]` on a value of type `ty`, and refuses a type it cannot judge.
pub(crate) fn from_sources(attr: &Attribute, ty: &Type) -> syn::Result<FromSources> {
    let words = match &attr.meta {
        Meta::List(list) if !list.tokens.is_empty() => list
            .parse_args_with(Punctuated::<Ident, Token![,]>::parse_terminated)
            .map_err(|_| {
                syn::Error::new_spanned(
                    &list.tokens,
                    format!("`#[from]` takes words, not strings or values: {FORMS}"),
                )
            })?,
        _ => {
            return Err(syn::Error::new_spanned(
                attr,
                format!("`#[from]` needs the sources the value may come from: {FORMS}"),
            ));
        }
    };
    let (mut user, mut trusted, mut entities) = (false, false, false);
    for word in &words {
        let seen = match word.to_string().as_str() {
            "user" => &mut user,
            "trusted" => &mut trusted,
            "entities" => &mut entities,
            other => {
                return Err(syn::Error::new_spanned(
                    word,
                    format!("unknown word `{other}` in `#[from]`: {FORMS}"),
                ));
            }
        };
        if *seen {
            return Err(syn::Error::new_spanned(
                word,
                format!("`{word}` is written twice in `#[from]`: keep one"),
            ));
        }
        *seen = true;
    }
    if !user {
        let written: Vec<String> = words.iter().map(ToString::to_string).collect();
        return Err(syn::Error::new_spanned(
            attr,
            format!(
                "the user is always a source of an argument's value: write `#[from(user, {})]`",
                written.join(", ")
            ),
        ));
    }
    check_judgeable(ty, entities)?;
    Ok(FromSources { trusted, entities })
}

/// Refuses a type whose values the provenance gate cannot find in a source.
fn check_judgeable(ty: &Type, entities: bool) -> syn::Result<()> {
    if let Some((offending, problem)) = unmatchable(ty) {
        return Err(syn::Error::new_spanned(offending, problem));
    }
    if entities && !is_text(ty) {
        return Err(syn::Error::new_spanned(
            ty,
            format!(
                "`entities` finds the links, e-mail addresses, IBANs and phone numbers inside a text, and `{}` is not a text: take the text as a `String` (or an `Option` or `Vec` of one), or remove `entities` to match the whole value",
                ty.to_token_stream().to_string().replace(' ', "")
            ),
        ));
    }
    Ok(())
}

/// The first part of `ty`, read syntactically, whose values cannot be found in a source, and
/// why.
fn unmatchable(ty: &Type) -> Option<(&Type, &'static str)> {
    match ty {
        Type::Path(path) if path.qself.is_none() => {
            let segments: Vec<String> = path
                .path
                .segments
                .iter()
                .map(|segment| segment.ident.to_string())
                .collect();
            let last = segments.last()?.as_str();
            let of_serde_json = match &segments[..] {
                [_] => path.path.leading_colon.is_none(),
                [.., module, _] => module == "serde_json",
                [] => false,
            };
            let problem = match last {
                "f32" | "f64" => Some(
                    "`#[from]` cannot judge a float: its decimal text is not the value the model sends (`0.1` is kept as 0.1000000000000000055...), so no source can be matched with it; take the amount as integer cents (`u64`) or as a decimal string (`String`)",
                ),
                "bool" => Some(
                    "`#[from]` cannot judge a `bool`: a yes/no value is in every text; require approval for the call instead (`approval = \"required\"`, or a predicate)",
                ),
                "HashMap" | "BTreeMap" | "IndexMap" => Some(
                    "`#[from]` cannot judge a map: its keys cannot be matched; take a list of entries instead (a `Vec` of a struct that holds the key as a field)",
                ),
                "Map" if of_serde_json => Some(
                    "`#[from]` cannot judge a map: its keys cannot be matched; take a list of entries instead (a `Vec` of a struct that holds the key as a field)",
                ),
                "Value" if of_serde_json => Some(
                    "`#[from]` cannot judge a `serde_json::Value`: it may hold a map, whose keys cannot be matched, or a yes/no; take a typed value (a list of entries for a map)",
                ),
                _ => None,
            };
            if let Some(problem) = problem {
                return Some((ty, problem));
            }
            path.path
                .segments
                .iter()
                .flat_map(|segment| match &segment.arguments {
                    syn::PathArguments::AngleBracketed(arguments) => arguments
                        .args
                        .iter()
                        .filter_map(|argument| match argument {
                            syn::GenericArgument::Type(inner) => Some(inner),
                            _ => None,
                        })
                        .collect(),
                    _ => Vec::new(),
                })
                .find_map(unmatchable)
        }
        Type::Array(array) => unmatchable(&array.elem),
        Type::Slice(slice) => unmatchable(&slice.elem),
        Type::Reference(reference) => unmatchable(&reference.elem),
        Type::Group(group) => unmatchable(&group.elem),
        Type::Paren(paren) => unmatchable(&paren.elem),
        Type::Tuple(tuple) => tuple.elems.iter().find_map(unmatchable),
        _ => None,
    }
}

/// Whether `ty` is a text, or an `Option`, `Box`, list, array or set of texts.
fn is_text(ty: &Type) -> bool {
    const CONTAINERS: &[&str] = &[
        "Option", "Box", "Vec", "VecDeque", "HashSet", "BTreeSet", "IndexSet",
    ];
    match ty {
        Type::Path(path) if path.qself.is_none() => {
            let Some(last) = path.path.segments.last() else {
                return false;
            };
            if last.ident == "String" || last.ident == "str" {
                return matches!(last.arguments, syn::PathArguments::None);
            }
            if !CONTAINERS.iter().any(|container| last.ident == container) {
                return false;
            }
            match &last.arguments {
                syn::PathArguments::AngleBracketed(arguments) => match arguments.args.first() {
                    Some(syn::GenericArgument::Type(inner)) => is_text(inner),
                    _ => false,
                },
                _ => false,
            }
        }
        Type::Array(array) => is_text(&array.elem),
        Type::Slice(slice) => is_text(&slice.elem),
        Type::Reference(reference) => is_text(&reference.elem),
        Type::Group(group) => is_text(&group.elem),
        Type::Paren(paren) => is_text(&paren.elem),
        _ => false,
    }
}

/// The serde attributes that would leave a `#[from]` field out of the canonical arguments, or
/// write it otherwise than the tool reads it: the gate judges what is written, so it would
/// judge nothing, or something else.
fn check_written_as_read(attrs: &[Attribute]) -> syn::Result<()> {
    for meta in serde_metas(attrs) {
        let key = meta
            .path()
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        let leaves_out = match (key.as_str(), &meta) {
            ("skip" | "skip_serializing" | "serialize_with", _) => true,
            // Leaving out `None` or an empty list leaves nothing out: there is nothing to judge.
            ("skip_serializing_if", Meta::NameValue(name_value)) => !matches!(
                &name_value.value,
                Expr::Lit(ExprLit { lit: Lit::Str(predicate), .. })
                    if predicate.value().ends_with("::is_none")
                        || predicate.value().ends_with("::is_empty")
            ),
            _ => false,
        };
        if leaves_out {
            return Err(syn::Error::new(
                meta.span(),
                format!(
                    "with `{key}`, the canonical arguments, which the provenance gate judges, would not hold this field as the tool reads it: remove `{key}` (`skip_serializing_if = \"Option::is_none\"` leaves nothing out and may stay)"
                ),
            ));
        }
    }
    Ok(())
}

pub(crate) fn derive(input: DeriveInput) -> syn::Result<TokenStream> {
    let mut rules = Vec::new();
    for wire_field in wire_fields(&input, "Sourced", "`#[from]` fields")? {
        let field = wire_field.field;
        let ty = &field.ty;
        let mut declared = None;
        for attr in field
            .attrs
            .iter()
            .filter(|attr| attr.path().is_ident("from"))
        {
            if declared.is_some() {
                return Err(syn::Error::new_spanned(
                    attr,
                    "`#[from]` is given twice: write one, e.g. `#[from(user, trusted)]`",
                ));
            }
            declared = Some(from_sources(attr, ty)?);
        }
        // The gate judges the canonical arguments, which the `Serialize` side writes.
        let pointer = pointer(&wire_field.written);
        rules.push(match declared {
            Some(declared) => {
                check_written_as_read(&field.attrs)?;
                let private = quote!(::portcullis::__private);
                let (from, matching) = (declared.sources(&private), declared.matching(&private));
                quote! {
                    rules.push(::portcullis::__private::SourceRule {
                        pointer: ::std::string::String::from(#pointer),
                        from: #from,
                        matching: #matching,
                    });
                }
            }
            None => quote! {
                for inner in {
                    use ::portcullis::__private::{HasSourcedFields as _, NoSourcedFields as _};
                    (&::portcullis::__private::SourcedProbe::<#ty>::new()).rules()
                } {
                    rules.push(::portcullis::__private::SourceRule {
                        pointer: ::std::format!("{}{}", #pointer, inner.pointer),
                        ..inner
                    });
                }
            },
        });
    }
    let name = &input.ident;
    Ok(quote! {
        impl ::portcullis::__private::SourcedFields for #name {
            fn source_rules() -> ::std::vec::Vec<::portcullis::__private::SourceRule> {
                let mut rules = ::std::vec::Vec::new();
                #(#rules)*
                rules
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(ty: Type) -> Option<String> {
        unmatchable(&ty).map(|(offending, _)| offending.to_token_stream().to_string())
    }

    #[test]
    fn unmatchable_types_are_found_inside_containers() {
        assert_eq!(problem(syn::parse_quote!(f64)).as_deref(), Some("f64"));
        assert_eq!(
            problem(syn::parse_quote!(Option<f32>)).as_deref(),
            Some("f32")
        );
        assert_eq!(
            problem(syn::parse_quote!([bool; 3])).as_deref(),
            Some("bool")
        );
        assert_eq!(
            problem(syn::parse_quote!(
                Vec<Box<std::collections::HashMap<String, u64>>>
            ))
            .as_deref(),
            Some("std :: collections :: HashMap < String , u64 >")
        );
        assert!(problem(syn::parse_quote!(serde_json::Value)).is_some());
        assert!(problem(syn::parse_quote!(Map<String, Value>)).is_some());
        assert!(problem(syn::parse_quote!(Vec<(String, u64)>)).is_none());
        assert!(problem(syn::parse_quote!(crate::ledger::Value)).is_none());
        assert!(problem(syn::parse_quote!(Option<Payee>)).is_none());
    }

    #[test]
    fn texts_are_strings_through_containers() {
        assert!(is_text(&syn::parse_quote!(String)));
        assert!(is_text(&syn::parse_quote!(&str)));
        assert!(is_text(&syn::parse_quote!(Option<String>)));
        assert!(is_text(&syn::parse_quote!(Vec<std::string::String>)));
        assert!(is_text(&syn::parse_quote!([String; 2])));
        assert!(!is_text(&syn::parse_quote!(u64)));
        assert!(!is_text(&syn::parse_quote!(Option<Payee>)));
        assert!(!is_text(&syn::parse_quote!(Vec<Vec<u8>>)));
    }

    #[test]
    fn from_reads_its_words_in_any_order() {
        let ty: Type = syn::parse_quote!(String);
        let read = |attr: Attribute| from_sources(&attr, &ty).map(|d| (d.trusted, d.entities));
        assert_eq!(
            read(syn::parse_quote!(#[from(entities, trusted, user)])).ok(),
            Some((true, true))
        );
        assert_eq!(
            read(syn::parse_quote!(#[from(user)])).ok(),
            Some((false, false))
        );
        assert!(read(syn::parse_quote!(#[from(trusted)])).is_err());
        assert!(read(syn::parse_quote!(#[from(user, user)])).is_err());
        assert!(read(syn::parse_quote!(#[from])).is_err());
        assert!(read(syn::parse_quote!(#[from("user")])).is_err());
    }
}
