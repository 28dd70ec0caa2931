//! Validation of `[tools]`: the variables commands get or never get (`pass_env`,
//! `strip_env`) and how long a command may run (`shell_max_duration`, and the ceiling on what
//! the model may ask for, `shell_max_duration_ceiling`).

use super::error::ConfigError;
use super::load::Validator;
use super::raw::RawTools;
use super::settings::ToolSettings;
use super::units::format_duration;
use crate::domain::secret_shapes::holds_token;

impl Validator<'_> {
    /// `[tools]`.
    pub(super) fn tools(&self, raw: RawTools) -> Result<ToolSettings, ConfigError> {
        let d = ToolSettings::default();
        let key = |name| ["tools", name];
        let pass_env = raw.pass_env.unwrap_or_default();
        let strip_env = raw.strip_env.unwrap_or_default();
        for (at, name) in pass_env.iter().enumerate() {
            if !is_variable_name(name, false) {
                return Err(self.error(
                    &key("pass_env"),
                    format!(
                        "{} is not an environment variable name; pass_env takes exact names \
                         of letters, digits and `_`, without `*` (like \"GH_PAT\")",
                        shown_entry(at, name)
                    ),
                ));
            }
            if strip_env.contains(name) {
                return Err(self.error(
                    &key("pass_env"),
                    format!(
                        "\"{name}\" is also in strip_env; keep it in one of the two lists \
                         (pass_env lets it through, strip_env keeps it out)"
                    ),
                ));
            }
        }
        for (at, pattern) in strip_env.iter().enumerate() {
            if !is_variable_name(pattern, true) {
                return Err(self.error(
                    &key("strip_env"),
                    format!(
                        "{} is not an environment variable name or pattern; strip_env takes \
                         names of letters, digits and `_`, where `*` matches any run of \
                         characters (like \"CORP_*\")",
                        shown_entry(at, pattern)
                    ),
                ));
            }
            if pattern.chars().all(|c| c == '*') {
                return Err(self.error(
                    &key("strip_env"),
                    format!(
                        "\"{pattern}\" would keep every variable from commands, PATH and HOME \
                         included; name the variables, or a prefix like \"CORP_*\""
                    ),
                ));
            }
        }
        let max_duration = self.duration(
            &key("shell_max_duration"),
            raw.shell_max_duration,
            d.shell_max_duration,
            false,
        )?;
        let ceiling = match raw.shell_max_duration_ceiling {
            // A longer default than the usual ceiling raises the ceiling with it.
            None => d.shell_max_duration_ceiling.max(max_duration),
            Some(value) => {
                let ceiling = self.duration(
                    &key("shell_max_duration_ceiling"),
                    Some(value),
                    d.shell_max_duration_ceiling,
                    false,
                )?;
                if ceiling < max_duration {
                    return Err(self.error(
                        &key("shell_max_duration_ceiling"),
                        format!(
                            "({}) must be at least shell_max_duration ({}): it is the longest \
                             limit the model may ask for, and shell_max_duration the one a \
                             command gets when it asks for none",
                            format_duration(ceiling),
                            format_duration(max_duration)
                        ),
                    ));
                }
                ceiling
            }
        };
        Ok(ToolSettings {
            pass_env,
            strip_env,
            shell_max_duration: max_duration,
            shell_max_duration_ceiling: ceiling,
        })
    }
}

/// Whether `name` is an environment variable name as `[tools]` takes them: letters, digits
/// and `_`, not starting with a digit; with `glob`, `*` may stand anywhere too.
pub(super) fn is_variable_name(name: &str, glob: bool) -> bool {
    let ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || (glob && c == '*');
    !name.is_empty() && !name.starts_with(|c: char| c.is_ascii_digit()) && name.chars().all(ok)
}

/// An entry of a `[tools]` list for a message: quoted, unless it looks like a key pasted in
/// by mistake, which a message must not repeat.
fn shown_entry(at: usize, entry: &str) -> String {
    if holds_token(entry) {
        format!("entry {} (not shown: it looks like a key)", at + 1)
    } else {
        format!("\"{entry}\"")
    }
}
