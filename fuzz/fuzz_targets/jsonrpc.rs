//! Arbitrary bytes as one message line; see `mcp_fsbroker::fuzzing::jsonrpc`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_fsbroker::fuzzing::jsonrpc(data));
