use super::tests::scan;
use super::*;
use proptest::prelude::*;

/// A project of `files` in a temporary directory.
pub(super) fn project(files: &[(&str, String)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temp dir");
    for (path, content) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    dir
}

/// A store used by ten handlers, a cache used by one, and a parser nobody uses.
fn shop() -> tempfile::TempDir {
    let mut files = vec![
        (
            "src/store.rs",
            "pub struct JournalStore { pages: Vec<u8> }\n\nimpl JournalStore {\n    pub fn open_journal() -> JournalStore { JournalStore { pages: Vec::new() } }\n}\n".to_owned(),
        ),
        (
            "src/cache.rs",
            "pub struct PageCache;\n\npub fn warm_cache(cache: &PageCache) {}\n".to_owned(),
        ),
        (
            "src/parse.rs",
            "pub fn parse_config(text: &str) -> usize { text.len() }\n".to_owned(),
        ),
    ];
    for i in 0..10 {
        files.push((
            Box::leak(format!("src/handler{i}.rs").into_boxed_str()),
            format!(
                "use crate::store::JournalStore;\npub fn handle_{i}() {{ let store = JournalStore::open_journal(); }}\n"
            ),
        ));
    }
    files.push((
        "src/admin.rs",
        "pub fn admin_tool() { warm_cache(&PageCache); }\n".to_owned(),
    ));
    project(&files)
}

fn scanned(dir: &tempfile::TempDir) -> Vec<ScannedFile> {
    scan(dir.path()).0
}

fn top_names(files: &[ScannedFile], ranked: &[RankedTag], n: usize) -> Vec<String> {
    ranked
        .iter()
        .take(n)
        .map(|t| files[t.file].tags.definitions[t.definition].name.clone())
        .collect()
}

#[test]
fn what_many_files_use_ranks_first() {
    let dir = shop();
    let files = scanned(&dir);
    let ranked = rank(&files, &Focus::default());
    assert_eq!(
        top_names(&files, &ranked, 2),
        ["JournalStore", "open_journal"]
    );
    let last = top_names(&files, &ranked, ranked.len());
    let cache = last.iter().position(|n| n == "PageCache").unwrap();
    let parse = last.iter().position(|n| n == "parse_config").unwrap();
    assert!(
        cache < parse,
        "a used definition before an unused one: {last:?}"
    );
}

#[test]
fn the_conversation_s_focus_moves_the_ranking() {
    let dir = shop();
    let files = scanned(&dir);
    // The admin file is what the person works on: what it uses comes first.
    let by_file = Focus {
        files: vec!["src/admin.rs".to_owned()],
        names: Vec::new(),
        words: Vec::new(),
    };
    let ranked = rank(&files, &by_file);
    let top = top_names(&files, &ranked, 2);
    assert!(
        top.contains(&"PageCache".to_owned()) && top.contains(&"warm_cache".to_owned()),
        "{top:?}"
    );

    // A name in the last messages lifts what refers to it.
    let by_name = Focus {
        files: Vec::new(),
        names: vec!["warm_cache".to_owned()],
        words: Vec::new(),
    };
    let ranked = rank(&files, &by_name);
    let all = top_names(&files, &ranked, ranked.len());
    let plain = top_names(&files, &rank(&files, &Focus::default()), ranked.len());
    let at = |list: &[String]| list.iter().position(|n| n == "warm_cache").unwrap();
    assert!(at(&all) < at(&plain), "{all:?} against {plain:?}");
}

#[test]
fn a_plain_word_focuses_the_files_and_folders_it_names() {
    let dir = shop();
    let files = scanned(&dir);
    let by_word = Focus {
        words: vec!["admin".to_owned()],
        ..Focus::default()
    };
    let by_file = Focus {
        files: vec!["src/admin.rs".to_owned()],
        ..Focus::default()
    };
    let plain = rank(&files, &Focus::default());
    let ranked = rank(&files, &by_word);
    assert_ne!(ranked, plain);
    // Centred as on the path, and its own outline shown too: the model may not have seen
    // the file a word names.
    let top = top_names(&files, &ranked, 3);
    assert_eq!(top, ["admin_tool", "PageCache", "warm_cache"]);
    let by_path = top_names(&files, &rank(&files, &by_file), 3);
    assert_eq!(by_path[..2], ["PageCache", "warm_cache"]);
    // A folder's name focuses every file under it.
    let by_folder = Focus {
        words: vec!["src".to_owned()],
        ..Focus::default()
    };
    assert_eq!(rank(&files, &by_folder), plain, "every file is under src/");
    // Beside a word that singles files out, one naming most of the project counts for
    // nothing.
    let both = Focus {
        words: vec!["src".to_owned(), "admin".to_owned()],
        ..Focus::default()
    };
    assert_eq!(rank(&files, &both), ranked);
}

#[test]
fn the_map_elides_between_the_lines_it_shows_and_numbers_them() {
    let dir = shop();
    let map = build(dir.path(), &Focus::default(), 1_000, None);
    assert!(map.text.starts_with("src/store.rs:\n1│pub struct JournalStore { pages: Vec<u8> }\n⋮\n4│    pub fn open_journal()"), "{}", map.text);
    assert_eq!(map.files, 14);
    assert_eq!(map.skipped, Skipped::default());
}

#[test]
fn the_same_project_gives_the_same_bytes() {
    let dir = shop();
    let focus = Focus {
        files: vec!["src/handler3.rs".to_owned()],
        names: vec!["parse_config".to_owned()],
        words: Vec::new(),
    };
    let first = build(dir.path(), &focus, 200, None).text;
    for _ in 0..3 {
        assert_eq!(build(dir.path(), &focus, 200, None).text, first);
    }
    let files = scanned(&dir);
    let (found, _) = candidates(dir.path());
    let one_thread = parse_all(&found, std::num::NonZeroUsize::MIN, None).files;
    assert_eq!(render(&one_thread, &rank(&one_thread, &focus), 200), first);
    assert_eq!(render(&files, &rank(&files, &focus), 200), first);
}

#[test]
fn a_budget_too_small_for_one_line_gives_no_map() {
    let dir = shop();
    assert_eq!(build(dir.path(), &Focus::default(), 3, None).text, "");
    assert_eq!(build(dir.path(), &Focus::default(), 0, None).text, "");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn never_over_budget_and_close_to_it_when_there_is_enough(budget in 0u64..700) {
        let dir = shop();
        let files = scanned(&dir);
        let ranked = rank(&files, &Focus::default());
        let text = render(&files, &ranked, budget);
        let used = crate::domain::estimate_tokens(&text);
        prop_assert!(used <= budget, "{used} > {budget}");
        let whole = crate::domain::estimate_tokens(&render(&files, &ranked, u64::MAX));
        // Where the budget cannot hold everything, the map fills at least 85% of it (at
        // these small budgets, less one line of slack).
        if budget < whole && budget >= 40 {
            prop_assert!(used as f64 >= budget as f64 * 0.85 - 20.0, "{used} of {budget}");
        }
    }
}

#[test]
fn plain_words_are_taken_from_a_message_in_lower_case_without_the_commonest() {
    let words =
        words_in("Please make the Scheduler faster: it should not block the parser, x2 too.");
    assert_eq!(words, ["scheduler", "faster", "block", "parser"]);
}

#[test]
fn names_that_read_as_code_are_taken_from_a_message() {
    let names = names_in(
        "Why does parse_config fail in SessionManager? See `load` and `x`, not Hello or the.",
    );
    assert_eq!(names, ["parse_config", "SessionManager", "load"]);
}

#[test]
fn a_map_not_ready_in_time_says_so_and_an_empty_project_has_none() {
    let dir = shop();
    let cache = tempfile::tempdir().unwrap();
    let late = for_prompt(
        dir.path(),
        Focus::default(),
        500,
        cache.path(),
        std::time::Duration::ZERO,
    );
    assert_eq!(late.as_deref(), Some(MAP_PENDING));
    // While that map is still being made, no second one starts: the next ask is pending
    // too, until the first is done.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let on_time = loop {
        let map = for_prompt(
            dir.path(),
            Focus::default(),
            500,
            cache.path(),
            std::time::Duration::from_secs(30),
        )
        .expect("a map");
        if map != MAP_PENDING || std::time::Instant::now() > deadline {
            break map;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert!(on_time.starts_with("src/store.rs:"), "{on_time}");
    let empty = tempfile::tempdir().unwrap();
    let none = for_prompt(
        empty.path(),
        Focus::default(),
        500,
        cache.path(),
        std::time::Duration::from_secs(30),
    );
    assert_eq!(none, None);
}
