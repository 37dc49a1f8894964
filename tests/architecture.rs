//! The dependency rules of the workspace, read from the source of every crate:
//!
//! - **No circle of imports inside a crate.** If file A names an item of file B, B names
//!   nothing of A, directly or around a ring: a file can be read knowing only the files below
//!   it. A module's file and its children's files count as any others: a child reads its
//!   parent's items only where the parent reads none of the child's.
//! - **No import through a crate's root.** Inside a crate, an item is named by the module that
//!   defines it, never by the root's re-export: the root is the crate's public face, so the
//!   layering shows in the paths.
//! - **Core's concerns** (its top-level modules and, under `gate/`, each gate) use each other
//!   in no circle, and a gate reads of another only what it is given: the canonical arguments
//!   decode writes and the call bound to its tool.
//!
//! The test parses every file with `syn`, resolves each path the code names (through `use`
//! declarations and re-exports) to the module that defines the item, and looks for circles in
//! the graphs of files and of concerns. Code compiled only for tests (`#[cfg(test)]`) is left
//! out: the rules are about what ships. A method call names no path: a file that calls methods
//! of a value whose type it never names (`store.end_sources(..)`) adds no edge for them.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};
use syn::{Attribute, Expr, Item, Token, UseTree};

type ModulePath = Vec<String>;

/// Who uses whom, each use with one example (`file names path`).
type Graph = BTreeMap<String, BTreeMap<String, String>>;

#[derive(Default)]
struct Module {
    file: PathBuf,
    children: BTreeSet<String>,
    /// What each name a `use` brings into the module stands for, written from the crate root.
    uses: BTreeMap<String, ModulePath>,
    /// The paths the module's code names, as written.
    references: Vec<ModulePath>,
}

struct Crate {
    source: PathBuf,
    modules: BTreeMap<ModulePath, Module>,
    /// The `macro_rules!` macros the crate defines, which Rust places at its root.
    macros: BTreeSet<String>,
}

impl Crate {
    /// The crate whose sources are in `source`, from its `lib.rs` or, for a binary, `main.rs`.
    fn read(source: &Path) -> Crate {
        let mut krate = Crate {
            source: source.to_owned(),
            modules: BTreeMap::new(),
            macros: BTreeSet::new(),
        };
        let root = ["lib.rs", "main.rs"]
            .iter()
            .map(|name| source.join(name))
            .find(|file| file.exists())
            .unwrap_or_else(|| panic!("{} has no lib.rs or main.rs", source.display()));
        krate.read_file(Vec::new(), root);
        let uses: Vec<(ModulePath, Vec<(String, ModulePath)>)> = krate
            .modules
            .iter()
            .map(|(path, module)| {
                let absolute = module
                    .uses
                    .iter()
                    .filter_map(|(name, written)| {
                        Some((name.clone(), krate.absolute_use(path, written)?))
                    })
                    .collect();
                (path.clone(), absolute)
            })
            .collect();
        for (path, absolute) in uses {
            krate.modules.get_mut(&path).expect("read above").uses = absolute.into_iter().collect();
        }
        krate
    }

    fn read_file(&mut self, path: ModulePath, file: PathBuf) {
        let text =
            fs::read_to_string(&file).unwrap_or_else(|error| panic!("{}: {error}", file.display()));
        let parsed =
            syn::parse_file(&text).unwrap_or_else(|error| panic!("{}: {error}", file.display()));
        let directory = if path.is_empty() || file.ends_with("mod.rs") {
            file.parent().expect("a file has a directory").to_owned()
        } else {
            file.with_extension("")
        };
        self.read_items(path, &file, &directory, &parsed.items);
    }

