//! The dependency rule of `core/`: no import circle between concerns.
//!
//! A concern is a top-level module of the crate (`audit`, `pipeline`, `registry`, …), and under
//! `gate/` each gate (`gate::approve`, `gate::budget`, …). Files of one concern may use each
//! other freely; between concerns, the uses must form no circle, so that reading one concern
//! never requires reading a concern that depends on it. And a gate reads of another gate only
//! what it is given: the canonical arguments decode writes and the call bound to its tool.
//!
//! The test parses every file of `core/src` with `syn`, resolves each path the code names
//! (through `use` declarations and re-exports) to the module that defines the item, and looks
//! for circles in the graph of concerns. Code compiled only for tests (`#[cfg(test)]`) is left
//! out: the rule is about what ships.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};
use syn::{Attribute, Expr, Item, Token, UseTree};

type ModulePath = Vec<String>;

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
}

impl Crate {
    fn read(source: &Path) -> Crate {
        let mut krate = Crate {
            source: source.to_owned(),
            modules: BTreeMap::new(),
        };
        krate.read_file(Vec::new(), source.join("lib.rs"));
        let uses: Vec<(ModulePath, Vec<(String, ModulePath)>)> = krate
            .modules
            .iter()
            .map(|(path, module)| {
                let absolute = module
                    .uses
                    .iter()
                    .filter_map(|(name, written)| {
                        Some((name.clone(), krate.absolute(path, written)?))
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
                item => references.visit_item(item),
            }
        }
        self.modules
            .get_mut(&path)
            .expect("inserted above")
            .references
            .extend(references.paths);
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

    /// Each concern's uses of other concerns, with one example of each.
    fn concern_graph(&self) -> BTreeMap<String, BTreeMap<String, String>> {
        let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for (path, module) in &self.modules {
            let from = concern(path);
            graph.entry(from.clone()).or_default();
            for written in &module.references {
                let Some(absolute) = self.absolute(path, written) else {
                    continue;
                };
                let to = concern(&self.definer(&absolute, 0));
                if to != from && to != ROOT {
                    let file = module
                        .file
                        .strip_prefix(&self.source)
                        .unwrap_or(&module.file);
                    let example = format!("{} names `{}`", file.display(), written.join("::"));
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
}

const ROOT: &str = "(crate root)";

fn concern(path: &[String]) -> String {
    match path {
        [] => ROOT.to_owned(),
        [gate, inner, ..] if gate == "gate" => format!("gate::{inner}"),
        [first, ..] => first.clone(),
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

    fn visit_item(&mut self, item: &'ast Item) {
        if !for_tests_only(item) {
            visit::visit_item(self, item);
        }
    }

    fn visit_impl_item_fn(&mut self, function: &'ast syn::ImplItemFn) {
        let for_tests = function.attrs.iter().any(|attribute| {
            attribute.path().is_ident("cfg")
                && attribute
                    .parse_args::<syn::Meta>()
                    .is_ok_and(|meta| meta.path().is_ident("test"))
        });
        if !for_tests {
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

/// The circles of `graph`: its strongly connected components of more than one concern
/// (Tarjan's algorithm).
fn circles(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<String>> {
    struct Search<'a> {
        graph: &'a BTreeMap<String, BTreeMap<String, String>>,
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

#[test]
fn no_import_circle_between_concerns() {
    let krate = Crate::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let graph = krate.concern_graph();
    let found = circles(&graph);
    let report: Vec<String> = found
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
        .collect();
    assert!(
        found.is_empty(),
        "concerns of core/ that use each other in a circle:\n{}",
        report.join("\n")
    );
}

#[test]
fn the_check_sees_uses_through_reexports_and_finds_a_circle() {
    let krate = Crate::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let graph = krate.concern_graph();
    // The registry builds on the pipeline and on the rejection codes through the root's
    // re-exports: if the check stopped seeing these, it would pass whatever the code does.
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

/// What a gate may read of another: the canonical arguments decode writes, and the call bound
/// to its tool (which runs through the execute gate). Anything else is another gate's
/// internals.
const READ_BY_GATES: [&str; 2] = ["gate::decode", "gate::bound"];

/// The uses by which a gate reaches into another gate's internals.
fn reaching_into_gates(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<String> {
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
    let krate = Crate::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let reaching = reaching_into_gates(&krate.concern_graph());
    assert!(
        reaching.is_empty(),
        "gates that reach into another gate:\n{}",
        reaching.join("\n")
    );
}
