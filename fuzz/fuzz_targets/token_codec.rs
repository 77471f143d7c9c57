//! The token server's codec (Sentinel 1.8's cluster protocol) on any bytes, fed in chunks as
//! a socket delivers them: the server's decoder never panics, never fails (only I/O ends a
//! connection), keeps less than one frame buffered, and every request it decodes encodes
//! back (with the Java client's encoder, `ClientCodec`) to a frame that decodes to the same
//! request. The client's decoder (responses) never panics either.

#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use sentinel_token_server::protocol::{ClientCodec, Inbound, ServerCodec, MAX_PAYLOAD};
use tokio_util::codec::{Decoder, Encoder};

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, bytes)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(chunk).max(1);
    let mut server = ServerCodec::default();
    let mut buf = BytesMut::new();
    let mut requests = Vec::new();
    for piece in bytes.chunks(chunk) {
        buf.extend_from_slice(piece);
        while let Some(inbound) = server.decode(&mut buf).expect("only I/O fails a decode") {
            if let Inbound::Request(request) = inbound {
                requests.push(request);
            }
        }
        assert!(buf.len() < 2 + MAX_PAYLOAD, "at most one frame is kept");
    }
    for request in requests {
        let mut frame = BytesMut::new();
        // A string decoded lossily may not fit once re-encoded: only what fits is compared.
        if ClientCodec::default()
            .encode(request.clone(), &mut frame)
            .is_err()
        {
            continue;
        }
        let again = ServerCodec::default()
            .decode(&mut frame)
            .expect("only I/O fails a decode");
        // Debug, not ==: a NaN parameter is equal to itself only in its text.
        assert_eq!(
            format!("{again:?}"),
            format!("{:?}", Some(Inbound::Request(request))),
            "a decoded request encodes back to itself"
        );
        assert!(frame.is_empty(), "one frame, read whole");
    }
    let mut client = ClientCodec::default();
    let mut buf = BytesMut::from(bytes);
    while let Some(_response) = client.decode(&mut buf).expect("only I/O fails a decode") {}
});
