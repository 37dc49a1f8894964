//! Custom policies and intent checks: the rules of an application that the contract alone
//! cannot state ("ids below 100 are protected in production", "a request to look something up
//! does not delete it").
//!
//! A [`Policy`] sees who is calling, the tool's contract and the call's arguments, and allows
//! or denies with a rule id and a message. Registry-wide policies
//! ([`RegistryBuilder::policy`](crate::RegistryBuilder::policy)) see the canonical arguments as
//! JSON (see [`PolicyRequest::arguments`]); a
//! per-tool policy (`#[tool(policy = path)]`) sees them typed. An intent check
//! ([`RegistryBuilder::intent_check`](crate::RegistryBuilder::intent_check)) is a policy about
//! the user's original request: its denials are reported as `intent_mismatch` instead of
//! `policy_denied`. A policy that fails or panics denies.

use std::fmt;
use std::future::ready;
use std::ops::Range;
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::context::CallContext;
use crate::contract::{Risk, ToolContract, ValueSource};
use crate::future::BoxFuture;

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
    /// A versioned rule set decided (a Cedar policy set): the call's audit record names the
    /// version and the rules that decided, whichever way. A refusal tells the model only that
    /// a policy refused the call (`forbidden_by_policy`, or `no_policy_permits` when no rule
    /// permitted it), never a rule's id or text.
    Ruled(Ruling),
}

/// Which version of a rule set decided a call, by which of its rules: kept in the call's audit
/// record ([`AuditRecord::rulings`](crate::audit::AuditRecord::rulings)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ruling {
    /// The rule set that decided (`cedar`).
    pub rule_set: String,
    /// The version of the rule set that decided.
    pub version: String,
    /// Whether the call may go on.
    pub allowed: bool,
    /// The ids of the rules that decided: the rules that permitted an allowed call, those that
    /// forbade a refused one; none for a call no rule permitted.
    pub rules: Vec<String>,
}

impl Ruling {
    /// What the model is told of a refusal by this ruling: its stable reason and a sentence,
    /// never a rule's id or text.
    pub(crate) fn refusal(&self) -> (&'static str, &'static str) {
        if self.rules.is_empty() {
            ("no_policy_permits", "no policy permits this call")
        } else {
            ("forbidden_by_policy", "a policy forbids this call")
        }
    }
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

/// What a task spent before a call, as the budget gate counts it: the calls it reserved (a call
/// given back, rejected by a reviewer or expired, no longer counts) and their cost; for the
/// policies that [read it](Policy::reads_budget), from
/// [`BudgetStore::task_usage`](crate::BudgetStore::task_usage).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetUsage {
    /// The task's calls.
    pub calls: u64,
    /// The sum of their contracts' `cost`.
    pub cost: u64,
}

/// The call a registry-wide policy judges.
#[derive(Debug, Clone, Copy)]
pub struct PolicyRequest<'a> {
    /// Who is calling.
    pub ctx: &'a CallContext,
    /// The tool's contract.
    pub contract: &'a ToolContract,
    /// The canonical arguments: the typed arguments the tool will receive, written as JSON by
    /// their own `Serialize`, after decode, validate and the tenant and environment checks.
    /// Defaults are filled in, numbers are in the form the type holds (`1.0` sent for an
    /// integer is `1` here), names are those the model sees, and `#[sensitive]` values are
    /// present (a policy is code the application trusts). Never the model's raw text.
    pub arguments: &'a Value,
    /// Where each value the contract declares `#[from(...)]` was found, when the provenance
    /// gate judged the call (a call a reviewer approved was judged when it began to wait).
    pub sources: Option<&'a [ValueSource]>,
    /// What the task spent before this call, as the budget gate counts it, for a registry
    /// with a policy that [reads the budget](Policy::reads_budget).
    pub usage: Option<BudgetUsage>,
}

impl<'a> PolicyRequest<'a> {
    /// A request of `ctx` to call the tool of `contract` with `arguments` (canonical), with no
    /// provenance and no budget usage: for a policy's own tests.
    pub fn new(ctx: &'a CallContext, contract: &'a ToolContract, arguments: &'a Value) -> Self {
        PolicyRequest {
            ctx,
            contract,
            arguments,
            sources: None,
            usage: None,
        }
    }
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

