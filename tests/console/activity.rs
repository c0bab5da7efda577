//! The Activity view: each event with its severity (an attack in red, a refusal in amber,
//! routine work and the user's own answers untagged as refusals), an escape attempt's path
//! shown, every row opening the whole event as text, and a layout that a server's very long
//! name does not push off the screen.

use crate::browser::Browser;
use crate::site::Site;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_carry_a_severity_and_a_detail_and_a_long_name_keeps_the_columns() {
    let site = Site::start();
    // A link inside a folder the server is allowed, leading out of every root.
    std::os::unix::fs::symlink(site.extra(), site.place.root.join("docs/out")).unwrap();
    let long = "n".repeat(300);
    let b = Browser::signed_in(&site.link).await;
    let mut s = site.server(&long);

    // The user's own partial answer: root/docs allowed, root/notes denied.
    s.send(&crate::site::rpc(
        1,
        "files/consent",
        json!({"requestedPaths": ["root/docs", "root/notes"], "access": "read"}),
    ));
    b.click("[data-path=\"root/docs\"] input[value=allow]")
        .await;
    b.click("[data-question] button.answer").await;
    let r = s.wait_id(&json!(1));
    assert_eq!(r["result"]["granted"], true, "{r}");

    let ok = s.request("files/read", json!({"path": "root/docs/a.md"}));
    assert_eq!(ok["result"]["content"], "alpha", "{ok}");
    let no = s.request("files/read", json!({"path": "root/notes/n.md"}));
    assert_eq!(no["error"]["data"]["reason"], "no_consent", "{no}");
    let out = s.request("files/read", json!({"path": "root/docs/out/e.txt"}));
    assert_eq!(out["error"]["data"]["reason"], "outside_root", "{out}");
    let abs = s.request("files/read", json!({"path": "/etc/passwd"}));
    assert_eq!(abs["error"]["data"]["reason"], "outside_root", "{abs}");

    b.view("activity").await;
    // Attacks, newest first: the red tag, and the path the server tried, not a dash.
    b.text_contains(
        "[data-event][data-severity=\"attack\"] .path",
        "outside every root",
    )
    .await;
    b.text_contains(
        "[data-severity=\"attack\"] + [data-event][data-severity=\"attack\"] .path",
        "root/docs/out",
    )
    .await;
    b.text_contains("[data-severity=\"attack\"] .label-attack", "ATTACK")
        .await;
    // A refusal for want of consent: amber, never the attack's look.
    b.text_contains(
        "[data-event][data-severity=\"refusal\"] .path",
        "root/notes/n.md",
    )
    .await;
    b.find("[data-severity=\"refusal\"] .label-refusal").await;
    b.gone("[data-severity=\"refusal\"] .label-attack").await;
    // The user's partial answer is routine: not refused.
    let partial = b.find("[data-event][data-outcome=\"partial\"]").await;
    assert_eq!(
        partial.attr("data-severity").await.unwrap().as_deref(),
        Some("routine")
    );
    let text = partial.text().await.unwrap();
    assert!(!text.to_lowercase().contains("refused"), "{text}");
    b.gone("[data-outcome=\"partial\"] .label-refusal").await;
    b.gone("[data-outcome=\"partial\"] .label-attack").await;

    // The long name does not widen the table past its frame.
    let widths =
        b.c.execute(
            "const w = document.querySelector('.table.activity').closest('.table-wrap'); \
             return [w.scrollWidth, w.clientWidth];",
            vec![],
        )
        .await
        .unwrap();
    let (scroll, client) = (widths[0].as_u64().unwrap(), widths[1].as_u64().unwrap());
    assert!(
        scroll <= client,
        "the table is {scroll} px wide in {client} px"
    );
    b.screenshots("activity").await;

    // A row opens the whole event, as text.
    b.click("[data-event][data-severity=\"attack\"] .ev-open")
        .await;
    let detail = b
        .text_contains(
            "#event-detail[open] #event-json",
            "\"reason\": \"outside_root\"",
        )
        .await;
    assert!(detail.contains("\"server\": \"nnnn"), "{detail}");
    b.screenshots("activity-detail").await;
    b.click("#event-detail-close").await;
    b.gone("#event-detail[open]").await;
    b.close().await;
}
