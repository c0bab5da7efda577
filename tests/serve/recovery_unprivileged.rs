//! Recovery as a user who is not root, through the real binary (run as uid 65534 when the
//! tests run as root, since root passes every permission check): a read-only directory a
//! server deletes is kept, and `fsbroker undo` puts it back with its mode. Moving a directory
//! to another parent needs write permission on it (its `..`), and the store keeps the
//! directory's own mode, so a deleted read-only directory used to be beyond `undo` for anyone
//! but root. (A read-only directory that holds entries cannot be deleted by its user at all,
//! through the broker or not: its entries cannot be removed from it.)

use crate::common::*;
use crate::sidecar::*;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

/// Uid and gid the commands run as when the tests run as root.
const NOBODY: u32 = 65534;

/// A command running `bin` (a copy of the binary that `NOBODY` can run) as `NOBODY` when the
/// tests run as root, else as the tests' own user.
fn as_user(bin: &Path) -> Command {
    if rustix::process::geteuid().is_root() {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(bin);
        cmd
    } else {
        Command::new(bin)
    }
}

/// Gives `p` to `NOBODY` when the tests run as root.
fn hand_over(p: &Path) {
    if rustix::process::geteuid().is_root() {
        std::os::unix::fs::chown(p, Some(NOBODY), Some(NOBODY)).unwrap();
    }
}

#[test]
fn a_read_only_directory_a_server_deleted_comes_back_by_undo_with_its_mode() {
    let t = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(t.path()).unwrap();
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (root, state) = (base.join("w"), base.join("state"));
    let ro = root.join("ro");
    std::fs::create_dir_all(&ro).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    for p in [&root, &state, &ro] {
        hand_over(p);
    }
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    let copy = base.join("fsbroker");
    std::fs::copy(bin(), &copy).unwrap();
    let mut cmd = as_user(&copy);
    cmd.args(["serve", "--consent", "auto", "--writable", "--no-audit"])
        .args(["--server-id", "evil"])
        .arg(format!("--root=w={}", root.display()))
        .env("XDG_STATE_HOME", &state);
    let mut s = Sidecar::start(cmd);
    let r = s.request(
        "files/consent",
        json!({"requestedPaths": ["w"], "access": "write"}),
    );
    assert_eq!(ok(&r)["granted"], true, "consent refused: {r}");
    ok(&s.request("files/delete", json!({"path": "w/ro"})));
    s.finish();
    assert!(!ro.exists(), "the delete left the directory");
    let mut undo = as_user(&copy);
    undo.args(["undo", "--server", "evil"])
        .env("XDG_STATE_HOME", &state);
    let ran = run_within(undo, WAIT);
    assert!(ran.success(), "undo failed\n{}", ran.log());
    let meta = std::fs::metadata(&ro).unwrap();
    assert!(meta.is_dir(), "undo put back no directory");
    let mode = meta.permissions().mode() & 0o7777;
    assert_eq!(mode, 0o555, "the directory came back as {mode:o}");
}
