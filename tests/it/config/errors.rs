//! The message of every class of invalid file: syntax errors, unknown keys, wrong types,
//! out-of-range values, broken profiles and model roles, each naming the file, line and
//! key and saying what to do.

use super::check_error;

#[test]
fn syntax_errors() {
    check_error(
        "[session\nidle_timeout = 3\n",
        1,
        "session",
        &["expected `]`"],
    );
    check_error(
        "[retry]\nmax_attempts = = 3\n",
        2,
        "retry.max_attempts",
        &[],
    );
    check_error(
        "[session]\nidle_timeout = 3\nidle_timeout = 4\n",
        3,
        "session.idle_timeout",
        &["duplicate key"],
    );
}

#[test]
fn unknown_keys_at_every_level() {
    check_error(
        "[sesion]\nidle_timeout = 3\n",
        1,
        "sesion",
        &["unknown key `sesion`", "`session`"],
    );
    check_error(
        "\nverbose = true\n",
        2,
        "verbose",
        &["unknown key `verbose`", "`models`"],
    );
    check_error(
        "[session.maintenance]\nmode = \"warn\"\nmax_entrys = 3\n",
        3,
        "session.maintenance.max_entrys",
        &["`max_entries`"],
    );
    check_error(
        "[providers.work]\nkind = \"anthropic\"\nmodel = \"m\"\napi_key = \"sk-x\"\n",
        4,
        "providers.work.api_key",
        &["api_key_env"],
    );
}

#[test]
fn wrong_types() {
    check_error(
        "[session]\nsnapshot_every = \"x\"\n",
        2,
        "session.snapshot_every",
        &["wrong type", "whole number"],
    );
    check_error(
        "[session]\nmax_rounds = \"many\"\n",
        2,
        "session.max_rounds",
        &["wrong type", "whole number"],
    );
    check_error(
        "[session]\ncompaction_threshold = \"high\"\n",
        2,
        "session.compaction_threshold",
        &["a number"],
    );
    check_error("session = 3\n", 1, "session", &["table"]);
    check_error(
        "[[session]]\nidle_timeout = 1\n",
        1,
        "session",
        &["found an array", "table"],
    );
    check_error(
        "[retry]\nmax_attempts = -1\n",
        2,
        "retry.max_attempts",
        &["-1"],
    );
    check_error(
        "[session]\nidle_timeout = true\n",
        2,
        "session.idle_timeout",
        &["\"30m\""],
    );
}

