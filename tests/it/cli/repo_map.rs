//! `tern debug repo-map` through the real binary, on a real git repository.

use crate::support::{Reply, TernHome};

fn project() -> TernHome {
    let home = TernHome::new();
    home.write_file(".gitignore", "generated/\n");
    home.write_file(
        "src/store.rs",
        "pub struct JournalStore;\n\nimpl JournalStore {\n    pub fn open_journal() -> Self { JournalStore }\n}\n",
    );
    for i in 0..4 {
        home.write_file(
            &format!("src/user{i}.rs"),
            &format!("pub fn user_{i}() {{ JournalStore::open_journal(); }}\n"),
        );
    }
    home.write_file(
        "src/cache.py",
        "class PageCache:\n    def warm_pages(self):\n        pass\n",
    );
    home.write_file(
        "src/admin.py",
        "def admin_tool():\n    PageCache().warm_pages()\n",
    );
    home.write_file("generated/out.rs", "pub struct Generated;\n");
    home.write_file("logo.c", "int logo;\0\0binary");
    home
}

fn map(home: &TernHome, args: &[&str]) -> (String, String) {
    let output = home
        .tern()
        .args(["debug", "repo-map"])
        .args(args)
        .arg(home.project())
        .output()
        .expect("running tern");
    assert!(output.status.success(), "{output:?}");
    (
        String::from_utf8(output.stdout).expect("utf-8"),
        String::from_utf8(output.stderr).expect("utf-8"),
    )
}

#[test]
fn prints_the_ranked_map_within_its_budget_and_what_each_stage_took() {
    let home = project();
    let (text, report) = map(&home, &[]);
    assert!(
        text.starts_with(
            "src/store.rs:\n1│pub struct JournalStore;\n⋮\n4│    pub fn open_journal()"
        ),
        "{text}"
    );
    assert!(
        !text.contains("Generated"),
        "ignored files stay out: {text}"
    );
    assert!(
        report.starts_with(
            "7 files mapped, 9 definitions (8 files read now, 0 from the cache); \
             left out: 0 over 1 MiB, 1 binary"
        ),
        "{report}"
    );
    for stage in ["walk", "cache", "parse", "rank", "render"] {
        assert!(report.contains(&format!("{stage} ")), "{report}");
    }
    // The same project gives the same bytes, process after process; the second reads
    // every file's tags from the cache in the data directory.
    let (again, report) = map(&home, &[]);
    assert_eq!(again, text);
    assert!(
        report.starts_with("7 files mapped, 9 definitions (0 files read now, 8 from the cache)"),
        "{report}"
    );
    let caches = std::fs::read_dir(home.home().join("data/repo-maps"))
        .unwrap()
        .count();
    assert_eq!(caches, 1);
}

#[test]
fn focus_and_budget_shape_the_map() {
    let home = project();
    let (focused, _) = map(&home, &["--focus", "./src/admin.py", "--tokens", "20"]);
    assert!(focused.starts_with("src/cache.py:"), "{focused}");
    assert!(focused.len() <= 80, "{} bytes in 20 tokens", focused.len());
    let (named, _) = map(&home, &["--focus", "warm_pages", "--tokens", "30"]);
    assert!(named.contains("def warm_pages"), "{named}");
    let (none, report) = map(&home, &["--tokens", "0"]);
    assert_eq!(none, "");
    assert!(report.contains("about 0 of 0 tokens"), "{report}");
}

#[test]
fn a_directory_that_is_not_there_is_named_with_the_fix() {
    let home = TernHome::new();
    let output = home
        .tern()
        .args(["debug", "repo-map", "/nonexistent/tern-project"])
        .output()
        .expect("running tern");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("/nonexistent/tern-project is not a directory tern can read; give the project's directory"),
        "{stderr}"
    );
}

/// A project whose store other files use, in a home whose provider is the mock.
fn cli_project() -> super::Cli {
    let cli = super::Cli::new();
    cli.home.write_config(super::NO_TITLES);
    cli.home.write_file(
        "src/store.rs",
        "pub struct JournalStore;\n\npub fn parse_config() -> usize { 0 }\n",
    );
    for i in 0..3 {
        cli.home.write_file(
            &format!("src/user{i}.rs"),
            &format!("pub fn user_{i}() {{ let s: JournalStore = todo!(); }}\n"),
        );
    }
    cli.home.write_file("a.txt", "AAA\n");
    cli
}

