//! The AgentDojo banking suite in Rust: the fixture `banking.json` (written by `extract.py` from
//! the `agentdojo` package), the bank account the tools act on, and the suite's eleven tools with
//! AgentDojo's names, argument names and types, and outputs.
//!
//! A tool returns what AgentDojo's returns, as JSON where AgentDojo prints YAML: the same fields
//! in the same order, the same strings (a file's content, a transaction's subject, with whatever
//! an attacker injected in them, byte for byte), the same messages. Each task gets a bank of its
//! own (a [`World`] of the [`BankingEnvironment`]), so a call's effect is real and stays in its
//! task.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use portcullis::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::fixture::{Fixture, Suite, World, python_float};

static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| Fixture::parse(include_str!("banking.json")));

/// AgentDojo's banking suite.
pub struct Banking;

impl Suite for Banking {
    type Environment = BankingEnvironment;
    const NAME: &'static str = "banking";
    const TOOLS: &'static [&'static str] = &[
        "get_iban",
        "send_money",
        "schedule_transaction",
        "update_scheduled_transaction",
        "get_balance",
        "get_most_recent_transactions",
        "get_scheduled_transactions",
        "read_file",
        "get_user_info",
        "update_password",
        "update_user_info",
    ];

    fn fixture() -> &'static Fixture {
        &FIXTURE
    }

    /// The suite's tools, configured as a careful user following the guide would: the
    /// contracts below, and the intent check that a request to look something up does not
    /// change anything. Approvals of high-risk calls stay off (the registry's default): every
    /// payment would otherwise wait for a human.
    fn registry() -> Registry {
        Registry::builder()
            .tool(GetIban)
            .tool(SendMoney)
            .tool(ScheduleTransaction)
            .tool(UpdateScheduledTransaction)
            .tool(GetBalance)
            .tool(GetMostRecentTransactions)
            .tool(GetScheduledTransactions)
            .tool(ReadFile)
            .tool(GetUserInfo)
            .tool(UpdatePassword)
            .tool(UpdateUserInfo)
            .intent_check(portcullis::ReadOnlyRequests::default())
            .build()
            .expect("the banking tools make a registry")
    }
}

/// The state of one task's world: AgentDojo's `BankingEnvironment`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BankingEnvironment {
    pub bank_account: BankAccount,
    pub filesystem: Filesystem,
    pub user_account: UserAccount,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BankAccount {
    pub balance: f64,
    pub iban: String,
    pub transactions: Vec<Transaction>,
    pub scheduled_transactions: Vec<Transaction>,
}

impl BankAccount {
    /// AgentDojo's `next_id`: one more than the largest id of any transaction, done or scheduled.
    fn next_id(&self) -> i64 {
        self.transactions
            .iter()
            .chain(&self.scheduled_transactions)
            .map(|transaction| transaction.id)
            .max()
            .unwrap_or(0)
            + 1
    }

    /// A new transaction from this account, under the next id.
    fn transaction(
        &self,
        recipient: String,
        amount: f64,
        subject: String,
        date: String,
        recurring: bool,
    ) -> Transaction {
        Transaction {
            id: self.next_id(),
            sender: self.iban.clone(),
            recipient,
            amount,
            subject,
            date,
            recurring,
        }
    }
}

/// A transaction, its fields in AgentDojo's order.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Transaction {
    pub id: i64,
    /// IBAN of the sender.
    pub sender: String,
    /// IBAN of the recipient.
    pub recipient: String,
    pub amount: f64,
    pub subject: String,
    pub date: String,
    pub recurring: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filesystem {
    pub files: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserAccount {
    pub first_name: String,
    pub last_name: String,
    pub street: String,
    pub city: String,
    pub password: String,
}

/// An optional text AgentDojo counts as given: one that is not empty (Python's truth).
fn given(text: Option<String>) -> Option<String> {
    text.filter(|text| !text.is_empty())
}

/// The reply of the tools that change something.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Message {
    pub message: String,
}

impl Message {
    fn new(message: String) -> Self {
        Message { message }
    }
}

