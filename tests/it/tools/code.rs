//! `symbols` and `repo_map` over a real small repository: definitions and the lines that use
//! them, outlines, names like a misspelt one, focus and budget, and the errors that name a fix.

use super::{Project, check, check_error};
use serde_json::json;
use tern::domain::estimate_tokens;

/// A git repository in Rust and Python where `parse_config` is defined twice and used once.
fn fixture() -> Project {
    let p = Project::git();
    p.write(".gitignore", "target/\n");
    p.write(
        "src/config.rs",
        "pub struct Config {\n    pub name: String,\n}\n\npub fn parse_config(text: &str) -> Config {\n    Config { name: text.to_owned() }\n}\n",
    );
    p.write(
        "src/main.rs",
        "mod config;\nuse config::parse_config;\n\nfn main() {\n    let config = parse_config(\"x\");\n    println!(\"{}\", config.name);\n}\n",
    );
    p.write(
        "src/server.rs",
        "use crate::config::Config;\n\npub fn serve(config: &Config) -> usize {\n    config.name.len()\n}\n",
    );
    p.write(
        "tools/helper.py",
        "def parse_config(path):\n    return open(path).read()\n",
    );
    p.write("target/gen.rs", "pub fn parse_config() {}\n");
    p
}

#[tokio::test]
async fn symbols_finds_the_definitions_of_a_name_and_the_lines_that_use_it() {
    let p = fixture();
    let out = p.call("symbols", json!({"name": "parse_config"})).await;
    check(
        &out,
        "`parse_config` is defined in 2 places:\n\
         src/config.rs:5: function pub fn parse_config(text: &str) -> Config {\n\
         tools/helper.py:1: function def parse_config(path):\n\
         Referred to in 1 file, most often first:\n\
         src/main.rs:2: use config::parse_config;\n\
         src/main.rs:5: let config = parse_config(\"x\");\n",
    );
    // A type, used from two files; the ignored build output is not read.
    let out = p.call("symbols", json!({"name": "Config"})).await;
    assert!(
        out.content
            .starts_with("`Config` is defined at:\nsrc/config.rs:1: type pub struct Config {\n"),
        "{}",
        out.content
    );
    assert!(
        out.content
            .contains("src/server.rs:3: pub fn serve(config: &Config) -> usize {"),
        "{}",
        out.content
    );
    assert!(!out.content.contains("target/"), "{}", out.content);
}