    fn read_items(&mut self, path: ModulePath, file: &Path, directory: &Path, items: &[Item]) {
        self.modules.entry(path.clone()).or_default().file = file.to_owned();
        let mut references = References::default();
        for item in items.iter().filter(|item| !for_tests_only(item)) {
            match item {
                Item::Mod(module) => {
                    let name = module.ident.to_string();
                    self.modules
                        .get_mut(&path)
                        .expect("inserted above")
                        .children
                        .insert(name.clone());
                    let mut child = path.clone();
                    child.push(name.clone());
                    match &module.content {
                        Some((_, items)) => {
                            self.read_items(child, file, &directory.join(&name), items)
                        }
                        None => {
                            let flat = directory.join(format!("{name}.rs"));
                            let nested = directory.join(&name).join("mod.rs");
                            self.read_file(child, if flat.exists() { flat } else { nested });
                        }
                    }
                }
                Item::Use(declaration) => {
                    let uses = &mut self.modules.get_mut(&path).expect("inserted above").uses;
                    bind(&declaration.tree, Vec::new(), uses);
                }
                Item::Macro(definition) if definition.mac.path.is_ident("macro_rules") => {
                    if let Some(name) = &definition.ident {
                        self.macros.insert(name.to_string());
                    }
                    references.visit_item(item);
                }
                item => references.visit_item(item),
            }
        }
        self.modules
            .get_mut(&path)
            .expect("inserted above")
            .references
            .extend(references.paths);
    }

    /// The path of a `use` declaration in the module at `at`, from the crate root; `None` for
    /// what lies outside the crate (`std`, other crates).
    fn absolute_use(&self, at: &ModulePath, written: &[String]) -> Option<ModulePath> {
        let first = written.first()?;
        let module = self.modules.get(at)?;
        let inside =
            ["crate", "self", "super"].contains(&first.as_str()) || module.children.contains(first);
        inside.then(|| self.absolute(at, written)).flatten()
    }

    /// `written`, as it stands in the module at `at`, from the crate root; `None` for what
    /// lies outside the crate (`std`, other crates) or is local to a body.
    fn absolute(&self, at: &ModulePath, written: &[String]) -> Option<ModulePath> {
        let (first, rest) = written.split_first()?;
        let module = self.modules.get(at)?;
        match first.as_str() {
            "crate" => Some(rest.to_vec()),
            "self" => Some([at.as_slice(), rest].concat()),
            "super" => {
                let parent = at.split_last()?.1.to_vec();
                self.absolute(&parent, &[&["self".to_owned()], rest].concat())
            }
            name if module.children.contains(name) => Some([at.as_slice(), written].concat()),
            name => module
                .uses
                .get(name)
                .map(|bound| [bound.as_slice(), rest].concat()),
        }
    }

    /// The module that defines the item `path` names, following re-exports.
    fn definer(&self, path: &[String], hops: usize) -> ModulePath {
        let mut module: ModulePath = Vec::new();
        for (at, segment) in path.iter().enumerate() {
            let here = &self.modules[&module];
            if here.children.contains(segment) {
                module.push(segment.clone());
            } else if let Some(bound) = here.uses.get(segment).filter(|_| hops < 32) {
                return self.definer(&[bound.as_slice(), &path[at + 1..]].concat(), hops + 1);
            } else {
                break;
            }
        }
        module
    }

    /// The file `module` is written in, from the crate's directory.
    fn file_of(&self, module: &ModulePath) -> String {
        let file = &self.modules[module].file;
        let crate_directory = self.source.parent().expect("src has a parent");
        file.strip_prefix(crate_directory)
            .unwrap_or(file)
            .display()
            .to_string()
    }

    /// The uses between the groups `group` puts modules in, with one example of each.
    fn graph(&self, group: impl Fn(&Crate, &ModulePath) -> Option<String>) -> Graph {
        let mut graph = Graph::new();
        for (path, module) in &self.modules {
            let Some(from) = group(self, path) else {
                continue;
            };
            graph.entry(from.clone()).or_default();
            for written in &module.references {
                let Some(absolute) = self.absolute(path, written) else {
                    continue;
                };
                let Some(to) = group(self, &self.definer(&absolute, 0)) else {
                    continue;
                };
                if to != from {
                    let example = format!("{} names `{}`", self.file_of(path), written.join("::"));
                    graph
                        .entry(from.clone())
                        .or_default()
                        .entry(to)
                        .or_insert(example);
                }
            }
        }
        graph
    }

