//! A background producer that is not `bash`: a "download" whose progress is fed by its caller.
//!
//! It shows (and its tests prove) what another producer needs to offer the job-control tools:
//! start its work on a [`JobRuntime`] with [`JobStart`] and [`JobHooks`], and load
//! [`tool_bash::JobToolsPlugin`] over the same runtime. It depends on `tool-bash` with
//! `default-features = false`, so none of the local executor is built.
//!
//! Unsafe budget: 0 — none.

use dsh_tools::jobs::{JobEnd, JobError, JobHooks, JobId, JobOutcome, JobRuntime, JobStart};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// The job kind (and id prefix) of downloads.
pub const DOWNLOAD_JOB_KIND: &str = "download";

/// The caller's handle on a started download: feed it progress, then finish it.
#[derive(Debug)]
pub struct Download {
    progress: Arc<Mutex<String>>,
    finished: watch::Sender<Option<JobEnd>>,
}

impl Download {
    /// Appends a progress line that the next `job_output` read returns.
    pub fn progress(&self, line: &str) {
        let mut progress = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        progress.push_str(line);
        progress.push('\n');
    }

    /// Ends the download as completed.
    pub fn complete(&self) {
        self.finished.send_replace(Some(JobEnd::Completed));
    }
}

/// Starts a download of `url` as a background job on `jobs`.
pub fn start_download(jobs: &JobRuntime, url: &str) -> Result<(JobId, Download), JobError> {
    let progress = Arc::new(Mutex::new(String::new()));
    let (finished, mut watcher) = watch::channel(None);
    let reader = Arc::clone(&progress);
    let cancel = finished.clone();
    let start = JobStart::new(DOWNLOAD_JOB_KIND, format!("download {url}"), move || {
        let done = async move {
            let end = match watcher.wait_for(Option::is_some).await {
                Ok(end) => (*end).unwrap_or(JobEnd::Failed),
                // The handle is gone without an end: nobody can finish the download.
                Err(_) => JobEnd::Failed,
            };
            Ok(JobOutcome::new(end))
        };
        let hooks = JobHooks::new(
            move |_reason| {
                cancel.send_if_modified(|end| {
                    let first = end.is_none();
                    if first {
                        *end = Some(JobEnd::Killed);
                    }
                    first
                });
            },
            done,
        )
        .with_reader(move |_budget| {
            std::mem::take(&mut *reader.lock().unwrap_or_else(|e| e.into_inner()))
        });
        Ok(hooks)
    });
    let id = jobs.start(start)?;
    Ok((id, Download { progress, finished }))
}
