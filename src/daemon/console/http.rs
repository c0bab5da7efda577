//! The console's HTTP face: the one gate every request passes, the sign-in, the embedded
//! page, and the routes of the API (`api.rs`) and the stream (`events.rs`).
//!
//! The gate, in order: the `Host` header must name the console's own address (a page on
//! another name that resolves here, DNS rebinding, is refused); everything but the sign-in
//! and the static files needs the sign-in cookie; a change must be a JSON `POST` whose
//! `Origin` is the console's own. Every answer forbids framing, sniffing, caching and
//! referrers, and its scripts may come only from the console itself.

use super::conns::{self, Conn};
use super::reply::refuse;
use super::shared::{Console, authority, default_addr};
use super::{api, changes, edits, events, offers};
use crate::locks::lock;
use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use std::net::SocketAddr;
use std::sync::Arc;

/// The name of the sign-in cookie.
const COOKIE: &str = "fsbroker_console";

/// What every response carries.
const CSP: &str = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// What the gate knows: the console, and the `Host` values that name it.
#[derive(Clone)]
struct Gate {
    console: Arc<Console>,
    hosts: Arc<[String]>,
}

/// A sign-in link to `console`'s page, with a fresh one-time token; the page is served
/// first on `addr` (loopback only; default `127.0.0.1` and a free port) if it is not yet.
/// Must run on a tokio runtime.
pub(crate) fn link(console: &Arc<Console>, addr: Option<SocketAddr>) -> Result<String, String> {
    serve(console, addr)?;
    console.sign_in_link()
}

/// Serves `console`'s page on `addr` (loopback only; default `127.0.0.1` and a free port)
/// unless it is served already; returns where it is served. Must run on a tokio runtime.
pub(crate) fn serve(
    console: &Arc<Console>,
    addr: Option<SocketAddr>,
) -> Result<SocketAddr, String> {
    let mut served = lock(&console.served);
    if let Some(at) = *served {
        return Ok(at);
    }
    let at = listen(console.clone(), addr.unwrap_or(default_addr()))?;
    *served = Some(at);
    super::notify::start(console, at);
    Ok(at)
}

/// Serves the console on `addr`, in a task of its own; returns the address bound.
fn listen(console: Arc<Console>, addr: SocketAddr) -> Result<SocketAddr, String> {
    let std_listener = std::net::TcpListener::bind(addr)
        .map_err(|e| format!("cannot serve the console on {addr}: {e}"))?;
    let at = std_listener
        .local_addr()
        .map_err(|e| format!("cannot serve the console on {addr}: {e}"))?;
    std_listener
        .set_nonblocking(true)
        .map_err(|e| format!("cannot serve the console on {addr}: {e}"))?;
    let listener = tokio::net::TcpListener::from_std(std_listener)
        .map_err(|e| format!("cannot serve the console on {addr}: {e}"))?;
    let hosts: Arc<[String]> = [authority(at), format!("localhost:{}", at.port())].into();
    let gate_state = Gate {
        console: console.clone(),
        hosts,
    };
    let app = Router::new()
        .route("/", get(index))
        .route("/login", get(login))
        .route("/console.css", get(css))
        .route("/console.js", get(js))
        .route("/changes.js", get(changes_js))
        .route(
            "/activity.js",
            get(|| async { asset(JS_TYPE, ACTIVITY_JS) }),
        )
        .route(
            "/attention.js",
            get(|| async { asset(JS_TYPE, ATTENTION_JS) }),
        )
        // The docs the page links to, as plain text: they came with this binary, so the
        // links work without a network and match the daemon that serves them.
        .route(
            "/docs/README.md",
            get(|| async { asset(TEXT_TYPE, README) }),
        )
        .route(
            "/docs/console.md",
            get(|| async { asset(TEXT_TYPE, CONSOLE_DOC) }),
        )
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
        .route("/api/state", get(api::state))
        .route("/api/events", get(events::stream))
        .route("/api/questions/{id}", post(api::answer))
        .route("/api/offers/dismiss", post(offers::dismiss))
        .route("/api/offers/{id}", post(offers::offer))
        .route("/api/revoke", post(edits::revoke))
        .route("/api/resume", post(edits::resume))
        .route("/api/changes", get(changes::list))
        .route("/api/restore", post(changes::restore))
        .route("/api/undo", post(changes::undo))
        .route("/api/remembered/forget", post(edits::forget))
        .route("/api/roots", post(edits::roots))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(gate_state, gate))
        .with_state(console);
    tokio::spawn(conns::accept(listener, app));
    tracing::info!(address = %at, "console served");
    Ok(at)
}

/// The gate every request passes before its route (see the module's comment).
async fn gate(State(web): State<Gate>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    // A request target in absolute form names its host too: it must be the same one.
    let target = request.uri().authority().map(|a| a.as_str());
    let own = host.is_some_and(|h| web.hosts.iter().any(|o| o == h))
        && target.is_none_or(|t| Some(t) == host);
    let mut answer = if !own {
        refuse(
            StatusCode::MISDIRECTED_REQUEST,
            "this console answers only at its own address",
        )
    } else if !open(request.uri().path()) && !signed_in(&web.console, &request) {
        if request.uri().path().starts_with("/api/") {
            refuse(
                StatusCode::UNAUTHORIZED,
                "signed out: run `fsbroker console` for a new link",
            )
        } else {
            page(StatusCode::UNAUTHORIZED, SIGNED_OUT)
        }
    } else if request.uri().path().starts_with("/api/")
        && !request
            .extensions()
            .get::<Arc<Conn>>()
            .is_some_and(|c| c.promote())
    {
        refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many signed-in connections; close a console tab",
        )
    } else if request.method() == Method::POST && !same_origin(&web.hosts, headers) {
        refuse(
            StatusCode::FORBIDDEN,
            "a change must come from the console's own page",
        )
    } else if request.method() == Method::POST && !json_body(headers) {
        refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "a change is sent as application/json",
        )
    } else {
        next.run(request).await
    };
    let h = answer.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    answer
}

