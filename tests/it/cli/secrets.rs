//! The real binary keeps credentials from the commands it runs: a command the model runs
//! sees neither the configured provider key nor anything that looks secret (a `pass_env`
//! name excepted, a `strip_env` one removed too), and cannot read the key from tern's own
//! `/proc/<pid>/environ`.

use super::*;

/// Values that must never reach a command, by the variable that holds them.
const SECRETS: &[(&str, &str)] = &[
    ("MY_PROVIDER_CRED", "cred-value-0001"),
    (
        "DATABASE_URL",
        "postgres://app:pw-value-0002@db.internal/app",
    ),
    ("GH_PAT", "ghp_1234567890abcdefghijABCDEFGHIJ0003"),
    ("MY_PASSWD", "passwd-value-0004"),
    ("FOO", "sk-proj-0123456789abcdefghij0005"),
];

/// Let through by `pass_env` though named like a secret.
const PASSED: (&str, &str) = ("DEPLOY_TOKEN", "passed-value-0006");
/// Kept out by `strip_env` though harmless.
const STRIPPED: (&str, &str) = ("CORP_REGION", "stripped-value-0007");

/// What the command prints: its environment, who its parent is, and what it can read of
/// the parent's environment.
const COMMAND: &str = "env; echo \"parent=$PPID\"; \
     tr '\\0' '\\n' < /proc/$PPID/environ; echo \"read-exit=$?\"";

#[test]
fn commands_never_see_credentials_and_cannot_read_them_from_tern() {
    let cli = Cli::new();
    cli.home.write_config(&format!(
        r#"
[models]
provider = "work"

[providers.work]
kind = "anthropic"
base_url = "{url}"
api_key_env = "MY_PROVIDER_CRED"
model = "work-model"

[tools]
pass_env = ["DEPLOY_TOKEN"]
strip_env = ["CORP_*"]
"#,
        url = cli.mock.base_url()
    ));
    cli.mock.push(Reply::tool_call(
        "shell_execute",
        json!({"command": COMMAND}),
    ));
    cli.mock.push(Reply::text("Looked."));
    let mut command = cli.home.tern_process();
    command
        .args(["run", "--approve", "all", "--output-format", "stream-json"])
        .arg("show the environment")
        .envs(SECRETS.iter().copied())
        .envs([PASSED, STRIPPED])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = command.spawn().expect("starting tern");
    let tern_pid = child.id();
    let output = child.wait_with_output().expect("tern exits");
    assert!(output.status.success(), "{}", stderr(&output));

    let lines = json_lines(&output);
    let result = lines
        .iter()
        .find(|line| line["type"] == "tool_result")
        .expect("a tool result");
    let shown = result["content"].as_str().expect("the command's output");
    let (env_part, proc_part) = shown
        .split_once(&format!("parent={tern_pid}\n"))
        .unwrap_or_else(|| panic!("bash's parent is tern ({tern_pid}): {shown}"));

    for (name, value) in SECRETS {
        assert!(
            !env_part.contains(value),
            "{name} reached the command: {shown}"
        );
    }
    assert!(
        env_part.contains(&format!("{}={}", PASSED.0, PASSED.1)),
        "pass_env lets {} through: {shown}",
        PASSED.0
    );
    assert!(!env_part.contains(STRIPPED.1), "strip_env: {shown}");
    assert!(env_part.contains("PATH="), "{shown}");

    // The provider got its key all the same.
    let requests = cli.mock.model_requests();
    assert_eq!(requests[0].header("x-api-key"), Some("cred-value-0001"));

    // tern removed its key from its own environment block, which even root can read.
    let credential = SECRETS[0].1;
    assert!(
        !proc_part.contains(credential),
        "the key is in tern's /proc environ: {proc_part}"
    );
    assert!(
        !requests[1].raw_body.contains(credential),
        "the key reached the model"
    );
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        eprintln!(
            "running as root, which may read any process's /proc/<pid>/environ: cannot check \
             that tern's is closed to its commands; checked only that the key is gone from it"
        );
        assert!(
            proc_part.contains("read-exit=0") && proc_part.contains("TERN_HOME="),
            "root reads the rest of it: {proc_part}"
        );
    } else {
        assert!(
            proc_part.contains("Permission denied") && !proc_part.contains("read-exit=0"),
            "tern's /proc environ is closed to its commands: {proc_part}"
        );
    }
    // Whatever a command manages to print (root reads tern's environment), a secret tern
    // knows by value is replaced before it is journaled or sent.
    for (name, value) in SECRETS {
        assert!(
            !requests[1].raw_body.contains(value),
            "{name} reached the model"
        );
    }
}

#[test]
fn a_key_a_command_prints_from_a_file_is_replaced_before_it_is_kept_or_sent() {
    let cli = Cli::new();
    let key = "sk-ant-api03-a-real-looking-key-0123456789";
    cli.home
        .write_file("notes/deploy.txt", &format!("the key is {key}\n"));
    cli.mock.push(Reply::tool_call(
        "shell_execute",
        json!({"command": "cat notes/deploy.txt"}),
    ));
    cli.mock.push(Reply::text("Read it."));
    let output = cli
        .home
        .tern()
        .args([
            "run",
            "--approve",
            "all",
            "--output-format",
            "stream-json",
            "read it",
        ])
        .env("ANTHROPIC_API_KEY", key)
        .env("ANTHROPIC_BASE_URL", cli.mock.base_url())
        .output()
        .expect("running tern");
    assert!(output.status.success(), "{}", stderr(&output));
    let shown = stdout(&output);
    assert!(shown.contains("the key is <secret>"), "{shown}");
    assert!(!shown.contains(key), "{shown}");
    let requests = cli.mock.model_requests();
    assert!(requests[1].raw_body.contains("the key is <secret>"));
    assert!(
        !requests[1].raw_body.contains(key),
        "the key reached the model"
    );
    assert_eq!(
        requests[1].header("x-api-key"),
        Some(key),
        "and the provider still gets it"
    );
    let db = tern::store::Store::open(&cli.db()).expect("open");
    let session = &db.list().expect("list")[0];
    let journal = format!("{:?}", db.load(&session.id).expect("load"));
    assert!(!journal.contains(key), "the key is in the journal");
}
