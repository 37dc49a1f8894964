//! `portcullis check`: runs an application's red-team entry point and judges its report.
//!
//! The command line never links the application's tools: the application builds a small
//! program of its own that runs the red-team kit over its registry builder and writes the
//! report as JSON Lines (`Report::write_json_lines`); this command runs it, prints a table for
//! people, writes JUnit XML for CI, and exits 1 when a case got through.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

use clap::Args;
use portcullis_core::Gate;
use portcullis_testing::Report;

use crate::error::CliError;
use crate::table;

const ENTRY_POINT: &str = "\
The entry point is a program of the application's, for instance `examples/red_team.rs`:

    #[tokio::main(flavor = \"current_thread\")]
    async fn main() {
        let report = portcullis::testing::red_team(my_app::tools())
            .caller(\"support\", CallContext::new(\"s\").with_roles([\"support\"]))
            .corpus(include_str!(\"../red_team.jsonl\"))
            .run()
            .await;
        report.write_json_lines(&mut std::io::stdout()).unwrap();
    }

Then, in CI:

    cargo build --example red_team
    portcullis check --entry target/debug/examples/red_team --junit red-team.xml

The entry point writes nothing else on its standard output (send logs to standard error).
Arguments after `--` are passed to the entry point.";

/// `portcullis check`'s options.
#[derive(Debug, Args)]
#[command(after_long_help = ENTRY_POINT)]
pub struct Check {
    /// The application's red-team entry point: a program that writes the kit's report as
    /// JSON Lines on its standard output.
    #[arg(long, value_name = "PROGRAM")]
    entry: PathBuf,
    /// Also write the report as JUnit XML to this file.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Arguments for the entry point.
    #[arg(last = true, value_name = "ARGS")]
    args: Vec<String>,
}

/// Runs the entry point, prints what got through, writes the JUnit XML.
pub fn run(check: Check, out: &mut dyn Write) -> Result<(), CliError> {
    let failed = |why: String| CliError::EntryFailed(check.entry.clone(), why);
    let output = Command::new(&check.entry)
        .args(&check.args)
        .output()
        .map_err(|error| failed(format!("could not be started: {error}")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        let last = &lines[lines.len().saturating_sub(5)..];
        return Err(failed(format!(
            "exited with {}: {}",
            output.status,
            table::printable(&last.join(" / "))
        )));
    }
    let text = String::from_utf8(output.stdout)
        .map_err(|_| failed("wrote a report that is not UTF-8".to_owned()))?;
    let report = Report::from_json_lines(&text).map_err(|why| {
        failed(format!(
            "wrote something other than a red-team report ({}); it must write nothing else on \
             its standard output",
            table::printable(&why)
        ))
    })?;
    if report.cases() == 0 && report.not_attacked().is_empty() {
        return Err(failed("wrote no case".to_owned()));
    }
    if let Some(path) = &check.junit {
        std::fs::write(path, report.junit())
            .map_err(|error| CliError::WriteFile(path.clone(), error))?;
    }
    print(&report, out)?;
    let through = report.failures().count();
    match report.passed() {
        true => Ok(()),
        false => Err(CliError::CasesGotThrough {
            through,
            cases: report.cases(),
            not_attacked: report.not_attacked().len(),
        }),
    }
}

/// The cases that got through, and for each gate how many cases tested it.
fn print(report: &Report, out: &mut dyn Write) -> Result<(), CliError> {
    let through: Vec<Vec<String>> = report
        .failures()
        .map(|finding| {
            vec![
                finding.tool.clone(),
                finding.caller.clone(),
                finding.case.clone(),
                finding.expected.to_string(),
                finding.got.to_string(),
                finding.gate.to_string(),
            ]
        })
        .collect();
    if !through.is_empty() {
        writeln!(out, "Cases that got through:")?;
        let headers = ["TOOL", "CALLER", "CASE", "EXPECTED", "GOT", "GATE"];
        write!(out, "{}", table::render(&headers, &through))?;
        writeln!(out)?;
    }
    for why in report.not_attacked() {
        writeln!(out, "not attacked: {}", table::printable(why))?;
    }
    // Gates in the order a call passes them.
    let mut gates = BTreeMap::<usize, (Gate, usize, usize)>::new();
    for finding in report.findings() {
        let order = Gate::PIPELINE.iter().position(|gate| *gate == finding.gate);
        let (_, cases, held) =
            gates
                .entry(order.unwrap_or(usize::MAX))
                .or_insert((finding.gate, 0, 0));
        *cases += 1;
        *held += usize::from(finding.held());
    }
    let rows: Vec<Vec<String>> = gates
        .into_values()
        .map(|(gate, cases, held)| vec![gate.to_string(), cases.to_string(), held.to_string()])
        .collect();
    write!(
        out,
        "{}",
        table::render(&["GATE", "CASES", "REFUSED"], &rows)
    )?;
    let tools = report.cases_by_tool();
    writeln!(
        out,
        "{} of {} cases against {} tools got their refusal",
        report.cases() - through.len(),
        report.cases(),
        tools.len()
    )?;
    Ok(())
}
