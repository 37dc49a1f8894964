//! The keys of `#[tool(...)]`, parsed and checked.

use proc_macro2::Span;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, Lit, LitBool, LitInt, LitStr, Meta, Path, Token};

const KEYS: &[&str] = &[
    "name",
    "description",
    "risk",
    "role",
    "roles",
    "environments",
    "policy",
    "snapshot",
    "rollback",
    "irreversible",
    "approval",
    "approver",
    "caller_confirms",
    "audit_required",
    "idempotent",
    "open_world",
    "read_only",
    "cost",
    "max_calls_per_task",
    "timeout_ms",
    "output",
    "trusted_output",
    "trusted_prose",
    "on_untrusted",
    "after_untrusted",
    "crate",
];

/// Keys that say one thing two ways, with what to write instead of both.
const EXCLUSIVE: &[(&str, &str, &str)] = &[
    (
        "role",
        "roles",
        "use either `role = \"x\"` or `roles = [\"x\", \"y\"]`, not both",
    ),
    (
        "output",
        "trusted_output",
        "`output` and `trusted_output` both say how far the tool's output is trusted: write `output = \"trusted\"` to trust all of it, or `trusted_output = [\"/field\"]` alone to trust only those fields",
    ),
];

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Risk {
    Low,
    Medium,
    High,
    Critical,
}

pub(crate) enum Approval {
    Never,
    Required,
    When(Path),
}

/// How far the tool's output is a trusted source (`output`, `trusted_output`).
pub(crate) enum OutputTrust {
    /// `output = "trusted"`.
    All,
    /// `trusted_output = ["/pointer", ...]`.
    Fields(Vec<LitStr>),
}

/// `on_untrusted`: what happens to a call with a value found only in untrusted sources.
pub(crate) enum OnUntrusted {
    Refuse,
    Approve,
}

/// `after_untrusted`: what happens to every call once the task read untrusted content.
pub(crate) enum AfterUntrusted {
    Approve,
    Refuse,
}

/// Everything `#[tool(...)]` declared, each with the span to blame.
#[derive(Default)]
pub(crate) struct ToolOptions {
    pub(crate) name: Option<LitStr>,
    pub(crate) description: Option<LitStr>,
    pub(crate) risk: Option<(Risk, Span)>,
    pub(crate) roles: Vec<LitStr>,
    pub(crate) environments: Vec<LitStr>,
    pub(crate) policy: Option<Path>,
    pub(crate) snapshot: Option<Path>,
    pub(crate) rollback: Option<Path>,
    pub(crate) irreversible: Option<LitStr>,
    pub(crate) approval: Option<Approval>,
    pub(crate) approval_span: Option<Span>,
    pub(crate) idempotent: bool,
    /// The role a reviewer must hold to decide the tool's calls.
    pub(crate) approver: Option<LitStr>,
    /// `caller_confirms`: the caller may confirm its own calls.
    pub(crate) caller_confirms: Option<Span>,
    /// `audit_required = true | false`: whether a call is recorded as about to run first.
    pub(crate) audit_required: Option<LitBool>,
    /// `open_world = false`: the tool only touches what the registry's owner controls.
    pub(crate) closed_world: bool,
    pub(crate) read_only: Option<Span>,
    pub(crate) cost: Option<LitInt>,
    pub(crate) max_calls_per_task: Option<LitInt>,
    pub(crate) timeout_ms: Option<LitInt>,
    /// `None`: untrusted, the default (`output = "untrusted"` says so explicitly).
    pub(crate) output_trust: Option<OutputTrust>,
    /// `trusted_prose = ["/pointer", ...]`, or `[""]` for `output = "trusted_prose"`: text
    /// trusted word for word.
    pub(crate) trusted_prose: Vec<LitStr>,
    pub(crate) on_untrusted: Option<(OnUntrusted, Span)>,
    pub(crate) after_untrusted: Option<AfterUntrusted>,
    pub(crate) krate: Option<Path>,
}

