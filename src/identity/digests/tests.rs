use super::*;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"))
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_warm_cache_hashes_nothing_and_a_changed_file_is_hashed_again() {
    let t = tmp();
    let cache = t.path().join("cache").join("fsbroker").join("digests.json");
    let file = t.path().join("server.py");
    write(&file, "print('a')\n");
    let mut cold = Digests::at(cache.clone());
    cold.settle = std::time::Duration::ZERO;
    let first = cold.of(&file).unwrap_or_else(|| panic!("no digest"));
    assert_eq!(cold.hashed, 1);
    assert_eq!(
        first.digest,
        blake3::hash(b"print('a')\n").to_hex().to_string()
    );
    assert_eq!(first.head, b"print('a')\n");
    cold.write(&cache).unwrap_or_else(|e| panic!("{e}"));
    let meta = std::fs::metadata(&cache).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(meta.mode() & 0o777, 0o600);
    let dir = std::fs::metadata(cache.parent().unwrap_or(&cache));
    assert_eq!(dir.unwrap_or_else(|e| panic!("{e}")).mode() & 0o777, 0o700);

    let mut warm = Digests::at(cache.clone());
    warm.settle = std::time::Duration::ZERO;
    assert_eq!(warm.of(&file).map(|d| d.digest), Some(first.digest.clone()));
    assert_eq!(warm.hashed, 0, "found in the cache, not read");
    assert!(!warm.dirty, "nothing new: nothing to write back");

    // Another size: the key changes whatever the clock's resolution.
    write(&file, "print('bb')\n");
    let again = warm.of(&file).unwrap_or_else(|| panic!("no digest"));
    assert_eq!(warm.hashed, 1, "a changed file is hashed again");
    assert_ne!(again.digest, first.digest);
}

#[test]
fn a_file_changed_just_now_is_hashed_every_time() {
    let t = tmp();
    let file = t.path().join("fresh.js");
    write(&file, "1");
    let mut d = Digests::at(t.path().join("c.json"));
    let first = d.of(&file).map(|f| f.digest);
    assert_eq!(d.of(&file).map(|f| f.digest), first);
    assert_eq!(
        d.hashed, 2,
        "a write of the same size may follow in the same tick"
    );
}

#[test]
fn a_cache_of_garbage_or_of_someone_else_is_ignored() {
    let t = tmp();
    let cache = t.path().join("digests.json");
    let file = t.path().join("run.sh");
    write(&file, "echo hi\n");
    let mut d = Digests::at(cache.clone());
    d.settle = std::time::Duration::ZERO;
    let right = d.of(&file).map(|f| f.digest);
    d.save();
    // An entry that vouches for other content: only a writable-by-others file could hold
    // it unnoticed, and such a file is not read.
    let text = std::fs::read_to_string(&cache).unwrap_or_else(|e| panic!("{e}"));
    let forged = text.replace(right.as_deref().unwrap_or("-"), &"0".repeat(64));
    write(&cache, &forged);
    std::fs::set_permissions(&cache, std::os::unix::fs::PermissionsExt::from_mode(0o666))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut open = Digests::at(cache.clone());
    open.settle = std::time::Duration::ZERO;
    assert_eq!(open.of(&file).map(|f| f.digest), right);
    assert_eq!(open.hashed, 1, "a cache others may write is not read");

    write(&cache, "{not json");
    std::fs::set_permissions(&cache, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut garbage = Digests::at(cache.clone());
    garbage.settle = std::time::Duration::ZERO;
    assert_eq!(garbage.of(&file).map(|f| f.digest), right);
    assert_eq!(garbage.hashed, 1);
    garbage.save();
    let mut mended = Digests::at(cache);
    assert_eq!(mended.of(&file).map(|f| f.digest), right);
    assert_eq!(mended.hashed, 0, "the garbage was replaced by a cache");
}

#[test]
fn no_regular_file_has_no_digest_and_a_link_is_followed_to_its_file() {
    let t = tmp();
    let mut d = Digests::at(t.path().join("c.json"));
    d.settle = std::time::Duration::ZERO;
    assert_eq!(d.of(t.path()), None, "a directory");
    assert_eq!(d.of(&t.path().join("missing")), None);
    assert_eq!(
        d.of(Path::new("/dev/null")),
        None,
        "a device is not opened to be read"
    );
    let fifo = t.path().join("fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        0o600.into(),
        0,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // Opened for reading, a FIFO with no writer would hold the broker here.
    assert_eq!(d.of(&fifo), None);
    let file = t.path().join("a");
    write(&file, "x");
    let link = t.path().join("b");
    std::os::unix::fs::symlink(&file, &link).unwrap_or_else(|e| panic!("{e}"));
    let via = d.of(&link).unwrap_or_else(|| panic!("no digest"));
    let real = std::fs::canonicalize(&file).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(via.real, real);
    assert_eq!(d.of(&file).map(|f| f.digest), Some(via.digest));
    assert_eq!(d.hashed, 1, "one file, hashed once");
}

#[test]
fn the_oldest_entries_go_past_the_bound() {
    let t = tmp();
    let mut d = Digests::at(t.path().join("c.json"));
    for i in 0..3u64 {
        let key = Key {
            path: format!("/f{i}"),
            dev: 1,
            ino: i,
            size: 0,
            mtime_ns: 0,
            ctime_ns: 0,
        };
        d.entries.insert(key, (String::new(), i));
    }
    let filler = (3..MAX_ENTRIES as u64 + 2).map(|i| {
        let key = Key {
            path: format!("/f{i}"),
            dev: 1,
            ino: i,
            size: 0,
            mtime_ns: 0,
            ctime_ns: 0,
        };
        (key, (String::new(), i))
    });
    d.entries.extend(filler);
    d.evict();
    assert_eq!(d.entries.len(), MAX_ENTRIES);
    assert!(
        !d.entries.keys().any(|k| k.ino < 2),
        "the two oldest are gone"
    );
    assert!(d.entries.keys().any(|k| k.ino == 2));
}