    /// Which file uses which.
    fn file_graph(&self) -> Graph {
        self.graph(|krate, module| Some(krate.file_of(module)))
    }

    /// Which of core's concerns uses which; the crate root is none.
    fn concern_graph(&self) -> Graph {
        self.graph(|_, module| concern(module))
    }

    /// The places where a module of the crate names an item through the crate root's
    /// re-exports or items, each as `file names path`.
    fn through_the_root(&self) -> BTreeSet<String> {
        let root = &self.modules[&Vec::new()];
        let mut found = BTreeSet::new();
        for (path, module) in self.modules.iter().filter(|(path, _)| !path.is_empty()) {
            let imported = module.uses.values().map(|bound| (bound, bound.clone()));
            let named = (module.references.iter())
                .filter_map(|written| Some((written, self.absolute(path, written)?)));
            for (written, absolute) in imported.chain(named) {
                let Some(first) = absolute.first() else {
                    continue;
                };
                if !root.children.contains(first) && !self.macros.contains(first) {
                    found.insert(format!(
                        "{} names `crate::{first}` (as `{}`)",
                        self.file_of(path),
                        written.join("::")
                    ));
                }
            }
        }
        found
    }
}

fn concern(path: &[String]) -> Option<String> {
    match path {
        [] => None,
        [gate, inner, ..] if gate == "gate" => Some(format!("gate::{inner}")),
        [first, ..] => Some(first.clone()),
    }
}

fn for_tests_only(item: &Item) -> bool {
    let attributes: &[Attribute] = match item {
        Item::Const(item) => &item.attrs,
        Item::Enum(item) => &item.attrs,
        Item::Fn(item) => &item.attrs,
        Item::Impl(item) => &item.attrs,
        Item::Mod(item) => &item.attrs,
        Item::Static(item) => &item.attrs,
        Item::Struct(item) => &item.attrs,
        Item::Trait(item) => &item.attrs,
        Item::Type(item) => &item.attrs,
        Item::Use(item) => &item.attrs,
        _ => &[],
    };
    is_for_tests(attributes)
}

fn is_for_tests(attributes: &[Attribute]) -> bool {
    attributes.iter().any(|attribute| {
        attribute.path().is_ident("cfg")
            && attribute
                .parse_args::<syn::Meta>()
                .is_ok_and(|meta| meta.path().is_ident("test"))
    })
}

/// The names a `use` tree brings in, each with the path it stands for (as written).
fn bind(tree: &UseTree, prefix: ModulePath, uses: &mut BTreeMap<String, ModulePath>) {
    let with = |segment: String| {
        let mut path = prefix.clone();
        path.push(segment);
        path
    };
    match tree {
        UseTree::Path(path) => bind(&path.tree, with(path.ident.to_string()), uses),
        UseTree::Name(name) if name.ident == "self" => {
            if let Some(last) = prefix.last() {
                uses.insert(last.clone(), prefix.clone());
            }
        }
        UseTree::Name(name) => {
            uses.insert(name.ident.to_string(), with(name.ident.to_string()));
        }
        UseTree::Rename(rename) if rename.rename != "_" => {
            uses.insert(rename.rename.to_string(), with(rename.ident.to_string()));
        }
        UseTree::Group(group) => group
            .items
            .iter()
            .for_each(|tree| bind(tree, prefix.clone(), uses)),
        UseTree::Rename(_) | UseTree::Glob(_) => {}
    }
}

/// Every path the code of some items names, macro arguments included where they parse as
/// expressions.
#[derive(Default)]
struct References {
    paths: Vec<ModulePath>,
}

