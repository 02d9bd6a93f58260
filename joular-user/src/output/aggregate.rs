//! Energy per stack, per method and per call tree.
//!
//! During a run, `StackTable` keeps one entry per distinct stack of a process (memory grows
//! with distinct stacks, never with cycles); at the end, `Scope` turns stack totals into
//! method and call-tree totals for either view.

use std::collections::HashMap;
use std::sync::Arc;

use super::methods::{self, MethodFilter, NO_STACK};
use super::profile::StackTotal;
use crate::model::{Frame, Stack};

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

    pub fn method(&self, stack: &Stack) -> Arc<str> {
        match self {
            Scope::All => methods::all_method(stack),
            Scope::App(filter) => methods::app_method(stack, filter),
        }
    }

    /// The frames this view shows for `stack`, root first: every frame for "all", the
    /// filtered ones for "app"; a bucket frame when there are none.
    pub fn path<'a>(&self, stack: &'a [Frame], buckets: &'a Buckets) -> Vec<&'a Frame> {
        let frames: Vec<&Frame> = match self {
            Scope::All => stack.iter().collect(),
            Scope::App(filter) => stack.iter().filter(|f| filter.matches(f)).collect(),
        };
        if !frames.is_empty() {
            frames
        } else if stack.is_empty() {
            vec![&buckets.no_stack]
        } else if methods::is_bucket(stack) {
            vec![&stack[0]]
        } else {
            vec![&buckets.no_app_frame]
        }
    }
}

/// Frames standing for paths a view has no frame for.
pub struct Buckets {
    no_stack: Frame,
    no_app_frame: Frame,
}

impl Default for Buckets {
    fn default() -> Self {
        let frame = |name: &str| methods::bucket_stack(name)[0].clone();
        Self {
            no_stack: frame(NO_STACK),
            no_app_frame: frame(methods::NO_APP_FRAME),
        }
    }
}

