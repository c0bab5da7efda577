//! The daemon's consent questions to an attached proxy, and the proxy's answers: both ends
//! of one wire shape, read and written here only.
//!
//! A question is a JSON-RPC request of method `fsbroker/consent` whose id starts with
//! [`ASK_PREFIX`]; it shares the session's stream with the broker's answers, so the proxy
//! tells it apart by its method, and the daemon tells the answer apart by its id. The answer
//! is `{"approved": [{"asked", "granted", "access"}]}`, or `{"unasked": true}` when the proxy
//! has no host that can show the question (the daemon then asks its own provider).

use crate::access::Access;
use crate::consent::{ConsentAnswer, ConsentRequest, PathChoice, Purpose};
use crate::path::MountPath;
use serde::Deserialize;
use serde_json::{Value, json};

/// The method of a question.
pub(crate) const ASK_METHOD: &str = "fsbroker/consent";

/// How a question's id begins.
pub(crate) const ASK_PREFIX: &str = "fsbroker-ask-";

/// The method of a notification that withdraws a question: the broker no longer waits for
/// its answer (the server cancelled the request that asked, or its time limit passed), so
/// whoever shows it closes it.
pub(crate) const WITHDRAW_METHOD: &str = "fsbroker/consentWithdrawn";

/// The line that withdraws question `n`.
pub(crate) fn withdrawal(n: u64) -> Vec<u8> {
    let message = json!({
        "jsonrpc": "2.0",
        "method": WITHDRAW_METHOD,
        "params": {"id": format!("{ASK_PREFIX}{n}")},
    });
    serde_json::to_vec(&message).unwrap_or_default()
}

/// The id of the question a withdrawal line `v` names; `None` when `v` is not one.
pub(crate) fn read_withdrawal(v: &Value) -> Option<Value> {
    if v.get("method")?.as_str()? != WITHDRAW_METHOD {
        return None;
    }
    v.get("params")?.get("id").cloned()
}

/// The line that asks question `n`.
pub(crate) fn question(n: u64, r: &ConsentRequest) -> Vec<u8> {
    let strings = |ps: &[MountPath]| ps.iter().map(ToString::to_string).collect::<Vec<_>>();
    let message = json!({
        "jsonrpc": "2.0",
        "id": format!("{ASK_PREFIX}{n}"),
        "method": ASK_METHOD,
        "params": {
            "server": r.server_id,
            "message": r.message,
            "paths": strings(&r.paths),
            "folders": strings(&r.folders),
            "access": r.access.as_str(),
            "hostPaths": r.host_paths.iter().map(|p| p.to_string_lossy()).collect::<Vec<_>>(),
            "purpose": r.purpose.as_str(),
            "identity": r.identity,
            "askedAgain": r.asked_again,
        },
    });
    serde_json::to_vec(&message).unwrap_or_default()
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct QuestionParams {
    server: String,
    message: Option<String>,
    paths: Vec<String>,
    #[serde(default)]
    folders: Vec<String>,
    access: Access,
    #[serde(default)]
    host_paths: Vec<std::path::PathBuf>,
    #[serde(default)]
    purpose: Option<String>,
    #[serde(default)]
    identity: Option<crate::Identity>,
    #[serde(default)]
    asked_again: Vec<String>,
}

/// A question read from the daemon's line `v`: its id and what it asks; `None` when `v` is
/// not one.
pub(crate) fn read_question(v: &Value) -> Option<(Value, ConsentRequest)> {
    if v.get("method")?.as_str()? != ASK_METHOD {
        return None;
    }
    let id = v.get("id")?.clone();
    let p: QuestionParams = serde_json::from_value(v.get("params")?.clone()).ok()?;
    let mut request = ConsentRequest::new(p.server, mount_paths(&p.paths)?, p.access);
    request.message = p.message;
    request.folders = mount_paths(&p.folders)?;
    request.host_paths = p.host_paths;
    request.identity = p.identity;
    request.asked_again = p.asked_again;
    request.purpose = match p.purpose.as_deref() {
        None | Some("access") => Purpose::Access,
        Some("roots") => Purpose::SeeRoots,
        // A purpose this end does not know is not shown as something it is not.
        Some(_) => return None,
    };
    Some((id, request))
}

/// The line that answers question `id`: `None` when nobody could be asked.
pub(crate) fn answer(id: &Value, answer: Option<&ConsentAnswer>) -> Vec<u8> {
    let result = match answer {
        None => json!({"unasked": true}),
        Some(a) => json!({"approved": a.approved.iter().map(|c| json!({
            "asked": c.asked.to_string(),
            "granted": c.granted.to_string(),
            "access": c.access.as_str(),
        })).collect::<Vec<_>>()}),
    };
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "result": result})).unwrap_or_default()
}

