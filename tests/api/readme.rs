//! The README opens with the two commands, and CI runs exactly its test command.

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn ci_runs_the_readme_test_command() {
    let readme = read("README.md");
    let ci = read(".ci/run");
    let commands: Vec<&str> = readme.lines().filter(|l| l.starts_with("cargo ")).take(2).collect();
    assert_eq!(commands.len(), 2, "the README must open with two commands");
    assert!(commands[0].starts_with("cargo run") && commands[0].contains("--example quickstart"), "{}", commands[0]);
    assert!(commands[1].starts_with("cargo test"), "{}", commands[1]);
    assert!(ci.lines().any(|l| l.trim() == commands[1]), ".ci/run does not run `{}`", commands[1]);
}
