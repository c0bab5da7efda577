//! Who each face's server is, worked out on our side: the command a proxy starts, the process
//! that writes `serve`'s input, a remote server's origin. See [`crate::identity`].

use crate::attaching::Identified;
use crate::identity::{Digests, Launch, of_launch, of_process, stdin_peer};
use crate::locks::lock;
use std::ffi::OsString;
use std::sync::{Arc, Mutex};

/// The command the proxy starts as `command` (process `pid`, when it is ours; `pin`, the
/// program file the sandbox holds, when it holds one).
///
/// Its files are hashed at once, beside the start: the session attaches when the server
/// first speaks, and then only what a launcher installed meanwhile is left to read.
pub(super) fn of_command(
    command: &[String],
    pid: Option<u32>,
    pin: Option<(u64, u64)>,
) -> Identified {
    let launch = Launch {
        argv: command.iter().map(OsString::from).collect(),
        // Where the proxy is is where its child starts.
        cwd: std::env::current_dir().unwrap_or_default(),
        path_var: std::env::var_os("PATH"),
        pin,
    };
    let digests = Arc::new(Mutex::new(Digests::open_default()));
    let (early, launched) = (digests.clone(), launch.clone());
    // The lock is held while hashing: the identity, if asked for meanwhile, waits for it
    // rather than hashing the same files again.
    tokio::task::spawn_blocking(move || {
        of_launch(&launched, None, &mut lock(&early));
    });
    Identified::by(move || {
        let mut digests = lock(&digests);
        let identity = of_launch(&launch, pid, &mut digests);
        digests.save();
        Some(identity)
    })
}

/// The process on the other end of our standard input (`fsbroker serve`'s server); none
/// when it cannot be found.
pub(super) fn of_stdin_peer() -> Identified {
    Identified::by(|| {
        let pid = stdin_peer()?;
        let mut digests = Digests::open_default();
        let identity = of_process(pid, &mut digests);
        digests.save();
        Some(identity)
    })
}

/// A remote server at `url`: its origin, and over https the public key of its certificate,
/// waited for (up to the connect timeout, `wait`) from the first answer of the session
/// `outcome` follows. Over https an identity without the key would be another identity: none
/// is given then, and nothing is remembered for it.
#[cfg(feature = "proxy")]
pub(super) fn of_url(
    url: &url::Url,
    outcome: crate::proxy::remote::Outcome,
    wait: std::time::Duration,
) -> Identified {
    let origin = url.origin().ascii_serialization();
    let tls = url.scheme() == "https";
    let runtime = tokio::runtime::Handle::current();
    Identified::by(move || {
        let key = if tls {
            Some(runtime.block_on(outcome.server_key(wait))?)
        } else {
            None
        };
        Some(crate::Identity::of_origin(origin.clone(), key))
    })
}
