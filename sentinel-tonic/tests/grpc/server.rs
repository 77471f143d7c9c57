//! The server layer: each block's status and retry pushback, and statuses feeding breakers.

use http::HeaderName;
use sentinel_core::authority::AuthorityRule;
use sentinel_core::flow::FlowRule;
use sentinel_core::param_flow::ParamFlowRule;
use sentinel_core::system::SystemRule;
use sentinel_tonic::{ErrorCodes, ParamSource, SentinelGrpcLayer, RETRY_PUSHBACK_KEY};
use tonic::{Code, Status};

use crate::support::{
    breaker_engine, client, code, engine, flow_engine, say, say_with, serve, SAY,
};

fn pushback(status: &Status) -> Option<&str> {
    status
        .metadata()
        .get(RETRY_PUSHBACK_KEY)
        .and_then(|value| value.to_str().ok())
}

#[tokio::test]
async fn a_flow_block_is_resource_exhausted_with_a_retry_pushback() {
    let sentinel = flow_engine(FlowRule::qps(SAY, 2.0));
    let server = serve(Some(SentinelGrpcLayer::server(sentinel.clone()))).await;
    let mut client = client(server.addr, None).await;

    assert!(say(&mut client, Code::Ok).await.is_ok());
    assert!(say(&mut client, Code::Ok).await.is_ok());
    let status = say(&mut client, Code::Ok)
        .await
        .expect_err("the third in the second");
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(pushback(&status), Some("1000"));
    assert_eq!(
        server.echo.calls(),
        2,
        "a blocked call never reaches the service"
    );
    let stats = sentinel
        .resource_stats(SAY)
        .expect("the method is the resource");
    assert_eq!((stats.pass_qps, stats.block_qps), (2.0, 1.0));
}

#[tokio::test]
async fn a_param_flow_block_on_a_metadata_value_is_resource_exhausted() {
    let (sentinel, _clock) = engine();
    sentinel
        .param_flow_rules()
        .load_rules(vec![ParamFlowRule::qps(SAY, 0, 1.0)])
        .expect("valid rules");
    let layer = SentinelGrpcLayer::server(sentinel)
        .arg(ParamSource::header(HeaderName::from_static("x-user")).or_block());
    let server = serve(Some(layer)).await;
    let mut client = client(server.addr, None).await;

    let as_user = |user| [("x-user", user)];
    assert!(say_with(&mut client, Code::Ok, &as_user("alice"))
        .await
        .is_ok());
    assert!(
        say_with(&mut client, Code::Ok, &as_user("bob"))
            .await
            .is_ok(),
        "bob has a budget of his own"
    );
    let status = say_with(&mut client, Code::Ok, &as_user("alice"))
        .await
        .expect_err("alice's second");
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(pushback(&status), Some("1000"));
    // Without the key the source requires, the call is refused (no wait helps).
    let status = say(&mut client, Code::Ok).await.expect_err("no user");
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(pushback(&status), None);
    assert_eq!(server.echo.calls(), 2);
}

#[tokio::test]
async fn an_authority_block_is_permission_denied_without_pushback() {
    let (sentinel, _clock) = engine();
    sentinel
        .authority_rules()
        .load_rules(vec![AuthorityRule::white_list(SAY, "shop")])
        .expect("valid rules");
    let layer =
        SentinelGrpcLayer::server(sentinel).origin_metadata(HeaderName::from_static("x-caller"));
    let server = serve(Some(layer)).await;
    let mut client = client(server.addr, None).await;

    let caller = |name| [("x-caller", name)];
    assert!(say_with(&mut client, Code::Ok, &caller("shop"))
        .await
        .is_ok());
    let status = say_with(&mut client, Code::Ok, &caller("crawler"))
        .await
        .expect_err("not on the white list");
    assert_eq!(status.code(), Code::PermissionDenied);
    assert_eq!(pushback(&status), None, "waiting does not help");
    assert_eq!(server.echo.calls(), 1);
}

#[tokio::test]
async fn a_system_block_is_unavailable() {
    let (sentinel, _clock) = engine();
    sentinel
        .system_rules()
        .load_rules(vec![SystemRule::new().qps(1.0)])
        .expect("valid rules");
    let server = serve(Some(SentinelGrpcLayer::server(sentinel))).await;
    let mut client = client(server.addr, None).await;

    assert!(say(&mut client, Code::Ok).await.is_ok());
    let status = say(&mut client, Code::Ok)
        .await
        .expect_err("over the inbound QPS");
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(pushback(&status), None);
    assert_eq!(server.echo.calls(), 1);
}

#[tokio::test]
async fn server_error_statuses_open_a_breaker_whose_block_is_unavailable() {
    let sentinel = breaker_engine(SAY, 2.0);
    let server = serve(Some(SentinelGrpcLayer::server(sentinel.clone()))).await;
    let mut client = client(server.addr, None).await;

    // A caller's mistake does not count by default.
    for _ in 0..4 {
        assert_eq!(
            code(say(&mut client, Code::InvalidArgument).await),
            Code::InvalidArgument
        );
    }
    assert_eq!(
        sentinel.resource_stats(SAY).expect("entered").error_qps,
        0.0
    );
    // INTERNAL does: the third error opens the breaker (more than 2).
    for _ in 0..3 {
        assert_eq!(code(say(&mut client, Code::Internal).await), Code::Internal);
    }
    let status = say(&mut client, Code::Ok)
        .await
        .expect_err("the breaker is open");
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(
        pushback(&status),
        Some("10000"),
        "the breaker's time window, on a fake clock"
    );
    assert_eq!(server.echo.calls(), 7);
}

#[tokio::test]
async fn the_error_codes_are_configurable() {
    let sentinel = breaker_engine(SAY, 1.0);
    let layer = SentinelGrpcLayer::server(sentinel.clone())
        .error_codes(ErrorCodes::none().with(Code::NotFound));
    let server = serve(Some(layer)).await;
    let mut client = client(server.addr, None).await;

    for _ in 0..3 {
        assert_eq!(code(say(&mut client, Code::Internal).await), Code::Internal);
    }
    assert_eq!(
        sentinel.resource_stats(SAY).expect("entered").error_qps,
        0.0
    );
    for _ in 0..2 {
        assert_eq!(code(say(&mut client, Code::NotFound).await), Code::NotFound);
    }
    assert_eq!(code(say(&mut client, Code::Ok).await), Code::Unavailable);
}
