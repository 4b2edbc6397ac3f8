//! What a process holds, read from `/proc` (Linux): its resident memory, its threads and its
//! open file descriptors.

use std::io;

/// One reading of a process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessSample {
    /// Resident set size, in bytes (`VmRSS`).
    pub rss_bytes: u64,
    /// Threads (`Threads`).
    pub threads: u64,
    /// Open file descriptors (entries of `/proc/PID/fd`).
    pub fds: u64,
    /// Of those, sockets (connections and listeners).
    pub sockets: u64,
}

/// Reads process `pid` (`None`: this process).
///
/// Needs Linux's `/proc`; elsewhere the error says so.
pub fn sample(pid: Option<u32>) -> io::Result<ProcessSample> {
    let dir = match pid {
        Some(pid) => format!("/proc/{pid}"),
        None => "/proc/self".to_owned(),
    };
    let status = std::fs::read_to_string(format!("{dir}/status")).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot read {dir}/status ({e}): measuring a process needs Linux's /proc"),
        )
    })?;
    let field = |name: &str| -> io::Result<u64> {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{dir}/status has no readable `{name}` line"),
                )
            })
    };
    let rss_kib = field("VmRSS:")?;
    let threads = field("Threads:")?;
    let (mut fds, mut sockets) = (0, 0);
    for entry in std::fs::read_dir(format!("{dir}/fd"))? {
        // A descriptor closed between the listing and the look is not counted.
        let Ok(entry) = entry else { continue };
        fds += 1;
        if std::fs::read_link(entry.path())
            .is_ok_and(|target| target.to_string_lossy().starts_with("socket:"))
        {
            sockets += 1;
        }
    }
    Ok(ProcessSample {
        rss_bytes: rss_kib * 1024,
        threads,
        fds,
        sockets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn this_process_has_memory_threads_and_descriptors() {
        let before = sample(None).unwrap();
        assert!(before.rss_bytes > 0 && before.threads >= 1 && before.fds >= 3);
        // Many at once: the other tests of this binary open and close descriptors meanwhile.
        let files: Vec<_> = (0..64)
            .map(|_| std::fs::File::open("/proc/self/status").unwrap())
            .collect();
        let during = sample(None).unwrap();
        drop(files);
        assert!(during.fds > before.fds, "{before:?} then {during:?}");
    }

    #[test]
    fn a_missing_process_is_a_clear_error() {
        let error = sample(Some(u32::MAX)).unwrap_err();
        assert!(error.to_string().contains("/proc"), "{error}");
    }
}
