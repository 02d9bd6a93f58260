//! Energy per stack, per method and per call tree.
//!
//! During a run, `StackTable` keeps one entry per distinct stack of a process (memory grows
//! with distinct stacks, never with cycles); at the end, `Scope` turns stack totals into
//! method and call-tree totals for either view.

use std::collections::HashMap;
use std::sync::Arc;

use super::methods::{self, MethodFilter, StackRules, NO_STACK};
use super::paths::{all_path, app_path, PathStyle};
use super::thread_kind::ThreadKind;
use crate::model::{Frame, Stack};

/// Energy and samples of one distinct stack, in one kind of thread, over the whole run.
#[derive(Debug, Clone, PartialEq)]
pub struct StackTotal {
    pub stack: Stack,
    pub thread: ThreadKind,
    pub energy_uj: f64,
    /// Grams of CO₂e of that energy, cycle by cycle (0 without a carbon intensity).
    pub carbon_g: f64,
    pub samples: u64,
}

/// "all" or "app" (JoularJX's `all/` and `app/` trees).
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    All,
    App(&'a MethodFilter),
}

impl Scope<'_> {
    /// Directory name in the result tree and file-name infix (JoularJX calls app "filtered").
    pub fn dir(&self) -> &'static str {
        match self {
            Scope::All => "all",
            Scope::App(_) => "app",
        }
    }

    pub fn file_infix(&self) -> &'static str {
        match self {
            Scope::All => "all",
            Scope::App(_) => "filtered",
        }
    }

    pub fn method(&self, stack: &[Frame], thread: ThreadKind, rules: StackRules) -> Arc<str> {
        match self {
            Scope::All => methods::all_method(stack, thread, rules),
            Scope::App(filter) => methods::app_method(stack, thread, rules, filter),
        }
    }

    /// The frames this view shows for `stack`, root first (never empty).
    pub fn path<'a>(
        &self,
        stack: &'a [Frame],
        thread: ThreadKind,
        rules: StackRules,
        style: PathStyle,
    ) -> Vec<&'a Frame> {
        match self {
            Scope::All => all_path(stack, thread, rules, style),
            Scope::App(filter) => app_path(stack, thread, rules, filter),
        }
    }
}

/// Stacks that look the same in a view (same short names along the path), merged.
#[derive(Debug, Clone)]
pub struct PathGroup<'a> {
    pub frames: Vec<&'a Frame>,
    pub energy_uj: f64,
    pub carbon_g: f64,
    pub samples: u64,
}

impl PathGroup<'_> {
    pub fn tree(&self, annotate: bool) -> String {
        methods::join_frames(self.frames.iter().copied(), annotate)
    }
}

pub fn same_path(a: &[&Frame], b: &[&Frame]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.short == y.short)
}

/// Path groups in path order (frame by frame, so paths sharing a prefix are adjacent, as
/// flame graphs need). Sorting borrowed frames instead of joined strings keeps the end of
/// a long run from holding every call tree as text at once.
pub fn path_groups<'a>(
    stacks: &'a [StackTotal],
    scope: Scope,
    rules: StackRules,
    style: PathStyle,
) -> Vec<PathGroup<'a>> {
    let mut paths: Vec<PathGroup<'a>> = stacks
        .iter()
        .map(|s| PathGroup {
            frames: scope.path(&s.stack, s.thread, rules, style),
            energy_uj: s.energy_uj,
            carbon_g: s.carbon_g,
            samples: s.samples,
        })
        .collect();
    paths.sort_unstable_by(|a, b| a.frames.iter().map(|f| &*f.short).cmp(b.frames.iter().map(|f| &*f.short)));
    let mut groups: Vec<PathGroup<'a>> = Vec::with_capacity(paths.len());
    for path in paths {
        match groups.last_mut() {
            Some(last) if same_path(&last.frames, &path.frames) => {
                last.energy_uj += path.energy_uj;
                last.carbon_g += path.carbon_g;
                last.samples += path.samples;
            }
            _ => groups.push(path),
        }
    }
    groups
}

