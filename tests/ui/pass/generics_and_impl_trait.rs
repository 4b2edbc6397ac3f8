include!("../support.rs");

use std::fmt::Debug;

#[velocity_policy::critical(deadline = "1s")]
async fn describe<T>(value: T, label: impl AsRef<str> + Send) -> Result<String, AppError>
where
    T: Debug + Send,
{
    Ok(format!("{}={value:?}", label.as_ref()))
}

#[velocity_policy::resilient(retry = "transient", deadline = "1s")]
#[velocity_policy::idempotent]
async fn first<T: Clone + Send + Sync>(items: Vec<T>, (skip, _unused): (usize, u8)) -> Result<Option<T>, AppError> {
    Ok(items.into_iter().nth(skip))
}

fn main() {
    runtime().block_on(async {
        assert_eq!(describe(3u8, "n").await.unwrap(), "n=3");
        assert_eq!(first(vec![1, 2], (1, 0)).await.unwrap(), Some(2));
    });
}
