//! `fsbroker daemon --init`: the user's starter policy, which loads as it is written and is
//! never overwritten.

use crate::place::{Place, mode};

#[test]
fn init_writes_a_policy_that_loads_with_the_roots_given() {
    let p = Place::new();
    let mut cmd = p.command(&["daemon", "--init", "--writable", "--root"]);
    cmd.arg(format!("app={}", p.root.display()));
    let ran = crate::sidecar::run_within(cmd, crate::sidecar::WAIT);
    assert!(ran.success(), "{}", ran.log());
    let file = p.user_policy();
    assert!(
        ran.out().contains(&file.display().to_string()),
        "{}",
        ran.log()
    );
    assert!(
        ran.out().contains("fsbroker daemon --policy"),
        "{}",
        ran.log()
    );
    assert_eq!(mode(file.parent().unwrap()), 0o700);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains("mount = \"app\"\naccess = \"write\""),
        "{text}"
    );
    let check = p.verb(&["check-policy", file.to_str().unwrap()]);
    assert!(check.success(), "{}", check.log());
    assert!(check.out().contains("app"), "{}", check.log());
    // Never over an existing file, which stays as it was.
    std::fs::write(&file, "# mine\n").unwrap();
    let again = p.verb(&["daemon", "--init"]);
    assert_eq!(again.code(), Some(1), "{}", again.log());
    assert!(again.err().contains("never overwrites"), "{}", again.log());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "# mine\n");
}

#[test]
fn init_without_roots_writes_an_example_that_loads() {
    let p = Place::new();
    let ran = p.verb(&["daemon", "--init"]);
    assert!(ran.success(), "{}", ran.log());
    let file = p.user_policy();
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("# [[roots]]"), "{text}");
    let check = p.verb(&["check-policy", file.to_str().unwrap()]);
    assert!(check.success(), "{}", check.log());
}

#[test]
fn init_refuses_what_it_cannot_write() {
    let p = Place::new();
    let ran = p.verb(&["daemon", "--init", "--consent", "auto"]);
    assert_eq!(ran.code(), Some(2), "{}", ran.log());
    assert!(ran.err().contains("--consent"), "{}", ran.log());
    let missing = p.tmp.path().join("missing");
    let ran = p.verb(&["daemon", "--init", "--root", missing.to_str().unwrap()]);
    assert_eq!(ran.code(), Some(2), "{}", ran.log());
    assert!(ran.err().contains("not written"), "{}", ran.log());
    assert!(!p.user_policy().exists());
}
