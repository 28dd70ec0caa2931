//! Where tern keeps its files: the directories under `TERN_HOME`, and loading the config
//! file found there.

use super::{FULL, env};
use pretty_assertions::assert_eq;
use std::path::PathBuf;
use tern::config::{self, Paths};

#[test]
fn tern_home_holds_config_data_and_logs() {
    let paths = Paths::from_env(&env(&[("TERN_HOME", "/srv/tern-home")])).unwrap();
    let home = PathBuf::from("/srv/tern-home");
    assert_eq!(paths.home.as_ref(), Some(&home));
    assert_eq!(paths.config_dir, home);
    assert_eq!(paths.config_file, home.join("config.toml"));
    assert_eq!(paths.data_dir, home.join("data"));
    assert_eq!(paths.db_file, home.join("data/tern.redb"));
    assert_eq!(paths.log_dir, home.join("logs"));
}

#[test]
fn load_reads_the_file_under_tern_home_when_there_is_one() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().to_str().unwrap();
    let (paths, config) = config::load(&env(&[("TERN_HOME", home)])).unwrap();
    assert_eq!(config.source, None);
    assert_eq!(config.config_file, paths.config_file);
    let err = config.default_provider().unwrap_err().to_string();
    assert!(
        err.contains(&paths.config_file.display().to_string()),
        "{err}"
    );

    std::fs::write(&paths.config_file, "[session]\nsnapshot_every = 0\n").unwrap();
    let err = config::load(&env(&[("TERN_HOME", home)]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&paths.config_file.display().to_string()) && err.contains("line 2"),
        "{err}"
    );

    std::fs::write(&paths.config_file, FULL).unwrap();
    let (_, config) = config::load(&env(&[("TERN_HOME", home)])).unwrap();
    assert_eq!(config.source.as_ref(), Some(&paths.config_file));
    assert_eq!(config.default_provider().unwrap().name, "work");
}
