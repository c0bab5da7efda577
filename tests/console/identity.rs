//! Who is asking: what the user decides is bound to the program, not to the name a server
//! gives. Real servers (the scripted Python server, copied to places of its own) behind real
//! `fsbroker proxy --daemon` processes, answered on the console's own API.

use crate::proxy_host;
use crate::sidecar::Sidecar;
use crate::site::{Auth, Site};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A copy of the scripted server at `dir/server.py` under the site's temporary place.
fn script(site: &Site, dir: &str) -> PathBuf {
    let d = site.place.tmp.path().join(dir);
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join("server.py");
    std::fs::copy(proxy_host::script(), &p).unwrap();
    p
}

/// `fsbroker proxy --daemon -- INTERPRETER SCRIPT`, its server calling itself `name`, in a
/// session of its own (no terminal), initialized by a host without elicitation: the daemon's
/// console is asked.
fn proxied(site: &Site, interpreter: &Path, script: &Path, name: &str) -> Sidecar {
    let daemon = format!("--daemon={}", site.place.socket().display());
    let inner = site.place.command(&["proxy", &daemon, "--"]);
    let mut cmd = Command::new("setsid");
    cmd.arg("-w")
        .arg(inner.get_program())
        .args(inner.get_args())
        .arg(interpreter)
        .arg(script)
        .env("SERVER_NAME", name);
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let mut s = Sidecar::start(cmd);
    proxy_host::initialize(&mut s, "2025-06-18", json!({}));
    s
}

fn python() -> PathBuf {
    PathBuf::from("/usr/bin/python3")
}

/// Asks for `root/docs` through the server's `ask` tool (call `id`) and waits for the
/// question on the console: the question.
fn asks(site: &Site, auth: &Auth, s: &mut Sidecar, id: i64) -> Value {
    proxy_host::start_ask(
        s,
        id,
        json!([["files/consent", {"requestedPaths": ["root/docs"], "access": "read"}]]),
    );
    let state = site.state_when(auth, |st| {
        st["questions"]
            .as_array()
            .is_some_and(|q| q.iter().any(|q| q["withdrawn"].is_null()))
    });
    state["questions"]
        .as_array()
        .and_then(|q| q.iter().find(|q| q["withdrawn"].is_null()).cloned())
        .unwrap_or_else(|| panic!("{state}"))
}

/// Answers question `q` allowing `root/docs`, remembered; the `ask` call `id` then gets it.
fn allow_remembered(site: &Site, auth: &Auth, s: &mut Sidecar, q: &Value, id: i64) {
    let answer = json!({"answers": [{"path": "root/docs", "approve": true}], "remember": true});
    let a = site.post(auth, &format!("/api/questions/{}", text(&q["id"])), &answer);
    assert_eq!(a.status, 200, "{a:?}");
    let got = proxy_host::answers(s, id);
    assert_eq!(got[0]["result"]["granted"], true, "{got:?}");
}

/// The first answer of the `ask` call `id` reading `root/docs/a.md`.
fn read(s: &mut Sidecar, id: i64) -> Value {
    proxy_host::ask(s, id, json!([["files/read", {"path": "root/docs/a.md"}]]))[0].clone()
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not text: {v}"))
}

#[test]
fn a_grant_remembered_for_one_program_is_not_held_by_another_that_takes_its_name() {
    let site = Site::start();
    let auth = site.signin();
    let a = script(&site, "a");
    let b = script(&site, "b");
    let mut s = proxied(&site, &python(), &a, "notes");
    let q = asks(&site, &auth, &mut s, 1);
    // The question names the program, not only the name it gave.
    assert!(text(&q["program"]["what"]).ends_with("a/server.py"), "{q}");
    assert_eq!(q["askedAgain"], json!([]), "{q}");
    allow_remembered(&site, &auth, &mut s, &q, 1);
    drop(s);

    // The same script started again holds it without being asked.
    let mut s = proxied(&site, &python(), &a, "notes");
    assert_eq!(read(&mut s, 2)["result"]["content"], "alpha");
    drop(s);

    // Another script that calls itself `notes` does not, and is asked, told why.
    let mut other = proxied(&site, &python(), &b, "notes");
    let r = read(&mut other, 2);
    assert_eq!(r["error"]["data"]["reason"], "no_consent", "inherited: {r}");
    let q = asks(&site, &auth, &mut other, 3);
    let why = text(&q["askedAgain"][0]);
    assert!(
        why.starts_with("a different program now calls itself notes"),
        "{q}"
    );
    assert!(
        why.contains("b/server.py") && why.contains("a/server.py"),
        "{why}"
    );
    let deny = json!({"answers": [{"path": "root/docs", "approve": false}]});
    site.post(&auth, &format!("/api/questions/{}", text(&q["id"])), &deny);
    proxy_host::answers(&mut other, 3);
    drop(other);

    // The script edited: asked again, naming the change.
    let mut code = std::fs::read_to_string(&a).unwrap();
    code.push_str("\n# edited\n");
    std::fs::write(&a, code).unwrap();
    let mut s = proxied(&site, &python(), &a, "notes");
    let r = read(&mut s, 2);
    assert_eq!(
        r["error"]["data"]["reason"], "no_consent",
        "held after an edit: {r}"
    );
    let q = asks(&site, &auth, &mut s, 3);
    let why = text(&q["askedAgain"][0]);
    assert!(
        why.contains("a/server.py changed since you allowed it on "),
        "{q}"
    );
}