/// Highest energy first, ties in path order (JoularJX's total files list the big ones first).
pub fn by_energy<'a, 'g>(groups: &'g [PathGroup<'a>]) -> Vec<&'g PathGroup<'a>> {
    let mut sorted: Vec<&PathGroup> = groups.iter().collect();
    sorted.sort_by(|a, b| b.energy_uj.total_cmp(&a.energy_uj));
    sorted
}

/// The JoularJX call trees of `stacks` (`a;b;c`, root first) with their energies, highest first.
/// Only stacks whose method is a real method count: buckets and unnamed frames are
/// `unattributed` in summary.json, never a tree.
pub fn method_call_trees(stacks: &[StackTotal], scope: Scope, rules: StackRules) -> Vec<(String, f64)> {
    call_tree_totals(stacks, scope, rules).into_iter().map(|(tree, energy_uj, _)| (tree, energy_uj)).collect()
}

/// As [`method_call_trees`], with each tree's grams of CO₂e beside its µJ.
pub fn call_tree_totals(stacks: &[StackTotal], scope: Scope, rules: StackRules) -> Vec<(String, f64, f64)> {
    let attributed: Vec<StackTotal> =
        stacks.iter().filter(|s| methods::is_method_name(&scope.method(&s.stack, s.thread, rules))).cloned().collect();
    let groups = path_groups(&attributed, scope, rules, PathStyle::CallTree);
    by_energy(&groups).into_iter().map(|g| (g.tree(false), g.energy_uj, g.carbon_g)).collect()
}

/// One method's (or call tree's) share of a run or a cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedTotal {
    pub name: Arc<str>,
    pub energy_uj: f64,
    pub carbon_g: f64,
    pub samples: u64,
}

/// Sums by key, then sorts by energy (highest first), ties by name for stable files.
fn sum_by<K: Into<Arc<str>> + std::hash::Hash + Eq>(
    items: impl Iterator<Item = (K, f64, f64, u64)>,
) -> Vec<NamedTotal> {
    let mut sums: HashMap<K, (f64, f64, u64)> = HashMap::new();
    for (key, energy_uj, carbon_g, samples) in items {
        let sum = sums.entry(key).or_default();
        sum.0 += energy_uj;
        sum.1 += carbon_g;
        sum.2 += samples;
    }
    let mut totals: Vec<NamedTotal> = sums
        .into_iter()
        .map(|(name, (energy_uj, carbon_g, samples))| NamedTotal { name: name.into(), energy_uj, carbon_g, samples })
        .collect();
    sort_totals(&mut totals);
    totals
}

pub fn sort_totals(totals: &mut [NamedTotal]) {
    totals.sort_by(|a, b| b.energy_uj.total_cmp(&a.energy_uj).then_with(|| a.name.cmp(&b.name)));
}

/// Sums in a map, as totals sorted by energy (highest first), ties by name.
pub fn named<K>(sums: HashMap<K, (f64, u64)>, name: impl Fn(K) -> Arc<str>) -> Vec<NamedTotal> {
    let mut totals: Vec<NamedTotal> = sums
        .into_iter()
        .map(|(k, (energy_uj, samples))| NamedTotal { name: name(k), energy_uj, carbon_g: 0.0, samples })
        .collect();
    sort_totals(&mut totals);
    totals
}

pub fn method_totals(stacks: &[StackTotal], scope: Scope, rules: StackRules) -> Vec<NamedTotal> {
    sum_by(stacks.iter().map(|s| (scope.method(&s.stack, s.thread, rules), s.energy_uj, s.carbon_g, s.samples)))
}

fn address(stack: &Stack) -> usize {
    Arc::as_ptr(stack) as *const Frame as usize
}

/// A distinct stack of a process, with what each cycle needs precomputed once.
pub struct StackEntry {
    pub total: StackTotal,
    pub all_method: Arc<str>,
    pub app_method: Arc<str>,
    pub app_tree: Arc<str>,
    /// The stack shows HotSpot (`methods::shows_jvm`).
    pub shows_jvm: bool,
}

/// The distinct (stack, thread kind) pairs of one process and their run totals.
#[derive(Default)]
pub struct StackTable {
    index: HashMap<(Stack, ThreadKind), usize>,
    /// Ids by address of the `Arc`s the table holds: symbolizers hand the same `Arc` for
    /// the same stack every cycle, and hashing whole stacks is the cost of a cycle. An
    /// address is only looked up while the table keeps its allocation alive, so it cannot
    /// have been reused for another stack.
    by_address: HashMap<(usize, ThreadKind), usize>,
    entries: Vec<StackEntry>,
    app_trees: HashMap<String, Arc<str>>,
}