/// The system blocks of a recorded Anthropic request, joined.
fn system_of(request: &crate::support::RecordedRequest) -> String {
    request.body["system"]
        .as_array()
        .expect("system blocks")
        .iter()
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn tier_b_carries_the_map_and_keeps_it_byte_identical_through_a_tool_loop() {
    let cli = cli_project();
    cli.mock.push(Reply::tool_call(
        "file_read",
        serde_json::json!({"path": "a.txt"}),
    ));
    cli.mock.push(Reply::text("It says AAA."));
    let output = cli.run(&["run", "read a.txt and fix parse_config"]);
    assert!(output.status.success(), "{}", super::stderr(&output));
    let requests = cli.mock.model_requests();
    assert_eq!(requests.len(), 2);
    let (first, second) = (system_of(&requests[0]), system_of(&requests[1]));
    assert!(
        first.contains("\n[repo-map]\n")
            && first.contains("src/store.rs:\n1│pub struct JournalStore;"),
        "{first}"
    );
    assert_eq!(
        first, second,
        "the cached prefix stays the same within the turn"
    );
}

#[test]
fn print_prompt_shows_the_map_and_zero_tokens_turn_it_off() {
    let cli = cli_project();
    let output = cli.run(&["run", "--print-prompt", "look at parse_config"]);
    assert!(output.status.success(), "{}", super::stderr(&output));
    let text = super::stdout(&output);
    let map = text.find("[repo-map]\n").expect("a map in tier B");
    let session = text.find("[session]\nid: ").expect("the session block");
    assert!(map < session, "{text}");
    assert!(
        text.contains("3│pub fn parse_config() -> usize { 0 }"),
        "{text}"
    );
    cli.home.write_config(&format!(
        "{}[context]\nrepo_map_tokens = 0\n",
        super::NO_TITLES
    ));
    let output = cli.run(&["run", "--print-prompt", "look at parse_config"]);
    assert!(output.status.success(), "{}", super::stderr(&output));
    assert!(!super::stdout(&output).contains("[repo-map]"));
    cli.home.write_config("[context]\nrepo_map_tokens = -1\n");
    let output = cli.run(&["run", "--print-prompt", "hi"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        super::stderr(&output).contains("it takes a number of tokens from 0 (no map) to 65536"),
        "{}",
        super::stderr(&output)
    );
}

#[test]
fn the_model_looks_names_up_and_asks_for_a_focused_map_in_a_session() {
    let cli = cli_project();
    cli.mock.push(Reply::tool_call(
        "symbols",
        serde_json::json!({"name": "JournalStore"}),
    ));
    cli.mock.push(Reply::tool_call(
        "repo_map",
        serde_json::json!({"focus": ["src/user2.rs"], "tokens": 200}),
    ));
    cli.mock.push(Reply::text("Found it."));
    let output = cli.run(&["run", "where is JournalStore used?"]);
    assert!(output.status.success(), "{}", super::stderr(&output));
    let requests = cli.mock.model_requests();
    assert_eq!(requests.len(), 3);
    let results = crate::session::tool_result_texts(&requests[2].body);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results[0].starts_with(
            "`JournalStore` is defined at:\nsrc/store.rs:1: type pub struct JournalStore;\n\
             Referred to in 3 files, most often first:\n\
             src/user0.rs:1: pub fn user_0() { let s: JournalStore = todo!(); }\n"
        ),
        "{}",
        results[0]
    );
    // Centred on user2.rs: what it uses first, then the file itself, then the others.
    assert!(
        results[1].starts_with(
            "src/store.rs:\n1│pub struct JournalStore;\n⋮\n3│pub fn parse_config() -> usize { 0 }\n\
             src/user2.rs:\n"
        ),
        "{}",
        results[1]
    );
    // The tags read for the first call were kept for the second and the next session.
    let maps = std::fs::read_dir(cli.home.home().join("data/repo-maps"))
        .expect("the tag cache's folder")
        .count();
    assert_eq!(maps, 1);
}

#[test]
fn map_in_the_interface_centres_on_the_conversation_in_either_terminal() {
    let cli = cli_project();
    let first = super::tmux::Tmux::start(&cli, &[]);
    first.wait_for("message tern");
    // Before anything is said, the whole project, evenly.
    first.type_text("/map ");
    first.keys(&["Enter"]);
    let screen = first.wait_for("centred on: nothing yet");
    assert!(screen.contains("1│pub struct JournalStore;"), "{screen}");

    cli.mock.push(Reply::text("Looked."));
    first.type_text("what does user_2 do?");
    first.keys(&["Enter"]);
    first.wait_for("Looked.");
    // A second terminal, a client of the first, asks through it; what it names is added to
    // the conversation's own focus.
    let listed = cli.run(&["sessions", "list", "--json"]);
    let sessions: Vec<serde_json::Value> =
        serde_json::from_str(&super::stdout(&listed)).expect("the sessions as JSON");
    let id = sessions[0]["id"].as_str().expect("a session id").to_owned();
    let second = super::tmux::Tmux::start(&cli, &["-r", &id]);
    second.wait_for("Looked.");
    second.type_text("/map src/user1.rs");
    second.keys(&["Enter"]);
    let screen = second.wait_for("centred on: src/user1.rs, user_2");
    assert!(screen.contains("src/user2.rs:"), "{screen}");
    assert!(
        !screen.contains("tern exited"),
        "the client runs on: {screen}"
    );
}
