//! The languages the repository map reads: which files are in which, and for each a grammar
//! with its definition query, compiled once per process and shared by every thread.
//!
//! Each definition pattern captures the defined name as `@name` and the whole definition as
//! `@<kind>`; the kind's capture names are those of [`TagKind::capture`]. References are not
//! queried: every identifier-like leaf of the tree that is not a definition's name is one (see
//! [`Grammar::is_reference`]), so a call, a type in a signature and a field access all count,
//! in every language alike.

use std::path::Path;
use std::sync::OnceLock;
use tree_sitter::{Language as TsLanguage, Node, Query};

/// Bump when a query below changes: cached tags of an older version are read again.
pub const QUERIES_VERSION: u32 = 1;

/// A language the map reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Lang {
    Rust,
    Python,
    JavaScript,
    TypeScript,
    Tsx,
    Go,
    Java,
    C,
    Cpp,
    Bash,
}

/// What a definition defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TagKind {
    Function,
    Method,
    /// A struct, class, enum, union or type alias.
    Type,
    /// A trait, interface or protocol.
    Interface,
    Constant,
    Module,
    Macro,
}

impl TagKind {
    pub const ALL: [TagKind; 7] = [
        TagKind::Function,
        TagKind::Method,
        TagKind::Type,
        TagKind::Interface,
        TagKind::Constant,
        TagKind::Module,
        TagKind::Macro,
    ];

    /// The capture name the queries give a definition of this kind.
    pub fn capture(self) -> &'static str {
        match self {
            TagKind::Function => "function",
            TagKind::Method => "method",
            TagKind::Type => "type",
            TagKind::Interface => "interface",
            TagKind::Constant => "constant",
            TagKind::Module => "module",
            TagKind::Macro => "macro",
        }
    }
}

/// The languages the map reads, as a person names them.
pub const LANGUAGES: &str = "Rust, Python, JavaScript, TypeScript, Go, Java, C, C++ and Bash";

impl Lang {
    pub const ALL: [Lang; 10] = [
        Lang::Rust,
        Lang::Python,
        Lang::JavaScript,
        Lang::TypeScript,
        Lang::Tsx,
        Lang::Go,
        Lang::Java,
        Lang::C,
        Lang::Cpp,
        Lang::Bash,
    ];

    /// The language of `path`, by its extension.
    pub fn of(path: &Path) -> Option<Lang> {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        Some(match ext {
            "rs" => Lang::Rust,
            "py" | "pyi" => Lang::Python,
            "js" | "mjs" | "cjs" | "jsx" => Lang::JavaScript,
            "ts" | "mts" | "cts" => Lang::TypeScript,
            "tsx" => Lang::Tsx,
            "go" => Lang::Go,
            "java" => Lang::Java,
            "c" | "h" => Lang::C,
            "cc" | "cpp" | "cxx" | "c++" | "hh" | "hpp" | "hxx" | "h++" | "ipp" => Lang::Cpp,
            "sh" | "bash" => Lang::Bash,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::JavaScript => "javascript",
            Lang::TypeScript => "typescript",
            Lang::Tsx => "tsx",
            Lang::Go => "go",
            Lang::Java => "java",
            Lang::C => "c",
            Lang::Cpp => "cpp",
            Lang::Bash => "bash",
        }
    }

    pub(super) fn language(self) -> TsLanguage {
        match self {
            Lang::Rust => tree_sitter_rust::LANGUAGE.into(),
            Lang::Python => tree_sitter_python::LANGUAGE.into(),
            Lang::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            Lang::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Lang::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            Lang::Go => tree_sitter_go::LANGUAGE.into(),
            Lang::Java => tree_sitter_java::LANGUAGE.into(),
            Lang::C => tree_sitter_c::LANGUAGE.into(),
            Lang::Cpp => tree_sitter_cpp::LANGUAGE.into(),
            Lang::Bash => tree_sitter_bash::LANGUAGE.into(),
        }
    }

    /// The definition query's source. Where two patterns match one definition, the first in
    /// the text wins (see the tags' extraction), so specific patterns come first.
    fn definitions(self) -> String {
        match self {
            Lang::Rust => RUST.to_owned(),
            Lang::Python => PYTHON.to_owned(),
            Lang::JavaScript => JS_COMMON.to_owned(),
            Lang::TypeScript | Lang::Tsx => format!("{TS_ONLY}\n{JS_COMMON}"),
            Lang::Go => GO.to_owned(),
            Lang::Java => JAVA.to_owned(),
            Lang::C => C_COMMON.to_owned(),
            Lang::Cpp => format!("{CPP_ONLY}\n{C_COMMON}"),
            Lang::Bash => BASH.to_owned(),
        }
    }

    /// The node kinds whose leaves name something another definition may be.
    fn reference_kinds(self) -> &'static [&'static str] {
        match self {
            Lang::Rust => &["identifier", "type_identifier", "field_identifier"],
            Lang::Python => &["identifier"],
            Lang::JavaScript => &["identifier", "property_identifier"],
            Lang::TypeScript | Lang::Tsx => {
                &["identifier", "type_identifier", "property_identifier"]
            }
            Lang::Go => &["identifier", "type_identifier", "field_identifier"],
            Lang::Java => &["identifier", "type_identifier"],
            Lang::C => &["identifier", "type_identifier", "field_identifier"],
            Lang::Cpp => &[
                "identifier",
                "type_identifier",
                "field_identifier",
                "namespace_identifier",
            ],
            // A command's name, and a variable's.
            Lang::Bash => &["word", "variable_name"],
        }
    }