    /// Checks the policy against every tool of the registry being built, sorted by name; an
    /// error fails the build ([`BuildError::Policy`](crate::BuildError::Policy)). A rule set
    /// checks here that every rule names arguments the tools have, with their types.
    fn prepare(&self, tools: &[&ToolContract]) -> Result<(), PolicyError> {
        let _ = tools;
        Ok(())
    }

    /// Whether the policy reads [`PolicyRequest::usage`]: the registry then counts every
    /// task's calls and cost, and reads them before the policies run.
    fn reads_budget(&self) -> bool {
        false
    }
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

/// A rule-based intent check: a request to look something up does not delete it.
///
/// It judges destructive calls: of a tool that is not `read_only` and whose risk is at least
/// medium. Such a call is refused with the rule `read_only_request` when the user's request
/// only reads: it asks to look something up (query, find, show, view, list, search, look up;
/// 查询, 查找, 查看, 显示, 搜索, 列出; a word one or two words after a determiner is a noun, as
/// in "the grocery list", and asks nothing) and names no destructive action (delete, remove, clear,
/// drop, erase, purge, wipe, destroy, truncate, discard, clean up; 删除, 删掉, 清除, 清理, 清空,
/// 移除, 销毁) as a verb that is not negated, nor the action of the tool called, the verb its
/// name starts with (`send` for `send_email`: "send the TODO list to Bob" asks to send). It fails closed: a destructive word negated
/// anywhere before it in its sentence ("Find my old orders. Do not delete anything!", "不要删除"),
/// said of what is done already ("my deleted orders", "已删除的邮件"), or only part of another
/// word ("clearly", "dropdown") does not make the request ask for destruction, and a
/// destructive call without a recorded request ([`CallContext::with_request`]) is refused with
/// the rule `request_unknown`.
///
/// What the rule can judge: whether a request that looks something up also asks for a
/// destructive action, in English and Chinese (more words can be added). What it cannot:
/// whether a request asks for *this* call (the right table, the right amount), requests that
/// neither read nor destroy ("summarize the ticket" is not judged), other languages, or a
/// negation in another sentence. Erring on the side of refusing, "Show the logs, don't worry,
/// then delete the old ones" reads as negated. It is a tripwire for an injected instruction
/// that turns a lookup into a deletion, not a proof of intent: put the decisions that matter
/// in policies and approvals.
///
/// ```
/// use portcullis_core::ReadOnlyRequests;
///
/// let check = ReadOnlyRequests::default();
/// assert!(check.only_reads("请帮我查找一下用户ID为123的订单信息。"));
/// assert!(check.only_reads("Find my old orders. Do not delete anything!"));
/// assert!(check.only_reads("Show the clearly overdue invoices"));
/// assert!(!check.only_reads("Find the duplicate rows and delete them"));
/// assert!(check.asks_to_destroy("清理一下生产环境的日志"));
/// ```
#[derive(Debug, Clone)]
pub struct ReadOnlyRequests {
    reading: Vec<String>,
    destructive: Vec<String>,
    negations: Vec<String>,
    last: LastVerdict,
}

/// The last request judged by [`ReadOnlyRequests::only_reads`] and its verdict: every call of a
/// task carries the same request, and comparing it costs far less than reading it again. Empty
/// in a clone, and emptied when the words change.
#[derive(Debug, Default)]
struct LastVerdict(Mutex<Option<(String, bool)>>);

impl Clone for LastVerdict {
    fn clone(&self) -> Self {
        LastVerdict::default()
    }
}

impl Default for ReadOnlyRequests {
    fn default() -> Self {
        let words = |list: &[&str]| list.iter().map(|word| (*word).to_owned()).collect();
        ReadOnlyRequests {
            reading: words(&[
                "query", "find", "show", "view", "list", "look up", "search", "查询", "查找",
                "查看", "显示", "搜索", "列出",
            ]),
            destructive: words(&[
                "delete",
                "remove",
                "clear",
                "drop",
                "erase",
                "purge",
                "wipe",
                "destroy",
                "truncate",
                "discard",
                "clean up",
                "clean out",
                "get rid of",
                "删除",
                "删掉",
                "清除",
                "清理",
                "清空",
                "移除",
                "去掉",
                "销毁",
                "抹掉",
            ]),
            negations: words(&[
                "not", "don't", "dont", "never", "no", "without", "avoid", "nothing", "stop",
                "refrain", "不要", "不用", "无需", "不必", "别", "勿", "禁止", "不", "没有", "已",
                "被",
            ]),
            last: LastVerdict::default(),
        }
    }
}

impl ReadOnlyRequests {
    /// Adds words (or phrases of several words) that ask to read.
    pub fn reading_words<I, S>(mut self, words: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.reading
            .extend(words.into_iter().map(|word| word.into().to_lowercase()));
        self.last = LastVerdict::default();
        self
    }

