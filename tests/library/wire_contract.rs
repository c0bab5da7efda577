//! docs/protocol.md against the broker: the "Methods" section lists each method as
//! ``- **`method`** `{params}` → `{result}` ``, and what the broker really sends must be that.
//!
//! Every method documented there is driven through a real `Broker` in the situations that
//! show each key (a last page and one with more, a file and a directory, a write that commits
//! and a chunk that leaves its upload open), and each result's keys are compared with the
//! documented ones: a documented key that is not sent, or a key sent but not documented, fails.
//! Each documented param is checked to be read by that name: a value of a type no param has is
//! refused as `invalid params` naming it. A missing docs/protocol.md fails the test.

use crate::common::*;
use mcp_fsbroker::consent::{
    BoxFuture, ConsentAnswer, ConsentDecision, ConsentProvider, ConsentRequest, PathChoice,
};
use mcp_fsbroker::path::MountPath;
use mcp_fsbroker::{Broker, Policy};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One documented key of an object, with the documented keys of its value when that is an
/// object or a list of objects.
#[derive(Debug)]
struct Field {
    name: String,
    optional: bool,
    nested: Option<Vec<Field>>,
}

/// One method as docs/protocol.md documents it.
#[derive(Debug)]
struct Documented {
    params: Vec<Field>,
    result: Vec<Field>,
}

/// The methods of docs/protocol.md's "Methods" section, by name.
fn documented() -> BTreeMap<String, Documented> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/protocol.md");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("docs/protocol.md is the contract and must exist: {e}"));
    let section = text
        .split("\n## ")
        .find(|s| s.starts_with("Methods\n"))
        .expect("docs/protocol.md has a \"## Methods\" section");
    // A bullet starts with "- " at the start of a line and goes on over indented lines.
    let mut bullets: Vec<String> = Vec::new();
    for line in section.lines() {
        if let Some(rest) = line.strip_prefix("- ") {
            bullets.push(rest.to_owned());
        } else if let Some(b) = bullets.last_mut()
            && line.starts_with(' ')
            && !line.trim().is_empty()
        {
            b.push(' ');
            b.push_str(line.trim());
        }
    }
    let mut methods = BTreeMap::new();
    for b in bullets {
        let Some(name) = b
            .strip_prefix("**`")
            .and_then(|r| r.split_once("`**"))
            .map(|(n, _)| n.to_owned())
        else {
            continue;
        };
        let (before, after) = b
            .split_once('→')
            .unwrap_or_else(|| panic!("{name}: no `→` between params and result in {b:?}"));
        let first_object = |text: &str, what: &str| {
            let span = code_spans(text)
                .into_iter()
                .find(|s| s.starts_with('{'))
                .unwrap_or_else(|| panic!("{name}: no {what} object in {text:?}"));
            parse_object(&span).unwrap_or_else(|e| panic!("{name}: {what} `{span}`: {e}"))
        };
        let params = first_object(before.split_once("`**").map_or("", |(_, r)| r), "params");
        let result = first_object(after, "result");
        assert!(
            methods
                .insert(name.clone(), Documented { params, result })
                .is_none(),
            "{name} is documented twice"
        );
    }
    assert!(
        !methods.is_empty(),
        "no method found in the Methods section"
    );
    methods
}

/// The contents of the `code spans` of a line of Markdown.
fn code_spans(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(|s| s.trim().to_owned())
        .collect()
}

/// Parses `{a, b?, c: [{d, e}], f: "x" | "y"}`: keys, `?` for an optional key, and the keys
/// of a value that is an object or a list of objects. Other values are skipped.
fn parse_object(text: &str) -> Result<Vec<Field>, String> {
    let mut tokens = tokenize(text).into_iter().peekable();
    let fields = object(&mut tokens)?;
    match tokens.next() {
        None => Ok(fields),
        Some(t) => Err(format!("unexpected {t:?} after the object")),
    }
}

type Tokens = std::iter::Peekable<std::vec::IntoIter<String>>;

fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '{' | '}' | '[' | ']' | ',' | ':' | '?' => out.push(c.to_string()),
            '"' => {
                let mut s = String::from('"');
                for d in chars.by_ref() {
                    s.push(d);
                    if d == '"' {
                        break;
                    }
                }
                out.push(s);
            }
            c => {
                let mut s = c.to_string();
                while let Some(&d) = chars.peek() {
                    if d.is_whitespace() || "{}[],:?\"".contains(d) {
                        break;
                    }
                    s.push(d);
                    chars.next();
                }
                out.push(s);
            }
        }
    }
    out
}

fn expect(tokens: &mut Tokens, want: &str) -> Result<(), String> {
    match tokens.next() {
        Some(t) if t == want => Ok(()),
        other => Err(format!("expected {want:?}, found {other:?}")),
    }
}

