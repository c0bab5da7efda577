//! A pseudo-terminal for the tests of the terminal consent prompt.

use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use std::path::PathBuf;

/// Opens a pseudo-terminal: its master side, and the path of its slave side, which a prompt
/// opens as its terminal.
pub fn pty() -> (std::fs::File, PathBuf) {
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let name = ptsname(&master, Vec::new()).unwrap();
    let path = PathBuf::from(name.into_string().unwrap());
    (std::fs::File::from(master), path)
}
