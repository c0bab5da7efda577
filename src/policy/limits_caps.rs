//! The bounds of `[limits]`: each value below its cap (a value past it is a typo or an
//! attack on the broker's own memory), and each default within its maximum.

use super::Limits;
use super::load::Invalid;

impl Limits {
    /// Each limit is below its cap, and each default is within its maximum.
    pub(super) fn validate(&self) -> Result<(), Invalid> {
        let l = self;
        let caps: [(&str, u64, u64); 16] = [
            ("limits.bytes_per_second", l.bytes_per_second.get(), 1 << 40),
            ("limits.burst_bytes", l.burst_bytes.get(), 1 << 40),
            ("limits.timeout_ms", l.timeout_ms.get(), 86_400_000),
            ("limits.lock_wait_ms", l.lock_wait_ms.get(), 86_400_000),
            (
                "limits.max_chunk_bytes",
                l.max_chunk_bytes.get() as u64,
                256 << 20,
            ),
            (
                "limits.max_line_bytes",
                l.max_line_bytes.get() as u64,
                1 << 30,
            ),
            (
                "limits.max_list_page",
                l.max_list_page.get() as u64,
                100_000,
            ),
            ("limits.max_in_flight", l.max_in_flight.get() as u64, 1024),
            ("limits.max_uploads", l.max_uploads.get() as u64, 1024),
            ("limits.max_watches", l.max_watches.get() as u64, 65_536),
            ("limits.upload_idle_secs", l.upload_idle_secs.get(), 86_400),
            (
                "limits.max_kernel_watches",
                l.max_kernel_watches.get() as u64,
                1 << 20,
            ),
            (
                "limits.watch_coalesce_ms",
                l.watch_coalesce_ms.get(),
                10_000,
            ),
            ("limits.watch_queue", l.watch_queue.get() as u64, 65_536),
            (
                "limits.cpu_ms_per_minute",
                l.cpu_ms_per_minute.get(),
                3_600_000,
            ),
            (
                "limits.max_violations_per_minute",
                u64::from(l.max_violations_per_minute.get()),
                1_000_000,
            ),
        ];
        for (key, value, cap) in caps {
            if value > cap {
                return Err(Invalid::unplaced(key, format!("must be at most {cap}")));
            }
        }
        if l.chunk_bytes > l.max_chunk_bytes {
            return Err(Invalid::unplaced(
                "limits.chunk_bytes",
                "must not exceed limits.max_chunk_bytes".into(),
            ));
        }
        if l.list_page > l.max_list_page {
            return Err(Invalid::unplaced(
                "limits.list_page",
                "must not exceed limits.max_list_page".into(),
            ));
        }
        Ok(())
    }
}
