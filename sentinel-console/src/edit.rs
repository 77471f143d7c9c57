//! Rule edits: a combined document from the page, validated, then written to the source's
//! store with compare-and-set. Nothing is ever applied to the engine directly: the data
//! source reads the store's change back, as every other instance does.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use axum::http::HeaderMap;
use sentinel_core::datasource::{
    CombinedJson, Converter, Encoding, Expected, ReadableDataSource, WritableDataSource, WriteError,
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
    /// Reads the stored text for the editor, if the application gave a reader.
    pub(crate) reader: Option<tokio::sync::Mutex<Box<dyn ReadableDataSource>>>,
    /// Whether the store keeps revisions: [`UNKNOWN`], [`PROBING`], [`KEEPS`] or [`NONE`].
    pub(crate) revisions: Arc<AtomicU8>,
}

/// Not known yet whether the store keeps revisions.
pub(crate) const UNKNOWN: u8 = 0;
/// A probe is asking the store.
pub(crate) const PROBING: u8 = 1;
/// The store answered a revision: compare-and-set works.
pub(crate) const KEEPS: u8 = 2;
/// The store holds rules but answers no revision (a file, a Nacos config): a save could not
/// compare-and-set, so the page does not offer the source.
pub(crate) const NONE: u8 = 3;

/// Why a source with a writer is not offered for editing.
pub(crate) const NO_REVISIONS: &str = "not editable here: its store keeps no revisions (a file, a Nacos config), so a save could not check that nobody changed the rules since they were loaded; edit the store itself";

impl Writer {
    /// Whether a save can compare-and-set, as far as known: `Some(false)` for a store that
    /// holds rules but answers no revision. Starts a probe of the store (on the current Tokio
    /// runtime) when `stored` says rules are stored and nothing is known yet.
    pub(crate) fn keeps_revisions(&self, stored: bool) -> Option<bool> {
        match self.revisions.load(Ordering::Acquire) {
            KEEPS => return Some(true),
            NONE => return Some(false),
            _ => {}
        }
        if stored
            && self
                .revisions
                .compare_exchange(UNKNOWN, PROBING, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    let (writer, flag) = (self.writer.clone(), self.revisions.clone());
                    runtime.spawn(async move {
                        let known = match writer.revision().await {
                            Ok(Some(_)) => KEEPS,
                            Ok(None) => NONE,
                            Err(_) => UNKNOWN,
                        };
                        flag.store(known, Ordering::Release);
                    });
                }
                Err(_) => self.revisions.store(UNKNOWN, Ordering::Release),
            }
        }
        None
    }

    /// The stored text and what the store calls its version, through the reader.
    pub(crate) async fn stored_text(&self) -> Option<Result<String, String>> {
        let reader = self.reader.as_ref()?;
        let mut reader = reader.lock().await;
        Some(match reader.read().await {
            Ok(payload) => Ok(payload
                .entries
                .iter()
                .map(|e| String::from_utf8_lossy(&e.value).into_owned())
                .collect::<Vec<_>>()
                .join("\n")),
            Err(e) => Err(e.to_string()),
        })
    }
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
    /// The rules this source contributes now, as the engine holds them (every default
    /// spelled out), as a combined document.
    pub document: serde_json::Value,
    /// The document as stored, if the console can read the store
    /// ([`ConsoleBuilder::stored_text`](crate::ConsoleBuilder::stored_text)): what the
    /// editor shows, so a save keeps the hand-written text.
    pub text: Option<String>,
}

/// `PUT api/sources/{name}/rules`: a new combined document and the revision it was based on.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct EditRequest {
    /// The store revision the edit started from (`None`: nothing was stored).
    pub expected_revision: Option<u64>,
    /// The new rules, a combined document `{"flow": [...], ...}` (ignored when `text` is
    /// given).
    #[serde(default)]
    pub document: serde_json::Value,
    /// The new rules as text, a combined document: validated, then stored as written (for
    /// a source read as a combined document; otherwise encoded from its rules).
    #[serde(default)]
    pub text: Option<String>,
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
    let bytes = match &request.text {
        Some(text) => text.as_bytes().to_vec(),
        None => match serde_json::to_vec(&request.document) {
            Ok(bytes) => bytes,
            Err(e) => {
                return EditOutcome::Failed {
                    message: format!("cannot encode the document: {e}"),
                }
            }
        },
    };
    let set = match CombinedJson::new().convert(&bytes) {
        Ok(set) => set,
        Err(e) => return invalid(&e.with_payload(&format!("edit of {source}"))),
    };
    let expected = Expected::Revision(request.expected_revision);
    let written = if request.text.is_some() && writer.encoding == Encoding::Combined {
        // Valid: stored as the operator wrote it, layout and key order kept.
        writer.writer.store(bytes, expected).await
    } else {
        writer
            .writer
            .write_as(&set, writer.encoding, expected)
            .await
    };
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
        Err(e @ WriteError::NoRevisions { .. }) => {
            writer.revisions.store(NONE, Ordering::Release);
            EditOutcome::Failed {
                message: format!("{e}: {NO_REVISIONS}"),
            }
        }
        Err(e) => EditOutcome::Failed {
            message: e.to_string(),
        },
    }
}
