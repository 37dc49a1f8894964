//! What each hostile case got, and the table of those that got through.

use std::fmt;

use portcullis_core::{Gate, RejectionCode};
use serde::{Deserialize, Serialize};

/// What a case got from the gates, or must get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Got {
    /// Refused with this code (`dry_run`: every gate passed, and only the dry run kept the tool
    /// from running).
    Refused(RejectionCode),
    /// It waits for a human's decision.
    Waits,
    /// The tool ran (a registry that does not run dry).
    Ran,
}

impl Got {
    /// The gate that gives this answer: the refusal's, or approve's for a call that waits.
    pub fn gate(self) -> Gate {
        match self {
            Got::Refused(code) => code.gate(),
            Got::Waits => Gate::Approve,
            Got::Ran => Gate::Execute,
        }
    }
}

impl fmt::Display for Got {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Got::Refused(RejectionCode::DryRun) => f.write_str("passed every gate"),
            Got::Refused(code) => write!(f, "{code}"),
            Got::Waits => f.write_str("waits for approval"),
            Got::Ran => f.write_str("ran"),
        }
    }
}

/// One case and what it got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The tool called.
    pub tool: String,
    /// The caller's name, as given to the kit.
    pub caller: String,
    /// What the case breaks.
    pub case: String,
    /// The arguments sent, as JSON text.
    pub arguments: String,
    /// What the case must get: a refusal with its code, or, for a call a human must decide, to
    /// wait.
    pub expected: Got,
    /// What it got.
    pub got: Got,
    /// The gate whose check the case tests.
    pub gate: Gate,
}

impl Finding {
    /// Whether the case got the refusal it must get.
    pub fn held(&self) -> bool {
        self.got == self.expected
    }
}

/// Every case of a run, and what kept the kit from writing others.
#[derive(Debug, Default)]
pub struct Report {
    findings: Vec<Finding>,
    unusable: Vec<String>,
}

impl Report {
    pub(crate) fn push(&mut self, finding: Finding) {
        self.findings.push(finding);
    }

    pub(crate) fn unusable(&mut self, why: String) {
        self.unusable.push(why);
    }

    /// How many cases ran.
    pub fn cases(&self) -> usize {
        self.findings.len()
    }

    /// Every case and what it got.
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// The cases that did not get the refusal they must get.
    pub fn failures(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|finding| !finding.held())
    }

    /// Panics with a table of every case that did not get its refusal, and of every tool the
    /// kit could not attack, if there is any.
    pub fn assert_all_refused(&self) {
        if self.failures().next().is_some() || !self.unusable.is_empty() {
            panic!("{self}");
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let failures: Vec<_> = self.failures().collect();
        writeln!(
            f,
            "{} of {} hostile cases did not get their refusal",
            failures.len(),
            self.findings.len()
        )?;
        if !failures.is_empty() {
            writeln!(f, "| tool | caller | case | expected | got |")?;
            writeln!(f, "|---|---|---|---|---|")?;
            for finding in failures {
                writeln!(
                    f,
                    "| {} | {} | {} | {} | {} |",
                    finding.tool, finding.caller, finding.case, finding.expected, finding.got
                )?;
            }
        }
        for why in &self.unusable {
            writeln!(f, "not attacked: {why}")?;
        }
        Ok(())
    }
}
