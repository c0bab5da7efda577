//! Arbitrary bytes as one message line, and again as an item of a batch; see
//! `mcp_fsbroker::fuzzing::jsonrpc`. The oracle reads what the proxy would relay to a host
//! both first-key-wins and last-key-wins, so a key named twice cannot hide a brokered method.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_fsbroker::fuzzing::jsonrpc(data));
