//! Bad input and faults: mismatched collectives, a receive of the wrong size, a group used
//! after destroy, a rank that does not take part: each a clear error on every rank that is
//! left, never a hang or a panic.

use std::time::{Duration, Instant};

use torchfn::Device;
use torchfn::distributed::{self as dist, InitOptions, ReduceOp};
use torchfn::prelude::*;

use crate::mpi_test;

#[test]
fn every_call_before_init_process_group_says_so() {
    // In the test runner: no group exists (nor does MPI start).
    let t = torchfn::zeros([2], DType::Float32, None).unwrap();
    let err = dist::all_reduce(&t, ReduceOp::Sum, None, false).unwrap_err();
    assert!(err.to_string().contains("Default process group has not been initialized"), "{err}");
    assert!(dist::get_rank(None).is_err() && !dist::is_initialized());
    let err = dist::init_process_group("nccl").unwrap_err();
    assert!(err.to_string().contains("backend 'nccl' is not available"), "{err}");
}

mpi_test! {
    fn ranks_that_disagree_all_get_the_same_error_and_the_group_goes_on() {
        let rank = dist::get_rank(None)?;
        // Different sizes.
        let t = torchfn::ones([4 + 2 * rank], DType::Float32, None)?;
        let err = dist::all_reduce(&t, ReduceOp::Sum, None, false).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("the ranks disagree: rank 0 called all_reduce of 4 torch.float32 elements"), "{message}");
        assert!(message.contains("rank 1 called all_reduce of 6 torch.float32 elements"), "{message}");
        // Different dtypes, and different collectives.
        let t = torchfn::ones([3], if rank == 0 { DType::Float32 } else { DType::Float64 }, None)?;
        assert!(dist::all_reduce(&t, ReduceOp::Sum, None, false).unwrap_err().to_string().contains("float64"));
        let t = torchfn::ones([3], DType::Float32, None)?;
        let err = if rank == 0 { dist::broadcast(&t, 0, None, false) } else { dist::all_reduce(&t, ReduceOp::Sum, None, false) }
            .unwrap_err();
        assert!(err.to_string().contains("rank 0 called broadcast") && err.to_string().contains("rank 1 called all_reduce"), "{err}");
        // Nothing moved, so the group still works.
        dist::all_reduce(&t, ReduceOp::Sum, None, false)?;
        assert_eq!(t.to_vec::<f32>()?, [2.0; 3]);
        // Caught on each rank before anything is sent: a non-contiguous tensor, a meta one.
        let wide = torchfn::ones([3, 2], DType::Float32, None)?.t()?;
        let err = dist::all_reduce(&wide, ReduceOp::Sum, None, false).unwrap_err();
        assert!(err.to_string().contains("Tensors must be contiguous"), "{err}");
        let meta = torchfn::ones([3], DType::Float32, Device::META)?;
        assert!(dist::all_reduce(&meta, ReduceOp::Sum, None, false).unwrap_err().to_string().contains("meta tensor"));
        Ok(())
    }
}

mpi_test! {
    fn a_receive_of_the_wrong_size_is_the_receivers_error() {
        let rank = dist::get_rank(None)?;
        if rank == 0 {
            dist::send(&torchfn::ones([3], DType::Float32, None)?, 1, None, 0)?;
        } else {
            let err = dist::recv(&torchfn::zeros([5], DType::Float32, None)?, Some(0), None, 0).unwrap_err();
            assert!(err.to_string().contains("the message has 3 elements, but the tensor received into holds 5"), "{err}");
        }
        // The pair still works.
        dist::barrier(None, false)?;
        Ok(())
    }
}

mpi_test! {
    fn a_destroyed_group_refuses_work_and_a_new_default_group_can_start() {
        let group = dist::default_group()?;
        let sub = dist::new_group(None)?;
        dist::destroy_process_group(None)?;
        let t = torchfn::ones([2], DType::Float32, None)?;
        let err = dist::all_reduce(&t, ReduceOp::Sum, Some(&group), false).unwrap_err();
        assert!(err.to_string().contains("was destroyed"), "{err}");
        assert!(dist::all_reduce(&t, ReduceOp::Sum, Some(&sub), false).unwrap_err().to_string().contains("was destroyed"));
        assert!(dist::all_reduce(&t, ReduceOp::Sum, None, false).unwrap_err().to_string().contains("not been initialized"));
        dist::init_process_group("mpi")?;
        dist::all_reduce(&t, ReduceOp::Sum, None, false)?;
        assert_eq!(t.to_vec::<f32>()?, [2.0; 2]);
        let err = dist::init_process_group("mpi").unwrap_err();
        assert!(err.to_string().contains("twice"), "{err}");
        Ok(())
    }
}

mpi_test! {
    fn a_rank_that_does_not_take_part_is_a_timeout_error_not_a_hang() {
        let rank = dist::get_rank(None)?;
        dist::destroy_process_group(None)?;
        dist::init_process_group_with(InitOptions::new("mpi").timeout(Duration::from_secs(2)))?;
        let t = torchfn::ones([4], DType::Float32, None)?;
        if rank == 0 {
            let started = Instant::now();
            let err = dist::all_reduce(&t, ReduceOp::Sum, None, false).unwrap_err();
            let waited = started.elapsed();
            assert!(err.to_string().contains("did not finish within 2s"), "{err}");
            assert!(waited >= Duration::from_secs(2) && waited < Duration::from_secs(4), "{waited:?}");
            let err = dist::barrier(None, false).unwrap_err();
            assert!(err.to_string().contains("unusable"), "{err}");
        } else {
            // Rank 1 comes late: its all-reduce meets the one rank 0 gave up on, which MPI
            // finishes, so both processes exit cleanly.
            std::thread::sleep(Duration::from_secs(3));
            dist::all_reduce(&t, ReduceOp::Sum, None, false)?;
        }
        Ok(())
    }
}