#[test]
fn bad_values() {
    check_error(
        "[session]\ncompaction_threshold = 1.5\n",
        2,
        "session.compaction_threshold",
        &["1.5", "between 0 and 1"],
    );
    check_error(
        "[session]\ncompaction_threshold = 0\n",
        2,
        "session.compaction_threshold",
        &["between 0 and 1"],
    );
    check_error(
        "[session]\nmax_rounds = 0\n",
        2,
        "session.max_rounds",
        &["0 is out of range", "from 1 to 10000"],
    );
    check_error(
        "[subagents]\nmax_concurrent = 0\n",
        2,
        "subagents.max_concurrent",
        &["is 0", "from 1 to 64"],
    );
    check_error(
        "\n\n[retry]\nmax_attempts = 0\n",
        4,
        "retry.max_attempts",
        &["from 1 to"],
    );
    check_error(
        "[retry]\nbase_delay_ms = 5000\nmax_delay_ms = 10\n",
        3,
        "retry.max_delay_ms",
        &["base_delay_ms"],
    );
    check_error(
        "[session]\nprefill_timeout = 0\n",
        2,
        "session.prefill_timeout",
        &["longer than zero"],
    );
    check_error(
        "[session]\nfirst_token_timeout = -5\n",
        2,
        "session.first_token_timeout",
        &["negative"],
    );
    check_error(
        "[session]\nidle_timeout = 9223372036854775807\n",
        2,
        "session.idle_timeout",
        &["hundred years"],
    );
    check_error(
        "[retry]\nmax_delay_ms = 9223372036854775807\n",
        2,
        "retry.max_delay_ms",
        &["one hour"],
    );
    // Dotted keys and inline tables are located like sections.
    check_error(
        "# tern\nsession.compaction_threshold = 2.0\n",
        2,
        "session.compaction_threshold",
        &["between 0 and 1"],
    );
    check_error(
        "[session]\nmaintenance = { mode = \"warn\", max_entries = 0 }\n",
        2,
        "session.maintenance.max_entries",
        &["from 1 to"],
    );
    check_error(
        "[session]\ncompaction_threshold = nan\n",
        2,
        "session.compaction_threshold",
        &["NaN is out of range"],
    );
    check_error(
        "[session.maintenance]\nmode = \"delete\"\n",
        2,
        "session.maintenance.mode",
        &["\"delete\"", "\"warn\" or \"enforce\""],
    );
    check_error(
        "[session.maintenance]\nprune_after = \"30x\"\n",
        2,
        "session.maintenance.prune_after",
        &["\"30x\"", "\"30d\""],
    );
    check_error(
        "[session.maintenance]\nmax_disk_bytes = \"2XB\"\n",
        2,
        "session.maintenance.max_disk_bytes",
        &["\"2XB\"", "\"512MB\"", "GiB"],
    );
    check_error(
        "[session.reset]\ndaily = true\ndaily_at = \"25:00\"\n",
        3,
        "session.reset.daily_at",
        &["\"25:00\"", "\"HH:MM\""],
    );
    check_error(
        "[session.reset]\nidle_minutes = 99999999\n",
        2,
        "session.reset.idle_minutes",
        &["out of range", "0 for off"],
    );
    check_error(
        "[session.maintenance]\nmax_disk_bytes = \"1GB\"\nhigh_water_bytes = \"2GB\"\n",
        3,
        "session.maintenance.high_water_bytes",
        &["must not exceed max_disk_bytes"],
    );
}

#[test]
fn bad_profiles() {
    check_error(
        "[providers.work]\nkind = \"gemini\"\nmodel = \"m\"\n",
        2,
        "providers.work.kind",
        &["\"gemini\"", "\"anthropic\", \"openai\" or \"ollama\""],
    );
    check_error(
        "[providers.work]\nmodel = \"m\"\n",
        1,
        "providers.work",
        &["no `kind`"],
    );
    check_error(
        "[providers.work]\nkind = \"openai\"\n",
        1,
        "providers.work",
        &["no `model`"],
    );
    check_error(
        "[providers.work]\nkind = \"openai\"\nmodel = \"m\"\nbase_url = \"localhost:8080\"\n",
        4,
        "providers.work.base_url",
        &["\"localhost:8080\"", "http:// or https://"],
    );
    check_error(
        "[providers.work]\nkind = \"openai\"\nmodel = \"m\"\ncontext_window = 8000\nmax_output_tokens = 9000\n",
        5,
        "providers.work.max_output_tokens",
        &["smaller than context_window"],
    );
    check_error(
        "[providers.\"a/b\"]\nkind = \"openai\"\nmodel = \"m\"\n",
        1,
        "providers.\"a/b\"",
        &["`/`"],
    );
}

#[test]
fn model_roles_must_name_known_profiles() {
    check_error(
        "[models]\ndefault = \"work/claude\"\n",
        2,
        "models.default",
        &["\"work\"", "anthropic, ollama, openai", "[providers.work]"],
    );
    check_error(
        "[models]\nfallback = \"nope/x\"\n",
        2,
        "models.fallback",
        &["\"nope\""],
    );
    check_error(
        "[models]\nprovider = \"nope\"\n",
        2,
        "models.provider",
        &["\"nope\"", "known profiles"],
    );
    check_error(
        "[models]\ncompaction = \"work/\"\n",
        2,
        "models.compaction",
        &["empty"],
    );
}
