//! File descriptors: every answer stream the proxy reads holds a socket, so the number of
//! requests that may wait and the idle connections kept are sized from the process's
//! descriptor limit, and running out of descriptors is back-pressure, never a server that
//! cannot be reached.

use super::pending::MAX_PENDING;

/// Descriptors kept for everything but answer streams: stdio, the roots' directory handles,
/// watches, the broker's open files, the GET stream, the POSTs of the broker's answers.
const RESERVED: u64 = 64;

/// Idle connections kept for reuse; more are closed as soon as they fall idle.
pub(super) const POOL_IDLE: usize = 16;

/// Fewest requests that may wait, however low the limit (a limit that low fails elsewhere
/// first).
const MIN_PENDING: usize = 4;

/// How many requests may wait for the remote server under a descriptor limit of `limit`:
/// each holds a socket while its answer streams, so at most half of what is left once the
/// proxy's own descriptors and the idle pool are counted, and never more than
/// [`MAX_PENDING`].
pub(super) fn pending_cap(limit: Option<u64>) -> usize {
    let Some(limit) = limit else {
        return MAX_PENDING;
    };
    let spare = limit.saturating_sub(RESERVED + POOL_IDLE as u64) / 2;
    usize::try_from(spare)
        .unwrap_or(usize::MAX)
        .clamp(MIN_PENDING, MAX_PENDING)
}

/// Whether `e` (or an error it wraps) is the process or the system running out of file
/// descriptors (`EMFILE`, `ENFILE`): a passing shortage, not an unreachable server.
pub(super) fn out_of_descriptors(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = next {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            let code = io.raw_os_error();
            if code == Some(rustix::io::Errno::MFILE.raw_os_error())
                || code == Some(rustix::io::Errno::NFILE.raw_os_error())
            {
                return true;
            }
            // An I/O error hides the error it wraps from `source`: look inside it instead.
            next = io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static));
            continue;
        }
        next = err.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_follows_the_limit() {
        assert_eq!(pending_cap(None), MAX_PENDING);
        assert_eq!(pending_cap(Some(1 << 20)), MAX_PENDING);
        assert_eq!(pending_cap(Some(256)), 88);
        assert_eq!(pending_cap(Some(10)), MIN_PENDING);
    }

    #[test]
    fn emfile_is_recognised_inside_other_errors() {
        let inner = std::io::Error::from_raw_os_error(rustix::io::Errno::MFILE.raw_os_error());
        let outer = std::io::Error::other(inner);
        assert!(out_of_descriptors(&outer));
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(!out_of_descriptors(&refused));
    }
}
