//! Looking at the filesystem the broker works on: its temporaries, directory listings, modes,
//! the umask and special files.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The sorted names of the entries of `dir`.
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The sorted names of the broker's temporaries (`.fsbroker-*`) in `dir`.
pub fn temporaries(dir: &Path) -> Vec<String> {
    names(dir)
        .into_iter()
        .filter(|n| n.starts_with(".fsbroker-"))
        .collect()
}

/// Asserts that `dir` holds no broker temporary.
pub fn assert_no_temporaries(dir: &Path) {
    assert_eq!(
        temporaries(dir),
        Vec::<String>::new(),
        "temporary left in {dir:?}"
    );
}

/// The process umask, from `/proc/self/status`.
pub fn umask() -> u32 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with("Umask:")).unwrap();
    u32::from_str_radix(line.split_whitespace().nth(1).unwrap(), 8).unwrap()
}

/// The permission bits (with set-id and sticky bits) of `p`.
pub fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// Whether anything (even a dangling link) is at `p`.
pub fn present(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

/// Creates a FIFO at `p`.
pub fn mkfifo(p: &Path) {
    let st = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .expect("run mkfifo");
    assert!(st.success(), "mkfifo failed");
}

impl super::Fixture {
    /// The text of the file at `rel` under the root.
    pub fn text_of(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root.join(rel)).unwrap()
    }
}
