//! Who may decide a ticket: a reviewer holding the approver role the ticket records, of the
//! caller's tenant, and not the actor who asked, unless the registry allows it.

use serde::{Deserialize, Serialize};

use crate::outcome::Ticket;
use crate::rejection::{Rejection, RejectionCode};

/// The person (or service) deciding a ticket, as the application authenticated it.
///
/// ```
/// use portcullis_core::Reviewer;
///
/// let rita = Reviewer::new("rita").with_roles(["finance"]).with_tenant("acme");
/// assert!(rita.has_role("finance"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reviewer {
    id: String,
    #[serde(default)]
    roles: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tenant: Option<String>,
}

impl Reviewer {
    /// A reviewer with no role and no tenant.
    pub fn new(id: impl Into<String>) -> Self {
        Reviewer {
            id: id.into(),
            roles: Vec::new(),
            tenant: None,
        }
    }

    /// Sets the reviewer's roles.
    pub fn with_roles<I, S>(mut self, roles: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.roles = roles.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the tenant the reviewer belongs to: it then reviews only that tenant's tickets. A
    /// reviewer without one may review every ticket (an operator of the whole service).
    pub fn with_tenant(mut self, tenant: impl Into<String>) -> Self {
        self.tenant = Some(tenant.into());
        self
    }

    /// The reviewer's identity.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The reviewer's roles.
    pub fn roles(&self) -> &[String] {
        &self.roles
    }

    /// The reviewer's tenant.
    pub fn tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    /// Whether the reviewer holds `role`.
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|held| held == role)
    }

    /// Whether the reviewer may decide `ticket`, and see its arguments: it holds one of the
    /// ticket's approver roles (any reviewer, where the ticket names none), belongs to the
    /// ticket's tenant (or to no tenant: an operator), and is not the actor who asked, unless
    /// the ticket allows self-approval.
    /// A ticket of a tool the caller confirms may also be decided by its own actor, in its
    /// own tenant, whatever the approver roles.
    pub fn may_decide(&self, ticket: &Ticket) -> Result<(), Rejection> {
        let refused =
            |code, message: String| Err(Rejection::new(code, message).with_retryable(false));
        if ticket.caller_confirms
            && self.id == ticket.actor
            && self.tenant.as_deref() == ticket.tenant.as_deref()
        {
            return Ok(());
        }
        if !ticket.approvers.is_empty() && !ticket.approvers.iter().any(|role| self.has_role(role))
        {
            return refused(
                RejectionCode::ReviewerNotAllowed,
                format!(
                    "`{}` holds none of the roles that may decide this ticket ({})",
                    self.id,
                    ticket.approvers.join(", ")
                ),
            );
        }
        if let Some(own) = self.tenant()
            && ticket.tenant.as_deref() != Some(own)
        {
            return refused(
                RejectionCode::ReviewerNotAllowed,
                format!("`{}` may review only its own tenant's tickets", self.id),
            );
        }
        if self.id == ticket.actor && !ticket.self_approval {
            return refused(
                RejectionCode::SelfApproval,
                format!("`{}` asked for this call and may not decide it", self.id),
            );
        }
        Ok(())
    }
}

impl From<&str> for Reviewer {
    fn from(id: &str) -> Self {
        Reviewer::new(id)
    }
}

impl From<String> for Reviewer {
    fn from(id: String) -> Self {
        Reviewer::new(id)
    }
}
