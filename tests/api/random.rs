//! Random tensors: reproducible for a seed, and drawn from the right distributions (checked
//! statistically, with bounds several standard errors wide, on fixed seeds).

use torchfn::prelude::*;
use torchfn::{ErrorKind, Generator, Kwargs};

fn seeded(seed: u64) -> Generator {
    let g = Generator::new();
    g.manual_seed(seed);
    g
}

/// Mean and (population) variance.
fn moments(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    (mean, xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n)
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.to(DType::Float64, false, false).unwrap().to_vec::<f64>().unwrap()
}

#[test]
fn a_seed_gives_the_same_numbers_and_another_seed_others() {
    let a = torchfn::rand([100], seeded(42), None, None).unwrap().to_vec::<f32>().unwrap();
    let b = torchfn::rand([100], seeded(42), None, None).unwrap().to_vec::<f32>().unwrap();
    let c = torchfn::rand([100], seeded(43), None, None).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(a, b);
    assert_ne!(a, c);
    // A generator's stream moves on: two draws differ, and reseeding replays them.
    let g = seeded(7);
    let first = torchfn::randn([10], &g, None, None).unwrap().to_vec::<f32>().unwrap();
    let second = torchfn::randn([10], &g, None, None).unwrap().to_vec::<f32>().unwrap();
    assert_ne!(first, second);
    assert_eq!(g.manual_seed(7).initial_seed(), 7);
    assert_eq!(torchfn::randn([10], &g, None, None).unwrap().to_vec::<f32>().unwrap(), first);
}

#[test]
fn clones_share_one_stream_and_new_generators_start_from_the_default_seed() {
    let g = seeded(1);
    let h = g.clone();
    assert!(g.is(&h));
    let a = torchfn::randint(1000, [8], &g, None, None).unwrap().to_vec::<i64>().unwrap();
    let b = torchfn::randint(1000, [8], &h, None, None).unwrap().to_vec::<i64>().unwrap();
    assert_ne!(a, b, "h continues where g stopped");
    assert_eq!(Generator::new().initial_seed(), torchfn::DEFAULT_SEED);
    let fresh = |_| torchfn::rand([4], Generator::new(), None, None).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(fresh(0), fresh(1));
}

#[test]
fn state_can_be_saved_and_restored() {
    let g = seeded(99);
    let state = g.get_state();
    let a = torchfn::rand([5], &g, DType::Float64, None).unwrap().to_vec::<f64>().unwrap();
    g.set_state(&state).unwrap();
    assert_eq!(torchfn::rand([5], &g, DType::Float64, None).unwrap().to_vec::<f64>().unwrap(), a);
    assert_eq!(g.initial_seed(), 99);
    for bad in [torchfn::zeros([5], None, None).unwrap(), torchfn::zeros([4], DType::Int64, None).unwrap()] {
        let err = g.set_state(&bad).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Runtime);
        assert!(err.to_string().contains("get_state()"), "{err}");
    }
    assert!(g.set_state(&torchfn::zeros([5], DType::Int64, None).unwrap()).is_err(), "the all-zero state is refused");
}

