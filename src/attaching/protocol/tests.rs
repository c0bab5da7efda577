use super::*;
use serde_json::json;

/// One request of every op, with every field it takes.
fn every_op() -> Vec<Request> {
    vec![
        Request::Status(Status {}),
        Request::Revoke(Revoke {
            server: Some("s".into()),
            path: Some("root/a".into()),
            all: false,
        }),
        Request::Resume(Resume { server: "s".into() }),
        Request::Describe(Describe { follow: true }),
        Request::Attach(AttachRequest {
            server: "s".into(),
            server_pid: Some(7),
            era: Some("2025-06-18".into()),
            sandbox: Some(json!({"abi": 5})),
            asks: true,
            identity: Some(Box::new(crate::Identity::of_host("plugin:notes@1"))),
        }),
        Request::Log(Log {
            server: Some("s".into()),
            follow: true,
        }),
        Request::Reload(Reload {}),
        Request::Console(Console {}),
        Request::History(History {
            server: Some("s".into()),
            since: Some(1),
        }),
        Request::Restore(Restore {
            id: "c1".into(),
            to: Some("root/b".into()),
        }),
        Request::Undo(Undo {
            server: "s".into(),
            since: Some(2),
        }),
    ]
}

#[test]
fn every_op_is_listed_and_reads_back_as_written() {
    let ops = every_op();
    let named: Vec<&str> = ops.iter().map(Request::op).collect();
    assert_eq!(
        named,
        Request::OPS,
        "one request of every op, in the listed order"
    );
    for request in ops {
        let line = request.to_line().unwrap_or_else(|e| panic!("{e}"));
        let read = Request::parse(&line).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            serde_json::to_value(&read).unwrap_or_else(|e| panic!("{e}")),
            serde_json::from_slice::<serde_json::Value>(&line).unwrap_or_else(|e| panic!("{e}")),
            "{}",
            String::from_utf8_lossy(&line)
        );
        assert_eq!(read.op(), request.op());
    }
}

#[test]
fn the_lines_clients_send_are_the_ones_they_sent_before() {
    let line = |r: Request| String::from_utf8(r.to_line().unwrap_or_default()).unwrap_or_default();
    assert_eq!(line(Request::Status(Status {})), r#"{"op":"status"}"#);
    assert_eq!(
        line(Request::Revoke(Revoke {
            all: true,
            ..Revoke::default()
        })),
        r#"{"op":"revoke","all":true}"#
    );
    assert_eq!(
        line(Request::Describe(Describe { follow: true })),
        r#"{"op":"describe","follow":true}"#
    );
    assert_eq!(line(Request::Log(Log::default())), r#"{"op":"log"}"#);
}

#[test]
fn every_op_refuses_a_field_it_does_not_know() {
    // The tag is read by the enum, and each op's fields by a struct that denies the others:
    // serde must hand the struct the line without its tag, or every line would be refused.
    for request in every_op() {
        let mut v = serde_json::to_value(&request).unwrap_or_else(|e| panic!("{e}"));
        v["bogus"] = json!(1);
        let line = v.to_string();
        let refused = Request::parse(line.as_bytes()).err().unwrap_or_default();
        assert!(
            refused.contains(&format!(" {} request: ", request.op())) && refused.contains("bogus"),
            "{line}: {refused}"
        );
    }
    // A field another op takes is no field of this one.
    for line in [
        r#"{"op":"status","server":"s"}"#,
        r#"{"op":"reload","all":true}"#,
        r#"{"op":"console","url":"x"}"#,
        r#"{"op":"resume","server":"s","all":true}"#,
    ] {
        assert!(Request::parse(line.as_bytes()).is_err(), "{line}");
    }
}

#[test]
fn an_unknown_op_is_told_every_op_and_a_malformed_line_what_is_wrong() {
    let refused = Request::parse(br#"{"op":"grant","path":"root"}"#)
        .err()
        .unwrap_or_default();
    assert_eq!(
        refused,
        "unknown op \"grant\": the ops are status, revoke, resume, describe, attach, log, \
         reload, console, history, restore and undo"
    );
    for op in Request::OPS {
        assert!(refused.contains(op), "{op} missing from {refused}");
    }
    for (line, says) in [
        (&b"not json"[..], "not a control request: "),
        (b"[]", "not a control request: "),
        (b"{}", "not a control request: missing field `op`"),
        (br#"{"op":5}"#, "not a control request: "),
        (
            br#"{"op":"attach"}"#,
            "not an attach request: missing field `server`",
        ),
        (
            br#"{"op":"undo"}"#,
            "not an undo request: missing field `server`",
        ),
        (
            br#"{"op":"restore"}"#,
            "not a restore request: missing field `id`",
        ),
        (
            br#"{"op":"history","since":"yesterday"}"#,
            "not a history request: ",
        ),
        (
            br#"{"op":"status","op":"revoke"}"#,
            "not a control request: duplicate field `op`",
        ),
        (
            br#"{"op":"revoke","server":"a","server":"b"}"#,
            "not a revoke request: duplicate field `server`",
        ),
    ] {
        let refused = Request::parse(line).err().unwrap_or_default();
        assert!(
            refused.starts_with(says),
            "{}: {refused}",
            String::from_utf8_lossy(line)
        );
    }
}

#[test]
fn absent_and_null_optional_fields_are_the_same() {
    let read = Request::parse(
        br#"{"op":"attach","server":"s","serverPid":null,"era":null,"sandbox":null,"asks":false}"#,
    );
    match read {
        Ok(Request::Attach(a)) => assert!(!a.sandboxed() && a.server == "s"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        Request::parse(br#"{"op":"describe"}"#),
        Ok(Request::Describe(Describe { follow: false }))
    ));
}
