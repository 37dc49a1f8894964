//! The gates, named: which one refused a call.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One named step of the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Gate {
    /// The tool exists.
    Resolve,
    /// Strict JSON into the typed arguments.
    Decode,
    /// The declared constraints hold.
    Validate,
    /// This caller may make this call: roles, environment, tenant, policies, intent.
    Authorize,
    /// The call is claimed once: a repeat gets the first outcome, not a second run.
    Repeat,
    /// The task, the actor and the tool are within their limits.
    Budget,
    /// A human approved the call, where the contract or the registry asks for it.
    Approve,
    /// A call that changes state is recorded as about to run before it runs.
    Audit,
    /// The tool runs, with its timeout, its panics contained.
    Execute,
}

impl Gate {
    /// Every gate, in the order a call passes them.
    pub const PIPELINE: [Gate; 9] = [
        Gate::Resolve,
        Gate::Decode,
        Gate::Validate,
        Gate::Authorize,
        Gate::Repeat,
        Gate::Budget,
        Gate::Approve,
        Gate::Audit,
        Gate::Execute,
    ];

    /// The gate's name, e.g. `"decode"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Gate::Resolve => "resolve",
            Gate::Decode => "decode",
            Gate::Validate => "validate",
            Gate::Authorize => "authorize",
            Gate::Repeat => "repeat",
            Gate::Budget => "budget",
            Gate::Approve => "approve",
            Gate::Audit => "audit",
            Gate::Execute => "execute",
        }
    }
}

impl fmt::Display for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_listed_by_the_gate_it_names() {
        for gate in Gate::PIPELINE {
            for code in gate.codes() {
                assert_eq!(code.gate(), gate, "{code}");
            }
        }
    }
}
