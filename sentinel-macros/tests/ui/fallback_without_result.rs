use sentinel_core::BlockError;
use sentinel_macros::sentinel;

#[sentinel(resource = "price", block_handler = busy, fallback = cheap)]
fn price(item: u64) -> u64 {
    item * 100
}

fn busy(_item: u64, _blocked: BlockError) -> u64 {
    0
}

fn cheap(_error: String) -> u64 {
    1
}

fn main() {
    let _ = price(1);
}
