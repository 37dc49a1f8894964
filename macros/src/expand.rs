//! The code `#[tool]` generates: the function as written, its arguments struct, and a unit type
//! implementing `Tool` with the contract.

use proc_macro2::TokenStream;
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{ItemFn, LitStr, ReturnType, Type};

use crate::options::{
    AfterUntrusted, Approval, OnUntrusted, OutputTrust, Risk, ToolOptions, check_tool_name,
};
use crate::params::{self, Argument, Param, ScopeMark, doc_text};
use crate::wire_fields::pointer;

pub(crate) fn expand(options: ToolOptions, mut function: ItemFn) -> syn::Result<TokenStream> {
    check_signature(&function)?;
    let params = params::parse(&mut function.sig)?;
    check_contract(&options, &function)?;
    check_provenance(&options, &params)?;

    let krate = match &options.krate {
        Some(path) => path.to_token_stream(),
        None => quote!(::portcullis),
    };
    let private = quote!(#krate::__private);
    let vis = &function.vis;
    let fn_ident = &function.sig.ident;
    let plain_name = fn_ident.to_string().trim_start_matches("r#").to_owned();
    let type_ident = format_ident!("{}", pascal_case(&plain_name), span = fn_ident.span());
    let tool_name = match &options.name {
        Some(name) => name.value(),
        None => plain_name.clone(),
    };
    let description = match &options.description {
        Some(description) => description.value(),
        None => doc_text(&function.attrs),
    };

    let (args_type, args_items) = arguments(&params, &plain_name, &type_ident, vis, &private);
    let call_arguments = params.iter().map(|param| match param {
        Param::Context => quote!(ctx),
        Param::Argument(argument) => {
            let field = &argument.field;
            quote!(args.#field)
        }
        Param::Args(_) => quote!(args),
    });
    let call = quote!(#fn_ident(#(#call_arguments),*));
    let ReturnType::Type(_, return_type) = &function.sig.output else {
        unreachable!("check_signature refuses a function without a return type")
    };
    let into_tool_result = quote_spanned! {return_type.span()=>
        <#return_type as #private::IntoToolResult>::into_tool_result
    };
    // Spanned at the return type: a wrong one is then reported once, there.
    let invocation = if function.sig.asyncness.is_some() {
        quote_spanned! {return_type.span()=>
            #private::Invocation::Pending(#private::Box::pin(async move {
                #into_tool_result(#call.await)
            }))
        }
    } else {
        quote_spanned!(return_type.span()=> #private::Invocation::Ready(#into_tool_result(#call)))
    };
    let output_type = quote_spanned! {return_type.span()=>
        <#return_type as #private::IntoToolResult>::Output
    };

    let output_item = quote_spanned! {return_type.span()=> type Output = #output_type; };
    let contract = contract(
        &options,
        &tool_name,
        &description,
        &params,
        (&args_type, &output_type),
        &private,
    );
    let approval_method = match &options.approval {
        Some(Approval::When(predicate)) => quote_spanned! {predicate.span()=>
            fn approval_required(&self, ctx: &#private::CallContext, args: &Self::Args) -> bool {
                #private::ApprovalPredicate::<Self::Args>::requires_approval(&#predicate, ctx, args)
            }
        },
        _ => TokenStream::new(),
    };
    let policy_method = match &options.policy {
        Some(policy) => quote_spanned! {policy.span()=>
            fn policy<'a>(
                &'a self,
                ctx: &'a #private::CallContext,
                args: &'a Self::Args,
            ) -> #private::Option<#private::BoxFuture<'a, #private::Result<#private::Decision, #private::PolicyError>>> {
                #private::Some(#private::ToolPolicy::<'a, Self::Args>::start(&#policy, ctx, args))
            }
        },
        None => TokenStream::new(),
    };
    let snapshot_method = match &options.snapshot {
        Some(hook) => quote_spanned! {hook.span()=>
            fn snapshot<'a>(
                &'a self,
                ctx: &'a #private::CallContext,
                args: &'a Self::Args,
            ) -> #private::Option<#private::BoxFuture<'a, #private::serde_json::Value>> {
                #private::Some(#private::SnapshotHook::<'a, Self::Args>::take(&#hook, ctx, args))
            }
        },
        None => TokenStream::new(),
    };
    // Spanned at the output type, which must be readable back for the compensation.
    let read_output = quote_spanned! {return_type.span()=>
        let output: #output_type = #private::output_from_json(output)?;
    };
    let compensate_method = match &options.rollback {
        Some(rollback) => quote_spanned! {rollback.span()=>
            fn compensate<'a>(
                &'a self,
                ctx: &'a #private::CallContext,
                args: &'a Self::Args,
                output: &'a #output_type,
            ) -> #private::Option<#private::BoxFuture<'a, #private::Result<(), #private::ToolError>>> {
                #private::Some(#private::Rollback::<'a, Self::Args, #output_type>::start(&#rollback, ctx, args, output))
            }

            fn compensate_call<'a>(
                &'a self,
                ctx: &'a #private::CallContext,
                args: Self::Args,
                output: #private::serde_json::Value,
            ) -> #private::Option<#private::BoxFuture<'a, #private::Result<(), #private::ToolError>>> {
                #private::Some(#private::Box::pin(async move {
                    #read_output
                    match #private::Tool::compensate(self, ctx, &args, &output) {
                        #private::Some(compensation) => compensation.await,
                        #private::None => #private::Result::Ok(()),
                    }
                }))
            }
        },
        None => TokenStream::new(),
    };
    let validate_method = argument_validation(&params, &private);
    let type_doc = format!("The `{tool_name}` tool, generated by `#[tool]` from [`{plain_name}`].");

    Ok(quote! {
        // A tool's parameters are the arguments the model sends; a long list is its schema.
        #[allow(clippy::too_many_arguments)]
        #function

        #args_items

        #[doc = #type_doc]
        #[derive(Debug, Clone, Copy, Default)]
        #vis struct #type_ident;

        impl #private::Tool for #type_ident {
            type Args = #args_type;
            #output_item

            fn contract(&self) -> &#private::ToolContract {
                static CONTRACT: #private::ContractCell = #private::ContractCell::new();
                CONTRACT.get(|| #contract)
            }

            #[allow(unused_variables)]
            fn call<'a>(
                &'a self,
                ctx: &'a #private::CallContext,
                args: Self::Args,
            ) -> #private::Invocation<'a, #output_type> {
                #invocation
            }

            #validate_method
            #policy_method
            #snapshot_method
            #approval_method
            #compensate_method
        }
    })
}

