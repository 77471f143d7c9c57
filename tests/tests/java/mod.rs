//! Launching the Java side of the interop tests (`interop/`, built by `scripts/interop.sh
//! build`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

/// The repository's root.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// `java` with the harness's classpath and Sentinel's settings for tests (logs under
/// `interop/target`, no metric-log timer), ready for a main class and its arguments.
#[allow(dead_code)] // the transport golden test launches its harness with `java_with`
pub(crate) fn java(main_class: &str) -> Result<Command, String> {
    java_with(
        main_class,
        "classpath.txt",
        &[("csp.sentinel.metric.flush.interval", "0".to_owned())],
    )
}

/// `java` with the classpath `scripts/interop.sh build` wrote to `interop/target/{classpath}`
/// (`classpath.txt`, or `classpath-transport.txt` with Sentinel's HTTP command center) and
/// these `-D` settings; logs go under `interop/target` unless `csp.sentinel.log.dir` is
/// among them.
pub(crate) fn java_with(
    main_class: &str,
    classpath: &str,
    properties: &[(&str, String)],
) -> Result<Command, String> {
    let interop = root().join("interop");
    let classpath = interop.join("target").join(classpath);
    let deps = std::fs::read_to_string(&classpath).map_err(|e| {
        format!(
            "the Java harness is not built ({}: {e}): run scripts/interop.sh build \
             (it needs Java 17 and Maven: apt-get install openjdk-17-jdk-headless maven)",
            classpath.display()
        )
    })?;
    let mut command = Command::new("java");
    if !properties
        .iter()
        .any(|(name, _)| *name == "csp.sentinel.log.dir")
    {
        command.arg(format!(
            "-Dcsp.sentinel.log.dir={}",
            interop.join("target/sentinel-logs").display()
        ));
    }
    for (name, value) in properties {
        command.arg(format!("-D{name}={value}"));
    }
    command
        .arg("-cp")
        .arg(format!(
            "{}:{}",
            interop.join("target/classes").display(),
            deps.trim()
        ))
        .arg(main_class);
    Ok(command)
}

/// Starts `command` with its standard input and output piped (its errors dropped), and a
/// thread that sends each line it prints; `packages` are what `apt-get install` needs when
/// `java` cannot start.
#[allow(dead_code)] // the differential test runs no service
pub(crate) fn spawn_with_lines(
    command: &mut Command,
    packages: &str,
) -> (Child, mpsc::Receiver<String>) {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start java ({e}): apt-get install {packages}"));
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, lines)
}
