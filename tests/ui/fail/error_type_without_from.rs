#[derive(Debug)]
struct ConfigError;

#[velocity_policy::critical(deadline = "1s")]
async fn read_config(path: String) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|_| ConfigError)
}

fn main() {}
