//! Tidy: two structural rules for the whole source tree, checked by reading the source (std only).
//!
//! The project's issue: "No import cycle between modules; no function over 120 lines without a comment
//! saying why."
//!
//! 1. **No import cycle between modules** (`no_import_cycle_between_modules`). The modules of a crate
//!    should form layers: if `solve::greedy` uses `solve::improve` and `solve::improve` uses
//!    `solve::greedy`, neither can be read, tested or moved into another crate without the other. For
//!    every crate (`src/` at the root and each `crates/*/src`; `lib.rs`, `main.rs` and `bin/*` are
//!    separate crates) the test builds the graph of references between its modules and fails on every
//!    cycle.
//!    * A reference is a path starting with `crate::`, `super::` or `self::`, in a `use` (grouped forms
//!      such as `use crate::{a::b, c}` included; a `use` path may also start with a child module's name)
//!      or anywhere in code. It points at the longest prefix of the path that names a module.
//!    * A re-export (`pub use`, `pub(crate) use`, ...) is not a dependency of the re-exporting module.
//!      A path through it is followed to the module that defines the item, so a facade `mod.rs` neither
//!      creates cycles nor hides them.
//!    * A module using its own ancestor or descendant is not a cycle: a parent uses its children and a
//!      child uses `super::` items. Any other edge A -> B is lifted to the two siblings under the lowest
//!      common ancestor that contain A and B; cycles are looked for among the children of each module.
//!    * Test-only code (`#[cfg(test)]` items such as `mod tests { ... }`, and files behind
//!      `#[cfg(test)] mod x;`) is skipped: tests may reach across layers. Other inline `mod name { ... }`
//!      blocks are modules of their own. `#[path]` modules are skipped with a note.
//!    * Comments, string literals (raw ones too) and char literals are blanked out before scanning.
//!
//!    Each cycle is reported with one witness (file:line and the path written there) per edge. Where
//!    several modules all reach each other, a set of shortest cycles covering every edge among them is
//!    reported.
//!
//! 2. **No function over 120 lines without a reason** (`no_function_over_120_lines_without_a_reason`).
//!    A long function is hard to review and usually hides steps that want names. Every `fn` with a body
//!    (free functions, methods, nested functions; not closures) in the source roots and in `tests/` and
//!    `benches/` of every package is measured from the line of `fn` to the line of its closing brace.
//!    Over 120 lines, the contiguous block of comment lines (`//`, `///`, `/* */`; not `//!`) and
//!    attribute lines directly above it must contain the word "long" ("longer", "longest"; any case),
//!    e.g. `// Long because each constraint family is encoded in one pass over the pods.`
//!
//! The repository root is `CARGO_MANIFEST_DIR` at compile time, else `TIDY_ROOT` at run time, else the
//! current directory: `rustc --edition 2024 --test tests/tidy.rs -o /tmp/tidy && TIDY_ROOT=. /tmp/tidy`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

/// Functions longer than this need a comment saying why.
const MAX_FN_LINES: usize = 120;

// ------------------------------------------------------------------------------------------------
// The tree: packages, crate roots and the files to measure.
// ------------------------------------------------------------------------------------------------

fn repo_root() -> PathBuf {
    if let Some(dir) = option_env!("CARGO_MANIFEST_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("TIDY_ROOT") {
        return PathBuf::from(dir);
    }
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."))
}

/// The entries of a directory, sorted; none if it cannot be read.
fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    paths.sort();
    paths
}

/// Package directories: the repository root and each `crates/*`.
fn package_dirs(repo: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![repo.to_path_buf()];
    dirs.extend(sorted_entries(&repo.join("crates")).into_iter().filter(|p| p.is_dir()));
    dirs
}

/// `name` from the `[package]` table of the directory's Cargo.toml, else the directory's name.
fn package_name(dir: &Path) -> String {
    let fallback = dir.file_name().map_or_else(|| "root".to_string(), |n| n.to_string_lossy().into_owned());
    let Ok(text) = std::fs::read_to_string(dir.join("Cargo.toml")) else { return fallback };
    let mut in_package = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if let Some(value) = line.strip_prefix("name").map(str::trim_start).and_then(|r| r.strip_prefix('='))
            && in_package
        {
            return value.trim().trim_matches('"').to_string();
        }
    }
    fallback
}

/// A crate to check: how to call it in reports, and its root file.
struct CrateRoot {
    name: String,
    file: PathBuf,
}

/// The crates of every package: `src/lib.rs`, `src/main.rs`, `src/bin/*.rs` and `src/bin/*/main.rs`.
fn crate_roots(repo: &Path) -> Vec<CrateRoot> {
    let mut roots = Vec::new();
    for dir in package_dirs(repo) {
        let src = dir.join("src");
        let package = package_name(&dir);
        let lib = src.join("lib.rs");
        let has_lib = lib.is_file();
        if has_lib {
            roots.push(CrateRoot { name: package.clone(), file: lib });
        }
        if src.join("main.rs").is_file() {
            let name = if has_lib { format!("{package} (bin)") } else { package.clone() };
            roots.push(CrateRoot { name, file: src.join("main.rs") });
        }
        for bin in sorted_entries(&src.join("bin")) {
            let file = if bin.is_dir() { bin.join("main.rs") } else { bin.clone() };
            let stem = bin.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            if file.is_file() && file.extension().is_some_and(|e| e == "rs") {
                roots.push(CrateRoot { name: format!("{package} (bin {stem})"), file });
            }
        }
    }
    roots
}

/// Every `.rs` file at or under `path`, sorted.
fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in sorted_entries(path) {
            rust_files(&entry, out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_path_buf());
    }
}

/// The files whose functions are measured: `src/`, `tests/` and `benches/` of every package.
fn files_to_measure(repo: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in package_dirs(repo) {
        for sub in ["src", "tests", "benches"] {
            rust_files(&dir.join(sub), &mut files);
        }
    }
    files
}

/// A path as shown in reports: relative to the repository root.
fn shown_path(repo: &Path, file: &Path) -> String {
    file.strip_prefix(repo).unwrap_or(file).display().to_string()
}

