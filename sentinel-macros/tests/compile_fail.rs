//! Misuse of `#[sentinel]` is refused at compile time with a message that says what to do
//! (`tests/ui/*.rs`, each with the compiler's expected output beside it; regenerate with
//! `TRYBUILD=overwrite cargo test -p sentinel-macros --test compile_fail` after reading the
//! new messages).

#[test]
fn misuse_is_refused_with_a_clear_message() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
