//! Who each face's server is, worked out on our side: the command a proxy starts, the process
//! that writes `serve`'s input, a remote server's origin. See [`crate::identity`].

use crate::attaching::Identified;
use crate::identity::{Digests, Launch, of_launch, of_process, stdin_peer};
use crate::locks::lock;
use std::ffi::OsString;
use std::sync::Mutex;

/// What is known of the command the proxy is about to start, read before it starts.
pub(super) struct Starting {
    launch: Launch,
    before: crate::Identity,
    digests: Digests,
}

/// Reads the command `command` before it starts: its program, what it runs, the files its
/// arguments name. Call it before the server is started, and give what it returns to
/// [`of_command`] after.
///
/// Read before, because what is read after comes from files the server's own code, once it
/// runs, could have written back to what the user allowed (a script that restores the
/// allowed text over itself as it starts).
pub(super) async fn before_start(command: &[String]) -> Starting {
    let launch = Launch {
        argv: command.iter().map(OsString::from).collect(),
        // Where the proxy is is where its child starts.
        cwd: std::env::current_dir().unwrap_or_default(),
        path_var: std::env::var_os("PATH"),
        pin: None,
    };
    let read = launch.clone();
    let done = tokio::task::spawn_blocking(move || {
        let mut digests = Digests::open_default();
        let before = of_launch(&read, None, &mut digests);
        (before, digests)
    })
    .await;
    // Work that failed reads as a program of nothing, which matches no decision.
    let (before, digests) =
        done.unwrap_or_else(|_| (crate::Identity::blank().sealed(), Digests::open_default()));
    Starting {
        launch,
        before,
        digests,
    }
}

/// The identity of the command `starting` read before it started, now running as process
/// `pid` (when it is ours), its program the file `pin` (device and inode) when the sandbox
/// holds one. What compares is what was read before the start; after it, only what a
/// launcher installed (shown, never compared) and where the server was launched from are
/// added. A program the sandbox holds that is not the file read before has no digest.
pub(super) fn of_command(
    starting: Starting,
    pid: Option<u32>,
    pin: Option<(u64, u64)>,
) -> Identified {
    let Starting {
        mut launch,
        before,
        digests,
    } = starting;
    launch.pin = pin;
    let digests = Mutex::new(digests);
    Identified::by(move || {
        let mut digests = lock(&digests);
        let after = of_launch(&launch, pid, &mut digests);
        digests.save();
        let digest = |i: &crate::Identity| i.program.as_ref().map(|p| p.digest.clone());
        let swapped = digest(&before) != digest(&after);
        let mut identity = before.clone();
        identity.installed = after.installed;
        identity.launched_by = after.launched_by;
        if swapped && let Some(p) = identity.program.as_mut() {
            // Swapped between the reading and the start (or not the file the sandbox holds):
            // nothing of it is vouched for.
            p.digest.clear();
        }
        Some(identity.sealed())
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
