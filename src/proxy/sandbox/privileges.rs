//! Capabilities the server must not keep. Landlock restricts paths; a server started as root
//! would still hold root's capabilities (`CAP_SYS_ADMIN` lets it push keystrokes into a
//! terminal, `CAP_SYS_PTRACE` and `CAP_DAC_READ_SEARCH` reach past file permissions), and
//! root regains the whole bounding set at every `execve`. So the helper empties the bounding
//! set, the ambient set and its own sets before it runs the server, and checks they are empty.

use super::SandboxError;
use rustix::thread::{self, CapabilitySet, CapabilitySets};

/// Highest capability number tried; the kernel refuses the first one it does not know.
const LAST_CAPABILITY: u32 = 63;

/// Drops every capability for good; an error means some could not be dropped, and the server
/// must not start.
pub(super) fn drop_all() -> Result<(), SandboxError> {
    let err = |what: &str, e: rustix::io::Errno| {
        SandboxError::Profile(format!("cannot drop capabilities ({what}): {e}"))
    };
    let current = thread::capabilities(None).map_err(|e| err("read", e))?;
    let root = rustix::process::geteuid().is_root();
    if current.permitted.is_empty() && current.inheritable.is_empty() && !root {
        // An ordinary user: nothing to drop, and `no_new_privs` keeps setuid and file
        // capabilities from adding any at `execve`.
        return Ok(());
    }
    for n in 0..=LAST_CAPABILITY {
        let cap = CapabilitySet::from_bits_retain(1u64 << n);
        match thread::remove_capability_from_bounding_set(cap) {
            Ok(()) => {}
            Err(rustix::io::Errno::INVAL) => break,
            Err(e) => return Err(err("bounding set", e)),
        }
    }
    thread::clear_ambient_capability_set().map_err(|e| err("ambient set", e))?;
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    thread::set_capabilities(None, none).map_err(|e| err("own sets", e))?;
    let after = thread::capabilities(None).map_err(|e| err("read", e))?;
    let bounded = thread::capability_is_in_bounding_set(CapabilitySet::SYS_ADMIN)
        .map_err(|e| err("bounding set", e))?;
    if !after.permitted.is_empty() || !after.effective.is_empty() || bounded {
        return Err(SandboxError::Profile(
            "capabilities remain after dropping them".to_owned(),
        ));
    }
    Ok(())
}
