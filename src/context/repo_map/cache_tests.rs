use super::*;
use std::time::{Duration, SystemTime};

/// Every one of [`three`]'s files read now.
const ALL_READ: cache::Reuse = cache::Reuse {
    reused: 0,
    parsed: 3,
    verified: 0,
};

fn three() -> tempfile::TempDir {
    super::rank_tests::project(&[
        (
            "src/a.rs",
            "pub fn alpha_one() { beta_two(); }\n".to_owned(),
        ),
        (
            "src/b.rs",
            "pub fn beta_two() { gamma_three(); }\n".to_owned(),
        ),
        ("src/c.rs", "pub fn gamma_three() {}\n".to_owned()),
    ])
}

/// Sets a file's modification time to `at`.
fn touch(path: &std::path::Path, at: SystemTime) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(at).unwrap();
}

/// Moves every file's time well before now, so the cache trusts times, not content.
fn age(dir: &tempfile::TempDir) {
    let old = SystemTime::now() - Duration::from_secs(3600);
    for name in ["a", "b", "c"] {
        let path = dir.path().join(format!("src/{name}.rs"));
        if path.exists() {
            touch(&path, old);
        }
    }
}

#[test]
fn a_second_map_reads_nothing_again_and_says_the_same() {
    let dir = three();
    age(&dir);
    let cache = tempfile::tempdir().unwrap();
    let first = build(dir.path(), &Focus::default(), 500, Some(cache.path()));
    assert_eq!(first.reuse, ALL_READ);
    let second = build(dir.path(), &Focus::default(), 500, Some(cache.path()));
    assert_eq!(
        second.reuse,
        cache::Reuse {
            reused: 3,
            parsed: 0,
            verified: 0
        }
    );
    assert_eq!(second.text, first.text);
    let uncached = build(dir.path(), &Focus::default(), 500, None);
    assert_eq!(uncached.text, first.text);
}

#[test]
fn a_changed_file_is_read_again_and_a_deleted_one_leaves_the_map() {
    let dir = three();
    age(&dir);
    let cache = tempfile::tempdir().unwrap();
    build(dir.path(), &Focus::default(), 500, Some(cache.path()));
    std::fs::write(
        dir.path().join("src/c.rs"),
        "pub fn gamma_three() {}\npub fn delta_four() {}\n",
    )
    .unwrap();
    std::fs::remove_file(dir.path().join("src/a.rs")).unwrap();
    let map = build(dir.path(), &Focus::default(), 500, Some(cache.path()));
    assert_eq!(
        map.reuse,
        cache::Reuse {
            reused: 1,
            parsed: 1,
            verified: 0
        }
    );
    assert!(
        map.text.contains("delta_four") && !map.text.contains("alpha_one"),
        "{}",
        map.text
    );
    // The cache now holds the two files as they are.
    let kept = cache::load(&cache::file_for(cache.path(), dir.path()), dir.path());
    assert_eq!(
        kept.entries.keys().collect::<Vec<_>>(),
        ["src/b.rs", "src/c.rs"]
    );
}

#[test]
fn a_change_that_keeps_size_and_time_is_caught_by_content_when_recent() {
    let dir = three();
    let cache = tempfile::tempdir().unwrap();
    let path = dir.path().join("src/c.rs");
    let when = std::fs::metadata(&path).unwrap().modified().unwrap();
    build(dir.path(), &Focus::default(), 500, Some(cache.path()));
    // Same length, same time: only the content tells.
    std::fs::write(&path, "pub fn gamma_thref() {}\n").unwrap();
    touch(&path, when);
    let map = build(dir.path(), &Focus::default(), 500, Some(cache.path()));
    assert!(map.text.contains("gamma_thref"), "{}", map.text);
    assert_eq!(map.reuse.parsed, 1);
}

#[test]
fn a_damaged_cache_or_one_of_other_grammars_is_not_used() {
    let dir = three();
    age(&dir);
    let cache = tempfile::tempdir().unwrap();
    build(dir.path(), &Focus::default(), 500, Some(cache.path()));
    let file = cache::file_for(cache.path(), dir.path());
    let good = std::fs::read(&file).unwrap();
    // A byte flipped anywhere: every file is read again, and the cache written anew.
    let mut damaged = good.clone();
    damaged[good.len() / 2] ^= 0x40;
    std::fs::write(&file, &damaged).unwrap();
    let map = build(dir.path(), &Focus::default(), 500, Some(cache.path()));
    assert_eq!(map.reuse, ALL_READ);
    assert_eq!(std::fs::read(&file).unwrap().len(), good.len());
    // Written with other queries (a version bump), checksum intact: not used either.
    let bumped = rewrite_queries_version(&good);
    std::fs::write(&file, &bumped).unwrap();
    let map = build(dir.path(), &Focus::default(), 500, Some(cache.path()));
    assert_eq!(map.reuse, ALL_READ);
    // A truncated file, and no file at all, are an empty cache.
    std::fs::write(&file, &good[..good.len() - 9]).unwrap();
    assert!(cache::load(&file, dir.path()).entries.is_empty());
    std::fs::remove_file(&file).unwrap();
    assert!(cache::load(&file, dir.path()).entries.is_empty());
}

