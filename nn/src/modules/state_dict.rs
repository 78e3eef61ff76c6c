//! State dicts: a module's tensors by dotted name, in order, and loading them back.

use std::collections::HashMap;

use super::module::Module;
use crate::Tensor;
use crate::error::{Error, Result};

/// Tensors by dotted name, in insertion order (PyTorch's `OrderedDict` state_dict).
#[derive(Clone, Default)]
pub struct StateDict {
    entries: Vec<(String, Tensor)>,
    index: HashMap<String, usize>,
}

impl StateDict {
    /// An empty state dict.
    pub fn new() -> StateDict {
        StateDict::default()
    }

    /// Sets `name` to `tensor` (replacing, in place, an entry of that name).
    pub fn insert(&mut self, name: impl Into<String>, tensor: Tensor) {
        let name = name.into();
        match self.index.get(&name) {
            Some(&i) => self.entries[i].1 = tensor,
            None => {
                self.index.insert(name.clone(), self.entries.len());
                self.entries.push((name, tensor));
            }
        }
    }

    /// The tensor named `name`.
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.index.get(name).map(|&i| &self.entries[i].1)
    }

    /// Whether `name` is in it.
    pub fn contains_key(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    /// The names, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_str())
    }

    /// The entries, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Tensor)> {
        self.entries.iter().map(|(k, t)| (k.as_str(), t))
    }

    /// How many tensors it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The keys with each tensor's shape and dtype (values would be long).
impl std::fmt::Debug for StateDict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.iter().map(|(k, t)| {
                let shape = t.shape().map(|s| s.to_vec()).unwrap_or_default();
                (k.to_string(), format!("{shape:?} {}", t.dtype().map(|d| d.to_string()).unwrap_or_default()))
            }))
            .finish()
    }
}

impl FromIterator<(String, Tensor)> for StateDict {
    fn from_iter<I: IntoIterator<Item = (String, Tensor)>>(iter: I) -> Self {
        let mut out = StateDict::new();
        for (k, t) in iter {
            out.insert(k, t);
        }
        out
    }
}

/// The keys a non-strict load left aside (PyTorch's `_IncompatibleKeys`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IncompatibleKeys {
    /// Keys the module has and the state dict lacks.
    pub missing_keys: Vec<String>,
    /// Keys the state dict has and the module lacks.
    pub unexpected_keys: Vec<String>,
}

/// `module.load_state_dict(state, strict)`: checks everything, then writes.
pub(super) fn load(module: &dyn Module, state: &StateDict, strict: bool) -> Result<IncompatibleKeys> {
    let own = module.state_dict();
    let keys = IncompatibleKeys {
        missing_keys: own.keys().filter(|k| !state.contains_key(k)).map(String::from).collect(),
        unexpected_keys: state.keys().filter(|k| !own.contains_key(k)).map(String::from).collect(),
    };
    let mut errors = Vec::new();
    if strict {
        if !keys.unexpected_keys.is_empty() {
            errors.push(format!("Unexpected key(s) in state_dict: {}.", quoted(&keys.unexpected_keys)));
        }
        if !keys.missing_keys.is_empty() {
            errors.push(format!("Missing key(s) in state_dict: {}.", quoted(&keys.missing_keys)));
        }
    }
    let mut writes = Vec::new();
    for (name, target) in own.iter() {
        let Some(source) = state.get(name) else { continue };
        let (t_shape, s_shape) = (target.shape()?, source.shape()?);
        let (t_dtype, s_dtype) = (target.dtype()?, source.dtype()?);
        if t_shape != s_shape {
            errors.push(format!(
                "size mismatch for {name}: copying a param with shape torch.Size({:?}) from checkpoint, the shape in \
                 current model is torch.Size({:?}).",
                s_shape.as_ref(),
                t_shape.as_ref()
            ));
        } else if t_dtype != s_dtype {
            errors.push(format!(
                "dtype mismatch for {name}: copying a param of dtype {s_dtype} from checkpoint, the dtype in current \
                 model is {t_dtype}."
            ));
        } else {
            writes.push((target.clone(), source.clone()));
        }
    }
    if !errors.is_empty() {
        return Err(Error::runtime_error(format!(
            "Error(s) in loading state_dict for {}:\n\t{}",
            module.type_name(),
            errors.join("\n\t")
        )));
    }
    let _no_grad = crate::autograd::no_grad();
    for (target, source) in writes {
        target.copy_(&source)?;
    }
    Ok(keys)
}

fn quoted(keys: &[String]) -> String {
    keys.iter().map(|k| format!("\"{k}\"")).collect::<Vec<_>>().join(", ")
}
