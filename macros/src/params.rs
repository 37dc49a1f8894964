//! The parameters of a tool function: the injected context, the arguments the model sends, or
//! one `#[args]` struct.

use proc_macro2::TokenStream;
use quote::quote;

use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{
    Attribute, Expr, ExprLit, FnArg, Ident, Lit, LitStr, Meta, Pat, Path, Signature, Token, Type,
};

use crate::sourced::{FromSources, from_sources};

/// What a scoping argument must match.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScopeMark {
    Tenant,
    Environment,
}

impl ScopeMark {
    fn attribute(self) -> &'static str {
        match self {
            ScopeMark::Tenant => "tenant",
            ScopeMark::Environment => "environment",
        }
    }
}

/// One parameter of the tool function, in declaration order.
pub(crate) enum Param {
    /// `&CallContext`, injected by the dispatcher.
    Context,
    /// An argument the model sends.
    Argument(Box<Argument>),
    /// `#[args] order: Order`: the whole arguments object is the user's own type.
    Args(Box<Type>),
}

pub(crate) struct Argument {
    /// The field of the generated arguments struct: the parameter's name.
    pub(crate) field: Ident,
    /// The name the model sees.
    pub(crate) wire_name: String,
    /// The name the canonical arguments write, which the provenance gate judges: the wire
    /// name, unless a rename names one side only.
    pub(crate) written_name: String,
    pub(crate) ty: Type,
    /// `#[doc]`, `#[serde]`, `#[validate]` and `#[schemars]`, for the generated field.
    pub(crate) field_attrs: Vec<Attribute>,
    /// Extra `#[schemars(...)]` that make the schema state what validator enforces but schemars
    /// leaves out.
    pub(crate) schema_attrs: Vec<TokenStream>,
    pub(crate) sensitive: bool,
    /// Marked `#[tenant]` or `#[environment]`: must name the caller's tenant or environment.
    pub(crate) scope: Option<ScopeMark>,
    /// `#[validate(nested)]` is written: validator already checks the type's own constraints.
    pub(crate) nested: bool,
    /// `#[one_of(path)]`: the function that gives the values the argument may take now.
    pub(crate) one_of: Option<Path>,
    /// `#[from(...)]`: the sources its value may come from.
    pub(crate) from: Option<FromSources>,
}

