//! `portcullis check` as a binary, against the shop's red-team entry point (the example
//! `red_team_shop`, which `cargo test` builds with the crate's tests).

use std::path::PathBuf;
use std::process::{Command, Output};

/// The entry point the example builds, beside this test's own binary.
fn entry() -> PathBuf {
    let deps = std::env::current_exe().unwrap();
    let profile = deps.parent().and_then(|deps| deps.parent()).unwrap();
    let entry = profile
        .join("examples")
        .join(format!("red_team_shop{}", std::env::consts::EXE_SUFFIX));
    assert!(
        entry.exists(),
        "{} is missing: `cargo test -p portcullis-cli` builds it, or `cargo build -p \
         portcullis-cli --example red_team_shop`",
        entry.display()
    );
    entry
}

fn check(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .arg("check")
        .args(args)
        .output()
        .unwrap()
}

/// `portcullis check` over the shop's entry point, `args` appended, with the JUnit XML it
/// wrote.
fn check_shop(args: &[&str]) -> (Output, String) {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("red-team.xml");
    let entry = entry();
    let mut all = vec![
        "--entry",
        entry.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ];
    all.extend(args);
    let output = check(&all);
    let xml = std::fs::read_to_string(&junit).unwrap_or_default();
    (output, xml)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_shop_whose_every_case_is_refused_passes() {
    let (output, xml) = check_shop(&[]);
    let stdout = text(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        text(&output.stderr)
    );
    assert!(!stdout.contains("Cases that got through"), "{stdout}");
    let last = stdout.lines().last().unwrap();
    let (held, rest) = last.split_once(" of ").unwrap();
    let cases = rest.split(' ').next().unwrap();
    assert_eq!(held, cases, "{stdout}");
    assert!(cases.parse::<usize>().unwrap() >= 800, "{stdout}");
    assert!(
        last.ends_with("cases against 4 tools got their refusal"),
        "{stdout}"
    );
    let document = roxmltree::Document::parse(&xml).unwrap();
    let root = document.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    assert_eq!(root.attribute("failures"), Some("0"));
    assert_eq!(root.attribute("tests"), Some(cases));
}

#[test]
fn a_weakened_shop_fails_with_a_table_and_junit_naming_the_cases_that_got_through() {
    let (output, xml) = check_shop(&["--", "--weakened"]);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("portcullis: 2 of ") && stderr.contains(" red-team cases got through"),
        "{stderr}"
    );
    let table: Vec<&str> = stdout.lines().collect();
    assert_eq!(table[0], "Cases that got through:");
    let columns: Vec<&str> = table[1].split_whitespace().collect();
    assert_eq!(
        columns,
        ["TOOL", "CALLER", "CASE", "EXPECTED", "GOT", "GATE"]
    );
    for (row, case) in table[2..4].iter().zip([
        "a delivery to an embargoed country",
        "an embargoed country in lower case",
    ]) {
        assert!(
            row.starts_with("update_shipping_address  admin   "),
            "{stdout}"
        );
        assert!(row.contains(case), "{stdout}");
        assert!(
            row.ends_with("policy_denied  passed every gate  authorize"),
            "{stdout}"
        );
    }
    assert_eq!(table[4], "");

    let document = roxmltree::Document::parse(&xml).unwrap();
    assert_eq!(document.root_element().attribute("failures"), Some("2"));
    let failed: Vec<(&str, &str, &str)> = document
        .descendants()
        .filter(|node| node.has_tag_name("failure"))
        .map(|failure| {
            let case = failure.parent_element().unwrap();
            (
                case.attribute("classname").unwrap(),
                case.attribute("name").unwrap(),
                failure.attribute("message").unwrap(),
            )
        })
        .collect();
    assert_eq!(
        failed,
        [
            (
                "update_shipping_address.admin",
                "a delivery to an embargoed country",
                "expected policy_denied, got passed every gate"
            ),
            (
                "update_shipping_address.admin",
                "an embargoed country in lower case",
                "expected policy_denied, got passed every gate"
            ),
        ]
    );
    let suite = document
        .descendants()
        .find(|node| node.attribute("name") == Some("update_shipping_address"))
        .unwrap();
    assert_eq!(suite.attribute("failures"), Some("2"));
}

#[test]
fn an_entry_point_that_cannot_run_or_writes_no_report_is_exit_5() {
    let missing = check(&["--entry", "/nonexistent/red_team"]);
    assert_eq!(missing.status.code(), Some(5));
    assert!(
        text(&missing.stderr)
            .contains("the red-team entry point /nonexistent/red_team could not be started"),
        "{}",
        text(&missing.stderr)
    );
    let chatty = check(&["--entry", "/bin/echo", "--", "hello"]);
    assert_eq!(chatty.status.code(), Some(5));
    assert!(
        text(&chatty.stderr).contains("wrote something other than a red-team report (line 1: "),
        "{}",
        text(&chatty.stderr)
    );
    let failing = check(&["--entry", "/bin/false"]);
    assert_eq!(failing.status.code(), Some(5));
    assert!(text(&failing.stderr).contains("exited with exit status: 1"));
    let silent = check(&["--entry", "/bin/true"]);
    assert_eq!(silent.status.code(), Some(5), "an empty report is no pass");
    assert!(text(&silent.stderr).contains("/bin/true wrote no case"));
}
