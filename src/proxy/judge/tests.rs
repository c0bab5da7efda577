//! The judge driven with byte strings: no tasks, no channels but the host's queue, no IO.

use super::{host, server};
use crate::lines::line_channel;
use crate::proxy::host_channel::HostChannel;
use crate::proxy::relay::Relay;
use serde_json::{Value, json};

fn session() -> (Relay, HostChannel) {
    let (tx, _rx) = line_channel(8, 1 << 20);
    (Relay::new(None), HostChannel::new(tx))
}

fn text(lines: &[Vec<u8>]) -> Vec<String> {
    lines
        .iter()
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect()
}

#[test]
fn host_batch_items_are_judged_like_host_lines() {
    let (state, host) = session();
    // A reserved id: the proxy's own, whatever its number.
    let ours = host.reserved_example();
    let other = r#"{"jsonrpc":"2.0","id":5,"result":{}}"#;
    let cases = [
        // An answer to the proxy: taken out.
        (
            format!(r#"[{other},{{"jsonrpc":"2.0","id":"{ours}","result":{{}}}}]"#),
            Some(format!("[{other}]")),
        ),
        // The same with its id doubled, either order, or a key doubled inside: dropped.
        (
            format!(r#"[{other},{{"jsonrpc":"2.0","id":"{ours}","result":{{}},"id":7}}]"#),
            Some(format!("[{other}]")),
        ),
        (
            format!(r#"[{{"jsonrpc":"2.0","id":7,"result":{{}},"id":"{ours}"}},{other}]"#),
            Some(format!("[{other}]")),
        ),
        (
            format!(r#"[{{"jsonrpc":"2.0","id":"{ours}","result":{{"a":1,"a":2}}}}]"#),
            None,
        ),
        // Nothing of the proxy's: relayed as written, even when ambiguous.
        (
            format!(r#"[{other}, {{"id":1,"id":2}}]"#),
            Some(format!(r#"[{other}, {{"id":1,"id":2}}]"#)),
        ),
        ("[1,".to_owned(), Some("[1,".to_owned())),
    ];
    for (batch, want) in cases {
        let routed = host::route(batch.clone().into_bytes(), &host, &state, &json!({}));
        assert_eq!(text(&routed.server).first().cloned(), want, "{batch}");
    }
}

/// Messages of the server, each with what becomes of it alone: to the host (`"host"`), to the
/// broker (`"broker"`), refused with a code, or dropped (`"drop"`).
fn server_cases(reserved: &str) -> Vec<(Value, &'static str)> {
    vec![
        (
            json!({"jsonrpc":"2.0","id":1,"method":"roots/list"}),
            "broker",
        ),
        (
            json!({"jsonrpc":"2.0","id":2,"method":"files/read","params":{"path":"a"}}),
            "-32601",
        ),
        (
            json!({"jsonrpc":"2.0","id":reserved,"method":"ping"}),
            "-32600",
        ),
        (
            json!({"jsonrpc":"2.0","id":3,"method":"sampling/createMessage"}),
            "host",
        ),
        (json!({"jsonrpc":"2.0","method":"files/read"}), "drop"),
        (
            json!({"jsonrpc":"2.0","method":"notifications/message"}),
            "host",
        ),
        (json!({"jsonrpc":"2.0","id":4,"result":{}}), "host"),
        (
            json!({"jsonrpc":"2.0","id":5,"method":"x","params":{"inputRequests":{"k":{"method":"roots/list"}}}}),
            "-32600",
        ),
        (
            json!({"jsonrpc":"2.0","method":"x","params":{"inputRequests":{"k":{"method":"roots/list"}}}}),
            "drop",
        ),
        (json!({"jsonrpc":"2.0"}), "-32600"),
        (json!(7), "-32600"),
    ]
}

/// What became of a server line: where its one message went.
fn server_outcome(routed: &server::Routed) -> String {
    if routed.lane.is_some() {
        return "broker".into();
    }
    if let Some(r) = routed.refusals.first() {
        return r["error"]["code"].to_string();
    }
    if !routed.host.is_empty() {
        return "host".into();
    }
    "drop".into()
}

#[test]
fn a_server_message_becomes_the_same_alone_and_in_a_batch() {
    let (state, host) = session();
    let reserved = host.reserved_example();
    for (message, want) in server_cases(&reserved) {
        let line = serde_json::to_vec(&message).unwrap_or_default();
        let alone = server::route(line.clone(), &host, &state);
        assert_eq!(server_outcome(&alone), want, "alone: {message}");
        // Beside an item that goes to the host, in a batch.
        let mut batch = b"[".to_vec();
        batch.extend_from_slice(&line);
        batch.extend_from_slice(br#",{"jsonrpc":"2.0","method":"notifications/message"}]"#);
        let mut routed = server::route(batch.clone(), &host, &state);
        assert_eq!(
            routed.lane.is_some(),
            want == "broker",
            "in a batch: {message}"
        );
        let code = routed
            .refusals
            .first()
            .map(|r| r["error"]["code"].to_string());
        let refused = want.starts_with('-');
        assert_eq!(
            code.as_deref(),
            refused.then_some(want),
            "in a batch: {message}"
        );
        // The other item always goes on to the host: the batch as written when this one
        // goes there too, else alone in a batch of its own.
        let companion = r#"[{"jsonrpc":"2.0","method":"notifications/message"}]"#;
        let host_lines = text(&routed.host);
        let want_host = if want == "host" {
            String::from_utf8_lossy(&batch).into_owned()
        } else {
            companion.to_owned()
        };
        assert_eq!(host_lines, vec![want_host], "in a batch: {message}");
        // The proxy's answers to a batch are one array.
        let answers = routed.refusal_lines();
        assert!(answers.iter().all(|l| l.starts_with(b"[")), "{message}");
    }
}

#[test]
fn a_server_batch_is_refused_whole_in_a_revision_without_batches() {
    let (state, host) = session();
    state.note_server_name(&serde_json::json!({"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","serverInfo":{"name":"s"}}}));
    let batch =
        br#"[{"jsonrpc":"2.0","id":1,"method":"roots/list"},{"jsonrpc":"2.0","id":2,"result":{}}]"#;
    let mut routed = server::route(batch.to_vec(), &host, &state);
    assert!(routed.lane.is_none());
    // The server's request is refused, one line each; the host's request answered in the
    // batch gets an error instead of the answer.
    let answers = text(&routed.refusal_lines());
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert!(answers[0].contains(r#""id":1"#) && answers[0].contains("-32600"));
    let host_lines = text(&routed.host);
    assert_eq!(host_lines.len(), 1, "{host_lines:?}");
    assert!(host_lines[0].contains(r#""id":2"#) && host_lines[0].contains("-32600"));
}

#[test]
fn a_batch_is_read_once_and_bounded() {
    let (state, host) = session();
    let item = r#"{"jsonrpc":"2.0","method":"notifications/message"}"#;
    let items = vec![item; crate::jsonrpc::MAX_BATCH + 1].join(",");
    let batch = format!("[{items}]").into_bytes();
    let mut routed = server::route(batch.clone(), &host, &state);
    assert!(routed.host.is_empty());
    let answers = text(&routed.refusal_lines());
    assert!(
        answers.len() == 1 && answers[0].contains("more than"),
        "{answers:?}"
    );
    // The host's direction refuses it too, rather than relay what it did not judge.
    let routed = host::route(batch, &host, &state, &json!({}));
    assert!(routed.server.is_empty());
    assert!(text(&routed.host)[0].contains("more than"));
}

#[test]
fn a_host_message_becomes_the_same_alone_and_in_a_batch() {
    let (state, host) = session();
    let ours = host.reserved_example();
    let cases = [
        // To the server as written.
        (
            json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}),
            "server",
        ),
        (
            json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
            "server",
        ),
        // Taken: an answer to the proxy's own question.
        (json!({"jsonrpc":"2.0","id":ours,"result":{}}), "drop"),
        // Dropped: the server's roots are the broker's.
        (
            json!({"jsonrpc":"2.0","method":"notifications/roots/list_changed"}),
            "drop",
        ),
        // Rewritten: roots the host answered itself are taken out.
        (
            json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"inputResponses":{"r":{"roots":[]},"e":{}}}}),
            "rewritten",
        ),
    ];
    for (message, want) in cases {
        let line = serde_json::to_vec(&message).unwrap_or_default();
        let outcome = |routed: &host::Routed, alone: &[u8]| -> &'static str {
            match routed.server.first() {
                None => "drop",
                Some(l) if l.as_slice() == alone => "server",
                Some(_) => "rewritten",
            }
        };
        let alone = host::route(line.clone(), &host, &state, &json!({}));
        assert_eq!(outcome(&alone, &line), want, "alone: {message}");
        let mut batch = b"[".to_vec();
        batch.extend_from_slice(&line);
        batch.push(b']');
        let in_batch = host::route(batch.clone(), &host, &state, &json!({}));
        assert_eq!(outcome(&in_batch, &batch), want, "in a batch: {message}");
    }
}

// What an adversarial review of the one judge found, one test each (all failed before their
// fix).

/// A session whose host sent `initialize` with id 0 and whose server agreed on `version`.
fn agreed(version: &str) -> (Relay, HostChannel) {
    let (state, host) = session();
    state.era.facts().init_id = Some(json!(0));
    let answer = json!({"jsonrpc":"2.0","id":0,"result":{"protocolVersion":version,"serverInfo":{"name":"s"}}});
    let routed = server::route(
        serde_json::to_vec(&answer).unwrap_or_default(),
        &host,
        &state,
    );
    assert_eq!(routed.host.len(), 1);
    (state, host)
}

#[test]
fn a_host_batch_the_proxy_cannot_cut_is_judged_whole() {
    let (state, host) = session();
    let ours = host.reserved_example();
    // A probe beside a value the proxy cannot read: refused, not relayed past the era rule.
    let probe = br#"[{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}},{"v":NaN}]"#;
    let routed = host::route(probe.to_vec(), &host, &state, &json!({}));
    assert!(routed.server.is_empty(), "{:?}", text(&routed.server));
    assert!(text(&routed.host)[0].contains("-32600"));
    // An answer to the proxy's question beside one: dropped, never the server's.
    let answer = format!(r#"[{{"jsonrpc":"2.0","id":"{ours}","result":{{}}}},{{"v":NaN}}]"#);
    let routed = host::route(answer.into_bytes(), &host, &state, &json!({}));
    assert!(routed.server.is_empty(), "{:?}", text(&routed.server));
}

#[test]
fn an_unreadable_host_answer_that_may_be_the_proxys_never_reaches_the_server() {
    let (state, host) = session();
    let ours = host.reserved_example();
    let answer = format!(
        r#"{{"jsonrpc":"2.0","id":"{ours}","result":{{"action":"accept","score":1e400}}}}"#
    );
    let routed = host::route(answer.into_bytes(), &host, &state, &json!({}));
    assert!(routed.server.is_empty(), "{:?}", text(&routed.server));
    // An unreadable message that is not the proxy's still goes on, for the server to judge.
    let other = br#"{"jsonrpc":"2.0","id":5,"result":{"score":1e400}}"#;
    let routed = host::route(other.to_vec(), &host, &state, &json!({}));
    assert_eq!(routed.server, vec![other.to_vec()]);
}

#[test]
fn the_answer_to_initialize_in_a_batch_refuses_the_batch() {
    let (state, host) = session();
    state.era.facts().init_id = Some(json!(0));
    let batch = br#"[{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18"}},{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage"}]"#;
    let mut routed = server::route(batch.to_vec(), &host, &state);
    // The host gets an error for its `initialize`, never a batch; the server's request is
    // refused.
    let host_lines = text(&routed.host);
    assert_eq!(host_lines.len(), 1, "{host_lines:?}");
    assert!(!host_lines[0].starts_with('[') && host_lines[0].contains("-32600"));
    let answers = text(&routed.refusal_lines());
    assert!(
        answers.iter().any(|a| a.contains(r#""id":"s1""#)),
        "{answers:?}"
    );
}

#[test]
fn the_answer_to_initialize_is_recognised_under_a_loosely_equal_id() {
    let (state, host) = session();
    state.era.facts().init_id = Some(json!(0));
    let answer = br#"{"jsonrpc":"2.0","id":"0","result":{"protocolVersion":"2025-06-18"}}"#;
    server::route(answer.to_vec(), &host, &state);
    assert_eq!(state.without_batches().as_deref(), Some("2025-06-18"));
}

#[test]
fn a_refused_host_batch_does_not_answer_a_brokered_request_to_the_server() {
    let (state, host) = agreed("2025-06-18");
    state.brokered.start(&json!("r1"));
    let batch = br#"[{"jsonrpc":"2.0","id":"r1","result":{"roots":[{"uri":"file:///home"}]}}]"#;
    let routed = host::route(batch.to_vec(), &host, &state, &json!({}));
    assert!(routed.server.is_empty(), "{:?}", text(&routed.server));
}

#[test]
fn a_cancellation_of_a_brokered_item_in_the_same_batch_is_not_the_hosts() {
    let (state, host) = agreed("2025-03-26");
    let batch = br#"[{"jsonrpc":"2.0","id":"b1","method":"roots/list"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"b1"}}]"#;
    let routed = server::route(batch.to_vec(), &host, &state);
    assert!(routed.lane.is_some());
    assert!(routed.host.is_empty(), "{:?}", text(&routed.host));
}

#[test]
fn a_host_batch_with_an_unreadable_probe_is_refused_whole() {
    let (state, host) = session();
    let batch = br#"[{"jsonrpc":"2.0","id":7,"method":"server/discover","method":"server/discover"},{"jsonrpc":"2.0","id":8,"method":"tools/list"}]"#;
    let routed = host::route(batch.to_vec(), &host, &state, &json!({}));
    assert!(routed.server.is_empty(), "{:?}", text(&routed.server));
}

#[test]
fn the_first_answer_after_the_handshake_says_once_whether_roots_were_asked() {
    let notices = |asks: bool| {
        let (state, host) = agreed("2025-06-18");
        let initialized = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        host::route(initialized.to_vec(), &host, &state, &json!({}));
        if asks {
            let roots = br#"{"jsonrpc":"2.0","id":"r","method":"roots/list"}"#;
            assert!(server::route(roots.to_vec(), &host, &state).lane.is_some());
        }
        [1, 2].map(|id| {
            let answer = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
            server::route(answer.into_bytes(), &host, &state).notices
        })
    };
    assert_eq!(notices(false), [vec![server::Notice::RootsUnasked], vec![]]);
    assert_eq!(notices(true), [vec![], vec![]]);
}
