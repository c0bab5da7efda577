//! What every part of the console shares: the [`Console`] (the daemon's broker and board,
//! the user's edits, the sign-ins), and its address.

use super::board::Board;
use super::store::Store;
use crate::broker::Broker;
use crate::daemon::Attachments;
use crate::daemon::log::Ring;
use crate::daemon::secret::Secret;
use crate::locks::lock;
use crate::policy::Layer;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How long a sign-in link works.
pub(super) const TOKEN_LIFE: Duration = Duration::from_secs(300);

/// Most sign-ins kept; a new one past it ends the oldest.
const MAX_SIGNINS: usize = 32;

/// One sign-in: the cookie the browser keeps, and the key the page holds. A request to the
/// API needs both, of the same sign-in: a cookie is sent to every port of 127.0.0.1, so a
/// listener there may see it, but the key lives only in the page's own origin (it came in
/// the address's fragment, which no server is sent, and is kept in the tab's storage).
struct Signin {
    cookie: Secret,
    key: Secret,
}

/// Most sign-in links unused at once; a new one past it replaces the oldest.
pub(super) const MAX_TOKENS: usize = 16;

/// The console of one daemon: what it shows and changes, and its page once served.
pub(crate) struct Console {
    pub(super) broker: Broker,
    pub(super) attachments: Arc<Attachments>,
    pub(super) board: Arc<Board>,
    pub(super) log: Ring,
    pub(super) store: Option<Store>,
    /// The user's edits in force, as the state file holds them. Held across an edit's whole
    /// change (the broker's, then the file's), so that edits take turns.
    pub(super) layer: Mutex<Layer>,
    pub(super) socket: PathBuf,
    /// The sign-ins made with links, newest last.
    signins: Mutex<Vec<Signin>>,
    /// Sign-in links not used yet, with when each was made.
    pub(super) tokens: Mutex<Vec<(Secret, Instant)>>,
    /// The page's address, once served.
    pub(super) served: Mutex<Option<SocketAddr>>,
    /// The pages following the live feed: while there is one, no question is notified.
    pub(super) pages: Pages,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("served", &*lock(&self.served))
            .finish_non_exhaustive()
    }
}

/// What a console is made of.
pub(crate) struct Parts {
    /// The daemon's broker.
    pub broker: Broker,
    /// Its attached sessions.
    pub attachments: Arc<Attachments>,
    /// What waits for the user.
    pub board: Arc<Board>,
    /// The audit ring of `log`.
    pub log: Ring,
    /// The state file, when there is a configuration directory.
    pub store: Option<Store>,
    /// The edits the broker was built with, as loaded from the store.
    pub layer: Layer,
    /// The daemon's socket, shown on the page.
    pub socket: PathBuf,
}

impl Console {
    /// A console of `parts`, not served yet.
    pub(crate) fn new(parts: Parts) -> Arc<Console> {
        Arc::new(Console {
            broker: parts.broker,
            attachments: parts.attachments,
            board: parts.board,
            log: parts.log,
            store: parts.store,
            layer: Mutex::new(parts.layer),
            socket: parts.socket,
            signins: Mutex::new(Vec::new()),
            tokens: Mutex::new(Vec::new()),
            served: Mutex::new(None),
            pages: Pages::new(),
        })
    }

    /// A new sign-in, its cookie and its key, when `offered` is an unused, unexpired
    /// sign-in token (used up then).
    pub(super) fn redeem(&self, offered: &str) -> Option<(String, String)> {
        {
            let mut tokens = lock(&self.tokens);
            tokens.retain(|(_, made)| made.elapsed() < TOKEN_LIFE);
            let i = tokens.iter().position(|(t, _)| t.matches(offered))?;
            tokens.remove(i);
        }
        let signin = Signin {
            cookie: Secret::fresh().ok()?,
            key: Secret::fresh().ok()?,
        };
        let made = (signin.cookie.hex().to_owned(), signin.key.hex().to_owned());
        let mut signins = lock(&self.signins);
        if signins.len() >= MAX_SIGNINS {
            signins.remove(0);
        }
        signins.push(signin);
        Some(made)
    }

