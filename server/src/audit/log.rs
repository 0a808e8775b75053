//! Where audit events go: standard output (`logPath: "-"`) or a file of JSON lines rotated by
//! size as kube-apiserver's log backend rotates it (its lumberjack logger): a line that would
//! take the file past the maximum size first moves it aside as
//! `audit-2026-11-25T14-53-10.123.log` (UTC, next to `audit.log`) and starts a new one; then
//! backups beyond the newest `maxBackups` (0: keep all) and backups older than `maxAge` days
//! by the time in their name (0: keep all) are removed. Files are `0600` in a `0700`
//! directory, since events name users and may carry objects.
//!
//! Nothing here runs on a request's task: the sink's writer thread owns the log.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use time::format_description::BorrowedFormatItem;
use time::macros::format_description;
use time::PrimitiveDateTime;

use crate::machinery::timestamp;

/// Why the log cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The log's directory cannot be made.
    #[error("cannot create the audit log directory {path}: {source}")]
    Directory {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The log file cannot be opened or created.
    #[error("cannot open the audit log {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// A write or flush failed.
    #[error("cannot write the audit log {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// Moving the full file aside, or removing old backups, failed.
    #[error("cannot rotate the audit log {path}: {source}")]
    Rotate {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// One event is larger than a whole file may be.
    #[error("an audit event of {len} bytes exceeds the audit log's maximum size of {max} bytes")]
    TooLarge {
        /// The event's size.
        len: u64,
        /// The maximum file size.
        max: u64,
    },
}

/// When the log file is rotated and which backups are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Rotate before the file would exceed this many bytes.
    pub max_size: u64,
    /// Keep at most this many backups (0: all).
    pub max_backups: usize,
    /// Remove backups older than this (`None`: keep all).
    pub max_age: Option<Duration>,
}

impl Limits {
    /// kube's flags: `--audit-log-maxsize` in megabytes (0: 100, lumberjack's default),
    /// `--audit-log-maxbackup` (0: all), `--audit-log-maxage` in days (0: no limit).
    pub fn from_config(max_size_mb: u64, max_backups: usize, max_age_days: u64) -> Limits {
        let mb = if max_size_mb == 0 { 100 } else { max_size_mb };
        Limits {
            max_size: mb.saturating_mul(1024 * 1024),
            max_backups,
            max_age: (max_age_days > 0).then(|| Duration::from_secs(max_age_days.saturating_mul(24 * 3600))),
        }
    }
}

/// The time source of rotation (a test sets its own).
pub type Clock = Box<dyn FnMut() -> SystemTime + Send>;

/// The time in a backup's name: lumberjack's `2006-01-02T15-04-05.000`, UTC.
const BACKUP_TIME: &[BorrowedFormatItem<'_>] =
    format_description!("[year]-[month]-[day]T[hour]-[minute]-[second].[subsecond digits:3]");

/// The time `t` as a backup's name writes it.
fn backup_time(t: SystemTime) -> String {
    timestamp::format_utc(t.into(), BACKUP_TIME)
}

/// The time in a backup's name, if it is one.
fn parse_backup_time(s: &str) -> Option<SystemTime> {
    Some(PrimitiveDateTime::parse(s, BACKUP_TIME).ok()?.assume_utc().into())
}

/// A file of lines rotated by size, lumberjack's way.
pub struct RotatingFile {
    path: PathBuf,
    limits: Limits,
    file: BufWriter<File>,
    size: u64,
    clock: Clock,
}

impl std::fmt::Debug for RotatingFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RotatingFile")
            .field("path", &self.path)
            .field("limits", &self.limits)
            .field("size", &self.size)
            .finish()
    }
}

/// Opens `path` for appending (created `0600`).
fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

impl RotatingFile {
    /// Opens (or creates, with its directory) the log at `path`, rotating it at once if it is
    /// already full, and removes the backups the limits no longer keep.
    pub fn open(path: &Path, limits: Limits) -> Result<RotatingFile, LogError> {
        RotatingFile::open_with_clock(path, limits, Box::new(SystemTime::now))
    }

    /// [`RotatingFile::open`] with the time taken from `clock`.
    pub fn open_with_clock(path: &Path, limits: Limits, clock: Clock) -> Result<RotatingFile, LogError> {
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| LogError::Directory {
                path: dir.to_path_buf(),
                source,
            })?;
        let file = open_append(path).map_err(|source| LogError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        let size = file
            .metadata()
            .map_err(|source| LogError::Open {
                path: path.to_path_buf(),
                source,
            })?
            .len();
        let mut log = RotatingFile {
            path: path.to_path_buf(),
            limits,
            file: BufWriter::new(file),
            size,
            clock,
        };
        if log.size >= limits.max_size {
            log.rotate()?;
        } else {
            log.remove_old_backups()?;
        }
        Ok(log)
    }

    /// Appends one line (rotating first when it would not fit).
    pub fn write_line(&mut self, line: &[u8]) -> Result<(), LogError> {
        let len = line.len() as u64;
        if len > self.limits.max_size {
            return Err(LogError::TooLarge {
                len,
                max: self.limits.max_size,
            });
        }
        if self.size + len > self.limits.max_size {
            self.rotate()?;
        }
        self.file.write_all(line).map_err(|source| LogError::Write {
            path: self.path.clone(),
            source,
        })?;
        self.size += len;
        Ok(())
    }