impl StackTable {
    /// Distinct stacks held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Id of `stack` sampled in a thread of kind `thread`, adding it on first sight; an empty
    /// stack becomes the `(no stack)` bucket.
    pub fn intern(&mut self, stack: &Stack, thread: ThreadKind, filter: &MethodFilter, rules: StackRules) -> usize {
        if let Some(&id) = self.by_address.get(&(address(stack), thread)) {
            return id;
        }
        if let Some(&id) = self.index.get(&(stack.clone(), thread)) {
            return id;
        }
        let stack = if stack.is_empty() { methods::bucket_stack(NO_STACK) } else { stack.clone() };
        if let Some(&id) = self.index.get(&(stack.clone(), thread)) {
            return id;
        }
        let id = self.entries.len();
        let mut entry = StackEntry {
            all_method: Arc::from(""),
            app_method: Arc::from(""),
            app_tree: Arc::from(""),
            shows_jvm: methods::shows_jvm(&stack),
            total: StackTotal { carbon_g: 0.0, stack: stack.clone(), thread, energy_uj: 0.0, samples: 0 },
        };
        self.label(&mut entry, filter, rules);
        self.entries.push(entry);
        self.by_address.insert((address(&stack), thread), id);
        self.index.insert((stack, thread), id);
        id
    }

    fn label(&mut self, entry: &mut StackEntry, filter: &MethodFilter, rules: StackRules) {
        let (stack, thread) = (&entry.total.stack, entry.total.thread);
        entry.all_method = methods::all_method(stack, thread, rules);
        entry.app_method = methods::app_method(stack, thread, rules, filter);
        let tree =
            methods::join_frames(Scope::App(filter).path(stack, thread, rules, PathStyle::CallTree).into_iter(), false);
        entry.app_tree = match self.app_trees.get(&tree) {
            Some(tree) => tree.clone(),
            None => {
                let interned: Arc<str> = Arc::from(tree.as_str());
                self.app_trees.insert(tree, interned.clone());
                interned
            }
        };
    }

    /// Recomputes every entry's methods after the process's rules changed (it turned out to
    /// be a JVM).
    pub fn relabel(&mut self, filter: &MethodFilter, rules: StackRules) {
        let mut entries = std::mem::take(&mut self.entries);
        for entry in &mut entries {
            self.label(entry, filter, rules);
        }
        self.entries = entries;
    }

    pub fn add(&mut self, id: usize, energy_uj: f64, carbon_g: f64, samples: u64) {
        let total = &mut self.entries[id].total;
        total.energy_uj += energy_uj;
        total.carbon_g += carbon_g;
        total.samples += samples;
    }

    pub fn entry(&self, id: usize) -> &StackEntry {
        &self.entries[id]
    }