impl ToolOptions {
    /// `output = "trusted_prose"`: all of the output is trusted prose (the pointer `""`).
    fn whole_output_as_prose(&mut self, span: Span) -> syn::Result<()> {
        if !self.trusted_prose.is_empty() {
            return Err(syn::Error::new(
                span,
                "`trusted_prose` names the prose of the output already: keep one, `output = \"trusted_prose\"` for all of it",
            ));
        }
        self.trusted_prose = vec![LitStr::new("", span)];
        Ok(())
    }

    pub(crate) fn parse(tokens: proc_macro2::TokenStream) -> syn::Result<Self> {
        let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(tokens)?;
        let mut options = ToolOptions::default();
        let mut seen: Vec<String> = Vec::new();
        let mut errors: Option<syn::Error> = None;
        for meta in metas {
            let key = meta
                .path()
                .get_ident()
                .map(ToString::to_string)
                .unwrap_or_default();
            let exclusive = EXCLUSIVE.iter().find(|(one, other, _)| {
                (key == *one && seen.iter().any(|earlier| earlier == other))
                    || (key == *other && seen.iter().any(|earlier| earlier == one))
            });
            if let Some((_, _, message)) = exclusive {
                combine(&mut errors, syn::Error::new(meta.path().span(), *message));
                continue;
            }
            if seen.contains(&key) {
                combine(
                    &mut errors,
                    syn::Error::new(
                        meta.path().span(),
                        format!("`{key}` is given twice: keep one"),
                    ),
                );
                continue;
            }
            if let Err(error) = options.apply(&key, &meta) {
                combine(&mut errors, error);
            }
            seen.push(key);
        }
        match errors {
            Some(errors) => Err(errors),
            None => Ok(options),
        }
    }

