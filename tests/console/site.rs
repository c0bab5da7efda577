//! A daemon with its console, in a place of its own: a writable root `root` holding
//! `docs/a.md`, `docs/lib/b.md` and `notes/n.md`, a directory `extra` beside it (not a root),
//! consent answered on the page (`consent.fallback = "ui"`), and servers attached to it.

use crate::place::{Daemon, Place};
use crate::sidecar::{Sidecar, WAIT};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Instant;

pub struct Site {
    pub place: Place,
    pub daemon: Daemon,
    /// The sign-in link the daemon printed.
    pub link: String,
    /// `127.0.0.1:PORT`.
    pub authority: String,
}

impl Site {
    /// A daemon on a fresh place, its console served.
    pub fn start() -> Site {
        Site::start_with("")
    }

    /// The same, with `extra` appended to its policy file.
    pub fn start_with(extra: &str) -> Site {
        Site::start_env(extra, &[])
    }

    /// The same, the daemon's environment with `env` set too.
    pub fn start_env(extra: &str, env: &[(&str, &str)]) -> Site {
        let place = Place::new();
        for (rel, text) in [
            ("docs/a.md", "alpha"),
            ("docs/lib/b.md", "beta"),
            ("notes/n.md", "note"),
        ] {
            let path = place.root.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        std::fs::create_dir_all(place.tmp.path().join("extra")).unwrap();
        std::fs::write(place.tmp.path().join("extra/e.txt"), "extra").unwrap();
        let policy = format!(
            "[[roots]]\npath = {:?}\nmount = \"root\"\naccess = \"write\"\n\n\
             [consent]\nfallback = \"ui\"\n\n{extra}",
            place.root.display().to_string()
        );
        std::fs::write(place.tmp.path().join("policy.toml"), policy).unwrap();
        Site::again_under(place, None, env)
    }

    /// A daemon started anew on `place` (the state file kept).
    pub fn again(place: Place) -> Site {
        Site::again_under(place, None, &[])
    }

    /// A fresh place's daemon with `extra` in its policy, its descriptors limited to
    /// `nofile` (soft and hard).
    pub fn start_limited(extra: &str, nofile: u32) -> Site {
        let place = Site::start_with(extra).stop();
        Site::again_under(place, Some(nofile), &[])
    }

    fn again_under(place: Place, nofile: Option<u32>, env: &[(&str, &str)]) -> Site {
        let policy = place.tmp.path().join("policy.toml");
        let mut cmd = place.command(&["daemon", "--foreground", "--ui", "--policy"]);
        cmd.arg(&policy);
        cmd.envs(env.iter().copied());
        if let Some(n) = nofile {
            // The same command, run by a shell that lowers the limit first.
            let mut limited = place.command(&[]);
            let args: Vec<std::ffi::OsString> = std::iter::once(cmd.get_program().to_owned())
                .chain(cmd.get_args().map(ToOwned::to_owned))
                .collect();
            limited = {
                let mut sh = std::process::Command::new("sh");
                sh.arg("-c")
                    .arg(format!("ulimit -n {n} && exec \"$@\""))
                    .arg("sh")
                    .args(args);
                for (k, v) in limited.get_envs() {
                    match v {
                        Some(v) => sh.env(k, v),
                        None => sh.env_remove(k),
                    };
                }
                sh
            };
            cmd = limited;
        }
        let daemon = place.start_command(cmd);
        let deadline = Instant::now() + WAIT;
        let link = loop {
            let err = daemon.stderr();
            if let Some(l) = err.lines().find_map(|l| l.split("console at ").nth(1)) {
                break l.split_whitespace().next().unwrap().to_owned();
            }
            assert!(Instant::now() < deadline, "no console link: {err}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let authority = link
            .strip_prefix("http://")
            .and_then(|r| r.split('/').next())
            .unwrap()
            .to_owned();
        Site {
            place,
            daemon,
            link,
            authority,
        }
    }

    /// Stops the daemon and hands its place back.
    pub fn stop(mut self) -> Place {
        self.daemon.terminate();
        self.place
    }

    /// The directory beside the root that is not one.
    pub fn extra(&self) -> PathBuf {
        self.place.tmp.path().join("extra")
    }

    /// The console's state file.
    pub fn state_file(&self) -> PathBuf {
        self.place.tmp.path().join("config/fsbroker/console.json")
    }

    /// A fresh sign-in link, from `fsbroker console`.
    pub fn fresh_link(&self) -> String {
        let ran = self.place.verb(&["console", "--no-open"]);
        assert!(ran.success(), "{}", ran.log());
        String::from_utf8_lossy(&ran.stdout).trim().to_owned()
    }

    /// Runs `fsbroker console` with a desktop whose opener only writes down its arguments:
    /// those arguments, and the link the command printed.
    pub fn console_through_opener(&self) -> (String, String) {
        let bin = self.place.tmp.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let seen = self.place.tmp.path().join("opener-args");
        let opener = bin.join("xdg-open");
        std::fs::write(
            &opener,
            format!("#!/bin/sh\nprintf '%s\\n' \"$@\" > {}\n", seen.display()),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
        let mut cmd = self.place.command(&["console"]);
        cmd.env("PATH", path).env("DISPLAY", ":0");
        let ran = crate::sidecar::run_within(cmd, WAIT);
        assert!(ran.success(), "{}", ran.log());
        let printed = String::from_utf8_lossy(&ran.stdout).trim().to_owned();
        (std::fs::read_to_string(&seen).unwrap(), printed)
    }

    /// A server attached as `id` (`serve --daemon`).
    pub fn server(&self, id: &str) -> Sidecar {
        let daemon = format!("--daemon={}", self.place.socket().display());
        let args: Vec<OsString> = ["serve", &daemon, "--server-id", id]
            .iter()
            .map(OsString::from)
            .collect();
        Sidecar::spawn(&args, None)
    }

    /// A sign-in with a fresh link: the cookie it sets and the key it hands the page.
    pub fn signin(&self) -> Auth {
        let link = self.fresh_link();
        let path = link.split_once(&self.authority).unwrap().1.to_owned();
        let answer = self.http("GET", &path, &[], "");
        Auth::of(&answer).unwrap_or_else(|| panic!("no sign-in: {answer:?}"))
    }

    /// One HTTP/1.1 request to the console, `Host` its own unless `headers` names one.
    pub fn http(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
        self.try_http(method, path, headers, body)
            .unwrap_or_else(|| panic!("{method} {path}: the connection was closed"))
    }

    /// The same, `None` when the console closed the connection without an answer.
    pub fn try_http(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Option<Answer> {
        let mut s = std::net::TcpStream::connect(&self.authority).ok()?;
        s.set_read_timeout(Some(WAIT)).unwrap();
        let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
        if !headers.iter().any(|(h, _)| h.eq_ignore_ascii_case("host")) {
            head.push_str(&format!("Host: {}\r\n", self.authority));
        }
        for (h, v) in headers {
            head.push_str(&format!("{h}: {v}\r\n"));
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        s.write_all(head.as_bytes()).ok()?;
        let mut raw = String::new();
        s.read_to_string(&mut raw).ok()?;
        let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
        let status = head.split(' ').nth(1)?.parse().ok()?;
        Some(Answer {
            status,
            head: head.to_owned(),
            body: body.to_owned(),
        })
    }

    /// `GET /api/state`, signed in as `auth`.
    /// The id of the newest offer once there is one other than `older`: offers are made
    /// from the broker's audit events on a task of the console's, after the refusal itself
    /// has been answered.
    pub fn offer_after(&self, auth: &Auth, older: Option<&str>) -> String {
        let deadline = std::time::Instant::now() + crate::sidecar::WAIT;
        loop {
            let offers = self.state(auth)["offers"].clone();
            let newest = offers
                .as_array()
                .and_then(|o| o.last())
                .and_then(|o| o["id"].as_str().map(str::to_owned));
            if let Some(id) = newest.filter(|id| Some(id.as_str()) != older) {
                return id;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no new offer: {offers}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    pub fn state(&self, auth: &Auth) -> Value {
        let a = self.http("GET", "/api/state", &auth.headers(), "");
        assert_eq!(a.status, 200, "{a:?}");
        serde_json::from_str(a.json_body()).unwrap()
    }

    /// The console's state once `done` holds of it, polled (a hang guard bounds the wait).
    pub fn state_when(&self, auth: &Auth, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = std::time::Instant::now() + crate::sidecar::WAIT;
        loop {
            let state = self.state(auth);
            if done(&state) {
                return state;
            }
            assert!(std::time::Instant::now() < deadline, "never came: {state}");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// A change sent as the page sends it: JSON, with the console's own `Origin`.
    pub fn post(&self, auth: &Auth, path: &str, body: &Value) -> Answer {
        let origin = format!("http://{}", self.authority);
        let mut headers = auth.headers();
        headers.push(("Origin", &origin));
        headers.push(("Content-Type", "application/json"));
        self.http("POST", path, &headers, &body.to_string())
    }
}

/// A sign-in: the cookie (`fsbroker_console=...`) and the key.
#[derive(Debug, Clone)]
pub struct Auth {
    pub cookie: String,
    pub key: String,
}

impl Auth {
    /// The sign-in an answer to `/login` made: its cookie, and the key in the page it sends
    /// the browser on to (`/#key=KEY`).
    pub fn of(answer: &Answer) -> Option<Auth> {
        if answer.status != 200 {
            return None;
        }
        let cookie = answer.header("set-cookie")?.split(';').next()?.to_owned();
        let key = answer.body.split("/#key=").nth(1)?;
        let key: String = key.chars().take_while(char::is_ascii_hexdigit).collect();
        Some(Auth { cookie, key })
    }

    /// The headers the page sends with every API request.
    pub fn headers(&self) -> Vec<(&str, &str)> {
        vec![("Cookie", &self.cookie), ("X-Fsbroker-Key", &self.key)]
    }
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (h, v) = l.split_once(':')?;
            h.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    /// The body, without chunked framing when the answer was chunked.
    pub fn json_body(&self) -> &str {
        let b = self.body.trim();
        match (b.find('{'), b.rfind('}')) {
            (Some(i), Some(j)) => &b[i..=j],
            _ => b,
        }
    }
}

/// Sends a `files/consent` request of id `id` for `paths` at `access`, without waiting for
/// its answer (the page gives it).
pub fn ask(s: &mut crate::sidecar::Sidecar, id: i64, paths: &[&str], access: &str) {
    s.send(&rpc(
        id,
        "files/consent",
        json!({"requestedPaths": paths, "access": access}),
    ));
}

/// Asserts that reading `path` is refused for want of consent.
pub fn refused(s: &mut crate::sidecar::Sidecar, path: &str) {
    let r = s.request("files/read", json!({"path": path}));
    assert_eq!(r["error"]["data"]["reason"], "no_consent", "{path}: {r}");
}

/// A request line, for `Sidecar::send`.
pub fn rpc(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}
