//! The reading side: the thread that takes events off the inotify instance, and what each
//! event does to the kernel state (renames paired by cookie, moves that detach a subtree, new
//! directories that grow the watch).

use super::{Kernel, Place, RawKind, lock};
use rustix::fd::OwnedFd;
use rustix::fs::inotify::{self, ReadFlags};
use std::mem::MaybeUninit;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};

impl Kernel {
    /// Handles one kernel event. `pending` holds the old name of a rename until its new name
    /// (the next event, with the same cookie) arrives.
    fn handle(&mut self, mut ev: Event, pending: &mut Option<(Arc<Place>, String, u32)>) {
        let is_to = ev.mask.contains(ReadFlags::MOVED_TO);
        if !is_to {
            self.flush(pending);
        }
        if ev.mask.contains(ReadFlags::QUEUE_OVERFLOW) {
            self.shared.lost.store(true, Ordering::Relaxed);
            self.resync();
            return;
        }
        let Some(node) = self.nodes.get(&ev.wd) else {
            return;
        };
        let place = node.place.clone();
        let child = ev.name.as_ref().and_then(|n| node.children.get(n).copied());
        // The directory itself was renamed or deleted, or the kernel dropped its watch: it
        // left its place at least for a moment (even if it is back), so whatever it reports
        // from now on could come from anywhere. Its watches end.
        if ev.mask.intersects(
            ReadFlags::IGNORED | ReadFlags::MOVE_SELF | ReadFlags::DELETE_SELF | ReadFlags::UNMOUNT,
        ) {
            self.detach(ev.wd);
            return;
        }
        let Some(name) = ev.name.take() else {
            return;
        };
        if ev
            .mask
            .intersects(ReadFlags::MOVED_FROM | ReadFlags::DELETE)
        {
            self.left(&ev, place, name, child, pending);
            return;
        }
        if is_to || ev.mask.contains(ReadFlags::CREATE) {
            self.arrived(&ev, &place, name, child, pending);
            return;
        }
        if ev.mask.intersects(ReadFlags::MODIFY | ReadFlags::ATTRIB) {
            self.emit(&place, name, RawKind::Modified);
        }
    }

    /// The entry `name` (the directory `child`, if it was one being watched) left `place`:
    /// deleted, or the first half of a rename, which waits in `pending` for its second.
    fn left(
        &mut self,
        ev: &Event,
        place: Arc<Place>,
        name: String,
        child: Option<i32>,
        pending: &mut Option<(Arc<Place>, String, u32)>,
    ) {
        if let Some(set) = self.scanned.get_mut(&ev.wd) {
            set.remove(&name);
        }
        // The directory that had the name left it, unless it is back already (the second
        // half of an exchange reports the name it has now).
        if let Some(c) = child
            && !self.still_there(c)
        {
            self.detach(c);
        }
        if ev.mask.contains(ReadFlags::MOVED_FROM) {
            *pending = Some((place, name, ev.cookie));
        } else {
            self.emit(&place, name, RawKind::Deleted);
        }
    }

    /// The entry `name` appeared in `place`: created, or the second half of the rename in
    /// `pending`. A directory that a scan has not reported already grows the watch.
    fn arrived(
        &mut self,
        ev: &Event,
        place: &Arc<Place>,
        name: String,
        child: Option<i32>,
        pending: &mut Option<(Arc<Place>, String, u32)>,
    ) {
        let is_to = ev.mask.contains(ReadFlags::MOVED_TO);
        let seen = self
            .scanned
            .get_mut(&ev.wd)
            .is_some_and(|set| set.remove(&name));
        match pending.take() {
            Some((from_dir, from, cookie)) if is_to && cookie == ev.cookie => {
                self.emit(place, name.clone(), RawKind::MovedFrom { from_dir, from });
            }
            other => {
                *pending = other;
                self.flush(pending);
                if !seen {
                    self.emit(place, name.clone(), RawKind::Created);
                }
            }
        }
        if let Some(c) = child
            && !self.still_there(c)
        {
            // The name now holds another entry: the old directory is not there.
            self.detach(c);
        }
        if ev.mask.contains(ReadFlags::ISDIR) && !seen {
            self.grow(ev.wd, &name);
        }
    }

    /// Reports a rename's old name whose new name never came (it left the watched tree).
    fn flush(&self, pending: &mut Option<(Arc<Place>, String, u32)>) {
        if let Some((dir, name, _)) = pending.take() {
            self.emit(&dir, name, RawKind::Deleted);
        }
    }

    /// The kernel queue was read empty: every event from before the last scan is handled.
    fn drained(&mut self, pending: &mut Option<(Arc<Place>, String, u32)>) {
        self.flush(pending);
        self.scanned.clear();
        self.scanned_count = 0;
    }
}

/// One kernel event, copied out of the read buffer.
struct Event {
    wd: i32,
    mask: ReadFlags,
    cookie: u32,
    /// The entry's name; events for names that are not UTF-8 are never reported.
    name: Option<String>,
}

/// The thread: waits for the instance to become readable, then handles what it holds, one
/// buffer per hold of the lock, so that adding and removing watches never waits long. It
/// ends when the hub is gone, at once since the kernel state's drop writes `stop`.
pub(super) fn read_loop(kernel: &Weak<Mutex<Option<Kernel>>>, fd: &OwnedFd, stop: &OwnedFd) {
    let mut buf = vec![MaybeUninit::<u8>::uninit(); 64 * 1024];
    let mut pending: Option<(Arc<Place>, String, u32)> = None;
    let timeout = rustix::time::Timespec {
        tv_sec: 0,
        tv_nsec: 500_000_000,
    };
    loop {
        let mut fds = [
            rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN),
            rustix::event::PollFd::new(stop, rustix::event::PollFlags::IN),
        ];
        let _ = rustix::event::poll(&mut fds, Some(&timeout));
        if !fds[1].revents().is_empty() {
            return;
        }
        loop {
            let Some(k) = kernel.upgrade() else {
                return;
            };
            let mut guard = lock(&k);
            let Some(state) = guard.as_mut() else {
                return;
            };
            let mut reader = inotify::Reader::new(fd, &mut buf);
            let mut drained = false;
            loop {
                let ev = match reader.next() {
                    Ok(ev) => Event {
                        wd: ev.wd(),
                        mask: ev.events(),
                        cookie: ev.cookie(),
                        name: ev
                            .file_name()
                            .and_then(|n| n.to_str().ok())
                            .map(str::to_owned),
                    },
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(rustix::io::Errno::WOULDBLOCK) => {
                        drained = true;
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "reading watch events failed; reporting overflow");
                        state.shared.lost.store(true, Ordering::Relaxed);
                        drained = true;
                        break;
                    }
                };
                let unnamed_but_named = ev.name.is_none()
                    && ev.mask.intersects(
                        ReadFlags::CREATE
                            | ReadFlags::DELETE
                            | ReadFlags::MOVED_FROM
                            | ReadFlags::MOVED_TO,
                    );
                if !unnamed_but_named {
                    state.handle(ev, &mut pending);
                }
                if reader.is_buffer_empty() {
                    break;
                }
            }
            if drained {
                state.drained(&mut pending);
                break;
            }
        }
    }
}
