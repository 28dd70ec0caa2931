use super::*;
use std::process::Command;
use tree_sitter::Parser;

/// Every file's tags under `root`, and what was left out, read now without a cache.
pub(super) fn scan(root: &Path) -> (Vec<ScannedFile>, Skipped) {
    let project = Project::read(root, None);
    (project.files, project.skipped)
}

fn tags_of(lang: Lang, source: &str) -> FileTags {
    let grammar = lang.grammar().expect("the query compiles");
    tags::extract(grammar, &mut Parser::new(), source.as_bytes()).expect("tags")
}

fn defs(tags: &FileTags) -> Vec<(&str, TagKind)> {
    tags.definitions
        .iter()
        .map(|d| (d.name.as_str(), d.kind))
        .collect()
}

fn refers(tags: &FileTags, name: &str) -> u32 {
    tags.references
        .iter()
        .find(|(n, _)| &**n == name)
        .map_or(0, |(_, count)| *count)
}

#[test]
fn the_language_and_kind_lists_follow_their_declarations() {
    // The cache and the grammar table index them by discriminant.
    for (index, lang) in Lang::ALL.into_iter().enumerate() {
        assert_eq!(lang as usize, index);
    }
    for (index, kind) in TagKind::ALL.into_iter().enumerate() {
        assert_eq!(kind as usize, index);
    }
}

#[test]
fn every_language_query_compiles() {
    for lang in Lang::ALL {
        let grammar = lang.grammar();
        assert!(grammar.is_some(), "{}", lang.name());
        // The query runs only where a pattern starts: a pattern without a node kind at its
        // root would never run.
        assert!(grammar.is_some_and(|g| g.rooted), "{}", lang.name());
    }
}

#[test]
fn rust_definitions_of_every_kind_and_their_references() {
    let tags = tags_of(
        Lang::Rust,
        r#"
pub const LIMIT: usize = 4;
static NAME: &str = "x";
pub struct Store { pages: Vec<Page> }
enum Page { Leaf, Branch }
pub trait Journal {
    fn append(&self, page: Page);
}
impl Journal for Store {
    fn append(&self, page: Page) { self.pages.len(); helper(LIMIT); }
}
fn helper(n: usize) -> usize { n }
mod inner {}
macro_rules! twice { ($e:expr) => { $e; $e } }
"#,
    );
    use TagKind::*;
    assert_eq!(
        defs(&tags),
        [
            ("LIMIT", Constant),
            ("NAME", Constant),
            ("Store", Type),
            ("Page", Type),
            ("Journal", Interface),
            ("append", Method),
            ("append", Method),
            ("helper", Function),
            ("inner", Module),
            ("twice", Macro),
        ]
    );
    let store = &tags.definitions[2];
    assert_eq!(store.line, 3);
    assert_eq!(store.signature, "pub struct Store { pages: Vec<Page> }");
    // Page: in the struct's field, the trait's and the impl's parameters.
    assert_eq!(refers(&tags, "Page"), 3);
    assert_eq!(refers(&tags, "helper"), 1);
    assert_eq!(refers(&tags, "LIMIT"), 1);
    assert_eq!(refers(&tags, "Journal"), 1);
    // A field is not a definition of its own: its declaration and its use both mention it.
    assert_eq!(refers(&tags, "pages"), 2);
    // One-character names never count.
    assert_eq!(refers(&tags, "n"), 0);
}

#[test]
fn python_classes_methods_functions_and_constants() {
    let tags = tags_of(
        Lang::Python,
        r#"
MAX_PAGES = 10
logger = None

class Store:
    def append(self, page):
        return helper(page)

    @property
    def size(self):
        return MAX_PAGES

def helper(page):
    return Store()
"#,
    );
    use TagKind::*;
    assert_eq!(
        defs(&tags),
        [
            ("MAX_PAGES", Constant),
            ("Store", Type),
            ("append", Method),
            ("size", Method),
            ("helper", Function),
        ]
    );
    assert_eq!(refers(&tags, "helper"), 1);
    assert_eq!(refers(&tags, "Store"), 1);
    assert_eq!(refers(&tags, "MAX_PAGES"), 1);
}

