//! Another user's set-user-ID program in a shared root, through the real binary: a server's
//! write over it makes a file of the broker's user without the bit, and so does keeping it
//! by a copy (across filesystems) and putting that copy back with `fsbroker undo`. Both used
//! to keep the bit, so that the other user's program became one that runs as the broker's
//! user, with the server's content or the other user's.
//!
//! Making another user's file needs root: elsewhere each test says so and returns early.

use crate::recovery::*;
use crate::recovery_other_fs::Tmpfs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// Whether another user's file can be made; says why not otherwise.
fn can_chown(test: &str) -> bool {
    let root = rustix::process::geteuid().is_root();
    if !root {
        println!("{test}: SKIPPED, making another user's file needs root");
    }
    root
}

/// A set-user-ID and set-group-ID program of uid 65534 at `p`.
fn another_users_program(p: &Path) {
    std::fs::write(p, "#!/bin/sh\necho the other user's\n").unwrap();
    std::os::unix::fs::chown(p, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o6755)).unwrap();
}

/// The owner and the permission bits of `p`.
fn owner_and_mode(p: &Path) -> (u32, u32) {
    let m = std::fs::metadata(p).unwrap();
    (m.uid(), m.mode() & 0o7777)
}

#[test]
fn a_write_over_another_users_setuid_program_makes_no_setuid_program() {
    if !can_chown("setuid_write") {
        return;
    }
    let r = Rec::new();
    let tool = r.root.join("tool");
    another_users_program(&tool);
    let mut s = r.serve("agent");
    write(&mut s, "w/tool", b"#!/bin/sh\necho the server's\n");
    s.finish();
    let me = rustix::process::geteuid().as_raw();
    let (uid, mode) = owner_and_mode(&tool);
    assert_eq!(uid, me, "the new file is the broker user's");
    assert_eq!(mode & 0o6000, 0, "the new file is {mode:o}");
}

#[test]
fn another_users_setuid_program_kept_by_a_copy_comes_back_without_the_bit() {
    if !can_chown("setuid_copy") {
        return;
    }
    let r = Rec::new();
    let Some(_fs) = Tmpfs::mount(&r.root, "setuid_copy") else {
        return;
    };
    let tool = r.root.join("tool");
    another_users_program(&tool);
    let mut s = r.serve("agent");
    write(&mut s, "w/tool", b"#!/bin/sh\necho the server's\n");
    s.finish();
    let changes = r.changes();
    let w = change(&changes, "files/write", "w/tool");
    assert_eq!(w["kept"]["how"], "copy", "{w}");
    let kept = Path::new(w["place"].as_str().unwrap()).to_owned();
    let (_, mode) = owner_and_mode(&kept);
    assert_eq!(mode & 0o4000, 0, "the kept copy is {mode:o}");
    r.run_ok(&["undo", "--server", "agent"]);
    assert_eq!(
        std::fs::read_to_string(&tool).unwrap(),
        "#!/bin/sh\necho the other user's\n"
    );
    let (uid, mode) = owner_and_mode(&tool);
    assert!(
        uid == 65534 || mode & 0o4000 == 0,
        "undo put back a set-user-ID program of uid {uid}: {mode:o}"
    );
}
