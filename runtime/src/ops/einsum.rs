//! `torch.einsum`: Einstein summation, as sums, permutations and batched matrix products of
//! the operands taken left to right, so its gradients and the other transforms are theirs.

use std::collections::BTreeSet;

use crate::error::{Result, bail};
use crate::tensor::Tensor;
use crate::testing::{f32s, sample};
use crate::torch_function;
use crate::value::Value;

/// A subscript: a letter (0-51) or a dimension of the ellipsis (from 100, aligned to the right
/// across operands, as broadcasting aligns them).
type Label = u32;

const ELLIPSIS: Label = 100;

fn letter(c: char) -> Option<Label> {
    match c {
        'a'..='z' => Some(c as u32 - 'a' as u32),
        'A'..='Z' => Some(26 + c as u32 - 'A' as u32),
        _ => None,
    }
}

/// The labels of one term (`ij`, `b...j`) for an operand of `ndim` dimensions, whose
/// ellipsis spans `ellipsis` of the `span` ellipsis dimensions the equation has.
fn term_labels(term: &str, ndim: Option<usize>, span: usize) -> Result<Vec<Label>> {
    let (before, after) = match term.split_once("...") {
        Some((b, a)) => (b, Some(a)),
        None => (term, None),
    };
    let invalid = |c: char| {
        crate::Error::runtime_error(format!(
            "einsum(): invalid subscript {c:?} in the equation: subscripts are [a-zA-Z]"
        ))
    };
    let parse =
        |part: &str| -> Result<Vec<Label>> { part.chars().map(|c| letter(c).ok_or_else(|| invalid(c))).collect() };
    let mut labels = parse(before)?;
    if let Some(after) = after {
        if after.contains("...") {
            bail!(Runtime, "einsum(): found more than one ellipsis (\"...\") in a subscript");
        }
        let tail = parse(after)?;
        let covered = match ndim {
            Some(n) => n.checked_sub(labels.len() + tail.len()).ok_or_else(|| {
                crate::Error::runtime_error(format!(
                    "einsum(): the number of subscripts in the equation ({}) is more than the number of dimensions ({n}) \
                     for an operand",
                    labels.len() + tail.len()
                ))
            })?,
            None => span,
        };
        labels.extend((span - covered..span).map(|j| ELLIPSIS + j as Label));
        labels.extend(tail);
    }
    Ok(labels)
}

/// Sums `t` (labelled `labels`) over the labels `keep` does not want.
fn sum_unwanted(t: Tensor, labels: Vec<Label>, keep: impl Fn(Label) -> bool) -> Result<(Tensor, Vec<Label>)> {
    let gone: Vec<i64> = (0..labels.len()).filter(|&d| !keep(labels[d])).map(|d| d as i64).collect();
    if gone.is_empty() {
        return Ok((t, labels));
    }
    let kept = labels.into_iter().filter(|&l| keep(l)).collect();
    Ok((t.sum_dim(gone, false)?, kept))
}

/// `t` permuted so its labels are `order`.
fn arranged(t: &Tensor, labels: &[Label], order: &[Label]) -> Result<Tensor> {
    let permutation: Vec<i64> =
        order.iter().map(|l| labels.iter().position(|x| x == l).expect("a label of t") as i64).collect();
    t.permute(permutation)
}