// ------------------------------------------------------------------------------------------------
// Lexing: blank out comments and literals, keep line numbers, remember the comments of each line.
// ------------------------------------------------------------------------------------------------

/// Source with comments, string and char literals blanked out (newlines kept, so line numbers stay
/// right), and for each line (index 0 is line 1) the text of the comments on it. Inner doc comments
/// (`//!`, `/*!`) are blanked but not recorded: they document the enclosing module, not the next item.
struct Lexed {
    code: Vec<char>,
    comments: Vec<Option<String>>,
}

fn is_ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn lex(src: &str) -> Lexed {
    let mut lexer = Lexer { s: src.chars().collect(), i: 0, code: Vec::new(), comments: vec![None] };
    lexer.run();
    Lexed { code: lexer.code, comments: lexer.comments }
}

struct Lexer {
    s: Vec<char>,
    i: usize,
    code: Vec<char>,
    comments: Vec<Option<String>>,
}

impl Lexer {
    /// The char `k` ahead, `'\0'` past the end.
    fn at(&self, k: usize) -> char {
        self.s.get(self.i + k).copied().unwrap_or('\0')
    }

    fn run(&mut self) {
        while self.i < self.s.len() {
            let (c, d) = (self.at(0), self.at(1));
            if c == '/' && d == '/' {
                self.line_comment();
            } else if c == '/' && d == '*' {
                self.block_comment();
            } else if c == '"' {
                self.string();
            } else if c == '\'' {
                self.char_or_lifetime();
            } else if !self.prefixed_literal() {
                self.keep();
            }
        }
    }

    /// Copies the current char to the code.
    fn keep(&mut self) {
        let c = self.at(0);
        self.i += 1;
        self.code.push(c);
        if c == '\n' {
            self.comments.push(None);
        }
    }

    /// Blanks `n` chars (newlines kept); inside a comment, their text goes to the line's comment.
    fn blank(&mut self, n: usize, comment: bool) {
        for _ in 0..n {
            let Some(&c) = self.s.get(self.i) else { return };
            self.i += 1;
            if c == '\n' {
                self.code.push('\n');
                self.comments.push(if comment { Some(String::new()) } else { None });
            } else {
                self.code.push(' ');
                if let (true, Some(line)) = (comment, self.comments.last_mut()) {
                    line.get_or_insert_with(String::new).push(c);
                }
            }
        }
    }

    fn line_comment(&mut self) {
        let recorded = self.at(2) != '!';
        let len = self.s[self.i..].iter().take_while(|&&c| c != '\n').count();
        self.blank(len, recorded);
    }

    /// A block comment; they nest.
    fn block_comment(&mut self) {
        let recorded = self.at(2) != '!';
        self.blank(2, recorded);
        let mut depth = 1;
        while self.i < self.s.len() && depth > 0 {
            if self.at(0) == '/' && self.at(1) == '*' {
                depth += 1;
                self.blank(2, recorded);
            } else if self.at(0) == '*' && self.at(1) == '/' {
                depth -= 1;
                self.blank(2, recorded);
            } else {
                self.blank(1, recorded);
            }
        }
    }

    /// A `"..."` string with escapes, starting at its opening quote.
    fn string(&mut self) {
        self.blank(1, false);
        while self.i < self.s.len() {
            match self.at(0) {
                '\\' => self.blank(2, false),
                '"' => return self.blank(1, false),
                _ => self.blank(1, false),
            }
        }
    }

    /// `'x'`, `'\n'`, `'\u{7B}'` are char literals; `'a` and `'label` are lifetimes and labels, kept.
    fn char_or_lifetime(&mut self) {
        if self.at(1) == '\\' {
            let mut k = 3;
            while self.i + k < self.s.len() && self.at(k) != '\'' && self.at(k) != '\n' {
                k += 1;
            }
            self.blank(k + 1, false);
        } else if self.at(2) == '\'' && self.at(1) != '\n' {
            self.blank(3, false);
        } else {
            self.keep();
        }
    }

    /// `b"..."`, `c"..."` and raw strings `r"..."`, `r#"..."#`, `br#"..."#`, `cr"..."`; false if the
    /// `r`, `b` or `c` here starts none of them (an identifier, `b'x'`, a raw identifier `r#type`).
    fn prefixed_literal(&mut self) -> bool {
        let c = self.at(0);
        let after_ident = self.i > 0 && is_ident_char(self.s[self.i - 1]);
        if !matches!(c, 'r' | 'b' | 'c') || after_ident {
            return false;
        }
        let raw_from = if c == 'r' {
            1
        } else if self.at(1) == 'r' {
            2
        } else {
            0
        };
        if raw_from == 0 {
            if self.at(1) != '"' {
                return false;
            }
            self.blank(1, false);
            self.string();
            return true;
        }
        let hashes = (raw_from..).take_while(|&k| self.at(k) == '#').count();
        if self.at(raw_from + hashes) != '"' {
            return false;
        }
        self.blank(raw_from + hashes + 1, false);
        while self.i < self.s.len() {
            if self.at(0) == '"' && (1..=hashes).all(|k| self.at(k) == '#') {
                self.blank(1 + hashes, false);
                break;
            }
            self.blank(1, false);
        }
        true
    }
}

/// A token of blanked code: an identifier or keyword, a lifetime, a number, or punctuation (`::`,
/// `->` and `=>` are one token, everything else one char).
#[derive(Clone, Debug)]
struct Tok {
    text: String,
    line: usize,
}

impl Tok {
    fn is(&self, text: &str) -> bool {
        self.text == text
    }

    fn is_ident(&self) -> bool {
        self.text.chars().next().is_some_and(is_ident_start)
    }
}

