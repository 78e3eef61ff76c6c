//! Every collective against the same result computed locally, for each dtype and reduce op,
//! with uneven sizes where PyTorch allows them.

use torchfn::Device;
use torchfn::distributed::{self as dist, ReduceOp};
use torchfn::prelude::*;

use crate::mpi_test;

const DTYPES: [DType; 5] = [DType::Float32, DType::Float64, DType::Int64, DType::Int32, DType::Bool];
const OPS: [ReduceOp; 5] = [ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max];

/// Rank `r`'s `n` values of `dtype`: different on each rank, negative and positive.
pub(crate) fn values_of(dtype: DType, r: usize, n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| match dtype {
            DType::Bool => (i + r).is_multiple_of(3) as u8 as f64,
            d if d.is_floating_point() => (i as f64 - 2.5) * (r as f64 + 1.0) * 0.75,
            _ => (i as f64 - 3.0) * (r as f64 + 2.0),
        })
        .collect()
}

/// A tensor of `dtype` holding `values` (exactly representable in it).
pub(crate) fn tensor_of(values: &[f64], dtype: DType) -> Result<Tensor> {
    Tensor::from_vec(values.to_vec(), [values.len()])?.to(dtype, false, false)
}

/// A tensor's values as float64.
pub(crate) fn read(t: &Tensor) -> Result<Vec<f64>> {
    t.to_device(Device::CPU, Some(DType::Float64), false, false)?.contiguous()?.to_vec::<f64>()
}

/// What `op` makes of the ranks' values, in float64 (for bool: any or all).
fn combine(op: ReduceOp, dtype: DType, ranks: &[Vec<f64>]) -> Vec<f64> {
    (0..ranks[0].len())
        .map(|i| {
            let column = ranks.iter().map(|r| r[i]);
            match (op, dtype) {
                (ReduceOp::Sum | ReduceOp::Max, DType::Bool) => column.fold(0.0, f64::max),
                (ReduceOp::Product | ReduceOp::Min, DType::Bool) => column.fold(1.0, f64::min),
                (ReduceOp::Sum, _) => column.sum(),
                (ReduceOp::Avg, _) => column.sum::<f64>() / ranks.len() as f64,
                (ReduceOp::Product, _) => column.product(),
                (ReduceOp::Min, _) => column.fold(f64::INFINITY, f64::min),
                (ReduceOp::Max, _) => column.fold(f64::NEG_INFINITY, f64::max),
            }
        })
        .collect()
}

fn close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= 1e-6 * w.abs().max(1.0), "{what}: got {got:?}, want {want:?}");
    }
}

mpi_test! {
    fn all_reduce_gives_every_rank_the_reduction_for_each_dtype_and_op() {
        let (rank, world) = (dist::get_rank(None)?, dist::get_world_size(None)?);
        assert_eq!(world, 2);
        for dtype in DTYPES {
            for op in OPS {
                let t = tensor_of(&values_of(dtype, rank, 7), dtype)?;
                if op == ReduceOp::Avg && !dtype.is_floating_point() {
                    let err = dist::all_reduce(&t, op, None, false).unwrap_err();
                    assert!(err.to_string().contains("AVG needs a floating-point tensor"), "{err}");
                    continue;
                }
                dist::all_reduce(&t, op, None, false)?;
                let ranks: Vec<Vec<f64>> = (0..world).map(|r| values_of(dtype, r, 7)).collect();
                close(&read(&t)?, &combine(op, dtype, &ranks), &format!("all_reduce {op} {dtype}"));
                assert_eq!(t.dtype()?, dtype);
            }
        }
        // An empty tensor and a 0-dimensional one.
        let empty = torchfn::zeros([0], DType::Float32, None)?;
        dist::all_reduce(&empty, ReduceOp::Sum, None, false)?;
        let scalar = Tensor::scalar(rank as f64 + 1.0);
        dist::all_reduce(&scalar, ReduceOp::Max, None, false)?;
        assert_eq!(scalar.item()?.to_f64(), 2.0);
        // A view into the middle of a tensor: only its elements change.
        let base = Tensor::from_vec(vec![1.0f32; 6], [6])?;
        dist::all_reduce(&base.narrow(0, 2, 3)?, ReduceOp::Sum, None, false)?;
        assert_eq!(base.to_vec::<f32>()?, [1.0, 1.0, 2.0, 2.0, 2.0, 1.0]);
        Ok(())
    }
}

