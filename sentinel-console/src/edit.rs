//! Rule edits: a combined document from the page, validated, then written to the source's
//! store with compare-and-set. Nothing is ever applied to the engine directly: the data
//! source reads the store's change back, as every other instance does.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::http::HeaderMap;
use sentinel_core::datasource::{
    CombinedJson, Converter, Encoding, Expected, WritableDataSource, WriteError,
};
use sentinel_core::RuleError;
use serde::{Deserialize, Serialize};

use crate::record::Issue;

/// Decides whether a request may edit rules: the application's own check (a session, a
/// token, a header set by its auth middleware).
pub type AuthHook = Arc<dyn Fn(&HeaderMap) -> bool + Send + Sync>;

/// One editable source: the store its data source reads, written.
pub(crate) struct Writer {
    pub(crate) writer: Arc<dyn WritableDataSource>,
    pub(crate) encoding: Encoding,
}

pub(crate) struct Editing {
    pub(crate) auth: AuthHook,
    pub(crate) writers: BTreeMap<String, Writer>,
}

/// `GET api/sources/{name}/edit`: what the page's editor starts from.
#[derive(Debug, Clone, Serialize)]
pub struct EditView {
    /// The source.
    pub source: String,
    /// What a save writes to.
    pub writer: String,
    /// The store's revision now: a save is compared against it.
    pub revision: Option<u64>,
    /// The rules this source contributes now, as a combined document.
    pub document: serde_json::Value,
}

/// `PUT api/sources/{name}/rules`: a new combined document and the revision it was based on.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct EditRequest {
    /// The store revision the edit started from (`None`: nothing was stored).
    pub expected_revision: Option<u64>,
    /// The new rules, a combined document `{"flow": [...], ...}`.
    pub document: serde_json::Value,
}

/// The answer to an edit.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum EditOutcome {
    /// Stored; the data source applies it when the store reports the change.
    Written {
        /// The store's revision after the write.
        revision: Option<u64>,
    },
    /// Invalid rules: nothing was stored.
    Invalid {
        /// What is wrong.
        message: String,
        /// Each problem with its family, index and field.
        issues: Vec<Issue>,
    },
    /// Someone else wrote since `expected`: nothing was stored.
    Conflict {
        /// The revision the edit expected.
        expected: Option<u64>,
        /// The store's revision now, if it could be read.
        current: Option<u64>,
    },
    /// The store refused the write or could not be reached.
    Failed {
        /// What the store said (never the payload).
        message: String,
    },
}

impl EditOutcome {
    /// The HTTP status the outcome is served with.
    pub(crate) fn status(&self) -> axum::http::StatusCode {
        use axum::http::StatusCode;
        match self {
            EditOutcome::Written { .. } => StatusCode::OK,
            EditOutcome::Invalid { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            EditOutcome::Conflict { .. } => StatusCode::CONFLICT,
            EditOutcome::Failed { .. } => StatusCode::BAD_GATEWAY,
        }
    }
}

fn invalid(error: &RuleError) -> EditOutcome {
    EditOutcome::Invalid {
        message: error.to_string(),
        issues: error.issues().iter().map(Issue::from).collect(),
    }
}

/// Validates `request` and writes it with compare-and-set.
pub(crate) async fn apply(source: &str, writer: &Writer, request: &EditRequest) -> EditOutcome {
    let bytes = match serde_json::to_vec(&request.document) {
        Ok(bytes) => bytes,
        Err(e) => {
            return EditOutcome::Failed {
                message: format!("cannot encode the document: {e}"),
            }
        }
    };
    let set = match CombinedJson::new().convert(&bytes) {
        Ok(set) => set,
        Err(e) => return invalid(&e.with_payload(&format!("edit of {source}"))),
    };
    let written = writer
        .writer
        .write_as(
            &set,
            writer.encoding,
            Expected::Revision(request.expected_revision),
        )
        .await;
    match written {
        Ok(revision) => {
            tracing::info!(source, ?revision, "sentinel console: rules written");
            EditOutcome::Written { revision }
        }
        Err(WriteError::Invalid { source: e, .. }) => invalid(&e),
        Err(WriteError::Conflict { .. }) => EditOutcome::Conflict {
            expected: request.expected_revision,
            current: writer.writer.revision().await.ok().flatten(),
        },
        Err(e) => EditOutcome::Failed {
            message: e.to_string(),
        },
    }
}
