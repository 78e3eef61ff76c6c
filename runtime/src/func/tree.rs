//! The argument and result structures the transforms take apart and put back together
//! (PyTorch's pytrees): a [`Tree`] is a tensor, or a tuple, `Vec`, `Option`, map or [`Value`]
//! of trees; its tensors are its *leaves*, in order. [`Dims`] says which dimension of each
//! leaf `vmap` maps over, per argument and nested as the arguments are.

use std::collections::BTreeMap;

use crate::error::{Error, Result, bail};
use crate::tensor::Tensor;
use crate::value::Value;

/// A structure of tensors that the transforms take apart into its leaves and rebuild (a
/// pytree): implemented for [`Tensor`], tuples (up to six), `Vec`, arrays, `Option`,
/// `BTreeMap<String, _>` (a module's parameters by name), `String` and `()` (no leaves) and
/// [`Value`] (lists and tuples of values).
pub trait Tree: Sized {
    /// Appends the leaves, in order.
    fn leaves(&self, out: &mut Vec<Tensor>);

    /// The same structure with the leaves taken from `leaves`, in order.
    fn rebuild(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self>;

    /// The children of a container, for matching a nested [`Dims`]; `None` for a leaf.
    fn children(&self) -> Option<Vec<&dyn DynTree>> {
        None
    }
}

/// A [`Tree`] seen through a reference: what [`Tree::children`] lists.
pub trait DynTree {
    /// Appends the leaves, in order.
    fn dyn_leaves(&self, out: &mut Vec<Tensor>);
    /// The children of a container; `None` for a leaf.
    fn dyn_children(&self) -> Option<Vec<&dyn DynTree>>;
}

impl<T: Tree> DynTree for T {
    fn dyn_leaves(&self, out: &mut Vec<Tensor>) {
        self.leaves(out)
    }
    fn dyn_children(&self) -> Option<Vec<&dyn DynTree>> {
        self.children()
    }
}

/// The leaves of `tree`.
pub(crate) fn leaves_of(tree: &impl Tree) -> Vec<Tensor> {
    let mut out = Vec::new();
    tree.leaves(&mut out);
    out
}

/// `template` with its leaves replaced by `leaves`, which must be exactly as many.
pub(crate) fn rebuilt<T: Tree>(template: &T, leaves: Vec<Tensor>) -> Result<T> {
    let n = leaves.len();
    let mut it = leaves.into_iter();
    let out = template.rebuild(&mut it)?;
    if it.next().is_some() {
        bail!(Runtime, "func: {n} tensors given to rebuild a structure of fewer leaves");
    }
    Ok(out)
}

fn missing() -> Error {
    Error::runtime_error("func: too few tensors to rebuild the structure")
}

impl Tree for Tensor {
    fn leaves(&self, out: &mut Vec<Tensor>) {
        out.push(self.clone());
    }
    fn rebuild(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        leaves.next().ok_or_else(missing)
    }
}

impl Tree for () {
    fn leaves(&self, _: &mut Vec<Tensor>) {}
    fn rebuild(&self, _: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        Ok(())
    }
}

impl Tree for String {
    fn leaves(&self, _: &mut Vec<Tensor>) {}
    fn rebuild(&self, _: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        Ok(self.clone())
    }
}

impl<T: Tree> Tree for Option<T> {
    fn leaves(&self, out: &mut Vec<Tensor>) {
        if let Some(t) = self {
            t.leaves(out)
        }
    }
    fn rebuild(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        self.as_ref().map(|t| t.rebuild(leaves)).transpose()
    }
}

impl<T: Tree> Tree for Vec<T> {
    fn leaves(&self, out: &mut Vec<Tensor>) {
        self.iter().for_each(|t| t.leaves(out))
    }
    fn rebuild(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        self.iter().map(|t| t.rebuild(leaves)).collect()
    }
    fn children(&self) -> Option<Vec<&dyn DynTree>> {
        Some(self.iter().map(|t| t as &dyn DynTree).collect())
    }
}

impl<T: Tree, const N: usize> Tree for [T; N] {
    fn leaves(&self, out: &mut Vec<Tensor>) {
        self.iter().for_each(|t| t.leaves(out))
    }
    fn rebuild(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        let items: Vec<T> = self.iter().map(|t| t.rebuild(leaves)).collect::<Result<_>>()?;
        items.try_into().map_err(|_| missing())
    }
    fn children(&self) -> Option<Vec<&dyn DynTree>> {
        Some(self.iter().map(|t| t as &dyn DynTree).collect())
    }
}

impl<T: Tree> Tree for BTreeMap<String, T> {
    fn leaves(&self, out: &mut Vec<Tensor>) {
        self.values().for_each(|t| t.leaves(out))
    }
    fn rebuild(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        self.iter().map(|(k, t)| Ok((k.clone(), t.rebuild(leaves)?))).collect()
    }
    fn children(&self) -> Option<Vec<&dyn DynTree>> {
        Some(self.values().map(|t| t as &dyn DynTree).collect())
    }
}

impl Tree for Value {
    fn leaves(&self, out: &mut Vec<Tensor>) {
        match self {
            Value::Tensor(t) => out.push(t.clone()),
            Value::List(items) | Value::Tuple(items) => items.iter().for_each(|v| v.leaves(out)),
            _ => {}
        }
    }
    fn rebuild(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        Ok(match self {
            Value::Tensor(_) => Value::Tensor(leaves.next().ok_or_else(missing)?),
            Value::List(items) => Value::List(items.iter().map(|v| v.rebuild(leaves)).collect::<Result<_>>()?),
            Value::Tuple(items) => Value::Tuple(items.iter().map(|v| v.rebuild(leaves)).collect::<Result<_>>()?),
            other => other.clone(),
        })
    }
    fn children(&self) -> Option<Vec<&dyn DynTree>> {
        match self {
            Value::List(items) | Value::Tuple(items) => Some(items.iter().map(|t| t as &dyn DynTree).collect()),
            _ => None,
        }
    }
}

macro_rules! tuple_tree {
    ($($t:ident $i:tt),+) => {
        impl<$($t: Tree),+> Tree for ($($t,)+) {
            fn leaves(&self, out: &mut Vec<Tensor>) {
                $(self.$i.leaves(out);)+
            }
            fn rebuild(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
                Ok(($(self.$i.rebuild(leaves)?,)+))
            }
            fn children(&self) -> Option<Vec<&dyn DynTree>> {
                Some(vec![$(&self.$i as &dyn DynTree),+])
            }
        }
    };
}

tuple_tree!(A 0);
tuple_tree!(A 0, B 1);
tuple_tree!(A 0, B 1, C 2);
tuple_tree!(A 0, B 1, C 2, D 3);
tuple_tree!(A 0, B 1, C 2, D 3, E 4);
tuple_tree!(A 0, B 1, C 2, D 3, E 4, F 5);

/// Which dimension `vmap` maps over, for the leaves of an argument structure (PyTorch's
/// `in_dims` and `out_dims`): one dimension (or `None`: not mapped) for a whole subtree, or one
/// entry per child of a container. `0`, `None::<i64>`, `(None, 0, 0)` and `vec![...]` convert
/// into it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dims {
    /// The same dimension for every leaf below (negative counts from the end), or `None`.
    All(Option<i64>),
    /// One entry per child.
    Each(Vec<Dims>),
}

