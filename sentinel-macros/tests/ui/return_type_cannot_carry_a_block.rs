use sentinel_macros::sentinel;

#[sentinel(resource = "price")]
fn price(item: u64) -> u64 {
    item * 100
}

fn main() {
    let _ = price(1);
}
