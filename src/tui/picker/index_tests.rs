//! The search index: matching, ranking, scopes and cancellation.

use super::*;

/// (id, title, first input, project, archived), given most recent first.
type Session<'a> = (&'a str, &'a str, &'a str, &'a str, bool);

fn build(sessions: &[Session<'_>]) -> SearchIndex {
    let mut builder = IndexBuilder::new();
    builder.begin(sessions.len() as u64);
    let mut by_id = sessions.to_vec();
    by_id.sort_by_key(|s| s.0);
    for &(id, title, first_input, project_dir, archived) in &by_id {
        let entry = SearchEntry {
            id,
            title,
            first_input,
            project_dir,
            archived,
        };
        assert!(builder.entry(entry).is_continue());
    }
    for (i, s) in sessions.iter().enumerate() {
        assert!(builder.activity(1000 - i as i64, s.0).is_continue());
    }
    builder.finish()
}

fn search(index: &SearchIndex, query: &str, scope: &Scope) -> (Vec<String>, usize) {
    let mut search = Search::new(index, query, scope, None);
    assert!(run(&mut search, index, || false, |_| {}));
    let elsewhere = search.elsewhere();
    let (hits, _) = search.finish();
    let ids = hits.iter().map(|h| index.id(h.entry)).collect();
    (ids, elsewhere)
}

fn check(index: &SearchIndex, query: &str, scope: &Scope, expected: &[&str]) {
    assert_eq!(search(index, query, scope).0, expected, "query {query:?}");
}

fn sample() -> SearchIndex {
    build(&[
        (
            "s5",
            "",
            "fix the flaky scheduler test",
            "/work/tern",
            false,
        ),
        (
            "s4",
            "Release notes",
            "write the changelog",
            "/work/tern",
            false,
        ),
        ("s3", "", "port the parser to nom", "/work/parser", false),
        ("s2", "", "flaky network test in CI", "/work/tern", true),
        (
            "s1",
            "",
            "fix the flaky scheduler test",
            "/work/other",
            false,
        ),
        ("s0", "", "", "/work/empty", false),
    ])
}

#[test]
fn entries_keep_their_text_most_recent_first() {
    let index = sample();
    assert_eq!(index.len(), 6);
    assert_eq!(index.id(0), "s5");
    assert_eq!(index.id(1), "s4");
    assert_eq!(index.title(1), "Release notes");
    assert_eq!(index.first_input(1), "write the changelog");
    assert_eq!(index.project_dir(2), "/work/parser");
    assert!(index.is_archived(3));
    assert_eq!(index.id(99), "", "out of range is empty, not a panic");
    assert_eq!(index.entry_of("s4"), Some(1));
    assert_eq!(index.entry_of("nope"), None);
    assert_eq!(index.projects.len(), 4, "project dirs are interned");
}

#[test]
fn every_word_must_match_some_field() {
    let index = sample();
    let all = Scope::default();
    check(&index, "flaky", &all, &["s5", "s1"]);
    check(&index, "changelog", &all, &["s4"]);
    check(&index, "release", &all, &["s4"]);
    check(&index, "parser nom", &all, &["s3"]);
    check(&index, "flaky other", &all, &["s1"]);
    check(&index, "zebra", &all, &[]);
    check(&index, "empty", &all, &["s0"]);
}

#[test]
fn ties_go_to_the_most_recent_and_better_matches_first() {
    let index = build(&[
        ("c", "", "the scheduler is flaky", "/p", false),
        ("b", "", "fix the flaky test", "/p", false),
        ("a", "", "fix the flaky test", "/p", false),
        ("z", "", "f l a k y spread out", "/p", false),
    ]);
    let all = Scope::default();
    // b and a score the same: b is newer. The spread-out match scores lowest.
    let (ids, _) = search(&index, "flaky", &all);
    assert_eq!(ids.last().map(String::as_str), Some("z"));
    let b = ids.iter().position(|id| id == "b").unwrap();
    let a = ids.iter().position(|id| id == "a").unwrap();
    assert!(b < a, "{ids:?}");
}

#[test]
fn the_scope_keeps_one_project_and_counts_the_rest() {
    let index = sample();
    let tern = Scope {
        project_dir: Some("/work/tern".into()),
        archived: false,
    };
    assert_eq!(search(&index, "flaky", &tern), (vec!["s5".to_owned()], 1));
    let with_archived = Scope {
        archived: true,
        ..tern.clone()
    };
    check(&index, "flaky", &with_archived, &["s5", "s2"]);
    let unknown = Scope {
        project_dir: Some("/nowhere".into()),
        archived: false,
    };
    assert_eq!(search(&index, "flaky", &unknown), (vec![], 2));
}

#[test]
fn case_is_smart_and_accents_fold() {
    let index = build(&[
        ("b", "", "Réparer le CI", "/p", false),
        ("a", "", "reparer le ci", "/p", false),
    ]);
    let all = Scope::default();
    check(&index, "reparer", &all, &["b", "a"]);
    check(&index, "CI", &all, &["b"]);
    check(&index, "répar", &all, &["b"]);
}

#[test]
fn a_longer_query_looks_only_at_what_the_shorter_one_matched() {
    let index = sample();
    let all = Scope::default();
    let mut first = Search::new(&index, "fla", &all, None);
    assert!(run(&mut first, &index, || false, |_| {}));
    let (_, finished) = first.finish();
    let finished = finished.expect("finished");
    let narrowed = Search::new(&index, "flaky sch", &all, Some(&finished));
    assert_eq!(narrowed.total(), 2, "only s5 and s1 (s2 is archived)");
    let mut narrowed = narrowed;
    assert!(run(&mut narrowed, &index, || false, |_| {}));
    let (hits, _) = narrowed.finish();
    assert_eq!(hits.len(), 2);
    // Not narrower: a different word, or the archived ones wanted too.
    assert_eq!(Search::new(&index, "fix", &all, Some(&finished)).total(), 6);
    let archived = Scope {
        archived: true,
        ..Scope::default()
    };
    assert_eq!(
        Search::new(&index, "flaky", &archived, Some(&finished)).total(),
        6
    );
}

#[test]
fn a_newer_query_stops_the_search_in_progress() {
    let sessions: Vec<(String, String)> = (0..10 * STEP)
        .map(|i| (format!("id{i:06}"), format!("task number {i}")))
        .collect();
    let refs: Vec<Session<'_>> = sessions
        .iter()
        .rev()
        .map(|(id, input)| (id.as_str(), "", input.as_str(), "/p", false))
        .collect();
    let index = build(&refs);
    let all = Scope::default();
    // The newer query arrives after two steps.
    let mut asked = 0;
    let mut steps = 0;
    let mut old = Search::new(&index, "task", &all, None);
    let finished = run(
        &mut old,
        &index,
        || {
            asked += 1;
            asked > 2
        },
        |_| steps += 1,
    );
    assert!(!finished);
    assert_eq!(steps, 2);
    assert!(!old.is_done());
    let (partial, rest) = old.finish();
    assert_eq!(partial.len(), 2 * STEP, "what it had found stays ranked");
    assert!(rest.is_none(), "an unfinished search narrows nothing");
    let (ids, _) = search(&index, "number 12345", &all);
    assert_eq!(ids, ["id012345"]);
}

#[test]
fn entries_out_of_id_order_are_still_ranked_by_activity() {
    let mut builder = IndexBuilder::new();
    builder.begin(2);
    for id in ["b", "a"] {
        let entry = SearchEntry {
            id,
            title: "",
            first_input: id,
            project_dir: "/p",
            archived: false,
        };
        let _ = builder.entry(entry);
    }
    let _ = builder.activity(2, "a");
    let _ = builder.activity(1, "b");
    let _ = builder.activity(0, "missing");
    let index = builder.finish();
    assert_eq!((index.id(0).as_str(), index.id(1).as_str()), ("a", "b"));
}

#[test]
fn a_permutation_is_applied_in_place() {
    let mut items = [10, 11, 12, 13, 14, 15];
    let mut order = [3, 0, 4, 1, 5, 2];
    permute(&mut items, &mut order);
    assert_eq!(items, [13, 10, 14, 11, 15, 12]);
    let mut items: Vec<u32> = (0..1000).collect();
    let mut order: Vec<u32> = (0..1000).rev().collect();
    permute(&mut items, &mut order);
    assert!(items.iter().rev().copied().eq(0..1000));
}

#[test]
fn uuid_ids_are_kept_in_sixteen_bytes_and_spelled_out_again() {
    let ids = [
        "0190a000-0000-7000-8000-000000000001",
        "0190a000-0000-7000-8000-00000000000a",
        "0190A000-0000-7000-8000-00000000000B",
        "0190a000-0000-7000-8000-00000000000",
        "not-a-uuid",
    ];
    let sessions: Vec<Session<'_>> = ids
        .iter()
        .map(|id| (*id, "", "text", "/p", false))
        .collect();
    let index = build(&sessions);
    for (entry, id) in ids.iter().enumerate() {
        assert_eq!(index.id(entry as u32), *id);
        assert_eq!(index.entry_of(id), Some(entry as u32));
    }
    assert_eq!(
        compact_uuid(ids[0]).map(|u| u[15]),
        Some(1),
        "the last byte"
    );
    assert_eq!(
        compact_uuid(ids[2]),
        None,
        "upper case would not spell back"
    );
    assert_eq!(index.entry_of("0190a000-0000-7000-8000-000000000002"), None);
    assert_eq!(
        index.text.len(),
        5 * 4 + ids[2].len() + ids[3].len() + ids[4].len()
    );
}
