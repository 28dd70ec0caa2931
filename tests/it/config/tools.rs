//! `[tools]`: the variables commands get or never get, how long a command may run, the
//! defaults, and the message of each invalid value.

use super::{check_error, loaded};
use pretty_assertions::assert_eq;
use std::time::Duration;
use tern::config::ToolSettings;

#[test]
fn defaults_pass_and_strip_nothing_and_allow_ten_minutes_up_to_an_hour() {
    let tools = loaded("", &[]).tools;
    assert_eq!(tools, ToolSettings::default());
    assert!(tools.pass_env.is_empty() && tools.strip_env.is_empty());
    assert_eq!(tools.shell_max_duration, Duration::from_secs(600));
    assert_eq!(tools.shell_max_duration_ceiling, Duration::from_secs(3600));
}

#[test]
fn every_key_is_read() {
    let config = loaded(
        "[tools]\npass_env = [\"GH_PAT\", \"deploy_token\"]\nstrip_env = [\"CORP_*\", \"X\"]\n\
         shell_max_duration = \"90s\"\nshell_max_duration_ceiling = 1800\n",
        &[],
    );
    assert_eq!(
        config.tools,
        ToolSettings {
            pass_env: vec!["GH_PAT".into(), "deploy_token".into()],
            strip_env: vec!["CORP_*".into(), "X".into()],
            shell_max_duration: Duration::from_secs(90),
            shell_max_duration_ceiling: Duration::from_secs(1800),
        }
    );
    let text = config.render();
    for line in [
        "[tools]",
        "pass_env = [\"GH_PAT\", \"deploy_token\"]",
        "strip_env = [\"CORP_*\", \"X\"]",
        "shell_max_duration = \"90s\"",
        "shell_max_duration_ceiling = \"30m\"",
    ] {
        assert!(text.contains(line), "`{line}` missing from:\n{text}");
    }
}

#[test]
fn a_longer_default_raises_the_unset_ceiling_with_it() {
    let tools = loaded("[tools]\nshell_max_duration = \"2h\"\n", &[]).tools;
    assert_eq!(tools.shell_max_duration_ceiling, Duration::from_secs(7200));
}

#[test]
fn the_ceiling_must_not_be_below_the_default() {
    check_error(
        "[tools]\nshell_max_duration = \"20m\"\nshell_max_duration_ceiling = \"5m\"\n",
        3,
        "tools.shell_max_duration_ceiling",
        &["(5m) must be at least shell_max_duration (20m)"],
    );
    check_error(
        "[tools]\nshell_max_duration_ceiling = \"5m\"\n",
        2,
        "tools.shell_max_duration_ceiling",
        &["must be at least shell_max_duration (10m)"],
    );
}

#[test]
fn durations_are_checked_like_the_others() {
    check_error(
        "[tools]\nshell_max_duration = \"soon\"\n",
        2,
        "tools.shell_max_duration",
        &["\"soon\" is not a duration", "\"90s\""],
    );
    check_error(
        "[tools]\nshell_max_duration = 0\n",
        2,
        "tools.shell_max_duration",
        &["must be longer than zero"],
    );
}

#[test]
fn names_must_be_variable_names() {
    check_error(
        "[tools]\npass_env = [\"OK\", \"NOT OK\"]\n",
        2,
        "tools.pass_env",
        &[
            "\"NOT OK\" is not an environment variable name",
            "without `*`",
        ],
    );
    check_error(
        "[tools]\npass_env = [\"AWS_*\"]\n",
        2,
        "tools.pass_env",
        &[
            "\"AWS_*\" is not an environment variable name",
            "exact names",
        ],
    );
    check_error(
        "[tools]\nstrip_env = [\"A-B\"]\n",
        2,
        "tools.strip_env",
        &[
            "\"A-B\" is not an environment variable name or pattern",
            "\"CORP_*\"",
        ],
    );
    check_error(
        "[tools]\nstrip_env = [\"\"]\n",
        2,
        "tools.strip_env",
        &["\"\" is not an environment variable name"],
    );
    check_error(
        "[tools]\npass_env = [3]\n",
        2,
        "tools.pass_env",
        &["wrong type"],
    );
}

#[test]
fn a_pasted_key_is_not_repeated() {
    let text = "[tools]\npass_env = [\"sk-ant-api03-abcdefghijklmnopSECRET\"]\n";
    check_error(
        text,
        2,
        "tools.pass_env",
        &["entry 1 (not shown: it looks like a key)"],
    );
    let message = super::load(text, &[]).unwrap_err().to_string();
    assert!(!message.contains("SECRET"), "{message}");
}

#[test]
fn a_pattern_of_only_stars_would_strip_everything() {
    check_error(
        "[tools]\nstrip_env = [\"**\"]\n",
        2,
        "tools.strip_env",
        &["would keep every variable from commands, PATH and HOME included"],
    );
}

#[test]
fn a_name_in_both_lists_is_refused() {
    check_error(
        "[tools]\npass_env = [\"GH_PAT\"]\nstrip_env = [\"GH_PAT\"]\n",
        2,
        "tools.pass_env",
        &["\"GH_PAT\" is also in strip_env"],
    );
}

#[test]
fn unknown_keys_name_the_accepted_ones() {
    check_error(
        "[tools]\nshell_timeout = 3\n",
        2,
        "tools.shell_timeout",
        &["unknown key `shell_timeout`", "`shell_max_duration`"],
    );
}
