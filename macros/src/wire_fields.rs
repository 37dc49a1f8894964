//! The fields of a struct the arguments hold, by the names serde gives them on the wire: what
//! `#[derive(Sensitive)]` and `#[derive(Sourced)]` both read to write their JSON pointers.

use syn::punctuated::Punctuated;
use syn::{Data, DeriveInput, Expr, ExprLit, Field, Fields, Lit, LitStr, Meta, Token};

/// One named field of the struct.
pub(crate) struct WireField<'a> {
    pub(crate) field: &'a Field,
    /// The name the model sends (serde's `deserialize` side).
    pub(crate) sent: String,
    /// The name the canonical arguments write (serde's `serialize` side), which the gates read.
    pub(crate) written: String,
}

impl WireField<'_> {
    /// The field's names, the one the model sends first, each once.
    pub(crate) fn names(&self) -> Vec<&str> {
        if self.sent == self.written {
            vec![&self.sent]
        } else {
            vec![&self.sent, &self.written]
        }
    }
}

/// The field's JSON pointer from the struct: `/name`, escaped.
pub(crate) fn pointer(wire_name: &str) -> String {
    format!("/{}", wire_name.replace('~', "~0").replace('/', "~1"))
}

/// The named fields of the struct `#[derive(<derive>)]` is on, refusing what would hide where
/// `what` (its marked values) are: another shape than a struct with named fields, a generic
/// type, a flattened field.
pub(crate) fn wire_fields<'a>(
    input: &'a DeriveInput,
    derive: &str,
    what: &str,
) -> syn::Result<Vec<WireField<'a>>> {
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            format!(
                "`#[derive({derive})]` reads the fields of a struct: keep {what} in a struct with named fields"
            ),
        ));
    };
    let Fields::Named(fields) = &data.fields else {
        return Err(syn::Error::new_spanned(
            &data.fields,
            format!("`#[derive({derive})]` needs named fields: they are the names the model sends"),
        ));
    };
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            format!(
                "`#[derive({derive})]` takes no generic type: the arguments a model sends have concrete types"
            ),
        ));
    }
    if let Some(meta) = serde_metas(&input.attrs)
        .into_iter()
        .find(|meta| meta.path().is_ident("transparent") || meta.path().is_ident("into"))
    {
        return Err(syn::Error::new_spanned(
            &meta,
            format!(
                "with `{key}`, the canonical arguments would not hold this struct's fields under their names, and the gates find its {what} by those names: remove `{key}`",
                key = meta
                    .path()
                    .get_ident()
                    .map(ToString::to_string)
                    .unwrap_or_default()
            ),
        ));
    }
    let mut named = Vec::new();
    for field in &fields.named {
        if let Some(flatten) = serde_metas(&field.attrs)
            .into_iter()
            .find(|meta| meta.path().is_ident("flatten"))
        {
            return Err(syn::Error::new_spanned(
                flatten,
                format!("a flattened field hides where its {what} are: keep it a field of its own"),
            ));
        }
        let ident = field.ident.as_ref().expect("named fields have names");
        let rust_name = ident.to_string().trim_start_matches("r#").to_owned();
        let name_on = |side: &str| -> syn::Result<String> {
            Ok(match field_rename(&field.attrs, side) {
                Some(rename) => rename,
                None => match container_rename_all(&input.attrs, side)? {
                    Some(rule) => apply_rename_all(&rule, &rust_name),
                    None => rust_name.clone(),
                },
            })
        };
        named.push(WireField {
            field,
            sent: name_on("deserialize")?,
            written: name_on("serialize")?,
        });
    }
    Ok(named)
}

/// Every `key`, `key = value` and `key(...)` inside the `#[serde(...)]` attributes.
pub(crate) fn serde_metas(attrs: &[syn::Attribute]) -> Vec<Meta> {
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

    #[test]
    fn each_side_has_its_name() {
        let input: DeriveInput = syn::parse_quote! {
            #[serde(rename_all(serialize = "camelCase"))]
            struct Payment {
                card_number: String,
                #[serde(rename(deserialize = "to"))]
                recipient_iban: String,
                #[serde(rename = "a/b~c")]
                odd: String,
            }
        };
        let fields = wire_fields(&input, "Sourced", "`#[from]` fields").unwrap();
        let names: Vec<(&str, &str)> = fields
            .iter()
            .map(|field| (field.sent.as_str(), field.written.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("card_number", "cardNumber"),
                ("to", "recipientIban"),
                ("a/b~c", "a/b~c")
            ]
        );
        assert_eq!(fields[2].names(), ["a/b~c"]);
        assert_eq!(pointer("a/b~c"), "/a~1b~0c");
    }
}