    /// The compiled grammar, built the first time any thread asks; `None` (said once in
    /// the log) when its query does not compile against the grammar, and the language's
    /// files are then skipped.
    pub fn grammar(self) -> Option<&'static Grammar> {
        static GRAMMARS: [OnceLock<Option<Grammar>>; 10] = [const { OnceLock::new() }; 10];
        GRAMMARS[self as usize]
            .get_or_init(|| match Grammar::compile(self) {
                Ok(grammar) => Some(grammar),
                Err(err) => {
                    tracing::error!(language = self.name(), %err, "the repository map's query does not compile");
                    None
                }
            })
            .as_ref()
    }
}

/// A language's grammar, its compiled definition query and what its captures mean.
pub struct Grammar {
    pub lang: Lang,
    pub language: TsLanguage,
    pub query: Query,
    /// The `@name` capture's index.
    pub name_capture: u32,
    /// The kind each capture index stands for, when it is a definition's.
    pub kinds: Vec<Option<TagKind>>,
    /// Node kind ids of identifier-like leaves (indexed by kind id).
    reference_ids: Vec<bool>,
    /// Node kind ids a pattern of the query starts at (indexed by kind id): the query runs
    /// only at such nodes, never over a whole tree.
    pattern_roots: Vec<bool>,
    /// Whether every pattern starts at a node kind (one that does not would never run).
    pub rooted: bool,
    /// Bash's `word` is a reference only as a command's name.
    command_name: Option<u16>,
}

impl Grammar {
    fn compile(lang: Lang) -> Result<Grammar, tree_sitter::QueryError> {
        let language = lang.language();
        let definitions = lang.definitions();
        let query = Query::new(&language, &definitions)?;
        let names = query.capture_names();
        let name_capture = names.iter().position(|n| *n == "name").unwrap_or(0) as u32;
        let kinds = names
            .iter()
            .map(|name| TagKind::ALL.into_iter().find(|k| k.capture() == *name))
            .collect();
        let mut reference_ids = vec![false; language.node_kind_count()];
        for kind in lang.reference_kinds() {
            let id = language.id_for_node_kind(kind, true);
            if id != 0 {
                reference_ids[usize::from(id)] = true;
            }
        }
        // Each pattern's outermost node kind, read where the query says the pattern starts.
        let roots: Vec<Option<&str>> = (0..query.pattern_count())
            .map(|pattern| {
                let text = definitions.get(query.start_byte_for_pattern(pattern)..)?;
                let kind = text.strip_prefix('(')?.split([' ', ')', '\n']).next()?;
                (language.id_for_node_kind(kind, true) != 0).then_some(kind)
            })
            .collect();
        let rooted = roots.iter().all(Option::is_some);
        if !rooted {
            tracing::error!(
                language = lang.name(),
                "a repository map pattern has no node kind at its root; it never runs"
            );
        }
        let roots: Vec<&str> = roots.into_iter().flatten().collect();
        // By name, so every id a kind has (aliases give some several) counts.
        let pattern_roots = (0..language.node_kind_count())
            .map(|id| {
                let id = id as u16;
                language.node_kind_is_named(id)
                    && language
                        .node_kind_for_id(id)
                        .is_some_and(|kind| roots.contains(&kind))
            })
            .collect();
        let command_name = (lang == Lang::Bash)
            .then(|| language.id_for_node_kind("command_name", true))
            .filter(|id| *id != 0);
        Ok(Grammar {
            lang,
            language,
            query,
            name_capture,
            kinds,
            reference_ids,
            pattern_roots,
            rooted,
            command_name,
        })
    }

