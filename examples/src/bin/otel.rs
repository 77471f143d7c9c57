//! The OpenTelemetry recipe: sentinel-core's metrics (the `metrics` feature) go through the
//! `metrics` facade into an OpenTelemetry meter (`metrics-exporter-opentelemetry`), and
//! each guarded call runs in a `tracing` span whose block becomes a span event
//! (`tracing-opentelemetry`). Both are printed by OpenTelemetry's stdout exporters; swap
//! them for the OTLP exporters (`opentelemetry-otlp`) to send them to a collector.
//!
//! ```sh
//! cargo run -p examples --features otel --bin otel
//! ```

use std::process::ExitCode;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use sentinel_core::flow::FlowRule;
use sentinel_core::Sentinel;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

const RESOURCE: &str = "GET:/order";

fn main() -> ExitCode {
    examples::exit_on_error(run())
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    // `metrics` -> an OpenTelemetry meter, read by the stdout exporter.
    let (meters, recorder) = metrics_exporter_opentelemetry::Recorder::builder("sentinel-example")
        .with_meter_provider(|builder| {
            builder.with_periodic_exporter(opentelemetry_stdout::MetricExporter::default())
        })
        .build();
    metrics::set_global_recorder(recorder)?;

    // `tracing` spans and events -> OpenTelemetry spans and span events.
    let spans = SdkTracerProvider::builder()
        .with_simple_exporter(opentelemetry_stdout::SpanExporter::default())
        .build();
    tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(spans.tracer("sentinel-example")))
        .try_init()?;

    let sentinel = Sentinel::new();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps(RESOURCE, 3.0)])?;
    let mut blocked = 0;
    for request in 0..5 {
        let span = tracing::info_span!("request", resource = RESOURCE, request);
        let _in_span = span.enter();
        match sentinel.entry(RESOURCE).enter() {
            Ok(entry) => drop(entry),
            Err(block) => {
                blocked += 1;
                // A span event: which family blocked, without the rule's details.
                tracing::warn!(family = block.family().as_str(), "blocked by sentinel");
            }
        }
    }
    println!("5 requests, {blocked} blocked; the exporters print the spans and the metrics:");
    spans.shutdown()?;
    meters.shutdown()?;
    Ok(())
}
