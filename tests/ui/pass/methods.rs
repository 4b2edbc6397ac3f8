include!("../support.rs");

struct Index {
    docs: Vec<String>,
}

impl Index {
    #[velocity_policy::critical(deadline = "1s")]
    async fn get(&self, at: usize) -> Result<Option<String>, AppError> {
        Ok(self.docs.get(at).cloned())
    }

    #[velocity_policy::critical(deadline = "1s")]
    async fn add(&mut self, doc: String) -> Result<usize, AppError> {
        self.docs.push(doc);
        Ok(self.docs.len())
    }

    #[velocity_policy::resilient(retry = "transient", deadline = "1s")]
    #[velocity_policy::idempotent]
    async fn len(&self) -> Result<usize, AppError> {
        Ok(self.docs.len())
    }
}

trait Store {
    async fn put(&self, key: u64) -> Result<u64, AppError>;
}

impl Store for Index {
    #[velocity_policy::critical(deadline = "1s")]
    async fn put(&self, key: u64) -> Result<u64, AppError> {
        Ok(key)
    }
}

fn main() {
    runtime().block_on(async {
        let mut index = Index { docs: Vec::new() };
        assert_eq!(index.add("a".to_owned()).await.unwrap(), 1);
        assert_eq!(index.get(0).await.unwrap().as_deref(), Some("a"));
        assert_eq!(index.len().await.unwrap(), 1);
        assert_eq!(index.put(9).await.unwrap(), 9);
    });
}
