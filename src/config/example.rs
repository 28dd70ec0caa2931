//! The example config the first-run screen writes with `c`: one commented-out profile per
//! kind of provider, so the file changes nothing until the person removes the `#` in front
//! of the one they use.

/// The text of the example `config.toml`.
pub const EXAMPLE_CONFIG: &str = include_str!("../../assets/config.example.toml");

#[cfg(test)]
mod tests {
    use super::EXAMPLE_CONFIG;
    use crate::config::{ConfigError, Environment, load_from_str};
    use std::path::Path;

    /// The example with the commented-out lines of the blocks headed `headers` made live.
    fn uncommented(headers: &[&str]) -> String {
        let mut live = false;
        let mut text = String::new();
        for line in EXAMPLE_CONFIG.lines() {
            if line.is_empty() {
                live = false;
            } else if let Some(setting) = line.strip_prefix("# ")
                && headers.contains(&setting)
            {
                live = true;
            }
            let line = match line.strip_prefix("# ") {
                Some(setting) if live => setting,
                _ => line,
            };
            text.push_str(line);
            text.push('\n');
        }
        text
    }

    /// The profile the example makes the default with `headers` uncommented.
    fn check(headers: &[&str], expected: Result<&str, ()>) {
        let text = uncommented(headers);
        let config = load_from_str(&text, Path::new("/c/config.toml"), &Environment::default())
            .unwrap_or_else(|err| panic!("{err}\n{text}"));
        let chosen = match config.default_provider() {
            Ok(profile) => Ok(profile.name.as_str()),
            Err(ConfigError::NoProvider { .. }) => Err(()),
            Err(err) => panic!("{err}\n{text}"),
        };
        assert_eq!(chosen, expected, "{text}");
    }

    #[test]
    fn the_example_config_loads_and_chooses_nothing_until_a_provider_is_uncommented() {
        check(&[], Err(()));
        check(&["[providers.local]"], Ok("local"));
        check(&["[providers.ollama]"], Ok("ollama"));
        check(&["[providers.claude]"], Ok("claude"));
        check(&["[providers.gpt]"], Ok("gpt"));
        check(
            &["[providers.local]", "[providers.ollama]", "[models]"],
            Ok("local"),
        );
    }
}
