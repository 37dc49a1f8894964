//! Compile-time checks of `#[tool]`: every supported form compiles (and its contract is what
//! it says), and every mistake is refused with a message that points at the offending token.
//!
//! Regenerate the expected messages with `TRYBUILD=overwrite cargo test -p portcullis-ui`,
//! then read every changed `.stderr`.

#[test]
fn ui() {
    // Two runs, not one: trybuild builds and runs the cases of a run one at a time, each in a
    // cargo invocation of its own, as soon as one case must run; a run of compile-fail cases
    // alone is one `cargo check` of them all. A refusal of `#[tool]` is a type or macro error,
    // which `check` reports as `build` does. Each run panics on its failures when it ends.
    let pass = trybuild::TestCases::new();
    pass.pass("tests/ui/pass/*.rs");
    drop(pass);
    let fail = trybuild::TestCases::new();
    fail.compile_fail("tests/ui/fail/*.rs");
}