    pub fn totals(&self) -> Vec<StackTotal> {
        self.entries.iter().map(|e| e.total.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::stacks::methods::tests::{frame, java};
    use crate::model::FrameKind;

    const JVM: StackRules = StackRules { jvm: true, native_frames: false };
    const APP: ThreadKind = ThreadKind::Application;

    fn stack(frames: Vec<crate::model::Frame>) -> Stack {
        Arc::from(frames)
    }

    fn total(frames: Vec<crate::model::Frame>, thread: ThreadKind, energy_uj: f64, samples: u64) -> StackTotal {
        StackTotal { carbon_g: 0.0, stack: stack(frames), thread, energy_uj, samples }
    }

    #[test]
    fn interning_is_by_content_and_thread_kind_and_empty_stacks_share_a_bucket() {
        let filter = MethodFilter::parse("com.acme");
        let mut table = StackTable::default();
        let a = table.intern(&stack(vec![java("com.acme.A.run")]), APP, &filter, JVM);
        let b = table.intern(&stack(vec![java("com.acme.A.run")]), APP, &filter, JVM);
        let empty1 = table.intern(&stack(vec![]), APP, &filter, JVM);
        let empty2 = table.intern(&stack(vec![]), APP, &filter, JVM);
        let gc_empty = table.intern(&stack(vec![]), ThreadKind::Gc, &filter, JVM);
        assert_eq!(a, b);
        assert_eq!(empty1, empty2);
        assert_ne!(a, empty1);
        assert_ne!(empty1, gc_empty, "the same stack in another kind of thread");
        assert_eq!(&*table.entry(empty1).all_method, NO_STACK);
        assert_eq!(&*table.entry(gc_empty).all_method, "[GC]");
        assert!(table.entry(a).shows_jvm && !table.entry(empty1).shows_jvm);
        table.add(a, 2.5, 0.0, 1);
        table.add(b, 1.5, 0.0, 2);
        let totals = table.totals();
        assert_eq!((totals[a].energy_uj, totals[a].samples), (4.0, 3));
    }

    #[test]
    fn relabel_applies_the_jvm_rules_to_stacks_seen_before() {
        let filter = MethodFilter::parse("com.acme");
        let mut table = StackTable::default();
        let native = stack(vec![frame("main", FrameKind::Native), frame("os::init", FrameKind::Native)]);
        let id = table.intern(&native, APP, &filter, StackRules::default());
        assert_eq!(&*table.entry(id).all_method, "os::init");
        table.relabel(&filter, JVM);
        assert_eq!(&*table.entry(id).all_method, "[native]");
        assert_eq!(&*table.entry(id).app_method, "[native]");
        assert_eq!(&*table.entry(id).app_tree, "[native]");
    }

    #[test]
    fn totals_by_method_keep_every_joule_and_sort_by_energy() {
        let filter = MethodFilter::parse("com.acme");
        let stacks = vec![
            total(vec![java("com.acme.App.compute"), java("java.math.BigInteger.multiply")], APP, 70.0, 7),
            total(vec![java("com.acme.App.compute"), frame("memcpy", FrameKind::Native)], APP, 20.0, 2),
            total(vec![java("java.lang.Thread.run")], APP, 10.0, 1),
            total(vec![frame("G1ParTask::work", FrameKind::Native)], ThreadKind::Gc, 5.0, 1),
        ];
        let all = method_totals(&stacks, Scope::All, JVM);
        let names: Vec<(&str, f64)> = all.iter().map(|m| (&*m.name, m.energy_uj)).collect();
        // memcpy is compute's own energy; the GC thread's work is [GC].
        assert_eq!(
            names,
            [
                ("java.math.BigInteger.multiply", 70.0),
                ("com.acme.App.compute", 20.0),
                ("java.lang.Thread.run", 10.0),
                ("[GC]", 5.0),
            ]
        );
        let app = method_totals(&stacks, Scope::App(&filter), JVM);
        assert_eq!(&*app[0].name, "com.acme.App.compute");
        assert_eq!((app[0].energy_uj, app[0].samples), (90.0, 9));
        assert_eq!(&*app[1].name, methods::NO_APP_FRAME);
        assert_eq!(&*app[2].name, "[GC]");
        for totals in [&all, &app] {
            let sum: f64 = totals.iter().map(|t| t.energy_uj).sum();
            assert_eq!(sum, 105.0);
        }
        let app_paths = path_groups(&stacks, Scope::App(&filter), JVM, PathStyle::CallTree);
        let trees: Vec<(String, f64)> = app_paths.iter().map(|g| (g.tree(false), g.energy_uj)).collect();
        assert_eq!(
            trees,
            [("(no app frame)".to_owned(), 10.0), ("[GC]".to_owned(), 5.0), ("com.acme.App.compute".to_owned(), 90.0)]
        );
        let all_trees = path_groups(&stacks, Scope::All, JVM, PathStyle::CallTree);
        let trees: Vec<&str> = by_energy(&all_trees).iter().map(|g| g.frames.last().unwrap().short.as_ref()).collect();
        assert_eq!(trees, ["java.math.BigInteger.multiply", "com.acme.App.compute", "java.lang.Thread.run", "[GC]"]);
        let graphs = path_groups(&stacks, Scope::All, JVM, PathStyle::Graph);
        assert_eq!(graphs.len(), 4);
        assert_eq!(by_energy(&graphs)[1].tree(false), "com.acme.App.compute;memcpy", "graphs keep the native leaf");
    }
}
