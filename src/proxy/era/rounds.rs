//! The rounds of an `input_required` answer: judged, its roots answered by the broker, and
//! retried upstream until the server has what it needs (or the host must answer the rest).

use super::park::split;
use super::scan::{asks_roots, needs_input};
use super::{EraState, MAX_ROUNDS, error_for};
use crate::attaching::Call;
use crate::jsonrpc::id_key;
use crate::lines::LineSender;
use crate::proxy::host_channel::HostChannel;
use crate::proxy::link::ToServer;
use crate::proxy::names::{INPUT_REQUESTS, INPUT_RESPONSES, REQUEST_STATE, ROOTS_LIST};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// What answers a server's roots questions: the broker's session, asked with ids in the
/// proxy's own space (a server cannot use them) beside the server's own requests.
#[derive(Clone)]
pub(crate) struct Resolver {
    /// The proxy's own requests to the broker.
    pub(crate) calls: mpsc::Sender<Call>,
    /// Where the proxy's own ids come from.
    pub(crate) host: Arc<HostChannel>,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Resolver")
    }
}

impl Resolver {
    /// The broker's answer to `request`, a `roots/list` of this session.
    async fn answer(&self, mut request: Value) -> Option<Value> {
        let id = self.host.own_id();
        request["id"] = id.clone();
        let line = serde_json::to_vec(&request).ok()?;
        let (answer, answered) = oneshot::channel();
        self.calls.send(Call { line, id, answer }).await.ok()?;
        answered.await.ok()
    }
}

/// Takes over a server's `input_required` answer to the host's request. When the broker
/// has roots to give for a request the proxy kept, the rounds run on a task of their own (the
/// server's reader must never wait for the server) and `None` is returned: the host gets the
/// final result or an error from that task, never a `roots/list`. Anything else is settled
/// here and returned as the line for the host, which the reader sends as it sends any answer,
/// so a flood of them waits for the host. A request whose rounds are under way is claimed:
/// another `input_required` answer under its id is dropped, so one host request runs at most
/// one set of rounds (and parks at most one mixed answer) however often the server answers.
pub(crate) fn intercept(
    era: &Arc<EraState>,
    response: Value,
    to_host: LineSender,
    to_server: ToServer,
) -> Option<Vec<u8>> {
    let id = response.get("id").cloned().unwrap_or(Value::Null);
    if era.is_claimed(&id) {
        tracing::warn!(
            "dropped another input_required answer to a request whose rounds are under way"
        );
        return None;
    }
    let result = response.get("result").unwrap_or(&Value::Null);
    let brokered = matches!(judge(result), Asked::Roots(_) | Asked::Mixed(_));
    let original = if brokered { era.claim(&id) } else { None };
    let Some(original) = original else {
        let out = resolve_now(era, &id, response);
        return finish(era, &id, out);
    };
    let era = era.clone();
    tokio::spawn(async move {
        let out = resolve(&era, &id, response, original, &to_server).await;
        era.release(&id);
        if let Some(line) = finish(&era, &id, out) {
            let _ = to_host.send(line).await;
        }
    });
    None
}

/// An `input_required` answer the broker has nothing to give to (only sampling or
/// elicitation, something refused, or roots for a request the proxy did not keep).
fn resolve_now(era: &EraState, host_id: &Value, mut response: Value) -> Value {
    let result = response.get("result").unwrap_or(&Value::Null);
    match judge(result) {
        Asked::Host => {
            if let Some(obj) = response.as_object_mut() {
                obj.insert("id".into(), host_id.clone());
            }
            response
        }
        Asked::Refused(why) => error_for(host_id, why),
        Asked::Roots(_) | Asked::Mixed(_) if era.era() != Some(super::Era::Modern) => {
            error_for(
                host_id,
                "the server asked for roots with input_required in a session that is not 2026-07-28; refused rather than let the host answer roots".into(),
            )
        }
        Asked::Roots(_) | Asked::Mixed(_) => error_for(
            host_id,
            "the server asked for roots in answer to a request fsbroker did not keep for a retry; refused rather than let the host answer roots".into(),
        ),
    }
}

/// The one check before the host: whatever the rounds ended with (the final result, an
/// answer for the host to complete, what a split left), a roots question anywhere in it is
/// refused, never relayed. A request the host cancelled gets no answer.
fn finish(era: &EraState, id: &Value, mut out: Value) -> Option<Vec<u8>> {
    if asks_roots(&out) {
        out = roots_refused(id);
    }
    era.forget(id);
    if era.facts().cancelled.remove(&id_key(id)) {
        return None;
    }
    serde_json::to_vec(&out).ok()
}

/// What one `input_required` result asks for.
enum Asked {
    /// Only roots: the proxy answers and retries.
    Roots(Vec<(String, Value)>),
    /// Roots and sampling or elicitation: the proxy answers the roots, the host the rest.
    Mixed(Vec<(String, Value)>),
    /// Nothing the proxy answers (sampling, elicitation, or only `requestState`): for the
    /// host.
    Host,
    /// Something the proxy must refuse, and why.
    Refused(String),
}

