//! The codec against byte vectors written out from the Java encoders' logic
//! (`DefaultRequestEntityWriter` + `FlowRequestDataWriter` etc. on the client,
//! `DefaultResponseEntityWriter` + `FlowResponseDataWriter` etc. on the server, with Netty's
//! 2-byte `LengthFieldPrepender`), and round trips.

use bytes::BytesMut;
use proptest::prelude::*;
use tokio_util::codec::{Decoder, Encoder};

use super::*;

fn decode_all(bytes: &[u8]) -> Vec<Inbound> {
    let mut codec = ServerCodec::default();
    let mut buf = BytesMut::from(bytes);
    let mut out = Vec::new();
    while let Some(item) = codec.decode(&mut buf).expect("no i/o error") {
        out.push(item);
    }
    out
}

fn one_request(bytes: &[u8]) -> Request {
    match decode_all(bytes).as_slice() {
        [Inbound::Request(r)] => r.clone(),
        other => panic!("expected one request, got {other:?}"),
    }
}

fn encode_response(response: Response) -> Vec<u8> {
    let mut buf = BytesMut::new();
    ServerCodec::default()
        .encode(response, &mut buf)
        .expect("fits a frame");
    buf.to_vec()
}

#[test]
fn a_flow_request_as_the_java_client_writes_it() {
    // length 18 | xid 7 | type 1 | flowId 111 | count 2 | prioritized true
    let bytes = [
        0, 18, 0, 0, 0, 7, 1, 0, 0, 0, 0, 0, 0, 0, 111, 0, 0, 0, 2, 1,
    ];
    assert_eq!(
        one_request(&bytes),
        Request {
            id: 7,
            body: RequestBody::Flow(FlowRequest {
                flow_id: 111,
                count: 2,
                prioritized: true
            })
        }
    );
    // Without the optional prioritized byte (the server's decoder reads it only if present).
    let bytes = [0, 17, 0, 0, 0, 7, 1, 0, 0, 0, 0, 0, 0, 0, 111, 0, 0, 0, 2];
    assert!(matches!(
        one_request(&bytes).body,
        RequestBody::Flow(FlowRequest {
            prioritized: false,
            ..
        })
    ));
}

#[test]
fn a_ping_carries_the_namespace_and_a_blank_one_none() {
    // length 20 | xid 0 | type 0 | len 11 | "token-app-1"
    let mut bytes = vec![0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 11];
    bytes.extend_from_slice(b"token-app-1");
    assert_eq!(
        one_request(&bytes),
        Request {
            id: 0,
            body: RequestBody::Ping {
                namespace: Some("token-app-1".into())
            }
        }
    );
    // A blank namespace is not written by the client: header only.
    assert_eq!(
        one_request(&[0, 5, 0, 0, 0, 0, 0]).body,
        RequestBody::Ping { namespace: None }
    );
    // Whitespace only is blank too (StringUtil.isBlank).
    assert_eq!(
        one_request(&[0, 11, 0, 0, 0, 0, 0, 0, 0, 0, 2, b' ', b'\t']).body,
        RequestBody::Ping { namespace: None }
    );
}

#[test]
fn a_param_flow_request_with_every_parameter_type() {
    let mut p = vec![0, 0, 0, 9, 2]; // xid 9, type 2
    p.extend_from_slice(&5i64.to_be_bytes());
    p.extend_from_slice(&1i32.to_be_bytes());
    p.extend_from_slice(&8i32.to_be_bytes()); // 8 parameters
    p.extend_from_slice(&[0, 0, 0, 0, 42]); // int 42
    p.extend_from_slice(&[1]);
    p.extend_from_slice(&(-3i64).to_be_bytes()); // long -3
    p.extend_from_slice(&[2, 0xFF]); // byte -1
    p.push(3);
    p.extend_from_slice(&1.5f64.to_be_bytes());
    p.push(4);
    p.extend_from_slice(&2.5f32.to_be_bytes());
    p.extend_from_slice(&[5, 0x01, 0x00]); // short 256
    p.extend_from_slice(&[6, 1]); // true
    p.extend_from_slice(&[7, 0, 0, 0, 3]);
    p.extend_from_slice(b"key");
    let mut bytes = u16::try_from(p.len())
        .expect("small")
        .to_be_bytes()
        .to_vec();
    bytes.extend_from_slice(&p);
    assert_eq!(
        one_request(&bytes).body,
        RequestBody::ParamFlow(ParamFlowRequest {
            flow_id: 5,
            count: 1,
            params: vec![
                ParamValue::Int(42),
                ParamValue::Long(-3),
                ParamValue::Byte(-1),
                ParamValue::Double(1.5),
                ParamValue::Float(2.5),
                ParamValue::Short(256),
                ParamValue::Bool(true),
                ParamValue::Str("key".into()),
            ]
        })
    );
}

