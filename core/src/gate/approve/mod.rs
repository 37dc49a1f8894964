//! The approve gate: whether a call needs a human, the ticket that asks one, and who may
//! decide it.

pub(crate) mod decision;
pub(crate) mod reviewer;
pub(crate) mod store;

use std::time::Duration;

use serde_json::Value;

use crate::audit::recorded_canonical;
use crate::manifest::contract_hash;
use crate::{Approval, CallContext, Risk, ToolCall, ToolContract};
pub(crate) use store::now_ms;
use store::{ApprovalStore, Approver, PendingLimits, Ticket, expiry_ms, random_id};

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
        let approvers = match contract.approvers() {
            [] => self.approvers.clone(),
            named => named.to_vec(),
        };
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
            approvers,
            self_approval: self.self_approval,
            caller_confirms: contract.caller_confirms(),
            contract_hash: contract_hash(contract),
        }
    }
}
