//! Argument validation for tool calls: typed accessors over the JSON object a model sends.
//!
//! Models get arguments wrong in a handful of ways (a missing key, a number sent as a string, a
//! near-miss name such as `file_path` for `path`). Every accessor returns an [`ArgError`] that
//! names the argument and the expected type, so the model can fix the call on its next try, and
//! nothing here panics whatever the input.

use super::ToolOutput;
use super::paths::{self, PathArg};
use crate::domain::call_text::json_kind;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// A problem with a call's arguments, phrased for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ArgError(pub String);

impl From<ArgError> for ToolOutput {
    fn from(err: ArgError) -> Self {
        ToolOutput::error(err.0)
    }
}

/// The arguments of one call, checked to be a JSON object.
pub struct Args<'a> {
    tool: &'static str,
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    /// Checks that `input` is an object; `null` counts as an empty one, since some providers
    /// send it for a call without arguments.
    pub fn new(tool: &'static str, input: &'a Value) -> Result<Self, ArgError> {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        match input {
            Value::Object(map) => Ok(Self { tool, map }),
            Value::Null => Ok(Self {
                tool,
                map: EMPTY.get_or_init(Map::new),
            }),
            other => Err(ArgError(format!(
                "{tool}: the arguments must be a JSON object, got {}",
                json_kind(other)
            ))),
        }
    }

    /// That the call gives no argument but `names`: a tool whose arguments are all optional
    /// would otherwise take a misnamed one (`query` for `name`) for a call without it.
    pub fn known(&self, names: &[&str]) -> Result<(), ArgError> {
        let unknown: Vec<&str> = self
            .map
            .keys()
            .map(String::as_str)
            .filter(|key| !names.contains(key))
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        Err(ArgError(format!(
            "{}: no argument is called {}; the arguments are {}",
            self.tool,
            unknown
                .iter()
                .map(|key| format!("`{key}`"))
                .collect::<Vec<_>>()
                .join(", "),
            names.join(", ")
        )))
    }

    /// A required string.
    pub fn string(&self, name: &str) -> Result<&'a str, ArgError> {
        match self.map.get(name) {
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(self.wrong_type(name, "a string", other)),
            None => Err(self.missing(name, "a string")),
        }
    }

    /// An optional string; `null` counts as absent.
    pub fn opt_string(&self, name: &str) -> Result<Option<&'a str>, ArgError> {
        match self.map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.wrong_type(name, "a string", other)),
        }
    }

    /// An optional whole number of at least `min`. A numeric string such as `"20"` is accepted
    /// because models often quote numbers, and refusing them only costs a round trip.
    pub fn opt_u64(&self, name: &str, min: u64) -> Result<Option<u64>, ArgError> {
        let expected = if min == 0 {
            "a whole number (0 or more)".to_string()
        } else {
            format!("a whole number of at least {min}")
        };
        let value = match self.map.get(name) {
            None | Some(Value::Null) => return Ok(None),
            Some(v) => v,
        };
        let parsed = match value {
            Value::Number(n) => n.as_u64().or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= u64::MAX as f64)
                    .map(|f| f as u64)
            }),
            Value::String(s) => s.trim().parse::<u64>().ok(),
            _ => None,
        };
        match parsed {
            Some(n) if n >= min => Ok(Some(n)),
            _ => Err(self.wrong_type(name, &expected, value)),
        }
    }

    /// An optional boolean; the strings `"true"` and `"false"` are accepted too.
    pub fn opt_bool(&self, name: &str) -> Result<Option<bool>, ArgError> {
        match self.map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(Value::String(s)) if s == "true" => Ok(Some(true)),
            Some(Value::String(s)) if s == "false" => Ok(Some(false)),
            Some(other) => Err(self.wrong_type(name, "true or false", other)),
        }
    }

    /// A path, resolved against `cwd` and normalised (see [`paths::resolve`]); when `arg` allows
    /// it to be left out, absent means `cwd` itself.
    pub fn path(&self, name: &str, cwd: &Path, arg: PathArg) -> Result<PathBuf, ArgError> {
        let raw = match arg {
            PathArg::Required => self.string(name)?,
            PathArg::Optional => match self.opt_string(name)? {
                Some(raw) => raw,
                None => return Ok(paths::normalize(cwd)),
            },
        };
        paths::resolve(cwd, raw).map_err(|e| ArgError(format!("{}: {e}", self.tool)))
    }

    fn missing(&self, name: &str, expected: &str) -> ArgError {
        let mut msg = format!(
            "{}: missing required argument `{name}` ({expected})",
            self.tool
        );
        let others: Vec<&str> = self.map.keys().map(String::as_str).collect();
        if !others.is_empty() {
            msg.push_str(&format!("; the call had: {}", others.join(", ")));
        }
        ArgError(msg)
    }

    fn wrong_type(&self, name: &str, expected: &str, got: &Value) -> ArgError {
        ArgError(format!(
            "{}: argument `{name}` must be {expected}, got {}",
            self.tool,
            describe(got)
        ))
    }
}

/// The type and, when short, the value itself, so the model sees what it sent.
fn describe(value: &Value) -> String {
    let text = value.to_string();
    if text.len() <= 40 {
        format!("{} ({text})", json_kind(value))
    } else {
        json_kind(value).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn missing_argument_names_it_and_the_keys_that_were_sent() {
        let input = json!({"file_path": "a.rs"});
        let args = Args::new("file_read", &input).unwrap();
        let err = args.string("path").unwrap_err();
        assert_eq!(
            err.0,
            "file_read: missing required argument `path` (a string); the call had: file_path"
        );
    }

    #[test]
    fn numbers_accept_quoted_and_integral_floats_but_not_fractions() {
        let check = |value: Value, expected: Option<u64>| {
            let input = json!({ "n": value });
            let args = Args::new("t", &input).unwrap();
            assert_eq!(args.opt_u64("n", 1).ok().flatten(), expected, "{input}");
        };
        check(json!(5), Some(5));
        check(json!("7"), Some(7));
        check(json!(3.0), Some(3));
        check(json!(2.5), None);
        check(json!(0), None);
        check(json!(-1), None);
        check(json!(true), None);
        check(Value::Null, None);
    }

    #[test]
    fn wrong_type_names_the_expected_type() {
        let input = json!({"path": 5});
        let args = Args::new("t", &input).unwrap();
        assert_eq!(
            args.string("path").unwrap_err().0,
            "t: argument `path` must be a string, got a number (5)"
        );
    }

    #[test]
    fn non_object_arguments_are_refused_but_null_is_empty() {
        assert!(Args::new("t", &json!([1])).is_err());
        let null = Value::Null;
        let args = Args::new("t", &null).unwrap();
        assert_eq!(args.opt_bool("x"), Ok(None));
    }
}
