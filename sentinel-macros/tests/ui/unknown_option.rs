use sentinel_core::BlockError;
use sentinel_macros::sentinel;

#[sentinel(resouce = "order.get")]
fn order() -> Result<(), BlockError> {
    Ok(())
}

fn main() {
    let _ = order();
}
