//! The `tty` consent provider on a real pseudo-terminal: it prompts on the terminal device
//! (never on stdin), shows the paths, sanitises the server's message, and obeys the answer.

use crate::common::pty::pty;
use mcp_fsbroker::Access;
use mcp_fsbroker::consent::{ConsentProvider, ConsentRequest, TtyConsent};
use mcp_fsbroker::path::{MountName, MountPath, RequestPath};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Duration;

fn request(access: Access) -> ConsentRequest {
    let RequestPath::Mount { rel, .. } = RequestPath::parse("project/src").unwrap() else {
        unreachable!()
    };
    let path = MountPath {
        mount: MountName::new("project").unwrap(),
        rel,
    };
    let mut request = ConsentRequest::new("srv", [path], access);
    request.message = Some("please\u{1b}[2J let me in".into());
    request
}

/// Answers the prompt on the master side once it has appeared; returns what was shown, and
/// the master side, which the caller keeps open until the provider has decided: closing it
/// hangs the terminal up and may discard an answer not read yet (a slow machine's case).
fn answer(
    mut master: std::fs::File,
    reply: &'static str,
) -> std::thread::JoinHandle<(String, std::fs::File)> {
    std::thread::spawn(move || {
        let mut shown = Vec::new();
        let mut buf = [0u8; 512];
        while !String::from_utf8_lossy(&shown).contains("allow?") {
            let n = master.read(&mut buf).unwrap();
            shown.extend_from_slice(&buf[..n]);
        }
        master.write_all(reply.as_bytes()).unwrap();
        (String::from_utf8_lossy(&shown).into_owned(), master)
    })
}

/// How long an answered prompt waits: generous, since a slow machine must not turn an answer
/// into a timeout.
const ANSWERED: Duration = Duration::from_secs(60);

#[tokio::test]
async fn tty_prompt_read_answer_grants_read() {
    let (master, slave) = pty();
    let shown = answer(master, "r\n");
    let provider = TtyConsent::with_device(slave).with_wait(ANSWERED);
    let req = request(Access::Write);
    let decision = provider.decide(&req).await;
    assert_eq!(decision.approved, req.paths);
    assert_eq!(decision.access, Access::Read);
    // Joined only now: the master side stays open until the answer has been read.
    let (shown, _master) = shown.join().unwrap();
    assert!(
        shown.contains("project/src"),
        "prompt did not show the path: {shown}"
    );
    assert!(shown.contains("srv"));
    assert!(
        !shown.contains('\u{1b}'),
        "escape sequence from the server reached the terminal"
    );
}

#[tokio::test]
async fn tty_prompt_write_answer_grants_write() {
    let (master, slave) = pty();
    let shown = answer(master, "w\n");
    let provider = TtyConsent::with_device(slave).with_wait(ANSWERED);
    let decision = provider.decide(&request(Access::Write)).await;
    assert_eq!(decision.access, Access::Write);
    assert_eq!(decision.approved.len(), 1);
    shown.join().unwrap();
}

#[tokio::test]
async fn tty_prompt_no_answer_denies() {
    let (master, slave) = pty();
    let shown = answer(master, "n\n");
    let provider = TtyConsent::with_device(slave).with_wait(ANSWERED);
    let decision = provider.decide(&request(Access::Read)).await;
    assert!(decision.approved.is_empty());
    shown.join().unwrap();
}

#[tokio::test]
async fn tty_prompt_unanswered_denies_after_wait() {
    let (_master, slave) = pty();
    let provider = TtyConsent::with_device(slave).with_wait(Duration::from_millis(300));
    let decision = provider.decide(&request(Access::Read)).await;
    assert!(decision.approved.is_empty());
}

#[tokio::test]
async fn tty_missing_device_denies() {
    let provider = TtyConsent::with_device(PathBuf::from("/nonexistent/tty"));
    let decision = provider.decide(&request(Access::Read)).await;
    assert!(decision.approved.is_empty());
}

/// A prompt about one path shows it once, then asks: the path is not printed a second time
/// above the question. (Review: the single-path prompt printed the path twice.)
#[tokio::test]
async fn tty_prompt_about_one_path_shows_it_once() {
    let (master, slave) = pty();
    let shown = answer(master, "r\n");
    let provider = TtyConsent::with_device(slave).with_wait(ANSWERED);
    let req = request(Access::Read);
    let decision = provider.decide(&req).await;
    assert_eq!(decision.approved, req.paths);
    let (shown, _master) = shown.join().unwrap();
    assert_eq!(
        shown.matches("project/src").count(),
        1,
        "the path is shown more than once: {shown}"
    );
    assert!(shown.contains("allow?"), "{shown}");
}
