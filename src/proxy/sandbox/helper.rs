//! `fsbroker sandbox-exec`: the helper that restricts itself with the proxy's profile and
//! becomes the server. It runs before any runtime starts, single-threaded.

use super::profile::Profile;
use super::{PROFILE_VAR, enforce, privileges};

/// `fsbroker sandbox-exec -- SERVER...`: restricts this process with the profile in its
/// environment, then replaces it with the server: exactly the program file the profile was
/// built for, with no descriptor above 2 left open. Returns only on failure, with the exit
/// code to use (the server never started).
pub(crate) fn exec_helper(command: &[String]) -> u8 {
    let Some((program, args)) = command.split_first() else {
        eprintln!("fsbroker sandbox-exec: no server command");
        return 2;
    };
    let profile: Profile = match std::env::var(PROFILE_VAR)
        .map_err(|e| e.to_string())
        .and_then(|j| serde_json::from_str(&j).map_err(|e| e.to_string()))
    {
        Ok(p) => p,
        Err(e) => {
            eprintln!("fsbroker sandbox-exec: no usable profile in {PROFILE_VAR}: {e}");
            return 2;
        }
    };
    // The program is checked before the restriction, which could hide it from a second look.
    let held = match profile
        .program()
        .map(|p| p.reopen().map(|fd| (p, fd)))
        .transpose()
    {
        Ok(h) => h,
        Err(e) => {
            eprintln!("fsbroker: {e}");
            return 1;
        }
    };
    if let Err(e) = enforce::restrict(&profile).and_then(|()| privileges::drop_all()) {
        eprintln!("fsbroker: {e}");
        return 1;
    }
    // After the privileges are dropped: a process without them cannot raise the caps again.
    if let Err(e) = profile.caps.apply() {
        eprintln!("fsbroker: {e}");
        return 1;
    }
    // If the proxy dies without ending the server (a signal it does not handle), the kernel
    // ends the server; what the server started is then the subreaper's to find, and a proxy
    // killed outright cannot. This survives `execve`.
    if let Err(e) =
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
    {
        eprintln!("fsbroker: cannot tie the server's life to the proxy's: {e}");
        return 1;
    }
    // Descriptors the proxy inherited from its host (a file opened outside the roots, say)
    // must not reach the server: every one above stderr closes at `exec`.
    close_fds::set_fds_cloexec(3, &[]);
    let mut cmd = match &held {
        Some((p, fd)) => p.command(fd, program),
        None => std::process::Command::new(program),
    };
    let tmp = profile.tmp();
    let err = std::os::unix::process::CommandExt::exec(
        cmd.args(args)
            .env_remove(PROFILE_VAR)
            .env("TMPDIR", tmp)
            .env("TMP", tmp)
            .env("TEMP", tmp)
            .envs(profile.env.iter().map(|(k, v)| (k, v))),
    );
    eprintln!("fsbroker: cannot start {program} in the sandbox: {err}");
    match err.kind() {
        std::io::ErrorKind::NotFound => 127,
        std::io::ErrorKind::PermissionDenied => 126,
        _ => 1,
    }
}
