//! Arbitrary plans of broker operations on a tree with escaping links, a dangling link, a FIFO
//! and an outside canary; see `mcp_fsbroker::fuzzing::ops_plan`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_fsbroker::fuzzing::ops_plan(data));
