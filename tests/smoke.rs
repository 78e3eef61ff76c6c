use torchfn::prelude::*;

#[derive(TensorSubclass)]
struct Sub(i64);
impl TorchFunction for Sub {}

#[test]
fn smoke() -> Result<()> {
    let a = torchfn::tensor([1.0f32, 2.0])?;
    let b = torchfn::add(&a, &a, 1)?;
    println!("{b}");
    let s = a.as_subclass(Sub(7))?;
    let r = (&s + &a)?;
    println!("{r} {}", r.attrs::<Sub>().unwrap().0);
    let r2 = (&a + &s)?;
    println!("{r2}");
    let g = r2.get(0)?;
    println!("{g} {:?}", g.attrs::<Sub>().map(|s| s.0));
    println!("{}", s.sum()?);
    println!("{:?}", torchfn::ADD);
    let m = torchfn::MM.call(&[Value::Int(1)], &Kwargs::new());
    println!("{m:?}");
    Ok(())
}