#[test]
fn responses_as_the_java_server_writes_them() {
    // FLOW OK: xid | type 1 | status 0 | remaining 99 | waitInMs 0
    assert_eq!(
        encode_response(Response::token(7, msg_type::FLOW, Status::OK, 99, 0)),
        [0, 14, 0, 0, 0, 7, 1, 0, 0, 0, 0, 99, 0, 0, 0, 0]
    );
    // BLOCKED, and NO_RULE_EXISTS, with the data the server writes for them (0, 0).
    assert_eq!(
        encode_response(Response::token(8, msg_type::FLOW, Status::BLOCKED, 0, 0)),
        [0, 14, 0, 0, 0, 8, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(
        encode_response(Response::token(
            9,
            msg_type::PARAM_FLOW,
            Status::NO_RULE_EXISTS,
            0,
            0
        )),
        [0, 14, 0, 0, 0, 9, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    // BAD_REQUEST is -4 on one byte.
    assert_eq!(
        encode_response(Response::token(
            1,
            msg_type::FLOW,
            Status::BAD_REQUEST,
            0,
            0
        ))[7],
        0xFC
    );
    // PING OK: connected count 3.
    assert_eq!(
        encode_response(Response {
            id: 0,
            msg_type: msg_type::PING,
            status: Status::RESPONSE_OK,
            body: ResponseBody::Ping { connected: 3 }
        }),
        [0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3]
    );
    // A bad ping answer: status -1, no data.
    assert_eq!(
        encode_response(Response {
            id: 0,
            msg_type: msg_type::PING,
            status: Status::RESPONSE_BAD,
            body: ResponseBody::Empty
        }),
        [0, 6, 0, 0, 0, 0, 0, 0xFF]
    );
}

#[test]
fn frames_split_anywhere_decode_the_same() {
    let bytes = [
        0, 18, 0, 0, 0, 7, 1, 0, 0, 0, 0, 0, 0, 0, 111, 0, 0, 0, 2, 1, 0, 5, 0, 0, 0, 1, 0,
    ];
    let whole = decode_all(&bytes);
    assert_eq!(whole.len(), 2);
    for cut in 0..bytes.len() {
        let mut codec = ServerCodec::default();
        let mut buf = BytesMut::from(&bytes[..cut]);
        let mut got = Vec::new();
        while let Some(item) = codec.decode(&mut buf).expect("no i/o error") {
            got.push(item);
        }
        buf.extend_from_slice(&bytes[cut..]);
        while let Some(item) = codec.decode(&mut buf).expect("no i/o error") {
            got.push(item);
        }
        assert_eq!(got, whole, "cut at {cut}");
    }
}

#[test]
fn bad_frames_are_rejected_and_the_stream_goes_on() {
    let flow = [0u8, 17, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1];
    let mut bytes = Vec::new();
    // Shorter than the 5-byte header.
    bytes.extend_from_slice(&[0, 3, 1, 2, 3]);
    // Unknown type 9, and concurrent acquire (3): neither has a codec in 1.8.9.
    bytes.extend_from_slice(&[0, 5, 0, 0, 0, 4, 9]);
    bytes.extend_from_slice(&[0, 9, 0, 0, 0, 5, 3, 0, 0, 0, 1]);
    // FLOW with 4 bytes of data.
    bytes.extend_from_slice(&[0, 9, 0, 0, 0, 6, 1, 0, 0, 0, 1]);
    // A ping whose namespace length runs past the frame.
    bytes.extend_from_slice(&[0, 11, 0, 0, 0, 7, 0, 0, 0, 0, 100, b'a', b'b']);
    // PARAM_FLOW with no parameters, and with an unknown parameter type.
    bytes.extend_from_slice(&[0, 21, 0, 0, 0, 8, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1]);
    bytes.extend_from_slice(&[0, 0, 0, 0]);
    bytes.extend_from_slice(&[0, 23, 0, 0, 0, 9, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1]);
    bytes.extend_from_slice(&[0, 0, 0, 1, 42, 0]);
    // A string parameter with a negative length.
    bytes.extend_from_slice(&[0, 26, 0, 0, 0, 10, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1]);
    bytes.extend_from_slice(&[0, 0, 0, 1, 7, 0xFF, 0xFF, 0xFF, 0xFF]);
    // An oversized frame (2 000 bytes announced and sent), then a good request.
    bytes.extend_from_slice(&2000u16.to_be_bytes());
    bytes.extend_from_slice(&[0xAB; 2000]);
    bytes.extend_from_slice(&flow);
    let got = decode_all(&bytes);
    let labels: Vec<&str> = got
        .iter()
        .map(|item| match item {
            Inbound::Rejected(e) => e.label(),
            Inbound::Request(_) => "request",
        })
        .collect();
    assert_eq!(
        labels,
        [
            "short_header",
            "unknown_type",
            "unknown_type",
            "bad_data",
            "bad_data",
            "bad_data",
            "bad_data",
            "bad_data",
            "oversized",
            "request"
        ]
    );
    assert_eq!(
        got[8],
        Inbound::Rejected(FrameError::Oversized { len: 2000 })
    );
}

#[test]
fn an_oversized_frame_is_skipped_across_reads() {
    let mut codec = ServerCodec::default();
    let mut buf = BytesMut::from(&1500u16.to_be_bytes()[..]);
    buf.extend_from_slice(&[0; 700]);
    assert_eq!(codec.decode(&mut buf).expect("no i/o error"), None);
    assert!(buf.is_empty(), "skipped bytes are not buffered");
    buf.extend_from_slice(&[0; 800]);
    assert_eq!(
        codec.decode(&mut buf).expect("no i/o error"),
        Some(Inbound::Rejected(FrameError::Oversized { len: 1500 }))
    );
    // The largest legal frame passes.
    let mut frame = (MAX_PAYLOAD as u16).to_be_bytes().to_vec();
    frame.extend_from_slice(&[0, 0, 0, 1, 0]);
    frame.resize(2 + MAX_PAYLOAD, 0);
    buf.extend_from_slice(&frame);
    assert!(matches!(
        codec.decode(&mut buf).expect("no i/o error"),
        Some(Inbound::Request(_))
    ));
}

#[test]
fn a_request_too_large_for_a_frame_is_refused_by_the_client_codec() {
    let request = Request {
        id: 1,
        body: RequestBody::ParamFlow(ParamFlowRequest {
            flow_id: 1,
            count: 1,
            params: vec![ParamValue::Str("x".repeat(2000))],
        }),
    };
    let mut buf = BytesMut::from(&b"kept"[..]);
    let err = ClientCodec::default()
        .encode(request, &mut buf)
        .expect_err("refused");
    assert!(matches!(err, CodecError::TooLarge { .. }), "{err}");
    assert_eq!(&buf[..], b"kept");
}

#[test]
fn the_client_codec_reads_what_the_java_client_reads() {
    let mut codec = ClientCodec::default();
    // A ping answer of one byte is read as a byte (PingResponseDataDecoder).
    let mut buf = BytesMut::from(&[0u8, 7, 0, 0, 0, 0, 0, 0, 5][..]);
    assert_eq!(
        codec
            .decode(&mut buf)
            .expect("no i/o error")
            .expect("a frame")
            .expect("well-formed")
            .body,
        ResponseBody::Ping { connected: 5 }
    );
    // A token answer with other than 8 data bytes reads as (0, 0).
    let mut buf = BytesMut::from(&[0u8, 8, 0, 0, 0, 1, 1, 1, 0, 9][..]);
    assert_eq!(
        codec
            .decode(&mut buf)
            .expect("no i/o error")
            .expect("a frame")
            .expect("well-formed")
            .body,
        ResponseBody::Token {
            remaining: 0,
            wait_in_ms: 0
        }
    );
}

fn param_value() -> impl Strategy<Value = ParamValue> {
    prop_oneof![
        any::<i32>().prop_map(ParamValue::Int),
        any::<i64>().prop_map(ParamValue::Long),
        any::<i8>().prop_map(ParamValue::Byte),
        prop::num::f64::NORMAL.prop_map(ParamValue::Double),
        prop::num::f32::NORMAL.prop_map(ParamValue::Float),
        any::<i16>().prop_map(ParamValue::Short),
        any::<bool>().prop_map(ParamValue::Bool),
        ".{0,40}".prop_map(ParamValue::Str),
    ]
}

fn request() -> impl Strategy<Value = Request> {
    let body = prop_oneof![
        proptest::option::of("[a-zA-Z0-9._-]{1,64}")
            .prop_map(|namespace| RequestBody::Ping { namespace }),
        (any::<i64>(), any::<i32>(), any::<bool>()).prop_map(|(flow_id, count, prioritized)| {
            RequestBody::Flow(FlowRequest {
                flow_id,
                count,
                prioritized,
            })
        }),
        (
            any::<i64>(),
            any::<i32>(),
            prop::collection::vec(param_value(), 1..12)
        )
            .prop_map(|(flow_id, count, params)| {
                RequestBody::ParamFlow(ParamFlowRequest {
                    flow_id,
                    count,
                    params,
                })
            }),
    ];
    (any::<i32>(), body).prop_map(|(id, body)| Request { id, body })
}

fn response() -> impl Strategy<Value = Response> {
    let status = any::<i8>().prop_map(Status);
    prop_oneof![
        (any::<i32>(), status.clone(), any::<i32>()).prop_map(|(id, status, connected)| {
            Response {
                id,
                msg_type: msg_type::PING,
                status,
                body: ResponseBody::Ping { connected },
            }
        }),
        (
            any::<i32>(),
            prop_oneof![Just(msg_type::FLOW), Just(msg_type::PARAM_FLOW)],
            status,
            any::<i32>(),
            any::<i32>()
        )
            .prop_map(|(id, kind, status, remaining, wait)| {
                Response::token(id, kind, status, remaining, wait)
            }),
    ]
}

proptest! {
    #[test]
    fn requests_round_trip(requests in prop::collection::vec(request(), 1..8)) {
        let mut buf = BytesMut::new();
        let mut client = ClientCodec::default();
        for r in &requests {
            client.encode(r.clone(), &mut buf).expect("fits");
        }
        let got: Vec<Inbound> = decode_all(&buf);
        let want: Vec<Inbound> = requests.into_iter().map(Inbound::Request).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn responses_round_trip(responses in prop::collection::vec(response(), 1..8)) {
        let mut buf = BytesMut::new();
        let mut server = ServerCodec::default();
        for r in &responses {
            server.encode(*r, &mut buf).expect("fits");
        }
        let mut client = ClientCodec::default();
        let mut got = Vec::new();
        while let Some(item) = client.decode(&mut buf).expect("no i/o error") {
            got.push(item.expect("well-formed"));
        }
        prop_assert_eq!(got, responses);
    }

    /// Any bytes at all: no panic, no I/O error, and every byte is consumed or kept for
    /// the next read.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..3000)) {
        let mut codec = ServerCodec::default();
        let mut buf = BytesMut::from(&bytes[..]);
        while let Some(_item) = codec.decode(&mut buf).expect("no i/o error") {}
        prop_assert!(buf.len() < 2 + MAX_PAYLOAD);
        let mut client = ClientCodec::default();
        let mut buf = BytesMut::from(&bytes[..]);
        while let Some(_item) = client.decode(&mut buf).expect("no i/o error") {}
    }
}
