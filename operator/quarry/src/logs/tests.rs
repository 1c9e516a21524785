//! The SSE parser and the line renderer of `quarry logs`.

use serde_json::json;

use super::*;

#[test]
fn sse_events_are_parsed_across_any_chunk_boundaries() {
    let body = b": keep-alive\n\nid: 17-0\nevent: phase\ndata: {\"a\":1}\n\nid: 17-1\r\nevent: search\r\ndata:{\"b\":2}\r\n\r\ndata: line one\ndata: line two\n\n";
    let expected = vec![
        SseMessage {
            id: Some("17-0".into()),
            event: Some("phase".into()),
            data: "{\"a\":1}".into(),
        },
        SseMessage {
            id: Some("17-1".into()),
            event: Some("search".into()),
            data: "{\"b\":2}".into(),
        },
        SseMessage {
            id: None,
            event: None,
            data: "line one\nline two".into(),
        },
    ];
    // Whole, and byte by byte: the same events.
    assert_eq!(SseParser::new().push(body), expected);
    let mut parser = SseParser::new();
    let mut got = Vec::new();
    for b in body.iter() {
        got.extend(parser.push(std::slice::from_ref(b)));
    }
    assert_eq!(got, expected);
}

#[test]
fn an_event_without_data_is_not_dispatched_and_an_incomplete_one_waits() {
    let mut parser = SseParser::new();
    assert!(parser.push(b"id: 1-0\nevent: x\n\n").is_empty());
    assert!(parser.push(b"id: 2-0\ndata: {}\n").is_empty());
    let done = parser.push(b"\n");
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].id.as_deref(), Some("2-0"));
}

#[test]
fn oversize_lines_are_dropped_without_losing_the_next_event() {
    let mut parser = SseParser::new();
    let mut body = b"data: ".to_vec();
    body.extend(std::iter::repeat_n(b'x', MAX_LINE_BYTES + 10));
    body.extend(b"\n\ndata: ok\n\n");
    let got = parser.push(&body);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].data, "ok");
}

#[test]
fn every_event_type_renders_as_one_readable_line() {
    let snapshot =
        json!({"phase": "Researching", "progress": "40%", "tokens": 1234, "costUSD": "0.001200"});
    let with = |mut v: serde_json::Value| {
        v.as_object_mut()
            .unwrap()
            .extend(snapshot.as_object().unwrap().clone());
        v["time"] = json!("2024-06-10T08:00:01.500Z");
        v
    };
    let cases = [
        (
            with(json!({"type": "phase", "from": "Planning", "to": "Researching"})),
            "08:00:01 phase      Planning -> Researching  [Researching 40% | 1234 tok | $0.001200]",
        ),
        (
            with(
                json!({"type": "agendaPlanned", "tasks": [{"id": 0, "query": "json"}, {"id": 1, "query": "pickle"}]}),
            ),
            "08:00:01 agenda     2 tasks: #0 json; #1 pickle  [Researching 40% | 1234 tok | $0.001200]",
        ),
        (
            with(
                json!({"type": "researcherFinished", "task": 1, "searches": 2, "pagesRead": 3, "inputTokens": 100, "outputTokens": 20}),
            ),
            "08:00:01 researcher #1 finished: 2 searches, 3 pages read, 120 tokens  [Researching 40% | 1234 tok | $0.001200]",
        ),
        (
            with(
                json!({"type": "evaluation", "decision": "delegate", "queries": ["marshal", "shelve"]}),
            ),
            "08:00:01 evaluator  another round: marshal; shelve  [Researching 40% | 1234 tok | $0.001200]",
        ),
        (
            json!({"type": "modelCall", "time": "2024-06-10T08:00:02.000Z", "task": 0, "purpose": "research", "model": "scripted", "tier": "primary", "outcome": "ok", "inputTokens": 1000, "outputTokens": 10, "costUSD": "0.001350", "durationMs": 201}),
            "08:00:02 model      #0 research scripted (primary) ok: 1000+10 tok $0.001350 201 ms",
        ),
        (
            json!({"type": "search", "time": "2024-06-10T08:00:03.000Z", "task": 2, "subject": "json decoder", "outcome": "ok", "cache": "miss", "durationMs": 51}),
            "08:00:03 search     #2 json decoder ok, cache miss, 51 ms",
        ),
        (
            json!({"type": "runFinished", "time": "2024-06-10T08:01:00.000Z", "phase": "Failed", "reason": "NoEvidence", "message": "nothing usable", "inputTokens": 500, "outputTokens": 50, "costUSD": "0.000900", "llmCalls": 4, "searches": 4, "pagesRead": 0, "progress": "40%", "tokens": 550}),
            "08:01:00 finished   Failed (NoEvidence): nothing usable; 550 tokens, $0.000900, 4 model calls, 4 searches, 0 pages read",
        ),
    ];
    for (event, line) in cases {
        assert_eq!(render(&event), line);
    }
    // Unknown types still print, with their JSON.
    let odd = json!({"type": "future", "time": "2024-06-10T08:00:00.000Z", "x": 1});
    assert!(render(&odd).starts_with("08:00:00 future     {"));
}