impl<'ast> Visit<'ast> for References {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.paths.push(
            path.segments
                .iter()
                .map(|segment| segment.ident.to_string())
                .collect(),
        );
        visit::visit_path(self, path);
    }

    /// `pub(crate)`, `pub(super)`: who may see an item is no use of another module.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_item(&mut self, item: &'ast Item) {
        if !for_tests_only(item) {
            visit::visit_item(self, item);
        }
    }

    fn visit_impl_item_fn(&mut self, function: &'ast syn::ImplItemFn) {
        if !is_for_tests(&function.attrs) {
            visit::visit_impl_item_fn(self, function);
        }
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        if let Ok(arguments) = mac.parse_body_with(Punctuated::<Expr, Token![,]>::parse_terminated)
        {
            arguments
                .iter()
                .for_each(|argument| self.visit_expr(argument));
        }
        visit::visit_macro(self, mac);
    }
}

/// The circles of `graph`: its strongly connected components of more than one node
/// (Tarjan's algorithm).
fn circles(graph: &Graph) -> Vec<Vec<String>> {
    struct Search<'a> {
        graph: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Search<'a> {
        fn visit(&mut self, node: &'a str) {
            let index = self.index.len();
            self.index.insert(node, index);
            self.low.insert(node, index);
            self.stack.push(node);
            self.on_stack.insert(node);
            for next in self.graph.get(node).into_iter().flat_map(BTreeMap::keys) {
                if !self.index.contains_key(next.as_str()) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next.as_str()]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(next.as_str()) {
                    let low = self.low[node].min(self.index[next.as_str()]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = Vec::new();
                while let Some(member) = self.stack.pop() {
                    self.on_stack.remove(member);
                    component.push(member.to_owned());
                    if member == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut search = Search {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !search.index.contains_key(node.as_str()) {
            search.visit(node);
        }
    }
    search.found
}

/// Each circle of `graph`, with the uses that close it.
fn report(graph: &Graph) -> Vec<String> {
    circles(graph)
        .iter()
        .map(|members| {
            let uses: Vec<String> = members
                .iter()
                .flat_map(|from| {
                    graph[from]
                        .iter()
                        .filter(|(to, _)| members.contains(to))
                        .map(move |(to, example)| format!("    {from} -> {to}: {example}"))
                })
                .collect();
            format!("  {}\n{}", members.join(", "), uses.join("\n"))
        })
        .collect()
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The crates of the workspace by their directory: the root package and the members its
/// `Cargo.toml` lists, so that a crate added later is checked too (all but a package of
/// examples alone, which has no `src/`).
fn crates() -> Vec<String> {
    let manifest = fs::read_to_string(workspace().join("Cargo.toml")).expect("the manifest");
    let members = manifest
        .lines()
        .find_map(|line| line.trim().strip_prefix("members = ["))
        .expect("the workspace lists its members on one line");
    let listed = members.split(',').filter_map(|member| {
        let name = member.trim().trim_end_matches(']').trim().trim_matches('"');
        (!name.is_empty()).then(|| name.to_owned())
    });
    std::iter::once(".".to_owned())
        .chain(listed)
        .filter(|member| workspace().join(member).join("src").is_dir())
        .collect()
}

fn read(directory: &str) -> Crate {
    Crate::read(&workspace().join(directory).join("src"))
}

fn core() -> Crate {
    read("core")
}

#[test]
fn no_crate_has_an_import_circle_between_its_files() {
    let found: Vec<String> = crates()
        .into_iter()
        .flat_map(|directory| {
            report(&read(&directory).file_graph())
                .into_iter()
                .map(move |circle| format!("{directory}:\n{circle}"))
        })
        .collect();
    assert!(
        found.is_empty(),
        "files that use each other in a circle:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_crate_imports_through_its_own_root() {
    let found: Vec<String> = crates()
        .into_iter()
        .flat_map(|directory| {
            read(&directory)
                .through_the_root()
                .into_iter()
                .map(move |place| format!("  {directory}: {place}"))
        })
        .collect();
    assert!(
        found.is_empty(),
        "names read through a crate's root, which is its public face only:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_import_circle_between_the_concerns_of_core() {
    let found = report(&core().concern_graph());
    assert!(
        found.is_empty(),
        "concerns of core/ that use each other in a circle:\n{}",
        found.join("\n")
    );
}

/// What a gate may read of another: the canonical arguments decode writes, and the call bound
/// to its tool (which runs through the execute gate). Anything else is another gate's
/// internals.
const READ_BY_GATES: [&str; 2] = ["gate::decode", "gate::bound"];

/// The uses by which a gate reaches into another gate's internals.
fn reaching_into_gates(graph: &Graph) -> Vec<String> {
    graph
        .iter()
        .filter(|(from, _)| from.starts_with("gate::"))
        .flat_map(|(from, uses)| {
            uses.iter()
                .filter(|(to, _)| to.starts_with("gate::") && !READ_BY_GATES.contains(&to.as_str()))
                .filter(move |(to, _)| !(from == "gate::bound" && *to == "gate::execute"))
                .map(move |(to, example)| format!("  {from} -> {to}: {example}"))
        })
        .collect()
}

#[test]
fn a_gate_uses_another_only_through_what_it_reads() {
    let reaching = reaching_into_gates(&core().concern_graph());
    assert!(
        reaching.is_empty(),
        "gates that reach into another gate:\n{}",
        reaching.join("\n")
    );
}

/// A crate written for the check: `files` (path under `src/`, text), in a directory that goes
/// when the crate is dropped.
fn planted(files: &[(&str, &str)]) -> (tempfile::TempDir, Crate) {
    let directory = tempfile::tempdir().expect("a temporary directory");
    for (path, text) in files {
        let file = directory.path().join("src").join(path);
        fs::create_dir_all(file.parent().expect("a file has a directory")).unwrap();
        fs::write(file, text).unwrap();
    }
    let krate = Crate::read(&directory.path().join("src"));
    (directory, krate)
}

#[test]
fn the_checks_find_a_planted_circle_and_a_planted_import_through_the_root() {
    let checked = crates();
    assert!(
        ["core", "mcp", "stores", "cli"]
            .iter()
            .all(|member| checked.iter().any(|crate_dir| crate_dir == member)),
        "{checked:?}"
    );
    let (_directory, krate) = planted(&[
        ("lib.rs", "mod ledger;\nmod money;\npub use money::Cents;\n"),
        (
            "money.rs",
            "pub struct Cents(pub u64);\npub fn total() -> u64 { crate::ledger::sum() }\n",
        ),
        (
            "ledger.rs",
            "use crate::Cents;\npub fn sum() -> u64 { Cents(1).0 }\n",
        ),
    ]);
    assert_eq!(
        circles(&krate.file_graph()),
        [vec!["src/ledger.rs".to_owned(), "src/money.rs".to_owned()]],
        "a use through the root's re-export closes the circle"
    );
    let through_the_root = krate.through_the_root();
    assert!(
        through_the_root
            .iter()
            .any(|place| place.starts_with("src/ledger.rs names `crate::Cents`")),
        "{through_the_root:?}"
    );

    // The same crate with the money below the ledger's use of it, by its module: no finding.
    let (_directory, layered) = planted(&[
        ("lib.rs", "mod ledger;\nmod money;\npub use money::Cents;\n"),
        ("money.rs", "pub struct Cents(pub u64);\n"),
        (
            "ledger.rs",
            "use crate::money::Cents;\npub fn sum() -> u64 { Cents(1).0 }\n",
        ),
    ]);
    assert!(circles(&layered.file_graph()).is_empty());
    assert!(layered.through_the_root().is_empty());
}

#[test]
fn the_check_sees_core_through_its_reexports_and_finds_a_planted_concern_circle() {
    let graph = core().concern_graph();
    // The registry builds on the pipeline and on the refusals: if the check stopped seeing
    // these, it would pass whatever the code does.
    assert!(
        graph["registry"].contains_key("rejection"),
        "{:?}",
        graph["registry"]
    );
    assert!(
        graph["pipeline"].contains_key("gate::decode"),
        "{:?}",
        graph["pipeline"]
    );
    let mut circular = graph.clone();
    circular
        .get_mut("rejection")
        .expect("a concern")
        .insert("registry".to_owned(), String::new());
    assert!(
        circles(&circular)
            .iter()
            .any(|circle| circle.contains(&"registry".to_owned()))
    );
}
