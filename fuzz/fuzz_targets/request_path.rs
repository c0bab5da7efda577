//! Arbitrary bytes through the request-path parser; see `mcp_fsbroker::fuzzing::request_path`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_fsbroker::fuzzing::request_path(data));
