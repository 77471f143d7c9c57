//! A form POSTed as the Sentinel dashboard posts it to a command center (behind the `http`
//! feature): the transport tests of `sentinel-transport`, the examples and the Java golden
//! test send their `setRules` and the like this way.

/// POSTs `params` to `url` as the dashboard does: a UTF-8 form entity with
/// `Content-Type: application/x-www-form-urlencoded; charset=UTF-8`.
pub async fn post_form(
    client: &reqwest::Client,
    url: &str,
    params: &[(&str, &str)],
) -> reqwest::Result<reqwest::Response> {
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(params)
        .finish();
    client
        .post(url)
        .header(
            "Content-Type",
            "application/x-www-form-urlencoded; charset=UTF-8",
        )
        .body(body)
        .send()
        .await
}
