//! Modules as functions of their state: [`functional_call`] runs a module with tensors of
//! the caller's in place of its parameters and buffers, and [`stack_module_state`] stacks
//! the state of several same-shaped modules for an ensemble run by `vmap`.

use std::collections::{BTreeMap, HashMap};

use crate::Tensor;
use crate::error::{Result, bail};
use crate::modules::{Layer, Module, replace_tensors};

/// `module` applied to `input` with `state`'s tensors (parameters and buffers by their
/// `state_dict` names) in place of its own (`torch.func.functional_call(module, state,
/// (input,))`); the module's own tensors are back afterwards, also on error. Names the map
/// does not hold keep the module's tensor; a name the module does not have is an error. Tied
/// parameters stay tied: each place that holds one gets the given tensor.
///
/// ```
/// use std::collections::BTreeMap;
/// use torchfn::nn::{Layer, Linear, Module};
///
/// let mut layer = Linear::new(2, 1, false, &torchfn::Generator::new())?;
/// let state = BTreeMap::from([("weight".to_string(), torchfn::tensor([[1.0f32, 2.0]])?)]);
/// let x = torchfn::tensor([[3.0f32, 4.0]])?;
/// let y = torchfn::func::functional_call(&mut layer, &state, &x)?;
/// assert_eq!(y.to_vec::<f32>()?, [11.0]);
/// assert_ne!(layer.call(&x)?.to_vec::<f32>()?, [11.0]); // its own weight again
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn functional_call<M: Layer>(module: &mut M, state: &BTreeMap<String, Tensor>, input: &Tensor) -> Result<Tensor> {
    functional_call_with(module, state, |m| m.call(input))
}

/// [`functional_call`] with the call spelt out: `f` runs on the module while it holds
/// `state` (for modules whose forward takes several inputs or returns several outputs).
pub fn functional_call_with<M: Module + ?Sized, R>(
    module: &mut M,
    state: &BTreeMap<String, Tensor>,
    f: impl FnOnce(&M) -> Result<R>,
) -> Result<R> {
    let mut names: HashMap<String, usize> =
        module.named_parameters().into_iter().map(|(name, p)| (name, p.tensor().identity())).collect();
    names.extend(module.named_buffers().into_iter().map(|(name, b)| (name, b.tensor().identity())));
    let mut by_identity: HashMap<usize, Tensor> = HashMap::new();
    for (name, tensor) in state {
        match names.get(name) {
            Some(&id) => {
                by_identity.insert(id, tensor.clone());
            }
            None => {
                let mut known: Vec<&String> = names.keys().collect();
                known.sort();
                bail!(
                    Runtime,
                    "functional_call: Unexpected key(s): '{name}'. The module's parameters and buffers are {known:?}"
                );
            }
        }
    }
    // Swap in, remembering which places held what (in the visitors' order), run, swap back.
    let (mut place, mut displaced) = (0usize, Vec::new());
    replace_tensors(module, &mut |t| {
        place += 1;
        let given = by_identity.get(&t.identity())?;
        displaced.push((place, t.clone()));
        Some(given.clone())
    });
    let result = f(module);
    let (mut place, mut displaced) = (0usize, displaced.into_iter().peekable());
    replace_tensors(module, &mut |_| {
        place += 1;
        displaced.next_if(|(p, _)| *p == place).map(|(_, t)| t)
    });
    result
}

/// The parameters and buffers of same-shaped modules stacked along a new first dimension,
/// by name (`torch.func.stack_module_state`): what `vmap` over [`functional_call`] runs an
/// ensemble with. Stacked parameters are new leaves that require grad when the modules'
/// parameters do.
pub fn stack_module_state<M: Module>(models: &[M]) -> Result<(BTreeMap<String, Tensor>, BTreeMap<String, Tensor>)> {
    let Some(first) = models.first() else {
        bail!(Runtime, "stack_module_state: Expected at least one model, got 0.");
    };
    let stacked = |each: &dyn Fn(&M) -> Vec<(String, Tensor)>| -> Result<BTreeMap<String, Tensor>> {
        let all: Vec<Vec<(String, Tensor)>> = models.iter().map(each).collect();
        let mut out = BTreeMap::new();
        for (i, (name, _)) in each(first).iter().enumerate() {
            let pieces: Vec<Tensor> = all
                .iter()
                .map(|state| match state.get(i) {
                    Some((n, t)) if n == name => t.detach(),
                    _ => {
                        bail!(Runtime, "stack_module_state: Expected all models to have the same structure ('{name}')")
                    }
                })
                .collect::<Result<_>>()?;
            let requires_grad = all.iter().all(|s| s[i].1.requires_grad().unwrap_or(false));
            out.insert(name.clone(), crate::stack(&pieces, 0)?.requires_grad_(requires_grad)?);
        }
        Ok(out)
    };
    let params = stacked(&|m: &M| m.named_parameters().into_iter().map(|(n, p)| (n, p.tensor().clone())).collect())?;
    let buffers = stacked(&|m: &M| m.named_buffers().into_iter().map(|(n, b)| (n, b.tensor().clone())).collect())?;
    Ok((params, buffers))
}
