//! Rules, standing grants and per-server roots through a broker; the command-line builder.

use super::*;
use mcp_fsbroker::Access;
use mcp_fsbroker::cli::{CommonArgs, split_root_arg};
use mcp_fsbroker::policy::ConsentMode;
use std::path::Path;

#[tokio::test]
async fn standing_grants_allow_reading_without_consent_only_for_named_servers() {
    let f = Fixture::new();
    f.file("docs/guide.md", "guide");
    f.file("src/main.rs", "fn main() {}");
    let b = broker_from(&with_root(
        &f,
        "[consent]\nmode = \"deny\"\n[[grants]]\nservers = [\"a\"]\npath = \"project/docs\"\n",
    ));
    assert_eq!(
        ok(&read(&b, "a", "project/docs/guide.md").await)["content"],
        "guide"
    );
    assert_eq!(
        err(&read(&b, "a", "project/src/main.rs").await).2,
        "no_consent"
    );
    assert_eq!(
        err(&read(&b, "b", "project/docs/guide.md").await).2,
        "no_consent"
    );
    // Standing grants return with a new session.
    assert!(b.end_session("a"));
    ok(&read(&b, "a", "project/docs/guide.md").await);
}

#[tokio::test]
async fn deny_rule_denies_even_in_auto_mode() {
    let f = Fixture::new();
    f.file("private/key.pem", "k");
    f.file("public/readme.txt", "r");
    let b = broker_from(&with_root(
        &f,
        "[consent]\nmode = \"auto\"\n[[consent.rules]]\npaths = [\"project/private\"]\ndecision = \"deny\"\n",
    ));
    let r = call(
        &b,
        "s",
        "files/consent",
        json!({"requestedPaths": ["project/private/key.pem", "project/public"]}),
    )
    .await;
    let r = ok(&r);
    assert_eq!(r["approvedPaths"], json!(["project/public"]));
    assert_eq!(r["deniedPaths"], json!(["project/private/key.pem"]));
    assert_eq!(
        err(&read(&b, "s", "project/private/key.pem").await).2,
        "no_consent"
    );
    ok(&read(&b, "s", "project/public/readme.txt").await);
}

#[tokio::test]
async fn rules_apply_only_to_their_servers() {
    let f = Fixture::new();
    f.file("notes.txt", "n");
    let b = broker_from(&with_root(
        &f,
        "[consent]\nmode = \"auto\"\n[[consent.rules]]\nservers = [\"x\"]\npaths = [\"project\"]\ndecision = \"deny\"\n",
    ));
    let denied = call(
        &b,
        "x",
        "files/consent",
        json!({"requestedPaths": ["project"]}),
    )
    .await;
    assert_eq!(ok(&denied)["granted"], false);
    consent_all(&b, "y").await;
}

#[tokio::test]
async fn allow_rule_approves_in_deny_mode_and_caps_access() {
    let f = Fixture::new();
    f.file("src/lib.rs", "pub fn f() {}");
    f.file("other.txt", "o");
    let text = format!(
        "[[roots]]\npath = {:?}\nmount = \"project\"\naccess = \"write\"\n[consent]\nmode = \"deny\"\n\
         [[consent.rules]]\npaths = [\"project/src\"]\ndecision = \"allow\"\naccess = \"read\"\n",
        f.root
    );
    let b = broker_from(&text);
    let r = call(
        &b,
        "s",
        "files/consent",
        json!({"requestedPaths": ["project/src", "project/other.txt"], "access": "write"}),
    )
    .await;
    let r = ok(&r);
    assert_eq!(r["granted"], true);
    assert_eq!(r["approvedPaths"], json!(["project/src"]));
    assert_eq!(r["deniedPaths"], json!(["project/other.txt"]));
    assert_eq!(r["access"], "read");
    ok(&read(&b, "s", "project/src/lib.rs").await);
    let st = call(&b, "s", "files/stat", json!({"path": "project/src/lib.rs"})).await;
    assert_eq!(
        ok(&st)["readonly"],
        true,
        "the grant must be read-only: {st}"
    );
    assert_eq!(
        err(&read(&b, "s", "project/other.txt").await).2,
        "no_consent"
    );
}

