//! Compile tests of `#[torch_function]` and `#[dispatcher]`: the passing cases compile and
//! run; each failing case's errors must match its `.stderr` snapshot (taken with rustc 1.95;
//! refresh with `TRYBUILD=overwrite cargo test -p torchfn-macro-tests`).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("ui/pass_*.rs");
    t.compile_fail("ui/fail_*.rs");
}