/// Paths in mount form, all of them or none.
fn mount_paths(paths: &[String]) -> Option<Vec<MountPath>> {
    paths.iter().map(|p| p.parse().ok()).collect()
}

#[derive(Deserialize)]
struct Choice {
    asked: String,
    granted: String,
    access: Access,
}

#[derive(Deserialize)]
struct AnswerResult {
    #[serde(default)]
    unasked: bool,
    #[serde(default)]
    approved: Vec<Choice>,
}

/// Whether `line` may be an answer to a question (cheap, before parsing).
pub(crate) fn may_be_answer(line: &[u8]) -> bool {
    line.windows(ASK_PREFIX.len())
        .any(|w| w == ASK_PREFIX.as_bytes())
}

/// An answer read from an attached proxy's line: the question's number and what was
/// decided (`None` inside: nobody could be asked). Anything malformed is no answer; the
/// question then waits for its time limit, which denies.
pub(crate) fn read_answer(line: &[u8]) -> Option<(u64, Option<ConsentAnswer>)> {
    let v: Value = serde_json::from_slice(line).ok()?;
    if v.get("method").is_some() {
        return None;
    }
    let n = v
        .get("id")?
        .as_str()?
        .strip_prefix(ASK_PREFIX)?
        .parse()
        .ok()?;
    let result: AnswerResult = match v.get("result") {
        Some(r) => serde_json::from_value(r.clone()).ok()?,
        // An error answer decides nothing: the daemon asks its own provider.
        None => return Some((n, None)),
    };
    if result.unasked {
        return Some((n, None));
    }
    let choices = result
        .approved
        .into_iter()
        .map(|c| {
            Some(PathChoice::new(
                c.asked.parse().ok()?,
                c.granted.parse().ok()?,
                c.access,
            ))
        })
        .collect::<Option<Vec<_>>>()?;
    Some((n, Some(ConsentAnswer::new(choices))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_and_its_answer_survive_the_wire() {
        let docs: MountPath = "proj/docs".parse().unwrap();
        let lib: MountPath = "proj/docs/lib".parse().unwrap();
        let mut r = ConsentRequest::new("s", [docs.clone()], Access::Write);
        r.message = Some("why".into());
        r.folders = vec![docs.clone()];
        r.host_paths = vec!["/home/u/proj/docs".into()];
        r.purpose = Purpose::SeeRoots;
        r.identity = Some(crate::Identity::of_host("plugin:notes@1"));
        r.asked_again = vec!["the program at /a.py changed since you allowed it".into()];
        let line: Value = serde_json::from_slice(&question(7, &r)).unwrap();
        let (id, back) = read_question(&line).unwrap();
        assert_eq!(back, r);
        let a = ConsentAnswer::new([PathChoice::new(docs, lib, Access::Read)]);
        let said = answer(&id, Some(&a));
        assert!(may_be_answer(&said));
        assert_eq!(read_answer(&said), Some((7, Some(a))));
        assert_eq!(read_answer(&answer(&id, None)), Some((7, None)));
    }

    #[test]
    fn other_lines_are_not_answers_or_questions() {
        for line in [
            &br#"{"jsonrpc":"2.0","id":"fsbroker-ask-x","result":{}}"#[..],
            br#"{"jsonrpc":"2.0","id":"fsbroker-ask-1","method":"files/read","params":{}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{"approved":[]}}"#,
            b"not json",
        ] {
            assert_eq!(read_answer(line), None);
        }
        let read = json!({"jsonrpc":"2.0","id":"fsbroker-ask-1","method":"files/read"});
        assert!(read_question(&read).is_none());
    }
}
