//! Prints the plain rendering of every diagnostic in the files given on the command line.
fn main() {
    let mut set = policy_lang::PolicySet::new();
    for path in std::env::args().skip(1) {
        if let Err(error) = set.load_file(std::path::Path::new(&path)) {
            eprintln!("{path}: {error}");
        }
    }
    for diagnostic in set.check().all() {
        println!("{}", set.render(diagnostic));
    }
}
