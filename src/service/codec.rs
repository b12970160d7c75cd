//! The gRPC codec: protobuf as tonic's prost codec writes and reads it, except that a message
//! that does not decode (a string that is not UTF-8, a truncated field) is the caller's error —
//! `INVALID_ARGUMENT` with a `BadRequest` naming what failed, as every other refusal of input —
//! not the `INTERNAL` the stock codec answers, which says the server failed.

use std::marker::PhantomData;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic::{Code, Status};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// tonic's prost codec with decoding failures answered as the caller's.
#[derive(Debug, Clone)]
pub struct RequestCodec<T, U> {
    inner: ProstCodec<T, U>,
    _pd: PhantomData<(T, U)>,
}

impl<T, U> Default for RequestCodec<T, U> {
    fn default() -> Self {
        RequestCodec {
            inner: ProstCodec::default(),
            _pd: PhantomData,
        }
    }
}

impl<T, U> Codec for RequestCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = RequestDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        self.inner.encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        RequestDecoder(self.inner.decoder())
    }
}

/// [`ProstDecoder`] whose failures are `INVALID_ARGUMENT`.
#[derive(Debug, Clone, Default)]
pub struct RequestDecoder<U>(ProstDecoder<U>);

impl<U: prost::Message + Default> Decoder for RequestDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.0.decode(buf).map_err(|s| undecodable(s.message()))
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}

/// INVALID_ARGUMENT for a message that does not decode; `why` is prost's account (the message
/// and field it failed in: `PredictRequest.field_manager: invalid string value: data is not
/// UTF-8 encoded`), which holds no value of the message.
fn undecodable(why: &str) -> Status {
    let why = why
        .strip_prefix("failed to decode Protobuf message: ")
        .unwrap_or(why);
    // The innermost field prost names: `Manifest.name: PredictRequest.manifests: ...`.
    let field = why
        .split(": ")
        .find(|p| p.contains('.') && !p.contains(' '))
        .unwrap_or("")
        .to_string();
    let message = format!("the request is no valid protobuf message of its method: {why}");
    super::error(
        Code::InvalidArgument,
        "UNDECODABLE_MESSAGE",
        &message,
        &[(field, why.to_string())],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic_types::StatusExt;

    #[test]
    fn an_undecodable_message_is_the_callers_error_naming_the_field() {
        let s = undecodable(
            "failed to decode Protobuf message: PredictRequest.field_manager: invalid string value: data is not UTF-8 encoded",
        );
        assert_eq!(s.code(), Code::InvalidArgument);
        let d = s.get_error_details();
        assert_eq!(d.error_info().unwrap().reason, "UNDECODABLE_MESSAGE");
        let v = &d.bad_request().unwrap().field_violations[0];
        assert_eq!(v.field, "PredictRequest.field_manager");
        assert!(v.description.contains("not UTF-8"), "{v:?}");
    }
}
