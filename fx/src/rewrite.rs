//! Pattern rewriting (`torch.fx.subgraph_rewriter.replace_pattern`): every place a graph
//! computes what a pattern graph computes is replaced by a replacement graph.

use std::collections::HashMap;

use super::graph::{Argument, Graph, NodeId, Op, Position, same_constant};
use torchfn::{Error, Result};

/// Replaces each non-overlapping occurrence of `pattern` in `graph` by `replacement` and
/// returns, for each, the node that now stands for its result (fx's `replace_pattern`).
///
/// Both are graphs of functions with the same inputs, usually traced from closures
/// ([`symbolic_trace_fn`](super::symbolic_trace_fn)). The pattern's placeholders match any
/// argument (the same placeholder, the same node); its other nodes match nodes with the same
/// kind, target and constants, whose results nobody outside the occurrence uses. Matching
/// starts from the node the pattern returns, in the graph's order, and the replacement's nodes
/// go just before the occurrence's last node. The replacement may only call functions,
/// methods and modules (no `get_attr`: constant tensors are not moved between graphs).
///
/// ```
/// use torchfn::fx::{replace_pattern, symbolic_trace_fn};
/// let mut gm = symbolic_trace_fn(&["x"], |x| (&x[0].exp()? + 1.0)?.log())?;
/// let pattern = symbolic_trace_fn(&["a"], |a| (&a[0].exp()? + 1.0)?.log())?;
/// let fused = symbolic_trace_fn(&["a"], |a| a[0].exp()?.log1p())?;
/// assert_eq!(replace_pattern(gm.graph_mut(), pattern.graph(), fused.graph())?.len(), 1);
/// gm.lint()?;
/// let names: Vec<String> = gm.graph().nodes().map(|(_, n)| n.op.target()).collect();
/// assert_eq!(names, ["x", "exp", "log1p", "output"]);
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn replace_pattern(graph: &mut Graph, pattern: &Graph, replacement: &Graph) -> Result<Vec<NodeId>> {
    let anchor = returned_node(pattern, "pattern")?;
    let replacement_out = replacement.output().ok_or_else(|| Error::value_error("replacement: no output node"))?;
    if pattern.placeholders().len() != replacement.placeholders().len() {
        return Err(Error::value_error(format!(
            "replace_pattern: the pattern takes {} inputs and the replacement {}",
            pattern.placeholders().len(),
            replacement.placeholders().len()
        )));
    }
    if let Some((_, n)) = replacement.nodes().find(|(_, n)| matches!(n.op, Op::GetAttr(_))) {
        return Err(Error::value_error(format!(
            "replace_pattern: the replacement reads the attribute {}",
            n.op.target()
        )));
    }
    let mut replaced = Vec::new();
    let mut taken: Vec<NodeId> = Vec::new();
    for target in graph.ids().to_vec() {
        if taken.contains(&target) || graph.get(target).is_none() {
            continue;
        }
        let mut found = Match { pattern, graph, bound: HashMap::new() };
        if !found.node(anchor, target) || !found.self_contained(anchor, target) {
            continue;
        }
        let Match { bound, .. } = found;
        let inner: Vec<NodeId> = bound
            .iter()
            .filter(|(p, _)| !matches!(pattern.node(**p).op, Op::Placeholder(_)))
            .map(|(_, &g)| g)
            .collect();
        if inner.iter().any(|n| taken.contains(n)) {
            continue;
        }
        // The replacement's placeholders stand for what the pattern's bound.
        let mut map: HashMap<NodeId, NodeId> = HashMap::new();
        for (p, r) in pattern.placeholders().into_iter().zip(replacement.placeholders()) {
            if let Some(&g) = bound.get(&p) {
                map.insert(r, g);
            }
        }
        for (id, node) in replacement.nodes() {
            if matches!(node.op, Op::Placeholder(_) | Op::Output) {
                continue;
            }
            let mut remap = |n: NodeId| map[&n];
            let args = node.args.iter().map(|a| a.map_nodes(&mut remap)).collect();
            let kwargs = node.kwargs.iter().map(|(k, a)| (k.clone(), a.map_nodes(&mut remap))).collect();
            let new = graph.insert(Position::Before(target), node.op.clone(), args, kwargs, node.name())?;
            map.insert(id, new);
        }
        let result = match replacement.node(replacement_out).args.first() {
            Some(Argument::Node(n)) => map[n],
            _ => return Err(Error::value_error("replace_pattern: the replacement must return one node")),
        };
        graph.replace_all_uses_with(target, result);
        let mut dead: Vec<NodeId> = inner.clone();
        dead.sort_by_key(|n| std::cmp::Reverse(graph.ids().iter().position(|x| x == n)));
        for n in dead {
            graph.erase_node(n)?;
        }
        taken.extend(inner);
        replaced.push(result);
    }
    Ok(replaced)
}

/// The node a graph's output returns.
fn returned_node(graph: &Graph, which: &str) -> Result<NodeId> {
    let output = graph.output().ok_or_else(|| Error::value_error(format!("{which}: no output node")))?;
    match graph.node(output).args.first() {
        Some(Argument::Node(n)) if !matches!(graph.node(*n).op, Op::Placeholder(_)) => Ok(*n),
        _ => Err(Error::value_error(format!("replace_pattern: the {which} must return the result of one call"))),
    }
}

/// One attempt to match the pattern at a node: pattern node → graph node.
struct Match<'a> {
    pattern: &'a Graph,
    graph: &'a Graph,
    bound: HashMap<NodeId, NodeId>,
}

impl Match<'_> {
    fn node(&mut self, p: NodeId, g: NodeId) -> bool {
        if let Some(&already) = self.bound.get(&p) {
            return already == g;
        }
        let (pattern, graph) = (self.pattern, self.graph);
        let (pn, gn) = (pattern.node(p), graph.node(g));
        if let Op::Placeholder(_) = pn.op {
            self.bound.insert(p, g);
            return true;
        }
        let same_op = match (&pn.op, &gn.op) {
            (Op::CallFunction(a), Op::CallFunction(b)) | (Op::CallMethod(a), Op::CallMethod(b)) => a == b,
            (Op::CallModule(a), Op::CallModule(b)) | (Op::GetAttr(a), Op::GetAttr(b)) => a == b,
            _ => false,
        };
        if !same_op || pn.args.len() != gn.args.len() || pn.kwargs.len() != gn.kwargs.len() {
            return false;
        }
        self.bound.insert(p, g);
        let ok = pn.args.iter().zip(&gn.args).all(|(a, b)| self.argument(a, b))
            && pn.kwargs.iter().all(|(k, a)| gn.kwargs.iter().any(|(l, b)| k == l && self.argument(a, b)));
        if !ok {
            self.bound.remove(&p);
        }
        ok
    }

    fn argument(&mut self, p: &Argument, g: &Argument) -> bool {
        match (p, g) {
            (Argument::Node(a), Argument::Node(b)) => self.node(*a, *b),
            (Argument::List(a), Argument::List(b)) | (Argument::Tuple(a), Argument::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| self.argument(x, y))
            }
            (Argument::Const(a), Argument::Const(b)) => same_constant(a, b),
            _ => false,
        }
    }

    /// Whether the matched nodes other than the anchor are used only inside the match.
    fn self_contained(&self, anchor: NodeId, target: NodeId) -> bool {
        let inside: Vec<NodeId> = self.bound.values().copied().collect();
        self.bound.iter().all(|(p, g)| {
            *p == anchor
                || matches!(self.pattern.node(*p).op, Op::Placeholder(_))
                || self.graph.users(*g).iter().all(|u| inside.contains(u) || *u == target)
        })
    }
}
