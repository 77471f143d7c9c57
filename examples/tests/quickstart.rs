//! The README's main command works: the quickstart writes its default rules, applies them,
//! follows an edit, and rejects a broken edit while keeping the previous rules.

use std::process::{Command, Stdio};
use std::time::Duration;

use sentinel_test_support::OutputLines;

/// How long the quickstart may take to print each awaited line.
const WAIT: Duration = Duration::from_secs(30);

#[test]
fn quickstart_follows_edits_and_rejects_bad_ones() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_quickstart"))
        .args(["--seconds", "5"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("quickstart starts");
    let mut output = OutputLines::read(child.stdout.take().expect("stdout"));
    let rules = dir.path().join("sentinel-quickstart/rules.json");

    output.wait_for("wrote the default rules", WAIT);
    output.wait_for("flow GET:/order <= 20 qps", WAIT);
    std::fs::write(
        &rules,
        r#"{"flow": [{"resource": "GET:/order", "count": 7}]}"#,
    )
    .expect("edit");
    output.wait_for("flow GET:/order <= 7 qps", WAIT);
    std::fs::write(&rules, r#"{"flow": [{"resource": "GET:/order", "count": "#).expect("bad edit");
    output.wait_for("rules REJECTED, previous rules kept", WAIT);

    // The rest of the output, until the quickstart stops by itself after --seconds 5.
    let seen = output.rest(WAIT).to_vec();
    let status = child.wait().expect("quickstart exits");
    assert!(status.success(), "{status:?}");
    let last = seen
        .iter()
        .rev()
        .find(|l| l.contains("rules:"))
        .cloned()
        .unwrap_or_default();
    assert!(
        last.contains("<= 7 qps"),
        "the good rules stay after the bad edit: {last}"
    );
}
