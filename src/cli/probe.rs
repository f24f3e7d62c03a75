//! `probe --url`: one plain-HTTP GET that succeeds on a 2xx answer. The chart's `helm test` Pod
//! runs it from the controller's own image, which has no shell and no curl.

use crate::cli::status::{CliError, Http};

/// GETs `url` (`http://host:port/path`); `Ok` with what to print on a 2xx answer, else the
/// status and body, or why no answer came.
pub async fn run(url: &str) -> Result<String, CliError> {
    let uri: axum::http::Uri =
        url.parse()
            .map_err(|e: axum::http::uri::InvalidUri| CliError::BadUrl {
                url: url.to_string(),
                why: e.to_string(),
            })?;
    let scheme = uri.scheme_str().unwrap_or_default();
    let authority = uri.authority().map(|a| a.as_str()).unwrap_or_default();
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let http = Http::new(&format!("{scheme}://{authority}"))?;
    let resp = http.open(path, "text/plain").await?;
    Ok(format!("{url} answered HTTP {}", resp.status().as_u16()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::http::StatusCode;
    use axum::routing::get;

    #[tokio::test]
    async fn passes_on_2xx_and_fails_with_the_answer_otherwise() {
        let app = Router::new()
            .route("/readyz", get(|| async { "ok" }))
            .route(
                "/notready",
                get(|| async { (StatusCode::SERVICE_UNAVAILABLE, "caches not synced") }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });

        let ok = run(&format!("http://{addr}/readyz")).await.expect("2xx");
        assert!(ok.ends_with("answered HTTP 200"), "{ok}");
        let err = run(&format!("http://{addr}/notready"))
            .await
            .expect_err("503");
        assert!(
            matches!(&err, CliError::Api { code: 503, message, .. } if message == "caches not synced"),
            "{err}"
        );
        // Nothing listens on port 1: no answer is a failure too.
        let refused = run("http://127.0.0.1:1/readyz").await.expect_err("refused");
        assert!(matches!(refused, CliError::Request { .. }), "{refused}");
        assert!(matches!(
            run("https://127.0.0.1:1/readyz").await,
            Err(CliError::BadUrl { .. })
        ));
    }
}