/// Stacks that look the same in a view (same short names along the path), merged.
#[derive(Debug, Clone)]
pub struct PathGroup<'a> {
    pub frames: Vec<&'a Frame>,
    pub energy_uj: f64,
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
    buckets: &'a Buckets,
) -> Vec<PathGroup<'a>> {
    let mut paths: Vec<PathGroup<'a>> = stacks
        .iter()
        .map(|s| PathGroup {
            frames: scope.path(&s.stack, buckets),
            energy_uj: s.energy_uj,
            samples: s.samples,
        })
        .collect();
    paths.sort_unstable_by(|a, b| {
        a.frames
            .iter()
            .map(|f| &*f.short)
            .cmp(b.frames.iter().map(|f| &*f.short))
    });
    let mut groups: Vec<PathGroup<'a>> = Vec::with_capacity(paths.len());
    for path in paths {
        match groups.last_mut() {
            Some(last) if same_path(&last.frames, &path.frames) => {
                last.energy_uj += path.energy_uj;
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

/// One method's (or call tree's) share of a run or a cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedTotal {
    pub name: Arc<str>,
    pub energy_uj: f64,
    pub samples: u64,
}

/// Sums by key, then sorts by energy (highest first), ties by name for stable files.
fn sum_by<K: Into<Arc<str>> + std::hash::Hash + Eq>(
    items: impl Iterator<Item = (K, f64, u64)>,
) -> Vec<NamedTotal> {
    let mut sums: HashMap<K, (f64, u64)> = HashMap::new();
    for (key, energy_uj, samples) in items {
        let sum = sums.entry(key).or_default();
        sum.0 += energy_uj;
        sum.1 += samples;
    }
    let mut totals: Vec<NamedTotal> = sums
        .into_iter()
        .map(|(name, (energy_uj, samples))| NamedTotal {
            name: name.into(),
            energy_uj,
            samples,
        })
        .collect();
    sort_totals(&mut totals);
    totals
}

pub fn sort_totals(totals: &mut [NamedTotal]) {
    totals.sort_by(|a, b| {
        b.energy_uj
            .total_cmp(&a.energy_uj)
            .then_with(|| a.name.cmp(&b.name))
    });
}

pub fn method_totals(stacks: &[StackTotal], scope: Scope) -> Vec<NamedTotal> {
    sum_by(
        stacks
            .iter()
            .map(|s| (scope.method(&s.stack), s.energy_uj, s.samples)),
    )
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
}

/// The distinct stacks of one process and their run totals.
#[derive(Default)]
pub struct StackTable {
    index: HashMap<Stack, usize>,
    /// Ids by address of the `Arc`s the table holds: symbolizers hand the same `Arc` for
    /// the same stack every cycle, and hashing whole stacks is the cost of a cycle. An
    /// address is only looked up while the table keeps its allocation alive, so it cannot
    /// have been reused for another stack.
    by_address: HashMap<usize, usize>,
    entries: Vec<StackEntry>,
    app_trees: HashMap<String, Arc<str>>,
}

impl StackTable {
    /// Distinct stacks held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Id of `stack`, adding it on first sight; an empty stack becomes the `(no stack)` bucket.
    pub fn intern(&mut self, stack: &Stack, filter: &MethodFilter) -> usize {
        if let Some(&id) = self.by_address.get(&address(stack)) {
            return id;
        }
        if let Some(&id) = self.index.get(stack) {
            return id;
        }
        let stack = if stack.is_empty() {
            methods::bucket_stack(NO_STACK)
        } else {
            stack.clone()
        };
        if let Some(&id) = self.index.get(&stack) {
            return id;
        }
        let tree = methods::app_call_tree(&stack, filter);
        let app_tree = match self.app_trees.get(&tree) {
            Some(tree) => tree.clone(),
            None => {
                let interned: Arc<str> = Arc::from(tree.as_str());
                self.app_trees.insert(tree, interned.clone());
                interned
            }
        };
        let id = self.entries.len();
        self.entries.push(StackEntry {
            all_method: methods::all_method(&stack),
            app_method: methods::app_method(&stack, filter),
            app_tree,
            total: StackTotal {
                stack: stack.clone(),
                energy_uj: 0.0,
                samples: 0,
            },
        });
        self.by_address.insert(address(&stack), id);
        self.index.insert(stack, id);
        id
    }

    pub fn add(&mut self, id: usize, energy_uj: f64, samples: u64) {
        let total = &mut self.entries[id].total;
        total.energy_uj += energy_uj;
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
    use crate::model::FrameKind;
    use crate::output::methods::tests::{frame, java};

    fn stack(frames: Vec<crate::model::Frame>) -> Stack {
        Arc::from(frames)
    }

    #[test]
    fn interning_is_by_content_and_empty_stacks_share_a_bucket() {
        let filter = MethodFilter::parse("com.acme");
        let mut table = StackTable::default();
        let a = table.intern(&stack(vec![java("com.acme.A.run")]), &filter);
        let b = table.intern(&stack(vec![java("com.acme.A.run")]), &filter);
        let empty1 = table.intern(&stack(vec![]), &filter);
        let empty2 = table.intern(&stack(vec![]), &filter);
        assert_eq!(a, b);
        assert_eq!(empty1, empty2);
        assert_ne!(a, empty1);
        assert_eq!(&*table.entry(empty1).all_method, NO_STACK);
        table.add(a, 2.5, 1);
        table.add(b, 1.5, 2);
        let totals = table.totals();
        assert_eq!((totals[a].energy_uj, totals[a].samples), (4.0, 3));
    }

    #[test]
    fn totals_by_method_keep_every_joule_and_sort_by_energy() {
        let filter = MethodFilter::parse("com.acme");
        let stacks = vec![
            StackTotal {
                stack: stack(vec![
                    java("com.acme.App.compute"),
                    java("java.math.BigInteger.multiply"),
                ]),
                energy_uj: 70.0,
                samples: 7,
            },
            StackTotal {
                stack: stack(vec![
                    java("com.acme.App.compute"),
                    frame("memcpy", FrameKind::Native),
                ]),
                energy_uj: 20.0,
                samples: 2,
            },
            StackTotal {
                stack: stack(vec![java("java.lang.Thread.run")]),
                energy_uj: 10.0,
                samples: 1,
            },
        ];
        let all = method_totals(&stacks, Scope::All);
        let names: Vec<&str> = all.iter().map(|m| &*m.name).collect();
        assert_eq!(
            names,
            [
                "java.math.BigInteger.multiply",
                "memcpy",
                "java.lang.Thread.run"
            ]
        );
        let app = method_totals(&stacks, Scope::App(&filter));
        assert_eq!(&*app[0].name, "com.acme.App.compute");
        assert_eq!((app[0].energy_uj, app[0].samples), (90.0, 9));
        assert_eq!(&*app[1].name, methods::NO_APP_FRAME);
        for totals in [&all, &app] {
            let sum: f64 = totals.iter().map(|t| t.energy_uj).sum();
            assert_eq!(sum, 100.0);
        }
        let buckets = Buckets::default();
        let app_paths = path_groups(&stacks, Scope::App(&filter), &buckets);
        let trees: Vec<(String, f64)> = app_paths
            .iter()
            .map(|g| (g.tree(false), g.energy_uj))
            .collect();
        assert_eq!(
            trees,
            [
                ("(no app frame)".to_owned(), 10.0),
                ("com.acme.App.compute".to_owned(), 90.0)
            ]
        );
        let all_paths = path_groups(&stacks, Scope::All, &buckets);
        assert_eq!(all_paths.len(), 3);
        assert_eq!(
            by_energy(&all_paths)[0].tree(false),
            "com.acme.App.compute;java.math.BigInteger.multiply"
        );
    }
}