mpi_test! {
    fn broadcast_and_reduce_use_their_root_and_barrier_waits() {
        let rank = dist::get_rank(None)?;
        for dtype in DTYPES {
            let t = tensor_of(&values_of(dtype, rank, 5), dtype)?;
            dist::broadcast(&t, 1, None, false)?;
            close(&read(&t)?, &values_of(dtype, 1, 5), "broadcast");
        }
        for dtype in DTYPES {
            for op in OPS.into_iter().filter(|&op| op != ReduceOp::Avg || dtype.is_floating_point()) {
                let mine = values_of(dtype, rank, 5);
                let t = tensor_of(&mine, dtype)?;
                dist::reduce(&t, 1, op, None, false)?;
                let want = if rank == 1 { combine(op, dtype, &[values_of(dtype, 0, 5), values_of(dtype, 1, 5)]) } else { mine };
                close(&read(&t)?, &want, &format!("reduce {op} {dtype} on rank {rank}"));
            }
        }
        dist::barrier(None, false)?;
        let err = dist::broadcast(&Tensor::scalar(1.0), 2, None, false).unwrap_err();
        assert!(err.to_string().contains("rank 2 is not part of"), "{err}");
        Ok(())
    }
}

mpi_test! {
    fn all_gather_takes_uneven_sizes_and_all_gather_into_tensor_stacks() {
        let rank = dist::get_rank(None)?;
        for dtype in DTYPES {
            // Rank r sends r + 2 values: uneven, as PyTorch's all_gather allows.
            let input = tensor_of(&values_of(dtype, rank, rank + 2), dtype)?;
            let outputs = [torchfn::zeros([2], dtype, None)?, torchfn::zeros([3], dtype, None)?];
            dist::all_gather(&outputs, &input, None, false)?;
            for (r, out) in outputs.iter().enumerate() {
                close(&read(out)?, &values_of(dtype, r, r + 2), "all_gather");
            }
            let input = tensor_of(&values_of(dtype, rank, 6), dtype)?.reshape(&[2, 3])?;
            let output = torchfn::zeros([4, 3], dtype, None)?;
            dist::all_gather_into_tensor(&output, &input, None, false)?;
            let want: Vec<f64> = values_of(dtype, 0, 6).into_iter().chain(values_of(dtype, 1, 6)).collect();
            close(&read(&output)?, &want, "all_gather_into_tensor");
        }
        // Outputs that are views of one tensor.
        let all = torchfn::zeros([4], DType::Int64, None)?;
        let parts = [all.narrow(0, 0, 2)?, all.narrow(0, 2, 2)?];
        dist::all_gather(&parts, &Tensor::from_vec(vec![rank as i64; 2], [2])?, None, false)?;
        assert_eq!(all.to_vec::<i64>()?, [0, 0, 1, 1]);
        let err = dist::all_gather(&parts[..1], &parts[0], None, false).unwrap_err();
        assert!(err.to_string().contains("one output per rank"), "{err}");
        Ok(())
    }
}

mpi_test! {
    fn reduce_scatter_and_all_to_all_move_the_right_blocks() {
        let rank = dist::get_rank(None)?;
        for dtype in DTYPES {
            for op in OPS.into_iter().filter(|&op| op != ReduceOp::Avg || dtype.is_floating_point()) {
                let input = tensor_of(&values_of(dtype, rank, 8), dtype)?;
                let output = torchfn::zeros([4], dtype, None)?;
                dist::reduce_scatter_tensor(&output, &input, op, None, false)?;
                let whole = combine(op, dtype, &[values_of(dtype, 0, 8), values_of(dtype, 1, 8)]);
                close(&read(&output)?, &whole[4 * rank..4 * rank + 4], &format!("reduce_scatter {op} {dtype}"));
            }
        }
        // Even splits: rows [r*10 + i] for i in 0..4, two rows to each rank.
        let rows = |r: usize, n: usize| Tensor::from_vec((0..n).map(|i| (r * 10 + i) as f32).collect(), [n, 1]);
        let output = torchfn::zeros([4, 1], DType::Float32, None)?;
        dist::all_to_all_single(&output, &rows(rank, 4)?, None, None, None, false)?;
        let want: Vec<f32> = (0..2).flat_map(|r| (0..2).map(move |i| (r * 10 + 2 * rank + i) as f32)).collect();
        assert_eq!(output.to_vec::<f32>()?, want);
        // Uneven: rank 0 sends 1 row to itself and 3 to rank 1; rank 1 sends 2 and 0.
        let (input_splits, output_splits): ([usize; 2], [usize; 2]) = if rank == 0 { ([1, 3], [1, 2]) } else { ([2, 0], [3, 0]) };
        let input = rows(rank, input_splits.iter().sum())?;
        let output = torchfn::zeros([output_splits.iter().sum::<usize>(), 1], DType::Float32, None)?;
        dist::all_to_all_single(&output, &input, Some(&output_splits), Some(&input_splits), None, false)?;
        let want: Vec<f32> = if rank == 0 { vec![0.0, 10.0, 11.0] } else { vec![1.0, 2.0, 3.0] };
        assert_eq!(output.to_vec::<f32>()?, want);
        Ok(())
    }
}

