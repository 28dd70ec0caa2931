use super::*;

#[test]
fn a_message_of_pastes_is_sent_as_pasted_whatever_the_markers_hold() {
    // A message that is one paste is sent as that paste, its line ends made \n.
    let pasted: String = (1..=30).map(|i| format!("line {i}\r\n")).collect();
    let mut c = Composer::default();
    c.paste(pasted.clone());
    assert_eq!(
        c.key(key(KeyCode::Enter)),
        Edit::Submit(pasted.replace("\r\n", "\n"))
    );
    assert!(c.is_empty());
    // A paste holding another paste's marker keeps it as text, and blank pastes alone
    // send nothing.
    let second: String = (1..=30).map(|i| format!("two {i}\n")).collect();
    let first = format!("[pasted 30 lines #2]\n{}", "x\n".repeat(29));
    let mut c = Composer::default();
    c.paste(first.clone());
    c.key(key(KeyCode::Char(' ')));
    c.paste(second.clone());
    assert_eq!(
        c.key(key(KeyCode::Enter)),
        Edit::Submit(format!("{first} {second}"))
    );
    let mut c = Composer::default();
    c.paste("\n".repeat(40));
    assert_eq!(c.key(key(KeyCode::Enter)), Edit::Ignored);
    // A marker deleted leaves its number unused: the next paste gets a new one.
    let block = |word: &str| -> String { (1..=30).map(|i| format!("{word} {i}\n")).collect() };
    let mut c = Composer::default();
    c.paste(block("a"));
    c.paste(block("b"));
    assert_eq!(c.shown(), "[pasted 30 lines #1][pasted 30 lines #2]");
    c.key(key(KeyCode::Home));
    for _ in 0.."[pasted 30 lines #1]".len() {
        c.key(key(KeyCode::Right));
    }
    c.key(key(KeyCode::Backspace));
    c.key(key(KeyCode::End));
    c.paste(block("c"));
    assert_eq!(c.shown(), "[pasted 30 lines #2][pasted 30 lines #3]");
    assert_eq!(
        c.key(key(KeyCode::Enter)),
        Edit::Submit(block("b") + &block("c"))
    );
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn with(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
    KeyEvent::new(code, modifiers)
}

fn typed(text: &str) -> Composer {
    let mut c = Composer::default();
    for ch in text.chars() {
        c.key(key(KeyCode::Char(ch)));
    }
    c
}

#[test]
fn enter_sends_and_the_modified_enters_start_a_line() {
    let mut c = typed("one");
    c.key(with(KeyCode::Enter, KeyModifiers::SHIFT));
    c.key(key(KeyCode::Char('2')));
    c.key(with(KeyCode::Enter, KeyModifiers::ALT));
    c.key(key(KeyCode::Char('3')));
    c.key(with(KeyCode::Char('j'), KeyModifiers::CONTROL));
    c.key(key(KeyCode::Char('4')));
    assert_eq!(
        c.key(key(KeyCode::Enter)),
        Edit::Submit("one\n2\n3\n4".into())
    );
    assert!(c.is_empty());
    assert_eq!(c.key(key(KeyCode::Enter)), Edit::Ignored, "nothing to send");
}

#[test]
fn editing_keys_move_and_delete_by_character_and_word() {
    let mut c = typed("hello brave world");
    c.key(with(KeyCode::Char('w'), KeyModifiers::CONTROL));
    assert_eq!(c.shown(), "hello brave ");
    c.key(with(KeyCode::Left, KeyModifiers::ALT));
    c.key(key(KeyCode::Char('X')));
    assert_eq!(c.shown(), "hello Xbrave ");
    c.key(with(KeyCode::Char('a'), KeyModifiers::CONTROL));
    c.key(key(KeyCode::Delete));
    assert_eq!(c.shown(), "ello Xbrave ");
    c.key(with(KeyCode::Char('k'), KeyModifiers::CONTROL));
    assert!(c.is_empty());
    let mut c = typed("ab");
    c.key(with(KeyCode::Enter, KeyModifiers::SHIFT));
    c.key(key(KeyCode::Backspace));
    assert_eq!(
        c.shown(),
        "ab",
        "backspace at a line's start joins the lines"
    );
    let mut c = typed("naïve ünïcödé");
    c.key(key(KeyCode::Backspace));
    c.key(key(KeyCode::Left));
    c.key(key(KeyCode::Backspace));
    assert_eq!(c.shown(), "naïve ünïcd");
}

#[test]
fn up_and_down_at_the_edges_browse_the_history() {
    let mut c = Composer::default();
    c.remember("first");
    c.remember("second");
    let mut c2 = c.clone();
    for ch in "draft".chars() {
        c2.key(key(KeyCode::Char(ch)));
    }
    c2.key(key(KeyCode::Up));
    assert_eq!(c2.shown(), "second");
    c2.key(key(KeyCode::Up));
    assert_eq!(c2.shown(), "first");
    assert_eq!(c2.key(key(KeyCode::Up)), Edit::Ignored, "the oldest");
    c2.key(key(KeyCode::Down));
    c2.key(key(KeyCode::Down));
    assert_eq!(c2.shown(), "draft", "back to what was being written");
    // Inside a multi-line text, Up moves the cursor instead.
    c.set("a\nb");
    c.key(key(KeyCode::Up));
    assert_eq!(c.shown(), "a\nb");
}

#[test]
fn a_long_paste_shows_as_a_marker_and_is_sent_whole() {
    let pasted: String = (1..=30).map(|i| format!("line {i}\n")).collect();
    let mut c = typed("see ");
    c.paste(&pasted);
    assert_eq!(c.shown(), "see [pasted 30 lines #1]");
    c.key(key(KeyCode::Char('!')));
    assert_eq!(
        c.key(key(KeyCode::Enter)),
        Edit::Submit(format!("see {pasted}!"))
    );
    // A short paste goes in as typed; backspace removes a marker whole.
    let mut c = Composer::default();
    c.paste("a\nb");
    assert_eq!(c.shown(), "a\nb");
    let mut c = Composer::default();
    c.paste(&pasted);
    c.key(key(KeyCode::Backspace));
    assert!(c.is_empty());
    assert_eq!(c.text(), "");
}

#[test]
fn the_word_under_the_cursor_can_be_completed() {
    let mut c = typed("look at @src/ma");
    assert_eq!(c.current_word(), (8, "@src/ma"));
    c.replace_current_word("src/main.rs ");
    assert_eq!(c.shown(), "look at src/main.rs ");
    c.key(key(KeyCode::Char('x')));
    assert_eq!(c.shown(), "look at src/main.rs x");
}

use proptest::prelude::*;

fn any_key() -> impl Strategy<Value = KeyEvent> {
    let ctrl = |c| with(KeyCode::Char(c), KeyModifiers::CONTROL);
    prop_oneof![
        4 => prop::sample::select(vec!['a', 'b', ' ', 'ü', '漢', '@', '/'])
            .prop_map(|c| key(KeyCode::Char(c))),
        1 => prop::sample::select(vec![
            key(KeyCode::Backspace),
            key(KeyCode::Delete),
            key(KeyCode::Left),
            key(KeyCode::Right),
            key(KeyCode::Up),
            key(KeyCode::Down),
            key(KeyCode::Home),
            key(KeyCode::End),
            ctrl('j'),
            ctrl('w'),
            ctrl('u'),
            ctrl('k'),
            with(KeyCode::Right, KeyModifiers::ALT),
        ]),
    ]
}

proptest! {
    #![proptest_config(crate::testing::fixed_cases())]

    #[test]
    fn rows_kept_across_edits_are_the_rows_of_a_fresh_layout(
        keys in prop::collection::vec((any_key(), prop::bool::weighted(0.2)), 0..80),
        width in 3u16..12,
    ) {
        let mut c = Composer::default();
        for (key, draw) in keys {
            c.key(key);
            if draw {
                c.rows(width);
            }
        }
        let (rows, cursor) = c.rows(width);
        let mut fresh = c.clone();
        fresh.laid = RefCell::default();
        prop_assert_eq!(fresh.rows(width), (rows, cursor));
    }
}

#[test]
fn a_long_word_is_no_word_to_complete() {
    let c = typed(&"x".repeat(WORD_REACH + 10));
    assert_eq!(c.current_word().1, "");
    let c = typed(&format!("{} @src", "x".repeat(WORD_REACH + 10)));
    assert_eq!(c.current_word().1, "@src");
    let c = typed(&format!("/{}", "x".repeat(WORD_REACH)));
    assert_eq!(c.command(), None, "no command is that long");
    assert_eq!(typed("/hel").command(), Some("hel"));
    assert_eq!(typed("/help me").command(), None);
}

#[test]
fn rows_wrap_at_the_width_and_the_cursor_follows() {
    let c = typed("abcdefghij");
    // Width 6: two cells of prompt, four of text.
    let (rows, cursor) = c.rows(6);
    assert_eq!(rows, ["abcd", "efgh", "ij"]);
    assert_eq!(cursor, (2, 2));
    assert_eq!(c.height(6), 3);
    let full = typed("abcd");
    let (rows, cursor) = full.rows(6);
    assert_eq!(rows, ["abcd", ""], "a full row puts the cursor on the next");
    assert_eq!(cursor, (1, 0));
}

#[test]
fn pasted_line_ends_become_newlines_whatever_the_terminal_sent() {
    assert_eq!(unix_line_ends("a\r\nb\rc\nd\r".into()), "a\nb\nc\nd\n");
    assert_eq!(unix_line_ends("é\r\r\n漢\r".into()), "é\n\n漢\n");
    assert_eq!(unix_line_ends("plain\ntext".into()), "plain\ntext");
}
