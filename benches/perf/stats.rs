//! Medians, spreads and percentiles, and the machine's state at a moment.

use serde::Serialize;

/// Values from repeated rounds (or from many operations of one round).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Samples(pub Vec<f64>);

impl Samples {
    /// Adds one value.
    pub fn push(&mut self, v: f64) {
        self.0.push(v);
    }

    fn sorted(&self) -> Vec<f64> {
        let mut v = self.0.clone();
        v.sort_by(f64::total_cmp);
        v
    }

    /// The median (mean of the middle two for an even count).
    pub fn median(&self) -> f64 {
        let v = self.sorted();
        let n = v.len();
        match n {
            0 => f64::NAN,
            _ if n % 2 == 1 => v[n / 2],
            _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        }
    }

    /// Nearest-rank percentile.
    pub fn percentile(&self, p: f64) -> f64 {
        let v = self.sorted();
        if v.is_empty() {
            return f64::NAN;
        }
        let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
        v[rank.clamp(1, v.len()) - 1]
    }

    /// The smallest value.
    pub fn min(&self) -> f64 {
        self.sorted().first().copied().unwrap_or(f64::NAN)
    }

    /// The largest value.
    pub fn max(&self) -> f64 {
        self.sorted().last().copied().unwrap_or(f64::NAN)
    }

    /// "median (min-max, n=N)" with `digits` decimals.
    pub fn show(&self, digits: usize) -> String {
        if self.0.len() == 1 {
            return format!("{:.digits$} (n=1)", self.median());
        }
        format!(
            "{:.digits$} ({:.digits$}–{:.digits$}, n={})",
            self.median(),
            self.min(),
            self.max(),
            self.0.len()
        )
    }
}

/// The 1-minute load average now.
pub fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(f64::NAN)
}

/// A field of `/proc/PID/status` in KiB (`VmHWM:`, `VmRSS:`).
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Proportional set size in KiB (shared pages divided among the processes that map them).
pub fn pss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let line = s.lines().find(|l| l.starts_with("Pss:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// One line of the summary, and one bar of the plot when it has a ratio.
#[derive(Serialize)]
pub struct Row {
    pub workload: String,
    pub ours: String,
    pub reference: String,
    /// Ours ÷ reference in speed (higher is better for us), per round.
    pub ratio: Option<Samples>,
    /// The target, in the same terms as `ratio` when there is one.
    pub target: Option<f64>,
    pub target_text: String,
    pub met: Option<bool>,
    pub machine: String,
}
