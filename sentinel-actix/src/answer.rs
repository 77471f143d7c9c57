//! What a blocked request gets: sentinel-tower's ready-made answers, converted to actix-web's
//! response type, or the application's own; either is marked as a block answer.

use std::sync::Arc;

use actix_web::http::StatusCode;
use actix_web::HttpResponse;
use sentinel_core::BlockError;
use sentinel_tower::{BlockAnswer, BlockResponses};

#[derive(Clone)]
pub(crate) enum BlockAnswerer {
    Responses(BlockResponses),
    Custom(Arc<dyn Fn(&BlockError) -> HttpResponse + Send + Sync>),
}

impl BlockAnswerer {
    /// The answer to `blocked`, marked with its family.
    #[cold]
    pub(crate) fn answer(&self, blocked: &BlockError) -> HttpResponse {
        let mut response = match self {
            BlockAnswerer::Custom(f) => f(blocked),
            BlockAnswerer::Responses(responses) => converted(responses.response::<String>(blocked)),
        };
        response
            .extensions_mut()
            .insert(BlockAnswer::new(blocked.family()));
        response
    }
}

/// An `http` 1 response as actix-web's (which is on `http` 0.2): status, headers and body.
fn converted(response: http::Response<String>) -> HttpResponse {
    let (parts, body) = response.into_parts();
    let status =
        StatusCode::from_u16(parts.status.as_u16()).unwrap_or(StatusCode::TOO_MANY_REQUESTS);
    let mut builder = HttpResponse::build(status);
    for (name, value) in &parts.headers {
        builder.insert_header((name.as_str(), value.as_bytes()));
    }
    builder.body(body)
}
