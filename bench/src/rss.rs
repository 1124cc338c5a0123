//! Peak resident memory of this process, from `/proc/self/status`.

use anyhow::{Context, Result};

/// A window over which the growth of peak RSS is measured.
#[derive(Debug)]
pub(crate) struct PeakRssWindow {
    start_kib: u64,
}

impl PeakRssWindow {
    /// Resets the peak (`VmHWM`) to the current RSS where the kernel allows it (writing `5` to
    /// `/proc/self/clear_refs`, Linux ≥ 4.0) and records the current RSS. Without the reset the
    /// later growth is an over-estimate (the peak since the process started), never an
    /// under-estimate.
    pub(crate) fn open() -> Result<PeakRssWindow> {
        // Failing to reset only makes the figure pessimistic, so the error is ignored.
        let _ = std::fs::write("/proc/self/clear_refs", "5");
        Ok(PeakRssWindow {
            start_kib: status_kib("VmRSS:")?,
        })
    }

    /// How far the peak RSS rose above the RSS at `open`, in bytes.
    pub(crate) fn growth_bytes(&self) -> Result<u64> {
        Ok(status_kib("VmHWM:")?.saturating_sub(self.start_kib) * 1024)
    }
}

/// The resident memory of this process now (`VmRSS`), in bytes.
pub(crate) fn current_bytes() -> Result<u64> {
    Ok(status_kib("VmRSS:")? * 1024)
}

/// One `kB` field of `/proc/self/status`.
fn status_kib(field: &str) -> Result<u64> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("cannot read /proc/self/status")?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| format!("/proc/self/status has no readable `{field}` line"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_allocation_shows_as_growth() {
        let window = PeakRssWindow::open().unwrap();
        let block = vec![1u8; 16 << 20];
        std::hint::black_box(&block);
        // Read while the block is held: a concurrent test may reset the peak at any moment.
        assert!(window.growth_bytes().unwrap() >= 8 << 20);
        drop(block);
    }
}