/// The paths served without the cookie: the sign-in, and the page's static files (which
/// hold nothing of the user's).
fn open(path: &str) -> bool {
    matches!(
        path,
        "/login"
            | "/console.css"
            | "/console.js"
            | "/changes.js"
            | "/activity.js"
            | "/attention.js"
            | "/favicon.ico"
    )
}

/// Whether the request carries a sign-in's cookie, and for the API that sign-in's key too
/// (the header `X-Fsbroker-Key`; for the event stream, which a page cannot give headers,
/// the query's `key`).
fn signed_in(console: &Console, request: &Request) -> bool {
    let cookies: Vec<&str> = request
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .filter(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value)
        .collect();
    let path = request.uri().path();
    if !path.starts_with("/api/") {
        return console.signed_in(&cookies, None);
    }
    let from_header = request
        .headers()
        .get(KEY_HEADER)
        .and_then(|v| v.to_str().ok());
    let from_query = (path == "/api/events")
        .then(|| request.uri().query())
        .flatten()
        .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("key=")));
    match from_header.or(from_query) {
        Some(key) => console.signed_in(&cookies, Some(key)),
        None => false,
    }
}

/// The header that carries a sign-in's key.
const KEY_HEADER: &str = "x-fsbroker-key";

/// Whether `Origin` names the console itself.
fn same_origin(hosts: &[String], headers: &HeaderMap) -> bool {
    let origin = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok());
    origin.is_some_and(|o| {
        o.strip_prefix("http://")
            .is_some_and(|h| hosts.iter().any(|own| own == h))
    })
}

/// Whether the body is declared JSON (which a cross-site form cannot send without asking).
fn json_body(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        })
}

/// The sign-in link's query.
#[derive(Deserialize)]
struct Login {
    token: Option<String>,
}

/// `GET /login?token=T`: a valid token becomes the cookie, and the page follows.
async fn login(State(console): State<Arc<Console>>, Query(q): Query<Login>) -> Response {
    let Some((cookie, key)) = q.token.as_deref().and_then(|t| console.redeem(t)) else {
        tracing::warn!("console: refused a sign-in with a used, unknown or expired token");
        return page(StatusCode::FORBIDDEN, LINK_USED);
    };
    tracing::info!("console: signed in");
    let cookie = format!("{COOKIE}={cookie}; HttpOnly; SameSite=Strict; Path=/");
    // A page of the console's own that goes on to it, rather than a redirect: a link opened
    // from elsewhere (the private page `fsbroker console` hands the opener, a terminal)
    // starts a cross-site navigation, whose redirect would not carry a SameSite=Strict
    // cookie; the step from this page is same-site. The key goes in the fragment, which the
    // browser keeps and sends to no server.
    let html = format!(
        "<!doctype html><meta charset=utf-8><title>fsbroker console</title>\
         <meta http-equiv=refresh content=\"0;url=/#key={key}\">\
         <link rel=stylesheet href=/console.css><main class=gate><h1>Signing in</h1>\
         <p><a href=\"/#key={key}\">Open the console</a></p></main>"
    );
    let mut answer = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        html,
    )
        .into_response();
    if let Ok(c) = HeaderValue::from_str(&cookie) {
        answer.headers_mut().insert(header::SET_COOKIE, c);
    }
    answer
}

async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX)
}

async fn css() -> Response {
    asset("text/css; charset=utf-8", CSS)
}

async fn js() -> Response {
    asset("text/javascript; charset=utf-8", JS)
}

async fn changes_js() -> Response {
    asset("text/javascript; charset=utf-8", CHANGES_JS)
}

async fn not_found() -> Response {
    refuse(StatusCode::NOT_FOUND, "no such page")
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

/// A small page of its own, for a visitor without the cookie.
fn page(status: StatusCode, body: &'static str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}

const INDEX: &str = include_str!("assets/index.html");
const CSS: &str = include_str!("assets/console.css");
const JS: &str = include_str!("assets/console.js");
const CHANGES_JS: &str = include_str!("assets/changes.js");
const ACTIVITY_JS: &str = include_str!("assets/activity.js");
const ATTENTION_JS: &str = include_str!("assets/attention.js");
const README: &str = include_str!("../../../README.md");
const CONSOLE_DOC: &str = include_str!("../../../docs/console.md");
const JS_TYPE: &str = "text/javascript; charset=utf-8";
const TEXT_TYPE: &str = "text/plain; charset=utf-8";

const SIGNED_OUT: &str = "<!doctype html><meta charset=utf-8><title>fsbroker console</title>\
<link rel=stylesheet href=/console.css><main class=gate><h1>Signed out</h1>\
<p>Run <code>fsbroker console</code> in a terminal for a new sign-in link.</p></main>";

const LINK_USED: &str = "<!doctype html><meta charset=utf-8><title>fsbroker console</title>\
<link rel=stylesheet href=/console.css><main class=gate><h1>This link no longer works</h1>\
<p>A sign-in link works once, for five minutes. Run <code>fsbroker console</code> in a \
terminal for a new one.</p></main>";