#[tokio::test]
async fn a_qualified_name_is_looked_up_by_its_last_part() {
    let p = fixture();
    let out = p
        .call("symbols", json!({"name": "Config::parse_config"}))
        .await;
    assert!(
        out.content.starts_with(
            "`Config::parse_config` is looked up as `parse_config`, definitions beside \
             `Config` first.\n`parse_config` is defined in 2 places:\n\
             src/config.rs:5: function pub fn parse_config(text: &str) -> Config {\n"
        ),
        "{}",
        out.content
    );
    let out = p.call("symbols", json!({"name": "self.name"})).await;
    assert!(
        out.content
            .starts_with("`self.name` is looked up as `name`.\n"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn symbols_narrowed_to_a_path_looks_only_there() {
    let p = fixture();
    let out = p
        .call("symbols", json!({"name": "parse_config", "path": "tools"}))
        .await;
    check(
        &out,
        "`parse_config` is defined at:\n\
         tools/helper.py:1: function def parse_config(path):\n\
         No file refers to it.\n",
    );
    // From a working directory below the project, paths are shown from there.
    let mut p = p;
    p.ctx.cwd = p.dir.join("src");
    let out = p
        .call(
            "symbols",
            json!({"name": "parse_config", "path": "main.rs"}),
        )
        .await;
    check(
        &out,
        "`parse_config` is not defined in main.rs.\n\
         Referred to in 1 file, most often first:\n\
         main.rs:2: use config::parse_config;\n\
         main.rs:5: let config = parse_config(\"x\");\n",
    );
}

#[tokio::test]
async fn symbols_outlines_a_file_and_a_folder() {
    let p = fixture();
    let out = p.call("symbols", json!({"path": "src/config.rs"})).await;
    check(
        &out,
        "src/config.rs (rust, 2 definitions):\n\
         1  type      pub struct Config {\n\
         5  function  pub fn parse_config(text: &str) -> Config {\n",
    );
    let out = p.call("symbols", json!({"path": "src"})).await;
    let files: Vec<&str> = out
        .content
        .lines()
        .filter(|line| line.contains(" definition"))
        .collect();
    assert_eq!(
        files,
        [
            "src/config.rs (rust, 2 definitions):",
            "src/main.rs (rust, 2 definitions):",
            "src/server.rs (rust, 1 definition):",
        ],
        "{}",
        out.content
    );
}

#[tokio::test]
async fn symbols_offers_names_like_a_misspelt_one() {
    let p = fixture();
    let out = p.call("symbols", json!({"name": "parse_confg"})).await;
    assert!(out.empty && !out.is_error, "{out:?}");
    assert_eq!(
        out.content,
        "`parse_confg` is neither defined nor referred to in the project (4 files read). \
         Names like it:\nparse_config (src/config.rs:5)"
    );
}

#[tokio::test]
async fn symbols_says_what_is_wrong_and_what_to_do() {
    let p = fixture();
    check_error(
        &p.call("symbols", json!({})).await,
        &["give `name`", "`path`"],
    );
    check_error(
        &p.call("symbols", json!({"query": "main"})).await,
        &["no argument is called `query`", "name, path"],
    );
    p.write("notes.txt", "parse_config\n");
    check_error(
        &p.call("symbols", json!({"path": "notes.txt"})).await,
        &["not in a language the outline reads", "file_read"],
    );
    p.write("bin.rs", b"fn x() {}\0\0");
    check_error(
        &p.call("symbols", json!({"path": "bin.rs"})).await,
        &["bin.rs is binary"],
    );
    // A file outside the project is read only with approval.
    let outside = p.outside.join("lib.rs");
    std::fs::write(&outside, "fn elsewhere() {}\n").unwrap();
    let input = json!({"path": outside.to_str().unwrap()});
    assert!(matches!(
        p.need("symbols", input.clone()),
        tern::tools::ApprovalNeed::OutsideProject(_)
    ));
    let out = p.call("symbols", input).await;
    assert!(
        out.content.contains("1  function  fn elsewhere() {}"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn repo_map_centres_on_its_focus_and_keeps_to_its_tokens() {
    let p = fixture();
    let out = p
        .call("repo_map", json!({"focus": ["tools/helper.py"]}))
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content
            .starts_with("tools/helper.py:\n1│def parse_config(path):\n"),
        "{}",
        out.content
    );
    assert!(
        out.content.ends_with("(4 files read, 6 definitions)"),
        "{}",
        out.content
    );
    // An identifier as focus: the file defining it comes first.
    let out = p.call("repo_map", json!({"focus": ["serve"]})).await;
    assert!(
        out.content.starts_with("src/server.rs:\n"),
        "{}",
        out.content
    );
    // A plain word naming a folder focuses the files under it.
    let out = p.call("repo_map", json!({"focus": ["tools"]})).await;
    assert!(
        out.content.starts_with("tools/helper.py:\n"),
        "{}",
        out.content
    );
    // The map (less the closing count) keeps to the tokens asked for.
    let out = p.call("repo_map", json!({"tokens": 64})).await;
    let map = &out.content[..out.content.rfind('(').unwrap()];
    assert!(estimate_tokens(map) <= 64, "{}", out.content);
    check_error(
        &p.call("repo_map", json!({"focus": "src", "path": "src"}))
            .await,
        &["no argument is called `path`", "focus, tokens"],
    );
    check_error(
        &p.call("repo_map", json!({"focus": [3]})).await,
        &["every entry of `focus` must be a string"],
    );
}

#[tokio::test]
async fn repo_map_of_a_project_without_code_says_so() {
    let p = Project::new();
    p.write("README.md", "# nothing to map\n");
    let out = p.call("repo_map", json!({})).await;
    assert!(out.empty && !out.is_error, "{out:?}");
    assert!(out.content.starts_with("Nothing to map"), "{}", out.content);
}

#[tokio::test]
async fn the_tools_keep_the_tags_they_read_and_read_a_changed_file_again() {
    let mut p = fixture();
    let cache = tempfile::tempdir().unwrap();
    p.ctx.repo_maps = Some(cache.path().to_path_buf());
    let out = p.call("symbols", json!({"name": "serve"})).await;
    assert!(
        out.content
            .starts_with("`serve` is defined at:\nsrc/server.rs:3:"),
        "{}",
        out.content
    );
    assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 1);
    // Renamed (a different size): the cached tags of the file are not taken.
    p.write(
        "src/server.rs",
        "use crate::config::Config;\n\npub fn serve_all(config: &Config) -> usize {\n    config.name.len()\n}\n",
    );
    let out = p.call("symbols", json!({"name": "serve"})).await;
    assert!(out.empty, "{}", out.content);
    assert!(
        out.content.contains("serve_all (src/server.rs:3)"),
        "{}",
        out.content
    );
    let out = p.call("repo_map", json!({"focus": ["serve_all"]})).await;
    assert!(
        out.content
            .starts_with("src/server.rs:\n3│pub fn serve_all"),
        "{}",
        out.content
    );
}