fn object(tokens: &mut Tokens) -> Result<Vec<Field>, String> {
    expect(tokens, "{")?;
    let mut fields = Vec::new();
    if tokens.peek().is_some_and(|t| t == "}") {
        tokens.next();
        return Ok(fields);
    }
    loop {
        let name = match tokens.next() {
            Some(t) if t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => t,
            other => return Err(format!("expected a key, found {other:?}")),
        };
        let optional = tokens.peek().is_some_and(|t| t == "?");
        if optional {
            tokens.next();
        }
        let nested = if tokens.peek().is_some_and(|t| t == ":") {
            tokens.next();
            value(tokens)?
        } else {
            None
        };
        fields.push(Field {
            name,
            optional,
            nested,
        });
        match tokens.next().as_deref() {
            Some(",") => {}
            Some("}") => return Ok(fields),
            other => return Err(format!("expected `,` or `}}`, found {other:?}")),
        }
    }
}

/// A value: an object or a list of objects gives its keys; anything else is skipped up to the
/// `,` or `}` that ends it.
fn value(tokens: &mut Tokens) -> Result<Option<Vec<Field>>, String> {
    match tokens.peek().map(String::as_str) {
        Some("{") => return object(tokens).map(Some),
        Some("[") => {
            tokens.next();
            if tokens.peek().is_some_and(|t| t == "{") {
                let inner = object(tokens)?;
                expect(tokens, "]")?;
                return Ok(Some(inner));
            }
            skip_to_close(tokens, "]")?;
        }
        _ => {}
    }
    // The rest of a plain value, such as `"read" | "write"`.
    while let Some(t) = tokens.peek() {
        match t.as_str() {
            "," | "}" => break,
            "[" | "{" => {
                let close = if t == "[" { "]" } else { "}" };
                tokens.next();
                skip_to_close(tokens, close)?;
            }
            _ => {
                tokens.next();
            }
        }
    }
    Ok(None)
}

fn skip_to_close(tokens: &mut Tokens, close: &str) -> Result<(), String> {
    let mut depth = 1;
    for t in tokens.by_ref() {
        match t.as_str() {
            "[" | "{" => depth += 1,
            "]" | "}" => depth -= 1,
            _ => {}
        }
        if depth == 0 {
            return if t == close {
                Ok(())
            } else {
                Err(format!("expected {close:?}, found {t:?}"))
            };
        }
    }
    Err(format!("unclosed, expected {close:?}"))
}

/// Compares the keys of `samples` (objects the broker sent) with `shape`, adding what differs
/// to `problems`. `at` names the place for the message.
fn compare(shape: &[Field], samples: &[&Value], at: &str, problems: &mut Vec<String>) {
    if samples.is_empty() {
        problems.push(format!("{at}: no sample shows this object"));
        return;
    }
    for sample in samples {
        let Some(object) = sample.as_object() else {
            problems.push(format!("{at}: sent {sample}, not an object"));
            continue;
        };
        for key in object.keys() {
            if !shape.iter().any(|f| f.name == *key) {
                problems.push(format!("{at}: sends `{key}`, which is not documented"));
            }
        }
        for f in shape.iter().filter(|f| !f.optional) {
            if !object.contains_key(&f.name) {
                problems.push(format!("{at}: `{}` is documented but not sent", f.name));
            }
        }
    }
    for f in shape {
        let values: Vec<&Value> = samples.iter().filter_map(|s| s.get(&f.name)).collect();
        if f.optional && values.is_empty() {
            problems.push(format!(
                "{at}: `{}?` is documented but no result sends it",
                f.name
            ));
        }
        if let Some(nested) = &f.nested {
            let inner: Vec<&Value> = values
                .iter()
                .flat_map(|v| match v {
                    Value::Array(items) => items.iter().collect(),
                    other => vec![*other],
                })
                .collect();
            compare(nested, &inner, &format!("{at}.{}", f.name), problems);
        }
    }
}

/// A broker over a writable root holding a few files, with consent given to `t`.
async fn broker(f: &Fixture) -> Broker {
    f.file("a.txt", "hello");
    f.file("b.txt", "bee");
    f.dir("d");
    let b = f.broker_with(
        "write",
        "[limits]\nrequests_per_second = 100000\nburst = 100000\n",
    );
    consent_all(&b, "t").await;
    b
}

