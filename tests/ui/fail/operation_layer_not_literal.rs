// The operation is looked up at compile time, so its name must be a string literal.
const NAME: &str = "charge_card";

fn main() {
    let _layer = velocity_policy::operation_layer!(NAME);
}
