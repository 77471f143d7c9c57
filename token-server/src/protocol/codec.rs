//! The frame codecs: [`ServerCodec`] decodes requests and encodes responses, [`ClientCodec`]
//! does the reverse (for tests, benches and Rust clients of a token server).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use super::{
    msg_type, param_type, CodecError, FlowRequest, FrameError, ParamFlowRequest, ParamValue,
    Request, RequestBody, Response, ResponseBody, Status, MAX_PAYLOAD,
};

/// The 2-byte length field of every frame.
const LENGTH_FIELD: usize = 2;

/// Splits the byte stream into payloads, skipping oversized frames as Netty's
/// `LengthFieldBasedFrameDecoder` does.
#[derive(Debug, Default)]
struct Framing {
    /// Bytes of an oversized frame still to skip.
    discarding: usize,
    /// The oversized frame's announced length, reported once it is skipped.
    discarded_len: usize,
}

impl Framing {
    /// The next whole payload, an oversized frame once skipped, or `None` for more bytes.
    fn next(&mut self, src: &mut BytesMut) -> Option<Result<Bytes, FrameError>> {
        if self.discarding > 0 {
            let n = self.discarding.min(src.len());
            src.advance(n);
            self.discarding -= n;
            if self.discarding > 0 {
                return None;
            }
            return Some(Err(FrameError::Oversized {
                len: self.discarded_len,
            }));
        }
        if src.len() < LENGTH_FIELD {
            return None;
        }
        let len = usize::from(u16::from_be_bytes([src[0], src[1]]));
        if len > MAX_PAYLOAD {
            src.advance(LENGTH_FIELD);
            self.discarding = len;
            self.discarded_len = len;
            return self.next(src);
        }
        if src.len() < LENGTH_FIELD + len {
            src.reserve(LENGTH_FIELD + len - src.len());
            return None;
        }
        src.advance(LENGTH_FIELD);
        Some(Ok(src.split_to(len).freeze()))
    }
}

/// A bounds-checked reader over one payload: every read is `None` past the end.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.buf.len()
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.buf.len() < n {
            return None;
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Some(head)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    fn u8(&mut self) -> Option<u8> {
        self.array::<1>().map(|[b]| b)
    }

    fn i16(&mut self) -> Option<i16> {
        self.array().map(i16::from_be_bytes)
    }

    fn i32(&mut self) -> Option<i32> {
        self.array().map(i32::from_be_bytes)
    }

    fn i64(&mut self) -> Option<i64> {
        self.array().map(i64::from_be_bytes)
    }
}

/// What the server's decoder yields: a request, or a frame it cannot answer (reported so the
/// server can count and log it; the connection goes on, as with Sentinel's server).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Inbound {
    /// A request to answer.
    Request(Request),
    /// A frame skipped without an answer.
    Rejected(FrameError),
}

/// The token server's side: decodes requests, encodes responses.
#[derive(Debug, Default)]
pub struct ServerCodec {
    framing: Framing,
}

impl Decoder for ServerCodec {
    type Item = Inbound;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Inbound>, CodecError> {
        Ok(self.framing.next(src).map(|frame| {
            match frame.and_then(|payload| decode_request(&payload)) {
                Ok(request) => Inbound::Request(request),
                Err(error) => Inbound::Rejected(error),
            }
        }))
    }
}

impl Encoder<Response> for ServerCodec {
    type Error = CodecError;

    fn encode(&mut self, response: Response, dst: &mut BytesMut) -> Result<(), CodecError> {
        framed(dst, |out| {
            out.put_i32(response.id);
            out.put_u8(response.msg_type);
            out.put_i8(response.status.0);
            match response.body {
                ResponseBody::Empty => {}
                ResponseBody::Ping { connected } => out.put_i32(connected),
                ResponseBody::Token {
                    remaining,
                    wait_in_ms,
                } => {
                    out.put_i32(remaining);
                    out.put_i32(wait_in_ms);
                }
            }
        })
    }
}

/// Writes one frame: the length field, then what `write` puts; refuses a payload over
/// [`MAX_PAYLOAD`] (and leaves `dst` as it was).
fn framed(dst: &mut BytesMut, write: impl FnOnce(&mut BytesMut)) -> Result<(), CodecError> {
    let start = dst.len();
    dst.put_u16(0);
    write(dst);
    let len = dst.len() - start - LENGTH_FIELD;
    match u16::try_from(len) {
        Ok(field) if len <= MAX_PAYLOAD => {
            dst[start..start + LENGTH_FIELD].copy_from_slice(&field.to_be_bytes());
            Ok(())
        }
        _ => {
            dst.truncate(start);
            Err(CodecError::TooLarge { len })
        }
    }
}

