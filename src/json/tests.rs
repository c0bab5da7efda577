use super::*;
use serde_json::json;

/// Strings that need escapes, at every position of a block, and long ones that do not.
fn tricky() -> Vec<String> {
    let long = "QUJD".repeat(1000);
    let mut tricky: Vec<String> = vec![
        String::new(),
        "plain".into(),
        long.clone(),
        format!("{long}\"{long}"),
        format!("{long}\\"),
        "\u{7f}\u{80}é漢字🎉 and \u{1f}".into(),
        "\n\r\t\u{0}\u{8}\u{c}".into(),
    ];
    for b in (0u8..0x20).chain([b'"', b'\\']) {
        for at in 0..9 {
            let mut v = vec![b'a'; 9];
            v[at] = b;
            tricky.push(String::from_utf8(v).unwrap());
        }
        let mut v = vec![b'a'; 130];
        v[127] = b;
        tricky.push(String::from_utf8(v).unwrap());
    }
    tricky
}

#[test]
fn encode_is_serde_json() {
    for s in tricky() {
        let v = json!({"id": 1, "result": {"content": s, "n": [1.5, -2, u64::MAX, null, true]}});
        assert_eq!(encode(&v), serde_json::to_vec(&v).unwrap(), "{s:?}");
    }
    let list = json!([{"a": {"b": [{"c": "d"}, [], {}]}}, "x\u{1}y", false, 0.1]);
    assert_eq!(encode(&list), serde_json::to_vec(&list).unwrap());
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Shape {
    text: String,
    none: Option<String>,
    some: Option<String>,
    small: u64,
    big: u64,
    yes: bool,
    no: bool,
    content: String,
    items: Vec<Inner>,
}

#[derive(Serialize)]
struct Inner {
    name: String,
    size: u64,
}

#[test]
fn an_object_written_by_hand_is_what_serde_writes() {
    use base64::Engine;
    for (i, s) in tricky().into_iter().enumerate() {
        let bytes: Vec<u8> = (0..i * 7).map(|k| (k * 31 + i) as u8).collect();
        let inner: Vec<Inner> = (0..i % 4)
            .map(|k| Inner {
                name: format!("{s}{k}"),
                size: k as u64 * 1000,
            })
            .collect();
        let typed = Shape {
            text: s.clone(),
            none: None,
            some: Some(s.clone()),
            small: 0,
            big: u64::MAX,
            yes: true,
            no: false,
            content: base64::engine::general_purpose::STANDARD.encode(&bytes),
            items: inner,
        };
        let mut o = Object::with_capacity(0);
        o.str("text", &s);
        o.opt_str("none", None);
        o.opt_str("some", Some(&s));
        o.u64("small", 0);
        o.u64("big", u64::MAX);
        o.bool("yes", true);
        o.bool("no", false);
        o.base64("content", &bytes);
        let mut items = o.items("items");
        for it in &typed.items {
            items.push(|e| {
                e.str("name", &it.name);
                e.u64("size", it.size);
            });
        }
        assert_eq!(items.len(), typed.items.len());
        let hand = items.close().finish();
        assert_eq!(
            hand.as_bytes(),
            serde_json::to_vec(&typed).unwrap().as_slice(),
            "{s:?}"
        );
        assert_eq!(hand, Json::of(&typed).unwrap());
        let back: Value = hand.decode().unwrap();
        assert_eq!(back["text"], json!(s));
        // Written after a head, the same value is the tail of the head's buffer.
        let head = format!("{{\"id\":{i},\"result\":").into_bytes();
        let mut o = Object::after(head.clone(), 0);
        o.str("text", &s);
        let after = o.finish();
        let mut alone = Object::with_capacity(0);
        alone.str("text", &s);
        assert_eq!(after.as_bytes(), alone.finish().as_bytes());
        assert_eq!(after.decode::<Value>().unwrap()["text"], json!(s));
        let other = after
            .clone()
            .into_line(b"{\"id\":\"x\",\"result\":")
            .unwrap_err();
        assert_eq!(other, after);
        let line = after.into_line(&head).unwrap();
        assert!(line.starts_with(&head));
        assert_eq!(&line[head.len()..], other.as_bytes());
    }
}

#[test]
fn numbers_are_written_in_full() {
    for n in [
        0,
        1,
        9,
        10,
        99,
        100,
        12345,
        u64::from(u32::MAX),
        u64::MAX - 1,
        u64::MAX,
    ] {
        let mut o = Object::with_capacity(0);
        o.u64("n", n);
        assert_eq!(o.finish().as_bytes(), format!("{{\"n\":{n}}}").as_bytes());
    }
}