#[test]
fn json_output_is_the_event_object_with_its_id() {
    let line = format_event(
        OutputFormat::Json,
        Some("5-1"),
        r#"{"type":"phase","to":"Planning"}"#,
    );
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v, json!({"type": "phase", "to": "Planning", "id": "5-1"}));
    // Not JSON: passed through as is.
    assert_eq!(format_event(OutputFormat::Text, None, "plain"), "plain");
}

#[test]
fn problems_are_told_apart_by_who_answered() {
    let operator =
        br#"{"error":"NotFound","message":"ResearchRun \"x\" not found in namespace \"y\""}"#;
    assert!(
        matches!(classify(404, operator, "op"), OpenError::NotFound(m) if m.contains("not found in namespace"))
    );
    let api_server = br#"{"kind":"Status","message":"services \"quarry\" not found","code":404}"#;
    assert!(
        matches!(classify(404, api_server, "the Service"), OpenError::Refused(m) if m.contains("services \"quarry\" not found"))
    );
    assert!(matches!(
        classify(403, b"forbidden", "x"),
        OpenError::Refused(_)
    ));
    let busy = br#"{"error":"TooManyStreams","message":"64 event streams are open"}"#;
    assert!(matches!(classify(503, busy, "x"), OpenError::Retry(_)));
    assert!(matches!(
        classify(502, b"bad gateway", "x"),
        OpenError::Retry(_)
    ));
}

#[test]
fn the_resume_position_travels_in_the_query_too() {
    let path = "/api/v1/namespaces/ns/researchruns/r/events";
    assert_eq!(request_path(path, true, None), path);
    assert_eq!(
        request_path(path, false, None),
        format!("{path}?follow=false")
    );
    assert_eq!(
        request_path(path, false, Some("17-2")),
        format!("{path}?follow=false&after=17-2")
    );
    assert_eq!(
        request_path(path, true, Some("17-2")),
        format!("{path}?after=17-2")
    );
}

#[test]
fn the_event_stream_token_comes_from_the_kubeconfig_token_or_its_file() {
    let mut auth = kube::config::AuthInfo::default();
    assert_eq!(
        config_token(&auth),
        None,
        "client certificates carry no token"
    );
    let file = std::env::temp_dir().join(format!("quarry-token-{}", std::process::id()));
    std::fs::write(&file, "from-file\n").unwrap();
    auth.token_file = Some(file.display().to_string());
    assert_eq!(config_token(&auth).as_deref(), Some("from-file"));
    auth.token = Some("inline".to_string().into());
    assert_eq!(config_token(&auth).as_deref(), Some("inline"));
    std::fs::remove_file(&file).unwrap();
}