/// As Python prints `in_dims`: `0`, `None`, `(None, 0)`, `(0,)`.
impl std::fmt::Display for Dims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dims::All(Some(d)) => write!(f, "{d}"),
            Dims::All(None) => f.write_str("None"),
            Dims::Each(dims) => {
                let items: Vec<String> = dims.iter().map(ToString::to_string).collect();
                match items.len() {
                    1 => write!(f, "({},)", items[0]),
                    _ => write!(f, "({})", items.join(", ")),
                }
            }
        }
    }
}

impl From<i64> for Dims {
    fn from(d: i64) -> Dims {
        Dims::All(Some(d))
    }
}

impl From<Option<i64>> for Dims {
    fn from(d: Option<i64>) -> Dims {
        Dims::All(d)
    }
}

impl<T: Into<Dims>> From<Vec<T>> for Dims {
    fn from(v: Vec<T>) -> Dims {
        Dims::Each(v.into_iter().map(Into::into).collect())
    }
}

macro_rules! tuple_dims {
    ($($t:ident $i:tt),+) => {
        impl<$($t: Into<Dims>),+> From<($($t,)+)> for Dims {
            fn from(v: ($($t,)+)) -> Dims {
                Dims::Each(vec![$(v.$i.into()),+])
            }
        }
    };
}

tuple_dims!(A 0);
tuple_dims!(A 0, B 1);
tuple_dims!(A 0, B 1, C 2);
tuple_dims!(A 0, B 1, C 2, D 3);
tuple_dims!(A 0, B 1, C 2, D 3, E 4);
tuple_dims!(A 0, B 1, C 2, D 3, E 4, F 5);

impl Dims {
    /// One entry per leaf of `tree`; `what` names the argument in errors (`in_dims`).
    pub(crate) fn per_leaf(&self, tree: &dyn DynTree, what: &str) -> Result<Vec<Option<i64>>> {
        let mut out = Vec::new();
        self.expand(tree, what, &mut out)?;
        Ok(out)
    }

    fn expand(&self, tree: &dyn DynTree, what: &str, out: &mut Vec<Option<i64>>) -> Result<()> {
        match self {
            Dims::All(d) => {
                let mut leaves = Vec::new();
                tree.dyn_leaves(&mut leaves);
                out.extend(std::iter::repeat_n(*d, leaves.len()));
                Ok(())
            }
            Dims::Each(dims) => {
                let Some(children) = tree.dyn_children() else {
                    bail!(
                        Value,
                        "vmap: {what} has a nested structure ({} entries) where the argument is a single tensor",
                        dims.len()
                    );
                };
                if children.len() != dims.len() {
                    bail!(
                        Value,
                        "vmap: {what} is not compatible with the structure of the inputs: expected {} entries, one \
                         per argument, got {}",
                        children.len(),
                        dims.len()
                    );
                }
                dims.iter().zip(children).try_for_each(|(d, child)| d.expand(child, what, out))
            }
        }
    }
}