/// Einstein summation (`torch.einsum`): `equation` names each operand's dimensions with
/// letters (`"ij,jk->ik"`), `...` for the dimensions an ellipsis spans (broadcast across
/// operands); letters in several operands multiply, letters missing from the output are summed.
/// Without `->`, the output is the ellipsis then the letters that appear once, in alphabetical
/// order. A letter repeated within one operand (a diagonal) is not supported yet.
///
/// ```
/// let a = torchfn::tensor([[1.0f32, 2.0], [3.0, 4.0]])?;
/// let b = torchfn::tensor([[5.0f32, 6.0], [7.0, 8.0]])?;
/// assert_eq!(torchfn::einsum("ij,jk->ik", &[a.clone(), b.clone()])?.to_vec::<f32>()?, [19.0, 22.0, 43.0, 50.0]);
/// assert_eq!(torchfn::einsum("ij->j", &[a.clone()])?.to_vec::<f32>()?, [4.0, 6.0]);
/// assert_eq!(torchfn::einsum("ij,ij", &[a, b])?.to_vec::<f32>()?, [70.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn einsum(equation: &str, operands: &[Tensor]) -> Result<Tensor> {
    let equation: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match equation.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (equation.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != operands.len() {
        bail!(
            Value,
            "einsum(): the equation has {} operand subscripts but {} operands were given",
            terms.len(),
            operands.len()
        );
    }
    if operands.is_empty() {
        bail!(Value, "einsum(): must provide at least one operand");
    }
    // How many dimensions the ellipsis spans: the most any operand gives it.
    let mut span = 0;
    for (term, t) in terms.iter().zip(operands) {
        if term.contains("...") {
            let letters = term.chars().filter(|c| *c != '.').count();
            span = span.max(t.shape()?.len().saturating_sub(letters));
        }
    }
    let mut labelled = Vec::with_capacity(operands.len());
    let mut sizes = std::collections::BTreeMap::<Label, usize>::new();
    for (k, (term, t)) in terms.iter().zip(operands).enumerate() {
        let shape = t.shape()?;
        let labels = term_labels(term, Some(shape.len()), span)?;
        if labels.len() != shape.len() {
            bail!(
                Runtime,
                "einsum(): the number of subscripts in the equation ({}) does not match the number of dimensions ({}) \
                 for operand {k}{}",
                labels.len(),
                shape.len(),
                if term.contains("...") { "" } else { " and no ellipsis was given" }
            );
        }
        if labels.iter().collect::<BTreeSet<_>>().len() != labels.len() {
            bail!(NotImplemented, "einsum(): a subscript repeated within operand {k} (a diagonal) is not supported");
        }
        for (&l, &n) in labels.iter().zip(shape.iter()) {
            let size = sizes.entry(l).or_insert(n);
            if *size != n && *size != 1 && n != 1 {
                bail!(
                    Runtime,
                    "einsum(): operands do not broadcast with remapped shapes (original->remapped): a subscript has \
                     sizes {size} and {n}"
                );
            }
            *size = (*size).max(n);
        }
        labelled.push((t.clone(), labels));
    }
    let output: Vec<Label> = match rhs {
        Some(rhs) => {
            let labels = term_labels(rhs, None, span)?;
            if let Some(l) = labels.iter().find(|l| !sizes.contains_key(l)) {
                bail!(Runtime, "einsum(): output subscript {l} does not appear in the equation for any input operand");
            }
            if labels.iter().collect::<BTreeSet<_>>().len() != labels.len() {
                bail!(Runtime, "einsum(): output subscript appears more than once in the output");
            }
            labels
        }
        None => {
            let mut count = std::collections::BTreeMap::<Label, usize>::new();
            for (_, labels) in &labelled {
                for &l in labels {
                    *count.entry(l).or_default() += 1;
                }
            }
            let ellipsis = (0..span).map(|j| ELLIPSIS + j as Label);
            ellipsis.chain(count.into_iter().filter(|&(l, n)| n == 1 && l < ELLIPSIS).map(|(l, _)| l)).collect()
        }
    };
    // Left to right: each operand joins the running product.
    let mut rest = labelled.into_iter();
    let (first, first_labels) = rest.next().expect("at least one operand");
    let remaining: Vec<(Tensor, Vec<Label>)> = rest.collect();
    let later = |k: usize, l: Label| output.contains(&l) || remaining[k..].iter().any(|(_, ls)| ls.contains(&l));
    let (mut acc, mut acc_labels) = sum_unwanted(first, first_labels, |l| later(0, l))?;
    for (k, (b, b_labels)) in remaining.iter().enumerate() {
        let needed = |l: Label| later(k + 1, l);
        let (a, la) = sum_unwanted(acc, acc_labels, |l| b_labels.contains(&l) || needed(l))?;
        let (b, lb) = sum_unwanted(b.clone(), b_labels.clone(), |l| la.contains(&l) || needed(l))?;
        let batch: Vec<Label> = la.iter().copied().filter(|l| lb.contains(l) && needed(*l)).collect();
        let contracted: Vec<Label> = la.iter().copied().filter(|l| lb.contains(l) && !needed(*l)).collect();
        let a_only: Vec<Label> = la.iter().copied().filter(|l| !lb.contains(l)).collect();
        let b_only: Vec<Label> = lb.iter().copied().filter(|l| !la.contains(l)).collect();
        let size = |ls: &[Label]| -> Vec<i64> { ls.iter().map(|l| sizes[l] as i64).collect() };
        let product = |ls: &[Label]| -> i64 { size(ls).iter().product() };
        let a_order: Vec<Label> = batch.iter().chain(&a_only).chain(&contracted).copied().collect();
        let b_order: Vec<Label> = batch.iter().chain(&contracted).chain(&b_only).copied().collect();
        // Size-one dimensions broadcast to the other operand's size.
        let a = arranged(&a, &la, &a_order)?.expand(size(&a_order))?;
        let b = arranged(&b, &lb, &b_order)?.expand(size(&b_order))?;
        let (nb, na, nk, nn) = (product(&batch), product(&a_only), product(&contracted), product(&b_only));
        let joined = a.reshape(&[nb, na, nk])?.bmm(&b.reshape(&[nb, nk, nn])?)?;
        let shape: Vec<i64> = size(&batch).into_iter().chain(size(&a_only)).chain(size(&b_only)).collect();
        acc = joined.reshape(&shape)?;
        acc_labels = batch.into_iter().chain(a_only).chain(b_only).collect();
    }
    let (acc, acc_labels) = sum_unwanted(acc, acc_labels, |l| output.contains(&l))?;
    let result = arranged(&acc, &acc_labels, &output)?;
    // An output subscript of size one in every operand it was broadcast from keeps its size.
    result.expand(output.iter().map(|l| sizes[l] as i64).collect::<Vec<_>>())
}

crate::samples! {
    EINSUM => [
        sample([Value::from("ij,jk->ik"), Value::List(vec![f32s(&[2, 3]), f32s(&[3, 4])])]),
        sample([Value::from("bij,bjk->bik"), Value::List(vec![f32s(&[2, 2, 3]), f32s(&[2, 3, 2])])]),
        sample([Value::from("i,j"), Value::List(vec![f32s(&[3]), f32s(&[2])])]),
        sample([Value::from("...ij->...ji"), Value::List(vec![f32s(&[2, 2, 3])])]),
        sample([Value::from("ij,jk,kl->il"), Value::List(vec![f32s(&[2, 3]), f32s(&[3, 2]), f32s(&[2, 2])])]),
    ],
}
