//! What a user reads: the password from standard input never printed, and the messages that
//! name the store and say what to do.

use super::*;

/// `--password-stdin` reaches the store, and the password is never printed: the test Redis
/// has no password, so it refuses the one the command sends.
#[test]
fn a_password_from_stdin_reaches_the_store_and_is_never_printed() {
    use std::io::Write as _;
    let url = format!(
        "redis://{}/{}",
        env_or("SENTINEL_REDIS_ADDR", "127.0.0.1:16379"),
        unique_key("rules:", "cli-password").replace('/', ":")
    );
    let out = run(&["get", "--from", &url]);
    assert!(
        out.status.success(),
        "get {url} failed ({}); is the server up? start it with \
         `scripts/services.sh start redis-main`",
        String::from_utf8_lossy(&out.stderr)
    );
    let secret = "pw-from-stdin-7f3a";
    let mut child = Command::new(BIN)
        .args(["--password-stdin", "get", "--from", &url])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {BIN}: {e}"));
    if let Some(mut stdin) = child.stdin.take() {
        // A command that failed before reading its input says why below.
        let _ = writeln!(stdin, "{secret}");
    }
    let out = child.wait_with_output().expect("the command ends");
    let text = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    // A store error: exit 4, naming the server.
    assert_eq!(out.status.code(), Some(4), "{text}");
    assert!(text.to_lowercase().contains("auth"), "{text}");
    assert!(
        text.contains(&env_or("SENTINEL_REDIS_ADDR", "127.0.0.1:16379")),
        "{text}"
    );
    assert!(!text.contains(secret), "the password was printed: {text}");
}

