//! The README's main command works: the quickstart writes its default rules, applies them,
//! follows an edit, and rejects a broken edit while keeping the previous rules.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn wait_for(path: &std::path::Path, what: &str, deadline: Instant) {
    while !path.exists() {
        assert!(Instant::now() < deadline, "{what} never appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
}

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
    let rules = dir.path().join("sentinel-quickstart/rules.json");
    let deadline = Instant::now() + Duration::from_secs(30);
    wait_for(&rules, "the default rules file", deadline);
    std::thread::sleep(Duration::from_millis(1500));
    std::fs::write(
        &rules,
        r#"{"flow": [{"resource": "GET:/order", "count": 7}]}"#,
    )
    .expect("edit");
    std::thread::sleep(Duration::from_millis(1500));
    std::fs::write(&rules, r#"{"flow": [{"resource": "GET:/order", "count": "#).expect("bad edit");

    loop {
        if child.try_wait().expect("poll").is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("quickstart did not stop after --seconds 5");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read output");
    assert!(out.contains("wrote the default rules"), "{out}");
    assert!(out.contains("flow GET:/order <= 20 qps"), "{out}");
    assert!(
        out.contains("flow GET:/order <= 7 qps"),
        "edit not applied:\n{out}"
    );
    assert!(out.contains("rules REJECTED, previous rules kept"), "{out}");
    let last = out
        .lines()
        .rev()
        .find(|l| l.contains("rules:"))
        .unwrap_or_default();
    assert!(
        last.contains("<= 7 qps"),
        "the good rules stay after the bad edit: {last}"
    );
}