#[test]
fn javascript_and_typescript() {
    let js = tags_of(
        Lang::JavaScript,
        r#"
export const ROUTES = [];
const handler = (req) => render(req);
function render(req) { return new View(req); }
class View { draw() { return render(this); } }
"#,
    );
    use TagKind::*;
    assert_eq!(
        defs(&js),
        [
            ("ROUTES", Constant),
            ("handler", Function),
            ("render", Function),
            ("View", Type),
            ("draw", Method),
        ]
    );
    assert_eq!(refers(&js, "render"), 2);
    assert_eq!(refers(&js, "View"), 1);
    let ts = tags_of(
        Lang::TypeScript,
        r#"
interface Shape { area(): number; }
type Id = string;
enum Color { Red }
namespace Geometry { export function unit(): Shape { return new Circle(); } }
class Circle implements Shape { area(): number { return 1; } }
"#,
    );
    assert_eq!(
        defs(&ts),
        [
            ("Shape", Interface),
            ("area", Method),
            ("Id", Type),
            ("Color", Type),
            ("Geometry", Module),
            ("unit", Function),
            ("Circle", Type),
            ("area", Method),
        ]
    );
    assert_eq!(refers(&ts, "Shape"), 2);
    let tsx = tags_of(
        Lang::Tsx,
        "export function App(): JSX.Element { return <Panel title=\"x\" />; }\n",
    );
    assert_eq!(defs(&tsx), [("App", Function)]);
}

#[test]
fn go_java_c_cpp_and_bash() {
    use TagKind::*;
    let go = tags_of(
        Lang::Go,
        r#"
package store
const Limit = 4
type Reader interface { Read(p []byte) int }
type Store struct { pages []Page }
func New() *Store { return &Store{} }
func (s *Store) Read(p []byte) int { return len(s.pages) }
"#,
    );
    assert_eq!(
        defs(&go),
        [
            ("Limit", Constant),
            ("Reader", Interface),
            ("Read", Method),
            ("Store", Type),
            ("New", Function),
            ("Read", Method),
        ]
    );
    assert_eq!(refers(&go, "Store"), 3);
    let java = tags_of(
        Lang::Java,
        r#"
interface Shape { double area(); }
public class Circle implements Shape {
    static final int SIDES = 0;
    private int radius;
    public Circle(int r) { radius = r; }
    public double area() { return helper(SIDES); }
}
"#,
    );
    assert_eq!(
        defs(&java),
        [
            ("Shape", Interface),
            ("area", Method),
            ("Circle", Type),
            ("SIDES", Constant),
            ("Circle", Method),
            ("area", Method),
        ]
    );
    let c = tags_of(
        Lang::C,
        r#"
#define PAGE_SIZE 4096
#define MIN(a, b) ((a) < (b) ? (a) : (b))
typedef struct page { int n; } page_t;
enum color { RED, GREEN };
static int *alloc_page(int n);
int count(page_t *p) { return MIN(p->n, PAGE_SIZE); }
"#,
    );
    assert_eq!(
        defs(&c),
        [
            ("PAGE_SIZE", Constant),
            ("MIN", Macro),
            // The typedef starts before the struct inside it.
            ("page_t", Type),
            ("page", Type),
            ("color", Type),
            ("RED", Constant),
            ("GREEN", Constant),
            ("alloc_page", Function),
            ("count", Function),
        ]
    );
    assert_eq!(refers(&c, "page_t"), 1);
    assert_eq!(refers(&c, "PAGE_SIZE"), 1);
    let cpp = tags_of(
        Lang::Cpp,
        r#"
namespace db {
class Store {
  public:
    int size() const;
};
int Store::size() const { return count(); }
int count() { return 0; }
}
"#,
    );
    assert_eq!(
        defs(&cpp),
        [
            ("db", Module),
            ("Store", Type),
            ("size", Method),
            ("size", Method),
            ("count", Function),
        ]
    );
    let bash = tags_of(
        Lang::Bash,
        "#!/bin/sh\nPREFIX=/usr\nlocal_name=1\nbuild() { make \"$PREFIX\"; }\nbuild\n",
    );
    assert_eq!(defs(&bash), [("PREFIX", Constant), ("build", Function)]);
    assert_eq!(refers(&bash, "build"), 1);
    assert_eq!(refers(&bash, "make"), 1);
    assert_eq!(refers(&bash, "PREFIX"), 1);
}