    /// Adds words (or phrases of several words) that name a destructive action.
    pub fn destructive_words<I, S>(mut self, words: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.destructive
            .extend(words.into_iter().map(|word| word.into().to_lowercase()));
        self.last = LastVerdict::default();
        self
    }

    /// Adds words that negate a destructive word after them in the same clause.
    pub fn negations<I, S>(mut self, words: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.negations
            .extend(words.into_iter().map(|word| word.into().to_lowercase()));
        self.last = LastVerdict::default();
        self
    }

    /// Whether `request` asks only to read: it names a reading word, and no destructive action
    /// that is not negated.
    pub fn only_reads(&self, request: &str) -> bool {
        let last = || self.last.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((judged, verdict)) = last().as_ref()
            && judged == request
        {
            return *verdict;
        }
        let verdict = self.judge(request);
        *last() = Some((request.to_owned(), verdict));
        verdict
    }

    fn judge(&self, request: &str) -> bool {
        let sentences = sentences(request);
        let reads = sentences.iter().any(|sentence| {
            self.reading.iter().any(|word| {
                sentence.any_occurrence(word, true, |at| !sentence.follows_a_determiner(at))
            })
        });
        reads && !self.destroys(&sentences)
    }

    /// Whether `request` asks for the action of the tool named `tool`: it names the verb the
    /// tool's name starts with (`send` for `send_email`, `share` for `share_file`), as the verb
    /// itself (not `deleted` in "my deleted orders"), and no negation comes before it in its
    /// sentence. "Send an e-mail to each person on
    /// the TODO list" looks something up, and asks to send too.
    pub fn asks_for(&self, request: &str, tool: &str) -> bool {
        let verb = tool
            .split(|c: char| !c.is_ascii_alphabetic())
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let reading = self.reading.contains(&verb);
        verb.len() >= 3
            && !reading
            && sentences(request).iter().any(|sentence| {
                sentence.any_occurrence(&verb, false, |at| !self.negated(sentence, at))
            })
    }

    /// Whether `request` asks for a destructive action: it names one, and no negation comes
    /// shortly before it in the same sentence.
    pub fn asks_to_destroy(&self, request: &str) -> bool {
        self.destroys(&sentences(request))
    }

    fn destroys(&self, sentences: &[Sentence]) -> bool {
        sentences.iter().any(|sentence| {
            self.destructive
                .iter()
                .any(|word| sentence.any_occurrence(word, false, |at| !self.negated(sentence, at)))
        })
    }

    /// Whether the word at byte `at` of `sentence` is negated, or said of what is done
    /// already: by a negation anywhere before it in the sentence ("don't change, move or delete
    /// anything"), or, in Chinese, by a negation or a mark of the done or the passive (已, 被)
    /// anywhere before it ("查看订单，不要把它们删除", "查看已删除的邮件").
    fn negated(&self, sentence: &Sentence, at: usize) -> bool {
        let before = &sentence.text[..at];
        let english = sentence
            .words
            .iter()
            .take_while(|word| word.start < at)
            .any(|word| {
                // The typographic apostrophe reads as the plain one ("don’t").
                let plain = || {
                    sentence
                        .word(word)
                        .chars()
                        .map(|c| if c == '’' { '\'' } else { c })
                };
                plain().rev().take(3).eq("t'n".chars())
                    || self
                        .negations
                        .iter()
                        .any(|negation| negation.is_ascii() && plain().eq(negation.chars()))
            });
        english
            || self.negations.iter().any(|negation| {
                !sentence.ascii && !negation.is_ascii() && before.contains(negation.as_str())
            })
    }
}

/// One sentence of a request, lower-cased, and its words: a negation reaches no further than
/// its sentence (a comma does not stop it: "never, ever drop one").
struct Sentence {
    text: String,
    /// The words (letters, digits and apostrophes), as byte ranges of `text`.
    words: Vec<Range<usize>>,
    /// Whether `text` is ASCII: then no word of another script can be in it.
    ascii: bool,
}

/// Words after which, one or two words on, a reading word is a noun: "the TODO list", "my
/// search", "a view".
const DETERMINERS: &[&str] = &[
    "a", "an", "the", "my", "your", "our", "their", "his", "her", "its", "this", "that", "these",
    "those", "each", "every", "any", "some",
];

impl Sentence {
    fn word(&self, range: &Range<usize>) -> &str {
        &self.text[range.clone()]
    }

