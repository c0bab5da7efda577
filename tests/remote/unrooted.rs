//! A remote server that never asks for its roots is named once, as a local one is, but with
//! what is true of a remote server: what it reads on its own machine is out of reach, and no
//! `--sandbox` could change that (the flag is for local commands only).

use crate::common::Fixture;
use crate::remote::{RemoteServer, connected};
use serde_json::json;

#[test]
fn a_remote_server_that_never_asks_for_roots_is_named_with_what_is_true_of_it() {
    let f = Fixture::new();
    let server = RemoteServer::start(&[]);
    let mut p = connected(&server, &f, &[]);
    for id in [1, 2] {
        p.send(&json!({"jsonrpc":"2.0","id":id,"method":"tools/list"}));
        let r = p.wait_id(&json!(id));
        assert!(r.get("result").is_some(), "{r}");
    }
    let (status, _) = p.finish();
    assert!(status.success(), "{status:?}: {}", p.stderr());
    let err = p.stderr();
    assert_eq!(
        err.matches("the remote server ended its handshake without asking for its roots")
            .count(),
        1,
        "{err}"
    );
    assert!(
        !err.contains("--sandbox"),
        "a remote server was told of --sandbox, which cannot apply to it: {err}"
    );
}
