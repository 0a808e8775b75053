//! Static bearer tokens from a token file in kube-apiserver's format — CSV lines
//! `token,user,uid,"group1,group2"` (groups optional) — re-read when the file changes, so a
//! token is added or revoked without a restart.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use super::user::{UserInfo, AUTHENTICATED};

/// Why a token file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// The file cannot be read.
    #[error("token file {file}: {source}")]
    Read {
        /// The file.
        file: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A line is not `token,user,uid[,groups]`.
    #[error("token file {file}, line {line}: {why}")]
    Line {
        /// The file.
        file: String,
        /// The 1-based line.
        line: u64,
        /// What is wrong.
        why: String,
    },
}

/// The tokens of a token file, kept current.
#[derive(Debug, Clone)]
pub struct TokenFile {
    path: PathBuf,
    tokens: Arc<RwLock<HashMap<String, UserInfo>>>,
}

/// How often the file's modification time is looked at.
const RELOAD_EVERY: Duration = Duration::from_secs(1);

impl TokenFile {
    /// Loads `path` (an error if it is unusable) and follows its changes.
    pub fn load(path: &Path) -> Result<TokenFile, TokenFileError> {
        let tokens = parse_file(path)?;
        let file = TokenFile {
            path: path.to_path_buf(),
            tokens: Arc::new(RwLock::new(tokens)),
        };
        file.follow();
        Ok(file)
    }

    /// The user of `token`, if the file lists it.
    pub fn user(&self, token: &str) -> Option<UserInfo> {
        self.tokens
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(token)
            .cloned()
    }

    /// Re-reads the file whenever its modification time changes; a file that turns invalid
    /// keeps the last good tokens (and says so in the log).
    fn follow(&self) {
        let this = self.clone();
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        handle.spawn(async move {
            let mut seen = modified(&this.path);
            loop {
                tokio::time::sleep(RELOAD_EVERY).await;
                let now = modified(&this.path);
                if now == seen {
                    continue;
                }
                seen = now;
                match parse_file(&this.path) {
                    Ok(tokens) => {
                        tracing::info!(file = %this.path.display(), tokens = tokens.len(), "token file reloaded");
                        *this.tokens.write().unwrap_or_else(|p| p.into_inner()) = tokens;
                    }
                    Err(e) => tracing::error!(error = %e, "token file not reloaded; keeping the last good one"),
                }
            }
        });
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn parse_file(path: &Path) -> Result<HashMap<String, UserInfo>, TokenFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| TokenFileError::Read {
        file: path.display().to_string(),
        source,
    })?;
    parse(&text).map_err(|(line, why)| TokenFileError::Line {
        file: path.display().to_string(),
        line,
        why,
    })
}

/// Parses token file text: `(line, problem)` for the first bad line.
pub fn parse(text: &str) -> Result<HashMap<String, UserInfo>, (u64, String)> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .comment(Some(b'#'))
        .from_reader(text.as_bytes());
    let mut out = HashMap::new();
    for record in reader.records() {
        let record = record.map_err(|e| (e.position().map_or(0, |p| p.line()), e.to_string()))?;
        let line = record.position().map_or(0, |p| p.line());
        if record.iter().all(str::is_empty) {
            continue;
        }
        if record.len() < 3 {
            return Err((
                line,
                format!("{} fields, want token,user,uid[,groups]", record.len()),
            ));
        }
        let (token, user, uid) = (&record[0], &record[1], &record[2]);
        if token.is_empty() || user.is_empty() {
            return Err((line, "the token and the user must not be empty".into()));
        }
        let mut groups: Vec<String> = record
            .get(3)
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .map(str::to_string)
            .collect();
        groups.push(AUTHENTICATED.into());
        out.insert(
            token.to_string(),
            UserInfo {
                name: user.to_string(),
                uid: uid.to_string(),
                groups,
                ..UserInfo::default()
            },
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_users_with_groups() {
        let t = parse("# comment\nabc,alice,1,\"dev,ops\"\n\ndef,bob,2\n").unwrap();
        assert_eq!(t["abc"].name, "alice");
        assert_eq!(t["abc"].uid, "1");
        assert_eq!(t["abc"].groups, vec!["dev", "ops", AUTHENTICATED]);
        assert_eq!(t["def"].groups, vec![AUTHENTICATED]);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn a_short_line_is_refused_with_its_number() {
        let (line, why) = parse("abc,alice,1\nxyz,bob\n").unwrap_err();
        assert_eq!(line, 2);
        assert!(why.contains("2 fields"), "{why}");
    }
}