#[test]
fn rand_is_uniform_on_zero_one() {
    let n = 200_000;
    for dtype in [DType::Float32, DType::Float64] {
        let t = torchfn::rand([n], seeded(5), dtype, None).unwrap();
        assert_eq!(t.dtype().unwrap(), dtype);
        let xs = f64s(&t);
        assert!(xs.iter().all(|x| (0.0..1.0).contains(x)));
        let (mean, var) = moments(&xs);
        // Standard error of the mean: sqrt(1/12/n) ~ 0.00065; of the variance ~ 0.00013.
        assert!((mean - 0.5).abs() < 0.004, "{dtype}: mean {mean}");
        assert!((var - 1.0 / 12.0).abs() < 0.001, "{dtype}: variance {var}");
        let (lo, hi) = xs.iter().fold((1.0f64, 0.0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        assert!(lo < 1e-4 && hi > 1.0 - 1e-4, "the whole range is reached: {lo} {hi}");
    }
}

#[test]
fn randn_is_standard_normal() {
    let n = 200_000;
    let xs = f64s(&torchfn::randn([n], seeded(11), None, None).unwrap());
    let (mean, var) = moments(&xs);
    assert!(mean.abs() < 0.012, "mean {mean}"); // standard error 0.0022
    assert!((var - 1.0).abs() < 0.02, "variance {var}"); // standard error 0.0032
    let within = |k: f64| xs.iter().filter(|x| x.abs() < k).count() as f64 / n as f64;
    assert!((within(1.0) - 0.6827).abs() < 0.006);
    assert!((within(2.0) - 0.9545).abs() < 0.004);
    let skew = xs.iter().map(|x| (x - mean).powi(3)).sum::<f64>() / n as f64;
    assert!(skew.abs() < 0.03, "skewness {skew}");
    // An odd count uses half of the last pair.
    assert_eq!(torchfn::randn([3, 3], seeded(1), DType::Float64, None).unwrap().shape().unwrap().as_ref(), [3, 3]);
}

#[test]
fn randint_covers_its_range_evenly() {
    let (n, k) = (100_000usize, 10i64);
    let xs = torchfn::randint_range(-3, k - 3, [n], seeded(3), None, None).unwrap().to_vec::<i64>().unwrap();
    let mut counts = vec![0usize; k as usize];
    for x in xs {
        assert!((-3..k - 3).contains(&x));
        counts[(x + 3) as usize] += 1;
    }
    let expected = n as f64 / k as f64;
    let chi2: f64 = counts.iter().map(|&c| (c as f64 - expected).powi(2) / expected).sum();
    assert!(chi2 < 35.0, "chi-square {chi2} with 9 degrees of freedom ({counts:?})"); // p < 1e-4
}

#[test]
fn randint_takes_the_dtype_and_checks_its_bounds() {
    let g = seeded(8);
    let t = torchfn::randint(2, [1000], &g, DType::Bool, None).unwrap();
    let bools = t.to_vec::<bool>().unwrap();
    assert!(bools.contains(&true) && bools.contains(&false));
    let t = torchfn::randint(5, [100], &g, DType::Float32, None).unwrap();
    assert!(t.to_vec::<f32>().unwrap().iter().all(|x| x.fract() == 0.0 && (0.0..5.0).contains(x)));
    let wide = torchfn::randint_range(i64::MIN, i64::MAX, [1000], &g, None, None).unwrap().to_vec::<i64>().unwrap();
    assert!(wide.iter().any(|&x| x < 0) && wide.iter().any(|&x| x > 0));
    let int32 = torchfn::randint_range(-5, 5, [10], &g, DType::Int32, None).unwrap();
    assert_eq!(int32.dtype().unwrap(), DType::Int32);

    for (result, needle) in [
        (torchfn::randint(3, [2], &g, DType::Bool, None), "out of bounds for dtype torch.bool"),
        (torchfn::randint_range(0, 1 << 40, [2], &g, DType::Int32, None), "out of bounds for dtype torch.int32"),
        (torchfn::randint_range(5, 5, [2], &g, None, None), "expected 'low' to be less than 'high'"),
        (torchfn::randint(0, [2], &g, None, None), "low=0 >= high=0"),
    ] {
        let err = result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Runtime);
        assert!(err.to_string().starts_with("randint(): ") && err.to_string().contains(needle), "{err}");
    }
}

#[test]
fn continuous_distributions_refuse_integer_dtypes() {
    for result in [torchfn::rand([2], None, DType::Int64, None), torchfn::randn([2], None, DType::Bool, None)] {
        let err = result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotImplemented);
        assert!(err.to_string().contains("argument 'dtype' must be a floating point dtype"), "{err}");
    }
    let err = torchfn::rand_like(&torchfn::tensor([1i64, 2]).unwrap(), None).unwrap_err();
    assert!(err.to_string().starts_with("rand_like(): "), "{err}");
    assert!(torchfn::zeros([2], DType::Int64, None).unwrap().uniform_(0.0, 1.0, None).is_err());
}

#[test]
fn by_name_the_arguments_pick_the_randint_overload_and_the_generator() {
    let g = seeded(21);
    let kwargs = Kwargs::from([("generator", Value::Generator(g.clone()))]);
    let size = Value::Tuple(vec![Value::Int(50)]);
    let high_only = torchfn::RANDINT.call(&[Value::Int(3), size.clone()], &kwargs).unwrap();
    assert!(high_only.to::<Tensor>().unwrap().to_vec::<i64>().unwrap().iter().all(|x| (0..3).contains(x)));
    let both = torchfn::RANDINT.call(&[Value::Int(10), Value::Int(13), size], &kwargs).unwrap();
    assert!(both.to::<Tensor>().unwrap().to_vec::<i64>().unwrap().iter().all(|x| (10..13).contains(x)));
    let err = torchfn::RANDINT.call(&[Value::Int(1)], &Kwargs::new()).unwrap_err();
    assert!(err.to_string().contains("invalid combination of arguments"), "{err}");
    assert_eq!(
        torchfn::RAND.signature().to_string(),
        "(size, generator=None, dtype=None, device=None)",
        "the generator is an argument like any other"
    );
    // Random constructors take no tensor: nothing can override them, as in PyTorch.
    let ignored: Vec<_> = torchfn::overrides::get_ignored_functions().iter().map(|f| f.qualified_name()).collect();
    for name in ["torchfn.rand", "torchfn.randn", "torchfn.randint"] {
        assert!(ignored.contains(&name), "{name}");
    }
}

#[test]
fn in_place_sampling_fills_views_and_keeps_the_rest() {
    let g = seeded(4);
    let w = torchfn::zeros([4, 1000], DType::Float64, None).unwrap();
    w.get(1).unwrap().uniform_(-2.0, 2.0, &g).unwrap();
    w.get(2).unwrap().normal_(10.0, 0.5, &g).unwrap();
    let rows: Vec<Vec<f64>> = (0..4).map(|r| w.get(r).unwrap().to_vec::<f64>().unwrap()).collect();
    assert!(rows[0].iter().chain(&rows[3]).all(|&x| x == 0.0));
    assert!(rows[1].iter().all(|x| (-2.0..2.0).contains(x)));
    let (mean, var) = moments(&rows[2]);
    assert!((mean - 10.0).abs() < 0.1 && (var - 0.25).abs() < 0.05, "{mean} {var}");
    let like = torchfn::randn_like(&w, DType::Float32).unwrap();
    assert_eq!((like.shape().unwrap().as_ref().to_vec(), like.dtype().unwrap()), (vec![4, 1000], DType::Float32));
    assert!(w.normal_(0.0, -1.0, None).is_err());
    assert!(w.uniform_(1.0, 0.0, None).is_err());
}
