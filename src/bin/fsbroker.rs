//! The `fsbroker` binary: everything it does is [`mcp_fsbroker::cli::main`], so that the
//! command line is built, documented and tested with the library. It needs the features
//! `cli` and `proxy` (both on by default).

fn main() -> std::process::ExitCode {
    mcp_fsbroker::cli::main()
}