/// Decodes one request payload as `DefaultRequestEntityDecoder` and the 1.8.9 data
/// decoders read it.
fn decode_request(payload: &[u8]) -> Result<Request, FrameError> {
    let mut r = Reader { buf: payload };
    let (Some(id), Some(kind)) = (r.i32(), r.u8()) else {
        return Err(FrameError::ShortHeader { len: payload.len() });
    };
    let bad = |reason| FrameError::BadData {
        id,
        msg_type: kind,
        reason,
    };
    let body = match kind {
        msg_type::PING => RequestBody::Ping {
            namespace: decode_namespace(&mut r).ok_or_else(|| bad("namespace truncated"))?,
        },
        msg_type::FLOW => {
            if r.remaining() < 12 {
                return Err(bad("flow data shorter than 12 bytes"));
            }
            let flow_id = r.i64().ok_or_else(|| bad("flowId truncated"))?;
            let count = r.i32().ok_or_else(|| bad("count truncated"))?;
            // The prioritized byte is optional (readBoolean: any non-zero byte is true).
            let prioritized = r.u8().is_some_and(|b| b != 0);
            RequestBody::Flow(FlowRequest {
                flow_id,
                count,
                prioritized,
            })
        }
        msg_type::PARAM_FLOW => {
            if r.remaining() < 16 {
                return Err(bad("param-flow data shorter than 16 bytes"));
            }
            let flow_id = r.i64().ok_or_else(|| bad("flowId truncated"))?;
            let count = r.i32().ok_or_else(|| bad("count truncated"))?;
            let amount = r.i32().ok_or_else(|| bad("amount truncated"))?;
            let amount = usize::try_from(amount)
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| bad("no parameters"))?;
            // Each parameter takes at least 2 bytes: never reserve more than the payload holds.
            let mut params = Vec::with_capacity(amount.min(r.remaining() / 2));
            for _ in 0..amount {
                params.push(decode_param(&mut r).map_err(bad)?);
            }
            RequestBody::ParamFlow(ParamFlowRequest {
                flow_id,
                count,
                params,
            })
        }
        other => {
            return Err(FrameError::UnknownType {
                id,
                msg_type: other,
            })
        }
    };
    Ok(Request { id, body })
}

/// A ping's namespace: `None` inside for none or a blank one (answered bad), `None` outside
/// when the announced length runs past the payload (Sentinel fails on it, no answer).
fn decode_namespace(r: &mut Reader<'_>) -> Option<Option<String>> {
    if r.remaining() < 4 {
        return Some(None);
    }
    let len = r.i32()?;
    if len <= 0 || r.remaining() == 0 {
        return Some(None);
    }
    let bytes = r.take(usize::try_from(len).ok()?)?;
    let namespace = String::from_utf8_lossy(bytes).into_owned();
    Some((!namespace.trim().is_empty()).then_some(namespace))
}

