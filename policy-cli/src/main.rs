//! The `policy` command: `check`, `explain` and `fmt` for `.policy` files, `gate` for size
//! budgets and quarantined dependencies, `locality` for the derived locality map.

fn main() {
    eprintln!("policy: no commands yet; see the README");
    std::process::exit(2);
}
