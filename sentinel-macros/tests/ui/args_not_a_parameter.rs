use sentinel_core::BlockError;
use sentinel_macros::sentinel;

#[sentinel(resource = "cart", args(user_id))]
fn add_to_cart(user: &str, item: u32) -> Result<(), BlockError> {
    let _ = (user, item);
    Ok(())
}

fn main() {
    let _ = add_to_cart("alice", 1);
}