    /// Whether the word at byte `at` comes one or two words after a determiner: a noun ("the
    /// grocery list"), not a request to look something up ("list my files").
    fn follows_a_determiner(&self, at: usize) -> bool {
        let Some(index) = self.words.iter().position(|word| word.start == at) else {
            return false;
        };
        self.words[index.saturating_sub(2)..index]
            .iter()
            .any(|word| DETERMINERS.contains(&self.word(word)))
    }

    /// Whether `word` (or phrase) occurs somewhere that `fits` (given its byte offset).
    /// English words match whole words and their inflections; Chinese words match anywhere.
    ///
    /// A destructive word counts only as the verb itself (`delete`, not `deleted`, `deletion`
    /// or `deleting`): "show me the deleted orders" asks to read. A reading word counts in any
    /// form (`searching`, `listed`).
    fn any_occurrence(
        &self,
        word: &str,
        inflected: bool,
        mut fits: impl FnMut(usize) -> bool,
    ) -> bool {
        if !word.is_ascii() {
            return !self.ascii && self.text.match_indices(word).any(|(at, _)| fits(at));
        }
        let mut phrase = word.split_whitespace();
        let first = phrase.next().unwrap_or_default();
        self.words.iter().enumerate().any(|(index, range)| {
            let token = self.word(range);
            (if inflected {
                inflects(token, first)
            } else {
                token == first
            }) && phrase.clone().enumerate().all(|(offset, part)| {
                self.words
                    .get(index + 1 + offset)
                    .is_some_and(|token| self.word(token) == part)
            }) && fits(range.start)
        })
    }
}

fn sentences(request: &str) -> Vec<Sentence> {
    let is_word = |c: char| c.is_alphanumeric() || c == '\'' || c == '’';
    request
        .split(['.', ';', '!', '?', ':', '\n', '。', '；', '！', '？', '：'])
        .map(|sentence| {
            let text = sentence.to_lowercase();
            let mut words = Vec::new();
            let mut start = None;
            for (index, c) in text.char_indices().chain([(text.len(), ' ')]) {
                match (is_word(c), start) {
                    (true, None) => start = Some(index),
                    (false, Some(from)) => {
                        words.push(from..index);
                        start = None;
                    }
                    _ => {}
                }
            }
            Sentence {
                ascii: text.is_ascii(),
                text,
                words,
            }
        })
        .collect()
}

/// Whether `token` is `word` or one of its inflections (`delete`, `deletes`, `deleted`,
/// `deleting`, `deletion`; `drop`, `dropped`, `dropping`; `removal`), and not merely a word
/// that starts alike (`clearly` is not `clear`).
fn inflects(token: &str, word: &str) -> bool {
    // Every form starts with the word's first letter: most tokens stop here.
    if token.as_bytes().first() != word.as_bytes().first() {
        return false;
    }
    const SUFFIXES: &[&str] = &[
        "", "s", "es", "d", "ed", "ing", "ion", "ions", "al", "er", "ers",
    ];
    let suffix_of = |stem: &str| {
        token
            .strip_prefix(stem)
            .filter(|rest| SUFFIXES.contains(rest))
    };
    if suffix_of(word).is_some() {
        return true;
    }
    // `delete` → `deleting`; `drop` → `dropped`.
    let without_e = word
        .strip_suffix('e')
        .is_some_and(|stem| suffix_of(stem).is_some());
    let doubled = token.strip_prefix(word).is_some_and(|rest| {
        word.chars().last().is_some_and(|last| {
            rest.strip_prefix(last)
                .is_some_and(|suffix| !suffix.is_empty() && SUFFIXES.contains(&suffix))
        })
    });
    without_e || doubled
}

impl Policy for ReadOnlyRequests {
    fn evaluate<'a>(
        &'a self,
        request: PolicyRequest<'a>,
    ) -> BoxFuture<'a, Result<Decision, PolicyError>> {
        let contract = request.contract;
        let destructive = !contract.read_only() && contract.risk() >= Risk::Medium;
        let decision = match request.ctx.request() {
            _ if !destructive => Decision::Allow,
            None => Decision::deny(
                "request_unknown",
                format!(
                    "`{}` changes data, and the user's request is not known",
                    contract.name()
                ),
            ),
            Some(asked) if self.only_reads(asked) && !self.asks_for(asked, contract.name()) => {
                Decision::deny(
                    "read_only_request",
                    format!(
                        "the user asked only to look something up, and `{}` changes data",
                        contract.name()
                    ),
                )
            }
            Some(_) => Decision::Allow,
        };
        Box::pin(ready(Ok(decision)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_reading_word_used_as_a_noun_does_not_read() {
        let check = ReadOnlyRequests::default();
        for noun in [
            "Please add the ingredients to the grocery list I already have",
            "Do the actions in my TODO list",
            "Add a view for the team",
        ] {
            assert!(!check.only_reads(noun), "{noun}");
        }
        for verb in [
            "List my files",
            "Please list the files",
            "Can you search my inbox",
            "Show the list of orders",
        ] {
            assert!(check.only_reads(verb), "{verb}");
        }
    }

    #[test]
    fn a_request_that_names_the_tools_own_verb_asks_for_it() {
        let check = ReadOnlyRequests::default();
        let todo = "Find the minutes, then send an e-mail to each person on the TODO list";
        assert!(check.only_reads(todo), "`find` reads");
        assert!(check.asks_for(todo, "send_email"));
        assert!(!check.asks_for(todo, "delete_email"));
        assert!(check.asks_for("Find the packing list and share it with Bob", "share_file"));
        assert!(!check.asks_for("Find the file but don't share it", "share_file"));
        assert!(!check.asks_for("Show me my deleted orders", "delete_order"));
        assert!(
            !check.asks_for("List the files", "list_files"),
            "a reading verb asks for nothing more"
        );
        assert!(
            !check.asks_for("Go to the docs", "go"),
            "too short a verb to tell"
        );
    }

    #[test]
    fn a_remembered_verdict_is_the_verdict_and_new_words_forget_it() {
        let check = ReadOnlyRequests::default();
        let archive = "Find the old orders and archive them";
        let delete = "Find the old orders and delete them";
        for _ in 0..2 {
            assert!(check.only_reads(archive));
            assert!(check.only_reads(archive), "remembered");
            assert!(!check.only_reads(delete));
        }
        assert!(check.clone().only_reads(archive));
        assert!(check.only_reads(archive));
        let check = check.destructive_words(["archive"]);
        assert!(!check.only_reads(archive), "judged with the new words");
    }

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
        now(check.evaluate(PolicyRequest::new(&ctx, contract, &arguments)))
    }

    fn now(mut future: BoxFuture<'_, Result<Decision, PolicyError>>) -> Decision {
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
        for request in [
            "请帮我查找一下用户ID为123的订单信息。",
            "Find my old orders. Do not delete anything!",
            "Please LIST my invoices",
            "Show the clearly overdue invoices",
            "Look up the dropdown options",
            "List the users, but don't remove anyone",
            "List the users and never, ever drop one",
            "查看日志，不要删除任何东西",
            "查询订单，请勿清理",
            "Show me my deleted orders",
            "List the cleared invoices",
            "List orders but don't change, move, rename or delete anything",
            "查看订单，不要把它们删除",
            "查看已删除的邮件",
        ] {
            assert!(
                matches!(decide(&check, request, &delete), Decision::Deny { ref rule, .. } if rule == "read_only_request"),
                "{request}"
            );
        }
        for request in [
            "删除我的测试账户数据。",
            "清理一下生产环境的日志",
            "Show the orders, then DELETE the test ones",
            "Find the duplicate rows and remove them",
            "Search for stale sessions and get rid of them",
            "Summarize the ticket",
        ] {
            assert_eq!(
                decide(&check, request, &delete),
                Decision::Allow,
                "{request}"
            );
        }
    }

    #[test]
    fn a_destructive_call_without_a_request_is_refused() {
        let check = ReadOnlyRequests::default();
        let ctx = CallContext::new("a");
        let arguments = json!({});
        let contract = contract(Risk::High, false);
        let decision = now(check.evaluate(PolicyRequest::new(&ctx, &contract, &arguments)));
        assert!(matches!(decision, Decision::Deny { ref rule, .. } if rule == "request_unknown"));
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
            .destructive_words(["Supprimer"])
            .negations(["sans"]);
        assert!(check.only_reads("consulter les factures"));
        assert!(!check.only_reads("consulter puis supprimer"));
        assert!(check.only_reads("consulter sans supprimer"));
    }
}