/// The user's information, as `get_user_info` shows it (without the password).
#[derive(Debug, Serialize, JsonSchema)]
pub struct UserInfo {
    pub first_name: String,
    pub last_name: String,
    pub street: String,
    pub city: String,
}

impl From<&UserAccount> for UserInfo {
    fn from(account: &UserAccount) -> Self {
        UserInfo {
            first_name: account.first_name.clone(),
            last_name: account.last_name.clone(),
            street: account.street.clone(),
            city: account.city.clone(),
        }
    }
}

/// Get the IBAN of the current bank account.
#[tool(read_only, output = "trusted")]
pub fn get_iban(ctx: &CallContext) -> Result<String, ToolError> {
    Ok(World::<BankingEnvironment>::of(ctx)?
        .bank_account
        .iban
        .clone())
}

/// Sends a transaction to the recipient.
#[tool(
    risk = "high",
    irreversible = "a transfer that left cannot be recalled",
    on_untrusted = "approve"
)]
pub fn send_money(
    ctx: &CallContext,
    /// IBAN of the recipient
    #[from(user, trusted)]
    recipient: String,
    /// Amount of the transaction
    amount: f64,
    /// Subject of the transaction
    #[from(user, trusted, entities)]
    subject: String,
    /// Date of the transaction
    date: String,
) -> Result<Message, ToolError> {
    let mut bank = World::<BankingEnvironment>::of(ctx)?;
    let account = &mut bank.bank_account;
    let transaction = account.transaction(recipient.clone(), amount, subject, date, false);
    account.transactions.push(transaction);
    Ok(Message::new(format!(
        "Transaction to {recipient} for {} sent.",
        python_float(amount)
    )))
}

/// Schedule a transaction.
#[tool(risk = "medium", on_untrusted = "approve")]
pub fn schedule_transaction(
    ctx: &CallContext,
    /// IBAN of the recipient
    #[from(user, trusted)]
    recipient: String,
    /// Amount of the transaction
    amount: f64,
    /// Subject of the transaction
    #[from(user, trusted, entities)]
    subject: String,
    /// Next date of the transaction
    date: String,
    /// Is the transaction recurring
    recurring: bool,
) -> Result<Message, ToolError> {
    let mut bank = World::<BankingEnvironment>::of(ctx)?;
    let account = &mut bank.bank_account;
    let transaction = account.transaction(recipient.clone(), amount, subject, date, recurring);
    account.scheduled_transactions.push(transaction);
    Ok(Message::new(format!(
        "Transaction to {recipient} for {} scheduled.",
        python_float(amount)
    )))
}

/// Update a scheduled transaction.
///
/// As AgentDojo's, it changes only the fields given a value Python counts as true: an empty
/// string, a zero amount or `recurring: false` leave the field as it was.
#[tool(risk = "medium", on_untrusted = "approve")]
pub fn update_scheduled_transaction(
    ctx: &CallContext,
    /// ID of the transaction (mandatory)
    id: i64,
    /// IBAN of the recipient (optional)
    #[from(user, trusted)]
    recipient: Option<String>,
    /// Amount of the transaction (optional)
    amount: Option<f64>,
    /// Subject of the transaction (optional)
    #[from(user, trusted, entities)]
    subject: Option<String>,
    /// Next date of the transaction (optional)
    date: Option<String>,
    /// Is the transaction recurring (optional)
    recurring: Option<bool>,
) -> Result<Message, ToolError> {
    let mut bank = World::<BankingEnvironment>::of(ctx)?;
    let Some(transaction) = bank
        .bank_account
        .scheduled_transactions
        .iter_mut()
        .find(|transaction| transaction.id == id)
    else {
        return Err(ToolError::new(
            "transaction_not_found",
            format!("Transaction with ID {id} not found."),
        ));
    };
    if let Some(recipient) = given(recipient) {
        transaction.recipient = recipient;
    }
    if let Some(amount) = amount.filter(|amount| *amount != 0.0) {
        transaction.amount = amount;
    }
    if let Some(subject) = given(subject) {
        transaction.subject = subject;
    }
    if let Some(date) = given(date) {
        transaction.date = date;
    }
    if recurring == Some(true) {
        transaction.recurring = true;
    }
    Ok(Message::new(format!("Transaction with ID {id} updated.")))
}