/// The arguments type and the items that define it: a generated struct, or an alias of the
/// user's `#[args]` type.
fn arguments(
    params: &[Param],
    plain_name: &str,
    type_ident: &syn::Ident,
    vis: &syn::Visibility,
    private: &TokenStream,
) -> (TokenStream, TokenStream) {
    let args_ident = format_ident!("{}Args", type_ident);
    if let Some(user_type) = params.iter().find_map(|param| match param {
        Param::Args(ty) => Some(ty),
        _ => None,
    }) {
        let assertion = quote_spanned! {user_type.span()=>
            const _: () = #private::assert_tool_arguments::<#user_type>();
        };
        let doc = format!("The arguments of the [`{plain_name}`] tool.");
        let items = quote! {
            #[doc = #doc]
            #vis type #args_ident = #user_type;
            #assertion
        };
        // Spanned at the user's type, so that a missing trait is reported there.
        return (quote_spanned!(user_type.span()=> #args_ident), items);
    }

    let arguments: Vec<&Argument> = arguments_of(params).collect();
    let fields = arguments.iter().map(|argument| {
        let Argument {
            field,
            ty,
            field_attrs,
            schema_attrs,
            ..
        } = argument;
        quote! {
            #(#field_attrs)*
            #(#schema_attrs)*
            #vis #field: #ty
        }
    });
    let assertions = arguments.iter().map(|argument| {
        let ty = &argument.ty;
        match standard_type(ty, private) {
            Some(standard) => quote_spanned! {ty.span()=>
                #private::assert_standard_type::<#ty, #standard>();
            },
            None => quote_spanned! {ty.span()=> #private::assert_tool_parameter::<#ty>(); },
        }
    });
    let debug_fields = arguments.iter().map(|argument| {
        let (field, wire_name) = (&argument.field, &argument.wire_name);
        if argument.sensitive {
            quote!(.field(#wire_name, &#private::REDACTED))
        } else if standard_type(&argument.ty, private).is_some() {
            quote!(.field(#wire_name, &self.#field))
        } else {
            quote!(.field(#wire_name, {
                use #private::{DebugFallback as _, DebugWith as _};
                (&#private::DebugProbe(&self.#field)).view()
            }))
        }
    });
    let path_string = |tail: &str| {
        LitStr::new(
            &format!("{private}::{tail}"),
            proc_macro2::Span::call_site(),
        )
    };
    let (serde_path, schemars_path, validator_path) = (
        path_string("serde"),
        path_string("schemars"),
        path_string("validator"),
    );
    let doc = format!("The arguments of the [`{plain_name}`] tool, as the model sends them.");
    let debug_name = args_ident.to_string();
    let items = quote! {
        #[doc = #doc]
        #[derive(#private::serde::Deserialize, #private::serde::Serialize, #private::schemars::JsonSchema, #private::validator::Validate)]
        #[serde(crate = #serde_path, deny_unknown_fields)]
        #[schemars(crate = #schemars_path)]
        #[validate(crate = #validator_path)]
        #[allow(non_snake_case)]
        #vis struct #args_ident {
            #(#fields,)*
        }

        impl ::core::fmt::Debug for #args_ident {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.debug_struct(#debug_name)
                    #(#debug_fields)*
                    .finish()
            }
        }

        const _: () = { #(#assertions)* };
    };
    (quote!(#args_ident), items)
}

/// A `validate_args` that also checks the own constraints of every argument whose type
/// implements `Validate`, so that what schemars shows of a nested type is enforced even where
/// `#[validate(nested)]` was forgotten, and that names each violation by the argument's name
/// on the wire (validator knows only the Rust name).
fn argument_validation(params: &[Param], private: &TokenStream) -> TokenStream {
    let arguments: Vec<&Argument> = arguments_of(params).collect();
    let checks = arguments
        .iter()
        .filter(|argument| !argument.nested && standard_type(&argument.ty, private).is_none())
        .map(|argument| {
            let field = &argument.field;
            let key = field_key(field);
            let check = quote!((&&&#private::Nested(&args.#field)).validate_nested());
            // Field errors found by the derive take precedence, as with `nested`.
            quote! {
                let nested = #check;
                if nested.is_err() && !errors.errors().contains_key(#key) {
                    errors.merge_self(#key, nested);
                }
            }
        })
        .collect::<Vec<_>>();
    let renames: Vec<TokenStream> = arguments
        .iter()
        .filter(|argument| field_key(&argument.field) != argument.wire_name)
        .map(|argument| {
            let (key, wire_name) = (field_key(&argument.field), &argument.wire_name);
            quote!((#key, #wire_name))
        })
        .collect();
    if checks.is_empty() && renames.is_empty() {
        return TokenStream::new();
    }
    quote! {
        fn validate_args(&self, args: &Self::Args) -> #private::Result<(), #private::ValidationErrors> {
            use #private::{
                NestedValidation as _, NoNestedValidation as _, WrappedNestedValidation as _,
            };
            let mut errors = #private::validator::Validate::validate(args)
                .err()
                .unwrap_or_default();
            #(#checks)*
            if errors.is_empty() {
                #private::Result::Ok(())
            } else {
                #private::Result::Err(#private::rename_fields(errors, &[#(#renames),*]))
            }
        }
    }
}

/// The arguments the model sends, in order.
fn arguments_of(params: &[Param]) -> impl Iterator<Item = &Argument> {
    params.iter().filter_map(|param| match param {
        Param::Argument(argument) => Some(&**argument),
        _ => None,
    })
}

/// The key validator files a field's errors under.
fn field_key(field: &syn::Ident) -> String {
    field.to_string().trim_start_matches("r#").to_owned()
}

/// The name of `ty` (or of `T` in `Option<T>`) when it is a plain value (a string, a number,
/// a boolean) that holds no fields.
fn plain_type(ty: &Type) -> Option<&syn::Ident> {
    const PLAIN: &[&str] = &[
        "String", "bool", "char", "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32",
        "i64", "i128", "isize", "f32", "f64",
    ];
    let Type::Path(path) = option_inner(ty).unwrap_or(ty) else {
        return None;
    };
    let ident = path.path.get_ident().filter(|_| path.qself.is_none())?;
    PLAIN.iter().any(|plain| ident == plain).then_some(ident)
}

/// Whether the argument is read by a deserializer of its own (`#[serde(with)]`), which may
/// accept what its type's schema does not show.
fn custom_deserializer(argument: &Argument) -> bool {
    argument.field_attrs.iter().any(|attr| {
        attr.path().is_ident("serde") && attr.to_token_stream().to_string().contains("with")
    })
}

/// The `T` of a parameter type written as the standard `Option<T>`: `Option`, or its path in
/// `std` or `core`. An `Option` of the user's, by its own path, is a type like any other.
fn option_inner(ty: &Type) -> Option<&Type> {
    let Type::Path(path) = ty else {
        return None;
    };
    let names: Vec<String> = path
        .path
        .segments
        .iter()
        .map(|segment| segment.ident.to_string())
        .collect();
    let standard = match &names[..] {
        [name] => name == "Option" && path.path.leading_colon.is_none(),
        [root, module, name] => {
            (root == "std" || root == "core") && module == "option" && name == "Option"
        }
        _ => false,
    };
    if !standard || path.qself.is_some() {
        return None;
    }
    let last = path.path.segments.last()?;
    match &last.arguments {
        syn::PathArguments::AngleBracketed(arguments) if arguments.args.len() == 1 => {
            match arguments.args.first()? {
                syn::GenericArgument::Type(inner) => Some(inner),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The standard type a plain `ty` names (see [`plain_type`]). Such a type has no constraints
/// of its own, no sensitive fields and a `Debug`, so the generated code reads it as it is
/// rather than probing its traits, which is much of what a tool costs to compile. A type of
/// the user's that bears such a name is a compile error (`assert_standard_type`), not an
/// argument whose constraints or sensitive fields go unseen.
fn standard_type(ty: &Type, private: &TokenStream) -> Option<TokenStream> {
    let ident = plain_type(ty)?;
    let standard = if ident == "String" {
        quote!(#private::String)
    } else {
        quote!(#private::primitive::#ident)
    };
    Some(match option_inner(ty) {
        Some(_) => quote!(#private::Option<#standard>),
        None => standard,
    })
}

/// The expression that builds the tool's `ToolContract`.
fn contract(
    options: &ToolOptions,
    tool_name: &str,
    description: &str,
    params: &[Param],
    (args_type, output_type): (&TokenStream, &TokenStream),
    private: &TokenStream,
) -> TokenStream {
    let mut steps = Vec::new();
    if let Some((risk, _)) = options.risk {
        let variant = match risk {
            Risk::Low => quote!(Low),
            Risk::Medium => quote!(Medium),
            Risk::High => quote!(High),
            Risk::Critical => quote!(Critical),
        };
        steps.push(quote!(.risk(#private::Risk::#variant)));
    }
    if !options.roles.is_empty() {
        let roles = &options.roles;
        steps.push(quote!(.roles([#(#roles),*])));
    }
    if !options.environments.is_empty() {
        let environments = &options.environments;
        steps.push(quote!(.environments([#(#environments),*])));
    }
    for argument in arguments_of(params) {
        let wire_name = &argument.wire_name;
        match argument.scope {
            Some(ScopeMark::Tenant) => steps.push(quote!(.tenant_argument(#wire_name))),
            Some(ScopeMark::Environment) => steps.push(quote!(.environment_argument(#wire_name))),
            None => {}
        }
        if let Some(function) = &argument.one_of {
            // Spanned at the path: a function of the wrong shape is reported there.
            let values = quote_spanned! {function.span()=>
                |ctx| #private::OneOfValues::allowed_values(&#function, ctx)
            };
            steps.push(quote!(.one_of(#wire_name, #values)));
        }
    }
    if let Some(policy) = &options.policy {
        let name = path_text(policy);
        steps.push(quote!(.policy(#name)));
    }
    if let Some(hook) = &options.snapshot {
        let name = path_text(hook);
        steps.push(quote!(.snapshot(#name)));
    }
    match &options.approval {
        Some(Approval::Never) => steps.push(quote!(.approval(#private::Approval::Never))),
        Some(Approval::Required) => steps.push(quote!(.approval(#private::Approval::Required))),
        Some(Approval::When(predicate)) => {
            let name = path_text(predicate);
            steps.push(
                quote!(.approval(#private::Approval::Conditional(#private::String::from(#name)))),
            );
        }
        None => {}
    }
    if let Some(rollback) = &options.rollback {
        let name = path_text(rollback);
        steps.push(quote!(.rollback(#name)));
    }
    if let Some(reason) = &options.irreversible {
        steps.push(quote!(.irreversible(#reason)));
    }
    if let Some(role) = &options.approver {
        steps.push(quote!(.approvers([#role])));
    }
    if options.caller_confirms.is_some() {
        steps.push(quote!(.caller_confirms()));
    }
    if let Some(required) = &options.audit_required {
        steps.push(quote!(.audit_required(#required)));
    }
    if options.idempotent {
        steps.push(quote!(.idempotent()));
    }
    if options.closed_world {
        steps.push(quote!(.closed_world()));
    }
    if options.read_only.is_some() {
        steps.push(quote!(.read_only()));
    }
    if let Some(cost) = &options.cost {
        let cost = unsuffixed(cost);
        steps.push(quote!(.cost(#cost)));
    }
    if let Some(calls) = &options.max_calls_per_task {
        let calls = unsuffixed(calls);
        steps.push(quote!(.max_calls_per_task(#calls)));
    }
    if let Some(timeout) = &options.timeout_ms {
        let timeout = unsuffixed(timeout);
        steps.push(quote!(.timeout(#private::Duration::from_millis(#timeout))));
    }
    match &options.output_trust {
        Some(OutputTrust::All) => steps.push(quote!(.output_trust(#private::OutputTrust::All))),
        Some(OutputTrust::Fields(fields)) => steps.push(quote! {
            .output_trust(#private::OutputTrust::Fields(#private::Vec::from([
                #(#private::String::from(#fields)),*
            ])))
        }),
        None => {}
    }
    let prose = &options.trusted_prose;
    if !prose.is_empty() {
        steps.push(quote!(.trusted_prose([#(#prose),*])));
    }
    match &options.on_untrusted {
        Some((OnUntrusted::Refuse, _)) => {
            steps.push(quote!(.on_untrusted(#private::OnUntrusted::Refuse)));
        }
        Some((OnUntrusted::Approve, _)) => {
            steps.push(quote!(.on_untrusted(#private::OnUntrusted::Approve)));
        }
        None => {}
    }
    match &options.after_untrusted {
        Some(AfterUntrusted::Approve) => {
            steps.push(quote!(.after_untrusted(#private::AfterUntrusted::Approve)));
        }
        Some(AfterUntrusted::Refuse) => {
            steps.push(quote!(.after_untrusted(#private::AfterUntrusted::Refuse)));
        }
        None => {}
    }
    let sensitive: Vec<&str> = arguments_of(params)
        .filter(|argument| argument.sensitive)
        .map(|argument| argument.wire_name.as_str())
        .collect();
    if !sensitive.is_empty() {
        steps.push(quote!(.sensitive([#(#sensitive),*])));
    }
    // Arguments of plain types: serde holds them to their type, validator to their rules, and
    // those are all their schema shows (an `f32` with an exclusive bound also shows the nearest
    // `f32` inside it, which only the schema check enforces; a custom deserializer may accept
    // what the schema does not show).
    let checked_in_code: Vec<&str> = arguments_of(params)
        .filter(|argument| {
            plain_type(&argument.ty).is_some_and(|plain| plain != "f32")
                && !custom_deserializer(argument)
        })
        .map(|argument| argument.wire_name.as_str())
        .collect();
    if !checked_in_code.is_empty() {
        steps.push(quote!(.checked_in_code([#(#checked_in_code),*])));
    }
    // The `#[sensitive]` fields of the types the arguments hold (`#[derive(Sensitive)]`).
    let probe = |ty: &Type| {
        quote! {{
            use #private::{HasSensitiveFields as _, NoSensitiveFields as _};
            (&#private::SensitiveProbe::<#ty>::new()).pointers()
        }}
    };
    for param in params {
        match param {
            Param::Argument(argument)
                if !argument.sensitive && plain_type(&argument.ty).is_none() =>
            {
                let (wire_name, pointers) = (&argument.wire_name, probe(&argument.ty));
                steps.push(quote!(.sensitive(#private::within(#wire_name, #pointers))));
            }
            Param::Args(ty) => {
                let pointers = probe(ty);
                steps.push(quote!(.sensitive(#pointers)));
            }
            _ => {}
        }
    }
    let source_rules = source_rules(params, private);
    quote! {{
        let contract = #private::ToolContract::builder(#tool_name, #description, #private::arguments_schema::<#args_type>())
            #(#steps)*;
        #(let contract = #source_rules;)*
        contract
            .output_schema({
                use #private::{OutputHasNoSchema as _, OutputHasSchema as _};
                (&#private::OutputSchema::<#output_type>::probe()).output_schema()
            })
            .build()
    }}
}

/// The declared sources of the arguments, in order, each an expression of the builder
/// `contract` that adds them: an argument's own `#[from(...)]`, or the `#[from]` fields of the
/// types it holds (`#[derive(Sourced)]`), within it, or at the root for an `#[args]` struct.
/// Their pointers name what the canonical arguments write, which is what the gate judges.
fn source_rules(params: &[Param], private: &TokenStream) -> Vec<TokenStream> {
    let probe = |ty: &Type| {
        quote! {{
            use #private::{HasSourcedFields as _, NoSourcedFields as _};
            (&#private::SourcedProbe::<#ty>::new()).rules()
        }}
    };
    let mut rules = Vec::new();
    for param in params {
        match param {
            Param::Argument(argument) => match &argument.from {
                Some(declared) => {
                    let pointer = pointer(&argument.written_name);
                    let (from, matching) = (declared.sources(private), declared.matching(private));
                    rules.push(quote!(contract.from_sources(#pointer, #from, #matching)));
                }
                None if plain_type(&argument.ty).is_none() => {
                    let (name, nested) = (&argument.written_name, probe(&argument.ty));
                    rules.push(quote! {
                        #private::with_source_rules(contract, #private::Some(#name), #nested)
                    });
                }
                None => {}
            },
            Param::Args(ty) => {
                let nested = probe(ty);
                rules.push(quote!(#private::with_source_rules(contract, #private::None, #nested)));
            }
            Param::Context => {}
        }
    }
    rules
}

/// `5u8` as `5`, so that the literal takes the type the builder expects.
fn unsuffixed(literal: &syn::LitInt) -> syn::LitInt {
    syn::LitInt::new(literal.base10_digits(), literal.span())
}

fn path_text(path: &syn::Path) -> String {
    path.to_token_stream().to_string().replace(' ', "")
}

/// Refuses function shapes a tool cannot have.
fn check_signature(function: &ItemFn) -> syn::Result<()> {
    let sig = &function.sig;
    let only_lifetimes = sig
        .generics
        .params
        .iter()
        .all(|param| matches!(param, syn::GenericParam::Lifetime(_)));
    if !sig.generics.params.is_empty() && only_lifetimes && sig.generics.where_clause.is_none() {
        return Err(syn::Error::new_spanned(
            &sig.generics,
            "a tool needs no named lifetimes: write the context as `ctx: &CallContext` and take every argument by value",
        ));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(syn::Error::new_spanned(
            &sig.generics,
            "a tool cannot be generic: the model sends concrete JSON, so every parameter needs a concrete type (declare one tool per type)",
        ));
    }
    if let Some(unsafety) = &sig.unsafety {
        return Err(syn::Error::new_spanned(
            unsafety,
            "a tool cannot be `unsafe`: the model's input must never reach unchecked code",
        ));
    }
    if let ReturnType::Default = sig.output {
        return Err(syn::Error::new(
            sig.ident.span(),
            "a tool returns `Result<T, ToolError>` (with `T: Serialize`): add a return type",
        ));
    }
    if let ReturnType::Type(_, ty) = &sig.output
        && let Type::ImplTrait(_) = &**ty
    {
        return Err(syn::Error::new_spanned(
            ty,
            "a tool returns a concrete `Result<T, ToolError>`, not `impl Trait`",
        ));
    }
    Ok(())
}

/// Refuses contracts that are incomplete or contradict themselves.
fn check_contract(options: &ToolOptions, function: &ItemFn) -> syn::Result<()> {
    let fn_ident = &function.sig.ident;
    match &options.name {
        Some(name) => check_tool_name(&name.value(), name.span())?,
        None => check_tool_name(
            fn_ident.to_string().trim_start_matches("r#"),
            fn_ident.span(),
        )?,
    }
    if options.description.is_none() && doc_text(&function.attrs).is_empty() {
        return Err(syn::Error::new(
            fn_ident.span(),
            "a tool needs a description, the model reads it to decide when to call the tool: add a `///` doc comment, or `description = \"...\"`",
        ));
    }
    if let Some((risk, span)) = options.risk {
        let undo_declared = options.rollback.is_some() || options.irreversible.is_some();
        if risk >= Risk::High && !undo_declared && options.read_only.is_none() {
            return Err(syn::Error::new(
                span,
                "a high or critical risk tool must say how it is undone: add `rollback = compensating_fn`, or `irreversible = \"why it cannot be undone\"` (a `read_only` tool has nothing to undo)",
            ));
        }
    }
    if let (Some((Risk::Critical, _)), Some(Approval::Never)) = (options.risk, &options.approval) {
        return Err(syn::Error::new(
            options
                .approval_span
                .unwrap_or_else(|| function.sig.ident.span()),
            "a critical tool always needs a human's approval: remove `approval = \"never\"`, or lower the risk",
        ));
    }
    if let (Some((Risk::Critical, _)), Some(span)) = (options.risk, options.caller_confirms) {
        return Err(syn::Error::new(
            span,
            "a critical tool's calls wait for an operator, and the caller's own confirmation is not enough: remove `caller_confirms`, or lower the risk",
        ));
    }
    if let (Some(span), Some(Approval::Never)) = (options.caller_confirms, &options.approval) {
        return Err(syn::Error::new(
            span,
            "`caller_confirms` asks the caller to confirm each call, and `approval = \"never\"` asks no one: keep one of them",
        ));
    }
    if let (Some(_), Some(reason)) = (&options.rollback, &options.irreversible) {
        return Err(syn::Error::new(
            reason.span(),
            "a tool with a `rollback` is not `irreversible`: keep the one that is true",
        ));
    }
    if let (Some(span), Some(_)) = (options.read_only, &options.rollback) {
        return Err(syn::Error::new(
            span,
            "a `read_only` tool changes nothing, so it has nothing to roll back: remove `read_only` or `rollback`",
        ));
    }
    if let (Some(_), Some(reason)) = (options.read_only, &options.irreversible) {
        return Err(syn::Error::new(
            reason.span(),
            "a `read_only` tool changes nothing, so nothing about it is irreversible: remove `read_only` or `irreversible`",
        ));
    }
    if let (Some(timeout), None) = (&options.timeout_ms, &function.sig.asyncness) {
        return Err(syn::Error::new(
            timeout.span(),
            "`timeout_ms` needs an `async fn`: a synchronous tool cannot be interrupted, make the function `async` or remove `timeout_ms`",
        ));
    }
    Ok(())
}

/// Refuses `on_untrusted` where it has nothing to act on: no argument declares `#[from]`, and
/// none is of a type that may (`#[derive(Sourced)]` on a type the arguments hold).
fn check_provenance(options: &ToolOptions, params: &[Param]) -> syn::Result<()> {
    let may_declare = params.iter().any(|param| match param {
        Param::Argument(argument) => argument.from.is_some() || plain_type(&argument.ty).is_none(),
        Param::Args(_) => true,
        Param::Context => false,
    });
    if let (Some((_, span)), false) = (&options.on_untrusted, may_declare) {
        return Err(syn::Error::new(
            *span,
            "`on_untrusted` acts on the arguments declared `#[from(...)]`, and this tool has none: mark those that must come from the user `#[from(user)]`, or remove `on_untrusted` (`after_untrusted` holds back every call once the task has read untrusted content)",
        ));
    }
    Ok(())
}

/// `delete_record` → `DeleteRecord`.
fn pascal_case(snake: &str) -> String {
    snake
        .split('_')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|first| first.to_uppercase().chain(chars).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}
