//! A headless chromium driven through chromedriver (WebDriver), installed from Debian's
//! packages when missing, as the SDKs are installed on first use. One browser at a time in
//! this process: a browser is heavy, and the machines have two cores.

use crate::sidecar::WAIT;
use fantoccini::{Client, ClientBuilder, Locator, elements::Element};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Instant;

const DRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";

/// A browser session, with the chromedriver that runs it.
pub struct Browser {
    pub c: Client,
    driver: Child,
    /// The port chromedriver listens on.
    port: u16,
    _profile: tempfile::TempDir,
    _one: tokio::sync::MutexGuard<'static, ()>,
}

/// Installs chromium and chromedriver with apt-get unless both are there; a failed install
/// fails the test with the installer's output.
fn ensure_installed() {
    static ONCE: Mutex<bool> = Mutex::new(false);
    let mut done = ONCE.lock().unwrap_or_else(|e| e.into_inner());
    if *done || (Path::new(DRIVER).exists() && Path::new(CHROMIUM).exists()) {
        *done = true;
        return;
    }
    let lock =
        std::fs::File::create(Path::new(env!("CARGO_TARGET_TMPDIR")).join("apt.lock")).unwrap();
    <std::fs::File as fs4::FileExt>::lock(&lock).unwrap();
    if !Path::new(DRIVER).exists() || !Path::new(CHROMIUM).exists() {
        for args in [
            &["update", "-qq"][..],
            &["install", "-y", "-qq", "chromium", "chromium-driver"],
        ] {
            let out = Command::new("apt-get")
                .args(args)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .output()
                .expect("apt-get, to install chromium and chromium-driver");
            assert!(
                out.status.success(),
                "apt-get {args:?} failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    *done = true;
}

impl Browser {
    /// A fresh headless browser at 1280x900.
    pub async fn open() -> Browser {
        Browser::open_as(1280, 900, false).await
    }

    /// A fresh browser signed in with `link` at `width`x`height`, in the dark theme when
    /// `dark` (the system's preference, as the page follows it), its page live.
    pub async fn signed_in_as(link: &str, width: u32, height: u32, dark: bool) -> Browser {
        let b = Browser::open_as(width, height, dark).await;
        b.c.goto(link).await.unwrap();
        b.text_contains("#status", "live").await;
        b
    }

    /// A fresh headless browser at `width`x`height`, dark when `dark`.
    pub async fn open_as(width: u32, height: u32, dark: bool) -> Browser {
        static ONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        let one = ONE.lock().await;
        ensure_installed();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // A process group of its own, with the browser it starts: ended whole, however the
        // test ends, so that no browser outlives it.
        use std::os::unix::process::CommandExt;
        let driver = Command::new(DRIVER)
            .process_group(0)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + WAIT;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not listen");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let profile = tempfile::tempdir().unwrap();
        let caps = serde_json::json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu",
                    "--disable-dev-shm-usage", "--window-size=1280,900",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
        });
        let serde_json::Value::Object(caps) = caps else {
            unreachable!()
        };
        let c = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a chromium session");
        let b = Browser {
            c,
            driver,
            port,
            _profile: profile,
            _one: one,
        };
        if (width, height, dark) != (1280, 900, false) {
            // The page's own size and theme, as a phone or a dark desktop would give them:
            // a window's size would count the browser's frame, and a narrow one is widened.
            let metrics = serde_json::json!({"width": width, "height": height,
                "deviceScaleFactor": 1, "mobile": width < 600});
            b.cdp("Emulation.setDeviceMetricsOverride", metrics).await;
            let scheme = if dark { "dark" } else { "light" };
            let media = serde_json::json!({"features": [
                {"name": "prefers-color-scheme", "value": scheme}]});
            b.cdp("Emulation.setEmulatedMedia", media).await;
        }
        b
    }

    /// Sends a DevTools command through chromedriver's own endpoint for them.
    pub async fn cdp(&self, cmd: &str, params: serde_json::Value) {
        use std::io::{Read, Write};
        let id = self.c.session_id().await.unwrap().unwrap();
        let body = serde_json::json!({"cmd": cmd, "params": params}).to_string();
        let port = self.port;
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(
            s,
            "POST /session/{id}/goog/cdp/execute HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        // The head, then as much body as it says: the driver may keep the connection.
        let mut r = std::io::BufReader::new(s);
        let mut head = String::new();
        let mut length = 0;
        loop {
            let mut line = String::new();
            std::io::BufRead::read_line(&mut r, &mut line).unwrap();
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap();
            }
            head.push_str(&line);
            if line == "\r\n" || line.is_empty() {
                break;
            }
        }
        let mut body = vec![0; length];
        r.read_exact(&mut body).unwrap();
        assert!(
            head.starts_with("HTTP/1.1 200"),
            "{cmd}: {head}{}",
            String::from_utf8_lossy(&body)
        );
    }

    /// A fresh browser signed in with `link`, its page live.
    pub async fn signed_in(link: &str) -> Browser {
        let b = Browser::open().await;
        b.c.goto(link).await.unwrap();
        b.text_contains("#status", "live").await;
        b
    }

    /// The first element `css` matches, waiting for it to appear.
    pub async fn find(&self, css: &str) -> Element {
        match self
            .c
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
        {
            Ok(e) => e,
            Err(e) => {
                let page = match self.c.find(Locator::Css("body")).await {
                    Ok(body) => body.text().await.unwrap_or_default(),
                    Err(_) => String::new(),
                };
                let at = self.c.current_url().await.map(|u| u.to_string());
                panic!("no {css} on the page ({at:?}): {e}\n{page}")
            }
        }
    }

    /// Waits until `css` matches nothing.
    pub async fn gone(&self, css: &str) {
        let deadline = Instant::now() + WAIT;
        while !self.c.find_all(Locator::Css(css)).await.unwrap().is_empty() {
            assert!(Instant::now() < deadline, "{css} is still on the page");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Waits until the text of `css` contains `want`.
    pub async fn text_contains(&self, css: &str, want: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let mut said = None;
            if let Ok(e) = self.c.find(Locator::Css(css)).await
                && let Ok(t) = e.text().await
            {
                if t.contains(want) {
                    return t;
                }
                said = Some(t);
            }
            assert!(
                Instant::now() < deadline,
                "{css} never said {want:?}; it said {said:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Clicks the first element `css` matches. A live page may redraw the element between
    /// finding and clicking it (a new state arrived): then it is found again, within the wait.
    pub async fn click(&self, css: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            match self.find(css).await.click().await {
                Ok(()) => return,
                Err(fantoccini::error::CmdError::Standard(e))
                    if e.error == fantoccini::error::ErrorStatus::StaleElementReference
                        && Instant::now() < deadline => {}
                Err(e) => panic!("cannot click {css}: {e}"),
            }
        }
    }

    /// Clicks the first element `css` matches and accepts the confirmation it asks for.
    pub async fn click_confirm(&self, css: &str) {
        self.click(css).await;
        let deadline = Instant::now() + WAIT;
        while self.c.accept_alert().await.is_err() {
            assert!(Instant::now() < deadline, "{css} asked for no confirmation");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Shows view `name` through its navigation button.
    pub async fn view(&self, name: &str) {
        self.click(&format!("[data-nav=\"{name}\"]")).await;
        self.find(&format!("[data-view=\"{name}\"]:not([hidden])"))
            .await;
    }

    /// Keeps a screenshot as `NAME.png` in `$FSBROKER_SCREENSHOTS`, when set.
    pub async fn screenshot(&self, name: &str) {
        if let Some(dir) = std::env::var_os("FSBROKER_SCREENSHOTS") {
            let png = self.c.screenshot().await.unwrap();
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(Path::new(&dir).join(format!("{name}.png")), png).unwrap();
        }
    }

    /// Scrolls the first element `css` matches to the middle of the page.
    pub async fn scroll_to(&self, css: &str) {
        self.find(css).await;
        let script = "document.querySelector(arguments[0]).scrollIntoView({block: 'center'})";
        self.c
            .execute(script, vec![serde_json::json!(css)])
            .await
            .unwrap();
    }

    /// How many elements `css` matches now.
    pub async fn count(&self, css: &str) -> usize {
        self.c.find_all(Locator::Css(css)).await.unwrap().len()
    }

    pub async fn close(self) {
        let _ = self.c.clone().close().await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(group) = rustix::process::Pid::from_raw(self.driver.id() as i32) {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
        let _ = self.driver.wait();
    }
}
