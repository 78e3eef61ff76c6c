//! What the ports share: transformers' initialisation of linear and embedding layers, the
//! head split and the eager attention (`eager_attention_forward`), the additive causal mask, the
//! language-model loss, and module enums (a PyTorch attribute that holds one of several module
//! classes).

use torchfn::Device;
use torchfn::nn::{self, Embedding, Layer, Linear};
use torchfn::prelude::*;

/// `nn.Linear(input, output, bias)` initialised as transformers' `_init_weights`: the weight
/// normal(0, `std`), the bias zero.
pub fn normal_linear(input: usize, output: usize, bias: bool, std: f64, g: &Generator) -> Result<Linear> {
    let layer = Linear::new(input, output, bias, g)?;
    nn::init::normal_(&layer.weight, 0.0, std, g)?;
    if let Some(b) = &layer.bias {
        nn::init::zeros_(b)?;
    }
    Ok(layer)
}

/// `nn.Embedding(count, dim)` initialised as transformers' `_init_weights`: normal(0, `std`).
pub fn normal_embedding(count: usize, dim: usize, std: f64, g: &Generator) -> Result<Embedding> {
    let layer = Embedding::new(count, dim, g)?;
    nn::init::normal_(&layer.weight, 0.0, std, g)?;
    Ok(layer)
}

/// The heads `[B, H, T, head_dim]` of `proj` applied to hidden states `[B, T, E]`
/// (`proj(x).view(*input_shape, -1, head_dim).transpose(1, 2)`); an error naming `what` for
/// hidden states of another rank.
pub fn heads(proj: &Linear, hidden_states: &Tensor, head_dim: usize, what: &str) -> Result<Tensor> {
    let shape = hidden_states.shape()?;
    let [b, t, _] = shape[..] else {
        return Err(Error::value_error(format!("{what}: expected hidden states [B, T, E], got {:?}", &shape[..])));
    };
    proj.call(hidden_states)?.view(vec![b as i64, t as i64, -1, head_dim as i64])?.transpose(1, 2)
}

/// transformers' `eager_attention_forward` on heads `[B, H, T, D]`: `softmax(q kᵀ · scaling +
/// mask)` over the keys (in `softmax_dtype`, then back to the queries' dtype, where the model
/// asks for it: LLaMA and ViT do, BERT does not), `dropout` on the weights, times the values.
/// The output merged back to `[B, T, H · D]`, and the weights.
pub fn eager_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    scaling: f64,
    softmax_dtype: Option<DType>,
    dropout: &dyn Fn(&Tensor) -> Result<Tensor>,
) -> Result<(Tensor, Tensor)> {
    let shape = q.shape()?;
    let [b, _, t, _] = shape[..] else {
        return Err(Error::value_error(format!(
            "eager attention: expected queries [B, H, T, D], got {:?}",
            &shape[..]
        )));
    };
    let mut scores = (&q.matmul(&k.transpose(2, 3)?)? * scaling)?;
    if let Some(mask) = mask {
        scores = (&scores + mask)?;
    }
    let mut weights = scores.softmax(-1, softmax_dtype)?;
    if softmax_dtype.is_some() {
        weights = weights.to(q.dtype()?, false, false)?;
    }
    let weights = dropout(&weights)?;
    let out = weights.matmul(v)?.transpose(1, 2)?.contiguous()?.reshape(&[b as i64, t as i64, -1])?;
    Ok((out, weights))
}

/// `0` where a query position may attend (key position `j <= i`), float32's lowest value
/// elsewhere: added to the scores (transformers' eager causal mask), `[T, T]`, made on `device`.
pub fn causal_mask(t: usize, device: Device) -> Result<Tensor> {
    torchfn::full([t, t], f32::MIN, DType::Float32, device)?.triu(1)
}

/// A language model's loss: the mean cross-entropy of `logits` `[.., vocab]` against `targets`
/// of the logits' leading shape, positions labelled -100 left out
/// (`F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1), ignore_index=-100)`).
pub fn lm_loss(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    let (shape, target_shape) = (logits.shape()?, targets.shape()?);
    let Some((&vocab, leading)) = shape.split_last().filter(|_| shape.len() >= 2) else {
        return Err(Error::value_error(format!("loss: expected logits [.., vocab], got {:?}", &shape[..])));
    };
    if leading != &target_shape[..] {
        return Err(Error::value_error(format!(
            "loss: targets must have the logits' shape {leading:?} without the vocabulary, got {:?}",
            &target_shape[..]
        )));
    }
    nn::functional::cross_entropy(
        &logits.reshape(&[-1, vocab as i64])?,
        &targets.reshape(&[-1])?,
        None,
        None,
        -100,
        None,
        "mean",
        0.0,
    )
}

/// Declares an enum of modules that stands for its variant: the variant's module tree, repr,
/// state and forward hooks (how a PyTorch attribute or `ModuleList` holds modules of several
/// classes). `inner()` is the variant's module. A port that declares them includes this file
/// with `#[macro_use]`.
#[allow(unused_macros)] // not each port declares module enums
macro_rules! module_enum {
    ($(#[$doc:meta])* pub enum $name:ident { $($(#[$vdoc:meta])* $variant:ident($ty:ty),)+ }) => {
        $(#[$doc])*
        // A few per model: unboxed variants keep the fields' types plain.
        #[allow(clippy::large_enum_variant)]
        pub enum $name {
            $($(#[$vdoc])* $variant($ty),)+
        }

        impl $name {
            /// The variant's module.
            fn inner(&self) -> &dyn torchfn::nn::Module {
                match self {
                    $($name::$variant(m) => m,)+
                }
            }

            fn inner_mut(&mut self) -> &mut dyn torchfn::nn::Module {
                match self {
                    $($name::$variant(m) => m,)+
                }
            }
        }

        impl torchfn::nn::Module for $name {
            fn visit<'m>(&'m self, visitor: &mut dyn torchfn::nn::Visitor<'m>) {
                self.inner().visit(visitor)
            }
            fn visit_mut(&mut self, visitor: &mut dyn torchfn::nn::VisitorMut) {
                self.inner_mut().visit_mut(visitor)
            }
            fn type_name(&self) -> &'static str {
                self.inner().type_name()
            }
            fn extra_repr(&self) -> String {
                self.inner().extra_repr()
            }
            fn as_dyn(&self) -> &dyn torchfn::nn::Module {
                self.inner().as_dyn()
            }
            fn as_layer(&self) -> Option<&dyn torchfn::nn::Layer> {
                self.inner().as_layer()
            }
            fn rust_path(&self) -> &'static str {
                self.inner().rust_path()
            }
        }
    };
}