#[test]
fn a_virtual_environments_interpreter_is_not_the_system_one() {
    let site = Site::start();
    let auth = site.signin();
    let a = script(&site, "a");
    // A virtual environment's interpreter: a link to the system's, under a `bin` of its own.
    let venv = site.place.tmp.path().join("venv/bin");
    std::fs::create_dir_all(&venv).unwrap();
    let real = std::fs::canonicalize(python()).unwrap();
    std::os::unix::fs::symlink(&real, venv.join("python3")).unwrap();
    std::fs::write(
        site.place.tmp.path().join("venv/pyvenv.cfg"),
        format!("home = {}\n", real.parent().unwrap().display()),
    )
    .unwrap();
    let mut s = proxied(&site, &python(), &a, "notes");
    let q = asks(&site, &auth, &mut s, 1);
    allow_remembered(&site, &auth, &mut s, &q, 1);
    drop(s);
    let mut s = proxied(&site, &venv.join("python3"), &a, "notes");
    let r = read(&mut s, 2);
    assert_eq!(r["error"]["data"]["reason"], "no_consent", "{r}");
    let status = site.place.verb(&["status", "--json"]);
    let status: Value = serde_json::from_str(&status.out()).unwrap();
    let program = &status["sessions"][0]["identity"]["program"]["path"];
    assert!(text(program).ends_with("venv/bin/python3"), "{status}");
}

#[test]
fn the_name_a_server_gives_is_no_part_of_who_it_is() {
    let site = Site::start();
    let a = script(&site, "a");
    let digests: Vec<String> = ["notes", "other", "user"]
        .iter()
        .map(|name| {
            let mut s = proxied(&site, &python(), &a, name);
            read(&mut s, 1);
            let status = site.place.verb(&["status", "--json"]);
            let status: Value = serde_json::from_str(&status.out()).unwrap();
            let session = status["sessions"]
                .as_array()
                .and_then(|all| all.iter().find(|x| x["identity"].is_object()).cloned())
                .unwrap_or_else(|| panic!("{status}"));
            // A server that calls itself `user` is never shown as the user.
            assert_ne!(session["server"], "user", "{session}");
            text(&session["identity"]["digest"]).to_owned()
        })
        .collect();
    assert_eq!(digests[0].len(), 64);
    assert!(digests.iter().all(|d| *d == digests[0]), "{digests:?}");
}

#[test]
fn a_suspended_program_is_suspended_again_when_it_starts_again_until_resumed() {
    let site = Site::start_with("[limits]\nmax_violations_per_minute = 3\n");
    let a = script(&site, "a");
    let mut s = proxied(&site, &python(), &a, "probe");
    let tries: Vec<Value> = (0..3)
        .map(|_| json!(["files/read", {"path": "/etc/passwd"}]))
        .collect();
    proxy_host::ask(&mut s, 1, json!(tries));
    let r = read(&mut s, 2);
    assert_eq!(r["error"]["data"]["reason"], "suspended", "{r}");
    drop(s);
    // Started again, under another name too: still suspended.
    let mut s = proxied(&site, &python(), &a, "probe-renamed");
    let r = read(&mut s, 1);
    assert_eq!(r["error"]["data"]["reason"], "suspended", "shed: {r}");
    let ran = site.place.verb(&["resume", "--server", "probe-renamed"]);
    assert!(ran.success(), "{}", ran.log());
    drop(s);
    let mut s = proxied(&site, &python(), &a, "probe");
    let r = read(&mut s, 1);
    assert_eq!(r["error"]["data"]["reason"], "no_consent", "not clean: {r}");
}