    /// Whether `cookie` is a sign-in's, and `key` (when given) that same sign-in's key.
    pub(super) fn signed_in(&self, cookies: &[&str], key: Option<&str>) -> bool {
        lock(&self.signins).iter().any(|s| {
            cookies.iter().any(|c| s.cookie.matches(c)) && key.is_none_or(|k| s.key.matches(k))
        })
    }
}

/// The console's address when none is given.
pub(super) fn default_addr() -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0)
}

/// `addr` as a URL's authority: `127.0.0.1:8080`, `[::1]:8080`.
pub(super) fn authority(addr: SocketAddr) -> String {
    match addr.ip() {
        IpAddr::V6(ip) => format!("[{ip}]:{}", addr.port()),
        IpAddr::V4(ip) => format!("{ip}:{}", addr.port()),
    }
}

/// The address `--ui ADDR` names: `127.0.0.1`, `127.0.0.1:8080`, `[::1]:8080`, `localhost`
/// or `localhost:8080`; anything but loopback is refused.
pub(crate) fn parse_addr(given: &str) -> Result<SocketAddr, String> {
    let given = given.trim();
    let with_port = |host: &str| -> Option<SocketAddr> {
        let (h, p) = host.rsplit_once(':')?;
        let ip = if h == "localhost" {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        } else {
            h.trim_start_matches('[')
                .trim_end_matches(']')
                .parse()
                .ok()?
        };
        Some(SocketAddr::new(ip, p.parse().ok()?))
    };
    let addr = if given == "localhost" {
        Some(default_addr())
    } else if let Ok(ip) = given.parse::<IpAddr>() {
        Some(SocketAddr::new(ip, 0))
    } else {
        with_port(given)
    };
    match addr {
        Some(a) if a.ip().is_loopback() => Ok(a),
        Some(a) => Err(format!(
            "the console serves loopback only (127.0.0.1 or ::1), not {}",
            a.ip()
        )),
        None => Err(format!(
            "{given:?} is not an address: give 127.0.0.1, 127.0.0.1:PORT or [::1]:PORT"
        )),
    }
}

impl Console {
    /// A sign-in link to the page where it is served, with a fresh one-time token (the
    /// oldest of [`MAX_TOKENS`] goes); an error when the page is not served yet.
    pub(super) fn sign_in_link(&self) -> Result<String, String> {
        let at = (*lock(&self.served)).ok_or("the console is not served")?;
        let token = Secret::fresh()?;
        let link = format!("http://{}/login?token={}", authority(at), token.hex());
        let mut tokens = lock(&self.tokens);
        tokens.retain(|(_, made)| made.elapsed() < TOKEN_LIFE);
        if tokens.len() >= MAX_TOKENS {
            tokens.remove(0);
        }
        tokens.push((token, std::time::Instant::now()));
        Ok(link)
    }
}

/// How many console pages follow the live feed now.
#[derive(Debug)]
pub(crate) struct Pages(watch::Sender<usize>);

/// One page following the feed, counted while it lives.
#[derive(Debug)]
pub(crate) struct PageOpen(watch::Sender<usize>);

impl Pages {
    /// The count, as it changes.
    pub(crate) fn watch(&self) -> watch::Receiver<usize> {
        self.0.subscribe()
    }

    /// No page yet.
    pub(crate) fn new() -> Pages {
        Pages(watch::Sender::new(0))
    }

    /// Counts one more page until the guard is dropped.
    pub(crate) fn open(&self) -> PageOpen {
        self.0.send_modify(|n| *n = n.saturating_add(1));
        PageOpen(self.0.clone())
    }
}

impl Drop for PageOpen {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_are_taken() {
        assert_eq!(parse_addr("127.0.0.1").unwrap(), default_addr());
        assert_eq!(parse_addr("localhost:8080").unwrap().port(), 8080);
        assert_eq!(
            parse_addr("[::1]:9000").unwrap(),
            "[::1]:9000".parse().unwrap()
        );
        for bad in [
            "0.0.0.0",
            "192.168.1.2:80",
            "[::]:80",
            "example.com:80",
            "",
            "1:2:3",
        ] {
            assert!(parse_addr(bad).is_err(), "{bad}");
        }
        assert_eq!(authority("[::1]:9".parse().unwrap()), "[::1]:9");
    }
}
