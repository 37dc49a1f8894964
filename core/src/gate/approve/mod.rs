//! The approve gate: whether a call needs a human, the ticket that asks one, and who may
//! decide it.

pub(crate) mod decision;
pub(crate) mod key_error;
pub(crate) mod passkey;
pub(crate) mod reviewer;
pub(crate) mod signature;
pub(crate) mod signed;
pub(crate) mod store;

use std::time::Duration;

use serde_json::Value;

use crate::call::ToolCall;
use crate::context::CallContext;
use crate::contract::contract_hash;
use crate::contract::recorded_canonical;
use crate::contract::{Approval, Risk, ToolContract};
use crate::encoding::random_id;
use crate::gate::approve::reviewer::Reviewer;
use crate::outcome::Ticket;
use crate::rejection::Rejection;
use crate::time::{expiry_ms, now_ms};
use signature::Keyring;
use signed::SignedDecision;
use store::{ApprovalStore, Approver, PendingCall, PendingLimits};

/// The registry's approval settings.
pub(crate) struct Approvals {
    pub(crate) store: Box<dyn ApprovalStore>,
    pub(crate) approver: Option<Box<dyn Approver>>,
    pub(crate) lifetime: Duration,
    pub(crate) high_risk_by_default: bool,
    /// The approver roles of tools whose contract names none.
    pub(crate) approvers: Vec<String>,
    /// Whether an actor may decide its own calls.
    pub(crate) self_approval: bool,
    pub(crate) limits: PendingLimits,
    /// Which decisions count.
    pub(crate) trust: Trust,
    /// How long a worker holds a decided call it is about to run before another may take it.
    pub(crate) lease: Duration,
}

/// Which decisions a registry counts.
pub(crate) enum Trust {
    /// Those signed by a key the keyring allows for the reviewer they name.
    Keyring(Keyring),
    /// Any, signed or not: the store is trusted (tests, local use).
    Unsigned,
}

impl Approvals {
    /// Whether a call of a tool with `contract` needs approval, `predicate` being the tool's
    /// own answer for this call (its `approval = path`, or the contract's `required`).
    /// Critical tools always do; the contract decides for the others, and where it says
    /// nothing, a tool the caller confirms does, and otherwise the registry's default for
    /// high risk.
    pub(crate) fn required(&self, contract: &ToolContract, predicate: bool) -> bool {
        contract.risk() == Risk::Critical
            || match contract.approval() {
                Approval::Never => false,
                Approval::Required | Approval::Conditional(_) => predicate,
                Approval::Default => {
                    contract.caller_confirms()
                        || (contract.risk() == Risk::High && self.high_risk_by_default)
                }
            }
    }

    /// Whether `decision` on `pending` counts, `contract` being the tool's contract as the
    /// registry holds it now (if it still has the tool): the reviewer it counts as (with the
    /// roles and tenant of the keyring, not of the store's row), and how it was signed, for
    /// the audit. Who may decide is read from the contract and the registry's settings, not
    /// from the stored ticket.
    pub(crate) fn check(
        &self,
        contract: Option<&ToolContract>,
        pending: &PendingCall,
        decision: &SignedDecision,
    ) -> Result<(Reviewer, String), Rejection> {
        let mut ticket = pending.ticket.clone();
        if let Some(contract) = contract {
            ticket.approvers = self.approvers_of(contract);
            ticket.self_approval = self.self_approval;
            ticket.caller_confirms = contract.caller_confirms();
        }
        ticket.actor = pending.ctx.actor().to_owned();
        ticket.tenant = pending.ctx.tenant().map(str::to_owned);
        let (reviewer, signed) = match &self.trust {
            Trust::Keyring(keyring) => keyring.verify(pending, &ticket, decision)?,
            Trust::Unsigned => (decision.reviewer().clone(), "unsigned".to_owned()),
        };
        reviewer.may_decide(&ticket)?;
        Ok((reviewer, signed))
    }

    fn approvers_of(&self, contract: &ToolContract) -> Vec<String> {
        match contract.approvers() {
            [] => self.approvers.clone(),
            named => named.to_vec(),
        }
    }

    /// The ticket for `call`, for the reviewer: its canonical arguments, the sensitive ones
    /// redacted.
    pub(crate) fn ticket(
        &self,
        ctx: &CallContext,
        contract: &ToolContract,
        call: &ToolCall,
        canonical: &Value,
    ) -> Ticket {
        let arguments = recorded_canonical(canonical, Some(contract));
        let irreversible = contract
            .irreversible()
            .map(|reason| format!(", cannot be undone: {reason}"))
            .unwrap_or_default();
        let created_ms = now_ms();
        Ticket {
            id: random_id("ticket"),
            tool: contract.name().to_owned(),
            call_id: call.id.clone(),
            description: format!(
                "{} asks to run `{}` ({} risk{irreversible}) with {arguments}",
                ctx.actor(),
                contract.name(),
                contract.risk()
            ),
            arguments,
            actor: ctx.actor().to_owned(),
            tenant: ctx.tenant().map(str::to_owned),
            risk: contract.risk(),
            irreversible: contract.irreversible().map(str::to_owned),
            created_ms,
            expires_ms: expiry_ms(created_ms, self.lifetime),
            approvers: self.approvers_of(contract),
            self_approval: self.self_approval,
            caller_confirms: contract.caller_confirms(),
            contract_hash: contract_hash(contract),
            call_digest: String::new(),
            sources: Vec::new(),
        }
    }
}
