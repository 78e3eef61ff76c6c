//! [`CommDebugMode`]: counts the collectives DTensors issue, in total, per operator and per
//! module (PyTorch's `torch.distributed.tensor.debug.CommDebugMode`).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use torchfn_nn::nn::{Module, RemovableHandle, register_module_forward_hook, register_module_forward_pre_hook};
use torchfn_runtime::dispatch::Operator;

/// Collective counts, by the functional collective's name.
type Counts = BTreeMap<String, usize>;

#[derive(Default)]
struct Tables {
    total: Counts,
    modules: BTreeMap<String, Counts>,
    operators: BTreeMap<String, Counts>,
}

thread_local! {
    /// The modes counting on this thread.
    static ACTIVE: RefCell<Vec<Rc<RefCell<Tables>>>> = const { RefCell::new(Vec::new()) };
    /// The operator a DTensor is computing, while it computes it.
    static OPERATOR: RefCell<Option<&'static Operator>> = const { RefCell::new(None) };
    /// The modules whose forward is running, outermost first.
    static MODULES: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Counts one collective (its functional name's last part: `all_reduce`) for every active mode.
pub(crate) fn record(collective: &str) {
    ACTIVE.with(|active| {
        let active = active.borrow();
        if active.is_empty() {
            return;
        }
        let name = format!("c10d_functional.{collective}");
        let operator = OPERATOR.with(|o| o.borrow().map(|op| op.to_string()));
        let modules = MODULES.with(|m| m.borrow().clone());
        for tables in active.iter() {
            let mut t = tables.borrow_mut();
            *t.total.entry(name.clone()).or_default() += 1;
            for module in &modules {
                *t.modules.entry(module.clone()).or_default().entry(name.clone()).or_default() += 1;
            }
            let operator = operator.clone().unwrap_or_else(|| "redistribute".into());
            *t.operators.entry(operator).or_default().entry(name.clone()).or_default() += 1;
        }
    });
}

/// Marks `op` as the operator being computed until the guard drops (collectives it needs are
/// counted under its name).
pub(crate) fn computing(op: &'static Operator) -> impl Drop {
    struct Restore(Option<&'static Operator>);
    impl Drop for Restore {
        fn drop(&mut self) {
            OPERATOR.with(|o| *o.borrow_mut() = self.0);
        }
    }
    Restore(OPERATOR.with(|o| o.borrow_mut().replace(op)))
}

/// Counts the collectives that DTensor operations issue on this thread while entered: in
/// total, per aten operator and per module (PyTorch's `CommDebugMode`).
///
/// ```
/// use torchfn::distributed::tensor::CommDebugMode;
///
/// let mode = CommDebugMode::new();
/// {
///     let _counting = mode.enter();
///     // DTensor operations here ...
/// }
/// assert_eq!(mode.get_total_counts(), 0);
/// ```
#[derive(Default)]
pub struct CommDebugMode {
    tables: Rc<RefCell<Tables>>,
}

/// While alive, its [`CommDebugMode`] counts (and tracks the modules whose forward runs).
pub struct CommDebugGuard {
    tables: Rc<RefCell<Tables>>,
    hooks: Vec<RemovableHandle>,
}

impl CommDebugMode {
    /// A mode with nothing counted.
    pub fn new() -> CommDebugMode {
        CommDebugMode::default()
    }

    /// Starts counting until the guard drops (Python's `with comm_mode:`), modules named by
    /// their type (`Linear`); counts from an earlier entry are cleared.
    pub fn enter(&self) -> CommDebugGuard {
        self.enter_with(HashMap::new())
    }

    /// As [`enter`](CommDebugMode::enter), naming `root` `Global` and its submodules by their
    /// path from it (`Global.layers.0.mlp`), as PyTorch's module tracker does.
    pub fn enter_with_module(&self, root: &dyn Module) -> CommDebugGuard {
        let names = root
            .named_modules()
            .into_iter()
            .map(|(name, m)| {
                (address(m), if name.is_empty() { "Global".to_string() } else { format!("Global.{name}") })
            })
            .collect();
        self.enter_with(names)
    }

    fn enter_with(&self, names: HashMap<(usize, &'static str), String>) -> CommDebugGuard {
        *self.tables.borrow_mut() = Tables::default();
        ACTIVE.with(|a| a.borrow_mut().push(self.tables.clone()));
        let names = std::sync::Arc::new(names);
        let pre = {
            let names = names.clone();
            register_module_forward_pre_hook(move |m: &dyn Module, _: &[torchfn_runtime::Tensor]| {
                let name = names.get(&address(m)).cloned().unwrap_or_else(|| m.type_name().to_string());
                MODULES.with(|s| s.borrow_mut().push(name));
                Ok(None)
            })
        };
        let post = register_module_forward_hook(
            |_: &dyn Module, _: &[torchfn_runtime::Tensor], _: &[torchfn_runtime::Tensor]| {
                MODULES.with(|s| s.borrow_mut().pop());
                Ok(None)
            },
        );
        CommDebugGuard { tables: self.tables.clone(), hooks: vec![pre, post] }
    }

    /// How many collectives were issued (`get_total_counts()`).
    pub fn get_total_counts(&self) -> usize {
        self.tables.borrow().total.values().sum()
    }

    /// How many of each collective (`get_comm_counts()`), by PyTorch's functional collective
    /// names: `c10d_functional.all_reduce`, `c10d_functional.all_gather_into_tensor`,
    /// `c10d_functional.reduce_scatter_tensor`, `c10d_functional.all_to_all_single`.
    pub fn get_comm_counts(&self) -> BTreeMap<String, usize> {
        self.tables.borrow().total.clone()
    }

    /// The counts issued inside each module's forward, its submodules' included
    /// (`get_comm_module_counts()`, forward counts).
    pub fn get_comm_module_counts(&self) -> BTreeMap<String, BTreeMap<String, usize>> {
        self.tables.borrow().modules.clone()
    }

    /// The counts issued by each aten operator on DTensors (`redistribute` for explicit
    /// redistributions and layout conversions outside operators).
    pub fn get_operator_counts(&self) -> BTreeMap<String, BTreeMap<String, usize>> {
        self.tables.borrow().operators.clone()
    }

    /// A table of the counts per module, then per operator (`generate_comm_debug_tracing_table`).
    pub fn generate_comm_debug_tracing_table(&self) -> String {
        let t = self.tables.borrow();
        let mut out = String::new();
        let mut section = |title: String, counts: &_| {
            out.push_str(&title);
            for (name, count) in counts {
                out.push_str(&format!("  *{name}: {count}\n"));
            }
        };
        section("Total\n".into(), &t.total);
        for (module, counts) in &t.modules {
            section(format!("{module}\n"), counts);
        }
        for (op, counts) in &t.operators {
            section(format!("**{op}\n"), counts);
        }
        out
    }
}

impl Drop for CommDebugGuard {
    fn drop(&mut self) {
        for hook in &self.hooks {
            hook.remove();
        }
        ACTIVE.with(|a| a.borrow_mut().retain(|t| !Rc::ptr_eq(t, &self.tables)));
        MODULES.with(|s| s.borrow_mut().clear());
    }
}

/// A module's identity: its address and type (a struct and its first field share an address).
fn address(m: &dyn Module) -> (usize, &'static str) {
    ((m as *const dyn Module).cast::<()>() as usize, m.type_name())
}
