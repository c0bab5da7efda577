//! `fsbroker daemon`: one broker for a user, controlled over a Unix socket (never TCP).
//! `run` (`front.rs`) starts one from a `DaemonConfig`; the command line maps its flags
//! onto the config.
//!
//! What guards the socket, in the order a connection meets it: the socket's directory is the
//! user's alone (0700, refused otherwise: `socket.rs`); the peer's uid, from `SO_PEERCRED`,
//! must be the daemon's own, root refused like anyone else; and the first line must prove the
//! peer holds the daemon's secret, kept in a 0600 file beside the socket (`secret.rs`), while
//! at most so many wait to (`greeting.rs`). Then each line is one control request of
//! `protocol/`, read once and answered in one `match` (`dispatch.rs`), from the broker
//! (`control.rs`), the audit ring of `log.rs`, the services of `services.rs` (`reload`,
//! `console`) and the recovery store (`recovery.rs`); `protocol/`'s client is the other end,
//! for the command line's verbs. A connection may instead become a server's session
//! (`attach.rs`, with the daemon's consent questions beside it: `questions.rs`);
//! `crate::attaching` is that connection's other end, in an attaching `serve` or `proxy`, and
//! `in_process.rs` serves the same sessions from a broker of a proxy's own over an in-memory
//! line pair, so that a proxy reaches every broker one way. `idle.rs` stops a daemon nobody
//! uses (`--idle-exit`); `background.rs` starts one in the background, and `autostart.rs`
//! starts one for attaching commands unless one answers.
//!
//! The daemon takes a lock beside the socket for its life, refuses to start when a daemon
//! answers on the socket, removes a socket nobody listens on, and removes its socket and key
//! when it stops.

// Both ends: the key, the socket's place, the proven connection.
pub(crate) mod proof;
mod secret;
mod socket;
// A library host's session.
mod session;
// The daemon itself and the command line's verbs.
#[cfg(feature = "cli")]
mod attach;
#[cfg(feature = "cli")]
pub(crate) mod autostart;
#[cfg(feature = "cli")]
pub(crate) mod background;
#[cfg(feature = "cli")]
pub(crate) mod console;
#[cfg(feature = "cli")]
mod control;
#[cfg(feature = "cli")]
mod dispatch;
#[cfg(feature = "cli")]
mod front;
#[cfg(feature = "cli")]
mod greeting;
#[cfg(feature = "cli")]
mod hush;
#[cfg(feature = "cli")]
mod idle;
#[cfg(feature = "cli")]
pub(crate) mod in_process;
#[cfg(feature = "cli")]
mod line;
#[cfg(feature = "cli")]
mod lineage;
#[cfg(feature = "cli")]
mod log;
#[cfg(feature = "cli")]
pub(crate) mod protocol;
#[cfg(feature = "cli")]
mod questions;
#[cfg(feature = "cli")]
mod recovery;
#[cfg(feature = "cli")]
mod server;
#[cfg(feature = "cli")]
mod services;
#[cfg(feature = "cli")]
mod usage;

#[cfg(feature = "cli")]
pub use front::{ConsoleAt, DaemonConfig, PolicySource, RunError, run};
#[cfg(feature = "cli")]
pub(crate) use questions::Attachments;
#[cfg(feature = "cli")]
pub(crate) use server::Listening;

pub use crate::attaching::places::default_socket;
pub use session::{DaemonError, DaemonSession};
#[cfg(feature = "cli")]
pub(crate) use socket::private_file;