fn tokenize(code: &[char]) -> Vec<Tok> {
    let mut toks = Vec::new();
    let (mut i, mut line) = (0, 1);
    let ident_end = |from: usize| (from..=code.len()).find(|&k| k == code.len() || !is_ident_char(code[k])).unwrap_or(from);
    while i < code.len() {
        let c = code[i];
        if c == '\n' {
            line += 1;
        }
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let next = code.get(i + 1).copied().unwrap_or(' ');
        let mut start = i;
        if c == 'r' && next == '#' && code.get(i + 2).is_some_and(|&d| is_ident_start(d)) {
            start = i + 2; // raw identifier `r#type`
            i = ident_end(start);
        } else if is_ident_char(c) || (c == '\'' && is_ident_start(next)) {
            i = ident_end(i + 1);
        } else if matches!((c, next), (':', ':') | ('-', '>') | ('=', '>')) {
            i += 2;
        } else {
            i += 1;
        }
        toks.push(Tok { text: code[start..i].iter().collect(), line });
    }
    toks
}

/// The index of the token closing the `{`, `(` or `[` at `open`; None if the source is unbalanced.
fn closing(toks: &[Tok], open: usize) -> Option<usize> {
    let close = match toks.get(open)?.text.as_str() {
        "{" => "}",
        "(" => ")",
        "[" => "]",
        _ => return None,
    };
    let mut depth = 0usize;
    for (k, tok) in toks.iter().enumerate().skip(open) {
        if tok.text == toks[open].text {
            depth += 1;
        } else if tok.is(close) {
            depth -= 1;
            if depth == 0 {
                return Some(k);
            }
        }
    }
    None
}

/// The `{` opening the body of an item whose header continues at `from`; None when a `;` (a
/// declaration without body) or the end of the enclosing block comes first.
fn body_open(toks: &[Tok], from: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (k, tok) in toks.iter().enumerate().skip(from) {
        match tok.text.as_str() {
            "(" | "[" => depth += 1,
            ")" | "]" => depth -= 1,
            "{" if depth <= 0 => return Some(k),
            ";" | "}" if depth <= 0 => return None,
            _ => {}
        }
    }
    None
}

// ------------------------------------------------------------------------------------------------
// Rule 2: function length.
// ------------------------------------------------------------------------------------------------

/// A block with a name: a function body, or an `impl`, `trait` or inline `mod` (for qualified names).
struct Scope {
    is_fn: bool,
    name: String,
    line: usize,
    open: usize,
    close: usize,
}

/// A function with a body: qualified name, line of `fn`, length in lines, and whether the comments
/// above it say why it is long.
#[derive(Debug)]
struct FnSpan {
    name: String,
    line: usize,
    lines: usize,
    has_reason: bool,
}

fn functions(src: &str) -> Vec<FnSpan> {
    let lexed = lex(src);
    let toks = tokenize(&lexed.code);
    let (code_lines, attr_lines) = line_kinds(&toks, lexed.comments.len());
    let scopes = scopes(&toks);
    let mut fns = Vec::new();
    for f in scopes.iter().filter(|s| s.is_fn) {
        let mut outer: Vec<&Scope> = scopes.iter().filter(|s| s.open < f.open && f.close < s.close).collect();
        outer.sort_by_key(|s| s.open);
        let mut name: Vec<&str> = outer.iter().map(|s| s.name.as_str()).collect();
        name.push(&f.name);
        fns.push(FnSpan { name: name.join("::"), line: f.line, lines: toks[f.close].line - f.line + 1, has_reason: reason_above(f.line, &code_lines, &attr_lines, &lexed.comments) });
    }
    fns
}

/// All `fn`, `impl`, `trait` and inline `mod` blocks.
fn scopes(toks: &[Tok]) -> Vec<Scope> {
    let mut scopes = Vec::new();
    for (k, tok) in toks.iter().enumerate() {
        let next_ident = toks.get(k + 1).filter(|t| t.is_ident()).map(|t| t.text.clone());
        let name = match tok.text.as_str() {
            "fn" | "trait" | "mod" => next_ident,
            "impl" if starts_item(toks, k) => Some(String::new()),
            _ => None,
        };
        let Some(mut name) = name else { continue };
        let Some(open) = body_open(toks, k + 1) else { continue };
        let Some(close) = closing(toks, open) else { continue };
        if tok.is("impl") {
            name = impl_type_name(&toks[k + 1..open]);
        }
        scopes.push(Scope { is_fn: tok.is("fn"), name, line: tok.line, open, close });
    }
    scopes
}

/// Whether the token at `k` begins an item (as `impl` does in `impl X {`, but not in `-> impl Trait`).
fn starts_item(toks: &[Tok], k: usize) -> bool {
    k == 0 || matches!(toks[k - 1].text.as_str(), ";" | "{" | "}" | "]" | "unsafe" | "default")
}

/// The self type of an `impl` header (without `impl`): `<T> fmt::Display for Foo<T> where ...` -> `Foo`.
fn impl_type_name(header: &[Tok]) -> String {
    let mut rest = header;
    if rest.first().is_some_and(|t| t.is("<")) {
        let mut depth = 0i32;
        let end = rest.iter().position(|t| {
            depth += i32::from(t.is("<")) - i32::from(t.is(">"));
            depth == 0
        });
        rest = &rest[end.map_or(rest.len(), |e| e + 1)..];
    }
    let (mut depth, mut start, mut end) = (0i32, 0, rest.len());
    for (k, tok) in rest.iter().enumerate() {
        match tok.text.as_str() {
            "<" | "(" | "[" => depth += 1,
            ">" | ")" | "]" => depth -= 1,
            "for" if depth == 0 && start == 0 => start = k + 1,
            "where" if depth == 0 => {
                end = k;
                break;
            }
            _ => {}
        }
    }
    let ty = &rest[start.min(end)..end];
    let mut depth = 0i32;
    let mut last = None;
    for tok in ty {
        depth += i32::from(matches!(tok.text.as_str(), "<" | "(" | "[")) - i32::from(matches!(tok.text.as_str(), ">" | ")" | "]"));
        if depth == 0 && tok.is_ident() && !matches!(tok.text.as_str(), "dyn" | "mut" | "const" | "unsafe" | "impl") {
            last = Some(tok.text.clone());
        }
    }
    last.or_else(|| ty.iter().find(|t| t.is_ident()).map(|t| t.text.clone())).unwrap_or_else(|| "impl".to_string())
}

