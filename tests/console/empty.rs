//! The Consent view with nothing waiting says which consent mode is in force (with `auto`,
//! no question will ever come to the page), how to attach a server, and where the docs are;
//! the docs it links to are served to a signed-in page only.

use crate::browser::Browser;
use crate::site::Site;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_empty_consent_view_says_the_mode_how_to_attach_and_where_the_docs_are() {
    let site = Site::start_with("mode = \"auto\"\n");
    let auth = site.signin();
    let daemon = &site.state(&auth)["daemon"];
    assert_eq!(daemon["consentMode"], "auto", "{daemon}");
    assert_eq!(daemon["fallback"], "ui", "{daemon}");

    let b = Browser::signed_in(&site.link).await;
    let text = b.text_contains("#consent-empty", "Consent mode auto").await;
    assert!(
        text.contains("No question will come to this page"),
        "{text}"
    );
    for want in ["\"mcpServers\"", "\"fsbroker\"", "\"--daemon\"", "\"npx\""] {
        assert!(text.contains(want), "no {want}: {text}");
    }
    b.find("#consent-empty a[href=\"/docs/README.md\"]").await;
    b.screenshots("consent-empty").await;
    b.close().await;

    let readme = site.http("GET", "/docs/README.md", &auth.headers(), "");
    assert_eq!(readme.status, 200, "{readme:?}");
    assert!(readme.body.contains("fsbroker daemon"), "{readme:?}");
    assert_eq!(
        readme.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    let anonymous = site.http("GET", "/docs/README.md", &[], "");
    assert_eq!(anonymous.status, 401, "{anonymous:?}");
}