#[test]
fn text_that_is_not_utf8_costs_only_what_it_touches() {
    let tags = tags_of(Lang::C, "int caf\u{e9}(void) { return 0; }\n");
    assert_eq!(tags.definitions[0].name, "caf\u{e9}");
    let grammar = Lang::C.grammar().unwrap();
    // A Latin-1 comment leaves the code around it readable.
    let commented = b"/* caf\xe9 */\nint count(void) { return 0; }\n";
    let tags = tags::extract(grammar, &mut Parser::new(), commented).expect("tags");
    assert_eq!(tags.definitions[0].name, "count");
    // A Latin-1 name is not C that tree-sitter reads: the file is counted out.
    let named = b"int caf\xe9(void) { return 0; }\n";
    let tags = tags::extract(grammar, &mut Parser::new(), named);
    assert_eq!(tags, Err(tags::Unreadable::Unparsable));
}

#[test]
fn long_signature_lines_are_cut() {
    let long = format!("fn wide() {{ let x = \"{}\"; }}\n", "y".repeat(400));
    let tags = tags_of(Lang::Rust, &long);
    let signature = &tags.definitions[0].signature;
    assert_eq!(signature.chars().count(), 161);
    assert!(signature.ends_with('…'));
}

/// A git repository under a temporary directory, with `files` written in it.
fn repository(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temp dir");
    let ran = Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir.path())
        .status()
        .expect("git runs");
    assert!(ran.success());
    for (path, content) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    dir
}

#[test]
fn a_scan_reads_every_language_skips_what_it_cannot_and_honours_gitignore() {
    let huge = format!("// {}\n", "x".repeat(MAX_FILE_BYTES as usize));
    let repo = repository(&[
        (".gitignore", b"target/\n"),
        ("src/lib.rs", b"pub fn lib_entry() { helper(); }\n"),
        ("src/util.rs", b"pub fn helper() {}\n"),
        ("target/gen.rs", b"fn ignored() {}\n"),
        ("app/main.py", b"def main():\n    pass\n"),
        ("web/app.ts", b"export function start(): void {}\n"),
        (
            "web/view.tsx",
            b"export function View() { return <div/>; }\n",
        ),
        ("go/main.go", b"package main\nfunc main() {}\n"),
        ("scripts/build.sh", b"build() { make; }\n"),
        ("README.md", b"# not code\n"),
        ("blob.c", b"int x;\0\0\0binary"),
        ("huge.rs", huge.as_bytes()),
        ("broken.py", b")))) (((( ]]]] {{{{\n"),
    ]);
    let (scanned, skipped) = scan(repo.path());
    let paths: Vec<&str> = scanned.iter().map(|f| f.candidate.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "app/main.py",
            "go/main.go",
            "scripts/build.sh",
            "src/lib.rs",
            "src/util.rs",
            "web/app.ts",
            "web/view.tsx",
        ]
    );
    assert_eq!(
        skipped,
        Skipped {
            too_large: 1,
            binary: 1,
            unparsable: 1,
            unreadable: 0,
            beyond_limit: false,
        }
    );
    let lib = &scanned[3];
    assert_eq!(lib.tags.definitions[0].name, "lib_entry");
    assert_eq!(lib.tags.references, [("helper".into(), 1)]);
}

#[test]
fn a_scan_on_one_thread_or_many_gives_the_same_tags() {
    let files: Vec<(String, Vec<u8>)> = (0..40)
        .map(|i| {
            let source = format!(
                "pub fn f{i}() {{ f{}(); }}\npub struct S{i};\n",
                (i + 1) % 40
            );
            (format!("src/m{i:02}.rs"), source.into_bytes())
        })
        .collect();
    let borrowed: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, s)| (p.as_str(), s.as_slice()))
        .collect();
    let repo = repository(&borrowed);
    let (found, _) = candidates(repo.path());
    let one = parse_all(&found, std::num::NonZeroUsize::MIN, None);
    let four = parse_all(&found, std::num::NonZeroUsize::new(4).unwrap(), None);
    assert_eq!(one.files, four.files);
    assert_eq!(one.files.len(), 40);
}
