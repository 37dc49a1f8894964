//! What the command line's tests share: the binary run as an operator runs it, and a
//! directory of its own for each test. Each test file uses some of them.

#![allow(dead_code)]

use std::process::{Command, Output};

use tempfile::TempDir;

/// A directory of the test `name`'s own, removed with it.
pub fn directory(name: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(&format!("portcullis-cli-{name}-"))
        .tempdir()
        .unwrap()
}

/// Runs the binary with `args`, the environment's portcullis settings left out.
pub fn portcullis(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_portcullis"));
    for variable in [
        "PORTCULLIS_STORE",
        "PORTCULLIS_REVIEWER",
        "PORTCULLIS_REVIEWER_ROLES",
        "PORTCULLIS_REVIEWER_TENANT",
        "PORTCULLIS_REVIEWER_KEY_FILE",
        "PORTCULLIS_SEAL_KEY_FILE",
        "PORTCULLIS_AUDIT_KEY_FILE",
        "PORTCULLIS_POSTGRES_CA",
        "PORTCULLIS_OPERATOR",
        "PORTCULLIS_CLAIM_LEASE_SECS",
        "PORTCULLIS_CONSOLE_URL",
    ] {
        command.env_remove(variable);
    }
    command.args(args).output().unwrap()
}

pub fn code(output: &Output) -> i32 {
    output.status.code().unwrap()
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}
