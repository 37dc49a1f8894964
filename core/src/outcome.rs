//! What dispatch returns.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::rejection::{Rejection, RejectionCode};

use crate::contract::Risk;

/// The result of dispatching one call: the tool ran and returned its output, a gate refused
/// the call, or the call waits for a human's approval.
///
/// It serializes as `{"completed": output}`, `{"rejected": rejection}` or `{"pending": ticket}`,
/// for a store that keeps the outcome of a call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// Every gate passed and the tool returned this output, as JSON.
    Completed(Value),
    /// A gate refused the call; the tool's body did not run (or, for the execute gate's codes,
    /// it failed).
    Rejected(Rejection),
    /// The call waits for a human's decision; see [`Registry::resume`](crate::Registry::resume).
    Pending(Box<Ticket>),
}

impl Outcome {
    /// Whether the tool ran and succeeded.
    pub fn is_completed(&self) -> bool {
        matches!(self, Outcome::Completed(_))
    }

    /// The output of a completed call.
    pub fn output(&self) -> Option<&Value> {
        match self {
            Outcome::Completed(output) => Some(output),
            Outcome::Rejected(_) | Outcome::Pending(_) => None,
        }
    }

    /// The refusal of a rejected call.
    pub fn rejection(&self) -> Option<&Rejection> {
        match self {
            Outcome::Rejected(rejection) => Some(rejection),
            Outcome::Completed(_) | Outcome::Pending(_) => None,
        }
    }

    /// The refusal's code, if the call was refused.
    pub fn code(&self) -> Option<RejectionCode> {
        self.rejection().map(Rejection::code)
    }

