//! Tests of error classification: HTTP statuses and error bodies in each provider's shape,
//! `retry-after` headers, errors inside streams and whole JSON replies, and the redaction
//! of keys and URLs in messages.

use super::*;

fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn check(status: u16, pairs: &[(&str, &str)], body: &str, category: ErrorCategory) -> LlmError {
    let now = jiff::Timestamp::from_second(1_700_000_000).expect("a valid fixed timestamp");
    let err = classify_status_at(status, &headers(pairs), body, now);
    assert_eq!(err.category, category, "{status} {body}: {err}");
    assert_eq!(err.status, Some(status));
    err
}

#[test]
fn auth_errors_advise_checking_the_key_and_hide_it() {
    let body = r#"{"error":{"message":"Incorrect API key provided: sk-abc1****************wxyz. See docs.","type":"invalid_request_error","code":"invalid_api_key"}}"#;
    let err = check(401, &[], body, ErrorCategory::Auth);
    assert!(err.message.contains("check that the API key"), "{err}");
    assert!(!err.message.contains("abc1"), "{err}");
    check(403, &[], r#"{"error":"forbidden"}"#, ErrorCategory::Auth);
}

#[test]
fn rate_limits_honour_retry_after_in_all_forms() {
    let err = check(
        429,
        &[("retry-after-ms", "1500")],
        "",
        ErrorCategory::RateLimit,
    );
    assert_eq!(err.retry_after, Some(Duration::from_millis(1500)));
    let err = check(429, &[("Retry-After", "7")], "", ErrorCategory::RateLimit);
    assert_eq!(err.retry_after, Some(Duration::from_secs(7)));
    // 1_700_000_000 is Tue, 14 Nov 2023 22:13:20 GMT.
    let err = check(
        429,
        &[("retry-after", "Tue, 14 Nov 2023 22:13:50 GMT")],
        "",
        ErrorCategory::RateLimit,
    );
    assert_eq!(err.retry_after, Some(Duration::from_secs(30)));
    let err = check(
        429,
        &[("retry-after", "soon")],
        "",
        ErrorCategory::RateLimit,
    );
    assert_eq!(err.retry_after, None);
    let both = [("retry-after", "9"), ("retry-after-ms", "250")];
    let err = check(429, &both, "", ErrorCategory::RateLimit);
    assert_eq!(err.retry_after, Some(Duration::from_millis(250)));
}

#[test]
fn huge_retry_after_values_are_capped_instead_of_panicking() {
    let day = Some(Duration::from_secs(24 * 60 * 60));
    for value in ["99999999999999999999", "1e25", "inf", "86401"] {
        let err = check(429, &[("retry-after", value)], "", ErrorCategory::RateLimit);
        assert_eq!(err.retry_after, day, "{value}");
    }
    let err = check(
        429,
        &[("retry-after-ms", "1e25")],
        "",
        ErrorCategory::RateLimit,
    );
    assert_eq!(err.retry_after, day);
    let err = check(429, &[("retry-after", "-5")], "", ErrorCategory::RateLimit);
    assert_eq!(err.retry_after, None);
    // An unusable retry-after-ms leaves the decision to retry-after.
    let pair = [("retry-after-ms", "NaN"), ("retry-after", "2")];
    let err = check(429, &pair, "", ErrorCategory::RateLimit);
    assert_eq!(err.retry_after, Some(Duration::from_secs(2)));
    let far = [("retry-after", "Fri, 01 Jan 2100 00:00:00 GMT")];
    let err = check(429, &far, "", ErrorCategory::RateLimit);
    assert_eq!(err.retry_after, day);
}

#[test]
fn retry_after_reads_the_obsolete_http_date_forms() {
    // 1_700_000_000 is Tue, 14 Nov 2023 22:13:20 GMT.
    let wait = |value: &str| {
        check(429, &[("retry-after", value)], "", ErrorCategory::RateLimit).retry_after
    };
    assert_eq!(
        wait("Tuesday, 14-Nov-23 22:13:50 GMT"),
        Some(Duration::from_secs(30))
    );
    assert_eq!(
        wait("Tue Nov 14 22:14:20 2023"),
        Some(Duration::from_secs(60))
    );
    // A space-padded day; the date is past, so there is nothing to wait for.
    assert_eq!(wait("Thu Nov  2 08:00:00 2023"), Some(Duration::ZERO));
    assert_eq!(wait("next tuesday"), None);
}

#[test]
fn anthropic_context_limit_wording_is_an_overflow() {
    let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"input length and `max_tokens` exceed context limit: 199759 + 8192 > 200000, decrease input length or `max_tokens` and try again"}}"#;
    let err = check(400, &[], body, ErrorCategory::ContextOverflow);
    assert!(err.message.contains("199759 + 8192 > 200000"), "{err}");
}

#[test]
fn a_model_the_server_cannot_load_is_not_retried() {
    let body =
        r#"{"error":"model requires more system memory (12.3 GiB) than is available (8.0 GiB)"}"#;
    let err = check(500, &[], body, ErrorCategory::InvalidRequest);
    assert!(!err.is_retryable());
    assert!(err.message.contains("requires more system memory"), "{err}");
    let err = classify_stream_error("", "llama runner: failed to load model");
    assert_eq!(err.category, ErrorCategory::InvalidRequest, "{err}");
    assert!(err.message.contains("failed to load model"), "{err}");
}

