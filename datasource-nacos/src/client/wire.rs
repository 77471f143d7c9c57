//! The Nacos v1 Open API's wire details: the fields that name a config, the listener's
//! `Listening-Configs` format, and error excerpts.

use crate::config::ConfigKey;

/// The separators of `Listening-Configs`: between the fields of one config, and after each.
pub(super) const FIELD: char = '\u{2}';
pub(super) const CONFIG: char = '\u{1}';

/// The fields that name a config (`dataId`, `group`, and `tenant` outside the default
/// namespace), then `extra`.
pub(super) fn config_fields<'a>(
    key: &'a ConfigKey,
    tenant: Option<&'a str>,
    extra: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    let mut fields = vec![
        ("dataId", key.data_id.as_str()),
        ("group", key.group.as_str()),
    ];
    if let Some(tenant) = tenant {
        fields.push(("tenant", tenant));
    }
    fields.extend_from_slice(extra);
    fields
}

/// The changed configs in a listener answer: URL-encoded `dataId%02group[%02tenant]%01`...
pub(super) fn parse_changed(body: &[u8]) -> Vec<ConfigKey> {
    let text = String::from_utf8_lossy(body);
    let decoded = percent_encoding::percent_decode_str(text.trim()).decode_utf8_lossy();
    decoded
        .split(CONFIG)
        .filter_map(|config| {
            let mut fields = config.split(FIELD);
            let data_id = fields.next().filter(|d| !d.is_empty())?;
            let group = fields.next()?;
            Some(ConfigKey::new(data_id, group))
        })
        .collect()
}

/// The start of a server's answer, for an error message.
pub(super) fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(200) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_owned(),
    }
}

/// What kind of transport failure `e` is, without its URL.
pub(super) fn transport_error(e: &reqwest::Error) -> &'static str {
    if e.is_timeout() {
        "no answer in time"
    } else if e.is_connect() {
        "cannot connect"
    } else if e.is_body() || e.is_decode() {
        "the connection broke while reading the answer"
    } else {
        "the request failed"
    }
}