    /// The ticket of a call waiting for approval.
    pub fn ticket(&self) -> Option<&Ticket> {
        match self {
            Outcome::Pending(ticket) => Some(ticket),
            Outcome::Completed(_) | Outcome::Rejected(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Risk;
    use crate::gate::approve::store::PendingCall;
    use crate::{
        ApprovalDecision, Arguments, CallContext, DecisionKey, Reviewer, ToolChoice, Violation,
    };
    use serde_json::json;

    fn ticket() -> Ticket {
        Ticket {
            id: "ticket_00".into(),
            tool: "pay".into(),
            call_id: "c1".into(),
            arguments: json!({"pin": "[redacted]"}),
            actor: "alice".into(),
            tenant: Some("acme".into()),
            risk: Risk::Critical,
            irreversible: Some("money moves".into()),
            description: "alice asks to pay".into(),
            created_ms: 1,
            expires_ms: 2,
            approvers: vec!["finance".into()],
            self_approval: false,
            caller_confirms: false,
            contract_hash: "ab".repeat(32),
            call_digest: "cd".repeat(32),
            sources: Vec::new(),
        }
    }

    /// A durable store keeps outcomes and pending calls as JSON, and reads back the same.
    #[test]
    fn outcomes_and_pending_calls_survive_a_store() {
        let violation = Violation {
            path: "/amount".into(),
            rule: "range".into(),
            message: "must be at most 5".into(),
            params: serde_json::Map::from_iter([("max".to_owned(), json!(5))]),
        };
        let outcomes = [
            Outcome::Completed(json!({"paid": 5})),
            Outcome::Rejected(
                Rejection::new(RejectionCode::ConstraintViolation, "out of range")
                    .with_path("/amount")
                    .with_hint("pay less")
                    .with_reason("too_much")
                    .with_retryable(false)
                    .with_violations(vec![violation]),
            ),
            Outcome::Pending(Box::new(ticket())),
        ];
        for outcome in outcomes {
            let text = serde_json::to_string(&outcome).unwrap();
            assert_eq!(
                serde_json::from_str::<Outcome>(&text).unwrap(),
                outcome,
                "{text}"
            );
        }
        let stored = serde_json::to_value(Outcome::Completed(json!(1))).unwrap();
        assert_eq!(stored, json!({"completed": 1}));

        struct Session;
        let ctx = CallContext::new("alice")
            .with_roles(["clerk"])
            .with_tenant("acme")
            .with_environment("production")
            .with_task_id("t1")
            .with_request("pay the invoice")
            .with_tool_choice(ToolChoice::Tool("pay".into()))
            .with_extension(Session);
        let pending = PendingCall {
            decision: Some(DecisionKey::generate().sign(
                &ticket(),
                ApprovalDecision::Edit {
                    reviewer: Reviewer::new("rita").with_roles(["finance"]),
                    arguments: json!({"pin": "0000"}),
                },
            )),
            ticket: ticket(),
            ctx,
            arguments: Arguments::Text(r#"{"pin":"1234"}"#.into()),
            canonical: json!({"pin": "1234"}),
            reserved_cost: Some(3),
        };
        let text = serde_json::to_string(&pending).unwrap();
        let read: PendingCall = serde_json::from_str(&text).unwrap();
        assert_eq!(read.ticket, pending.ticket);
        assert_eq!(read.arguments, pending.arguments);
        assert_eq!(read.decision, pending.decision);
        assert_eq!(
            (read.canonical, read.reserved_cost),
            (pending.canonical, Some(3))
        );
        let (was, is) = (&pending.ctx, &read.ctx);
        assert_eq!(
            (is.actor(), is.roles(), is.tenant(), is.environment()),
            (was.actor(), was.roles(), was.tenant(), was.environment())
        );
        assert_eq!(
            (is.task_id(), is.trace_id()),
            (was.task_id(), was.trace_id())
        );
        assert_eq!(
            (is.request(), is.tool_choice()),
            (was.request(), was.tool_choice())
        );
        assert!(
            is.extension::<Session>().is_none(),
            "extensions are not stored"
        );
    }
}

/// A call waiting for a human: what it is, who asked, and until when it may be decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Ticket {
    /// The ticket's id, for [`Registry::resume`](crate::Registry::resume).
    pub id: String,
    /// The tool.
    pub tool: String,
    /// The provider's call id.
    pub call_id: String,
    /// The canonical arguments (what the tool would receive), sensitive values redacted: the
    /// model and the audit see these. A reviewer allowed to decide sees the real ones through
    /// [`Registry::review`](crate::Registry::review).
    pub arguments: Value,
    /// Who asked.
    pub actor: String,
    /// The caller's tenant.
    pub tenant: Option<String>,
    /// The tool's risk.
    pub risk: Risk,
    /// Why the tool cannot be undone, if it cannot.
    pub irreversible: Option<String>,
    /// A sentence for the reviewer: who wants to run what, with which arguments.
    pub description: String,
    /// When the ticket was opened, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// After this time (milliseconds since the Unix epoch) the call can no longer be approved.
    pub expires_ms: u64,
    /// The roles of which a reviewer must hold one to decide; empty: any reviewer.
    pub approvers: Vec<String>,
    /// Whether the actor who asked may decide its own call.
    pub self_approval: bool,
    /// Whether the actor who asked may confirm its own call, whatever the approver roles
    /// ([`ToolContract::caller_confirms`](crate::ToolContract::caller_confirms)).
    #[serde(default)]
    pub caller_confirms: bool,
    /// The SHA-256 of the tool's contract when the ticket was opened: a call is not run under
    /// a contract that changed since.
    pub contract_hash: String,
    /// The digest of the whole call as it waits ([`PendingCall::digest`](crate::PendingCall::digest)), which a reviewer's
    /// signature covers ([`DecisionKey::sign`](crate::DecisionKey::sign)).
    #[serde(default)]
    pub call_digest: String,
    /// Where each value the contract declares `#[from(...)]` was found (see
    /// [`ValueSource`](crate::ValueSource)): a call waiting because a value came from an
    /// untrusted source shows which, and from where.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<crate::contract::ValueSource>,
}

impl Ticket {
    pub(crate) fn is_expired(&self, now_ms: u64) -> bool {
        now_ms >= self.expires_ms
    }
}