/// `bytes` as a cache written with the next queries version, its checksum made good.
fn rewrite_queries_version(bytes: &[u8]) -> Vec<u8> {
    let now = format!("queries {QUERIES_VERSION} ");
    let next = format!("queries {} ", QUERIES_VERSION + 1);
    assert_eq!(now.len(), next.len());
    let body = &bytes[..bytes.len() - 8];
    let at = body
        .windows(now.len())
        .position(|w| w == now.as_bytes())
        .expect("the fingerprint");
    let mut out = body.to_vec();
    out[at..at + next.len()].copy_from_slice(next.as_bytes());
    let sum = cache::checksum(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

#[test]
fn another_project_s_cache_is_not_taken_for_this_one() {
    let one = three();
    let two = three();
    let cache = tempfile::tempdir().unwrap();
    build(one.path(), &Focus::default(), 500, Some(cache.path()));
    let file = cache::file_for(cache.path(), one.path());
    assert!(cache::load(&file, two.path()).entries.is_empty());
    assert_eq!(cache::load(&file, one.path()).entries.len(), 3);
}

#[test]
fn files_checked_by_content_are_trusted_by_time_after_the_cache_is_written_again() {
    // Files written just now: too close to the cache's writing for their time to decide.
    let dir = three();
    let cache = tempfile::tempdir().unwrap();
    build(dir.path(), &Focus::default(), 500, Some(cache.path()));
    let file = cache::file_for(cache.path(), dir.path());
    let first = std::fs::read(&file).unwrap();
    let map = build(dir.path(), &Focus::default(), 500, Some(cache.path()));
    assert_eq!(
        map.reuse,
        cache::Reuse {
            reused: 3,
            parsed: 0,
            verified: 3
        }
    );
    // Written again with a later time, so the next maps need not read them.
    assert_ne!(std::fs::read(&file).unwrap(), first);
}

#[test]
fn the_checksum_changes_with_any_byte_and_with_the_length() {
    let bytes: Vec<u8> = (0..100u8).collect();
    let sum = cache::checksum(&bytes);
    for at in [0, 7, 8, 63, 99] {
        for bit in [0x01, 0x80] {
            let mut changed = bytes.clone();
            changed[at] ^= bit;
            assert_ne!(cache::checksum(&changed), sum, "byte {at}, bit {bit:#x}");
        }
    }
    assert_ne!(cache::checksum(&bytes[..99]), sum);
    assert_ne!(cache::checksum(&[0u8; 8]), cache::checksum(&[0u8; 16]));
}

#[test]
fn caches_unread_for_a_month_and_abandoned_temporary_files_are_removed() {
    let dir = three();
    let cache = tempfile::tempdir().unwrap();
    let set_age = |path: &std::path::Path, days: u64| {
        let at = std::time::SystemTime::now() - std::time::Duration::from_secs(days * 24 * 3600);
        std::fs::write(path, b"x").unwrap();
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(at).unwrap();
    };
    let unread = cache.path().join("00000000000000aa.tags");
    let recent = cache.path().join("00000000000000bb.tags");
    let abandoned = cache.path().join("00000000000000cc.tmp-1");
    let other = cache.path().join("notes.txt");
    set_age(&unread, 40);
    set_age(&recent, 3);
    set_age(&abandoned, 1);
    set_age(&other, 400);
    // Writing a project's cache prunes the folder.
    build(dir.path(), &Focus::default(), 500, Some(cache.path()));
    assert!(!unread.exists() && !abandoned.exists());
    assert!(recent.exists() && other.exists());
    // A cache read after long is marked as read, so it is kept.
    let file = cache::file_for(cache.path(), dir.path());
    let days_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(29 * 24 * 3600);
    let opened = std::fs::File::options().write(true).open(&file).unwrap();
    opened.set_modified(days_ago).unwrap();
    assert_eq!(cache::load(&file, dir.path()).entries.len(), 3);
    let age = std::fs::metadata(&file)
        .unwrap()
        .modified()
        .unwrap()
        .elapsed()
        .unwrap();
    assert!(age.as_secs() < 3600, "{age:?}");
}

#[test]
fn a_cache_whose_checksum_holds_but_whose_names_do_not_is_not_used() {
    let dir = three();
    let cache = tempfile::tempdir().unwrap();
    build(dir.path(), &Focus::default(), 500, Some(cache.path()));
    let file = cache::file_for(cache.path(), dir.path());
    let good = std::fs::read(&file).unwrap();
    assert_eq!(cache::load(&file, dir.path()).entries.len(), 3);
    // The table of names said to be empty, the checksum made good again: every reference
    // then points past the table, and the decoding itself must refuse the file. The
    // table's length follows the project's path and the written time (8 bytes).
    let mut damaged = good[..good.len() - 8].to_vec();
    let root = dir.path().as_os_str().as_encoded_bytes();
    let table = damaged
        .windows(root.len())
        .position(|w| w == root)
        .expect("the root in the header")
        + root.len()
        + 8;
    damaged[table..table + 4].copy_from_slice(&0u32.to_le_bytes());
    let sum = cache::checksum(&damaged);
    damaged.extend_from_slice(&sum.to_le_bytes());
    std::fs::write(&file, &damaged).unwrap();
    assert!(cache::load(&file, dir.path()).entries.is_empty());
    let map = build(dir.path(), &Focus::default(), 500, Some(cache.path()));
    assert_eq!(map.reuse, ALL_READ);
}