mpi_test! {
    fn async_operations_overlap_and_finish_in_order() {
        let rank = dist::get_rank(None)?;
        let tensors: Vec<Tensor> = (0..8).map(|i| torchfn::full([100_000], (rank * 8 + i) as f64, DType::Float32, None)).collect::<Result<_>>()?;
        let works: Vec<dist::Work> = tensors.iter().map(|t| dist::all_reduce(t, ReduceOp::Sum, None, true)).collect::<Result<_>>()?;
        for (i, (t, w)) in tensors.iter().zip(&works).enumerate() {
            w.wait()?;
            assert!(w.is_completed() && w.is_success() && w.exception().is_none());
            // Reading waits on the operation's lock, so this is the reduced value.
            assert_eq!(t.select(0, 0)?.item()?.to_f64(), (i + 8 + i) as f64);
        }
        // On the GPU, through one host copy each way.
        match Device::wgpu() {
            Ok(gpu) => {
                let t = torchfn::full([5], rank as f64 + 1.0, DType::Float32, None)?.to_device(gpu, None, false, false)?;
                dist::all_reduce(&t, ReduceOp::Sum, None, true)?.wait()?;
                assert_eq!((t.device()?, t.cpu()?.to_vec::<f32>()?), (gpu, vec![3.0; 5]));
            }
            Err(e) if std::env::var_os("TORCHFN_REQUIRE_GPU").is_some() => panic!("TORCHFN_REQUIRE_GPU is set: {e}"),
            Err(_) => {}
        }
        Ok(())
    }
}

mpi_test! {
    fn sends_and_receives_pair_up_without_deadlock() {
        let (rank, peer) = (dist::get_rank(None)?, 1 - dist::get_rank(None)?);
        // Both send first, a message far above MPI's eager limit: the sends must not block
        // the receives behind them.
        let out = torchfn::full([1 << 20], rank as f64, DType::Float32, None)?;
        let back = torchfn::zeros([1 << 20], DType::Float32, None)?;
        let sent = dist::isend(&out, peer, None, 7)?;
        let got = dist::irecv(&back, Some(peer), None, 7)?;
        sent.wait()?;
        assert_eq!(got.source_rank()?, peer);
        assert_eq!(back.select(0, 12345)?.item()?.to_f64(), peer as f64);
        // Tags keep messages apart; a receive from any rank says where its message came from.
        if rank == 0 {
            dist::send(&Tensor::from_vec(vec![1i64, 2], [2])?, 1, None, 3)?;
            dist::send(&Tensor::from_vec(vec![7i64], [1])?, 1, None, 4)?;
        } else {
            let four = torchfn::zeros([1], DType::Int64, None)?;
            let three = torchfn::zeros([2], DType::Int64, None)?;
            assert_eq!(dist::recv(&four, None, None, 4)?, 0);
            assert_eq!(dist::recv(&three, Some(0), None, 3)?, 0);
            assert_eq!((four.to_vec::<i64>()?, three.to_vec::<i64>()?), (vec![7], vec![1, 2]));
        }
        let err = dist::send(&out, rank, None, 0).unwrap_err();
        assert!(err.to_string().contains("should not be the same as the rank of the current process"), "{err}");
        Ok(())
    }
}

mpi_test! {
    fn subgroups_reduce_among_their_members_only() {
        let rank = dist::get_rank(None)?;
        let solo = dist::new_group(Some(&[1]))?;
        let pair = dist::new_group(None)?;
        assert_eq!((solo.size(), solo.rank(), pair.rank()), (1, (rank == 1).then_some(0), Some(rank)));
        let t = torchfn::full([3], rank as f64 + 1.0, DType::Float64, None)?;
        // On rank 0, not a member, this does nothing.
        dist::all_reduce(&t, ReduceOp::Sum, Some(&solo), false)?;
        assert_eq!(t.to_vec::<f64>()?, vec![rank as f64 + 1.0; 3]);
        dist::all_reduce(&t, ReduceOp::Sum, Some(&pair), false)?;
        assert_eq!(t.to_vec::<f64>()?, vec![3.0; 3]);
        dist::destroy_process_group(Some(&solo))?;
        assert!(dist::get_rank(Some(&pair)).is_ok());
        Ok(())
    }
}
