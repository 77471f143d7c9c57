//! The OpenTelemetry recipe runs: its blocks reach OpenTelemetry as span events, and the
//! engine's metrics as OpenTelemetry metrics (both printed by the stdout exporters).

use std::process::Command;

#[test]
fn the_recipe_exports_block_events_as_span_events_and_the_engine_metrics() {
    let output = Command::new(env!("CARGO_BIN_EXE_otel"))
        .output()
        .expect("the otel example runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("5 requests, 2 blocked"), "{stdout}");
    // One span event per block, on the request's span.
    assert_eq!(stdout.matches("blocked by sentinel").count(), 2, "{stdout}");
    for metric in [
        "sentinel_pass_total",
        "sentinel_block_total",
        "sentinel_concurrency",
        "sentinel_rt_seconds",
        "sentinel_rules_applied_total",
    ] {
        assert!(stdout.contains(metric), "no {metric} in:\n{stdout}");
    }
}
