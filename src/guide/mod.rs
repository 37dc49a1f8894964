//! The guide: how to do each thing portcullis does, one page per task, every example a
//! doctest that runs with `cargo test`.
//!
//! Each page starts with a task and a short worked example, and ends with the reference: the
//! options, codes and tables. Read [gates] first: it follows one call from
//! [`Registry::dispatch`](crate::Registry::dispatch) to the tool's body, and every other page
//! is about one of its gates or what surrounds them.
//!
//! | page | the task |
//! |---|---|
//! | [gates] | follow a call through the gates; what the canonical arguments are; how numbers are read |
//! | [attribute] | declare a tool with `#[tool]`: every key, every parameter form, what is a compile error |
//! | [policies] | refuse a call by a rule of yours; check that a call fits what the user asked |
//! | [cedar] | let a policy team decide calls in Cedar, validated against the tools, swapped live |
//! | [provenance] | keep a value an injected text supplied out of a payment |
//! | [budgets] | cap a task's calls and cost, stop loops, rate-limit an actor, stop a retrier |
//! | [approvals] | make a payout wait for finance; signed decisions and who may decide |
//! | [console] | let reviewers decide waiting calls in the browser, each decision signed by their passkey |
//! | [audit] | keep a tamper-evident record of every decision |
//! | [transactions] | undo the completed steps of a task that failed halfway |
//! | [agent] | let a model work through a task: the loop, its limits, pauses for a human across restarts |
//! | [production] | run several workers on SQLite or PostgreSQL: stores, sealing, keys, crashes, the command line |
//! | [mcp] | serve the tools to any MCP client, over stdio or HTTP |
//! | [providers] | export the tools to OpenAI, Anthropic, Gemini; parse their calls and reply; lock the contracts |
//! | [testing] | test your tools and run this workspace's tests |
//! | [refusals] | every refusal code: which gate, when, whether retrying helps |
//! | [performance] | what the gates cost, measured against a baseline |
//! | [threat_model] | what each defence stops, and what it does not |
//! | [architecture] | where each concern lives in the workspace |

#[doc = include_str!("gates.md")]
pub mod gates {}

#[doc = include_str!("attribute.md")]
pub mod attribute {}

#[doc = include_str!("policies.md")]
pub mod policies {}

#[doc = include_str!("cedar.md")]
pub mod cedar {}

#[doc = include_str!("provenance.md")]
pub mod provenance {}

#[doc = include_str!("budgets.md")]
pub mod budgets {}

#[doc = include_str!("approvals.md")]
pub mod approvals {}

#[doc = include_str!("console.md")]
pub mod console {}

#[doc = include_str!("audit.md")]
pub mod audit {}

#[doc = include_str!("transactions.md")]
pub mod transactions {}

#[doc = include_str!("agent.md")]
pub mod agent {}

#[doc = include_str!("production.md")]
pub mod production {}

#[doc = include_str!("mcp.md")]
pub mod mcp {}

#[doc = include_str!("providers.md")]
pub mod providers {}

#[doc = include_str!("testing.md")]
pub mod testing {}

#[doc = include_str!("refusals.md")]
pub mod refusals {}

#[doc = include_str!("performance.md")]
pub mod performance {}

#[doc = include_str!("threat_model.md")]
pub mod threat_model {}

#[doc = include_str!("architecture.md")]
pub mod architecture {}