/// For each line (1-based): whether it holds code outside attributes, and whether it is (part of) an
/// attribute `#[...]` / `#![...]`.
fn line_kinds(toks: &[Tok], lines: usize) -> (Vec<bool>, Vec<bool>) {
    let mut code = vec![false; lines + 2];
    let mut attr = vec![false; lines + 2];
    let mut k = 0;
    while k < toks.len() {
        if let Some(end) = attribute_end(toks, k) {
            attr[toks[k].line..=toks[end].line].fill(true);
            k = end + 1;
            continue;
        }
        code[toks[k].line] = true;
        k += 1;
    }
    (code, attr)
}

/// If an attribute `#[...]` or `#![...]` starts at `k`: the index of its closing `]`.
fn attribute_end(toks: &[Tok], k: usize) -> Option<usize> {
    if !toks.get(k)?.is("#") {
        return None;
    }
    let open = if toks.get(k + 1)?.is("!") { k + 2 } else { k + 1 };
    if !toks.get(open)?.is("[") {
        return None;
    }
    closing(toks, open)
}

/// Whether the contiguous comment and attribute lines right above `line` mention "long".
fn reason_above(line: usize, code: &[bool], attr: &[bool], comments: &[Option<String>]) -> bool {
    let mut l = line.saturating_sub(1);
    while l >= 1 {
        let comment = comments.get(l - 1).and_then(|c| c.as_deref());
        if code.get(l).copied().unwrap_or(false) || (!attr.get(l).copied().unwrap_or(false) && comment.is_none()) {
            return false;
        }
        if comment.is_some_and(mentions_long) {
            return true;
        }
        l -= 1;
    }
    false
}

/// Whether `text` has the word "long", "longer" or "longest" in any case ("belong" does not count).
fn mentions_long(text: &str) -> bool {
    text.split(|c: char| !c.is_alphabetic()).any(|w| matches!(w.to_lowercase().as_str(), "long" | "longer" | "longest"))
}

/// Offenders of rule 2 as `path:line fn name (N lines)`, longest first, and unreadable files.
fn long_functions(repo: &Path) -> (usize, Vec<String>) {
    let files = files_to_measure(repo);
    let mut found: Vec<(usize, String)> = Vec::new();
    for file in &files {
        let shown = shown_path(repo, file);
        match std::fs::read_to_string(file) {
            Err(e) => found.push((usize::MAX, format!("{shown}: cannot be read: {e}"))),
            Ok(src) => {
                for f in functions(&src).into_iter().filter(|f| f.lines > MAX_FN_LINES && !f.has_reason) {
                    found.push((f.lines, format!("{shown}:{} fn {} ({} lines)", f.line, f.name, f.lines)));
                }
            }
        }
    }
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    (files.len(), found.into_iter().map(|(_, s)| s).collect())
}

// ------------------------------------------------------------------------------------------------
// Rule 1: the module graph of each crate.
// ------------------------------------------------------------------------------------------------

/// A module path from the crate root (empty for the root).
type ModPath = Vec<String>;

/// A path written in a module.
#[derive(Clone, Debug)]
struct Ref {
    segs: Vec<String>,
    line: usize,
    /// In a `use` (where a path may start with a child module's name).
    in_use: bool,
    /// A glob `use path::*`.
    glob: bool,
    /// For a `pub use`: the name it is re-exported as (None for a glob or `as _`).
    reexport: Option<Option<String>>,
}

impl Ref {
    /// The path as written, for witnesses.
    fn shown(&self) -> String {
        let path = self.segs.join("::") + if self.glob { "::*" } else { "" };
        if self.in_use { format!("use {path}") } else { path }
    }
}

#[derive(Default)]
struct Module {
    /// The file it is written in, as shown in reports.
    file: String,
    children: BTreeSet<String>,
    /// Names of items defined here (to follow glob re-exports).
    items: BTreeSet<String>,
    refs: Vec<Ref>,
    /// Re-exported name -> absolute path of what it names; filled in after loading.
    reexports: BTreeMap<String, Vec<String>>,
    /// Modules re-exported with `pub use m::*`; filled in after loading.
    globs: Vec<ModPath>,
}

/// Reads a crate's module tree, starting at its root file.
struct Loader<'a> {
    repo: &'a Path,
    modules: BTreeMap<ModPath, Module>,
    problems: Vec<String>,
}

