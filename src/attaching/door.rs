//! The way to a broker's session door: a connection on which control lines and then a
//! session's JSON-RPC go. The user's daemon is reached through its socket, once the socket is
//! proven to be the user's own (`crate::daemon::proof`); a broker of a proxy's own is reached
//! over an in-memory line pair (`crate::daemon::in_process`), served by the same code as the
//! daemon's sessions. Nothing above this trait knows which it talks to.

use crate::consent::BoxFuture;
use std::path::Path;
use tokio::io::{AsyncRead, AsyncWrite};

/// The reading half of a connection to a broker.
pub(crate) type Reader = Box<dyn AsyncRead + Unpin + Send>;

/// The writing half of a connection to a broker.
pub(crate) type Writer = Box<dyn AsyncWrite + Unpin + Send>;

/// A fresh connection to a broker, before its first control line.
pub(crate) struct Opened {
    /// What the broker sends.
    pub(crate) reader: Reader,
    /// What it reads.
    pub(crate) writer: Writer,
    /// The key to prove in a first `hello` line, when the broker asks for one (the daemon).
    pub(crate) hello: Option<String>,
}

/// Where a broker's sessions are opened.
pub(crate) trait Door: Send + Sync {
    /// Opens a connection.
    fn open(&self) -> BoxFuture<'_, Result<Opened, String>>;

    /// The broker as messages name it ("the daemon on /run/...").
    fn name(&self) -> String;

    /// The socket the connection goes through, when it is one: a sandbox leaves it reachable
    /// to nobody but the proxy.
    fn socket(&self) -> Option<&Path>;
}
