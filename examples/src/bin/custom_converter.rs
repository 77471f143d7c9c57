//! A custom converter: rules in a `resource = qps` properties file instead of JSON.
//!
//! ```text
//! cargo run -p examples --bin custom_converter -- [--rules PATH] [--seconds N]
//! ```
//!
//! ```text
//! # resource = QPS limit
//! GET:/order = 10
//! GET:/stock = 3
//! ```
//!
//! Any format plugs in the same way: a closure (or a type implementing `Converter`) turns the
//! stored bytes into a `RuleSet`; the data source does the rest (watching, deduplication,
//! rejection of bad payloads, atomic swap).

use std::path::PathBuf;
use std::time::Duration;

use sentinel_core::datasource::{converter_fn, DataSource};
use sentinel_core::flow::FlowRule;
use sentinel_core::{RuleError, RuleFamily, RuleIssue, RuleSet, Sentinel, SentinelEvent};
use sentinel_datasource_file::FileSource;

const DEFAULT_RULES: &str = "# resource = QPS limit\nGET:/order = 10\nGET:/stock = 3\n";

/// Parses `resource = qps` lines. Blank lines and `#` comments are skipped. Every bad line is
/// reported with its index (the line number minus one) so the payload can be fixed.
fn parse_properties(bytes: &[u8]) -> Result<RuleSet, RuleError> {
    let text = std::str::from_utf8(bytes).map_err(|e| RuleError::Format {
        payload: "payload".into(),
        format: "resource = qps properties".into(),
        message: e.to_string(),
    })?;
    let mut rules = Vec::new();
    let mut issues = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((resource, qps)) = line.split_once('=') else {
            issues.push(RuleIssue::new(
                RuleFamily::Flow,
                index,
                None,
                "line",
                "expected `resource = qps`",
            ));
            continue;
        };
        let resource = resource.trim();
        match qps.trim().parse::<f64>() {
            Ok(qps) => rules.push(FlowRule::qps(resource, qps)),
            Err(e) => issues.push(RuleIssue::new(
                RuleFamily::Flow,
                index,
                Some(resource),
                "qps",
                format!("not a number: {e}"),
            )),
        }
    }
    if issues.is_empty() {
        Ok(RuleSet::new().with_flow(rules))
    } else {
        Err(RuleError::Invalid {
            payload: "payload".into(),
            issues,
        })
    }
}

/// Rules in a format of your own (`resource = qps` per line), through a custom converter.
#[derive(Debug, clap::Parser)]
struct Args {
    /// The rules file (written with a default when it does not exist).
    #[arg(long, default_value = "sentinel-quickstart/limits.properties")]
    rules: PathBuf,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long)]
    seconds: Option<u64>,
}

#[tokio::main]
async fn main() {
    let Args { rules, seconds } = <Args as clap::Parser>::parse();
    if !rules.exists() {
        if let Some(dir) = rules.parent().filter(|d| !d.as_os_str().is_empty()) {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Err(e) = std::fs::write(&rules, DEFAULT_RULES) {
            eprintln!("cannot write {}: {e}", rules.display());
            std::process::exit(1);
        }
    }
    println!(
        "watching {} (format: `resource = qps` per line)",
        rules.display()
    );

    let sentinel = Sentinel::new();
    sentinel.add_listener(|event: &SentinelEvent| {
        if let SentinelEvent::RulesRejected { error, .. } = event {
            println!(">> rejected, previous rules kept: {error}");
        }
    });
    let source = match FileSource::new(&rules) {
        Ok(source) => source,
        Err(e) => {
            eprintln!("bad path: {e}");
            std::process::exit(1);
        }
    };
    let data_source = DataSource::builder(source, converter_fn(parse_properties))
        .start(&sentinel)
        .await
        .unwrap_or_else(|e| examples::exit_with(&format!("cannot load {}", rules.display()), &e));

    let resources: [&'static str; 2] = ["GET:/order", "GET:/stock"];
    let tasks: Vec<_> = resources
        .into_iter()
        .map(|r| {
            tokio::spawn(examples::simulate(
                sentinel.clone(),
                r,
                20,
                Duration::from_millis(5),
            ))
        })
        .collect();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    for elapsed in 1.. {
        tick.tick().await;
        let limits: Vec<String> = sentinel
            .flow_rules()
            .rules()
            .iter()
            .map(|r| format!("{}={}", r.resource, r.count))
            .collect();
        println!(
            "[{elapsed:>3}s] {}   limits: {}",
            examples::report(&sentinel, &resources),
            limits.join(", ")
        );
        if seconds.is_some_and(|n| elapsed >= n) {
            break;
        }
    }
    for task in tasks {
        task.abort();
    }
    data_source.close().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_reports_bad_lines() {
        let set = parse_properties(b"# c\nGET:/a = 10\n\n b = 2.5 \n").expect("valid");
        assert_eq!(
            set.flow,
            Some(vec![FlowRule::qps("GET:/a", 10.0), FlowRule::qps("b", 2.5)])
        );
        let err = parse_properties(b"a = 1\nb = x\nno equals\n").expect_err("invalid");
        let found: Vec<(usize, &str)> = err
            .issues()
            .iter()
            .map(|i| (i.index, i.field.as_str()))
            .collect();
        assert_eq!(found, vec![(1, "qps"), (2, "line")]);
    }
}