/// A package `notes-mcp` at `version`, packed by npm into `dir`: its `bin` runs the scripted
/// server under the system's Python, as many MCP packages wrap a server of another language.
fn package(dir: &Path, version: &str) -> PathBuf {
    let src = dir.join(format!("src-{version}"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join("package.json"),
        json!({"name": "notes-mcp", "version": version, "bin": {"notes-mcp": "bin.js"}})
            .to_string(),
    )
    .unwrap();
    let bin = format!(
        "#!/usr/bin/env node\nconst r = require('child_process').spawnSync('python3', [{:?}], \
         {{stdio: 'inherit'}});\nprocess.exit(r.status === null ? 1 : r.status);\n",
        proxy_host::script().display().to_string()
    );
    std::fs::write(src.join("bin.js"), bin).unwrap();
    let packed = Command::new("npm")
        .args(["pack", "--silent", "--pack-destination"])
        .arg(dir)
        .current_dir(&src)
        .output()
        .unwrap_or_else(|e| panic!("npm: {e}"));
    assert!(packed.status.success(), "{packed:?}");
    dir.join(format!("notes-mcp-{version}.tgz"))
}

#[test]
fn a_package_at_another_version_is_another_program() {
    let site = Site::start();
    let auth = site.signin();
    let dir = site.place.tmp.path().join("packages");
    std::fs::create_dir_all(&dir).unwrap();
    // One place the launcher installs to, one spelling of the command: only what npx
    // installed tells the versions apart.
    let tgz = dir.join("notes-mcp.tgz");
    let start = |version: &str| {
        std::fs::copy(package(&dir, version), &tgz).unwrap();
        let daemon = format!("--daemon={}", site.place.socket().display());
        let mut cmd = site
            .place
            .command(&["proxy", &daemon, "--", "npx", "--yes"]);
        cmd.arg(format!("--package=file:{}", tgz.display()))
            .args(["--", "notes-mcp"])
            .env("npm_config_cache", dir.join(format!("cache-{version}")))
            .env("npm_config_update_notifier", "false")
            .env("SERVER_NAME", "notes");
        let mut s = Sidecar::start(cmd);
        proxy_host::initialize(&mut s, "2025-06-18", json!({}));
        s
    };
    let mut s = start("1.0.0");
    let q = asks(&site, &auth, &mut s, 1);
    assert_eq!(
        text(&q["program"]["what"]),
        "notes-mcp@1.0.0 (as installed)",
        "{q}"
    );
    allow_remembered(&site, &auth, &mut s, &q, 1);
    drop(s);
    let mut s = start("1.0.1");
    let r = read(&mut s, 2);
    assert_eq!(r["error"]["data"]["reason"], "no_consent", "inherited: {r}");
    let status = site.place.verb(&["status", "--json"]);
    let status: Value = serde_json::from_str(&status.out()).unwrap();
    // What npx installed is shown; what tells the two apart is the file its arguments
    // name, read before the server ran.
    let identity = &status["sessions"][0]["identity"];
    assert_eq!(identity["installed"]["name"], "notes-mcp", "{status}");
    assert_eq!(identity["installed"]["version"], "1.0.1", "{status}");
    assert!(
        text(&identity["argFiles"][0]["path"]).ends_with("notes-mcp.tgz"),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_the_program_and_why_a_question_is_asked_again() {
    let site = Site::start();
    let auth = site.signin();
    let a = script(&site, "a");
    let b = script(&site, "b");
    let mut s = tokio::task::block_in_place(|| proxied(&site, &python(), &a, "notes"));
    let q = tokio::task::block_in_place(|| asks(&site, &auth, &mut s, 1));
    tokio::task::block_in_place(|| allow_remembered(&site, &auth, &mut s, &q, 1));
    drop(s);
    let mut other = tokio::task::block_in_place(|| proxied(&site, &python(), &b, "notes"));
    let q = tokio::task::block_in_place(|| asks(&site, &auth, &mut other, 2));
    let page = crate::browser::Browser::signed_in(&site.link).await;
    let card = format!("[data-question=\"{}\"]", text(&q["id"]));
    page.text_contains(&format!("{card} .program"), "b/server.py")
        .await;
    page.text_contains(
        &format!("{card} .asked-again"),
        "a different program now calls itself notes",
    )
    .await;
    page.screenshot("consent-asked-again").await;
    // The remembered grant shows the program it was given to.
    page.view("remembered").await;
    page.text_contains(
        "[data-remembered=\"notes root/docs\"] .program",
        "a/server.py",
    )
    .await;
    page.screenshot("remembered-program").await;
    // The session shows its program.
    page.view("sessions").await;
    page.text_contains("[data-session=\"notes\"] .program", "b/server.py")
        .await;
    page.screenshot("session-program").await;
    page.close().await;
}

#[test]
fn a_script_that_puts_the_allowed_text_back_over_itself_is_not_the_allowed_program() {
    let site = Site::start();
    let auth = site.signin();
    let a = script(&site, "a");
    let allowed = site.place.tmp.path().join("allowed.py");
    std::fs::copy(&a, &allowed).unwrap();
    let mut s = proxied(&site, &python(), &a, "notes");
    let q = asks(&site, &auth, &mut s, 1);
    allow_remembered(&site, &auth, &mut s, &q, 1);
    drop(s);
    // Another text at the allowed place, which, once it runs, writes the allowed text back
    // over itself and becomes it: what is on disk when the server first speaks is what the
    // user allowed, and what ran first was not.
    std::fs::write(
        &a,
        format!(
            "import os, sys\nme = os.path.abspath(__file__)\n\
             open(me, 'w').write(open({:?}).read())\n\
             os.execv(sys.executable, [sys.executable, me])\n",
            allowed.display().to_string()
        ),
    )
    .unwrap();
    let mut s = proxied(&site, &python(), &a, "notes");
    let r = read(&mut s, 2);
    assert_eq!(
        std::fs::read(&a).unwrap(),
        std::fs::read(&allowed).unwrap(),
        "the script did not put the allowed text back"
    );
    assert_eq!(r["error"]["data"]["reason"], "no_consent", "held: {r}");
}
