//! Provenance: every `#[tool]` key and `#[from]` form, on parameters, on the fields of nested
//! types (inside a list, an option, another nested type) and of an `#[args]` struct, and the
//! rules each puts in the contract.

use portcullis::prelude::*;
use portcullis::{
    AfterUntrusted, Matching, OnUntrusted, OutputTrust, Provenance, SourceRule, Sourced, Sources,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use validator::Validate;

#[derive(Debug, Deserialize, Serialize, JsonSchema, Validate, Sourced)]
#[serde(deny_unknown_fields)]
struct Address {
    #[from(user, trusted)]
    city: String,
}

/// A payee, its fields' names in camelCase.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Validate, Sourced)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Payee {
    #[from(user, trusted)]
    iban: String,
    /// The words in any order.
    #[from(entities, user)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    payment_note: Option<String>,
    #[from(user)]
    #[serde(rename = "ref")]
    reference: u64,
    /// No declaration: any value.
    display_name: String,
    /// Its own `#[from]` fields, nested.
    address: Address,
}

/// A type without `#[from]` fields: it adds no rule.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
struct Memo {
    text: String,
}

/// Pay several payees.
#[tool(
    risk = "high",
    irreversible = "the payment has been sent",
    output = "untrusted",
    on_untrusted = "approve",
    after_untrusted = "refuse"
)]
fn pay(
    ctx: &CallContext,
    /// The main recipient's IBAN, sent as `to`.
    #[from(user, trusted)]
    #[serde(rename = "to")]
    recipient: String,
    /// Amount in cents.
    #[from(user)]
    amount_cents: u64,
    /// The transfer's subject, written by the model: the entities inside it are judged.
    #[from(user, trusted, entities)]
    subject: String,
    /// Texts, each judged whole.
    #[from(trusted, user)]
    references: Vec<String>,
    /// Entities inside each text.
    #[from(user, entities)]
    notes: Option<Vec<String>>,
    /// Each payee's declared fields.
    payees: Vec<Payee>,
    /// An optional payee's declared fields, sent as `backup` and written back as `fallback`:
    /// the gate judges what is written back.
    #[serde(rename(deserialize = "backup"))]
    fallback: Option<Box<Payee>>,
    /// Nothing declared.
    memo: Memo,
    /// Nothing declared.
    comment: String,
) -> Result<String, ToolError> {
    let _ = (
        ctx,
        amount_cents,
        subject,
        references,
        notes,
        payees,
        fallback,
        memo,
        comment,
    );
    Ok(recipient)
}

/// The account's own contacts: data the user owns.
#[tool(read_only, output = "trusted")]
fn list_contacts() -> Result<Vec<String>, ToolError> {
    Ok(vec!["DE89370400440532013000".to_owned()])
}

/// The account's transactions: only their recipients and ids are the account's own.
#[tool(
    read_only,
    trusted_output = ["/*/recipient", "/id"],
    on_untrusted = "refuse",
    after_untrusted = "approve"
)]
fn read_transactions(
    /// The account to read, one the user named.
    #[from(user)]
    account: String,
) -> Result<Vec<String>, ToolError> {
    Ok(vec![account])
}

/// The user's own notes, which no one else writes a word of: every word vouched for.
#[tool(read_only, output = "trusted_prose")]
fn read_my_notes() -> Result<String, ToolError> {
    Ok("pay DE89370400440532013000 on Fridays".to_owned())
}

/// A contact card: its fields are whole values, its notes the user's own prose.
#[tool(read_only, output = "trusted", trusted_prose = ["/*/notes"])]
fn read_contacts() -> Result<Vec<String>, ToolError> {
    Ok(Vec::new())
}

/// A standing order, as one struct.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Validate, Sourced)]
#[serde(deny_unknown_fields)]
struct Schedule {
    #[from(user)]
    #[serde(rename = "every/days")]
    every_days: u32,
    payees: [Payee; 2],
    label: String,
}

/// Set up a standing order.
#[tool(risk = "medium")]
fn standing_order(#[args] order: Schedule) -> Result<u32, ToolError> {
    Ok(order.every_days)
}

fn rule(pointer: &str, from: Sources, matching: Matching) -> SourceRule {
    SourceRule {
        pointer: pointer.to_owned(),
        from,
        matching,
    }
}

fn main() {
    use Matching::{Entities, Whole};
    use Sources::{User, UserOrTrusted};

    let payee = |at: &str| {
        vec![
            rule(&format!("{at}/iban"), UserOrTrusted, Whole),
            rule(&format!("{at}/paymentNote"), User, Entities),
            rule(&format!("{at}/ref"), User, Whole),
            rule(&format!("{at}/address/city"), UserOrTrusted, Whole),
        ]
    };
    let mut rules = vec![
        rule("/to", UserOrTrusted, Whole),
        rule("/amount_cents", User, Whole),
        rule("/subject", UserOrTrusted, Entities),
        rule("/references", UserOrTrusted, Whole),
        rule("/notes", User, Entities),
    ];
    rules.extend(payee("/payees/*"));
    rules.extend(payee("/fallback"));
    assert_eq!(
        Pay.contract().provenance(),
        &Provenance {
            rules,
            output: OutputTrust::None,
            trusted_prose: Vec::new(),
            on_untrusted: OnUntrusted::Approve,
            after_untrusted: Some(AfterUntrusted::Refuse),
        }
    );

    assert_eq!(
        ListContacts.contract().provenance(),
        &Provenance {
            output: OutputTrust::All,
            ..Provenance::default()
        }
    );
    assert_eq!(
        ReadTransactions.contract().provenance(),
        &Provenance {
            rules: vec![rule("/account", User, Whole)],
            output: OutputTrust::Fields(vec!["/*/recipient".to_owned(), "/id".to_owned()]),
            trusted_prose: Vec::new(),
            on_untrusted: OnUntrusted::Refuse,
            after_untrusted: Some(AfterUntrusted::Approve),
        }
    );

    assert_eq!(
        ReadMyNotes.contract().provenance(),
        &Provenance {
            trusted_prose: vec![String::new()],
            ..Provenance::default()
        }
    );
    assert_eq!(
        ReadContacts.contract().provenance(),
        &Provenance {
            output: OutputTrust::All,
            trusted_prose: vec!["/*/notes".to_owned()],
            ..Provenance::default()
        }
    );

    let mut rules = vec![rule("/every~1days", User, Whole)];
    rules.extend(payee("/payees/*"));
    assert_eq!(
        StandingOrder.contract().provenance(),
        &Provenance {
            rules,
            ..Provenance::default()
        }
    );

    // The contracts are whole: a registry takes them.
    Registry::builder()
        .tool(Pay)
        .tool(ListContacts)
        .tool(ReadTransactions)
        .tool(ReadMyNotes)
        .tool(ReadContacts)
        .tool(StandingOrder)
        .build()
        .unwrap();
}