    /// Writes what is buffered to the file.
    pub fn flush(&mut self) -> Result<(), LogError> {
        self.file.flush().map_err(|source| LogError::Write {
            path: self.path.clone(),
            source,
        })
    }

    /// `audit-` and `.log` for `audit.log` (Go's `filepath.Ext`: from the last dot).
    fn prefix_and_ext(&self) -> (String, String) {
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match name.rfind('.') {
            Some(dot) => (format!("{}-", &name[..dot]), name[dot..].to_string()),
            None => (format!("{name}-"), String::new()),
        }
    }

    fn directory(&self) -> PathBuf {
        self.path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf()
    }

    /// Moves the file aside under its backup name and starts a new one with its mode.
    fn rotate(&mut self) -> Result<(), LogError> {
        let failed = |source| LogError::Rotate {
            path: self.path.clone(),
            source,
        };
        self.file.flush().map_err(failed)?;
        let mode = std::fs::metadata(&self.path).map(|m| m.permissions().mode()).ok();
        let (prefix, ext) = self.prefix_and_ext();
        let backup = self
            .directory()
            .join(format!("{prefix}{}{ext}", backup_time((self.clock)())));
        std::fs::rename(&self.path, &backup).map_err(failed)?;
        let file = open_append(&self.path).map_err(failed)?;
        if let Some(mode) = mode {
            file.set_permissions(std::fs::Permissions::from_mode(mode))
                .map_err(failed)?;
        }
        self.file = BufWriter::new(file);
        self.size = 0;
        self.remove_old_backups()
    }

    /// The backups next to the file, newest first.
    fn backups(&self) -> io::Result<Vec<(SystemTime, PathBuf)>> {
        let (prefix, ext) = self.prefix_and_ext();
        let mut found = Vec::new();
        for entry in std::fs::read_dir(self.directory())? {
            let entry = entry?;
            if !entry.file_type()?.is_file() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let stamp = name
                .strip_prefix(&prefix)
                .and_then(|rest| rest.strip_suffix(&ext))
                .and_then(parse_backup_time);
            if let Some(t) = stamp {
                found.push((t, entry.path()));
            }
        }
        found.sort_by_key(|(t, _)| std::cmp::Reverse(*t));
        Ok(found)
    }

    /// Removes the backups beyond `maxBackups` and those older than `maxAge`.
    fn remove_old_backups(&mut self) -> Result<(), LogError> {
        if self.limits.max_backups == 0 && self.limits.max_age.is_none() {
            return Ok(());
        }
        let failed = |source| LogError::Rotate {
            path: self.path.clone(),
            source,
        };
        let mut backups = self.backups().map_err(failed)?;
        let mut remove = Vec::new();
        if self.limits.max_backups > 0 && backups.len() > self.limits.max_backups {
            remove.extend(backups.split_off(self.limits.max_backups));
        }
        if let Some(age) = self.limits.max_age {
            let cutoff = (self.clock)().checked_sub(age).unwrap_or(SystemTime::UNIX_EPOCH);
            remove.extend(backups.into_iter().filter(|(t, _)| *t < cutoff));
        }
        for (_, path) in remove {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(failed(e)),
            }
        }
        Ok(())
    }
}

/// The audit log: standard output or a rotating file.
#[derive(Debug)]
pub enum Log {
    /// `logPath: "-"`.
    Stdout,
    /// A file.
    File(RotatingFile),
}

impl Log {
    /// The log at `path` (`-` for standard output) with `limits`.
    pub fn open(path: &Path, limits: Limits) -> Result<Log, LogError> {
        if path == Path::new("-") {
            return Ok(Log::Stdout);
        }
        RotatingFile::open(path, limits).map(Log::File)
    }

    /// Appends one line.
    pub fn write_line(&mut self, line: &[u8]) -> Result<(), LogError> {
        match self {
            Log::Stdout => io::stdout()
                .lock()
                .write_all(line)
                .map_err(|source| LogError::Write {
                    path: PathBuf::from("-"),
                    source,
                }),
            Log::File(f) => f.write_line(line),
        }
    }

