//! What each hostile case got, and the table of those that got through.

use std::collections::BTreeMap;
use std::fmt;
use std::io;

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
    /// Refused, but otherwise than a call of a tool that does not exist is: the refusal tells
    /// a caller who may not use the tool that it exists.
    Revealed,
}

impl Got {
    /// The gate that gives this answer: the refusal's, or approve's for a call that waits.
    pub fn gate(self) -> Gate {
        match self {
            Got::Refused(code) => code.gate(),
            Got::Waits => Gate::Approve,
            Got::Ran => Gate::Execute,
            Got::Revealed => Gate::Resolve,
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
            Got::Revealed => f.write_str("refused unlike a tool that does not exist"),
        }
    }
}

/// One case and what it got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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

    /// How many cases each tool got, by name.
    pub fn cases_by_tool(&self) -> BTreeMap<&str, usize> {
        let mut by_tool = BTreeMap::new();
        for finding in &self.findings {
            *by_tool.entry(finding.tool.as_str()).or_default() += 1;
        }
        by_tool
    }

    /// The cases that did not get the refusal they must get.
    pub fn failures(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|finding| !finding.held())
    }

    /// What the kit could not attack, and why: a run with any is no pass.
    pub fn not_attacked(&self) -> &[String] {
        &self.unusable
    }

    /// Whether every case got what it must get, and the kit attacked everything it was
    /// given.
    pub fn passed(&self) -> bool {
        self.failures().next().is_none() && self.unusable.is_empty() && !self.findings.is_empty()
    }

    /// Panics with a table of every case that did not get its refusal, and of every tool the
    /// kit could not attack, if there is any.
    pub fn assert_all_refused(&self) {
        if !self.passed() {
            panic!("{self}");
        }
    }

    /// Writes the report as JSON Lines, one case or one thing not attacked per line: what an
    /// application's red-team entry point prints for `portcullis check`.
    pub fn write_json_lines(&self, out: &mut dyn io::Write) -> io::Result<()> {
        let findings = self.findings.iter().map(Line::Finding);
        let unusable = self.unusable.iter().map(Line::NotAttacked);
        for line in findings.chain(unusable) {
            serde_json::to_writer(&mut *out, &line)?;
            out.write_all(b"\n")?;
        }
        out.flush()
    }

    /// Reads a report [`write_json_lines`](Report::write_json_lines) wrote; the error names
    /// the first line that is not one of a report, and why.
    pub fn from_json_lines(text: &str) -> Result<Report, String> {
        let mut report = Report::default();
        for (index, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let line: OwnedLine = serde_json::from_str(line)
                .map_err(|error| format!("line {}: {error}", index + 1))?;
            match line {
                OwnedLine::Finding(finding) => report.findings.push(finding),
                OwnedLine::NotAttacked(why) => report.unusable.push(why),
            }
        }
        Ok(report)
    }
}

/// One line of a report in JSON Lines.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum Line<'a> {
    Finding(&'a Finding),
    NotAttacked(&'a String),
}

/// A line of a report as read back.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum OwnedLine {
    Finding(Finding),
    NotAttacked(String),
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
            writeln!(f, "| tool | caller | case | expected | got | gate |")?;
            writeln!(f, "|---|---|---|---|---|---|")?;
            for finding in failures {
                writeln!(
                    f,
                    "| {} | {} | {} | {} | {} | {} |",
                    finding.tool,
                    finding.caller,
                    finding.case,
                    finding.expected,
                    finding.got,
                    finding.gate
                )?;
            }
        }
        for why in &self.unusable {
            writeln!(f, "not attacked: {why}")?;
        }
        Ok(())
    }
}
