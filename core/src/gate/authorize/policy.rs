//! Custom policies and intent checks: the rules of an application that the contract alone
//! cannot state ("ids below 100 are protected in production", "a request to look something up
//! does not delete it").
//!
//! A [`Policy`] sees who is calling, the tool's contract and the call's arguments, and allows
//! or denies with a rule id and a message. Registry-wide policies
//! ([`RegistryBuilder::policy`](crate::RegistryBuilder::policy)) see the arguments as JSON; a
//! per-tool policy (`#[tool(policy = path)]`) sees them typed. An intent check
//! ([`RegistryBuilder::intent_check`](crate::RegistryBuilder::intent_check)) is a policy about
//! the user's original request: its denials are reported as `intent_mismatch` instead of
//! `policy_denied`. A policy that fails or panics denies.

use std::fmt;
use std::future::ready;

use serde_json::Value;

use crate::tool::BoxFuture;
use crate::{CallContext, Risk, ToolContract};

/// What a policy decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The call may go on.
    Allow,
    /// The call is refused by the named rule.
    Deny {
        /// A stable id of the rule, for the audit log and the model.
        rule: String,
        /// A sentence for the model.
        message: String,
    },
}

impl Decision {
    /// Refuses the call by `rule`, saying why.
    pub fn deny(rule: impl Into<String>, message: impl Into<String>) -> Self {
        Decision::Deny {
            rule: rule.into(),
            message: message.into(),
        }
    }
}

/// A policy that could not decide (a lookup failed, a service is down). The call is denied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError(String);

impl PolicyError {
    /// An error with a message for the operator; the model is told only that the policy
    /// could not decide.
    pub fn new(message: impl Into<String>) -> Self {
        PolicyError(message.into())
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PolicyError {}

/// The call a registry-wide policy judges.
#[derive(Debug, Clone, Copy)]
pub struct PolicyRequest<'a> {
    /// Who is calling.
    pub ctx: &'a CallContext,
    /// The tool's contract.
    pub contract: &'a ToolContract,
    /// The arguments as the model sent them, already decoded, validated and authorized
    /// (defaults are not filled in: an absent argument is absent here).
    pub arguments: &'a Value,
}

/// A registry-wide rule over every call. Implement it for asynchronous rules; a closure
/// `Fn(&PolicyRequest) -> Result<Decision, PolicyError>` is a policy too.
///
/// ```
/// use portcullis_core::{Decision, PolicyRequest, Risk};
///
/// let no_critical_on_weekends = |request: &PolicyRequest<'_>| {
///     let weekend = false; // look the calendar up here
///     Ok(if weekend && request.contract.risk() == Risk::Critical {
///         Decision::deny("no_critical_on_weekends", "critical changes wait for Monday")
///     } else {
///         Decision::Allow
///     })
/// };
/// let registry = portcullis_core::Registry::builder()
///     .policy(no_critical_on_weekends)
///     .build()
///     .unwrap();
/// # drop(registry);
/// ```
pub trait Policy: Send + Sync + 'static {
    /// Decides on one call.
    fn evaluate<'a>(
        &'a self,
        request: PolicyRequest<'a>,
    ) -> BoxFuture<'a, Result<Decision, PolicyError>>;
}

impl<F> Policy for F
where
    F: Fn(&PolicyRequest<'_>) -> Result<Decision, PolicyError> + Send + Sync + 'static,
{
    fn evaluate<'a>(
        &'a self,
        request: PolicyRequest<'a>,
    ) -> BoxFuture<'a, Result<Decision, PolicyError>> {
        Box::pin(ready(self(&request)))
    }
}

/// A rule-based intent check: refuses a destructive call (not read-only, risk at least
/// medium) when the user's request only asks to read (to query, find, show, view or list) and
/// names no destructive action (to delete, remove, clear or drop), in English or Chinese.
/// A call without a recorded request is not judged.
///
/// ```
/// use portcullis_core::{CallContext, ReadOnlyRequests};
///
/// let check = ReadOnlyRequests::default();
/// assert!(check.only_reads("请帮我查找一下用户ID为123的订单信息。"));
/// assert!(!check.only_reads("删除我的测试账户数据。"));
/// assert!(!check.only_reads("Find the duplicate rows and delete them"));
/// ```
#[derive(Debug, Clone)]
pub struct ReadOnlyRequests {
    reading: Vec<String>,
    destructive: Vec<String>,
}