/// Get the balance of the account.
#[tool(read_only, output = "trusted")]
pub fn get_balance(ctx: &CallContext) -> Result<f64, ToolError> {
    Ok(World::<BankingEnvironment>::of(ctx)?.bank_account.balance)
}

/// Get the list of the most recent transactions, e.g. to summarize the last n transactions.
///
/// An incoming transaction's sender and every subject are written by whoever sent the money;
/// an outgoing transaction's recipient was chosen by the user, and an incoming one's is the
/// user's own account: only the recipients are trusted.
#[tool(read_only, trusted_output = ["/*/recipient"])]
pub fn get_most_recent_transactions(
    ctx: &CallContext,
    /// Number of transactions to return (default 100)
    n: Option<i64>,
) -> Result<Vec<Transaction>, ToolError> {
    let transactions = &World::<BankingEnvironment>::of(ctx)?
        .bank_account
        .transactions;
    // AgentDojo returns `transactions[-n:]`, with Python's slice: `n = 0` is every transaction,
    // a negative `n` skips the first `-n`.
    let n = n.unwrap_or(100);
    let length = i64::try_from(transactions.len()).unwrap_or(i64::MAX);
    let start = if n > 0 {
        length.saturating_sub(n).max(0)
    } else {
        n.saturating_neg().min(length)
    };
    let start = usize::try_from(start).unwrap_or(transactions.len());
    Ok(transactions[start..].to_vec())
}

/// Get the list of scheduled transactions.
#[tool(read_only, output = "trusted")]
pub fn get_scheduled_transactions(ctx: &CallContext) -> Result<Vec<Transaction>, ToolError> {
    Ok(World::<BankingEnvironment>::of(ctx)?
        .bank_account
        .scheduled_transactions
        .clone())
}

/// Reads the contents of the file at the given path.
#[tool(read_only)]
pub fn read_file(
    ctx: &CallContext,
    /// The path to the file to read.
    file_path: String,
) -> Result<String, ToolError> {
    Ok(World::<BankingEnvironment>::of(ctx)?
        .filesystem
        .files
        .get(&file_path)
        .cloned()
        .unwrap_or_default())
}

/// Get the user information.
#[tool(read_only, output = "trusted")]
pub fn get_user_info(ctx: &CallContext) -> Result<UserInfo, ToolError> {
    Ok(UserInfo::from(
        &World::<BankingEnvironment>::of(ctx)?.user_account,
    ))
}

/// Update the user password.
#[tool(risk = "high", irreversible = "the old password is not kept")]
pub fn update_password(
    ctx: &CallContext,
    /// New password for the user
    #[sensitive]
    #[from(user)]
    password: String,
) -> Result<Message, ToolError> {
    World::<BankingEnvironment>::of(ctx)?.user_account.password = password;
    Ok(Message::new("Password updated.".to_owned()))
}

/// Update the user information.
///
/// As AgentDojo's, an empty string leaves the field as it was.
#[tool(risk = "medium", on_untrusted = "approve")]
pub fn update_user_info(
    ctx: &CallContext,
    /// First name of the user (optional)
    #[from(user, trusted)]
    first_name: Option<String>,
    /// Last name of the user (optional)
    #[from(user, trusted)]
    last_name: Option<String>,
    /// Street of the user (optional)
    #[from(user, trusted)]
    street: Option<String>,
    /// City of the user (optional)
    #[from(user, trusted)]
    city: Option<String>,
) -> Result<UserInfo, ToolError> {
    let mut bank = World::<BankingEnvironment>::of(ctx)?;
    let account = &mut bank.user_account;
    for (field, value) in [
        (&mut account.first_name, first_name),
        (&mut account.last_name, last_name),
        (&mut account.street, street),
        (&mut account.city, city),
    ] {
        if let Some(value) = given(value) {
            *field = value;
        }
    }
    Ok(UserInfo::from(&*account))
}
