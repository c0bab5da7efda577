//! Roots mixed with sampling or elicitation: the broker's answers wait, behind a single-use
//! handle, for the host's retry.

use super::EraState;
use super::error_for;
use crate::proxy::names::{INPUT_REQUESTS, INPUT_RESPONSES, REQUEST_STATE};
use serde_json::{Map, Value, json};
use std::collections::HashMap;

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
        .get_mut(INPUT_REQUESTS)
        .and_then(Value::as_object_mut)
    {
        for (k, _) in roots {
            requests.remove(k);
        }
    }
    let server_state = result.remove(REQUEST_STATE);
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
    result.insert(REQUEST_STATE.into(), Value::String(handle));
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
/// The bytes they may hold at once (the server's `requestState` is as large as it likes, up
/// to the line limit).
const MAX_PARKED_BYTES: usize = 64 << 20;

/// The parked answers by handle, with their age and size: when a new one does not fit, the
/// oldest go (a host that never retries must not hold the room for ever), and one larger
/// than all the room is refused.
#[derive(Debug, Default)]
pub(super) struct Shelf {
    items: HashMap<String, (u64, usize, Parked)>,
    bytes: usize,
    next: u64,
}

impl Shelf {
    fn take(&mut self, handle: &str) -> Option<Parked> {
        let (_, size, parked) = self.items.remove(handle)?;
        self.bytes -= size;
        Some(parked)
    }

    fn put(&mut self, handle: String, parked: Parked) -> bool {
        let size = parked.size();
        if size > MAX_PARKED_BYTES {
            return false;
        }
        while self.items.len() >= MAX_PARKED || self.bytes + size > MAX_PARKED_BYTES {
            let Some(oldest) = self
                .items
                .iter()
                .min_by_key(|(_, (age, _, _))| *age)
                .map(|(h, _)| h.clone())
            else {
                break;
            };
            tracing::warn!("dropped the oldest answer parked for the host's retry to make room");
            self.take(&oldest);
        }
        self.next += 1;
        self.bytes += size;
        self.items.insert(handle, (self.next, size, parked));
        true
    }
}

impl Parked {
    /// What it holds, in bytes of JSON.
    fn size(&self) -> usize {
        let state = self
            .server_state
            .as_ref()
            .map_or(0, |s| serde_json::to_vec(s).map_or(usize::MAX, |v| v.len()));
        let answers = serde_json::to_vec(&self.answers).map_or(usize::MAX, |v| v.len());
        state.saturating_add(answers)
    }
}

impl EraState {
    fn park(&self, parked: Parked) -> Option<String> {
        let mut random = [0u8; 16];
        getrandom::fill(&mut random).ok()?;
        let handle = format!("{HANDLE_PREFIX}{:032x}", u128::from_le_bytes(random));
        self.facts()
            .parked
            .put(handle.clone(), parked)
            .then_some(handle)
    }

    /// Puts back, in the host's retry (`message`), what a handle of ours stands for: the
    /// broker's roots answers beside the host's, and the server's `requestState`. A handle
    /// is taken once; an unknown or used one is an error (returned as the message to give).
    pub(super) fn redeem(&self, message: &mut Value) -> Result<(), String> {
        let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) else {
            return Ok(());
        };
        let Some(handle) = params
            .get(REQUEST_STATE)
            .and_then(Value::as_str)
            .filter(|s| s.starts_with(HANDLE_PREFIX))
            .map(str::to_owned)
        else {
            return Ok(());
        };
        let Some(parked) = self.facts().parked.take(&handle) else {
            return Err("requestState is unknown or was already used".into());
        };
        let slot = params.entry(INPUT_RESPONSES).or_insert_with(|| json!({}));
        if !slot.is_object() {
            *slot = json!({});
        }
        if let Some(slot) = slot.as_object_mut() {
            slot.extend(parked.answers);
        }
        match parked.server_state {
            Some(s) => {
                params.insert(REQUEST_STATE.into(), s);
            }
            None => {
                params.remove(REQUEST_STATE);
            }
        }
        Ok(())
    }
}
