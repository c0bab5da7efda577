//! The daemon's control protocol: its types, shared with the attaching end
//! (`crate::attaching::protocol`), and the daemon's clients of it (`client.rs`, and a
//! blocking one for the command line's verbs, `blocking.rs`).

pub(crate) mod blocking;
mod client;

pub(crate) use crate::attaching::protocol::*;
pub(crate) use client::Client;