#[tokio::test]
async fn root_limited_to_server_a_is_hidden_from_server_b() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let text = format!(
        "[[roots]]\npath = {:?}\nmount = \"project\"\nname = \"A only\"\nservers = [\"a\"]\n\
         [[roots]]\npath = {:?}\nmount = \"shared\"\n[consent]\nmode = \"auto\"\n",
        f.root, f.sibling
    );
    let b = broker_from(&text);
    let names = |v: &Value| -> Vec<String> {
        let list = ok(v)["roots"].as_array().unwrap().iter();
        list.map(|r| r["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        names(&call(&b, "a", "roots/list", json!({})).await),
        ["A only", "shared"]
    );
    let for_b = call(&b, "b", "roots/list", json!({})).await;
    assert_eq!(names(&for_b), ["shared"]);
    assert!(
        !for_b
            .to_string()
            .contains(&format!("{}\"", f.root.display())),
        "{for_b}"
    );
    let r = call(
        &b,
        "b",
        "files/consent",
        json!({"requestedPaths": ["project"]}),
    )
    .await;
    assert_eq!(ok(&r)["granted"], false);
    assert_eq!(err(&read(&b, "b", "project/a.txt").await).2, "outside_root");
    consent_all(&b, "a").await;
    ok(&read(&b, "a", "project/a.txt").await);
}

// ---------------------------------------------------------------------------------------
// The command line
// ---------------------------------------------------------------------------------------

fn args(roots: &[String], writable: bool, policy: Option<PathBuf>) -> CommonArgs {
    CommonArgs {
        policy,
        roots: roots.to_vec(),
        writable,
        consent: Some(ConsentMode::Deny),
        consent_fallback: None,
        server_id: None,
        audit_file: None,
        no_audit: false,
    }
}

fn mount(p: &Policy, i: usize) -> String {
    Policy::mount_of(&p.roots[i]).unwrap().to_string()
}

#[test]
fn cli_roots_take_mount_names_and_are_read_only_unless_writable() {
    let f = Fixture::new();
    let roots = [
        format!("docs={}", f.root.display()),
        f.sibling.display().to_string(),
    ];
    let p = args(&roots, false, None)
        .build_policy(true)
        .expect("policy");
    assert_eq!(p.roots.len(), 2);
    assert_eq!(
        (mount(&p, 0), mount(&p, 1)),
        ("docs".into(), "project2".into())
    );
    assert_eq!(&p.roots[0].path, &f.root);
    assert!(p.roots.iter().all(|r| r.access == Access::Read));
    assert_eq!(p.consent.mode, Some(ConsentMode::Deny));
    let p = args(&roots, true, None).build_policy(true).expect("policy");
    assert!(p.roots.iter().all(|r| r.access == Access::Write));
}

#[test]
fn cli_without_roots_or_policy_offers_the_current_directory_read_only() {
    let p = args(&[], false, None).build_policy(true).expect("policy");
    assert_eq!(p.roots.len(), 1);
    assert_eq!(&p.roots[0].path, Path::new("."));
    assert_eq!(p.roots[0].access, Access::Read);
    assert!(
        args(&[], false, None)
            .build_policy(false)
            .unwrap()
            .roots
            .is_empty()
    );
}

#[test]
fn cli_roots_are_added_to_the_policy_file() {
    let f = Fixture::new();
    let file = f.tmp.path().join("p.toml");
    std::fs::write(&file, with_root(&f, "")).unwrap();
    let p = args(
        &[format!("extra={}", f.sibling.display())],
        false,
        Some(file.clone()),
    )
    .build_policy(true)
    .expect("policy");
    assert_eq!(
        (mount(&p, 0), mount(&p, 1)),
        ("project".into(), "extra".into())
    );
    // The policy file alone: no current-directory root is added.
    assert_eq!(
        args(&[], false, Some(file))
            .build_policy(true)
            .unwrap()
            .roots
            .len(),
        1
    );
}

#[test]
fn cli_errors_name_the_command_line() {
    let f = Fixture::new();
    let missing = format!("m={}", f.tmp.path().join("nope").display());
    let e = args(&[missing], false, None)
        .build_policy(true)
        .unwrap_err();
    assert_eq!(
        (e.file.as_str(), e.key.as_str()),
        ("<command line>", "roots[0].path")
    );
    let dup = [
        format!("m={}", f.root.display()),
        format!("m={}", f.sibling.display()),
    ];
    let e = args(&dup, false, None).build_policy(true).unwrap_err();
    assert_eq!(e.key, "roots[1].mount", "{e}");
}

#[test]
fn split_root_arg_takes_a_mount_only_when_it_is_a_valid_name() {
    let s = |a: &str| split_root_arg(a);
    assert_eq!(s("a=b"), (Some("a".into()), PathBuf::from("b")));
    assert_eq!(
        s("docs=/x/y=z"),
        (Some("docs".into()), PathBuf::from("/x/y=z"))
    );
    assert_eq!(s("/srv/data"), (None, PathBuf::from("/srv/data")));
    assert_eq!(s("./a=b"), (None, PathBuf::from("./a=b")));
    assert_eq!(s("/x/a=b"), (None, PathBuf::from("/x/a=b")));
    assert_eq!(s("..=b"), (None, PathBuf::from("..=b")));
    assert_eq!(s("=b"), (None, PathBuf::from("=b")));
    assert_eq!(s("a b=c"), (None, PathBuf::from("a b=c")));
}