fn decode_param(r: &mut Reader<'_>) -> Result<ParamValue, &'static str> {
    const TRUNCATED: &str = "parameter truncated";
    let kind = r.u8().ok_or(TRUNCATED)?;
    let value = match kind {
        param_type::INTEGER => ParamValue::Int(r.i32().ok_or(TRUNCATED)?),
        param_type::LONG => ParamValue::Long(r.i64().ok_or(TRUNCATED)?),
        param_type::BYTE => ParamValue::Byte(i8::from_be_bytes([r.u8().ok_or(TRUNCATED)?])),
        param_type::DOUBLE => {
            ParamValue::Double(f64::from_bits(r.i64().ok_or(TRUNCATED)?.cast_unsigned()))
        }
        param_type::FLOAT => {
            ParamValue::Float(f32::from_bits(r.i32().ok_or(TRUNCATED)?.cast_unsigned()))
        }
        param_type::SHORT => ParamValue::Short(r.i16().ok_or(TRUNCATED)?),
        param_type::BOOLEAN => ParamValue::Bool(r.u8().ok_or(TRUNCATED)? != 0),
        param_type::STRING => {
            let len =
                usize::try_from(r.i32().ok_or(TRUNCATED)?).map_err(|_| "negative string length")?;
            let bytes = r.take(len).ok_or(TRUNCATED)?;
            ParamValue::Str(String::from_utf8_lossy(bytes).into_owned())
        }
        _ => return Err("unknown parameter type"),
    };
    Ok(value)
}

/// A token client's side: encodes requests as `sentinel-cluster-client-default` 1.8.9 writes
/// them, decodes responses as it reads them.
#[derive(Debug, Default)]
pub struct ClientCodec {
    framing: Framing,
}

impl Encoder<Request> for ClientCodec {
    type Error = CodecError;

    fn encode(&mut self, request: Request, dst: &mut BytesMut) -> Result<(), CodecError> {
        framed(dst, |out| {
            out.put_i32(request.id);
            out.put_u8(request.body.msg_type());
            match &request.body {
                RequestBody::Ping { namespace } => {
                    // A blank namespace is not written at all.
                    if let Some(ns) = namespace.as_deref().filter(|ns| !ns.trim().is_empty()) {
                        put_len(out, ns.len());
                        out.put_slice(ns.as_bytes());
                    }
                }
                RequestBody::Flow(flow) => {
                    out.put_i64(flow.flow_id);
                    out.put_i32(flow.count);
                    out.put_u8(u8::from(flow.prioritized));
                }
                RequestBody::ParamFlow(param) => {
                    out.put_i64(param.flow_id);
                    out.put_i32(param.count);
                    put_len(out, param.params.len());
                    for value in &param.params {
                        encode_param(value, out);
                    }
                }
            }
        })
    }
}

/// A length as Java's `int` (saturated: the frame limit refuses anything near it anyway).
fn put_len(out: &mut BytesMut, len: usize) {
    out.put_i32(i32::try_from(len).unwrap_or(i32::MAX));
}

fn encode_param(value: &ParamValue, out: &mut BytesMut) {
    match value {
        ParamValue::Int(v) => {
            out.put_u8(param_type::INTEGER);
            out.put_i32(*v);
        }
        ParamValue::Long(v) => {
            out.put_u8(param_type::LONG);
            out.put_i64(*v);
        }
        ParamValue::Byte(v) => {
            out.put_u8(param_type::BYTE);
            out.put_i8(*v);
        }
        ParamValue::Double(v) => {
            out.put_u8(param_type::DOUBLE);
            out.put_f64(*v);
        }
        ParamValue::Float(v) => {
            out.put_u8(param_type::FLOAT);
            out.put_f32(*v);
        }
        ParamValue::Short(v) => {
            out.put_u8(param_type::SHORT);
            out.put_i16(*v);
        }
        ParamValue::Bool(v) => {
            out.put_u8(param_type::BOOLEAN);
            out.put_u8(u8::from(*v));
        }
        ParamValue::Str(s) => {
            out.put_u8(param_type::STRING);
            put_len(out, s.len());
            out.put_slice(s.as_bytes());
        }
    }
}

impl Decoder for ClientCodec {
    type Item = Result<Response, FrameError>;
    type Error = CodecError;

    fn decode(
        &mut self,
        src: &mut BytesMut,
    ) -> Result<Option<Result<Response, FrameError>>, CodecError> {
        Ok(self
            .framing
            .next(src)
            .map(|frame| frame.and_then(|payload| decode_response(&payload))))
    }
}

/// Decodes one response payload as `DefaultResponseEntityDecoder` and the client's data
/// decoders read it.
fn decode_response(payload: &[u8]) -> Result<Response, FrameError> {
    let mut r = Reader { buf: payload };
    let (Some(id), Some(kind), Some(status)) = (r.i32(), r.u8(), r.u8()) else {
        return Err(FrameError::ShortHeader { len: payload.len() });
    };
    let status = Status(i8::from_be_bytes([status]));
    let rest = r.remaining();
    let body = match kind {
        _ if rest == 0 => ResponseBody::Empty,
        msg_type::PING => ResponseBody::Ping {
            connected: match rest {
                1 => r.u8().map_or(-1, |b| i32::from(i8::from_be_bytes([b]))),
                2 | 3 => -1,
                _ => r.i32().unwrap_or(-1),
            },
        },
        msg_type::FLOW | msg_type::PARAM_FLOW => {
            let (remaining, wait_in_ms) = if rest == 8 {
                (r.i32().unwrap_or(0), r.i32().unwrap_or(0))
            } else {
                (0, 0)
            };
            ResponseBody::Token {
                remaining,
                wait_in_ms,
            }
        }
        other => {
            return Err(FrameError::UnknownType {
                id,
                msg_type: other,
            })
        }
    };
    Ok(Response {
        id,
        msg_type: kind,
        status,
        body,
    })
}
