//! The console (`fsbroker daemon --ui`, `fsbroker console`), through a real daemon, real
//! attached servers and a real browser (Debian's chromium, driven through chromedriver):
//! the gate every request passes, consent answered on the page (approve, narrow, deny,
//! remember), the live activity, revocation, "allow this?" after a refusal, roots added
//! on the page reaching a server, what servers changed put back (the Changes view), and a
//! question shown as a desktop notification while no page is open (a real notification
//! server, dunst, on a private X display and session bus).
//!
//! Set `FSBROKER_SCREENSHOTS=DIR` to keep a screenshot of each view in `DIR` (the README's
//! come from `docs/console/`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

#[allow(dead_code)]
#[path = "../common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../daemon/control.rs"]
mod control;
#[allow(dead_code)]
#[path = "../daemon/place.rs"]
mod place;
#[allow(dead_code)]
#[path = "../common/proxy_host.rs"]
mod proxy_host;
#[allow(dead_code)]
#[path = "../common/sidecar.rs"]
mod sidecar;

mod browser;
mod desktop;
mod shots;
mod site;

mod activity;
mod attention;
mod changes;
mod consent;
mod empty;
mod gate;
mod identity;
mod lifetimes;
mod live;
mod notify;
mod offers;
mod remember;
mod roots;