fn judge(result: &Value) -> Asked {
    let Some(requests) = result.get(INPUT_REQUESTS) else {
        return Asked::Host;
    };
    let Some(requests) = requests.as_object() else {
        return Asked::Refused("inputRequests is not an object".into());
    };
    let mut roots = Vec::new();
    let mut other = 0;
    for (k, r) in requests {
        match r.get("method").and_then(Value::as_str) {
            Some(ROOTS_LIST) => {
                roots.push((k.clone(), r.get("params").cloned().unwrap_or(Value::Null)))
            }
            Some("sampling/createMessage" | "elicitation/create") => other += 1,
            Some(m) if m.starts_with("files/") => {
                return Asked::Refused(format!(
                    "the server asked for {m} as an input request, which protocol revision 2026-07-28 does not allow; files/* is brokered only in the legacy era"
                ));
            }
            Some(m) => {
                return Asked::Refused(format!(
                    "the server asked for {m:?} as an input request, which fsbroker does not relay"
                ));
            }
            None => return Asked::Refused("an input request has no method".into()),
        }
    }
    match (roots.is_empty(), other) {
        (true, _) => Asked::Host,
        (false, 0) => Asked::Roots(roots),
        (false, _) => Asked::Mixed(roots),
    }
}

/// The host's answer in place of a server answer that hides a roots question.
pub(crate) fn roots_refused(id: &Value) -> Value {
    error_for(
        id,
        "the server's answer carries a roots/list input request that fsbroker cannot take over; refused rather than let the host answer roots".into(),
    )
}

async fn resolve(
    era: &EraState,
    host_id: &Value,
    first: Value,
    original: (String, Value),
    to_server: &ToServer,
) -> Value {
    let Some(resolver) = era.resolver.get() else {
        return error_for(
            host_id,
            "the server asked for input that fsbroker cannot broker here".into(),
        );
    };
    let mut current = first;
    for _ in 0..MAX_ROUNDS {
        if !needs_input(&current) {
            if let Some(obj) = current.as_object_mut() {
                obj.insert("id".into(), host_id.clone());
            }
            return current;
        }
        let result = current.get("result").cloned().unwrap_or(Value::Null);
        let (roots, mixed) = match judge(&result) {
            Asked::Host => {
                if let Some(obj) = current.as_object_mut() {
                    obj.insert("id".into(), host_id.clone());
                }
                return current;
            }
            Asked::Refused(why) => return error_for(host_id, why),
            Asked::Roots(r) => (r, false),
            Asked::Mixed(r) => (r, true),
        };
        let (method, params) = original.clone();
        let responses = match broker_roots(resolver, roots.clone()).await {
            Ok(r) => r,
            Err(why) => return error_for(host_id, why),
        };
        if mixed {
            return split(era, host_id, current, &roots, responses);
        }
        tracing::info!(
            keys = responses.len(),
            "answered the server's roots input request from the broker"
        );
        let mut retry = if params.is_object() {
            params
        } else {
            json!({})
        };
        if let Some(obj) = retry.as_object_mut() {
            // The retry answers this round: what the host sent in an earlier one is not
            // carried on.
            obj.insert(INPUT_RESPONSES.into(), Value::Object(responses));
            match result.get(REQUEST_STATE) {
                Some(s) => {
                    obj.insert(REQUEST_STATE.into(), s.clone());
                }
                None => {
                    obj.remove(REQUEST_STATE);
                }
            }
        }
        let host_key = id_key(host_id);
        let asked = era
            .upstream
            .request(to_server, &method, retry, |id| {
                era.facts().retrying.insert(host_key.clone(), id.to_owned());
            })
            .await;
        era.facts().retrying.remove(&host_key);
        match asked {
            Some(next) => current = next,
            None => {
                return error_for(
                    host_id,
                    "the server did not answer the retry with the broker's roots".into(),
                );
            }
        }
    }
    error_for(
        host_id,
        format!("the server asked for input more than {MAX_ROUNDS} times"),
    )
}

/// The broker's answers to the server's `roots/list` input requests, by key.
async fn broker_roots(
    resolver: &Resolver,
    roots: Vec<(String, Value)>,
) -> Result<Map<String, Value>, String> {
    let mut responses = Map::new();
    for (k, p) in roots {
        let mut request = json!({"jsonrpc": "2.0", "id": 0, "method": ROOTS_LIST});
        if !p.is_null() {
            request["params"] = p;
        }
        let answer = resolver.answer(request).await;
        match answer.as_ref().and_then(|a| a.get("result")) {
            Some(r) => {
                responses.insert(k, r.clone());
            }
            None => {
                let why = answer
                    .as_ref()
                    .and_then(|a| a.pointer("/error/message"))
                    .and_then(Value::as_str)
                    .unwrap_or("no answer")
                    .to_owned();
                return Err(format!("the broker refused the server's roots/list: {why}"));
            }
        }
    }
    Ok(responses)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixed_and_files_requests_are_refused() {
        let roots = json!({"method": "roots/list"});
        let sample = json!({"method": "sampling/createMessage", "params": {}});
        assert!(matches!(
            judge(&json!({"inputRequests": {"r": roots}})),
            Asked::Roots(_)
        ));
        assert!(matches!(
            judge(&json!({"inputRequests": {"s": sample}})),
            Asked::Host
        ));
        assert!(matches!(
            judge(&json!({"inputRequests": {"r": roots, "s": sample}})),
            Asked::Mixed(_)
        ));
        assert!(matches!(
            judge(&json!({"inputRequests": {"f": {"method": "files/read"}}})),
            Asked::Refused(_)
        ));
    }
}
