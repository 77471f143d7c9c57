//! The README's main command works: the quickstart writes its default rules, applies them,
//! follows an edit, and rejects a broken edit while keeping the previous rules.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Waits for an output line containing `needle`, keeping every line read in `seen`.
fn wait_for_line(
    lines: &mpsc::Receiver<String>,
    seen: &mut Vec<String>,
    needle: &str,
    deadline: Instant,
) {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                let found = line.contains(needle);
                seen.push(line);
                if found {
                    return;
                }
            }
            Err(_) => panic!(
                "no line with {needle:?}; output so far:\n{}",
                seen.join("\n")
            ),
        }
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
    let stdout = child.stdout.take().expect("stdout");
    let (send, lines) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    let rules = dir.path().join("sentinel-quickstart/rules.json");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();

    wait_for_line(&lines, &mut seen, "wrote the default rules", deadline);
    wait_for_line(&lines, &mut seen, "flow GET:/order <= 20 qps", deadline);
    std::fs::write(
        &rules,
        r#"{"flow": [{"resource": "GET:/order", "count": 7}]}"#,
    )
    .expect("edit");
    wait_for_line(&lines, &mut seen, "flow GET:/order <= 7 qps", deadline);
    std::fs::write(&rules, r#"{"flow": [{"resource": "GET:/order", "count": "#).expect("bad edit");
    wait_for_line(
        &lines,
        &mut seen,
        "rules REJECTED, previous rules kept",
        deadline,
    );

    // The rest of the output, until the quickstart stops by itself after --seconds 5.
    while let Ok(line) = lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        seen.push(line);
    }
    let status = child.wait().expect("quickstart exits");
    assert!(status.success(), "{status:?}");
    reader.join().expect("the reader thread");
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
