//! The source's two halves: one read (GET, noting the revision) and the watch from the next
//! revision, with the progress requests that notice a frozen server.

#[allow(clippy::wildcard_imports)]
use super::*;

/// What a wait on the open watch ended with.
enum Waited {
    /// A message on the stream (or its end, or an error).
    Message(Result<Option<WatchResponse>, etcd_client::Error>),
    /// A progress request went out.
    CheckSent,
    /// The progress request went unanswered (or could not be sent) in time.
    Silent,
}

/// Sleeps until `at`; never, for `None`.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl EtcdSource {
    pub(super) async fn read_once(&mut self) -> Result<RawPayload, SourceError> {
        if self.closed {
            return Err(SourceError::Closed);
        }
        // A read moves the position: the next watch starts after this read.
        self.watch = None;
        let client = self.client().await?;
        let mut kv = client
            .kv_client()
            .max_decoding_message_size(self.config.max_message_bytes());
        let key = self.target.name().to_owned();
        let timeout = self.config.request_timeout();
        let mut resp = match tokio::time::timeout(timeout, kv.get(key, self.get_options())).await {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => return Err(self.fail("get", e)),
            Err(_) => {
                self.client = None;
                return Err(timed_out(&format!("get {}", self.target.name()), timeout));
            }
        };
        let revision = resp
            .header()
            .map(|h| h.revision())
            .ok_or_else(|| SourceError::Backend {
                message: format!("get {}: response without a header", self.target.name()),
                source: None,
            })?;
        let mut entries = BTreeMap::new();
        // The response is owned: its keys and values move into the payload without a copy.
        for kv in resp.take_kvs() {
            if let Target::Key(k) = &self.target {
                if kv.key() != k.as_bytes() {
                    continue;
                }
            }
            let (key, value) = kv.into_key_value();
            let key = String::from_utf8(key)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
            entries.insert(key, value);
        }
        // Keep the position even when the value is over the cap, so the next watch continues
        // right after it and a fixed value is seen at once.
        self.entries = entries;
        self.revision = revision;
        self.check_size(&self.entries)?;
        tracing::debug!(
            source = %self.describe(),
            revision,
            keys = self.entries.len(),
            "etcd read"
        );
        Ok(self.payload())
    }

    pub(super) async fn watch_events(&mut self) -> Result<WatchEvent, SourceError> {
        // etcd refuses to create a watch with an expired token by cancelling it as "permission
        // denied". Authenticate again and re-open once before reporting it.
        let mut reauthenticated = false;
        loop {
            if self.closed {
                return Err(SourceError::Closed);
            }
            if self.watch.is_none() {
                if self.revision == 0 {
                    // No read yet, so no position to watch from: ask the driver to read.
                    return Ok(WatchEvent::Resync);
                }
                self.open_watch().await?;
            }
            let Some(stream) = self.watch.as_mut() else {
                continue;
            };
            let (interval, timeout) = self.config.health_check();
            let answer_by = self.check_sent.map(|sent| sent + timeout);
            let waited = tokio::select! {
                message = stream.message() => Waited::Message(message),
                () = tokio::time::sleep_until(self.check_at), if answer_by.is_none() => {
                    match tokio::time::timeout(timeout, stream.request_progress()).await {
                        Ok(Ok(())) => Waited::CheckSent,
                        Ok(Err(e)) => Waited::Message(Err(e)),
                        Err(_) => Waited::Silent,
                    }
                }
                () = sleep_until_some(answer_by) => Waited::Silent,
            };
            let message = match waited {
                Waited::Message(message) => message,
                Waited::CheckSent => {
                    self.check_sent = Some(Instant::now());
                    continue;
                }
                Waited::Silent => {
                    self.watch = None;
                    self.client = None;
                    self.endpoint = self.endpoint.wrapping_add(1);
                    return Err(SourceError::Connection {
                        message: format!(
                            "watch {}: no answer from etcd within {timeout:?} to a progress \
                             request (the watch check asks every {interval:?})",
                            self.target.name()
                        ),
                        source: None,
                    });
                }
            };
            // Any message shows the server answers.
            self.check_sent = None;
            self.check_at = Instant::now() + interval;
            match message {
                Ok(Some(resp)) => match self.apply(&resp) {
                    Ok(Some(event)) => return Ok(event),
                    Ok(None) => {}
                    Err(SourceError::PermissionDenied { .. } | SourceError::Auth { .. })
                        if !reauthenticated && self.config.has_credentials() =>
                    {
                        reauthenticated = true;
                    }
                    Err(e) => return Err(e),
                },
                Ok(None) => {
                    self.watch = None;
                    self.client = None;
                    return Err(SourceError::Connection {
                        message: format!("watch {}: etcd closed the stream", self.target.name()),
                        source: None,
                    });
                }
                Err(e) => {
                    self.watch = None;
                    let error = self.fail("watch", e);
                    // Whatever broke the stream, start over from a fresh connection.
                    self.client = None;
                    return Err(error);
                }
            }
        }
    }

    pub(super) async fn close_source(&mut self) {
        self.closed = true;
        self.watch = None;
        self.client = None;
        tracing::debug!(source = %self.describe(), "etcd source closed");
    }
}