/// What a user reads: a refused connection names the server and says each cause once; a
/// password in a URL is refused pointing at the variables; a bare path is a file; a missing
/// NATS bucket is named plainly; `--help` has examples and the environment; a mistyped
/// command gets a suggestion; completions print; `--timeout` bounds a silent server.
#[test]
fn messages_name_the_store_and_say_what_to_do() {
    for url in [
        "etcd://127.0.0.1:1/rules",
        "redis://127.0.0.1:1/rules",
        "nats://127.0.0.1:1/bucket/rules",
        "nacos://127.0.0.1:1/rules",
    ] {
        let out = run(&["get", "--from", url]);
        assert_eq!(out.status.code(), Some(4), "{url}: {out:?}");
        let text = stderr(&out);
        assert!(text.contains("127.0.0.1:1"), "{url}: {text}");
        assert_eq!(
            text.matches("Connection refused").count(),
            1,
            "{url}: {text}"
        );
        assert_eq!(text.lines().count(), 1, "{url}: {text}");
    }

    // A TLS store without its CA says which option gives it.
    let tls = format!(
        "rediss://{}/rules",
        env_or("SENTINEL_REDIS_TLS_ADDR", "127.0.0.1:16383")
    );
    let out = run(&["get", "--from", &tls]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(stderr(&out).contains("--ca-file"), "{out:?}");

    let out = run(&["get", "--from", "redis://ops:hunter2@127.0.0.1:6379/rules"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let text = stderr(&out);
    assert!(
        text.contains("SENTINEL_RULES_USER") && text.contains("SENTINEL_RULES_PASSWORD"),
        "{text}"
    );
    assert!(
        !text.contains("hunter2"),
        "the password was printed: {text}"
    );

    let dir = tempfile::tempdir().expect("a temporary directory");
    let rules = write(dir.path(), "rules.json", RULES);
    let bare = dir.path().join("bare.json").display().to_string();
    let out = run(&["push", &rules, "--to", &bare]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        run(&["diff", &rules, "--from", &bare]).status.code(),
        Some(0)
    );

    let nats = env_or("SENTINEL_NATS_ADDR", "127.0.0.1:14222");
    let bucket = format!("cli-missing-{}", std::process::id());
    let out = run(&["get", "--from", &format!("nats://{nats}/{bucket}/rules")]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{out:?}; start NATS with `scripts/services.sh start nats-main`"
    );
    let text = stderr(&out);
    assert!(
        text.contains(&format!("bucket {bucket} does not exist")),
        "{text}"
    );
    assert!(!text.contains("::"), "names a Rust item: {text}");

    let help = stdout(&run(&["--help"]));
    for needle in [
        "Examples:",
        "SENTINEL_RULES_USER",
        "SENTINEL_RULES_PASSWORD",
        "Exit codes:",
        "3 diff",
    ] {
        assert!(help.contains(needle), "--help lacks {needle}: {help}");
    }
    let out = run(&["gett", "--from", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("similar subcommand exists: 'get'"),
        "{out:?}"
    );
    let out = run(&["completions", "bash"]);
    let script = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        script.contains("complete -F"),
        "not a bash completion script"
    );
    // Bash completes a subcommand's options with it.
    let completed = Command::new("bash")
        .arg("-c")
        .arg(
            "source /dev/stdin; COMP_WORDS=(sentinel-rules push --if); COMP_CWORD=2; \
             _sentinel__rules sentinel-rules --if push; echo \"${COMPREPLY[@]}\"",
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            if let Some(mut stdin) = child.stdin.take() {
                stdin.write_all(script.as_bytes())?;
            }
            child.wait_with_output()
        })
        .expect("bash runs the completion script");
    assert_eq!(stdout(&completed).trim(), "--if-revision");

    // A server that accepts the connection and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("a local port");
    let port = silent.local_addr().expect("its address").port();
    let out = run(&[
        "--timeout",
        "300ms",
        "get",
        "--from",
        &format!("redis://127.0.0.1:{port}/rules"),
    ]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let text = stderr(&out).to_lowercase();
    assert!(
        text.contains("timed out") || text.contains("no answer within"),
        "{text}"
    );
    drop(silent);
}

/// A URL of the wrong scheme for the port (plain against TLS, TLS against plain) says which
/// scheme the server speaks, for etcd, Redis and NATS, instead of only "broken pipe", "tls
/// handshake eof" or a time-out.
#[test]
fn a_scheme_mismatch_says_which_scheme_the_server_speaks() {
    let host = |var: &str, default: &str| {
        let address = env_or(var, default);
        address.split("://").last().unwrap_or(&address).to_owned()
    };
    let etcd = host("SENTINEL_ETCD_ENDPOINTS", "http://127.0.0.1:23790");
    let etcd_tls = host("SENTINEL_ETCD_TLS_ENDPOINTS", "https://127.0.0.1:23793");
    let redis = env_or("SENTINEL_REDIS_ADDR", "127.0.0.1:16379");
    let redis_tls = env_or("SENTINEL_REDIS_TLS_ADDR", "127.0.0.1:16383");
    let nats = env_or("SENTINEL_NATS_ADDR", "127.0.0.1:14222");
    let nats_tls = env_or("SENTINEL_NATS_TLS_ADDR", "127.0.0.1:14225");
    for (url, needle, service) in [
        (
            format!("etcd://{etcd_tls}/k"),
            "speaks TLS: use etcds://",
            "etcd-tls",
        ),
        (
            format!("etcds://{etcd}/k"),
            "speaks plain etcd, not TLS: use etcd://",
            "etcd-main",
        ),
        (
            format!("redis://{redis_tls}/k"),
            "speaks TLS: use rediss://",
            "redis-tls",
        ),
        (
            format!("rediss://{redis}/k"),
            "speaks plain redis, not TLS: use redis://",
            "redis-main",
        ),
        (
            format!("nats://{nats_tls}/b/k"),
            "speaks TLS: use natss://",
            "nats-tls",
        ),
        (
            format!("natss://{nats}/b/k"),
            "speaks plain nats, not TLS: use nats://",
            "nats-main",
        ),
    ] {
        let out = run(&["--timeout", "3s", "get", "--from", &url]);
        assert_eq!(out.status.code(), Some(4), "{url}: {out:?}");
        let text = stderr(&out);
        assert!(
            text.contains(needle),
            "{url}: {text}; is the server up? start it with `scripts/services.sh start {service}`"
        );
        assert_eq!(text.lines().count(), 1, "{url}: {text}");
    }
}

/// `delete --help` says what services reading the key do: drop every rule (the default
/// delete policy); `get` takes `--family`.
#[test]
fn delete_help_says_services_drop_every_rule() {
    let out = run(&["delete", "--help"]);
    let help = stdout(&out);
    assert!(help.contains("drop every rule"), "{help}");
    assert!(help.contains("delete policy"), "{help}");
    let out = run(&["get", "--help"]);
    assert!(stdout(&out).contains("--family"), "{out:?}");
}