    /// Whether a pattern of the query may start at `node`.
    pub fn starts_pattern(&self, node: Node<'_>) -> bool {
        self.pattern_roots
            .get(usize::from(node.kind_id()))
            .copied()
            .unwrap_or(false)
    }

    /// Whether `node`, a leaf, names something that may be defined elsewhere.
    pub fn is_reference(&self, node: Node<'_>) -> bool {
        let id = usize::from(node.kind_id());
        if !self.reference_ids.get(id).copied().unwrap_or(false) {
            return false;
        }
        match (self.command_name, node.kind()) {
            (Some(command), "word") => node.parent().is_some_and(|p| p.kind_id() == command),
            _ => true,
        }
    }
}

const RUST: &str = r#"
(trait_item name: (_) @name) @interface
(struct_item name: (_) @name) @type
(enum_item name: (_) @name) @type
(union_item name: (_) @name) @type
(type_item name: (_) @name) @type
(function_signature_item name: (_) @name) @method
(declaration_list (function_item name: (_) @name) @method)
(function_item name: (_) @name) @function
(const_item name: (_) @name) @constant
(static_item name: (_) @name) @constant
(mod_item name: (_) @name) @module
(macro_definition name: (_) @name) @macro
"#;

const PYTHON: &str = r#"
(class_definition name: (_) @name) @type
(class_definition body: (block (function_definition name: (_) @name) @method))
(class_definition body: (block (decorated_definition (function_definition name: (_) @name) @method)))
(function_definition name: (_) @name) @function
(module (expression_statement (assignment left: (identifier) @name)) @constant)
"#;

const JS_COMMON: &str = r#"
(function_declaration name: (_) @name) @function
(generator_function_declaration name: (_) @name) @function
(class_declaration name: (_) @name) @type
(method_definition name: (_) @name) @method
(lexical_declaration (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression)])) @function
(variable_declaration (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression)])) @function
(program (lexical_declaration (variable_declarator name: (identifier) @name)) @constant)
(program (export_statement (lexical_declaration (variable_declarator name: (identifier) @name)) @constant))
"#;

const TS_ONLY: &str = r#"
(interface_declaration name: (_) @name) @interface
(type_alias_declaration name: (_) @name) @type
(enum_declaration name: (_) @name) @type
(abstract_class_declaration name: (_) @name) @type
(function_signature name: (_) @name) @function
(method_signature name: (_) @name) @method
(abstract_method_signature name: (_) @name) @method
(internal_module name: (_) @name) @module
(module name: (_) @name) @module
"#;

const GO: &str = r#"
(type_spec name: (_) @name type: (interface_type)) @interface
(type_spec name: (_) @name) @type
(function_declaration name: (_) @name) @function
(method_declaration name: (_) @name) @method
(method_elem name: (_) @name) @method
(const_spec name: (identifier) @name) @constant
"#;

const JAVA: &str = r#"
(interface_declaration name: (_) @name) @interface
(annotation_type_declaration name: (_) @name) @interface
(class_declaration name: (_) @name) @type
(enum_declaration name: (_) @name) @type
(record_declaration name: (_) @name) @type
(method_declaration name: (_) @name) @method
(constructor_declaration name: (_) @name) @method
(field_declaration declarator: (variable_declarator name: (_) @name)) @constant
"#;

const C_COMMON: &str = r#"
(function_declarator declarator: (identifier) @name) @function
(struct_specifier name: (_) @name body: (_)) @type
(union_specifier name: (_) @name body: (_)) @type
(enum_specifier name: (_) @name body: (_)) @type
(type_definition declarator: (type_identifier) @name) @type
(preproc_def name: (_) @name) @constant
(preproc_function_def name: (_) @name) @macro
(enumerator name: (_) @name) @constant
"#;

const CPP_ONLY: &str = r#"
(function_declarator declarator: (field_identifier) @name) @method
(function_declarator declarator: (qualified_identifier name: (identifier) @name)) @method
(class_specifier name: (_) @name body: (_)) @type
(namespace_definition name: (_) @name) @module
(alias_declaration name: (_) @name) @type
"#;

const BASH: &str = r#"
(function_definition name: (_) @name) @function
(program (variable_assignment name: (_) @name) @constant)
(program (declaration_command (variable_assignment name: (_) @name)) @constant)
"#;
