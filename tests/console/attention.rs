//! What needs the user whatever view is open: a suspended session (with its Resume at hand),
//! an escape attempt, and a question nobody answered in time, each in the attention area,
//! on its tab and in the page's title; and a timeout told from the user's own denial.

use crate::browser::Browser;
use crate::site::{Site, ask};
use fantoccini::Locator;
use serde_json::json;
use std::time::{Duration, Instant};

const STANDING: &str =
    "[[grants]]\nservers = [\"notes\"]\npath = \"root/docs\"\naccess = \"read\"\n";

/// Waits until the page's title starts (or, with `want` false, no longer starts) with "(!)".
async fn title_marked(b: &Browser, want: bool) {
    let deadline = Instant::now() + crate::sidecar::WAIT;
    loop {
        let title = b.c.title().await.unwrap();
        if title.starts_with("(!)") == want {
            return;
        }
        assert!(Instant::now() < deadline, "title {title:?}, marked: {want}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether `css` is on the page and shown.
async fn shown(b: &Browser, css: &str) -> bool {
    match b.c.find(Locator::Css(css)).await {
        Ok(e) => e.is_displayed().await.unwrap_or(false),
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspension_and_escape_attempts_show_on_every_view_and_resume_is_at_hand() {
    let site = Site::start_with(STANDING);
    let b = Browser::signed_in(&site.link).await;
    let mut s = site.server("notes");
    for _ in 0..20 {
        let r = s.request("files/read", json!({"path": "/etc/passwd"}));
        assert_eq!(r["error"]["data"]["reason"], "outside_root", "{r}");
    }
    // The default view is Consent: the suspension shows there, not only in Sessions.
    b.text_contains(
        "#attention [data-attention=\"suspended\"]",
        "notes is suspended",
    )
    .await;
    b.text_contains(
        "#attention [data-attention=\"escape\"]",
        "tried to reach outside every root 20 times; the last",
    )
    .await;
    b.text_contains("#alarm-sessions", "!1").await;
    b.text_contains("#alarm-activity", "!20").await;
    title_marked(&b, true).await;
    b.screenshots("attention").await;
    for view in ["activity", "roots", "remembered"] {
        b.view(view).await;
        assert!(
            shown(
                &b,
                "#attention [data-attention=\"suspended\"] button.resume"
            )
            .await,
            "no Resume in sight on {view}"
        );
    }
    b.click("#attention [data-attention=\"suspended\"] button.resume")
        .await;
    b.gone("#attention [data-attention=\"suspended\"]").await;
    assert!(
        !shown(&b, "#alarm-sessions").await,
        "still marked suspended"
    );
    let r = s.request("files/read", json!({"path": "root/docs/a.md"}));
    assert_eq!(r["result"]["content"], "alpha", "{r}");
    // The escape attempts stay in sight until dismissed.
    title_marked(&b, true).await;
    b.click("#attention [data-attention=\"escape\"] button.dismiss-escape")
        .await;
    b.gone("#attention [data-attention=\"escape\"]").await;
    title_marked(&b, false).await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_nobody_answered_is_kept_as_missed_and_reads_timed_out() {
    // Questions wait two seconds: this one waits them out, unanswered.
    let site = Site::start_with("timeout_secs = 2\n");
    let b = Browser::signed_in(&site.link).await;
    let mut s = site.server("notes");
    ask(&mut s, 1, &["root/docs"], "read");
    b.find("[data-question]:not(.withdrawn)").await;
    let r = s.wait_id(&json!(1));
    assert_eq!(r["result"]["granted"], false, "{r}");

    let card = b.text_contains("[data-question].missed", "timed out").await;
    assert!(card.contains("Missed"), "{card}");
    b.text_contains(
        "#attention [data-attention=\"missed\"]",
        "1 question missed",
    )
    .await;
    b.text_contains("#alarm-consent", "!1").await;
    title_marked(&b, true).await;
    b.screenshots("consent-missed").await;

    // Activity says who decided: the time limit, not the user.
    b.view("activity").await;
    let row = b
        .text_contains(
            "[data-event][data-outcome=\"denied\"] .outcome",
            "timed out",
        )
        .await;
    assert!(!row.contains("denied"), "{row}");
    // Still in sight from another view, and dismissed from there.
    b.click("#attention [data-attention=\"missed\"] button.dismiss-missed")
        .await;
    b.gone("#attention [data-attention=\"missed\"]").await;
    b.gone("[data-question].missed").await;
    title_marked(&b, false).await;
    assert!(!shown(&b, "#alarm-consent").await, "still marked missed");
    b.close().await;
}

/// A question its server cancelled is withdrawn, not missed: nobody failed to answer it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_its_server_cancelled_is_withdrawn_not_missed() {
    let site = Site::start();
    let b = Browser::signed_in(&site.link).await;
    let mut s = site.server("notes");
    ask(&mut s, 1, &["root/docs"], "read");
    b.find("[data-question]:not(.withdrawn)").await;
    s.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": 1}}),
    );
    let card = b
        .text_contains("[data-question].withdrawn", "the server stopped waiting")
        .await;
    assert!(!card.contains("timed out"), "{card}");
    b.gone("[data-question].missed").await;
    b.gone("#attention [data-attention=\"missed\"]").await;
    assert!(!shown(&b, "#alarm-consent").await, "marked missed");
    title_marked(&b, false).await;
    b.close().await;
}