impl Loader<'_> {
    /// Reads module `path` from `file`; the files of its `mod x;` children are in `child_dir`.
    fn load_file(&mut self, path: ModPath, file: &Path, child_dir: &Path) {
        let shown = shown_path(self.repo, file);
        if self.modules.get(&path).is_some_and(|m| !m.file.is_empty()) {
            return;
        }
        let text = match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(e) => return self.problems.push(format!("{shown}: cannot be read: {e}")),
        };
        let toks = tokenize(&lex(&text).code);
        self.modules.entry(path.clone()).or_default().file = shown.clone();
        self.scan(&toks, 0, toks.len(), &path, child_dir, &shown);
    }

    /// Records what tokens `from..to` of `file`, the body of module `module`, declare and reference.
    fn scan(&mut self, toks: &[Tok], from: usize, to: usize, module: &ModPath, child_dir: &Path, file: &str) {
        let mut k = from;
        while k < to {
            if let Some(end) = attribute_end(toks, k) {
                let body: String = toks[k..=end].iter().map(|t| t.text.as_str()).collect();
                let inner = toks[k + 1].is("!");
                let test_only = body.contains("[cfg(test)]") || body.contains("[cfg(all(test,");
                if test_only && inner {
                    return; // `#![cfg(test)]`: the rest of this module is test code
                }
                if body.starts_with("#[path=") {
                    eprintln!("tidy: {file}:{}: skipping a #[path] module", toks[k].line);
                }
                k = if test_only || body.starts_with("#[path=") { item_end(toks, end + 1, to) } else { end + 1 };
                continue;
            }
            let tok = &toks[k];
            let next = toks.get(k + 1);
            match tok.text.as_str() {
                "mod" if next.is_some_and(Tok::is_ident) => {
                    k = self.module_decl(toks, k, module, child_dir, file);
                    continue;
                }
                "use" if next.is_some_and(|t| !t.is("<")) => {
                    k = self.use_decl(toks, k, module);
                    continue;
                }
                "crate" | "super" | "self" if next.is_some_and(|t| t.is("::")) && !(k > 0 && toks[k - 1].is("::")) => {
                    let (segs, end) = code_path(toks, k);
                    let r = Ref { segs, line: tok.line, in_use: false, glob: false, reexport: None };
                    self.module(module).refs.push(r);
                    k = end;
                    continue;
                }
                "struct" | "enum" | "union" | "trait" | "type" | "fn" | "const" | "static" | "macro_rules" => {
                    let at = if tok.is("macro_rules") { k + 2 } else { k + 1 };
                    let name = toks.get(at).filter(|t| t.is_ident()).map(|t| t.text.clone());
                    self.module(module).items.extend(name);
                }
                _ => {}
            }
            k += 1;
        }
    }

    fn module(&mut self, path: &ModPath) -> &mut Module {
        self.modules.entry(path.clone()).or_default()
    }

    /// `mod name;` (load its file) or `mod name { ... }` (scan the block); returns where to go on.
    fn module_decl(&mut self, toks: &[Tok], k: usize, module: &ModPath, child_dir: &Path, file: &str) -> usize {
        let name = toks[k + 1].text.clone();
        let mut child = module.clone();
        child.push(name.clone());
        let dir = child_dir.join(&name);
        match toks.get(k + 2).map(|t| t.text.as_str()) {
            Some(";") => {
                self.module(module).children.insert(name.clone());
                let flat = child_dir.join(format!("{name}.rs"));
                let nested = dir.join("mod.rs");
                match [flat, nested].into_iter().find(|f| f.is_file()) {
                    Some(found) => self.load_file(child, &found, &dir),
                    None => self.problems.push(format!("{file}:{}: `mod {name};` but neither {name}.rs nor {name}/mod.rs exists in {}", toks[k].line, shown_path(self.repo, child_dir))),
                }
                k + 3
            }
            Some("{") => {
                let Some(close) = closing(toks, k + 2) else { return k + 3 };
                self.module(module).children.insert(name);
                self.module(&child).file = file.to_string();
                self.scan(toks, k + 3, close, &child, &dir, file);
                close + 1
            }
            _ => k + 2,
        }
    }

    /// A `use` declaration at `k`: records its leaves; returns the index after its `;`.
    fn use_decl(&mut self, toks: &[Tok], k: usize, module: &ModPath) -> usize {
        let public = is_public(toks, k);
        let end = (k..toks.len()).find(|&j| toks[j].is(";")).unwrap_or(toks.len());
        let mut leaves = Vec::new();
        let mut at = k + 1;
        use_tree(&toks[..end], &mut at, Vec::new(), &mut leaves);
        for (segs, bound, glob) in leaves {
            let reexport = public.then_some(bound);
            let r = Ref { segs, line: toks[k].line, in_use: true, glob, reexport };
            self.module(module).refs.push(r);
        }
        end + 1
    }
}

/// Where the item starting at `from` ends (after its `;` or its `{ ... }` block), within `..to`.
fn item_end(toks: &[Tok], from: usize, to: usize) -> usize {
    let mut k = from;
    while let Some(end) = attribute_end(toks, k) {
        k = end + 1;
    }
    let mut depth = 0i32;
    while k < to {
        match toks[k].text.as_str() {
            "(" | "[" => depth += 1,
            ")" | "]" => depth -= 1,
            ";" if depth <= 0 => return k + 1,
            "{" if depth <= 0 => return closing(toks, k).map_or(to, |c| c + 1).min(to),
            "}" if depth <= 0 => return k,
            _ => {}
        }
        k += 1;
    }
    to
}

/// Whether the `use` at `k` has a visibility: `pub`, `pub(crate)`, `pub(in path)`.
fn is_public(toks: &[Tok], k: usize) -> bool {
    let Some(prev) = k.checked_sub(1).map(|p| &toks[p]) else { return false };
    if prev.is("pub") {
        return true;
    }
    if !prev.is(")") {
        return false;
    }
    let mut depth = 0i32;
    for j in (0..k).rev() {
        depth += i32::from(toks[j].is(")")) - i32::from(toks[j].is("("));
        if depth == 0 {
            return j > 0 && toks[j - 1].is("pub");
        }
    }
    false
}

/// A path in code starting at `k` (`crate`, `super` or `self`): its segments and the index after it.
fn code_path(toks: &[Tok], k: usize) -> (Vec<String>, usize) {
    let mut segs = vec![toks[k].text.clone()];
    let mut j = k + 1;
    while j + 1 < toks.len() && toks[j].is("::") && toks[j + 1].is_ident() {
        segs.push(toks[j + 1].text.clone());
        j += 2;
    }
    (segs, j)
}

/// Expands the use tree at `*at` under `prefix` into leaves: (path, name bound or None for `as _`, glob).
/// `{self}` and globs name the prefix itself.
fn use_tree(toks: &[Tok], at: &mut usize, prefix: Vec<String>, leaves: &mut Vec<(Vec<String>, Option<String>, bool)>) {
    let mut path = prefix;
    while let Some(tok) = toks.get(*at) {
        let followed_by_path = toks.get(*at + 1).is_some_and(|t| t.is("::"));
        match tok.text.as_str() {
            "::" => *at += 1,
            "*" => {
                *at += 1;
                return leaves.push((path, None, true));
            }
            "{" => {
                *at += 1;
                while let Some(tok) = toks.get(*at) {
                    if tok.is("}") {
                        *at += 1;
                        return;
                    }
                    let before = *at;
                    if !tok.is(",") {
                        use_tree(toks, at, path.clone(), leaves);
                    }
                    if *at == before {
                        *at += 1; // a comma, or a token no use tree starts with
                    }
                }
                return;
            }
            _ if tok.is_ident() => {
                *at += 1;
                // `{self}` names the prefix itself
                if !tok.is("self") || path.is_empty() {
                    path.push(tok.text.clone());
                }
                if !followed_by_path {
                    let mut bound = path.last().cloned();
                    if toks.get(*at).is_some_and(|t| t.is("as")) {
                        bound = toks.get(*at + 1).map(|t| t.text.clone()).filter(|n| n != "_");
                        *at += 2;
                    }
                    return leaves.push((path, bound, false));
                }
            }
            _ => return,
        }
    }
}

