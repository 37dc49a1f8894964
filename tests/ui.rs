//! Compile-time checks of `#[tool]`: every supported form compiles (and its contract is what
//! it says), and every mistake is refused with a message that points at the offending token.
//!
//! Regenerate the expected messages with `TRYBUILD=overwrite cargo test --test ui`, then read
//! every changed `.stderr`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