#[test]
fn whole_json_replies_with_an_error_classify_by_their_code() {
    let category = |body: &str| {
        let value: Value = serde_json::from_str(body).expect("test JSON");
        classify_json_reply(&value).map(|err| err.category)
    };
    assert_eq!(
        category(r#"{"error":{"code":"context_length_exceeded","message":"too long"}}"#),
        Some(ErrorCategory::ContextOverflow)
    );
    assert_eq!(
        category(r#"{"error":{"code":429,"message":"slow down"}}"#),
        Some(ErrorCategory::RateLimit)
    );
    assert_eq!(
        category(r#"{"type":"error","error":{"type":"overloaded_error","message":"busy"}}"#),
        Some(ErrorCategory::Overloaded)
    );
    assert_eq!(
        category(r#"{"object":"error","message":"bad","type":"BadRequestError","code":400}"#),
        Some(ErrorCategory::InvalidRequest)
    );
    assert_eq!(category(r#"{"id":"x","choices":[],"error":null}"#), None);
}

#[test]
fn displayed_urls_carry_no_credentials_or_query() {
    let check = |url: &str, expected: &str| assert_eq!(display_url(url), expected, "{url}");
    check(
        "https://user:secret@example.com:8443/v1/messages?key=abc#x",
        "https://example.com:8443/v1/messages",
    );
    check(
        "http://127.0.0.1:11434/api/chat",
        "http://127.0.0.1:11434/api/chat",
    );
    // Not parseable (a bad port), still cut by hand.
    check("http://me:pw@host:99999/v1?token=t", "http://host:99999/v1");
}

#[test]
fn overload_and_server_failures() {
    check(529, &[], "", ErrorCategory::Overloaded);
    check(503, &[], "", ErrorCategory::Overloaded);
    let body = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let err = check(500, &[], body, ErrorCategory::Overloaded);
    assert!(err.message.contains("Overloaded"));
    for status in [500, 502, 504] {
        check(status, &[], "upstream failed", ErrorCategory::Server);
    }
    check(408, &[], "", ErrorCategory::Timeout);
}

#[test]
fn prompt_too_long_is_a_context_overflow() {
    check(413, &[], "", ErrorCategory::ContextOverflow);
    let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
    let err = check(400, &[], anthropic, ErrorCategory::ContextOverflow);
    assert!(err.message.contains("210000 tokens"), "{err}");
    let openai = r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
    check(400, &[], openai, ErrorCategory::ContextOverflow);
    check(
        400,
        &[],
        r#"{"error":"too many tokens"}"#,
        ErrorCategory::ContextOverflow,
    );
}

#[test]
fn other_client_errors_are_invalid_requests() {
    let err = check(
        404,
        &[],
        r#"{"error":"model 'llama9' not found"}"#,
        ErrorCategory::InvalidRequest,
    );
    assert!(err.message.contains("model name may be wrong"), "{err}");
    assert!(err.message.contains("llama9"), "{err}");
    check(422, &[], "{}", ErrorCategory::InvalidRequest);
    let quota = r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#;
    check(429, &[], quota, ErrorCategory::InvalidRequest);
}

#[test]
fn html_bodies_are_not_quoted() {
    let err = check(
        502,
        &[],
        "<html><body>Bad gateway</body></html>",
        ErrorCategory::Server,
    );
    assert!(err.message.contains("HTML page"), "{err}");
}

#[test]
fn error_body_shapes() {
    let parse = ErrorBody::parse;
    assert_eq!(
        parse(r#"{"type":"error","error":{"type":"not_found_error","message":"gone"}}"#),
        ErrorBody {
            kind: Some("not_found_error".into()),
            message: Some("gone".into())
        }
    );
    assert_eq!(
        parse(
            r#"{"error":{"message":"bad","type":"invalid_request_error","code":"invalid_function_parameters"}}"#
        ),
        ErrorBody {
            kind: Some("invalid_function_parameters".into()),
            message: Some("bad".into())
        }
    );
    assert_eq!(
        parse(r#"{"error":"the model failed"}"#),
        ErrorBody {
            kind: None,
            message: Some("the model failed".into())
        }
    );
    assert_eq!(
        parse(r#"{"object":"error","message":"nope","type":"BadRequestError","code":400}"#),
        ErrorBody {
            kind: Some("BadRequestError".into()),
            message: Some("nope".into())
        }
    );
    assert_eq!(parse(""), ErrorBody::default());
}

#[test]
fn stream_errors_classify_by_type() {
    let check = |kind: &str, category: ErrorCategory| {
        assert_eq!(
            classify_stream_error(kind, "m").category,
            category,
            "{kind}"
        );
    };
    check("overloaded_error", ErrorCategory::Overloaded);
    check("rate_limit_error", ErrorCategory::RateLimit);
    check("api_error", ErrorCategory::Server);
    check("authentication_error", ErrorCategory::Auth);
    check("invalid_request_error", ErrorCategory::InvalidRequest);
    check("something_new", ErrorCategory::Server);
}

#[test]
fn excerpts_cut_on_char_boundaries() {
    assert_eq!(excerpt("héllo", 2), "hé…");
    assert_eq!(excerpt("hi", 5), "hi");
}