/// The absolute path that `segs`, written in module `at`, names; None for paths into other crates.
fn absolute(modules: &BTreeMap<ModPath, Module>, at: &[String], r: &Ref) -> Option<Vec<String>> {
    let segs = &r.segs;
    let (mut base, rest): (Vec<String>, &[String]) = match segs.first()?.as_str() {
        "crate" => (Vec::new(), &segs[1..]),
        "self" => (at.to_vec(), &segs[1..]),
        "super" => {
            let supers = segs.iter().take_while(|s| *s == "super").count();
            (at[..at.len().checked_sub(supers)?].to_vec(), &segs[supers..])
        }
        name if r.in_use && modules.get(at).is_some_and(|m| m.children.contains(name)) => (at.to_vec(), &segs[..]),
        _ => return None,
    };
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The length of the longest prefix of `path` that is a module (the root, length 0, always is).
fn module_prefix(modules: &BTreeMap<ModPath, Module>, path: &[String]) -> usize {
    (0..=path.len()).rev().find(|&k| modules.contains_key(&path[..k])).unwrap_or(0)
}

/// The module defining what the absolute `path` names: its longest module prefix, following re-exports.
fn defining_module(modules: &BTreeMap<ModPath, Module>, path: &[String]) -> ModPath {
    let mut path = path.to_vec();
    for _ in 0..32 {
        let k = module_prefix(modules, &path);
        let (Some(name), Some(module)) = (path.get(k), modules.get(&path[..k])) else { break };
        let via_glob = module.globs.iter().find(|g| modules.get(*g).is_some_and(|m| m.items.contains(name) || m.children.contains(name) || m.reexports.contains_key(name)));
        let target = match (module.reexports.get(name), via_glob) {
            (Some(target), _) => target.clone(),
            (None, Some(glob)) => [glob.clone(), vec![name.clone()]].concat(),
            (None, None) => break,
        };
        path = [target, path[k + 1..].to_vec()].concat();
    }
    path.truncate(module_prefix(modules, &path));
    path
}

/// Turns each module's `pub use` leaves into its re-export table.
fn resolve_reexports(modules: &mut BTreeMap<ModPath, Module>) {
    let mut tables = Vec::new();
    for (path, module) in modules.iter() {
        let (mut names, mut globs) = (BTreeMap::new(), Vec::new());
        for r in &module.refs {
            let (Some(bound), Some(abs)) = (&r.reexport, absolute(modules, path, r)) else { continue };
            if r.glob {
                globs.push(abs[..module_prefix(modules, &abs)].to_vec());
            } else if let Some(name) = bound {
                names.insert(name.clone(), abs);
            }
        }
        tables.push((path.clone(), names, globs));
    }
    for (path, names, globs) in tables {
        if let Some(module) = modules.get_mut(&path) {
            module.reexports = names;
            module.globs = globs;
        }
    }
}

/// Where a dependency between two modules is written.
#[derive(Clone, Debug)]
struct Witness {
    file: String,
    line: usize,
    shown: String,
}

/// The edges among the children of one module: from child -> to child -> first witness.
type Adjacency = BTreeMap<String, BTreeMap<String, Witness>>;

/// The sibling edges of a crate, by parent module.
type SiblingGraph = BTreeMap<ModPath, Adjacency>;

/// Loads a crate and builds its sibling graph; also returns the number of modules and any problems.
fn crate_graph(repo: &Path, root: &CrateRoot) -> (usize, SiblingGraph, Vec<String>) {
    let mut loader = Loader { repo, modules: BTreeMap::new(), problems: Vec::new() };
    let dir = root.file.parent().unwrap_or(repo).to_path_buf();
    loader.load_file(Vec::new(), &root.file, &dir);
    let mut modules = loader.modules;
    resolve_reexports(&mut modules);
    let mut graph = SiblingGraph::new();
    for (from, module) in &modules {
        for r in module.refs.iter().filter(|r| r.reexport.is_none()) {
            let Some(abs) = absolute(&modules, from, r) else { continue };
            let to = defining_module(&modules, &abs);
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common == from.len() || common == to.len() {
                continue; // a module using its ancestor or its descendant
            }
            let witness = Witness { file: module.file.clone(), line: r.line, shown: r.shown() };
            let by_parent = graph.entry(from[..common].to_vec()).or_default();
            by_parent.entry(from[common].clone()).or_default().entry(to[common].clone()).or_insert(witness);
        }
    }
    (modules.len(), graph, loader.problems)
}

/// The nodes reachable from `start` in `adj` (including `start`), restricted to `within`.
fn reachable(adj: &Adjacency, start: &str, within: Option<&BTreeSet<String>>) -> BTreeMap<String, Option<String>> {
    // node -> the node it was first reached from (for shortest paths)
    let mut seen = BTreeMap::from([(start.to_string(), None)]);
    let mut queue = VecDeque::from([start.to_string()]);
    while let Some(node) = queue.pop_front() {
        for next in adj.get(&node).into_iter().flat_map(|m| m.keys()) {
            if within.is_none_or(|w| w.contains(next)) && !seen.contains_key(next) {
                seen.insert(next.clone(), Some(node.clone()));
                queue.push_back(next.clone());
            }
        }
    }
    seen
}

/// The cycles among one module's children: for every group of mutually reachable children, shortest
/// cycles until every edge inside the group is on one. Each cycle starts and ends at its smallest node.
fn cycles(adj: &Adjacency) -> Vec<Vec<String>> {
    let reach: BTreeMap<&String, BTreeMap<String, Option<String>>> = adj.keys().map(|n| (n, reachable(adj, n, None))).collect();
    let mut found: Vec<Vec<String>> = Vec::new();
    let mut covered: BTreeSet<(String, String)> = BTreeSet::new();
    for (from, targets) in adj {
        let group: BTreeSet<String> = reach[from].keys().filter(|n| reach.get(n).is_some_and(|r| r.contains_key(from))).cloned().collect();
        for to in targets.keys().filter(|t| group.contains(*t) && *t != from) {
            if covered.contains(&(from.clone(), to.clone())) {
                continue;
            }
            // The shortest way back from `to` to `from` inside the group closes the cycle.
            let back = reachable(adj, to, Some(&group));
            let mut cycle = vec![from.clone()];
            while cycle.last() != Some(to) {
                let Some(Some(prev)) = cycle.last().and_then(|n| back.get(n)) else { break };
                cycle.push(prev.clone());
            }
            if cycle.last() != Some(to) {
                continue; // cannot happen: everything in the group reaches everything else
            }
            cycle.reverse(); // `to` ... `from`, and the edge `from` -> `to` closes it
            let min = cycle.iter().enumerate().min_by_key(|(_, n)| *n).map_or(0, |(i, _)| i);
            cycle.rotate_left(min);
            cycle.push(cycle[0].clone());
            covered.extend(cycle.windows(2).map(|w| (w[0].clone(), w[1].clone())));
            found.push(cycle);
        }
    }
    found.sort();
    found.dedup();
    found
}

/// Rule 1 over the repository: the number of modules read, and every cycle and problem found.
fn import_cycles(repo: &Path) -> (usize, Vec<String>) {
    let (mut module_count, mut findings) = (0, Vec::new());
    for root in crate_roots(repo) {
        let (count, graph, problems) = crate_graph(repo, &root);
        module_count += count;
        findings.extend(problems.into_iter().map(|p| format!("crate {}: {p}", root.name)));
        for (parent, adj) in &graph {
            let qualified = |child: &String| parent.iter().chain([child]).cloned().collect::<Vec<_>>().join("::");
            for cycle in cycles(adj) {
                let names: Vec<String> = cycle.iter().map(qualified).collect();
                let witnesses: Vec<String> = cycle.windows(2).map(|w| &adj[&w[0]][&w[1]]).map(|w| format!("{}:{} `{}`", w.file, w.line, w.shown)).collect();
                findings.push(format!("crate {}: {} ({})", root.name, names.join(" -> "), witnesses.join(", ")));
            }
        }
    }
    (module_count, findings)
}

// ------------------------------------------------------------------------------------------------
// The rules, over the whole tree.
// ------------------------------------------------------------------------------------------------

#[test]
fn no_import_cycle_between_modules() {
    let repo = repo_root();
    let (modules, findings) = import_cycles(&repo);
    assert!(modules > 0, "tidy found no crate under {} (looked for src/ and crates/*/src)", repo.display());
    eprintln!("tidy: {modules} modules read under {}", repo.display());
    assert!(
        findings.is_empty(),
        "{} import cycle(s) between modules. A module may use its ancestors and descendants; siblings \
         (or what they contain) may not use each other both ways:\n{}\n",
        findings.len(),
        findings.join("\n")
    );
}

#[test]
fn no_function_over_120_lines_without_a_reason() {
    let repo = repo_root();
    let (files, offenders) = long_functions(&repo);
    assert!(files > 0, "tidy found no .rs file under {} (looked in src/, tests/, benches/)", repo.display());
    eprintln!("tidy: {files} files measured under {}", repo.display());
    assert!(
        offenders.is_empty(),
        "{} function(s) over {MAX_FN_LINES} lines without a comment saying why. Split them, or put a \
         comment with the word \"long\" right above (e.g. `// Long because ...`):\n{}\n",
        offenders.len(),
        offenders.join("\n")
    );
}

// ------------------------------------------------------------------------------------------------
// Tests of the checks themselves, so that they cannot pass silently.
// ------------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A throwaway directory tree, removed on drop.
    struct TempTree(PathBuf);

    impl TempTree {
        fn new(files: &[(&str, &str)]) -> TempTree {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, Ordering::SeqCst);
            let dir = std::env::temp_dir().join(format!("tidy-test-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            for (path, text) in [("Cargo.toml", "[package]\nname = \"fixture\"\n")].iter().chain(files) {
                let file = dir.join(path);
                std::fs::create_dir_all(file.parent().expect("fixture paths have a parent")).expect("create the fixture directory");
                std::fs::write(&file, text).expect("write a fixture file");
            }
            TempTree(dir)
        }
    }

    impl Drop for TempTree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn cycles_in(files: &[(&str, &str)]) -> Vec<String> {
        let tree = TempTree::new(files);
        let (modules, findings) = import_cycles(&tree.0);
        assert!(modules > 0, "the fixture crate was not read");
        findings
    }

    #[test]
    fn a_cycle_through_three_modules_is_found() {
        let findings = cycles_in(&[
            ("src/lib.rs", "pub mod a;\npub mod b;\npub mod c;\n"),
            ("src/a.rs", "use crate::{b::B, b::{self as bee}};\npub struct A;\n"),
            ("src/b.rs", "pub struct B;\nfn f() {\n    crate::c::g();\n}\n"),
            ("src/c.rs", "use super::a::A;\npub fn g() {}\n"),
        ]);
        assert_eq!(findings, ["crate fixture: a -> b -> c -> a (src/a.rs:1 `use crate::b::B`, src/b.rs:3 `crate::c::g`, src/c.rs:1 `use super::a::A`)"]);
    }

    #[test]
    fn a_deep_reference_is_lifted_to_the_siblings_that_contain_it() {
        let findings = cycles_in(&[
            ("src/lib.rs", "mod x;\nmod y;\n"),
            ("src/x/mod.rs", "mod deep;\npub struct X;\n"),
            ("src/x/deep.rs", "fn f() -> crate::y::inner::Y { crate::y::inner::Y }\n"),
            ("src/y.rs", "pub mod inner { pub struct Y; use crate::x::X; }\n"),
        ]);
        assert_eq!(findings, ["crate fixture: x -> y -> x (src/x/deep.rs:1 `crate::y::inner::Y`, src/y.rs:1 `use crate::x::X`)"]);
    }

    #[test]
    fn a_parent_using_its_child_is_not_a_cycle() {
        let findings = cycles_in(&[
            ("src/lib.rs", "mod p;\nuse p::x::X;\n"),
            ("src/p/mod.rs", "pub mod x;\nuse self::x::X;\npub struct P;\nfn f() { crate::p::x::g(); }\n"),
            ("src/p/x.rs", "use super::P;\nuse crate::p::P as Q;\npub struct X;\npub fn g() {}\n"),
        ]);
        assert!(findings.is_empty(), "{findings:?}");
    }

    #[test]
    fn a_re_export_is_followed_not_counted() {
        // `a` re-exports `b::BThing` and `b` uses `a`: not a cycle. `c` reaches `b` through `a`'s
        // re-export and `b` uses `c`: a cycle between `b` and `c`, and `a` is not in it.
        let findings = cycles_in(&[
            ("src/lib.rs", "mod a;\nmod b;\nmod c;\n"),
            ("src/a.rs", "pub use crate::b::BThing;\npub(crate) use crate::b::{self as bee};\npub struct AThing;\n"),
            ("src/b.rs", "use crate::a::AThing;\nuse crate::c::C;\npub struct BThing;\n"),
            ("src/c.rs", "use crate::a::BThing;\npub struct C;\n"),
        ]);
        assert_eq!(findings, ["crate fixture: b -> c -> b (src/b.rs:2 `use crate::c::C`, src/c.rs:1 `use crate::a::BThing`)"]);
    }

    #[test]
    fn references_in_comments_strings_and_tests_are_ignored() {
        let b = r####"// crate::a::A
/// See [`crate::a::A`].
/* crate::a::A /* nested */ crate::a::A */
fn f() -> usize {
    let quote = '"';
    let s = "crate::a::A \" crate::a::A";
    let r = r#"crate::a::A "still" crate::a::A"#;
    let bytes = br"crate::a::A";
    quote.len_utf8() + s.len() + r.len() + bytes.len()
}
#[cfg(test)]
mod tests {
    use crate::a::A;
}
pub struct B;
"####;
        let findings = cycles_in(&[("src/lib.rs", "mod a;\nmod b;\n"), ("src/a.rs", "use crate::b::B;\npub struct A;\n"), ("src/b.rs", b)]);
        assert!(findings.is_empty(), "{findings:?}");
    }

    #[test]
    fn lexing_blanks_literals_and_keeps_lifetimes_and_lines() {
        let src = "fn f<'a>(x: &'a str) -> char { // c {\n    let _ = \"{\\\"\"; '{' }\n";
        let lexed = lex(src);
        let code: String = lexed.code.iter().collect();
        assert_eq!(code.lines().count(), 2);
        assert!(code.contains("<'a>") && code.contains("&'a str"), "{code}");
        assert_eq!(code.matches('{').count(), 1, "{code}");
        assert_eq!(lexed.comments[0].as_deref(), Some("// c {"));
    }

    /// A file with one function `name` of exactly `lines` lines after `above`, plus a short one.
    fn file_with_function(above: &str, name: &str, lines: usize) -> String {
        let body: String = (0..lines - 2).map(|i| format!("    let _x{i} = {i};\n")).collect();
        format!("{above}fn {name}() {{\n{body}}}\n\nfn short() {{}}\n")
    }

    #[test]
    fn a_long_function_without_a_reason_is_reported() {
        let src = file_with_function("// This does not belong here.\n", "big", 121);
        let tree = TempTree::new(&[
            ("src/lib.rs", src.as_str()),
            ("src/ok.rs", file_with_function("", "limit", 120).as_str()),
            ("tests/t.rs", format!("struct S;\nimpl S {{\n{}}}\n", file_with_function("", "method", 150)).as_str()),
            ("crates/sub/benches/b.rs", file_with_function("/// Long-winded docs are no reason...\n\n", "far", 130).as_str()),
        ]);
        let (files, offenders) = long_functions(&tree.0);
        assert_eq!(files, 4);
        assert_eq!(offenders, ["tests/t.rs:3 fn S::method (150 lines)", "crates/sub/benches/b.rs:3 fn far (130 lines)", "src/lib.rs:2 fn big (121 lines)"]);
    }

    #[test]
    fn a_long_function_with_a_reason_is_accepted() {
        for above in [
            "// Long because the encoding reads best in one place.\n",
            "/// Builds the model.\n///\n/// This is LONG: one pass per constraint family.\n#[allow(clippy::too_many_lines)]\n#[inline]\n",
            "/* longer than usual,\n\n   on purpose */\n#[cfg_attr(\n    test,\n    allow(dead_code)\n)]\npub(crate) async ",
        ] {
            let fns = functions(&file_with_function(above, "big", 200));
            assert!(fns.iter().all(|f| f.has_reason || f.name == "short"), "{above:?}: {fns:?}");
            assert_eq!(fns.len(), 2);
        }
    }

    #[test]
    fn braces_in_strings_do_not_confuse_the_length() {
        let src = r####"impl<'a, T: Fn() -> u8> Trait for Wrapper<'a, T> where T: Clone {
    pub const fn f(&self) -> &'a str {
        let _ = "{ { {";
        let _ = '{';
        let _ = r#"}"#; // }
        /* { */ 'outer: loop { break 'outer; }
        "}"
    }
}
trait Tr { fn decl(&self); fn g(&self) -> [u8; 2] { [b'{', b'}'] } }
"####;
        let fns = functions(src);
        let summary: Vec<(String, usize, usize)> = fns.iter().map(|f| (f.name.clone(), f.line, f.lines)).collect();
        assert_eq!(summary, [("Wrapper::f".to_string(), 2, 7), ("Tr::g".to_string(), 10, 1)]);
    }
}
