use sentinel_core::{BlockError, Sentinel};
use sentinel_macros::sentinel;

struct Shop {
    engine: Sentinel,
}

impl Shop {
    #[sentinel(resource = "shop.buy", sentinel = self.engine)]
    fn buy(&self) -> Result<(), BlockError> {
        Ok(())
    }
}

fn main() {
    let shop = Shop { engine: Sentinel::new() };
    let _ = shop.buy();
}
