//! The user's console: a page on loopback where the user sees the daemon's sessions and their
//! activity, answers consent questions, manages the roots and takes access back
//! (`docs/console.md` is its contract).
//!
//! `shared.rs` is what every part shares (the [`Console`]: broker, board, edits, sign-ins);
//! `board.rs` holds what waits for the user (the `ui` consent provider's questions, and the
//! "allow this?" offers made of refusals); `store.rs` keeps the user's edits across restarts;
//! `http.rs` is the one gate every request passes (the address, the sign-in, the origin) and
//! the routes, `conns.rs` bounds the connections; `api.rs` reads and answers questions for the page, `offers.rs` shows
//! and answers the offers, `lifetime.rs` is how long what the user allows holds,
//! `edits.rs` changes roots, remembered grants and revocations, `changes.rs` lists and takes
//! back what servers changed (the recovery store), `events.rs` streams; `reply.rs` is how
//! they all answer; `notify/` shows a question as a desktop notification while no page is
//! open; `opener.rs` hands a sign-in link to the desktop's browser.
//! The page itself is `assets/`, embedded in the binary.

mod api;
mod board;
mod changes;
mod conns;
mod edits;
mod events;
mod http;
mod lifetime;
mod notify;
mod offers;
mod opener;
mod reply;
mod shared;
mod store;

pub(crate) use board::{Board, UiConsent};
pub(crate) use http::{link, serve};
pub(crate) use opener::{desktop, open_privately};
pub(crate) use shared::{Console, Parts, parse_addr};
pub(crate) use store::Store;
