//! Where tern keeps its files: the config file, the database and the logs.
//!
//! `TERN_HOME` puts everything in one folder, which is what tests and isolated runs use.
//! Without it the platform's conventions apply (on Linux the XDG directories), through the
//! `directories` crate.

use std::path::{Path, PathBuf};

use super::env::Environment;
use super::error::ConfigError;

/// The file name of the config file inside the config directory.
const CONFIG_FILE: &str = "config.toml";
/// The file name of the database inside the data directory.
const DB_FILE: &str = "tern.redb";

/// tern's directories and the files in them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// `TERN_HOME` when set; `None` when the platform directories are used.
    pub home: Option<PathBuf>,
    /// Holds `config.toml`.
    pub config_dir: PathBuf,
    /// Holds the database and per-session folders.
    pub data_dir: PathBuf,
    /// Holds tern's own log files.
    pub log_dir: PathBuf,
    /// `config_dir/config.toml`.
    pub config_file: PathBuf,
    /// `data_dir/tern.redb`.
    pub db_file: PathBuf,
}

impl Paths {
    /// Finds the directories: under `TERN_HOME` if set, else the platform's directories.
    pub fn from_env(env: &Environment) -> Result<Self, ConfigError> {
        if let Some(home) = &env.tern_home {
            // A relative TERN_HOME would move with the working directory; pin it now.
            let home = std::path::absolute(home).unwrap_or_else(|_| home.clone());
            return Ok(Self::under_home(home));
        }
        let dirs = directories::ProjectDirs::from("", "", "tern").ok_or(ConfigError::NoHome)?;
        // Logs are state, not data: XDG puts them under the state dir where the platform has
        // one (Linux); elsewhere they go next to the data.
        let log_dir = dirs.state_dir().unwrap_or(dirs.data_dir()).join("logs");
        Ok(Self::from_dirs(
            None,
            dirs.config_dir(),
            dirs.data_dir(),
            log_dir,
        ))
    }

    /// Everything under one folder: `config.toml`, `data/` and `logs/`.
    pub fn under_home(home: PathBuf) -> Self {
        let data_dir = home.join("data");
        let log_dir = home.join("logs");
        Self::from_dirs(Some(home.clone()), &home, &data_dir, log_dir)
    }

    fn from_dirs(
        home: Option<PathBuf>,
        config_dir: &Path,
        data_dir: &Path,
        log_dir: PathBuf,
    ) -> Self {
        Self {
            home,
            config_file: config_dir.join(CONFIG_FILE),
            db_file: data_dir.join(DB_FILE),
            config_dir: config_dir.to_path_buf(),
            data_dir: data_dir.to_path_buf(),
            log_dir,
        }
    }

    /// Creates the data and log directories if missing (the config directory is the user's
    /// to create: tern only reads it).
    pub fn create_dirs(&self) -> Result<(), ConfigError> {
        for dir in [&self.data_dir, &self.log_dir] {
            std::fs::create_dir_all(dir).map_err(|source| ConfigError::CreateDir {
                path: dir.clone(),
                source,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tern_home_holds_everything() {
        let env = Environment::from_pairs([("TERN_HOME", "/srv/tern")]);
        let paths = Paths::from_env(&env).unwrap();
        assert_eq!(paths.home, Some(PathBuf::from("/srv/tern")));
        assert_eq!(paths.config_file, PathBuf::from("/srv/tern/config.toml"));
        assert_eq!(paths.db_file, PathBuf::from("/srv/tern/data/tern.redb"));
        assert_eq!(paths.log_dir, PathBuf::from("/srv/tern/logs"));
    }
}
