//! Watching the file's directory with notify, and debouncing what it reports.
//!
//! The directory is watched, not the file: editors save by renaming a new file over the old
//! one, and Kubernetes updates a mounted ConfigMap by swapping the `..data` symlink. A watch
//! on the file itself would follow the old inode and then go quiet.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode, ModifyKind};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// A running watch on one directory. Dropping it stops notify's thread.
#[derive(Debug)]
pub(crate) struct DirWatch {
    // Kept for its Drop, which stops the watch.
    _watcher: RecommendedWatcher,
    /// One pending wake-up at most: it means "look at the file again".
    signals: mpsc::Receiver<()>,
    /// Set when the directory itself was removed or moved, so the watch sees nothing more.
    broken: Arc<AtomicBool>,
}

impl DirWatch {
    /// Starts watching `dir` (not recursively) for events that concern `file_name`.
    pub(crate) fn start(dir: &Path, file_name: &OsStr) -> notify::Result<Self> {
        // Capacity one: a full channel already holds the wake-up a new event would send.
        let (tx, signals) = mpsc::channel(1);
        let broken = Arc::new(AtomicBool::new(false));
        let filter = Filter {
            dir: absolute(dir),
            file_name: file_name.to_os_string(),
        };
        let broken_flag = Arc::clone(&broken);
        let mut watcher = notify::recommended_watcher(move |res: notify::Result<Event>| {
            match res {
                Ok(event) => match filter.classify(&event) {
                    Relevance::Ignore => return,
                    Relevance::File => {}
                    Relevance::DirGone => broken_flag.store(true, Ordering::Release),
                },
                Err(error) => {
                    tracing::warn!(%error, dir = %filter.dir.display(), "file watcher error, re-reading the file");
                }
            }
            // Full: a wake-up is already pending. Closed: the source is gone.
            let _ = tx.try_send(());
        })?;
        watcher.watch(dir, RecursiveMode::NonRecursive)?;
        Ok(Self {
            _watcher: watcher,
            signals,
            broken,
        })
    }

    /// Waits for an event. False when notify's thread has stopped and no event will come.
    pub(crate) async fn changed(&mut self) -> bool {
        self.signals.recv().await.is_some()
    }

    /// Forgets pending events: the caller is about to read the file, which covers them.
    pub(crate) fn drain(&mut self) {
        while self.signals.try_recv().is_ok() {}
    }

    /// Waits until no event has come for `quiet`, or `max` has passed since the call.
    pub(crate) async fn quiet(&mut self, quiet: Duration, max: Duration) {
        let cap = Instant::now() + max;
        loop {
            let until = (Instant::now() + quiet).min(cap);
            match tokio::time::timeout_at(until, self.signals.recv()).await {
                Ok(Some(())) if Instant::now() < cap => continue,
                _ => return,
            }
        }
    }

    /// True when the directory was removed or moved away, so this watch is useless.
    pub(crate) fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Acquire)
    }
}

/// What an event means for the watched file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Relevance {
    Ignore,
    File,
    DirGone,
}

/// Decides which directory events concern the file.
#[derive(Debug)]
struct Filter {
    dir: PathBuf,
    file_name: OsString,
}

impl Filter {
    fn classify(&self, event: &Event) -> Relevance {
        if event.need_rescan() {
            // The kernel queue overflowed: anything may have changed.
            return Relevance::File;
        }
        match event.kind {
            // A writer closed the file: its write is complete.
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => {}
            // Opens and reads change nothing, and this source's own reads cause them.
            EventKind::Access(_) => return Relevance::Ignore,
            _ => {}
        }
        let mut relevance = Relevance::Ignore;
        for path in &event.paths {
            if *path == self.dir {
                if matches!(
                    event.kind,
                    EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(_))
                ) {
                    return Relevance::DirGone;
                }
            } else if path.file_name().is_some_and(|name| self.concerns(name)) {
                relevance = Relevance::File;
            }
        }
        relevance
    }

    /// The file itself, or a Kubernetes ConfigMap entry (`..data`, `..data_tmp`,
    /// `..2024_01_01_12_00_00.123`) that the file may resolve through.
    fn concerns(&self, name: &OsStr) -> bool {
        name == self.file_name || name.as_encoded_bytes().starts_with(b"..")
    }
}

/// The directory as notify reports it: relative paths are joined to the current directory.
fn absolute(dir: &Path) -> PathBuf {
    if dir.is_absolute() {
        return dir.to_path_buf();
    }
    match std::env::current_dir() {
        Ok(cwd) => cwd.join(dir),
        Err(_) => dir.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use notify::event::{CreateKind, DataChange, RemoveKind, RenameMode};

    use super::*;

    fn filter() -> Filter {
        Filter {
            dir: PathBuf::from("/etc/sentinel"),
            file_name: OsString::from("rules.json"),
        }
    }

    fn event(kind: EventKind, paths: &[&str]) -> Event {
        paths
            .iter()
            .fold(Event::new(kind), |e, p| e.add_path(PathBuf::from(p)))
    }

    #[test]
    fn classifies_events() {
        let f = filter();
        let write = EventKind::Modify(ModifyKind::Data(DataChange::Any));
        assert_eq!(
            f.classify(&event(write, &["/etc/sentinel/rules.json"])),
            Relevance::File
        );
        assert_eq!(
            f.classify(&event(write, &["/etc/sentinel/other.json"])),
            Relevance::Ignore
        );
        // An editor's rename over the file.
        let rename = EventKind::Modify(ModifyKind::Name(RenameMode::Both));
        assert_eq!(
            f.classify(&event(
                rename,
                &["/etc/sentinel/.rules.json.swp", "/etc/sentinel/rules.json"]
            )),
            Relevance::File
        );
        // The ConfigMap symlink swap.
        assert_eq!(
            f.classify(&event(
                rename,
                &["/etc/sentinel/..data_tmp", "/etc/sentinel/..data"]
            )),
            Relevance::File
        );
        assert_eq!(
            f.classify(&event(
                EventKind::Create(CreateKind::Folder),
                &["/etc/sentinel/..2024_01_01_00_00_00.1"]
            )),
            Relevance::File
        );
        // Reads, including this source's own, are ignored; a finished write is not.
        assert_eq!(
            f.classify(&event(
                EventKind::Access(AccessKind::Open(AccessMode::Any)),
                &["/etc/sentinel/rules.json"]
            )),
            Relevance::Ignore
        );
        assert_eq!(
            f.classify(&event(
                EventKind::Access(AccessKind::Close(AccessMode::Write)),
                &["/etc/sentinel/rules.json"]
            )),
            Relevance::File
        );
        assert_eq!(
            f.classify(&event(
                EventKind::Remove(RemoveKind::Folder),
                &["/etc/sentinel"]
            )),
            Relevance::DirGone
        );
        assert_eq!(
            f.classify(&Event::new(EventKind::Other).set_flag(notify::event::Flag::Rescan)),
            Relevance::File
        );
    }
}
