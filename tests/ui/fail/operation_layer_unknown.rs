// An operation the crate's `.policy` files do not declare: the error names it, the files
// searched and the closest declared name.
fn main() {
    let _layer = velocity_policy::operation_layer!("charge_crd");
}