/// Reads the parameters and removes the attributes that are ours from the signature, so the
/// function itself compiles as written.
pub(crate) fn parse(sig: &mut Signature) -> syn::Result<Vec<Param>> {
    let mut params: Vec<(Param, TokenStream)> = Vec::new();
    let mut errors: Option<syn::Error> = None;
    let mut fail = |error: syn::Error| match &mut errors {
        Some(errors) => errors.combine(error),
        None => errors = Some(error),
    };
    for input in sig.inputs.iter_mut() {
        match input {
            FnArg::Receiver(receiver) => fail(syn::Error::new_spanned(
                receiver,
                "a tool is a free function: move it out of the `impl` block, or take what you need from `&CallContext` instead of `self`",
            )),
            FnArg::Typed(typed) => {
                let tokens = quote!(#typed);
                match parse_one(typed) {
                    Ok(param) => params.push((param, tokens)),
                    Err(error) => fail(error),
                }
            }
        }
    }
    let mut context_seen = false;
    let mut args_seen = false;
    let mut wire_names: Vec<&str> = Vec::new();
    let mut scopes_seen: Vec<ScopeMark> = Vec::new();
    for (param, tokens) in &params {
        match param {
            Param::Context if context_seen => fail(syn::Error::new_spanned(
                tokens,
                "a tool takes `&CallContext` at most once: remove this parameter",
            )),
            Param::Context => context_seen = true,
            Param::Args(_) if args_seen => fail(syn::Error::new_spanned(
                tokens,
                "a tool has at most one `#[args]` parameter: merge the two structs",
            )),
            Param::Args(_) => args_seen = true,
            Param::Argument(argument) => {
                if wire_names.contains(&argument.wire_name.as_str()) {
                    fail(syn::Error::new_spanned(
                        tokens,
                        format!(
                            "two arguments are named `{}` for the model: rename one",
                            argument.wire_name
                        ),
                    ));
                }
                wire_names.push(&argument.wire_name);
                if let Some(mark) = argument.scope {
                    if scopes_seen.contains(&mark) {
                        fail(syn::Error::new_spanned(
                            tokens,
                            format!("only one argument can be marked `#[{}]`", mark.attribute()),
                        ));
                    }
                    scopes_seen.push(mark);
                }
            }
        }
    }
    if args_seen
        && let Some((_, tokens)) = params
            .iter()
            .find(|(param, _)| matches!(param, Param::Argument(_)))
    {
        fail(syn::Error::new_spanned(
            tokens,
            "an `#[args]` parameter must be the only argument besides `&CallContext`: move this parameter into its struct",
        ));
    }
    match errors {
        Some(errors) => Err(errors),
        None => Ok(params.into_iter().map(|(param, _)| param).collect()),
    }
}

/// The attributes of ours that a parameter may carry; anything else stays on the function.
const PARAMETER_ATTRIBUTES: &[&str] = &[
    "doc",
    "schemars",
    "serde",
    "validate",
    "sensitive",
    "args",
    "tenant",
    "environment",
    "one_of",
    "from",
];

/// Removes our attributes from every parameter of `sig`, so that a function the macro refused
/// can still be emitted without adding errors about attributes rustc does not know.
pub(crate) fn strip_attributes(sig: &mut Signature) {
    for input in sig.inputs.iter_mut() {
        if let FnArg::Typed(typed) = input {
            typed.attrs.retain(|attr| {
                !PARAMETER_ATTRIBUTES
                    .iter()
                    .any(|name| attr.path().is_ident(name))
            });
        }
    }
}

fn is_call_context(ty: &Type) -> bool {
    matches!(ty, Type::Path(path) if path.path.segments.last().is_some_and(|last| last.ident == "CallContext"))
}

/// Refuses parameter types that cannot be arguments, and says whether this one is the context.
fn is_context(ty: &Type) -> syn::Result<bool> {
    match ty {
        Type::Reference(reference) if is_call_context(&reference.elem) => {
            if reference.mutability.is_some() {
                return Err(syn::Error::new_spanned(
                    ty,
                    "take the context as `&CallContext`: tools cannot change who is calling",
                ));
            }
            Ok(true)
        }
        Type::Reference(_) => Err(syn::Error::new_spanned(
            ty,
            "a tool parameter is an owned value the model sends (`String`, not `&str`); only `&CallContext` is passed by reference",
        )),
        Type::ImplTrait(_) => Err(syn::Error::new_spanned(
            ty,
            "a tool parameter needs a concrete type, not `impl Trait`: the model sends JSON that decodes into one known type",
        )),
        _ if is_call_context(ty) => Err(syn::Error::new_spanned(
            ty,
            "take the context by reference: `ctx: &CallContext`",
        )),
        _ => Ok(false),
    }
}

fn parse_one(typed: &mut syn::PatType) -> syn::Result<Param> {
    let ident = match &*typed.pat {
        Pat::Ident(pat) if pat.subpat.is_none() && pat.by_ref.is_none() => pat.ident.clone(),
        other => {
            return Err(syn::Error::new_spanned(
                other,
                "a tool parameter needs a plain name (`record_id: u64`), not a pattern: the name is the argument name the model sees",
            ));
        }
    };
    let context = is_context(&typed.ty)?;

    let mut field_attrs = Vec::new();
    let mut kept = Vec::new();
    let mut sensitive = false;
    let mut scope = None;
    let mut args_marker = None;
    let mut one_of: Option<(Path, Attribute)> = None;
    let mut from: Option<(FromSources, Attribute)> = None;
    let mut rename = None;
    let mut rules = ValidateRules::default();
    for attr in typed.attrs.drain(..) {
        let name = meta_key(&attr.meta);
        if context && PARAMETER_ATTRIBUTES.contains(&name.as_str()) && name != "doc" {
            return Err(syn::Error::new_spanned(
                &attr,
                format!(
                    "`#[{name}]` belongs on an argument the model sends; `&CallContext` is injected by the dispatcher"
                ),
            ));
        }
        match name.as_str() {
            "doc" => field_attrs.push(attr),
            "schemars" => {
                check_schemars(&attr)?;
                field_attrs.push(attr);
            }
            "serde" => {
                rename = serde_rename(&attr)?.or(rename);
                field_attrs.push(attr);
            }
            "validate" => {
                rules.read(&attr);
                field_attrs.push(attr);
            }
            "sensitive" => {
                if !matches!(attr.meta, Meta::Path(_)) {
                    return Err(syn::Error::new_spanned(
                        &attr,
                        "`#[sensitive]` takes no value",
                    ));
                }
                sensitive = true;
            }
            "args" => {
                if !matches!(attr.meta, Meta::Path(_)) {
                    return Err(syn::Error::new_spanned(&attr, "`#[args]` takes no value"));
                }
                args_marker = Some(attr);
            }
            "tenant" | "environment" => {
                if !matches!(attr.meta, Meta::Path(_)) {
                    return Err(syn::Error::new_spanned(
                        &attr,
                        format!("`#[{name}]` takes no value"),
                    ));
                }
                if scope.is_some() {
                    return Err(syn::Error::new_spanned(
                        &attr,
                        "an argument names either the tenant or the environment, not both",
                    ));
                }
                scope = Some(if name == "tenant" {
                    ScopeMark::Tenant
                } else {
                    ScopeMark::Environment
                });
            }
            "one_of" => {
                if one_of.is_some() {
                    return Err(syn::Error::new_spanned(
                        &attr,
                        "`#[one_of]` is given twice: keep one function",
                    ));
                }
                one_of = Some((one_of_function(&attr)?, attr));
            }
            "from" => {
                if from.is_some() {
                    return Err(syn::Error::new_spanned(
                        &attr,
                        "`#[from]` is given twice: write one, e.g. `#[from(user, trusted)]`",
                    ));
                }
                from = Some((from_sources(&attr, &typed.ty)?, attr));
            }
            _ => kept.push(attr),
        }
    }
    typed.attrs = kept;
    if context {
        return Ok(Param::Context);
    }

    if let Some(marker) = args_marker {
        if let Some(attr) = field_attrs.iter().find(|attr| !attr.path().is_ident("doc")) {
            return Err(syn::Error::new_spanned(
                attr,
                "put `#[serde]`, `#[validate]` and `#[schemars]` on the fields of the `#[args]` struct, not on the parameter",
            ));
        }
        if sensitive {
            return Err(syn::Error::new_spanned(
                marker,
                "`#[sensitive]` marks one argument; on an `#[args]` struct, mark its sensitive fields `#[sensitive]` and derive `portcullis::Sensitive` on it",
            ));
        }
        if let Some((_, attr)) = from {
            return Err(syn::Error::new_spanned(
                attr,
                "`#[from]` declares where one argument comes from; on an `#[args]` struct, write `#[from(...)]` on its fields and derive `portcullis::Sourced` on it",
            ));
        }
        if let Some((_, attr)) = one_of {
            return Err(syn::Error::new_spanned(
                attr,
                "`#[one_of]` restricts one of the tool's own parameters, not an `#[args]` struct: take that argument as a parameter of its own",
            ));
        }
        if let Some(mark) = scope {
            return Err(syn::Error::new_spanned(
                marker,
                format!(
                    "`#[{}]` marks one of the tool's own parameters, not an `#[args]` struct: take that argument as a parameter of its own",
                    mark.attribute()
                ),
            ));
        }
        return Ok(Param::Args(typed.ty.clone()));
    }

    let plain = ident.to_string().trim_start_matches("r#").to_owned();
    let wire_name = rename.map(|rename| rename.value()).unwrap_or(plain.clone());
    let written_name = match one_sided_rename(&field_attrs) {
        Some((rename, _, name)) if from.is_some() => {
            return Err(syn::Error::new_spanned(
                rename,
                format!(
                    "this rename names the argument otherwise in what the model sends than in the canonical arguments, which `#[from]` judges: give it one name both ways, `rename = \"{}\"`",
                    name.value()
                ),
            ));
        }
        Some((_, Side::Deserialize, _)) => plain,
        Some((_, Side::Serialize, name)) => name.value(),
        None => wire_name.clone(),
    };
    Ok(Param::Argument(Box::new(Argument {
        field: ident,
        wire_name,
        written_name,
        ty: (*typed.ty).clone(),
        nested: rules.nested,
        schema_attrs: rules.into_attrs(&field_attrs),
        field_attrs,
        sensitive,
        scope,
        one_of: one_of.map(|(function, _)| function),
        from: from.map(|(declared, _)| declared),
    })))
}

/// The function of `#[one_of(function)]`.
fn one_of_function(attr: &Attribute) -> syn::Result<Path> {
    const EXAMPLE: &str =
        "`#[one_of(active_products)]`, with `fn active_products(ctx: &CallContext) -> Vec<T>`";
    match &attr.meta {
        Meta::List(list) if !list.tokens.is_empty() => list.parse_args::<Path>().map_err(|_| {
            syn::Error::new_spanned(
                &list.tokens,
                format!(
                    "`#[one_of]` takes the path of one function, not a string or a list: {EXAMPLE}"
                ),
            )
        }),
        _ => Err(syn::Error::new_spanned(
            attr,
            format!("`#[one_of]` needs the function that gives the allowed values: {EXAMPLE}"),
        )),
    }
}

/// `#[schemars]` on a parameter may document it, never constrain it: a constraint written
/// there would show in the schema but not be checked.
fn check_schemars(attr: &Attribute) -> syn::Result<()> {
    for meta in meta_list(attr) {
        let key = meta_key(&meta);
        match key.as_str() {
            "title" | "example" | "examples" | "deprecated" => {}
            "description" => {
                return Err(syn::Error::new_spanned(
                    meta,
                    "write the argument's description as a `///` doc comment on the parameter",
                ));
            }
            _ => {
                return Err(syn::Error::new_spanned(
                    meta,
                    format!(
                        "`#[schemars({key})]` would change what the model is shown without changing what is checked: declare constraints with `#[validate(...)]`, which does both"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The key of `key = value`, `key(...)` or `key`.
fn meta_key(meta: &Meta) -> String {
    meta.path()
        .get_ident()
        .map(ToString::to_string)
        .unwrap_or_default()
}

fn meta_list(attr: &Attribute) -> Vec<Meta> {
    attr.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
        .map(|metas| metas.into_iter().collect())
        .unwrap_or_default()
}

/// The side of serde a rename names.
enum Side {
    Deserialize,
    Serialize,
}

/// A `rename(deserialize = "...")` or `rename(serialize = "...")` that names one side only, so
/// that the model sends the argument under one name and the canonical arguments write another;
/// with the side and the name it gives.
fn one_sided_rename(field_attrs: &[Attribute]) -> Option<(Meta, Side, LitStr)> {
    field_attrs
        .iter()
        .filter(|attr| attr.path().is_ident("serde"))
        .flat_map(meta_list)
        .find_map(|meta| {
            let Meta::List(list) = &meta else {
                return None;
            };
            let sides = list
                .parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
                .ok()?;
            let [Meta::NameValue(named)] = sides.iter().collect::<Vec<_>>()[..] else {
                return None;
            };
            let side = if named.path.is_ident("deserialize") {
                Side::Deserialize
            } else if named.path.is_ident("serialize") {
                Side::Serialize
            } else {
                return None;
            };
            match &named.value {
                Expr::Lit(ExprLit {
                    lit: Lit::Str(name),
                    ..
                }) if meta.path().is_ident("rename") => Some((meta, side, name.clone())),
                _ => None,
            }
        })
}

/// The `rename` of `#[serde(...)]`, refusing the serde features that would let the model send
/// something the schema does not show.
fn serde_rename(attr: &Attribute) -> syn::Result<Option<LitStr>> {
    let mut rename = None;
    for meta in meta_list(attr) {
        let key = meta_key(&meta);
        match (key.as_str(), &meta) {
            ("rename", Meta::NameValue(name_value)) => {
                if let Expr::Lit(ExprLit {
                    lit: Lit::Str(text),
                    ..
                }) = &name_value.value
                {
                    rename = Some(text.clone());
                }
            }
            // `rename(deserialize = "...", serialize = "...")`: one name, the one the model
            // sends, or the canonical arguments would name the argument otherwise.
            ("rename", Meta::List(list)) => {
                let inner = list
                    .parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
                    .unwrap_or_default();
                let mut sides = Vec::new();
                for meta in inner {
                    if let Meta::NameValue(name_value) = meta
                        && let Expr::Lit(ExprLit {
                            lit: Lit::Str(text),
                            ..
                        }) = &name_value.value
                    {
                        sides.push((name_value.path.is_ident("deserialize"), text.clone()));
                    }
                }
                if sides.len() == 2 && sides[0].1.value() != sides[1].1.value() {
                    return Err(syn::Error::new(
                        meta.span(),
                        "an argument has one name both ways: the gates read the arguments as they are written back, so write `rename = \"...\"`",
                    ));
                }
                rename = sides
                    .into_iter()
                    .find(|(deserialize, _)| *deserialize)
                    .map(|(_, text)| text)
                    .or(rename);
            }
            ("skip" | "skip_serializing" | "skip_serializing_if" | "serialize_with", _) => {
                return Err(syn::Error::new(
                    meta.span(),
                    format!(
                        "`{key}` would write the arguments back otherwise than the tool receives them, and the gates judge what is written back: remove it"
                    ),
                ));
            }
            ("deserialize_with", _) => {
                return Err(syn::Error::new(
                    meta.span(),
                    "`deserialize_with` would read the arguments otherwise than they are written back, and snapshots and compensations read them again from what is written back: write `with = \"module\"`, whose `serialize` and `deserialize` agree",
                ));
            }
            ("alias", _) => {
                return Err(syn::Error::new(
                    meta.span(),
                    "`alias` would accept a name the schema does not show the model: use one name (`rename`)",
                ));
            }
            ("flatten", _) => {
                return Err(syn::Error::new(
                    meta.span(),
                    "`flatten` cannot be combined with the refusal of unknown arguments: pass the struct with `#[args]`, or as a nested argument",
                ));
            }
            _ => {}
        }
    }
    Ok(rename)
}

/// What the parameter's `#[validate(...)]` says beyond what validator and schemars handle on
/// their own: the bounds and checks schemars leaves out of the schema, and whether the type's
/// own constraints are already checked with `nested`.
#[derive(Default)]
struct ValidateRules {
    nested: bool,
    exclusive_min: Option<Expr>,
    exclusive_max: Option<Expr>,
    /// `does_not_contain(pattern = "...")`: the substring, shown as `not: {pattern}`.
    forbidden: Option<String>,
    /// Checks JSON Schema cannot express; the description names them.
    unexpressed: Vec<String>,
}

impl ValidateRules {
    fn read(&mut self, attr: &Attribute) {
        for meta in meta_list(attr) {
            let key = meta_key(&meta);
            let inner = match &meta {
                Meta::List(list) => list
                    .parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
                    .map(|metas| metas.into_iter().collect())
                    .unwrap_or_default(),
                _ => Vec::new(),
            };
            let value = |name: &str| {
                inner.iter().find_map(|meta| match meta {
                    Meta::NameValue(name_value) if name_value.path.is_ident(name) => {
                        Some(name_value.value.clone())
                    }
                    _ => None,
                })
            };
            match key.as_str() {
                "range" => {
                    self.exclusive_min = value("exclusive_min");
                    self.exclusive_max = value("exclusive_max");
                }
                "custom" => {
                    let function = value("function")
                        .map(|function| match function {
                            Expr::Lit(ExprLit {
                                lit: Lit::Str(text),
                                ..
                            }) => text.value(),
                            other => quote!(#other).to_string().replace(' ', ""),
                        })
                        .unwrap_or_else(|| "a custom check".to_owned());
                    self.unexpressed
                        .push(format!("the custom check `{function}`"));
                }
                "nested" => self.nested = true,
                "does_not_contain" => match value("pattern") {
                    Some(Expr::Lit(ExprLit {
                        lit: Lit::Str(text),
                        ..
                    })) => self.forbidden = Some(text.value()),
                    _ => self.unexpressed.push("a forbidden substring".to_owned()),
                },
                "must_match" => self
                    .unexpressed
                    .push("a match with another argument".to_owned()),
                "non_control_character" => self
                    .unexpressed
                    .push("the absence of control characters".to_owned()),
                "credit_card" => self
                    .unexpressed
                    .push("a credit card number check".to_owned()),
                _ => {}
            }
        }
    }

    fn into_attrs(self, field_attrs: &[Attribute]) -> Vec<TokenStream> {
        let mut attrs = Vec::new();
        if let Some(bound) = self.exclusive_min {
            attrs.push(quote!(#[schemars(extend("exclusiveMinimum" = #bound))]));
        }
        if let Some(bound) = self.exclusive_max {
            attrs.push(quote!(#[schemars(extend("exclusiveMaximum" = #bound))]));
        }
        if let Some(substring) = self.forbidden {
            let pattern = literal_pattern(&substring);
            attrs
                .push(quote!(#[schemars(extend("not" = {"type": "string", "pattern": #pattern}))]));
        }
        if !self.unexpressed.is_empty() {
            let docs = doc_text(field_attrs);
            let note = format!(
                "Also checked by the server: {}.",
                self.unexpressed.join(", ")
            );
            let description = if docs.is_empty() {
                note
            } else {
                format!("{docs}\n\n{note}")
            };
            attrs.push(quote!(#[schemars(description = #description)]));
        }
        attrs
    }
}

/// A pattern that matches `text` literally, anywhere in a string: the characters that are
/// special in both Rust's and ECMA-262's regular expressions are escaped, and no others (an
/// ECMA-262 engine in Unicode mode refuses needless escapes).
fn literal_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\^$.|?*+()[]{}".contains(c) {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern
}

/// The text of `///` comments, with the one space after `///` removed.
pub(crate) fn doc_text(attrs: &[Attribute]) -> String {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|attr| attr.path().is_ident("doc"))
        .filter_map(|attr| match &attr.meta {
            Meta::NameValue(name_value) => match &name_value.value {
                Expr::Lit(ExprLit {
                    lit: Lit::Str(text),
                    ..
                }) => Some(text.value()),
                _ => None,
            },
            _ => None,
        })
        .map(|line| {
            line.strip_prefix(' ')
                .unwrap_or(&line)
                .trim_end()
                .to_owned()
        })
        .collect();
    lines.join("\n").trim().to_owned()
}
