/// The traced graph as Rust (written by torchfn::fx).
#[allow(unused_variables, clippy::all)]
pub fn small_forward(root: &dyn torchfn::nn::Module, inputs: &[torchfn::Value]) -> torchfn::Result<torchfn::Value> {
    use torchfn::fx::emitted::{attr, call, call_module, input};
    use torchfn::{Kwargs, Value};
    let v_input = input(inputs, 0)?;
    let v_fc1 = call_module(root, "fc1", &[v_input.clone()])?;
    let v_act = call_module(root, "act", &[v_fc1.clone()])?;
    let v_norm = call_module(root, "norm", &[v_act.clone()])?;
    let v_scaled_tanh = call("fxtest.scaled_tanh", &[v_norm.clone(), Value::Float(0.5)], &Kwargs::new())?;
    let v_fc2 = call_module(root, "fc2", &[v_scaled_tanh.clone()])?;
    let v_ones = call("torchfn.ones", &[Value::Tuple(vec![Value::Int(3)]), Value::None, Value::None], &Kwargs::new())?;
    let v_add = call("Tensor.__add__", &[v_fc2.clone(), v_ones.clone()], &Kwargs::new())?;
    let v_view = call("Tensor.view", &[v_add.clone(), Value::Int(-1)], &Kwargs::new())?;
    Ok(v_view.clone())
}