impl Default for ReadOnlyRequests {
    fn default() -> Self {
        let words = |list: &[&str]| list.iter().map(|word| (*word).to_owned()).collect();
        ReadOnlyRequests {
            reading: words(&[
                "query", "find", "show", "view", "list", "look up", "search", "查询", "查找",
                "查看", "显示",
            ]),
            destructive: words(&[
                "delete", "remove", "clear", "drop", "erase", "purge", "wipe", "删除", "清除",
                "移除",
            ]),
        }
    }
}

impl ReadOnlyRequests {
    /// Adds words that ask to read.
    pub fn reading_words<I, S>(mut self, words: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.reading
            .extend(words.into_iter().map(|word| word.into().to_lowercase()));
        self
    }

    /// Adds words that name a destructive action.
    pub fn destructive_words<I, S>(mut self, words: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.destructive
            .extend(words.into_iter().map(|word| word.into().to_lowercase()));
        self
    }

    /// Whether `request` asks only to read: it names a reading word and no destructive one.
    pub fn only_reads(&self, request: &str) -> bool {
        let request = request.to_lowercase();
        let names = |words: &[String]| words.iter().any(|word| request.contains(word.as_str()));
        names(&self.reading) && !names(&self.destructive)
    }
}

impl Policy for ReadOnlyRequests {
    fn evaluate<'a>(
        &'a self,
        request: PolicyRequest<'a>,
    ) -> BoxFuture<'a, Result<Decision, PolicyError>> {
        let contract = request.contract;
        let destructive = !contract.read_only() && contract.risk() >= Risk::Medium;
        let decision = match request.ctx.request() {
            Some(asked) if destructive && self.only_reads(asked) => Decision::deny(
                "read_only_request",
                format!(
                    "the user asked only to look something up, and `{}` changes data",
                    contract.name()
                ),
            ),
            _ => Decision::Allow,
        };
        Box::pin(ready(Ok(decision)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn contract(risk: Risk, read_only: bool) -> ToolContract {
        let builder = ToolContract::builder(
            "delete_record",
            "Deletes.",
            json!({"type": "object", "additionalProperties": false}),
        )
        .risk(risk);
        if read_only {
            builder.read_only().build()
        } else {
            builder.irreversible("gone").build()
        }
    }

    fn decide(check: &ReadOnlyRequests, request: &str, contract: &ToolContract) -> Decision {
        let ctx = CallContext::new("a").with_request(request);
        let arguments = json!({});
        let request = PolicyRequest {
            ctx: &ctx,
            contract,
            arguments: &arguments,
        };
        let mut future = check.evaluate(request);
        let waker = std::task::Waker::noop();
        match future
            .as_mut()
            .poll(&mut std::task::Context::from_waker(waker))
        {
            std::task::Poll::Ready(decision) => decision.unwrap(),
            std::task::Poll::Pending => unreachable!("the rule decides at once"),
        }
    }

    #[test]
    fn reading_requests_do_not_authorize_destruction() {
        let check = ReadOnlyRequests::default();
        let delete = contract(Risk::High, false);
        let lookup = "请帮我查找一下用户ID为123的订单信息。";
        assert!(
            matches!(decide(&check, lookup, &delete), Decision::Deny { ref rule, .. } if rule == "read_only_request")
        );
        assert_eq!(
            decide(&check, "删除我的测试账户数据。", &delete),
            Decision::Allow
        );
        assert_eq!(
            decide(
                &check,
                "Show the orders, then DELETE the test ones",
                &delete
            ),
            Decision::Allow
        );
        assert!(matches!(
            decide(&check, "Please LIST my invoices", &delete),
            Decision::Deny { .. }
        ));
    }

    #[test]
    fn harmless_tools_are_not_judged() {
        let check = ReadOnlyRequests::default();
        let lookup = "show me the users";
        assert_eq!(
            decide(&check, lookup, &contract(Risk::High, true)),
            Decision::Allow
        );
        assert_eq!(
            decide(&check, lookup, &contract(Risk::Low, false)),
            Decision::Allow
        );
    }

    #[test]
    fn words_can_be_added() {
        let check = ReadOnlyRequests::default()
            .reading_words(["Consulter"])
            .destructive_words(["Supprimer"]);
        assert!(check.only_reads("consulter les factures"));
        assert!(!check.only_reads("consulter puis supprimer"));
    }
}
