//! Roots mixed with sampling or elicitation: the broker's answers wait, behind a single-use
//! handle, for the host's retry.

use super::EraState;
use super::rounds::error_for;
use crate::locks::lock;
use serde_json::{Map, Value, json};

/// the server's own state; its retry gets them back (see [`EraState::redeem`]).
pub(super) fn split(
    era: &EraState,
    host_id: &Value,
    mut response: Value,
    roots: &[(String, Value)],
    answers: Map<String, Value>,
) -> Value {
    let Some(result) = response.get_mut("result").and_then(Value::as_object_mut) else {
        return error_for(host_id, "an input_required answer without a result".into());
    };
    if let Some(requests) = result
        .get_mut("inputRequests")
        .and_then(Value::as_object_mut)
    {
        for (k, _) in roots {
            requests.remove(k);
        }
    }
    let server_state = result.remove("requestState");
    let handle = match era.park(Parked {
        answers,
        server_state,
    }) {
        Some(h) => h,
        None => {
            return error_for(
                host_id,
                "too many input requests wait for the host; refused rather than let the host answer roots".into(),
            );
        }
    };
    result.insert("requestState".into(), Value::String(handle));
    if let Some(obj) = response.as_object_mut() {
        obj.insert("id".into(), host_id.clone());
    }
    tracing::info!(
        "answered the server's roots from the broker; the rest of its input requests go to the host"
    );
    response
}

/// What the proxy keeps while the host answers the rest of a mixed `input_required`.
#[derive(Debug)]
pub(super) struct Parked {
    answers: Map<String, Value>,
    server_state: Option<Value>,
}

/// The prefix of the proxy's `requestState` handles.
const HANDLE_PREFIX: &str = "fsbroker-state-";
/// Mixed results waiting for the host's retry at once.
const MAX_PARKED: usize = 256;

impl EraState {
    fn park(&self, parked: Parked) -> Option<String> {
        let mut random = [0u8; 16];
        getrandom::fill(&mut random).ok()?;
        let handle = format!("{HANDLE_PREFIX}{:032x}", u128::from_le_bytes(random));
        let mut all = lock(&self.parked);
        if all.len() >= MAX_PARKED {
            return None;
        }
        all.insert(handle.clone(), parked);
        Some(handle)
    }

    /// Puts back, in the host's retry (`message`), what a handle of ours stands for: the
    /// broker's roots answers beside the host's, and the server's `requestState`. A handle
    /// is taken once; an unknown or used one is an error (returned as the message to give).
    pub(super) fn redeem(&self, message: &mut Value) -> Result<(), String> {
        let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) else {
            return Ok(());
        };
        let Some(handle) = params
            .get("requestState")
            .and_then(Value::as_str)
            .filter(|s| s.starts_with(HANDLE_PREFIX))
            .map(str::to_owned)
        else {
            return Ok(());
        };
        let Some(parked) = lock(&self.parked).remove(&handle) else {
            return Err("requestState is unknown or was already used".into());
        };
        let slot = params.entry("inputResponses").or_insert_with(|| json!({}));
        if !slot.is_object() {
            *slot = json!({});
        }
        if let Some(slot) = slot.as_object_mut() {
            slot.extend(parked.answers);
        }
        match parked.server_state {
            Some(s) => {
                params.insert("requestState".into(), s);
            }
            None => {
                params.remove("requestState");
            }
        }
        Ok(())
    }
}