    fn apply(&mut self, key: &str, meta: &Meta) -> syn::Result<()> {
        match key {
            "name" => self.name = Some(string(meta, "name = \"delete_record\"")?),
            "description" => {
                let description = string(meta, "description = \"Delete one record.\"")?;
                if description.value().trim().is_empty() {
                    return Err(syn::Error::new(
                        description.span(),
                        "the description is empty: say what the tool does, the model reads it",
                    ));
                }
                self.description = Some(description);
            }
            "risk" => {
                let value = string(meta, "risk = \"high\"")?;
                let risk = match value.value().as_str() {
                    "low" => Risk::Low,
                    "medium" => Risk::Medium,
                    "high" => Risk::High,
                    "critical" => Risk::Critical,
                    other => {
                        return Err(syn::Error::new(
                            value.span(),
                            format!(
                                "unknown risk `{other}`: expected one of \"low\", \"medium\", \"high\", \"critical\""
                            ),
                        ));
                    }
                };
                self.risk = Some((risk, value.span()));
            }
            "role" => {
                let role = string(meta, "role = \"admin\"")?;
                if role.value().trim().is_empty() {
                    return Err(syn::Error::new(role.span(), "a role name cannot be empty"));
                }
                self.roles = vec![role];
            }
            "roles" => {
                self.roles = string_list(
                    meta,
                    "roles",
                    "roles = [\"admin\", \"operator\"]",
                    "leave `roles` out to let every caller use the tool",
                )?
            }
            "environments" => {
                self.environments = string_list(
                    meta,
                    "environments",
                    "environments = [\"staging\", \"production\"]",
                    "leave `environments` out to let the tool run in every environment",
                )?
            }
            "rollback" => {
                self.rollback = Some(path(meta, "rollback", "rollback = restore_record")?)
            }
            "policy" => self.policy = Some(path(meta, "policy", "policy = check_deletion")?),
            "snapshot" => self.snapshot = Some(path(meta, "snapshot", "snapshot = read_record")?),
            "irreversible" => {
                let reason = string(meta, "irreversible = \"the e-mail has been sent\"")?;
                if reason.value().trim().is_empty() {
                    return Err(syn::Error::new(
                        reason.span(),
                        "say why the effect cannot be undone: irreversible = \"the e-mail has been sent\"",
                    ));
                }
                self.irreversible = Some(reason);
            }
            "approval" => {
                let value = value_of(meta, "approval = \"required\"")?;
                self.approval_span = Some(value.span());
                self.approval = Some(match value {
                    Expr::Lit(ExprLit {
                        lit: Lit::Str(text),
                        ..
                    }) => match text.value().as_str() {
                        "never" => Approval::Never,
                        "required" => Approval::Required,
                        other => {
                            return Err(syn::Error::new(
                                text.span(),
                                format!(
                                    "unknown approval `{other}`: expected \"never\", \"required\", or the path of a predicate `fn(&CallContext, &Args) -> bool`"
                                ),
                            ));
                        }
                    },
                    Expr::Path(predicate) => Approval::When(predicate.path.clone()),
                    other => {
                        return Err(syn::Error::new(
                            other.span(),
                            "`approval` takes \"never\", \"required\", or the path of a predicate `fn(&CallContext, &Args) -> bool`",
                        ));
                    }
                });
            }
            "approver" => {
                let role = string(meta, "approver = \"finance\"")?;
                if role.value().trim().is_empty() {
                    return Err(syn::Error::new(
                        role.span(),
                        "an approver role cannot be empty: name the role a reviewer must hold",
                    ));
                }
                self.approver = Some(role);
            }
            "audit_required" => {
                self.audit_required = Some(boolean(meta, "audit_required = true")?);
            }
            "caller_confirms" => {
                flag(meta, "caller_confirms")?;
                self.caller_confirms = Some(meta.span());
            }
            "idempotent" => {
                flag(meta, "idempotent")?;
                self.idempotent = true;
            }
            "open_world" => {
                self.closed_world = !boolean(meta, "open_world = false")?.value;
            }
            "read_only" => {
                flag(meta, "read_only")?;
                self.read_only = Some(meta.span());
            }
            "cost" => self.cost = Some(integer(meta, "cost", "cost = 5", false)?),
            "max_calls_per_task" => {
                self.max_calls_per_task = Some(integer(
                    meta,
                    "max_calls_per_task",
                    "max_calls_per_task = 1",
                    true,
                )?)
            }
            "timeout_ms" => {
                self.timeout_ms = Some(integer(meta, "timeout_ms", "timeout_ms = 5000", true)?)
            }
            "output" => {
                let value = string(meta, "output = \"trusted\"")?;
                self.output_trust = match value.value().as_str() {
                    "trusted" => Some(OutputTrust::All),
                    "untrusted" => None,
                    "trusted_prose" => {
                        self.whole_output_as_prose(value.span())?;
                        None
                    }
                    other => {
                        return Err(syn::Error::new(
                            value.span(),
                            format!(
                                "unknown `output` value `{other}`: write `output = \"trusted\"` for data the user owns and no third party can write (its whole values are vouched for), `output = \"trusted_prose\"` for prose no third party writes a word of (its words are vouched for), or `trusted_output = [\"/field\"]` to trust only some fields; without either, the output is untrusted"
                            ),
                        ));
                    }
                };
            }
            "trusted_output" => {
                let fields = string_list(
                    meta,
                    "trusted_output",
                    "trusted_output = [\"/*/recipient\", \"/id\"]",
                    "leave `trusted_output` out to trust none of the output",
                )?;
                check_output_pointers("trusted_output", &fields)?;
                self.output_trust = Some(OutputTrust::Fields(fields));
            }
            "trusted_prose" => {
                let fields = string_list(
                    meta,
                    "trusted_prose",
                    "trusted_prose = [\"/notes\"]",
                    "leave `trusted_prose` out: a trusted output vouches for its whole values only",
                )?;
                check_output_pointers("trusted_prose", &fields)?;
                if !self.trusted_prose.is_empty() {
                    return Err(syn::Error::new(
                        meta.path().span(),
                        "`output = \"trusted_prose\"` trusts all of the output as prose already: keep one",
                    ));
                }
                self.trusted_prose = fields;
            }
            "on_untrusted" => {
                let value = string(meta, "on_untrusted = \"approve\"")?;
                let then = match value.value().as_str() {
                    "refuse" => OnUntrusted::Refuse,
                    "approve" => OnUntrusted::Approve,
                    other => {
                        return Err(syn::Error::new(
                            value.span(),
                            format!(
                                "unknown `on_untrusted` value `{other}`: write \"refuse\" (the default: the call is refused with `untrusted_value`) or \"approve\" (the call waits for a human, whose ticket shows where each value came from)"
                            ),
                        ));
                    }
                };
                self.on_untrusted = Some((then, value.span()));
            }
            "after_untrusted" => {
                let value = string(meta, "after_untrusted = \"approve\"")?;
                self.after_untrusted = Some(match value.value().as_str() {
                    "approve" => AfterUntrusted::Approve,
                    "refuse" => AfterUntrusted::Refuse,
                    other => {
                        return Err(syn::Error::new(
                            value.span(),
                            format!(
                                "unknown `after_untrusted` value `{other}`: write \"approve\" (once the task has read untrusted content, each call waits for a human) or \"refuse\" (each call is then refused with `untrusted_task`)"
                            ),
                        ));
                    }
                });
            }
            "crate" => {
                let value = string(meta, "crate = \"::portcullis\"")?;
                self.krate = Some(value.parse().map_err(|_| {
                    syn::Error::new(
                        value.span(),
                        "`crate` takes the path of the portcullis crate: crate = \"::portcullis\"",
                    )
                })?);
            }
            _ => {
                let suggestion = closest_key(key)
                    .map(|known| format!("did you mean `{known}`? "))
                    .unwrap_or_default();
                return Err(syn::Error::new(
                    meta.path().span(),
                    format!(
                        "unknown `#[tool]` key `{key}`: {suggestion}the keys are {}",
                        KEYS.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn combine(errors: &mut Option<syn::Error>, error: syn::Error) {
    match errors {
        Some(errors) => errors.combine(error),
        None => *errors = Some(error),
    }
}

fn value_of<'a>(meta: &'a Meta, example: &str) -> syn::Result<&'a Expr> {
    match meta {
        Meta::NameValue(name_value) => Ok(&name_value.value),
        other => Err(syn::Error::new(
            other.span(),
            format!("expected a value: {example}"),
        )),
    }
}

fn string(meta: &Meta, example: &str) -> syn::Result<LitStr> {
    match value_of(meta, example)? {
        Expr::Lit(ExprLit {
            lit: Lit::Str(text),
            ..
        }) => Ok(text.clone()),
        other => Err(syn::Error::new(
            other.span(),
            format!("expected a string literal: {example}"),
        )),
    }
}

/// A non-empty list of non-empty string literals, such as `roles = ["admin", "operator"]`.
fn string_list(
    meta: &Meta,
    key: &str,
    example: &str,
    when_empty: &str,
) -> syn::Result<Vec<LitStr>> {
    let value = value_of(meta, example)?;
    let Expr::Array(array) = value else {
        return Err(syn::Error::new(
            value.span(),
            format!("`{key}` takes a list of strings: {example}"),
        ));
    };
    if array.elems.is_empty() {
        return Err(syn::Error::new(
            array.span(),
            format!("`{key}` is empty: list at least one, or {when_empty}"),
        ));
    }
    array
        .elems
        .iter()
        .map(|element| match element {
            Expr::Lit(ExprLit {
                lit: Lit::Str(text),
                ..
            }) if !text.value().trim().is_empty() => Ok(text.clone()),
            other => Err(syn::Error::new(
                other.span(),
                format!("each entry of `{key}` is a non-empty string literal: {example}"),
            )),
        })
        .collect()
}

/// Each field of `trusted_output` or `trusted_prose` (`key`) is a JSON pointer into the
/// output, listed once.
fn check_output_pointers(key: &str, fields: &[LitStr]) -> syn::Result<()> {
    for (index, field) in fields.iter().enumerate() {
        let pointer = field.value();
        if !pointer.starts_with('/') {
            return Err(syn::Error::new(
                field.span(),
                format!(
                    "`{pointer}` is not a JSON pointer into the output: write \"/{pointer}\" (a pointer starts with `/` at the output's root; `*` stands for every element of a list or value of a map, as in \"/*/recipient\")"
                ),
            ));
        }
        let mut escapes = pointer.match_indices('~');
        if escapes.any(|(at, _)| !matches!(pointer.as_bytes().get(at + 1), Some(b'0' | b'1'))) {
            return Err(syn::Error::new(
                field.span(),
                format!(
                    "`{pointer}` is not a JSON pointer: inside a name, write `~` as `~0` and `/` as `~1`"
                ),
            ));
        }
        if fields[..index]
            .iter()
            .any(|earlier| earlier.value() == pointer)
        {
            return Err(syn::Error::new(
                field.span(),
                format!("`{pointer}` is listed twice in `{key}`: keep one"),
            ));
        }
    }
    Ok(())
}

fn path(meta: &Meta, key: &str, example: &str) -> syn::Result<Path> {
    match value_of(meta, example)? {
        Expr::Path(path) => Ok(path.path.clone()),
        other => Err(syn::Error::new(
            other.span(),
            format!("`{key}` takes the path of a function, not a string: {example}"),
        )),
    }
}

fn boolean(meta: &Meta, example: &str) -> syn::Result<LitBool> {
    match value_of(meta, example)? {
        Expr::Lit(ExprLit {
            lit: Lit::Bool(value),
            ..
        }) => Ok(value.clone()),
        other => Err(syn::Error::new(
            other.span(),
            format!("expected `true` or `false`: {example}"),
        )),
    }
}

fn flag(meta: &Meta, key: &str) -> syn::Result<()> {
    match meta {
        Meta::Path(_) => Ok(()),
        other => Err(syn::Error::new(
            other.span(),
            format!("`{key}` is a flag: write `{key}` without a value"),
        )),
    }
}

fn integer(meta: &Meta, key: &str, example: &str, positive: bool) -> syn::Result<LitInt> {
    let value = match value_of(meta, example)? {
        Expr::Lit(ExprLit {
            lit: Lit::Int(value),
            ..
        }) => value.clone(),
        other => {
            return Err(syn::Error::new(
                other.span(),
                format!("expected a whole number: {example}"),
            ));
        }
    };
    match value.base10_parse::<u64>() {
        Ok(0) if positive => Err(syn::Error::new(
            value.span(),
            format!("`{key}` must be greater than 0: {example}, or leave `{key}` out"),
        )),
        Ok(_) => Ok(value),
        Err(_) => Err(syn::Error::new(
            value.span(),
            format!("expected a whole number from 0 to {}: {example}", u64::MAX),
        )),
    }
}

/// Whether `name` follows the strictest provider's rule: `^[a-zA-Z0-9_-]{1,64}$`.
pub(crate) fn check_tool_name(name: &str, span: Span) -> syn::Result<()> {
    let valid = (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if valid {
        Ok(())
    } else {
        Err(syn::Error::new(
            span,
            format!(
                "invalid tool name `{name}`: use 1 to 64 ASCII letters, digits, `_` or `-` (every provider accepts these)"
            ),
        ))
    }
}

/// The known key closest to a misspelt one.
fn closest_key(key: &str) -> Option<&'static str> {
    KEYS.iter()
        .map(|known| (distance(key, known), *known))
        .filter(|(distance, known)| *distance <= (known.len() / 3).max(1))
        .min()
        .map(|(_, known)| known)
}

/// Levenshtein distance between two short ASCII keys.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(above + 1)
                .min(row[j] + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}