    /// Writes what is buffered.
    pub fn flush(&mut self) -> Result<(), LogError> {
        match self {
            Log::Stdout => io::stdout().flush().map_err(|source| LogError::Write {
                path: PathBuf::from("-"),
                source,
            }),
            Log::File(f) => f.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    /// A clock that starts at 2026-11-25T14:53:10.123Z and moves by `step` seconds per reading.
    fn clock(step: u64) -> (Clock, Arc<AtomicU64>) {
        let start = SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_618_390_123);
        let ticks = Arc::new(AtomicU64::new(0));
        let t = ticks.clone();
        (
            Box::new(move || start + Duration::from_secs(step * t.fetch_add(1, Ordering::SeqCst))),
            ticks,
        )
    }

    fn limits(max_size: u64, max_backups: usize, max_age: Option<Duration>) -> Limits {
        Limits {
            max_size,
            max_backups,
            max_age,
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn backup_names_are_lumberjacks() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_618_390_123);
        assert_eq!(backup_time(t), "2026-11-25T14-53-10.123");
        assert_eq!(parse_backup_time("2026-11-25T14-53-10.123"), Some(t));
        assert_eq!(parse_backup_time("2026-13-25T14-53-10.123"), None);
        assert_eq!(parse_backup_time("2026-11-25T14:53:10.123"), None);
        assert_eq!(parse_backup_time("2026-11-25T14-53-10.1234"), None);
        assert_eq!(Limits::from_config(0, 0, 0), limits(100 << 20, 0, None));
        assert_eq!(
            Limits::from_config(1, 3, 2),
            limits(1 << 20, 3, Some(Duration::from_secs(2 * 86400)))
        );
    }

    #[test]
    fn a_line_that_would_not_fit_rotates_the_file_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/audit.log");
        let (clock, _) = clock(1);
        let mut log = RotatingFile::open_with_clock(&path, limits(100, 0, None), clock).unwrap();
        let line = [b'x'; 29].iter().chain(b"\n").copied().collect::<Vec<u8>>();
        for _ in 0..3 {
            log.write_line(&line).unwrap();
        }
        log.flush().unwrap();
        assert_eq!(names(path.parent().unwrap()), vec!["audit.log"]);
        log.write_line(&line).unwrap();
        log.flush().unwrap();
        let logs = path.parent().unwrap();
        assert_eq!(
            names(logs),
            vec!["audit-2026-11-25T14-53-10.123.log", "audit.log"]
        );
        assert_eq!(
            std::fs::read(logs.join("audit-2026-11-25T14-53-10.123.log"))
                .unwrap()
                .len(),
            90
        );
        assert_eq!(std::fs::read(&path).unwrap(), line);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dir_mode = std::fs::metadata(logs).unwrap().permissions().mode() & 0o777;
        assert_eq!(dir_mode, 0o700);
        assert!(matches!(
            log.write_line(&[b'y'; 101]),
            Err(LogError::TooLarge { len: 101, max: 100 })
        ));
    }

    #[test]
    fn reopening_appends_and_a_full_file_is_rotated_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let (c, _) = clock(1);
        let mut log = RotatingFile::open_with_clock(&path, limits(10, 0, None), c).unwrap();
        log.write_line(b"12345\n").unwrap();
        log.flush().unwrap();
        drop(log);
        let (c, _) = clock(1);
        let mut log = RotatingFile::open_with_clock(&path, limits(10, 0, None), c).unwrap();
        log.write_line(b"abc\n").unwrap();
        log.flush().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"12345\nabc\n");
        drop(log);
        let (c, _) = clock(1);
        RotatingFile::open_with_clock(&path, limits(10, 0, None), c).unwrap();
        assert_eq!(
            names(dir.path()),
            vec!["audit-2026-11-25T14-53-10.123.log", "audit.log"]
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"");
    }

    #[test]
    fn only_the_newest_max_backups_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let (c, _) = clock(60);
        let mut log = RotatingFile::open_with_clock(&path, limits(10, 2, None), c).unwrap();
        // Each line fills the file: every write after the first rotates.
        for i in 0..5 {
            log.write_line(format!("line-{i}...\n").as_bytes()).unwrap();
        }
        log.flush().unwrap();
        let kept = names(dir.path());
        assert_eq!(kept.len(), 3, "{kept:?}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "line-4...\n");
        let backups: Vec<String> = kept
            .iter()
            .filter(|n| *n != "audit.log")
            .map(|n| std::fs::read_to_string(dir.path().join(n)).unwrap())
            .collect();
        assert_eq!(backups, vec!["line-2...\n", "line-3...\n"]);
        // Zero keeps every backup.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let (c, _) = clock(60);
        let mut log = RotatingFile::open_with_clock(&path, limits(10, 0, None), c).unwrap();
        for i in 0..5 {
            log.write_line(format!("line-{i}...\n").as_bytes()).unwrap();
        }
        assert_eq!(names(dir.path()).len(), 5);
    }

    #[test]
    fn backups_older_than_max_age_are_removed_and_other_files_are_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        for old in [
            "audit-2026-11-20T00-00-00.000.log",
            "audit-2026-11-25T00-00-00.000.log",
            "audit-notatime.log",
            "other-2026-11-01T00-00-00.000.log",
        ] {
            std::fs::write(dir.path().join(old), "old\n").unwrap();
        }
        let (c, _) = clock(0);
        let mut log =
            RotatingFile::open_with_clock(&path, limits(10, 0, Some(Duration::from_secs(2 * 86400))), c)
                .unwrap();
        assert_eq!(
            names(dir.path()),
            vec![
                "audit-2026-11-25T00-00-00.000.log",
                "audit-notatime.log",
                "audit.log",
                "other-2026-11-01T00-00-00.000.log"
            ]
        );
        log.write_line(b"123456789\n").unwrap();
        log.write_line(b"next\n").unwrap();
        assert_eq!(names(dir.path()).len(), 5);
    }
}