/// The results of every method the broker answers, in situations that show every key.
async fn samples(b: &Broker) -> BTreeMap<&'static str, Vec<Value>> {
    let steps: Vec<(&'static str, Value)> = vec![
        ("ping", json!({})),
        ("roots/list", json!({})),
        (
            "files/consent",
            json!({"requestedPaths": ["project/a.txt"]}),
        ),
        (
            "files/consent",
            json!({"requestedPaths": ["nosuchmount/x"], "access": "read"}),
        ),
        ("files/read", json!({"path": "project/a.txt"})),
        (
            "files/read",
            json!({"path": "project/a.txt", "encoding": "base64", "offset": 1}),
        ),
        ("files/list", json!({"path": "project", "limit": 1})),
        ("files/list", json!({"path": "project", "recursive": true})),
        ("files/stat", json!({"path": "project/a.txt"})),
        ("files/stat", json!({"path": "project/d"})),
        (
            "files/write",
            json!({"path": "project/w.txt", "content": "one shot"}),
        ),
        (
            "files/write",
            json!({"path": "project/u.txt", "content": "ab", "final": false}),
        ),
        (
            "files/write",
            json!({"path": "project/u.txt", "content": "c", "offset": 2}),
        ),
        (
            "files/create",
            json!({"path": "project/n/m", "type": "directory", "parents": true}),
        ),
        (
            "files/create",
            json!({"path": "project/n/f", "type": "file"}),
        ),
        (
            "files/rename",
            json!({"oldPath": "project/b.txt", "newPath": "project/c.txt"}),
        ),
        (
            "files/delete",
            json!({"path": "project/n", "recursive": true}),
        ),
        ("files/watch", json!({"path": "project/d"})),
    ];
    let mut out: BTreeMap<&'static str, Vec<Value>> = BTreeMap::new();
    for (method, params) in steps {
        let resp = call(b, "t", method, params).await;
        out.entry(method).or_default().push(ok(&resp).clone());
    }
    // The watch just made is the one to end.
    let id = out["files/watch"][0]["watchId"].clone();
    let resp = call(b, "t", "files/unwatch", json!({"watchId": id})).await;
    out.entry("files/unwatch")
        .or_default()
        .push(ok(&resp).clone());
    out
}

/// Narrows every requested path to `inner` inside it, read-only.
struct Narrow;

impl ConsentProvider for Narrow {
    fn decide<'a>(&'a self, _req: &'a ConsentRequest) -> BoxFuture<'a, ConsentDecision> {
        Box::pin(async { ConsentDecision::deny() })
    }

    fn decide_each<'a>(&'a self, req: &'a ConsentRequest) -> BoxFuture<'a, ConsentAnswer> {
        Box::pin(async move {
            req.paths
                .iter()
                .map(|p: &MountPath| {
                    let mut inner = p.clone();
                    inner.rel = inner.rel.join("inner");
                    PathChoice::new(p.clone(), inner, mcp_fsbroker::Access::Read)
                })
                .collect()
        })
    }
}

/// The result of a consent the user narrowed (`d` to `d/inner`), which sends
/// `narrowedPaths`: through a broker over `f`'s root whose provider narrows (see [`Narrow`]).
async fn narrowed_sample(f: &Fixture) -> Value {
    f.dir("d/inner");
    let policy = Policy::parse(&f.policy_text("write", ""), "test").expect("policy");
    let b = Broker::builder(policy)
        .consent_provider(Arc::new(Narrow))
        .build()
        .expect("broker")
        .0;
    let params = json!({"requestedPaths": ["project/d"]});
    let resp = call(&b, "t", "files/consent", params).await;
    ok(&resp).clone()
}

#[tokio::test]
async fn every_documented_result_key_is_sent_and_every_sent_key_is_documented() {
    let doc = documented();
    let f = Fixture::new();
    let b = broker(&f).await;
    let mut samples = samples(&b).await;
    let narrowed = narrowed_sample(&f).await;
    samples.entry("files/consent").or_default().push(narrowed);
    let mut problems = Vec::new();
    for name in doc.keys() {
        if !samples.contains_key(name.as_str()) {
            problems.push(format!(
                "{name} is documented but this test has no sample of it: add one"
            ));
        }
    }
    for (name, results) in &samples {
        let Some(d) = doc.get(*name) else {
            problems.push(format!("{name} answers but is not documented"));
            continue;
        };
        let results: Vec<&Value> = results.iter().collect();
        compare(&d.result, &results, name, &mut problems);
    }
    // Each element of a list is compared: one difference shows once.
    problems.sort();
    problems.dedup();
    assert!(
        problems.is_empty(),
        "docs/protocol.md and the broker differ:\n{}",
        problems.join("\n")
    );
}

#[tokio::test]
async fn every_documented_param_is_read_by_its_name() {
    let doc = documented();
    let f = Fixture::new();
    let b = broker(&f).await;
    let mut problems = Vec::new();
    for (name, d) in &doc {
        for p in &d.params {
            // No param takes an object: one is refused, naming the param, when it is read.
            let resp = call(&b, "t", name, json!({ &p.name: {"not": "a value"} })).await;
            let message = resp["error"]["message"].as_str().unwrap_or_default();
            let named = message.starts_with(&format!("invalid params: {}:", p.name));
            if resp["error"]["code"] != -32602 || !named {
                problems.push(format!(
                    "{name}: `{}` is not read by that name: {resp}",
                    p.name
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "docs/protocol.md documents params the broker does not read:\n{}",
        problems.join("\n")
    );
}
